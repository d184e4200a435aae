"""Run the small-M kernel (gemm.skinny) in numba's CUDA simulator; print one JSON line.

Used by tests/test_skinny.py in a child process (the simulator must be chosen before numba is
imported): ``NUMBA_ENABLE_CUDASIM=1 python tests/sim_skinny_cases.py WHICH``. Each case:
fresh random operands, the output poisoned with NaN (or random for beta), compared with numpy
float64 on the same rounded inputs; the printed number is the error over the tolerance of
sim_tensorcore_cases (<= 1 passes).
"""

import json
import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run me in the simulator"

from numba import cuda  # noqa: E402

from gemm.skinny import SkinnyConfig, launch_matmul  # noqa: E402
from sim_tensorcore_cases import OUT_ROUNDING, bf16_bits, from_bf16  # noqa: E402
from simcase import outcomes  # noqa: E402


def to_operand(x, dtype):
    """float64 -> (array handed to the kernel, its exact values)."""
    if dtype == "bfloat16":
        bits = bf16_bits(x)
        return bits, from_bf16(bits)
    h = x.astype(np.float16 if dtype == "float16" else np.float32)
    return h, h.astype(np.float64)


def poisoned(c0, out_dtype, beta):
    """(out's initial array, its values): c0 rounded to out_dtype when beta, else NaN."""
    if out_dtype == "bfloat16":
        init = bf16_bits(c0) if beta else np.full(c0.shape, 0x7FC0, np.uint16)
        return init, from_bf16(init)
    dt = np.float16 if out_dtype == "float16" else np.float32
    init = c0.astype(dt) if beta else np.full(c0.shape, np.nan, dt)
    return init, init.astype(np.float64)


def case(cfg, m, n, k, b_unit, alpha=1.0, beta=0.0, seed=0, col_out=False, a_col=False):
    """A (m, k) row-major (column-major if ``a_col``), B (k, n) contiguous along ``b_unit``,
    out (m, n) of the config's out_dtype, column-major if ``col_out``."""
    rng = np.random.default_rng(seed)
    a, a64 = to_operand(rng.standard_normal((m, k)), cfg.dtype)
    b, b64 = to_operand(rng.standard_normal((k, n)), cfg.dtype)
    init, c0 = poisoned(rng.standard_normal((m, n)), cfg.out_dtype, beta)
    A = cuda.to_device(np.asfortranarray(a) if a_col else a)
    B = cuda.to_device(b) if b_unit == "n" else cuda.to_device(np.ascontiguousarray(b.T)).T
    out = cuda.to_device(np.asfortranarray(init) if col_out else init)
    launch_matmul(A, B, out, alpha, beta, cfg,
                  cfg.out_dtype if cfg.out_dtype == "bfloat16" else None)
    got = out.copy_to_host()
    got = from_bf16(got) if cfg.out_dtype == "bfloat16" else got.astype(np.float64)
    ref = alpha * (a64 @ b64) + (beta * c0 if beta else 0.0)
    bound = abs(alpha) * (np.abs(a64) @ np.abs(b64)) + (abs(beta) * np.abs(c0) if beta else 0)
    tol = 1e-5 * bound + OUT_ROUNDING[cfg.out_dtype] * np.abs(ref) + 1e-30
    return float(np.nan_to_num(np.abs(got - ref) / tol, nan=np.inf).max())


def errors():
    d = cuda.to_device
    f = np.zeros((4, 8), np.float32)
    cfg = SkinnyConfig(dtype="float32", out_dtype="float32")
    cases = {
        "bad rows": lambda: SkinnyConfig(rows=3),
        "bad vector": lambda: SkinnyConfig(vector=8, dtype="float32", out_dtype="float32"),
        "bad split": lambda: SkinnyConfig(split_k=0),
        "bad dtype": lambda: SkinnyConfig(dtype="float64"),
        "mixed types": lambda: launch_matmul(d(f), d(np.zeros((8, 4), np.float16)), None, 1.0,
                                             0.0, None, None),
        "config clash": lambda: launch_matmul(d(f), d(f.T.copy()), None, 1.0, 0.0,
                                              SkinnyConfig(), None),
        "batch": lambda: launch_matmul(d(np.zeros((2, 4, 8), np.float32)), d(f.T.copy()),
                                       None, 1.0, 0.0, cfg, None),
        "inner dims": lambda: launch_matmul(d(f), d(f), None, 1.0, 0.0, cfg, None),
        "bool alpha": lambda: launch_matmul(d(f), d(f.T.copy()), None, True, 0.0, cfg, None),
    }
    return outcomes(cases)


def main(which):
    if which == "errors":
        print(json.dumps(errors()))
        return
    f32, bf, h = "float32", "bfloat16", "float16"
    results = {}
    if which == "n":
        results["f32 rows4 v2 split2 3x61x45"] = case(
            SkinnyConfig(4, 2, unroll=2, split_k=2, dtype=f32, out_dtype=f32), 3, 61, 45, "n")
        results["bf16 rows2 v4 alpha beta col-out 3x37x29"] = case(
            SkinnyConfig(2, 4, unroll=1, split_k=1, dtype=bf, out_dtype=bf), 3, 37, 29, "n",
            alpha=0.5, beta=-1.5, seed=1, col_out=True)
        results["f16 rows1 v8 a-col f32-out split3 1x250x100"] = case(
            SkinnyConfig(1, 8, unroll=1, split_k=3, dtype=h, out_dtype=f32), 1, 250, 100, "n",
            seed=2, a_col=True)
    else:
        # one block of columns and rows (each shuffle is a slow warp rendezvous here)
        results["f32 rows2 v4 cols2 split2 2x13x300"] = case(
            SkinnyConfig(2, 4, columns=2, split_k=2, dtype=f32, out_dtype=f32), 2, 13, 300,
            "k", alpha=2.0, beta=0.5, seed=3)
        results["bf16 rows4 v8 cols1 f16-out 3x7x270"] = case(
            SkinnyConfig(4, 8, columns=1, split_k=1, dtype=bf, out_dtype=h), 3, 7, 270, "k",
            seed=4)
        results["f16 rows1 v2 cols3 a-col col-out split2 1x20x90"] = case(
            SkinnyConfig(1, 2, columns=3, split_k=2, dtype=h, out_dtype=bf), 1, 20, 90, "k",
            seed=5, col_out=True, a_col=True)
    print(json.dumps(results))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    main(sys.argv[1])
