"""Tiled copies and MMAs: TV layouts, coverage, partitions, retiling, the executor."""

from collections import Counter

import numpy as np
import pytest
import sympy
from hypothesis import given, settings, strategies as st

from layoutalg import (
    ComposedLayout, Layout, LayoutError, RegisterFile, SM75_U16x4_LDSM_T, SM75_U16x8_LDSM_T,
    SM75_U32x1_LDSM_N,
    SM75_U32x2_LDSM_N, SM75_U32x4_LDSM_N, SM80_16x8x8_F16F16F16F16_TN,
    SM80_16x8x8_F32TF32TF32F32_TN, SM80_16x8x16_F32F16F16F32_TN, SM80_CP_ASYNC_CACHEALWAYS,
    SM80_CP_ASYNC_CACHEGLOBAL, Swizzle, Tensor, UniversalCopy, UniversalFMA, elem_less,
    local_tile, make_identity_tensor, make_ordered_layout, make_tensor, make_tiled_copy,
    make_tiled_copy_A, make_tiled_copy_B, make_tiled_copy_C, make_tiled_mma, max_vector_bits,
    run_copy, run_mma, tile_size,
)

T = sympy.Symbol("t", integer=True, nonnegative=True)
F32 = np.float32


def tv_counts(tc):
    """How often each tile index is reached by the TV layout."""
    L = tc.layout_tv
    return Counter(L(t, v) for t in range(L[0].size) for v in range(L[1].size))


def partition_counts(tc, side="D"):
    """How often each tile coordinate is reached by the threads' partitions of an identity
    tile."""
    c = make_identity_tensor(tc.tile_size)
    out = Counter()
    for t in range(tc.size):
        part = getattr(tc.get_slice(t), f"partition_{side}")(c)
        out.update(part.values())
    return out


# --- MoYe's published sizes ---------------------------------------------------------------
def test_moye_tiled_mma_sizes():
    mma = make_tiled_mma(SM80_16x8x8_F16F16F16F16_TN(), (3, 5))
    assert mma.tile_size == tile_size(mma) == (48, 40, 8)
    assert mma.size == 3 * 5 * 32
    C = make_tensor(np.zeros(336 * 360, np.float16), Layout((336, 360)))
    for t in (0, 1, 31, 32, 200, 479):
        part = mma.get_slice(t).partition_C(C)
        assert part.rank == 3 and part.shape[0] == (2, 2)
        assert (part.layout[1].size, part.layout[2].size) == (7, 9)
    frag = mma.get_slice(77).partition_fragment_C(C)
    assert frag.shape == ((2, 2), 7, 9) and frag.dtype == np.float16
    # A (336, 16) and B (360, 16): m16n8k8 holds 4 A values (2x2) and 2 B values per thread;
    # 336 / 48 = 7 M-tiles, 360 / 40 = 9 N-tiles, 16 / 8 = 2 K-blocks.
    A = make_tensor(np.zeros(336 * 16, np.float16), Layout((336, 16)))
    B = make_tensor(np.zeros(360 * 16, np.float16), Layout((360, 16)))
    assert mma.get_slice(77).partition_A(A).shape == ((2, 2), 7, 2)      # (MMA, MMA_M, MMA_K)
    assert mma.get_slice(77).partition_B(B).shape == (2, 9, 2)           # (MMA, MMA_N, MMA_K)
    seen = Counter()
    cC = make_identity_tensor((336, 360))
    for t in range(mma.size):
        seen.update(mma.get_slice(t).partition_C(cC).values())
    assert len(seen) == 336 * 360 and set(seen.values()) == {1}


# --- coverage -----------------------------------------------------------------------------
COPIES = [
    lambda: make_tiled_copy(SM80_CP_ASYNC_CACHEALWAYS(8, F32), (32, 8), (2, 1)),
    lambda: make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, F32), Layout((32, 8)), (4, 1)),
    lambda: make_tiled_copy(UniversalCopy(32), Layout((16, 16), (16, 1)), (1, 1)),
    lambda: make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, np.float16), Layout((32, 4), (4, 1)),
                            (1, 8)),
    lambda: make_tiled_copy(UniversalCopy(64, F32), Layout((8, 4), (4, 1)), Layout((2, 2), (2, 1))),
    lambda: make_tiled_copy_C(UniversalCopy(32), make_tiled_mma(UniversalFMA(), (16, 16))),
    lambda: make_tiled_copy_C(UniversalCopy(32), make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN(),
                                                                 (2, 2))),
]


@pytest.mark.parametrize("make", COPIES)
def test_tiled_copy_covers_tile_exactly_once(make):
    tc = make()
    n = int(np.prod(tc.tile_size))
    counts = tv_counts(tc)
    assert set(counts) == set(range(n)) and set(counts.values()) == {1}
    pc = partition_counts(tc)
    assert len(pc) == n and set(pc.values()) == {1}


def test_partitions_of_partial_tiles_are_predicated_by_identity_tensors():
    """Extents that are not multiples of the tile: the partitions of an identity tensor hold
    every in-bounds coordinate exactly once, plus out-of-bounds ones that elem_less masks."""
    mma = make_tiled_mma(SM80_16x8x8_F16F16F16F16_TN(), (3, 5))           # tile 48 x 40
    tc = make_tiled_copy(SM80_CP_ASYNC_CACHEALWAYS(8, F32), (32, 8), (2, 1))  # tile 64 x 8
    for shape, nthr, part in (((50, 70), mma.size, lambda t, c: mma.get_slice(t).partition_C(c)),
                              ((100, 12), tc.size, lambda t, c: tc.get_slice(t).partition_S(c))):
        seen = Counter()
        for t in range(nthr):
            seen.update(part(t, make_identity_tensor(shape)).values())
        inside = [c for c in seen if elem_less(c, shape)]
        assert sorted(inside) == [(m, n) for m in range(shape[0]) for n in range(shape[1])]
        assert set(seen.values()) == {1} and len(seen) > len(inside)


def test_mma_copies_of_A_and_B_broadcast_over_the_other_mode():
    mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN(), (2, 2))
    a = make_tiled_copy_A(SM75_U32x4_LDSM_N(), mma)
    b = make_tiled_copy_B(SM75_U32x2_LDSM_N(), mma)
    assert a.tile_size == (32, 16) and b.tile_size == (16, 16)
    assert set(tv_counts(a).values()) == {2} and len(tv_counts(a)) == 32 * 16
    assert set(tv_counts(b).values()) == {2} and len(tv_counts(b)) == 16 * 16


def _layout_of(shape, row_major):
    return make_ordered_layout(shape, (1, 0)) if row_major else Layout(shape)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]),
       st.booleans(), st.booleans(), st.integers(0, 3), st.booleans())
def test_hypothesis_thread_value_layouts(tm, tn, vm, vn, thr_rm, val_rm, pad, dst_rm):
    """Any thread layout x value layout tiles its block exactly once, and run_copy moves every
    element of one tile layout into another."""
    thr = _layout_of((tm, tn), thr_rm)
    val = _layout_of((vm, vn), val_rm)
    tc = make_tiled_copy(UniversalCopy(32, np.int32), thr, val)
    M, N = tm * vm, tn * vn
    assert tc.tile_size == (M, N) and tc.size == tm * tn
    pc = partition_counts(tc, "S")
    assert len(pc) == M * N and set(pc.values()) == {1}
    for t in range(tc.size):                        # each thread: its val block at its coord
        m0, n0 = (t // tn, t % tn) if thr_rm else (t % tm, t // tm)
        got = set(tc.get_slice(t).partition_S(make_identity_tensor((M, N))).values())
        assert got == {(m0 * vm + i, n0 * vn + j) for i in range(vm) for j in range(vn)}
    src = make_tensor(np.arange((M + pad) * N, dtype=np.int32), Layout((M, N), (1, M + pad)))
    dst_layout = Layout((M, N), (N, 1)) if dst_rm else Layout((M, N))
    dst = make_tensor(np.full(M * N, -1, np.int32), dst_layout)
    run_copy(tc, src, dst)
    assert all(dst[m, n] == src[m, n] for m in range(M) for n in range(N))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]),
       st.booleans(), st.booleans(), st.booleans(), st.integers(0, 3))
def test_hypothesis_vectorized_copies(tm, tn, vm, vn, w, thr_rm, val_rm, dst_rm, pad):
    """A vector atom of ``w`` values over a value layout whose ``w`` consecutive values run
    along one mode: the tiled copy covers its tile exactly once, and run_copy either copies
    every element or (where the tensors do not keep each thread's ``w`` values contiguous
    and aligned) raises LayoutError before moving anything, never copying wrongly."""
    run = vn if val_rm else vm                      # consecutive values along this mode
    w = min(w, run)
    thr = _layout_of((tm, tn), thr_rm)
    val = _layout_of((vm, vn), val_rm)
    tc = make_tiled_copy(UniversalCopy(32 * w, np.int32), thr, val)
    M, N = tm * vm, tn * vn
    assert tc.tile_size == (M, N)
    counts = tv_counts(tc)
    assert set(counts) == set(range(M * N)) and set(counts.values()) == {1}
    pc = partition_counts(tc, "S")
    assert len(pc) == M * N and set(pc.values()) == {1}
    # the source keeps the value layout's major mode contiguous, with a padded leading dim
    src_layout = Layout((M, N), (N + pad, 1)) if val_rm else Layout((M, N), (1, M + pad))
    src = make_tensor(np.arange((M + pad) * (N + pad), dtype=np.int32), src_layout)
    dst_layout = Layout((M, N), (N, 1)) if dst_rm else Layout((M, N))
    dst = make_tensor(np.full(M * N, -1, np.int32), dst_layout)
    other = M if val_rm else N                      # extent across the padded leading dim
    dst_other = N if dst_rm else M                  # dst's stride along the run: N or M
    breaks_src = w > 1 and pad % w and other > 1
    breaks_dst = w > 1 and dst_rm != val_rm and dst_other > 1
    if breaks_src or breaks_dst:
        with pytest.raises(LayoutError, match="contiguous"):
            run_copy(tc, src, dst)
        assert set(dst.values().tolist()) == {-1}   # refused before anything moved
    else:
        run_copy(tc, src, dst)
        assert all(dst[m, n] == src[m, n] for m in range(M) for n in range(N))


@pytest.mark.parametrize("pad", [1, 2])
def test_16_byte_atom_refuses_data_not_16_byte_contiguous(pad):
    """A 16-byte cp.async over float32 needs 4 contiguous, 16-byte aligned floats per thread.
    A value layout that gives a thread fewer is refused when the tiled copy is built; MoYe's
    shared tiles padded to bM+1 and bM+2 break the alignment, which is refused when the copy
    is laid over them (partition or run_copy), before any data moves."""
    for val in ((1, 1), (2, 1), (6, 1)):
        with pytest.raises(LayoutError, match="multiple"):
            make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, F32), (32, 8), val)
    tc = make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, F32), (32, 8), (4, 1))
    mA = make_tensor(np.arange(256 * 8, dtype=F32), Layout((256, 8)))
    g = local_tile(mA, (128, 8), (1, 0))
    ld = 128 + pad
    s = make_tensor(np.zeros(ld * 8, F32), Layout((128, 8), (1, ld)))
    with pytest.raises(LayoutError, match="alignment"):
        tc.get_slice(0).partition_D(s)
    with pytest.raises(LayoutError, match="cp.async|SM80_CP_ASYNC_CACHEGLOBAL"):
        run_copy(tc, g, s)
    assert not s.values().any()                     # nothing moved
    # the widest atom the padding allows (ld 129: 4 bytes, ld 130: 8 bytes) copies it exactly
    nbytes = {1: 4, 2: 8}[pad]
    narrow = make_tiled_copy(SM80_CP_ASYNC_CACHEALWAYS(nbytes, F32), (32, 8), (nbytes // 4, 1))
    for t in range(0, 256, 5):
        narrow.get_slice(t).partition_D(s)           # accepted for every thread
    g = local_tile(make_tensor(np.arange(256 * 8, dtype=F32), Layout((256, 8))),
                   narrow.tile_size, (1, 0))
    s = make_tensor(np.zeros(ld * 8, F32), Layout(narrow.tile_size, (1, ld)))
    run_copy(narrow, g, s)
    assert all(s[m, k] == g[m, k] for m in range(narrow.tile_size[0]) for k in range(8))


# --- partitions ---------------------------------------------------------------------------
def test_copy_partition_shapes_keep_extra_modes():
    tc = make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, F32), (32, 8), (4, 1))
    assert tc.tile_size == (128, 8)
    mA = make_tensor(np.zeros(256 * 24, F32), Layout((256, 24)))
    gA = local_tile(mA, (128, 8), (1, None))                  # (128, 8, 3)
    tAgA = tc.get_slice(5).partition_S(gA)
    assert tAgA.shape == ((4, 1), 1, 1, 3)                     # (CPY, CPY_M, CPY_K, k)
    sA = make_tensor(np.zeros(2 * 128 * 8, F32), Layout((128, 8, 2), (1, 128, 1024)))
    assert tc.get_slice(5).partition_D(sA).shape == ((4, 1), 1, 1, 2)
    wide = make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, F32), (32, 8), (8, 1))
    assert wide.get_slice(0).partition_S(local_tile(mA, (256, 8), (0, 0))).shape == ((4, 2), 1, 1)


def test_vector_atoms_are_checked():
    with pytest.raises(LayoutError, match="multiple"):            # at construction
        make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, F32), (32, 8), (2, 1))
    tc = make_tiled_copy(SM80_CP_ASYNC_CACHEALWAYS(8, F32), (32, 8), (2, 1))
    padded = make_tensor(np.zeros(65 * 8, F32), Layout((64, 8), (1, 65)))
    with pytest.raises(LayoutError, match="alignment"):           # at partition time
        tc.get_slice(0).partition_D(padded)
    rowmajor = make_tensor(np.zeros(64 * 8, F32), Layout((64, 8), (8, 1)))
    with pytest.raises(LayoutError, match="contiguous"):
        tc.get_slice(0).partition_S(rowmajor)
    shifted = make_tensor(np.zeros(64 * 8 + 1, F32), Layout((64, 8)))
    shifted = Tensor(shifted.engine + 1, shifted.layout)
    with pytest.raises(LayoutError, match="alignment"):
        tc.get_slice(0).partition_S(shifted)
    ok = make_tensor(np.zeros(66 * 8, F32), Layout((64, 8), (1, 66)))
    assert tc.get_slice(3).partition_D(ok).shape == ((2, 1), 1, 1)


def test_swizzled_destination_and_vector_width():
    tc = make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, np.float16), Layout((16, 8), (8, 1)), (1, 8))
    g = make_tensor(np.arange(16 * 64, dtype=np.float16), Layout((16, 64), (64, 1)))
    sw = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((16, 64), (64, 1)))
    s = make_tensor(np.zeros(16 * 64, np.float16), sw)
    run_copy(tc, g, s)
    assert all(s[m, k] == g[m, k] for m in range(16) for k in range(64))
    assert s.engine.base.array.tolist() != g.engine.array.tolist()    # really swizzled
    narrow = make_tensor(np.zeros(16 * 64, np.float16), ComposedLayout(Swizzle(3, 2, 3), 0,
                                                                        Layout((16, 64), (64, 1))))
    with pytest.raises(LayoutError, match="swizzle"):
        tc.get_slice(0).partition_D(narrow)
    probe = make_tiled_copy(UniversalCopy(16, np.float16), Layout((16, 8), (8, 1)), (1, 8))
    assert max_vector_bits(probe, g, s) == 128
    assert max_vector_bits(probe, g, narrow) == 64


def test_symbolic_thread_partitions():
    mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN(), (2, 2))
    p = sympy.Symbol("p")
    sA = make_tensor(p, Layout((64, 32), (32, 1)))
    sym = mma.get_slice(T).partition_A(sA)
    for t in (0, 37, 127):
        num = mma.get_slice(t).partition_A(sA)
        assert num.layout == sym.layout
        assert sympy.simplify(sym.engine.subs(T, t) - num.engine) == 0
    c = mma.get_slice(T).partition_C(make_identity_tensor((64, 64)))
    v = c[0, 1, 1]
    assert all(isinstance(x, sympy.Expr) for x in v)
    assert tuple(x.subs(T, 37) for x in v) == mma.get_slice(37).partition_C(
        make_identity_tensor((64, 64)))[0, 1, 1]
    tc = make_tiled_copy(SM80_CP_ASYNC_CACHEALWAYS(8, F32), (32, 8), (2, 1))
    part = tc.get_slice(T).partition_S(make_tensor(p, Layout((128, 8), (1, 1000))))
    assert part.layout == tc.get_slice(3).partition_S(make_tensor(p, Layout((128, 8), (1, 1000)))).layout
    assert sympy.simplify(part.engine.subs(T, 40) - (p + 2 * 8 + 1000 * 1)) == 0


# --- retile and the ldmatrix executor -----------------------------------------------------
def _positions(shape):
    """A tensor whose values are the column-major index of each coordinate."""
    n = int(np.prod(shape))
    return make_tensor(np.arange(n, dtype=np.int64), Layout(shape))


RETILE_CASES = [
    (SM80_16x8x16_F32F16F16F32_TN, (2, 2), None, SM75_U32x4_LDSM_N, SM75_U32x2_LDSM_N),
    (SM80_16x8x16_F32F16F16F32_TN, (2, 2), None, SM75_U16x8_LDSM_T, SM75_U16x4_LDSM_T),
    (SM80_16x8x16_F32F16F16F32_TN, (2, 2), (32, 32, 16), SM75_U32x4_LDSM_N, SM75_U32x4_LDSM_N),
    (SM80_16x8x8_F16F16F16F16_TN, (2, 1), None, SM75_U32x2_LDSM_N, SM75_U32x1_LDSM_N),
    (SM80_16x8x8_F32TF32TF32F32_TN, (1, 2), None, lambda: UniversalCopy(32),
     lambda: UniversalCopy(32)),
]


@pytest.mark.parametrize("atom, warps, perm, ldA, ldB", RETILE_CASES)
def test_retile_matches_partitions(atom, warps, perm, ldA, ldB):
    """retile_D of an MMA fragment addresses the same tile elements as partition_D."""
    mma = make_tiled_mma(atom(), warps, perm)
    M, N, K = mma.tile_size
    for which, ld, shape in (("A", ldA, (2 * M, 2 * K)), ("B", ldB, (2 * N, 2 * K))):
        copy = (make_tiled_copy_A if which == "A" else make_tiled_copy_B)(ld(), mma)
        pos = _positions(shape)
        ident = make_identity_tensor(shape)
        for t in (0, 3, 33, mma.size - 1):
            thr = mma.get_slice(t)
            part = getattr(thr, f"partition_{which}")(pos)
            frag = getattr(thr, f"partition_fragment_{which}")(pos, np.int64)
            frag.assign(part)
            view = copy.get_slice(t).retile_D(frag)
            want = [m + shape[0] * k for m, k in copy.get_slice(t).partition_D(ident).values()]
            assert view.values().tolist() == want


@pytest.mark.parametrize("atom, warps, perm, ldA, ldB", RETILE_CASES[:4])
def test_ldmatrix_executor_fills_mma_fragments(atom, warps, perm, ldA, ldB):
    """run_copy of an ldmatrix tiled copy (warp-wide shuffle through the atom's bit layouts)
    leaves in each thread exactly its MMA partition of the shared tile."""
    mma = make_tiled_mma(atom(), warps, perm)
    M, N, K = mma.tile_size
    for which, ld, mn in (("A", ldA, M), ("B", ldB, N)):
        shape = (2 * mn, 2 * K)
        lay = Layout(shape) if ld().trans else Layout(shape, (shape[1], 1))
        data = (np.arange(shape[0] * shape[1]) % 2039).astype(np.float16)
        sX = make_tensor(data, lay)
        copy = (make_tiled_copy_A if which == "A" else make_tiled_copy_B)(ld(), mma)
        thr0 = mma.get_slice(0)
        rX = RegisterFile.like(getattr(thr0, f"partition_fragment_{which}")(sX), mma.size)
        run_copy(copy, sX, rX)
        for t in range(mma.size):
            want = getattr(mma.get_slice(t), f"partition_{which}")(sX).values()
            assert np.array_equal(rX.thread(t).values(), want)


def test_run_mma_on_tiles_and_registers():
    mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN(), (2, 2), (32, 32, 16))
    rng = np.random.default_rng(3)
    A = rng.integers(-3, 4, (64, 32)).astype(np.float16)
    B = rng.integers(-3, 4, (64, 32)).astype(np.float16)
    C0 = rng.integers(-3, 4, (64, 64)).astype(np.float32)
    C = C0.copy()
    run_mma(mma, make_tensor(A), make_tensor(B), make_tensor(C))
    assert np.array_equal(C, A.astype(np.float64) @ B.T.astype(np.float64) + C0)
    thr0 = mma.get_slice(0)
    gC = make_tensor(np.zeros((64, 64), np.float32))
    acc = RegisterFile.like(thr0.partition_fragment_C(gC), mma.size)
    run_mma(mma, make_tensor(A), make_tensor(B), acc)
    run_copy(make_tiled_copy_C(UniversalCopy(32, F32), mma), acc, gC)
    assert np.array_equal(gC.engine.array.reshape(64, 64), A.astype(np.float64) @ B.T.astype(np.float64))


def test_run_copy_predication_and_zero_fill():
    tc = make_tiled_copy(UniversalCopy(32, np.int32), (4, 2), (1, 1))
    src = make_tensor(np.arange(32, dtype=np.int32), Layout((4, 8)))
    pred_vals = np.array([m < 3 for n in range(2) for m in range(4)])
    pred = make_tensor(pred_vals, Layout((4, 2)))
    g = local_tile(src, (4, 2), (0, 1))
    dst = make_tensor(np.full(8, -1, np.int32), Layout((4, 2)))
    run_copy(tc, g, dst, pred=pred)
    assert dst.values().tolist() == [8, 9, 10, -1, 12, 13, 14, -1]
    run_copy(tc, g, dst, pred=pred, zfill=True)
    assert dst.values().tolist() == [8, 9, 10, 0, 12, 13, 14, 0]
    out = local_tile(make_tensor(np.arange(10, dtype=np.int32), Layout((5, 2))), (4, 2), (1, 0))
    with pytest.raises(IndexError, match="predicate"):
        run_copy(tc, out, dst)


def test_executor_errors():
    tc = make_tiled_copy(UniversalCopy(32, F32), (4, 2), (1, 1))
    with pytest.raises(ValueError, match="bits"):
        run_copy(tc, make_tensor(np.zeros(8), Layout((4, 2))),
                 make_tensor(np.zeros(8, F32), Layout((4, 2))))
    with pytest.raises(TypeError):
        run_copy(tc, np.zeros(8, F32), make_tensor(np.zeros(8, F32), Layout((4, 2))))
    mma = make_tiled_mma(UniversalFMA(), (4, 2))
    t = make_tensor(np.zeros(16, F32), Layout((4, 4)))
    with pytest.raises(LayoutError, match="modes"):
        run_mma(mma, make_tensor(np.zeros(32, F32), Layout((4, 4, 2))), t,
                make_tensor(np.zeros(8, F32), Layout((4, 2))))


def test_make_tiled_mma_errors():
    atom = SM80_16x8x16_F32F16F16F32_TN()
    with pytest.raises(LayoutError, match="along K"):
        make_tiled_mma(atom, (1, 1, 2))
    with pytest.raises(LayoutError, match="multiple"):
        make_tiled_mma(atom, (2, 2), (24, None, None))
    with pytest.raises(TypeError):
        make_tiled_mma(UniversalCopy(32))
    with pytest.raises(LayoutError, match="one-to-one"):        # thread indices with a gap
        make_tiled_mma(UniversalFMA(), Layout((4, 2), (1, 8)))
    with pytest.raises(LayoutError, match="one-to-one"):        # repeated thread indices
        make_tiled_mma(atom, Layout((2, 2), (1, 0)))
    with pytest.raises(LayoutError, match="bijection"):         # permutation repeating rows
        make_tiled_mma(atom, (2, 2), (Layout((16, 2), (1, 0)), None, None))
    rm = make_tiled_mma(atom, Layout((2, 2), (2, 1)))           # row-major warps are fine
    assert rm.tile_size == (32, 16, 16) and rm.thr_coord(32) == (0, 0, 1, 0)


def test_printing():
    mma = make_tiled_mma(SM80_16x8x8_F16F16F16F16_TN(), (3, 5))
    text = str(mma)
    assert "tile (M,N,K): (48,40,8)" in text and "threads:      480" in text
    assert "layout_C_tv" in text and "SM80_16x8x8_F16F16F16F16_TN" in text
    tc = make_tiled_copy(SM80_CP_ASYNC_CACHEALWAYS(8, F32), (32, 8), (2, 1))
    text = str(tc)
    assert "tile:      (64,8)" in text and "threads:   256" in text and "cp.async.ca" in text
    assert f"layout_tv: {tc.layout_tv}" in text and "values:    2 per thread" in text
    text = str(mma)
    for which in "ABC":
        assert f"layout_{which}_tv:  {getattr(mma, f'get_layout{which}_TV')()}" in text
    grid = make_tiled_copy(UniversalCopy(32), (2, 2), (2, 1)).tv_grid().split("\n")
    assert grid[0].split() == ["T0V0", "T2V0"] and grid[1].split() == ["T0V1", "T2V1"]
