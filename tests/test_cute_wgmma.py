"""gemm.cute's wgmma: ``gemm(tiled_mma, acc, tCsA, tCsB[, accumulate])`` of an SM90 GMMA atom on
shared tensors with CuTe's GMMA layouts (swizzled by 128, 64 or 32 bytes or not, K- or
MN-major), the descriptors derived from the layouts at compile time. One warpgroup stores a
fresh random A (128 x 64) and B (N x 64) into its shared tiles through the swizzled tensors,
multiplies them (2 x 1 x 4 or 2 x 1 x 8 wgmma) and writes its accumulators out through
``partition_C``; small integers make every product exact in float32, so the result must equal
numpy's float64 product bit for bit. In numba's CUDA simulator (this file as a script in a
subprocess) for bf16, f16 and tf32 and every layout family; compiled to PTX for sm_90 on the
CPU (one wgmma per block, no local memory); typing refuses what wgmma cannot read; and on a
GPU of compute capability 9.x."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32, uint16

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:   # run as a script by the simulator test
    sys.path.insert(0, str(ROOT))

from gemm import arch  # noqa: E402
from gemm.cute import (copy, fill, gemm, get_slice, make_fragment_like,  # noqa: E402
                       make_shared_tensor, make_tensor, partition_A, partition_B,
                       partition_C, warpgroup_arrive, warpgroup_commit_batch, warpgroup_wait)
from layoutalg import Layout, make_tiled_mma, tile_to_shape  # noqa: E402
from layoutalg.atom import (SM90_64xNx8_F32TF32TF32_SS, SM90_64xNx16_F32BF16BF16_SS,  # noqa: E402
                            SM90_64xNx16_F32F16F16_SS)
from layoutalg.atom.gmma import gmma_layout_atom  # noqa: E402

M, K = 128, 64
ATOMS = {"bf16": SM90_64xNx16_F32BF16BF16_SS, "f16": SM90_64xNx16_F32F16F16_SS,
         "tf32": SM90_64xNx8_F32TF32TF32_SS}
# (dtype, N, A's major and swizzle bytes, B's major and swizzle bytes, accumulate)
CASES = [("bf16", 64, "K", 128, "K", 128, True), ("f16", 64, "MN", 128, "MN", 64, False),
         ("bf16", 32, "K", 32, "MN", 0, True), ("f16", 16, "MN", 32, "K", 0, False),
         ("bf16", 64, "K", 64, "MN", 128, True), ("tf32", 32, "K", 128, "K", 32, False)]


def make_kernel(dtype, n, a_major, a_swizzle, b_major, b_swizzle, accumulate):
    """The warpgroup's kernel for one case: a (M, K) and b (n, K) row-major in global
    memory (bits of bf16 / f16 as uint16, or float32), c (M, n) float32."""
    bits = 32 if dtype == "tf32" else 16
    elem = float32 if dtype == "tf32" else uint16
    mma = make_tiled_mma(ATOMS[dtype](n, a_major, b_major))
    sa = tile_to_shape(gmma_layout_atom(a_major, a_swizzle, bits), (M, K))
    sb = tile_to_shape(gmma_layout_atom(b_major, b_swizzle, bits), (n, K))
    ga, gb, gc = Layout((M, K), (K, 1)), Layout((n, K), (K, 1)), Layout((M, n), (n, 1))

    def kernel(a, b, c):
        t = cuda.threadIdx.x
        sA = make_shared_tensor(elem, sa)
        sB = make_shared_tensor(elem, sb)
        gA, gB, gC = make_tensor(a, ga), make_tensor(b, gb), make_tensor(c, gc)
        for i in range(t, M * K, 128):
            sA[i % M, i // M] = gA[i % M, i // M]
        for i in range(t, n * K, 128):
            sB[i % n, i // n] = gB[i % n, i // n]
        arch.fence_proxy_async()                # the generic stores, seen by wgmma
        cuda.syncthreads()
        thr = get_slice(mma, t)
        tCgC = partition_C(thr, gC)
        acc = make_fragment_like(tCgC, float32)
        if accumulate:
            fill(acc, 0.0)
        else:
            fill(acc, np.nan)                   # the first k-block must overwrite it
        warpgroup_arrive()
        if accumulate:
            gemm(mma, acc, partition_A(thr, sA), partition_B(thr, sB))
        else:
            gemm(mma, acc, partition_A(thr, sA), partition_B(thr, sB), 0)
        warpgroup_commit_batch()
        warpgroup_wait(0)
        copy(acc, tCgC)
    return kernel


def _operand(rng, shape, dtype):
    """(values as float64, their storage): small integers, exact in every type."""
    x = rng.integers(-4, 5, shape).astype(np.float32)
    if dtype == "tf32":
        return x.astype(np.float64), x.reshape(-1)
    if dtype == "f16":
        return x.astype(np.float64), x.astype(np.float16).view(np.uint16).reshape(-1)
    return x.astype(np.float64), (x.view(np.uint32) >> 16).astype(np.uint16).reshape(-1)


def check(case, seed, jit=cuda.jit):
    """Run one case on fresh data: equal to numpy's product bit for bit."""
    dtype, n = case[0], case[1]
    rng = np.random.default_rng(seed)
    a, a_store = _operand(rng, (M, K), dtype)
    b, b_store = _operand(rng, (n, K), dtype)
    c = np.full(M * n, np.nan, np.float32)
    jit(make_kernel(*case))[1, 128](a_store, b_store, c)
    return bool(np.array_equal(c.reshape(M, n), (a @ b.T).astype(np.float32)))


def _signature(case):
    elem = "float32" if case[0] == "tf32" else "uint16"
    return f"void({elem}[::1], {elem}[::1], float32[::1])"


def test_wgmma_multiplies_every_gmma_layout_in_the_simulator():
    from simcase import simulator_report
    seed = int.from_bytes(os.urandom(4), "little")
    report = simulator_report(__file__, seed)
    assert report == [True] * len(CASES), (seed, report)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_wgmma_compiles_to_one_instruction_per_block_without_local_memory(case):
    ptx = cuda.compile_ptx(make_kernel(*case), _signature(case), cc=(9, 0))[0]
    k_blocks = K // (8 if case[0] == "tf32" else 16)
    assert ptx.count("wgmma.mma_async.sync.aligned") == 2 * k_blocks
    assert ptx.count("wgmma.fence") == 1 and ptx.count("wgmma.commit_group") == 1
    assert ".local" not in ptx


def _kernel_with(layout_a, elem=uint16, acc_dtype=float32):
    mma = make_tiled_mma(SM90_64xNx16_F32BF16BF16_SS(64))
    sb = tile_to_shape(gmma_layout_atom("K", 128, 16), (64, K))
    gc = Layout((M, 64), (64, 1))

    def kernel(c):
        t = cuda.threadIdx.x
        sA = make_shared_tensor(elem, layout_a)
        sB = make_shared_tensor(uint16, sb)
        thr = get_slice(mma, t)
        tCgC = partition_C(thr, make_tensor(c, gc))
        acc = make_fragment_like(tCgC, acc_dtype)
        gemm(mma, acc, partition_A(thr, sA), partition_B(thr, sB))
    return kernel


@pytest.mark.parametrize("kernel, text", [
    (_kernel_with(tile_to_shape(gmma_layout_atom("K", 128, 16), (M, K)), elem=float32),
     "16-bit integers"),
    (_kernel_with(tile_to_shape(gmma_layout_atom("K", 128, 16), (M, K)), acc_dtype=uint16),
     "float32 register fragment"),
    (_kernel_with(Layout((M, K), (1, M))), "cannot read A"),           # MN-major, atom K
    (_kernel_with(tile_to_shape(gmma_layout_atom("K", 64, 16), (M, K // 2))),
     "blocks disagree"),
])
def test_a_wgmma_that_cannot_run_is_a_typing_error(kernel, text):
    from numba.core.errors import TypingError
    with pytest.raises(TypingError, match=text):
        cuda.compile_ptx(kernel, "void(float32[::1])", cc=(9, 0))


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_wgmma_multiplies_every_gmma_layout_on_a_hopper_gpu(case):
    from gpucase import require_hopper
    require_hopper()
    seed = int.from_bytes(os.urandom(4), "little")
    assert check(case, seed), seed


if __name__ == "__main__":
    from simcase import switch_threads_often
    switch_threads_often()
    seed = int(sys.argv[1])
    print(json.dumps([check(case, seed + i) for i, case in enumerate(CASES)]))
