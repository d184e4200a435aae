"""Run the tensor-core kernel in numba's CUDA simulator and print one JSON line of results.

Used by tests/test_tensorcore_sim.py in a child process (the simulator must be chosen before
numba is imported): ``NUMBA_ENABLE_CUDASIM=1 python tests/sim_tensorcore_cases.py WHICH``.
Each case: fresh random bf16/f16 operands, the output poisoned with NaN (or random for beta),
compared element by element with numpy float64 on the same rounded inputs; the printed number
is max |C - ref| / (tol * (|alpha| |A| @ |B| + |beta C0|)), <= 1 passes.
"""

import json
import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run me in the simulator"

from numba import cuda  # noqa: E402

from gemm.tensorcore import TensorCoreConfig, tensorcore_matmul  # noqa: E402
from simcase import outcomes  # noqa: E402


def to_bits(x, dtype):
    """float64 -> (16-bit pattern array, its exact values as float64)."""
    if dtype == "float16":
        h = x.astype(np.float16)
        return h, h.astype(np.float64)
    u = x.astype(np.float32).view(np.uint32)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)     # round to nearest even
    return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def case(cfg, m, n, k, alpha=1.0, beta=0.0, seed=0, col_out=False):
    rng = np.random.default_rng(seed)
    a, a64 = to_bits(rng.standard_normal((m, k)), cfg.dtype)
    bt, bt64 = to_bits(rng.standard_normal((n, k)), cfg.dtype)   # B as (N, K) row-major
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    init = c0 if beta else np.full((m, n), np.nan, np.float32)
    out = cuda.to_device(np.asfortranarray(init) if col_out else init)
    tensorcore_matmul(cuda.to_device(a), cuda.to_device(bt).T, out, alpha=alpha, beta=beta,
                      config=cfg)
    ref = alpha * (a64 @ bt64.T) + beta * c0
    bound = abs(alpha) * (np.abs(a64) @ np.abs(bt64.T)) + abs(beta) * np.abs(c0)
    err = np.abs(out.copy_to_host() - ref) / (1e-5 * bound + 1e-30)
    return float(np.nan_to_num(err, nan=np.inf).max())


def errors():
    d = cuda.to_device
    u16 = np.zeros((4, 8), np.uint16)
    cases = {
        "inner dims": lambda: tensorcore_matmul(d(u16), d(np.zeros((6, 8), np.uint16)).T[:5]),
        "float32 A": lambda: tensorcore_matmul(d(np.zeros((4, 8), np.float32)), d(u16).T),
        "int32 B": lambda: tensorcore_matmul(d(u16), d(np.zeros((4, 8), np.int32)).T),
        "B row-major": lambda: tensorcore_matmul(d(u16), d(np.zeros((8, 4), np.uint16))),
        "beta without out": lambda: tensorcore_matmul(d(u16), d(u16).T, beta=1.0),
        "out float16": lambda: tensorcore_matmul(d(u16), d(u16).T,
                                                 d(np.zeros((4, 4), np.float16))),
        "bad stages": lambda: TensorCoreConfig(stages=7),
        "bad bK": lambda: TensorCoreConfig(bK=48),
        "bad config type": lambda: tensorcore_matmul(d(u16), d(u16).T, config="fast"),
    }
    return outcomes(cases)


def main(which):
    if which == "errors":
        print(json.dumps(errors()))
        return
    dtype, warps = which.split("-")
    wm, wn = (int(x) for x in warps)
    results = {}
    small = TensorCoreConfig(bM=32, bN=32, bK=32, warps=(wm, wn), stages=3, dtype=dtype)
    if which == "bfloat16-11":
        results["37x45x70"] = case(small, 37, 45, 70, seed=1)
        results["stages2 32x32x96"] = case(TensorCoreConfig(32, 32, 32, (1, 1), 2, dtype),
                                           32, 32, 96, seed=2)
        results["stages4 odd K 9x20x131"] = case(TensorCoreConfig(32, 32, 32, (1, 1), 4, dtype),
                                                 9, 20, 131, seed=3)
        results["1x1x1"] = case(small, 1, 1, 1, seed=4)
    else:
        results["alpha-beta col-out 33x17x40"] = case(small, 33, 17, 40, 0.5, -2.0, seed=5,
                                                      col_out=True)
        results["bK64 stages5 20x30x150"] = case(
            TensorCoreConfig(32, 32, 64, (wm, wn), 5, dtype), 20, 30, 150, seed=6)
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
