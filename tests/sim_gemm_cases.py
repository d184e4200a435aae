"""Run the SIMT kernels in numba's CUDA simulator and print one JSON line of results.

Used by tests/test_gemm_sim.py in a child process (the simulator must be chosen before numba
is imported): ``NUMBA_ENABLE_CUDASIM=1 python tests/sim_gemm_cases.py PIPELINE``.
For each case the output is fresh random data, poisoned with NaN, checked element by element
against numpy float64; the printed number is max |C - ref| / (tol * (|A| @ |B| + |beta C0|)).
"""

import json
import os
import sys

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run me in the simulator"

from numba import cuda  # noqa: E402

import gemm  # noqa: E402
from gemm.simt import SimtConfig  # noqa: E402
from gemm.tensorcore import TensorCoreConfig  # noqa: E402
from simcase import outcomes  # noqa: E402


def small(pipeline, vector_mn=1, pad=None):
    """A 32x32x8 tile with 8x8 threads: the generator's logic on a small, fast block."""
    return SimtConfig(bM=32, bN=32, bK=8, mma_threads=(8, 8), pipeline=pipeline,
                      vector_mn=vector_mn, pad=pad)


def case(cfg, m, n, k, a_order, b_order, alpha=1.0, beta=0.0, seed=0, c_order="C"):
    rng = np.random.default_rng(seed)
    a = np.asarray(rng.standard_normal((m, k)), np.float32, order=a_order)
    b = np.asarray(rng.standard_normal((k, n)), np.float32, order=b_order)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    out = cuda.to_device(np.asarray(c0 if beta else np.full((m, n), np.nan, np.float32),
                                    order=c_order))
    gemm.matmul(cuda.to_device(a), cuda.to_device(b), out, alpha=alpha, beta=beta, kernel=cfg)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = alpha * (a64 @ b64) + beta * c0
    bound = abs(alpha) * (np.abs(a64) @ np.abs(b64)) + abs(beta) * np.abs(c0)
    err = np.abs(out.copy_to_host() - ref) / (1e-5 * bound + 1e-30)
    return float(np.nan_to_num(err, nan=np.inf).max())


def broadcast(shape):
    """A simulator device array of ``shape`` whose first mode has stride 0 (every batch
    element in one place), as ``torch.expand`` makes."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    return FakeCUDAArray(np.broadcast_to(np.zeros(shape[1:], np.float32), shape))


def on_device(x, col):
    """A (..., r, c) host array on the device, row-major or (``col``) column-major in its
    last two modes."""
    if not col:
        return cuda.to_device(np.ascontiguousarray(x))
    axes = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return cuda.to_device(np.ascontiguousarray(x.transpose(axes))).transpose(axes)


def batch_case(kernel, dtype, a_batch, b_batch, m, n, k, a_col=False, b_col=False,
               alpha=1.0, beta=0.0, out="new", seed=0):
    """``matmul`` of A (a_batch, m, k) and B (b_batch, k, n) (None: a 2-D operand) with
    ``out`` "new" (made by matmul), "row" (a given row-major batch) or "interleaved" (an
    (m, batch, n) array seen as (batch, m, n)); the error against numpy float64's matmul,
    as :func:`case`'s."""
    rng = np.random.default_rng(seed)
    tol = 1e-5 if dtype == "float32" else 2e-3
    a = rng.standard_normal((a_batch or 1, m, k)).astype(dtype)
    b = rng.standard_normal((b_batch or 1, k, n)).astype(dtype)
    a, b = (a if a_batch else a[0]), (b if b_batch else b[0])
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    nb = max(a_batch or 0, b_batch or 0)
    c0 = rng.standard_normal((nb, m, n)).astype(np.float32)
    A, B = on_device(a, a_col), on_device(b, b_col)
    if out == "new":
        got = gemm.matmul(A, B, alpha=alpha, kernel=kernel, out_dtype="float32")
    else:
        base = np.ascontiguousarray(c0 if beta else np.full_like(c0, np.nan))
        if out == "interleaved":
            C = cuda.to_device(np.ascontiguousarray(base.transpose(1, 0, 2))).transpose((1, 0, 2))
        else:
            C = cuda.to_device(base)
        got = gemm.matmul(A, B, C, alpha=alpha, beta=beta, kernel=kernel)
    got = got.copy_to_host()
    ref = alpha * (a64 @ b64) + beta * c0
    bound = abs(alpha) * (np.abs(a64) @ np.abs(b64)) + abs(beta) * np.abs(c0)
    if got.shape != ref.shape:
        return float("inf")
    err = np.abs(got - ref) / (tol * bound + 1e-30)
    return float(np.nan_to_num(err, nan=np.inf).max())


def batches():
    """Batched and broadcast products on the SIMT and the tensor-core kernels, a batch
    launched in parts included: {case: error / tolerance}."""
    from gemm import api
    from gemm.tensorcore import TensorCoreConfig
    simt = small("double_buffer", vector_mn=4, pad=4)
    tc = TensorCoreConfig(bM=32, bN=32, bK=32, warps=(1, 1), stages=3, dtype="float16")
    got = {}
    got["simt 3x(37x45x19) row"] = batch_case(simt, "float32", 3, 3, 37, 45, 19, out="row",
                                              seed=1)
    got["simt batch of 1 broadcast, interleaved out"] = batch_case(
        simt, "float32", 1, 4, 9, 40, 17, out="interleaved", seed=4)
    for name, kernel, dtype in (("simt", simt, "float32"), ("tc", tc, "float16")):
        got[f"{name} col A, B 2-D, alpha beta"] = batch_case(
            kernel, dtype, 2, None, 33, 20, 40, a_col=True, alpha=0.5, beta=-2.0, out="row",
            seed=2)
    got["tc A 2-D, col B, new out"] = batch_case(tc, "float16", None, 3, 20, 36, 24,
                                                 b_col=True, seed=3)
    limit = api._MAX_BATCH
    api._MAX_BATCH = 2              # 5 products launched in 3 parts
    try:
        got["simt 5 products in parts"] = batch_case(simt, "float32", 5, None, 7, 9, 5,
                                                     beta=1.0, out="row", seed=5)
        got["tc 5 products in parts, new out"] = batch_case(tc, "float16", None, 5, 7, 9, 5,
                                                            seed=6)
    finally:
        api._MAX_BATCH = limit
    return got


def split_reductions():
    """gemm.splitk.reduce_splits in the simulator: random partials (S, NB, M, ldw), f32 as
    split-K's or 16-bit as the reduce-scatter's, into a strided out of each type with alpha
    and beta, against numpy float64: {case: error / tolerance}."""
    from gemm.splitk import reduce_splits
    from gemm.splitk_kernel import vector_fits
    got = {}
    rng = np.random.default_rng(7)
    for name, out_dtype, part, s, nb, m, n, beta, vector in (
            ("f32 3 ranges", "float32", "float32", 3, 2, 5, 7, 0.5, False),
            ("bf16 4 ranges", "bfloat16", "float32", 4, 1, 9, 6, -1.0, False),
            ("f16 1 range, beta 0", "float16", "float32", 1, 3, 4, 4, 0.0, False),
            ("bf16 partials, 4 ranges", "bfloat16", "bfloat16", 4, 1, 6, 9, 0.0, False),
            ("f16 partials into f32, 3 ranges", "float32", "float16", 3, 1, 3, 5, 0.0, False),
            # 16-byte rows: the vector form (a row's last columns one by one)
            ("vector: bf16 partials, 3 ranges", "bfloat16", "bfloat16", 3, 2, 5, 19, 0.5, True),
            ("vector: f16 partials into f32", "float32", "float16", 2, 1, 4, 16, -1.0, True),
            ("vector: f32 into bf16, 5 ranges", "bfloat16", "float32", 5, 1, 3, 10, 0.0, True),
            ("vector: f32, 1 range", "float32", "float32", 1, 2, 3, 6, 2.0, True)):
        if vector:                              # rows and matrices 32 bytes apart at least
            ldw = ldc = -(-n // 8) * 8 + 8
            sc = m * ldc + 8
        else:
            ldw, ldc, sc = n + n % 2, n + 3, m * (n + 3) + 5
        w = rng.standard_normal((s, nb, m, ldw)).astype(np.float32)
        w_bits = w if part == "float32" else _bf16_bits(w) if part == "bfloat16" \
            else w.astype(np.float16).view(np.uint16)
        w = _as_f64(w_bits, part).reshape(w.shape)      # the partials' values
        c0 = rng.standard_normal(nb * sc).astype(np.float32)
        bits = {"float32": c0, "bfloat16": _bf16_bits(c0), "float16": c0.astype(np.float16)}
        out = bits[out_dtype].copy()
        if out_dtype == "float16":
            out = out.view(np.uint16)
        before = _as_f64(out, out_dtype)
        reduce_splits(out_dtype, w_bits.ravel(), out, m, n, ldw, nb, s, ldc, 1, sc, 1.5, beta,
                      part_dtype=part)
        got_f = _as_f64(out, out_dtype)
        err = 0.0
        for z in range(nb):
            for r in range(m):
                for c in range(n):
                    g = z * sc + r * ldc + c
                    terms = w[:, z, r, c].astype(np.float64)
                    ref = 1.5 * terms.sum() + beta * before[g]
                    bound = 1.5 * np.abs(terms).sum() + abs(beta * before[g])
                    tol = 2.0 ** {"float32": -20, "bfloat16": -7, "float16": -9}[out_dtype]
                    err = max(err, abs(got_f[g] - ref) / (tol * bound))
        untouched = [g for g in range(nb * sc) if (g % sc) // ldc >= m or (g % sc) % ldc >= n]
        if not np.array_equal(got_f[untouched], before[untouched]):
            err = float("inf")                  # an element outside the out was written
        if vector_fits(part, out_dtype, ldw, ldc, 1, sc, [None, None]) != vector:
            err = float("inf")                  # the case did not take the form it names
        got[name] = float(err)
    # the SIMT kernel with split-K: uneven ranges, both out majors, a batch, alpha and beta
    from dataclasses import replace
    for name, pipeline, split in (("prefetch", "prefetch", 3), ("double", "double_buffer", 5)):
        cfg = replace(small(pipeline), split_k=split)
        got[f"simt {name} split {split}, row out"] = batch_case(
            cfg, "float32", 2, 2, 33, 20, 50, alpha=0.5, beta=-2.0, out="row", seed=8)
        got[f"simt {name} split {split}, col out"] = case(cfg, 20, 33, 45, "F", "C", 1.5, 0.5,
                                                          seed=9, c_order="F")
    return got


def _bf16_bits(x):
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _as_f64(x, dtype):
    if dtype == "bfloat16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "float16":
        return x.view(np.float16).astype(np.float64)
    return x.astype(np.float64)


def errors():
    """{case: (exception type, message)} for inputs matmul must refuse."""
    d = cuda.to_device
    f32 = np.ones((4, 3), np.float32)
    cases = {
        "inner dims": lambda: gemm.matmul(d(f32), d(f32)),
        "4-D": lambda: gemm.matmul(d(np.ones((1, 2, 4, 3), np.float32)), d(f32.T.copy())),
        "batches differ": lambda: gemm.matmul(d(np.ones((2, 4, 3), np.float32)),
                                              d(np.ones((3, 3, 4), np.float32))),
        "2-D out of a batch": lambda: gemm.matmul(d(np.ones((2, 4, 3), np.float32)),
                                                  d(f32.T.copy()), d(np.ones((4, 4), np.float32))),
        "overlapping out": lambda: gemm.matmul(d(np.ones((2, 4, 3), np.float32)),
                                               d(f32.T.copy()), broadcast((2, 4, 4))),
        "reversed batch": lambda: gemm.matmul(d(np.ones((2, 4, 3), np.float32))[::-1],
                                              d(f32.T.copy())),
        "float64": lambda: gemm.matmul(d(f32.astype(np.float64)), d(f32.T.copy())),
        "int32": lambda: gemm.matmul(d(f32), d(f32.T.astype(np.int32))),
        "host array": lambda: gemm.matmul(f32, d(f32.T.copy())),
        "strided view": lambda: gemm.matmul(d(np.ones((8, 6), np.float32))[::2, ::2],
                                            d(f32.T.copy())),
        "beta without out": lambda: gemm.matmul(d(f32), d(f32.T.copy()), beta=1.0),
        "out shape": lambda: gemm.matmul(d(f32), d(f32.T.copy()), d(np.ones((3, 3), np.float32))),
        "unknown kernel": lambda: gemm.matmul(d(f32), d(f32.T.copy()), kernel="fastest"),
        "out_dtype on SIMT": lambda: gemm.matmul(d(f32), d(f32.T.copy()), out_dtype="float16"),
        "bad stream": lambda: gemm.matmul(d(f32), d(f32.T.copy()), stream="s"),
    }
    return outcomes(cases)


def empty():
    """torch.mm's rules for empty extents and the out's type: {case: what came back}."""
    d = cuda.to_device
    got = {}
    r = gemm.matmul(d(np.ones((0, 3), np.float32)), d(np.ones((3, 4), np.float32)))
    got["M=0 shape"] = list(r.shape)
    r = gemm.matmul(d(np.ones((2, 3), np.float32)), d(np.ones((3, 0), np.float32)))
    got["N=0 shape"] = list(r.shape)
    r = gemm.matmul(d(np.ones((2, 0), np.float32)), d(np.ones((0, 3), np.float32)))
    got["K=0 no out"] = r.copy_to_host().tolist()
    out = d(np.full((2, 3), np.nan, np.float32))
    gemm.matmul(d(np.ones((2, 0), np.float32)), d(np.ones((0, 3), np.float32)), out, alpha=3.0)
    got["K=0 beta 0 over NaN"] = out.copy_to_host().tolist()
    out = d(np.arange(6, dtype=np.float32).reshape(2, 3))
    gemm.matmul(d(np.ones((2, 0), np.float32)), d(np.ones((0, 3), np.float32)), out, beta=-2.0)
    got["K=0 beta -2"] = out.copy_to_host().tolist()
    h16 = np.ones((2, 3), np.float16)
    tiny = TensorCoreConfig(32, 32, 32, (1, 1), 2, "float16")    # the smallest kernel: fast here
    got["f16 default out"] = str(gemm.matmul(d(h16), d(h16.T.copy()), kernel=tiny).dtype)
    got["f16 out_dtype f32"] = str(gemm.matmul(d(h16), d(h16.T.copy()), kernel=tiny,
                                               out_dtype="float32").dtype)
    return got


def cute_kernels():
    """The SIMT kernels (written with gemm.cute: gemm.cute_kernels) on small tiles: odd
    shapes (partial tiles in M, N and K), every major, 2-value copies (the double buffer's
    column-major A of even rows), alpha and beta, a batch and split-K ranges; runs of 4 rows
    a thread (vector_mn 4: read by vector loads with pad 4, value by value with pad 2):
    {case: error / tolerance}."""
    got = {}
    cases = {"prefetch": (("FC 21x18x11 alpha beta", 21, 18, 11, "F", "C", 0.5, -2.0),
                          ("CF 19x23x9", 19, 23, 9, "C", "F", 1.0, 0.0)),
             "double_buffer": (("FF 38x20x7", 38, 20, 7, "F", "F", 1.0, 0.0),)}
    for pipeline, shapes in cases.items():
        cfg = SimtConfig(bM=16, bN=16, bK=4, mma_threads=(4, 4), pipeline=pipeline)
        for seed, (name, m, n, k, ao, bo, alpha, beta) in enumerate(shapes):
            got[f"{pipeline} {name}"] = case(cfg, m, n, k, ao, bo, alpha, beta, seed=11 + seed)
    for seed, (pipeline, pad, ao, bo) in enumerate((("double_buffer", 4, "C", "F"),
                                                   ("prefetch", 2, "F", "C"))):
        cfg = SimtConfig(bM=32, bN=16, bK=4, mma_threads=(4, 4), pipeline=pipeline,
                         vector_mn=4, pad=pad)
        got[f"{pipeline} vector_mn 4 pad {pad} {ao}{bo} 37x45x19 alpha beta"] = case(
            cfg, 37, 45, 19, ao, bo, 0.5, -2.0, seed=21 + seed)
    # both pipelines share the problem's tiles and copies: split-K and a batch on one
    cfg = SimtConfig(bM=16, bN=16, bK=4, mma_threads=(4, 4), pipeline="double_buffer",
                     split_k=3)
    got["double_buffer split 3, batch 2, CC alpha beta"] = batch_case(
        cfg, "float32", 2, 2, 17, 20, 26, alpha=1.5, beta=0.5, out="row", seed=14)
    return got


def main(which):
    results = {}
    modes = {"errors": errors, "empty": empty, "batches": batches, "splitk": split_reductions,
             "cute": cute_kernels}
    if which in modes:
        print(json.dumps(modes[which]()))
        return
    if which == "default":
        # The seed's 128x128x8 tiles with 256 threads, one partial block each.
        for name in ("prefetch", "double_buffer", "tuned"):
            results[name] = case(name, 131, 67, 13, "F", "C", seed=1)
        # 32-row tiles of 128 threads: a column-major A's copies narrow to 2 values
        results["small_m"] = case("small_m", 40, 150, 37, "F", "C", seed=5)
    else:
        cfg = {"prefetch": small("prefetch"), "double_buffer": small("double_buffer"),
               "tuned": small("double_buffer", vector_mn=4, pad=4)}[which]
        for ao in "CF":
            for bo in "CF":
                results[f"{ao}{bo} 37x45x19"] = case(cfg, 37, 45, 19, ao, bo)
        results["alpha-beta 64x32x16"] = case(cfg, 64, 32, 16, "F", "C", 0.5, -2.0, seed=2)
        results["1x1x1"] = case(cfg, 1, 1, 1, "C", "C", seed=3)
        results["5x70x33"] = case(cfg, 5, 70, 33, "C", "F", seed=4)
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
