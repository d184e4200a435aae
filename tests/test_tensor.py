"""Tensors: numpy and symbolic engines, identity tensors, local_tile, local_partition."""

import numpy as np
import pytest
import sympy
from hypothesis import given, settings, strategies as st

from layoutalg import (
    ArithTuple, ComposedLayout, E, Layout, LayoutError, ScaledBasis, Swizzle, Tensor,
    dice, elem_less, layout_offsets, local_partition, local_tile, make_fragment_like,
    make_identity_layout, make_identity_tensor, make_tensor,
)

T_SYM = sympy.Symbol("t", integer=True, nonnegative=True)
BX, BY = sympy.symbols("bx by", integer=True, nonnegative=True)
P = sympy.Symbol("p")


# --- engines and access -------------------------------------------------------------------
def test_make_tensor_uses_numpy_strides_c_and_fortran():
    a = np.arange(12).reshape(3, 4)
    for arr in (a, np.asfortranarray(a)):
        t = make_tensor(arr)
        assert t.shape == (3, 4)
        assert all(t[i, j] == arr[i, j] for i in range(3) for j in range(4))
    assert make_tensor(np.asfortranarray(a)).stride == (1, 3)


def test_make_tensor_rejects_noncontiguous_and_short_arrays():
    a = np.arange(24).reshape(4, 6)
    with pytest.raises(ValueError, match="contiguous"):
        make_tensor(a[:, ::2])
    with pytest.raises(ValueError, match="past the array"):
        make_tensor(np.arange(10), Layout((4, 3)))
    with pytest.raises(ValueError, match="needs a layout"):
        make_tensor(P)


def test_slices_are_views_and_writes_land_in_the_array():
    a = np.zeros(24, dtype=np.int64)
    t = make_tensor(a, Layout((4, 6)))
    col = t[None, 2]
    assert col.shape == (4,) and col.engine.offset == 8
    col.assign([1, 2, 3, 4])
    t[3, 5] = 7
    assert a[8:12].tolist() == [1, 2, 3, 4] and a[23] == 7
    assert t.values()[8:12].tolist() == [1, 2, 3, 4]
    assert t[3 + 4 * 5] == 7                     # colexicographic index


def test_values_in_colexicographic_order():
    t = Tensor(np.arange(6), Layout((2, 3), (3, 1)))
    assert t.values().tolist() == [0, 3, 1, 4, 2, 5]
    assert layout_offsets(Layout((2, (2, 2)), (4, (1, 2)))).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_symbolic_engine_carries_offsets():
    t = make_tensor(P, Layout((8, 4), (4, 1)))
    assert t[3, 2] == P + 14
    sub = t[None, 1]
    assert sub.engine == P + 1 and sub.layout == Layout((8,), (4,))
    s = t[T_SYM % 8, None]                      # symbolic coordinate: static layout
    assert sympy.simplify(s.engine - (P + 4 * (T_SYM % 8))) == 0
    assert s.layout == Layout((4,), (1,))


def test_swizzled_layout_applies_to_total_offset():
    sw = Swizzle(2, 0, 2)
    L = ComposedLayout(sw, 0, Layout((4, 4), (4, 1)))
    data = np.arange(16)
    t = make_tensor(data, L)
    assert all(t[i, j] == data[sw(4 * i + j)] for i in range(4) for j in range(4))
    row = t[2, None]                               # the offset 8 goes inside the swizzle
    assert [int(row[j]) for j in range(4)] == [int(data[sw(8 + j)]) for j in range(4)]
    assert row.values().tolist() == [int(data[sw(8 + j)]) for j in range(4)]


# --- composition and the divides ---------------------------------------------------------
def test_tensor_composition_and_divides_index_the_array():
    """Each operation on a tensor's layout keeps the engine: the elements are the numpy
    array's at the coordinates the operation's definition gives."""
    a = np.arange(8 * 6).reshape(8, 6)                # row-major
    t = make_tensor(a)

    def at(k):                                        # colexicographic index into (8, 6)
        return a[k % 8, k // 8]

    c = t.compose(Layout((4, 3), (2, 8)))             # with a layout: t(L(i, j))
    assert c.shape == (4, 3)
    assert all(c[i, j] == at(2 * i + 8 * j) for i in range(4) for j in range(3))
    b = t.compose(Layout(4, 2), Layout(3, 2))         # by-mode tiler: every other row / col
    assert b.shape == (4, 3) and all(b[i, j] == a[2 * i, 2 * j] for i in range(4) for j in range(3))
    z = t.zipped_divide((2, 3))                       # ((tile), (rest))
    assert z.shape == ((2, 3), (4, 2))
    assert all(z[(i, j), (p, q)] == a[2 * p + i, 3 * q + j]
               for i in range(2) for j in range(3) for p in range(4) for q in range(2))
    L = t.logical_divide((2, 3))                      # ((tile_m, rest_m), (tile_n, rest_n))
    assert L.shape == ((2, 4), (3, 2))
    assert all(L[(i, p), (j, q)] == a[2 * p + i, 3 * q + j]
               for i in range(2) for j in range(3) for p in range(4) for q in range(2))
    assert t.tiled_divide((2, 3)).shape == ((2, 3), 4, 2)
    f = t.flat_divide((2, 3))
    assert f.shape == (2, 3, 4, 2) and f[1, 2, 3, 1] == a[7, 5]
    s = t.logical_divide((Layout(2, 4), None))        # strided tile: rows {p, p + 4}
    assert s.shape == ((2, 4), 6)
    assert all(s[(i, p), j] == a[4 * i + p, j]
               for i in range(2) for p in range(4) for j in range(6))
    assert t.mode(1).shape == 6 and t.mode(1).values().tolist() == a[0].tolist()
    assert z.engine is t.engine and z.values().size == 48     # same data, no copy


# --- basis vectors and identity tensors ---------------------------------------------------
def test_scaled_basis_arithmetic():
    assert E(0) * 2 + E(1) * 3 == 3 * E(1) + E(0) + E(0)
    assert E(1) * 0 == 0 and hash(E(1) * 0) == hash(0)
    assert str(E(1) * 2 + E(0)) == "1@0+2@1"
    assert ArithTuple((1, 2)) + (E(0) * 5 + E(1)) == (6, 3)
    with pytest.raises(LayoutError):
        ArithTuple((1,)) + E(1)
    with pytest.raises(ValueError):
        E(-1)


def test_identity_tensor_values_are_coordinates():
    C = make_identity_tensor((3, (2, 2)))
    assert C[2, (1, 1)] == (2, 3)
    assert C.values() == [(m, n) for n in range(4) for m in range(3)]
    assert str(make_identity_layout((4, 6))) == "(4,6):(1@0,1@1)"


def test_identity_tensor_with_symbols():
    g = local_tile(make_identity_tensor((100, 64)), (32, 8), (BX, None))
    c = g[3, 2, BY]
    assert c == (32 * BX + 3, 8 * BY + 2)


def test_elem_less():
    assert elem_less((3, 4), (4, 5)) and not elem_less((3, 5), (4, 5))
    rel = elem_less((T_SYM, 1), (4, 2))            # symbolic: the comparisons themselves
    assert isinstance(rel, tuple) and rel[1] is True
    assert rel[0] == sympy.StrictLessThan(T_SYM, 4)


# --- local_tile ---------------------------------------------------------------------------
def test_local_tile_shapes_and_values():
    a = np.arange(64 * 40).reshape(64, 40)          # row-major
    mA = make_tensor(a)
    gA = local_tile(mA, (16, 8), (2, None))
    assert gA.shape == (16, 8, 5)
    assert all(gA[i, j, k] == a[32 + i, 8 * k + j] for i in range(16) for j in range(8)
               for k in range(5))
    g = local_tile(mA, (16, 8), (1, 3))
    assert g.shape == (16, 8) and g[0, 0] == a[16, 24]


def test_local_tile_projection():
    a = np.arange(32 * 24).reshape(32, 24)
    mA = make_tensor(a)
    g = local_tile(mA, (8, 100, 4), (2, 7, None), proj=(1, None, 1))
    assert g.shape == (8, 4, 6) and g[1, 2, 3] == a[17, 14]


def test_local_tile_pads_partial_tiles_and_identity_marks_them():
    mA = make_tensor(np.arange(10 * 7).reshape(10, 7))
    cA = make_identity_tensor((10, 7))
    g = local_tile(mA, (4, 4), (2, None))           # rows 8..11, two k-tiles
    c = local_tile(cA, (4, 4), (2, None))
    assert g.shape == c.shape == (4, 4, 2)
    inside = [(i, j, k) for i in range(4) for j in range(4) for k in range(2)
              if elem_less(c[i, j, k], (10, 7))]
    assert len(inside) == 2 * 7
    assert all(g[crd] == 7 * c[crd][0] + c[crd][1] for crd in inside)


def test_local_tile_symbolic_block():
    mA = make_tensor(P, Layout((1024, 64), (64, 1)))
    gA = local_tile(mA, (128, 8), (BX, None))
    assert gA.layout == Layout((128, 8, 8), (64, 1, 8))
    assert sympy.expand(gA.engine - (P + 8192 * BX)) == 0


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 9), st.integers(1, 9),
       st.booleans())
def test_local_tile_matches_numpy_blocks(M, N, bm, bn, fortran):
    a = np.arange(M * N).reshape(M, N)
    if fortran:
        a = np.asfortranarray(a)
    mA, cA = make_tensor(a), make_identity_tensor((M, N))
    for bx in range(-(-M // bm)):
        g = local_tile(mA, (bm, bn), (bx, None))
        c = local_tile(cA, (bm, bn), (bx, None))
        for crd in [(i, j, k) for i in range(bm) for j in range(bn) for k in range(g.shape[2])]:
            m, n = c[crd]
            assert (m, n) == (bx * bm + crd[0], crd[2] * bn + crd[1])
            if m < M and n < N:
                assert g[crd] == a[m, n]


# --- local_partition ----------------------------------------------------------------------
def test_local_partition_values():
    C = make_identity_tensor((8, 12))
    thr = Layout((4, 3), (3, 1))                    # row-major threads
    seen = []
    for t in range(12):
        part = local_partition(C, thr, t)
        assert part.shape == (2, 4)
        m0, n0 = t // 3, t % 3                     # thr(m0, n0) == t
        assert part.values() == [(m0 + 4 * i, n0 + 3 * j) for j in range(4) for i in range(2)]
        seen += part.values()
    assert sorted(seen) == sorted(C.values())


def test_local_partition_projection_and_symbols():
    A = make_tensor(P, Layout((16, 8)))
    part = local_partition(A, Layout((4, 2)), T_SYM, proj=(1, None))
    assert part.shape == (4, 8)
    assert sympy.simplify(part.engine - (P + T_SYM % 4)) == 0
    assert dice((1, None), Layout((4, 2))) == Layout(4, 1)


# --- fragments ----------------------------------------------------------------------------
def test_make_fragment_like():
    f = make_fragment_like(Layout(((2, 2), 3), ((64, 1), 8)), np.float16)
    assert f.layout == Layout(((2, 2), 3)) and f.dtype == np.float16
    assert f.values().tolist() == [0] * 12
    g = make_fragment_like(make_tensor(np.ones(6, np.int32), Layout((2, 3))))
    assert g.dtype == np.int32
    with pytest.raises(ValueError, match="dtype"):
        make_fragment_like(make_tensor(P, Layout(4)))
    with pytest.raises(TypeError):
        make_fragment_like((2, 3))


def test_scaled_basis_is_a_layout_stride():
    L = make_identity_layout((4, 6))
    assert isinstance(L.stride[1], ScaledBasis)
    assert layout_offsets(L)[7].tolist() == [3, 1]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 9), st.integers(0, 9))
def test_identity_elements_by_index_are_the_origin_plus_the_layout(m, n, r0):
    """``t[i]`` of a small identity tensor (read from its layout's table of coordinates)
    is its origin plus the layout's value at ``i``, for int and symbolic origins and a
    tiled view; a basis mode past the origin's rank is refused."""
    full = make_identity_tensor(((2, m), n))
    tiled = local_tile(make_identity_tensor((2 * m + r0, n)), (2, n), (r0 % m, 0))
    for t in (full, Tensor(ArithTuple((r0, BX)), full.layout), tiled):
        assert [t[i] for i in range(t.layout.size)] == [
            t.engine + t.layout(i) for i in range(t.layout.size)]
    with pytest.raises(LayoutError, match="rank-1"):
        Tensor(ArithTuple((r0,)), full.layout)[2 * m]


def test_identity_elements_of_a_broadcast_view_are_its_origin():
    """A view of an identity tensor whose strides are all 0 (a copy's run of one element,
    broadcast) has the origin at every index (its table of offsets has no basis column: it
    once failed there)."""
    t = Tensor(ArithTuple((3, 7)), Layout((2, 1), (0, 0)))
    assert [t[i] for i in range(2)] == [ArithTuple((3, 7))] * 2
