"""Run the Hopper kernel (gemm.hopper) in numba's CUDA simulator, on the twins of
gemm.arch.sim_sm90 (TMA loads, mbarriers, wgmma), and print one JSON line of results.

Used in a child process by tests/test_hopper_sim.py (``NUMBA_ENABLE_CUDASIM=1 python
tests/sim_hopper_cases.py errors``: bad calls' errors) and, for :func:`case` and
:func:`specials_case`, by tests/test_hopper_cute.py. Each case: fresh random operands in the
chosen majors (optionally with leading dimensions wider than the matrices, so that the
tensor maps' strides and the zero fill past K are exercised), the out poisoned with NaN (or
random for beta), compared element by element with numpy float64 on the same rounded
inputs. The number returned is max |C - ref| / (1e-5 (|alpha| |A| @ |B| + |beta C0|) + out
rounding * |ref|), <= 1 passes. The simulator plans for gemm.hopper.SIM_SMS (3) SMs, so the
persistent blocks loop over several tiles.
"""

import json
import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run me in the simulator"
sys.path.insert(0, os.path.dirname(__file__))

from numba import cuda  # noqa: E402

import gemm  # noqa: E402
from gemm import hopper  # noqa: E402
from gemm.hopper import HopperConfig, hopper_matmul  # noqa: E402
from sim_tensorcore_cases import error_ratio, out_start, to_operand  # noqa: E402
from simcase import outcomes  # noqa: E402


def padded(x, pad, col):
    """``x`` on the device, each line of its contiguous axis (rows, or columns when
    ``col``) rounded up to 8 elements (TMA's 16-byte leading dimensions) and ``pad`` more."""
    if col:
        return padded(x.T, pad, False).T
    full = np.zeros((x.shape[0], -(-x.shape[1] // 8) * 8 + pad), x.dtype)
    full[:, :x.shape[1]] = x
    return cuda.to_device(full)[:, :x.shape[1]]


def operand(x, dtype, x3=False):
    """(the array handed to the kernel, its exact values): for tf32, values that tf32 holds
    exactly (wgmma reads f32 from shared memory and drops the low 13 bits); for 3xTF32
    (``x3``), any float32."""
    if x3:
        f = x.astype(np.float32)
        return f, f.astype(np.float64)
    a, a64 = to_operand(x, dtype)
    return (a64.astype(np.float32), a64) if dtype == "tfloat32" else (a, a64)


def case(cfg, m, n, k, alpha=1.0, beta=0.0, seed=0, a_col=False, b_kmajor=True,
         out_dtype="float32", col_out=False, pad=0, batch=0, bias=None,
         bias_dtype="float32", activation=None, carveout=0):
    """A (m, k) row-major (column-major if ``a_col``); B (k, n) contiguous along K or N;
    ``batch`` > 0: that many products of A's, one B shared by all; ``bias`` "columns" (a
    vector of n) or "rows" (an (m, 1) one) of ``bias_dtype``, and ``activation``: its fused
    epilogue; ``carveout``: the call within ``gemm.hopper.sm_carveout(carveout)``, its grid
    checked to be planned for that many SMs fewer (inf where it is not)."""
    rng = np.random.default_rng(seed)
    dtype = cfg.dtype if cfg else "bfloat16"
    shape_a = (batch, m, k) if batch else (m, k)
    x3 = bool(cfg and cfg.tf32x3)
    a, a64 = operand(rng.standard_normal(shape_a), dtype, x3)
    bt, bt64 = operand(rng.standard_normal((n, k)), dtype, x3)
    if batch:
        A = cuda.to_device(np.ascontiguousarray(a))
    else:
        A = padded(np.asfortranarray(a) if a_col else a, pad, a_col)
    B = padded(bt, pad, False).T if b_kmajor else padded(np.ascontiguousarray(bt.T), pad, False)
    init, c0 = out_start(rng.standard_normal((batch, m, n) if batch else (m, n)), out_dtype,
                         beta)
    out = cuda.to_device(np.asfortranarray(init) if col_out else init)
    vec, bias64 = None, None
    if bias is not None:
        shape = (n,) if bias == "columns" else (m, 1)
        values = rng.standard_normal(shape)
        if bias_dtype == "float32":         # read as it is (to_operand's is tf32's rounding)
            vec = values.astype(np.float32)
            bias64 = vec.astype(np.float64)
        else:
            vec, bias64 = to_operand(values, bias_dtype)
        vec = cuda.to_device(vec)
    od = out_dtype if out_dtype == "bfloat16" else None
    with hopper.sm_carveout(carveout):
        call = hopper._Call(A, B, out, alpha, beta, cfg, od, "case", bias=vec,
                            activation=activation)
        if call.grid[0] > (hopper.SIM_SMS - carveout) * call.variant.config.blocks_per_sm:
            return float("inf")
        hopper_matmul(A, B, out, alpha=alpha, beta=beta, config=cfg, out_dtype=od, bias=vec,
                      activation=activation)
    return error_ratio(out.copy_to_host(), a64, bt64, alpha, beta, c0, out_dtype, bias64,
                       activation)


def specials_case(cfg, m, n, k, seed=0):
    """3xTF32 with an inf and a NaN in A and a -inf in B (A row-major, B K-major, f32 out):
    where float64 gives inf or NaN the kernel must give the same (inf times a small part
    must not turn an inf into NaN); elsewhere the error ratio of :func:`case` (the values
    here are float32, and 3xTF32 is checked with float32's bound)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    bt = rng.standard_normal((n, k)).astype(np.float32)
    # the values an inf meets are whole numbers (their small parts 0: inf * 0 is NaN)
    bt[:, 3], a[:, 5] = np.round(4 * bt[:, 3]), np.round(4 * a[:, 5])
    a[1, 3], a[m - 2, k - 1], bt[n - 1, 5] = np.inf, np.nan, -np.inf
    out = cuda.to_device(np.full((m, n), np.nan, np.float32))
    hopper_matmul(cuda.to_device(a), padded(bt, 0, False).T, out, config=cfg)
    got, a64, bt64 = out.copy_to_host().astype(np.float64), a.astype(np.float64), \
        bt.astype(np.float64)
    with np.errstate(invalid="ignore"):
        ref = a64 @ bt64.T
        bound = np.abs(a64) @ np.abs(bt64.T)
    odd = ~np.isfinite(ref)
    if not odd.any() or not np.array_equal(got[odd], ref[odd], equal_nan=True):
        return float("inf")
    err = np.abs(got[~odd] - ref[~odd]) / (1e-5 * bound[~odd] + 1e-30)
    return float(np.nan_to_num(err, nan=np.inf).max())


def errors():
    d = cuda.to_device
    u16 = np.zeros((16, 24), np.uint16)
    tf32 = HopperConfig(bM=64, bN=64, stages=2, consumers=1, dtype="tfloat32")
    cases = {
        "unaligned ld": lambda: hopper_matmul(d(np.zeros((16, 27), np.uint16))[:, :20],
                                              d(u16).T[:20]),
        "MN-major tf32": lambda: hopper_matmul(d(np.zeros((16, 8), np.float32)),
                                               d(np.zeros((8, 16), np.float32)), config=tf32),
        "config type": lambda: hopper_matmul(d(u16), d(u16).T, config="fast"),
        "inner dims": lambda: hopper_matmul(d(u16), d(np.zeros((16, 16), np.uint16)).T),
        "narrow tile, B N-major": lambda: hopper_matmul(d(u16), d(u16.T.copy()),
                                                        config=small(bN=16)),
        "bias length": lambda: hopper_matmul(d(u16), d(u16).T, bias=d(np.zeros(15, np.float32))),
        "bias type": lambda: hopper_matmul(d(u16), d(u16).T, bias=d(np.zeros(16, np.int32))),
        "bias strided": lambda: hopper_matmul(d(u16), d(u16).T,
                                              bias=d(np.zeros(32, np.float32))[::2]),
        "bias matrix": lambda: hopper_matmul(d(u16), d(u16).T,
                                             bias=d(np.zeros((16, 16), np.float32))),
        "activation name": lambda: hopper_matmul(d(u16), d(u16).T, activation="gelu_erf"),
        "activation type": lambda: hopper_matmul(d(u16), d(u16).T, activation=1),
        "fused matmul": lambda: gemm.matmul(d(u16), d(u16).T, kernel=small(),
                                            bias=d(np.zeros(16, np.uint16)),
                                            activation="relu"),
        "fused decode step, swapped": lambda: _swapped(hopper.plan_call(
            d(np.zeros((16, 64), np.uint16)), d(np.zeros((1024, 64), np.uint16)).T,
            bias=d(np.zeros(1024, np.uint16)), activation="gelu")),
        "epilogue after the SIMT kernel, bias length": lambda: gemm.matmul(
            d(np.zeros((16, 24), np.float32)), d(np.zeros((16, 24), np.float32)).T,
            bias=d(np.zeros(15, np.float32)), activation="relu"),
    }
    return outcomes(cases)


def _swapped(variant):
    """AssertionError unless ``variant`` swaps A and B (its C stored by columns)."""
    if not variant.c_columns:
        raise AssertionError(f"not swapped: {variant}")


def small(dtype="bfloat16", **kw):
    """One consumer warpgroup and a producer (256 threads), 64 x 64 tiles, 2 slots."""
    return HopperConfig(**{"bM": 64, "bN": 64, "stages": 2, "consumers": 1, "dtype": dtype,
                           **kw})


def main(which):
    if which == "errors":
        print(json.dumps(errors()))


if __name__ == "__main__":
    main(sys.argv[1])
