"""Run the tensor-core kernel in numba's CUDA simulator and print one JSON line of results.

Used by tests/test_tensorcore_sim.py in a child process (the simulator must be chosen before
numba is imported): ``NUMBA_ENABLE_CUDASIM=1 python tests/sim_tensorcore_cases.py WHICH``.
Each case: fresh random operands in the chosen majors, the output poisoned with NaN (or random
for beta), compared element by element with numpy float64 on the same rounded inputs; the
printed number is max |C - ref| / (1e-5 (|alpha| |A| @ |B| + |beta C0|) + out rounding * |ref|),
<= 1 passes.
"""

import json
import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run me in the simulator"

from numba import cuda  # noqa: E402

from gemm.tensorcore import TensorCoreConfig, tensorcore_matmul  # noqa: E402
from activations64 import ACTIVATIONS64  # noqa: E402
from simcase import outcomes  # noqa: E402


def bf16_bits(x):
    """float -> bf16 bits, rounded to nearest even."""
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def to_operand(x, dtype):
    """float64 -> (array handed to the kernel, its exact values as the MMA sees them)."""
    if dtype == "float16":
        h = x.astype(np.float16)
        return h, h.astype(np.float64)
    if dtype == "bfloat16":
        bits = bf16_bits(x)
        return bits, from_bf16(bits)
    f = x.astype(np.float32)                     # tf32: rounded to nearest, ties away
    u = f.view(np.uint32)
    r = ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return f, r.astype(np.float64)


OUT_ROUNDING = {"float32": 0.0, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


def case(cfg, m, n, k, alpha=1.0, beta=0.0, seed=0, col_out=False, a_col=False, b_kmajor=True,
         out_dtype="float32", k_pad=0):
    """A (m, k) row-major (column-major if ``a_col``); B (k, n) contiguous along K (the .T of
    an (n, k) row-major matrix) or along N; out (m, n) of ``out_dtype`` (16-bit outputs as raw
    bits for bfloat16). ``k_pad``: row-major A and K-major B are views of matrices of k +
    k_pad columns whose last k_pad hold NaN (a padded leading dimension)."""
    rng = np.random.default_rng(seed)
    a, a64 = to_operand(rng.standard_normal((m, k + k_pad)), cfg.dtype)
    bt, bt64 = to_operand(rng.standard_normal((n, k + k_pad)), cfg.dtype)
    nan = np.uint16(0x7FC0) if cfg.dtype == "bfloat16" else np.nan
    a[:, k:], bt[:, k:], a64, bt64 = nan, nan, a64[:, :k], bt64[:, :k]
    A = cuda.to_device(np.asfortranarray(a) if a_col else a)[:, :k]
    B = (cuda.to_device(bt)[:, :k].T if b_kmajor
         else cuda.to_device(np.ascontiguousarray(bt[:, :k].T)))
    init, c0 = out_start(rng.standard_normal((m, n)), out_dtype, beta)
    out = cuda.to_device(np.asfortranarray(init) if col_out else init)
    tensorcore_matmul(A, B, out, alpha=alpha, beta=beta, config=cfg,
                      out_dtype=out_dtype if out_dtype == "bfloat16" else None)
    return error_ratio(out.copy_to_host(), a64, bt64, alpha, beta, c0, out_dtype)


def out_start(c0, out_dtype, beta):
    """(the out handed to the kernel, its values): ``c0`` rounded to ``out_dtype`` (bfloat16
    as raw bits) where beta != 0, else NaN."""
    if out_dtype == "bfloat16":
        init = bf16_bits(c0) if beta else np.full(c0.shape, 0x7FC0, np.uint16)     # NaN
        return init, from_bf16(init)
    t = np.dtype(out_dtype).type
    init = c0.astype(t) if beta else np.full(c0.shape, np.nan, t)
    return init, init.astype(np.float64)


def error_ratio(got, a64, bt64, alpha, beta, c0, out_dtype, bias64=None, activation=None):
    """max |got - ref| / tolerance of ``activation(alpha * A B^T + beta * c0 + bias64)``
    (see the module; ``bias64`` broadcasts against the product). An activation's slope is
    at most 1.2, so it scales the tolerance of its argument by that, plus float32's
    evaluation of it (1e-6 of the argument)."""
    got = from_bf16(got) if out_dtype == "bfloat16" else got.astype(np.float64)
    ref = alpha * (a64 @ bt64.T) + (beta * c0 if beta else 0.0)
    bound = abs(alpha) * (np.abs(a64) @ np.abs(bt64.T)) + (abs(beta) * np.abs(c0) if beta else 0)
    if bias64 is not None:
        ref, bound = ref + bias64, bound + np.abs(bias64)
    tol = 1e-5 * bound
    if activation is not None:
        tol = 1.2 * tol + 1e-6 * np.abs(ref)
        ref = ACTIVATIONS64[activation](ref)
    tol = tol + OUT_ROUNDING[out_dtype] * np.abs(ref) + 1e-30
    return float(np.nan_to_num(np.abs(got - ref) / tol, nan=np.inf).max())


def errors():
    d = cuda.to_device
    u16 = np.zeros((4, 8), np.uint16)
    cases = {
        "inner dims": lambda: tensorcore_matmul(d(u16), d(np.zeros((6, 8), np.uint16)).T[:5]),
        "float64 A": lambda: tensorcore_matmul(d(np.zeros((4, 8), np.float64)), d(u16).T),
        "int32 B": lambda: tensorcore_matmul(d(u16), d(np.zeros((4, 8), np.int32)).T),
        "mixed types": lambda: tensorcore_matmul(d(np.zeros((4, 8), np.float32)),
                                                 d(np.zeros((4, 8), np.float16)).T),
        "beta without out": lambda: tensorcore_matmul(d(u16), d(u16).T, beta=1.0),
        "out float64": lambda: tensorcore_matmul(d(u16), d(u16).T,
                                                 d(np.zeros((4, 4), np.float64))),
        "out_dtype clash": lambda: tensorcore_matmul(d(u16), d(u16).T,
                                                     d(np.zeros((4, 4), np.float32)),
                                                     out_dtype="float16"),
        "no unit stride": lambda: tensorcore_matmul(d(np.zeros((4, 16), np.uint16))[:, ::2],
                                                    d(u16).T),
        "bad stages": lambda: TensorCoreConfig(stages=7),
        "bad delay": lambda: TensorCoreConfig(stages=3, delay_release=2),
        "bad bK": lambda: TensorCoreConfig(bK=48),
        "bad bK tf32": lambda: TensorCoreConfig(bK=64, dtype="tfloat32"),
        "too much shared memory": lambda: TensorCoreConfig(stages=5),
        "bad group_m": lambda: TensorCoreConfig(group_m=0),
        "epilogue threads": lambda: TensorCoreConfig(bM=16, bN=256, warps=(1, 1)),
        "bad config type": lambda: tensorcore_matmul(d(u16), d(u16).T, config="fast"),
    }
    return outcomes(cases)


def main(which):
    if which == "errors":
        print(json.dumps(errors()))
        return
    results = {}
    if which == "tfloat32":
        small = TensorCoreConfig(32, 32, 16, (1, 1), 3, "tfloat32")
        results["K K 37x45x40"] = case(small, 37, 45, 40, seed=11)
        results["MN MN bK32 stages2 col-out 33x30x70"] = case(
            TensorCoreConfig(32, 32, 32, (1, 1), 2, "tfloat32"), 33, 30, 70, 0.5, -1.0,
            seed=12, col_out=True, a_col=True, b_kmajor=False)
        results["K K bf16 out, beta 40x48x48"] = case(small, 40, 48, 48, 1.0, 0.5, seed=18,
                                                      out_dtype="bfloat16")
        print(json.dumps(results))
        return
    dtype, warps = which.split("-")
    wm, wn = (int(x) for x in warps)
    small = TensorCoreConfig(bM=32, bN=32, bK=32, warps=(wm, wn), stages=3, dtype=dtype)
    if which == "bfloat16-11":
        results["37x45x70"] = case(small, 37, 45, 70, seed=1)
        results["stages2 32x32x96"] = case(TensorCoreConfig(32, 32, 32, (1, 1), 2, dtype),
                                           32, 32, 96, seed=2)
        results["stages4 delay1 odd K 9x20x131"] = case(
            TensorCoreConfig(32, 32, 32, (1, 1), 4, dtype, delay_release=1), 9, 20, 131, seed=3)
        results["1x1x1"] = case(small, 1, 1, 1, seed=4)
        results["group_m 3, 4x3 blocks 100x70x32"] = case(
            TensorCoreConfig(32, 32, 32, (1, 1), 3, dtype, group_m=3), 100, 70, 32, seed=10)
        results["A col, B N-major, bf16 out 40x36x50"] = case(
            small, 40, 36, 50, seed=7, a_col=True, b_kmajor=False, out_dtype="bfloat16")
        # K odd or padded: 2-byte copies; K a multiple of 4 or 2: 8- and 4-byte copies
        results["gemm.cute edges, beta, bf16 out 40x50x72"] = case(
            small, 40, 50, 72, 0.5, 1.5, seed=13, out_dtype="bfloat16")
        results["padded K 41 (ld 48) 40x48x41"] = case(small, 40, 48, 41, seed=14, k_pad=7)
        results["gemm.cute B N-major 40x48x72"] = case(small, 40, 48, 72, seed=15,
                                                       b_kmajor=False)
        results["gemm.cute 8-byte copies 40x48x36"] = case(small, 40, 48, 36, seed=18)
        results["gemm.cute 4-byte copies, B N-major 40x48x34"] = case(
            small, 40, 48, 34, seed=19, b_kmajor=False, out_dtype="bfloat16")
    else:
        results["alpha-beta col-out 33x17x40"] = case(small, 33, 17, 40, 0.5, -2.0, seed=5,
                                                      col_out=True)
        results["bK64 stages5 20x30x100"] = case(
            TensorCoreConfig(32, 32, 64, (wm, wn), 5, dtype), 20, 30, 100, seed=6)
        results["B N-major, f16 out, beta 64x40x20"] = case(
            small, 64, 40, 20, 1.0, 0.5, seed=8, b_kmajor=False, out_dtype="float16")
        results["A col, col f16 out 24x64x33"] = case(small, 24, 64, 33, seed=9, a_col=True,
                                                      col_out=True, out_dtype="float16")
        results["gemm.cute both MN-major, col f16 out 64x56x48"] = case(
            small, 64, 56, 48, 1.0, 0.5, seed=16, a_col=True, b_kmajor=False, col_out=True,
            out_dtype="float16")
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
