"""IntTuple helpers and the Layout API: construction, calls, modes, slicing, printing, repr."""

import pytest
from hypothesis import given, settings, strategies as st

from layoutalg import (
    Layout, LayoutError, append, ceil_div, compatible, congruent, cosize, crd2crd, crd2idx,
    depth, flatten, format_layout, group_modes, idx2crd, make_layout, make_ordered_layout,
    make_row_major, prefix_product, prepend, product, rank, select, shape_div, size,
    slice_and_offset, slice_, suffix_product, take, weakly_congruent,
)
from layoutalg.int_tuple import leaves

from layoutalg.testing import layouts, offsets, shapes

from oracles import flat_digits

SETTINGS = settings(max_examples=100, deadline=None)


# --- IntTuples ----------------------------------------------------------------------------
@SETTINGS
@given(shapes())
def test_idx2crd_and_crd2idx_are_inverse(shp):
    seen = set()
    for i in range(product(shp)):
        c = idx2crd(i, shp)
        assert congruent(c, shp)
        assert all(0 <= x < s for x, s in zip(leaves(c), leaves(shp)))
        assert crd2idx(c, shp) == i
        seen.add(c)
    assert len(seen) == product(shp)


@SETTINGS
@given(shapes(), shapes())
def test_crd2crd_keeps_the_index(a, b):
    if product(a) != product(b):
        return
    for i in range(product(a)):
        assert crd2idx(crd2crd(idx2crd(i, a), a, b), b) == i


@pytest.mark.parametrize("a, b, expected", [          # CuTe's layout-algebra docs
    ((6, 2), 2, (3, 2)), ((6, 2), 3, (2, 2)), ((6, 2), 6, (1, 2)), ((6, 2), 12, (1, 1)),
    ((3, 6, 2, 8), 6, (1, 3, 2, 8)), ((3, 6, 2, 8), 9, (1, 2, 2, 8)),
    ((42, 16, 3), 2, (21, 16, 3)), ((42, 16, 3), 6, (7, 16, 3)),
])
def test_shape_div_docs(a, b, expected):
    assert shape_div(a, b) == expected


def test_shape_div_divisibility_condition():
    with pytest.raises(LayoutError, match="shape divisibility condition"):
        shape_div((6, 2), 4)


def test_int_tuple_helpers():
    assert product((2, (3, 4))) == 24 and product(()) == 1
    assert prefix_product((2, (3, 4))) == (1, (2, 6))
    assert suffix_product((2, 3, 4)) == (12, 4, 1)
    assert ceil_div((10, 7), (4, 2)) == (3, 4) and ceil_div(10, 4) == 3
    assert ceil_div((4, 6), 8) == (1, 3)
    assert flatten((1, (2, (3,)), 4)) == (1, 2, 3, 4) and flatten(5) == 5
    assert congruent((1, (2, 3)), (4, (5, 6))) and not congruent((1, 2), (1, (2, 3)))
    assert weakly_congruent((1, 2), (3, (4, 5))) and not weakly_congruent((1, (2, 3)), (3, 4))
    assert compatible(24, (2, (3, 4))) and compatible((6, 4), ((2, 3), (2, 2)))
    assert not compatible((6, 4), (2, 3, 4)) and not compatible(24, 12)
    assert slice_((None, (1, None)), (4, (2, 3))) == (4, 3)
    assert crd2crd((1, 2), (2, 3), 6) == 5


# --- Layout construction ------------------------------------------------------------------
@pytest.mark.parametrize("args, condition", [
    (((2, 3), (1,)), "not congruent"),
    (((2, 3), (1, (2, 3))), "not congruent"),
    (((2, 0),), "not positive"),
    (((2, -1),), "not positive"),
    (((2, 2.5),), "not an integer"),
    (((2, 3), (1, 1.5)), "not an integer stride"),
    (((2, "3"),), "not an integer"),
])
def test_bad_layouts_raise_naming_the_condition(args, condition):
    with pytest.raises(LayoutError, match=condition):
        Layout(*args)


def test_default_strides_and_helpers():
    assert Layout((2, (3, 4))).stride == (1, (2, 6))
    assert make_row_major((2, 3, 4)) == Layout((2, 3, 4), (12, 4, 1))
    assert make_ordered_layout((2, 3, 4), (1, 2, 0)) == Layout((2, 3, 4), (4, 8, 1))
    assert make_ordered_layout((2, 3, 4), (0, 0, 0)) == Layout((2, 3, 4))
    assert make_layout((2, 3), (3, 1)) == Layout((2, 3), (3, 1))
    L = Layout((4, (2, 3)), (1, (8, 16)))
    assert (size(L), cosize(L), rank(L), depth(L)) == (24, 4 * 1 - 1 + 8 + 32 + 1, 2, 2)
    with pytest.raises(AttributeError):
        L.shape = 3
    assert hash(L) == hash(Layout((4, (2, 3)), (1, (8, 16))))


@SETTINGS
@given(layouts())
def test_calls_by_index_coordinate_and_modes(L):
    flat = list(leaves(L.shape))
    flat_stride = list(leaves(L.stride))
    for i in range(L.size):
        digits = flat_digits(i, flat)
        expected = sum(c * d for c, d in zip(digits, flat_stride))
        assert L(i) == expected
        crd = idx2crd(i, L.shape)
        assert L(crd) == expected
        if L.rank > 1:
            assert L(*crd) == expected
    # L[i] is the i-th mode; concatenating the modes gives L back
    assert make_layout(*[L[i] for i in range(L.rank)]) == L or L.rank == 1
    assert flatten(L) == Layout(tuple(flat), tuple(flat_stride)) or not isinstance(L.shape, tuple)


def test_index_past_the_size_extends_the_last_mode():
    L = Layout((2, 3), (1, 10))
    assert L(6) == 30 and L(7) == 31
    with pytest.raises(LayoutError, match="negative"):
        L(-1)


@SETTINGS
@given(layouts(max_depth=2), st.data())
def test_slicing_with_none(L, data):
    """L(crd with None) is the sub-layout of the None modes, offset by the fixed coordinates."""
    if L.rank < 2:
        return
    k = data.draw(st.integers(0, L.rank - 1))
    fixed = [data.draw(st.integers(0, L[i].size - 1)) for i in range(L.rank)]
    crd = tuple(None if i == k else fixed[i] for i in range(L.rank))
    sub, off = slice_and_offset(crd, L)
    assert L(crd) == sub
    for j in range(sub.size):
        full = tuple(j if i == k else fixed[i] for i in range(L.rank))
        assert sub(j) + off == L(full)


def test_mode_operations():
    L = Layout((2, 3, 4, 5))
    assert group_modes(L, 1, 3) == Layout((2, (3, 4), 5), (1, (2, 6), 24))
    assert select(L, 3, 0) == Layout((5, 2), (24, 1))
    assert take(L, 1, 3) == Layout((3, 4), (2, 6))
    assert append(Layout(2)) == Layout((2, 1), (1, 0))
    assert append(Layout((2, 3)), n=4) == Layout((2, 3, 1, 1), (1, 2, 0, 0))
    assert prepend(Layout(2), Layout(3, 5)) == Layout((3, 2), (5, 1))
    assert make_layout(Layout(2, 3), Layout((2, 2), (1, 6))) == Layout((2, (2, 2)), (3, (1, 6)))
    assert L[1] == Layout(3, 2) and L[-1] == Layout(5, 24)
    with pytest.raises(LayoutError, match="mix"):
        make_layout(Layout(2), 3)


# --- printing -----------------------------------------------------------------------------
@SETTINGS
@given(layouts())
def test_repr_round_trips_and_str_is_cute_notation(L):
    assert eval(repr(L)) == L
    text = str(L)
    assert " " not in text
    parse = lambda t: eval(t.replace(")", ",)"))     # CuTe's (2,(3,4)) as a Python tuple
    shp, std = text.split(":")
    assert Layout(parse(shp), parse(std)) == L


@SETTINGS
@given(layouts(max_depth=2, max_size=64))
def test_print_layout_grid_holds_the_offsets(L):
    if L.rank > 2:
        L = group_modes(L, 1)
    grid = format_layout(L)
    lines = grid.splitlines()
    assert lines[0] == str(L)
    rows = [line for line in lines[3:] if "|" in line]
    m, n = (1, L.size) if L.rank == 1 else (L[0].size, L[1].size)
    assert len(rows) == m
    for i, line in enumerate(rows):
        cells = [int(c) for c in line.split("|")[1:-1]]
        assert cells == [L(j) if L.rank == 1 else L(i, j) for j in range(n)]


def test_str_examples():
    assert str(Layout(((2, 2), 3), ((24, 2), 8))) == "((2,2),3):((24,2),8)"
    assert str(Layout(8)) == "8:1"
    assert offsets(Layout(4, 2)) == [0, 2, 4, 6]
