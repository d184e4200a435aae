"""wgmma on the GPU with descriptors read off layoutalg's GMMA layouts: a warpgroup multiplies
A (64 x K) by B (N x K) staged in shared memory in each canonical layout (K- and MN-major,
no swizzle and 32/64/128-byte swizzles, bf16, f16 and tf32), one wgmma per k-block with the
descriptor of that k-block's slice, against float64. Then the same with the tiles loaded by
TMA (boxes and tensor maps from layoutalg.atom.tma, an mbarrier waiting for their bytes),
partial tiles zero-filled. On a CPU the same kernels compile to sm_90a PTX holding the
instructions."""

import numpy as np
import pytest

from gemm._env import simulator_active

if simulator_active():
    pytest.skip("imports gemm.arch.sm90 (the PTX intrinsics); the twins are tested in "
                "test_sim_sm90 and test_hopper_sim", allow_module_level=True)

from numba import cuda  # noqa: E402

from gemm.arch.sm90 import (  # noqa: E402
    fence_mbarrier_init, fence_proxy_async, mbarrier_arrive_expect_tx, mbarrier_init,
    mbarrier_wait, smem_desc, tma_load_2d, wgmma_commit, wgmma_fence, wgmma_tile, wgmma_wait,
)
from layoutalg import tile_to_shape  # noqa: E402
from layoutalg.atom import decode, encode  # noqa: E402
from layoutalg.atom.gmma import gmma_descriptor, gmma_layout_atom  # noqa: E402
from layoutalg.atom.tma import make_tma_copy  # noqa: E402

# (op, N, K, (A major, A swizzle), (B major, B swizzle))
CASES = [
    ("bf16", 64, 64, ("K", 128), ("K", 128)),
    ("bf16", 32, 64, ("K", 64), ("K", 32)),
    ("bf16", 16, 32, ("K", 0), ("K", 0)),
    ("bf16", 64, 32, ("MN", 128), ("MN", 64)),
    ("f16", 128, 64, ("MN", 0), ("K", 128)),
    ("f16", 48, 32, ("K", 32), ("MN", 32)),
    ("tf32", 32, 32, ("K", 128), ("K", 64)),
]
TYPE_BITS = {"bf16": 16, "f16": 16, "tf32": 32}


def ptx_d_fragment(thread, i):
    w, lane = divmod(thread, 32)
    g, t = divmod(lane, 4)
    j, e = divmod(i, 4)
    return 16 * w + g + 8 * (e // 2), 8 * j + 2 * t + e % 2


def check_accumulators(flat, ref, op):
    """Each thread's n/2 accumulators (``flat[t * n/2 + i]``) placed by the PTX fragment
    equal ``ref`` (64 x n) to the inputs' precision."""
    n = ref.shape[1]
    got = np.full((64, n), np.nan)
    for t in range(128):
        for i in range(n // 2):
            got[ptx_d_fragment(t, i)] = flat[t * (n // 2) + i]
    tol = 2e-3 if op == "tf32" else 1e-5
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol * np.abs(ref).max())


def stage(major, swizzle, bits, mn, k):
    return tile_to_shape(gmma_layout_atom(major, swizzle, bits), (mn, k))


def plan(case):
    """Host side of a case: the layouts, per-k-block descriptors, and the kernel."""
    op, n, K, (amaj, asw), (bmaj, bsw) = case
    bits = TYPE_BITS[op]
    kk = 256 // bits
    la, lb = stage(amaj, asw, bits, 64, K), stage(bmaj, bsw, bits, n, K)
    da = [gmma_descriptor(la, bits, amaj, k_block=kb).encode() for kb in range(K // kk)]
    db = [gmma_descriptor(lb, bits, bmaj, k_block=kb).encode() for kb in range(K // kk)]
    kernel = make_kernel(wgmma_tile(op, n, amaj == "MN", bmaj == "MN"), bits, la.cosize,
                         lb.cosize, 64 * K, n * K, n // 2, K // kk)
    pos = [np.array([L(i // K, i % K) for i in range(rows * K)], np.uint32)
           for L, rows in ((la, 64), (lb, n))]
    return kernel, pos, np.array(da, np.uint64), np.array(db, np.uint64)


def make_multiply(tile, nacc, kblocks):
    """The warpgroup's part once A and B are in shared memory: one wgmma per k-block (the
    first ignoring the zero-initialised accumulators), then each thread's accumulators to
    ``out[t * nacc ...]``."""
    @cuda.jit(device=True, inline="always")
    def multiply(sa, sb, desc_a, desc_b, out, t):
        acc = cuda.local.array(nacc, np.float32)
        wgmma_fence()
        for kb in range(kblocks):
            tile(acc, smem_desc(sa, desc_a[kb]), smem_desc(sb, desc_b[kb]), kb)
        wgmma_commit()
        wgmma_wait(0)
        for i in range(nacc):
            out[t * nacc + i] = acc[i]
    return multiply


def make_kernel(tile, bits, size_a, size_b, n_a, n_b, nacc, kblocks):
    dtype = np.float32 if bits == 32 else np.uint16
    multiply = make_multiply(tile, nacc, kblocks)

    def kernel(A, pos_a, B, pos_b, desc_a, desc_b, out):
        sa = cuda.shared.array(size_a, dtype, alignment=1024)
        sb = cuda.shared.array(size_b, dtype, alignment=1024)
        t = cuda.threadIdx.x
        for i in range(t, n_a, 128):
            sa[pos_a[i]] = A[i]
        for i in range(t, n_b, 128):
            sb[pos_b[i]] = B[i]
        fence_proxy_async()
        cuda.syncthreads()
        multiply(sa, sb, desc_a, desc_b, out, t)
    return kernel


def _has_hopper():
    try:
        return cuda.is_available() and cuda.get_current_device().compute_capability >= (9, 0)
    except Exception:  # noqa: BLE001 - no driver at all
        return False


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernels_compile_to_sm90a_with_wgmma(case):
    kernel, *_ = plan(case)
    sig = ("void(" + ("float32" if case[0] == "tf32" else "uint16")
           + "[::1], uint32[::1], " + ("float32" if case[0] == "tf32" else "uint16")
           + "[::1], uint32[::1], uint64[::1], uint64[::1], float32[::1])")
    ptx, _ = cuda.compile_ptx(kernel, sig, cc=(9, 0, "a"))
    op, n, K = case[:3]
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k{256 // TYPE_BITS[op]}") >= 1
    assert "wgmma.wait_group.sync.aligned 0" in ptx and "fence.proxy.async" in ptx


@pytest.mark.gpu
@pytest.mark.skipif(not _has_hopper(), reason="needs a GPU of compute capability 9.x")
@pytest.mark.parametrize("case", CASES, ids=str)
def test_wgmma_with_derived_descriptors_matches_float64(case):
    op, n, K = case[:3]
    rng = np.random.default_rng(sum(map(ord, str(case))))
    kernel, (pa, pb), da, db = plan(case)
    a = encode(rng.uniform(-2, 2, (64, K)), op)
    b = encode(rng.uniform(-2, 2, (n, K)), op)
    ref = decode(a, op) @ decode(b, op).T
    if op == "f16":                     # shared tiles hold the 16-bit patterns
        a, b = a.view(np.uint16), b.view(np.uint16)
    out = cuda.to_device(np.full(128 * n // 2, np.nan, np.float32))
    cuda.jit(kernel)[1, 128](cuda.to_device(a.ravel()), cuda.to_device(pa),
                              cuda.to_device(b.ravel()), cuda.to_device(pb),
                              cuda.to_device(da), cuda.to_device(db), out)
    check_accumulators(out.copy_to_host(), ref, op)


# --- TMA loads into the same layouts, then wgmma ---------------------------------------------

# (op, M rows of A in memory (<= 64: the rest zero-filled), N, K, A's (major, swizzle) in
# shared memory, B's; A is row-major (M, K) in memory, B row-major (N, K) for a K-major B and
# row-major (K, N) for an MN-major one)
TMA_CASES = [
    ("bf16", 50, 64, 128, ("K", 128), ("K", 128)),
    ("bf16", 64, 64, 64, ("K", 128), ("MN", 128)),
    ("f16", 37, 128, 64, ("K", 64), ("K", 32)),
    ("tf32", 64, 32, 64, ("K", 128), ("K", 128)),
]


def tma_plan(case):
    op, m, n, K, (amaj, asw), (bmaj, bsw) = case
    bits = TYPE_BITS[op]
    la, lb = stage(amaj, asw, bits, 64, K), stage(bmaj, bsw, bits, n, K)
    ta = make_tma_copy((m, K), (K, 1), la, bits)
    tb = make_tma_copy((n, K), (K, 1) if bmaj == "K" else (1, n), lb, bits)
    kk = 256 // bits
    da = [gmma_descriptor(la, bits, amaj, k_block=kb).encode() for kb in range(K // kk)]
    db = [gmma_descriptor(lb, bits, bmaj, k_block=kb).encode() for kb in range(K // kk)]
    boxes = [np.array([[b.smem_offset, *b.coords] for b in t.boxes], np.uint32) for t in (ta, tb)]
    kernel = make_tma_kernel(wgmma_tile(op, n, amaj == "MN", bmaj == "MN"), bits, la.cosize,
                             lb.cosize, n // 2, K // kk, ta.bytes + tb.bytes)
    return kernel, ta, tb, boxes, np.array(da, np.uint64), np.array(db, np.uint64)


def make_tma_kernel(tile, bits, size_a, size_b, nacc, kblocks, nbytes):
    dtype = np.float32 if bits == 32 else np.uint16
    multiply = make_multiply(tile, nacc, kblocks)

    def kernel(map_a, boxes_a, map_b, boxes_b, desc_a, desc_b, out):
        sa = cuda.shared.array(size_a, dtype, alignment=1024)
        sb = cuda.shared.array(size_b, dtype, alignment=1024)
        bars = cuda.shared.array(1, np.uint64, alignment=8)
        t = cuda.threadIdx.x
        if t == 0:
            mbarrier_init(bars, 0, 1)
            fence_mbarrier_init()
        cuda.syncthreads()
        if t == 0:
            mbarrier_arrive_expect_tx(bars, 0, nbytes)
            for i in range(boxes_a.shape[0]):
                tma_load_2d(sa, boxes_a[i, 0], map_a, boxes_a[i, 1], boxes_a[i, 2], bars, 0)
            for i in range(boxes_b.shape[0]):
                tma_load_2d(sb, boxes_b[i, 0], map_b, boxes_b[i, 1], boxes_b[i, 2], bars, 0)
        mbarrier_wait(bars, 0, 0)
        multiply(sa, sb, desc_a, desc_b, out, t)
    return kernel


def test_tma_plans_of_the_cases():
    """What the kernels will load, on the CPU: whole boxes, their bytes."""
    _, ta, tb, (ba, bb), _, _ = tma_plan(TMA_CASES[0])
    assert ta.box == (64, 64) and ta.dims == (128, 50) and len(ta.boxes) == 2
    assert ba.tolist() == [[0, 0, 0], [4096, 64, 0]]
    assert ta.bytes + tb.bytes == 2 * (64 * 128 + 64 * 128)
    _, _, tb, _, _, _ = tma_plan(TMA_CASES[1])
    assert tb.major == "MN" and tb.box == (64, 64) and tb.dims == (64, 64)


@pytest.mark.parametrize("case", TMA_CASES, ids=str)
def test_tma_kernels_compile_to_sm90a(case):
    kernel = tma_plan(case)[0]
    ptx, _ = cuda.compile_ptx(kernel, "void(uint64[::1], uint32[:, ::1], uint64[::1], "
                              "uint32[:, ::1], uint64[::1], uint64[::1], float32[::1])",
                              cc=(9, 0, "a"))
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier" in ptx
    assert "mbarrier.try_wait.parity" in ptx and "mbarrier.arrive.expect_tx" in ptx


@pytest.mark.gpu
@pytest.mark.skipif(not _has_hopper(), reason="needs a GPU of compute capability 9.x")
@pytest.mark.parametrize("case", TMA_CASES, ids=str)
def test_tma_then_wgmma_matches_float64(case):
    from gemm.tma import tensor_map
    op, m, n, K, _, (bmaj, _) = case
    rng = np.random.default_rng(sum(map(ord, str(case))))
    kernel, ta, tb, (ba, bb), da, db = tma_plan(case)
    a = encode(rng.uniform(-2, 2, (m, K)), op)
    b = encode(rng.uniform(-2, 2, (n, K)), op)
    ref = np.zeros((64, n))
    ref[:m] = decode(a, op) @ decode(b, op).T           # rows m.. of A are zero-filled
    b_mem = b if bmaj == "K" else np.ascontiguousarray(b.T)
    if op == "f16":
        a, b_mem = a.view(np.uint16), b_mem.view(np.uint16)
    ga, gb = cuda.to_device(np.ascontiguousarray(a)), cuda.to_device(b_mem)
    maps = [cuda.to_device(tensor_map(g.device_ctypes_pointer.value, t, op))
            for g, t in ((ga, ta), (gb, tb))]
    out = cuda.to_device(np.full(128 * n // 2, np.nan, np.float32))
    cuda.jit(kernel)[1, 128](maps[0], cuda.to_device(ba), maps[1], cuda.to_device(bb),
                              cuda.to_device(da), cuda.to_device(db), out)
    check_accumulators(out.copy_to_host(), ref, op)
