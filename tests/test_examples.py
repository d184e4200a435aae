"""Worked examples from CuTe's layout-algebra documentation (media/docs/cute/02_layout_algebra.md)
and the issue, as exact equalities; and the inputs that must raise, with the condition named."""

import pytest

from layoutalg import (
    Layout, LayoutError, blocked_product, coalesce, complement, composition, left_inverse,
    logical_divide, logical_product, raked_product, right_inverse, tile_to_shape, zipped_divide,
)


def L(shape, stride=None):
    return Layout(shape, stride)


def test_coalesce_examples():
    a = L((2, (1, 6)), (1, (6, 2)))
    assert coalesce(a) == L(12, 1)
    assert coalesce(a, (1, 1)) == L((2, 6), (1, 2))
    assert coalesce(a, (1, 1)) == Layout((coalesce(a[0]).shape, coalesce(a[1]).shape),
                                         (coalesce(a[0]).stride, coalesce(a[1]).stride))


@pytest.mark.parametrize("a, b, expected", [
    (L((6, 2), (8, 2)), L((4, 3), (3, 1)), L(((2, 2), 3), ((24, 2), 8))),
    (L(20, 2), L((5, 4), (4, 1)), L((5, 4), (8, 2))),
    (L((10, 2), (16, 4)), L((5, 4), (1, 5)), L((5, (2, 2)), (16, (80, 4)))),
    (L((10, 2), (16, 4)), L(5, 1), L(5, 16)),
    (L((10, 2), (16, 4)), L(4, 5), L((2, 2), (80, 4))),
])
def test_composition_examples(a, b, expected):
    assert composition(a, b) == expected


def test_by_mode_composition_examples():
    a = L((12, (4, 8)), (59, (13, 1)))
    assert composition(a, (L(3, 4), L(8, 2))) == L((3, (2, 4)), (236, (26, 1)))
    assert composition(a, (3, 8)) == L((3, (4, 2)), (59, (13, 1)))


@pytest.mark.parametrize("a, cotarget, expected", [
    (L(4, 1), 24, L(6, 4)),
    (L(6, 4), 24, L(4, 1)),
    (L((4, 6), (1, 4)), 24, L(1, 0)),
    (L(4, 2), 24, L((2, 3), (1, 8))),
    (L((2, 4), (1, 6)), 24, L(3, 2)),
    (L((2, 2), (1, 6)), 24, L((3, 2), (2, 12))),
])
def test_complement_examples(a, cotarget, expected):
    assert complement(a, cotarget) == expected


def test_divide_and_product_examples():
    assert logical_divide(L((4, 2, 3), (2, 1, 8)), L(4, 2)) == L(((2, 2), (2, 3)), ((4, 1), (2, 8)))
    assert complement(L((2, 2), (4, 1)), 24) == L((2, 3), (2, 8))
    assert logical_product(L((2, 2), (4, 1)), L(6, 1)) == L(((2, 2), (2, 3)), ((4, 1), (2, 8)))
    assert blocked_product(L((3, 4), (4, 1)), L((2, 5), (1, 2))) == L(((3, 2), (4, 5)), ((4, 12), (1, 24)))
    assert raked_product(L((3, 4), (4, 1)), L((2, 5), (1, 2))) == L(((2, 3), (5, 4)), ((12, 4), (24, 1)))


def test_logical_product_with_a_reordered_tiler():
    # (2,2):(4,1) repeated in the order of (4,2):(2,1): 8 tiles
    P = logical_product(L((2, 2), (4, 1)), L((4, 2), (2, 1)))
    assert P == L(((2, 2), (4, 2)), ((4, 1), (8, 2)))


def test_zipped_divide_shapes_of_the_docs():
    a = L((9, (4, 8)), (59, (13, 1)))
    zd = zipped_divide(a, (L(3, 3), L((2, 4), (1, 8))))
    assert (zd[0].size, zd[1].size) == (24, 12)
    assert zd[0] == composition(a, (L(3, 3), L((2, 4), (1, 8))))


def test_gemm_tilings():
    # a 128x8 tile of a column-major (M,K) = (512,64) matrix, and the tile grid
    A = L((512, 64))
    Z = zipped_divide(A, (128, 8))
    assert Z == L(((128, 8), (4, 8)), ((1, 512), (128, 4096)))
    # a (32,8) thread layout tiled over 128x8 elements: thread t, value v
    assert tile_to_shape(L((32, 8), (8, 1)), (128, 8)) == L((128, 8), (8, 1))
    assert tile_to_shape(L((32, 8), (8, 1)), (128, 16)) == L((128, (8, 2)), (8, (1, 1024)))
    assert right_inverse(L((32, 8), (8, 1))) == L((8, 32), (32, 1))
    assert left_inverse(L((4, 8), (8, 1))) == L((8, 4), (4, 1))


def test_logical_product_with_int_is_a_product():
    A = L((2, 2), (1, 2))
    assert logical_product(A, 3) == L(((2, 2), 3), ((1, 2), 4))


@pytest.mark.parametrize("call, condition", [
    (lambda: composition(L((4, 3), (3, 1)), L(3, 2)), "divisibility condition"),
    (lambda: composition(L((6, 2), (1, 7)), L((3, 2), (2, 3))), "overlap"),
    (lambda: complement(L((2, 2), (1, 1)), 8), "not injective"),
    (lambda: left_inverse(L((2, 2), (2, 3))), "no left"),
    (lambda: L((2, 3), (1, 2, 3)), "not congruent"),
    (lambda: L((2, 0)), "not positive"),
    (lambda: L((2, 1.5)), "not an integer"),
    (lambda: composition(L(8), L(4, -1)), "non-negative integer strides"),
    (lambda: complement(L(4), 0), "positive integer"),
])
def test_inadmissible_input_raises_naming_the_condition(call, condition):
    with pytest.raises(LayoutError, match=condition):
        call()


def test_cutlass_2955_is_right_or_raises():
    A, B = L((6, 2), (1, 7)), L((3, 2), (2, 3))
    try:
        R = composition(A, B)
    except LayoutError:
        return
    assert all(R(i) == A(B(i)) for i in range(B.size))
