"""Swizzles, composed layouts used as layouts, element-size casts and common vectors."""

import pytest
from hypothesis import given, settings, strategies as st

from layoutalg import (
    ComposedLayout, Layout, LayoutError, Swizzle, coalesce, composition, downcast,
    logical_divide, max_common_layout, max_common_vector, recast, right_inverse, tile_to_shape,
    tiled_divide, upcast, zipped_divide,
)
from layoutalg.int_tuple import leaves

from layoutalg.testing import (
    check_composition, check_logical_divide, compact_layouts, layout_and_block, layouts,
    offsets, swizzles,
)

from oracles import swizzle_reference

SETTINGS = settings(max_examples=100, deadline=None)


# --- Swizzle ------------------------------------------------------------------------------
@SETTINGS
@given(swizzles(), st.integers(1, 3))
def test_swizzle_is_a_bijection_matching_cutes_formula(sw, blocks):
    n = sw.domain_size * blocks
    image = [sw(i) for i in range(n)]
    assert sorted(image) == list(range(n))                  # a permutation of its domain
    assert all(sw(sw(i)) == i for i in range(n))            # its own inverse
    assert all(image[i] == swizzle_reference(sw.bits, sw.base, sw.shift, i) for i in range(n))
    # each aligned block of domain_size offsets maps onto itself
    D = sw.domain_size
    assert all(image[i] // D == i // D for i in range(n))


def test_swizzle_examples_and_errors():
    sw = Swizzle(3, 3, 3)                   # the 128-byte swizzle of 16-bit 8x64 tiles
    assert [sw(8 * 64 * 0 + 64 * r) for r in range(8)] == [64 * r + 8 * r for r in range(8)]
    assert str(sw) == "Sw<3,3,3>" and eval(repr(sw)) == sw
    with pytest.raises(LayoutError, match="shift"):
        Swizzle(3, 0, 2)
    with pytest.raises(LayoutError, match="integers"):
        Swizzle(1.0, 0, 3)


# --- ComposedLayout used wherever a layout is ---------------------------------------------
ATOM = composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1)))


def test_composed_layout_call_and_repr():
    assert isinstance(ATOM, ComposedLayout)
    sw, inner = Swizzle(3, 3, 3), Layout((8, 64), (64, 1))
    assert all(ATOM(i) == sw(inner(i)) for i in range(512))
    assert all(ATOM(r, c) == sw(inner(r, c)) for r in range(8) for c in range(64))
    assert eval(repr(ATOM)) == ATOM and str(ATOM) == "Sw<3,3,3> o 0 o (8,64):(64,1)"
    assert sorted(offsets(ATOM)) == list(range(512))
    assert ATOM.cosize == 512


def test_composed_layout_slicing_keeps_the_offset():
    row = ATOM(3, None)
    assert isinstance(row, ComposedLayout)
    assert all(row(c) == ATOM(3, c) for c in range(64))


@SETTINGS
@given(st.data())
def test_composed_layout_in_composition_and_divides(data):
    inner = data.draw(compact_layouts(max_size=256))
    sw = data.draw(swizzles())
    off = data.draw(st.integers(0, 3)) * sw.domain_size
    C = ComposedLayout(sw, off, inner)
    _, B = data.draw(layout_and_block(st.just(inner)))
    check_composition(C, B, composition(C, B))
    D = logical_divide(C, B)
    check_logical_divide(C, B, D)
    plain = logical_divide(inner, B)
    assert all(D(i) == sw(off + plain(i)) for i in range(plain.size))
    Z = zipped_divide(C, B)
    assert all(Z(i) == sw(off + zipped_divide(inner, B)(i)) for i in range(plain.size))


def test_swizzled_smem_atom_tiled_to_128x64():
    T = tile_to_shape(ATOM, (128, 64))
    assert isinstance(T, ComposedLayout) and T.shape == (128, 64)
    sw = Swizzle(3, 3, 3)
    for r in range(128):
        for c in range(64):
            assert T(r, c) == sw(64 * r + c)
    tiles = tiled_divide(T, (Layout(8), Layout(64)))
    assert tiles(0, 3, 0) == T(3 * 8, 0)


# --- upcast / downcast / recast -----------------------------------------------------------
def _one_unit_stride(L):
    return sum(1 for s, d in zip(leaves(L.shape), leaves(L.stride)) if s > 1 and d == 1) <= 1


@SETTINGS
@given(layouts(), st.sampled_from([2, 4, 8]))
def test_downcast_then_upcast_round_trips(L, n):
    units = [s for s, d in zip(leaves(L.shape), leaves(L.stride)) if d == 1]
    if not _one_unit_stride(L) or not units:      # overlapping, or no adjacent elements
        with pytest.raises(LayoutError, match="stride 1"):
            downcast(L, n)
        return
    D = downcast(L, n)
    assert upcast(D, n) == L
    assert recast(D, 16, 16 * n) == L and recast(L, 16 * n, 16) == D
    # the split elements: each offset x of L becomes the n offsets n*x + k
    if any(s > 1 and d == 1 for s, d in zip(leaves(L.shape), leaves(L.stride))):
        expected = sorted(n * x + k for x in offsets(L) for k in range(n))
        assert sorted(offsets(D)) == expected


@SETTINGS
@given(compact_layouts(max_size=256), st.sampled_from([2, 4]))
def test_upcast_then_downcast_round_trips_on_vectorizable_layouts(M, n):
    """L = downcast(M, n) is made of n-element vectors; upcast views each as one element."""
    if not _one_unit_stride(M):
        return
    L = downcast(M, n)
    U = upcast(L, n)
    assert sorted(set(x // n for x in offsets(L))) == sorted(set(offsets(U)))
    assert downcast(U, n) == L


def test_cast_examples_and_errors():
    assert upcast(Layout((8, 4), (1, 8)), 2) == Layout((4, 4), (1, 4))
    assert downcast(Layout((4, 4), (1, 4)), 2) == Layout((8, 4), (1, 8))
    assert downcast(Layout((1, 4), (1, 8)), 2) == Layout((2, 4), (1, 16))
    with pytest.raises(LayoutError, match="needs a mode of stride 1"):
        downcast(Layout((4, 4), (2, 8)), 2)
    assert upcast(Layout((4, 8), (0, 1)), 4) == Layout((4, 2), (0, 1))
    assert upcast(Layout((8, 4), (-1, 8)), 2) == Layout((4, 4), (-1, 4))    # sign kept
    assert upcast(Layout((8, 4), (-4, 1)), 2) == Layout((8, 2), (-2, 1))
    with pytest.raises(LayoutError, match="divide"):
        upcast(Layout(3, 1), 2)
    with pytest.raises(LayoutError, match="multiple"):
        recast(Layout(4), 16, 24)


# --- max_common_vector --------------------------------------------------------------------
@SETTINGS
@given(st.data())
def test_max_common_vector_is_contiguous_in_both(data):
    a = data.draw(compact_layouts(max_size=256))
    flat = tuple(leaves(a.shape))
    order = data.draw(st.permutations(range(len(flat))))
    from layoutalg import make_ordered_layout
    b = make_ordered_layout(flat, tuple(order))
    a = Layout(flat, tuple(leaves(a.stride)))
    n = max_common_vector(a, b)
    inv = right_inverse(b)
    run = 0
    while run < inv.size and a(inv(run)) == run and b(inv(run)) == run:
        run += 1
    assert n == run                       # exactly the common contiguous run
    common = max_common_layout(a, b)
    assert common.size == n
    assert all(a(common(i)) == i and b(common(i)) == i for i in range(n))


def test_max_common_vector_examples():
    assert max_common_vector(Layout((4, 8)), Layout((4, 8), (8, 1))) == 1
    assert max_common_vector(Layout((4, 8)), Layout((2, 2, 8), (1, 2, 4))) == 32
    assert max_common_vector(Layout((8, 64), (64, 1)), ATOM) == 8
    assert coalesce(max_common_layout(Layout((8, 8)), Layout((8, 8)))) == Layout(64)
