"""Worked examples from CuTe's layout-algebra documentation, as exact equalities."""

import pytest

from layoutalg import (
    Layout, LayoutError, blocked_product, complement, composition, left_inverse,
    logical_divide, logical_product, raked_product,
)


def L(shape, stride=None):
    return Layout(shape, stride)


@pytest.mark.parametrize("a, b, expected", [
    (L((6, 2), (8, 2)), L((4, 3), (3, 1)), L(((2, 2), 3), ((24, 2), 8))),
    (L(20, 2), L((5, 4), (4, 1)), L((5, 4), (8, 2))),
    (L((10, 2), (16, 4)), L((5, 4), (1, 5)), L((5, (2, 2)), (16, (80, 4)))),
])
def test_composition_examples(a, b, expected):
    assert composition(a, b) == expected


def test_complement_example():
    assert complement(L(4, 2), 24) == L((2, 3), (1, 8))


def test_divide_and_product_examples():
    assert logical_divide(L((4, 2, 3), (2, 1, 8)), L(4, 2)) == L(((2, 2), (2, 3)), ((4, 1), (2, 8)))
    assert logical_product(L((2, 2), (4, 1)), L(6, 1)) == L(((2, 2), (2, 3)), ((4, 1), (2, 8)))
    assert blocked_product(L((3, 4), (4, 1)), L((2, 5), (1, 2))) == L(((3, 2), (4, 5)), ((4, 12), (1, 24)))
    assert raked_product(L((3, 4), (4, 1)), L((2, 5), (1, 2))) == L(((2, 3), (5, 4)), ((12, 4), (24, 1)))


def test_logical_product_with_int_is_a_product():
    A = L((2, 2), (1, 2))
    assert logical_product(A, 3) == L(((2, 2), 3), ((1, 2), 4))


@pytest.mark.parametrize("call", [
    lambda: composition(L((4, 3), (3, 1)), L(3, 2)),
    lambda: complement(L((2, 2), (1, 1)), 8),
    lambda: left_inverse(L((2, 2), (2, 3))),
])
def test_inadmissible_input_raises(call):
    with pytest.raises(LayoutError):
        call()


def test_cutlass_2955_is_right_or_raises():
    A, B = L((6, 2), (1, 7)), L((3, 2), (2, 3))
    try:
        R = composition(A, B)
    except LayoutError:
        return
    assert all(R(i) == A(B(i)) for i in range(B.size))
