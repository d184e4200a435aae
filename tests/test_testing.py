"""layoutalg.testing: each checker accepts the algebra's result on random operands and rejects
a wrong one, naming the operation; the module needs hypothesis, the algebra does not."""

import importlib
import subprocess
import sys

import pytest
from hypothesis import assume, given, settings, strategies as st

import layoutalg
from layoutalg import (
    Layout, blocked_product, coalesce, complement, composition, filter, flat_divide,
    flat_product, left_inverse, logical_divide, logical_product, raked_product, right_inverse,
    tiled_divide, tiled_product, zipped_divide, zipped_product,
)
from layoutalg.int_tuple import leaves
from layoutalg.testing import (
    check_blocked_product, check_coalesce, check_complement, check_composition, check_filter,
    check_flat_divide, check_flat_product, check_left_inverse, check_logical_divide,
    check_logical_product, check_raked_product, check_right_inverse, check_tiled_divide,
    check_tiled_product, check_zipped_divide, check_zipped_product, compact_layouts,
    injective_layouts, layout_and_block, layout_and_mode_tiler, layouts, product_pairs,
)

from oracles import unflatten

SETTINGS = settings(max_examples=30, deadline=None)

divisions = st.one_of(layout_and_block(), layout_and_mode_tiler())
singles = lambda s: s.map(lambda L: (L,))

# (operation, checker, operands): every operand tuple has a result
CASES = [
    (coalesce, check_coalesce, singles(layouts())),
    (filter, check_filter, singles(layouts())),
    (composition, check_composition, layout_and_block()),
    (composition, check_composition, layout_and_mode_tiler()),
    (complement, check_complement,
     st.tuples(injective_layouts(max_size=64), st.integers(1, 200))),
    (logical_divide, check_logical_divide, divisions),
    (zipped_divide, check_zipped_divide, divisions),
    (tiled_divide, check_tiled_divide, divisions),
    (flat_divide, check_flat_divide, divisions),
    (logical_product, check_logical_product, product_pairs()),
    (zipped_product, check_zipped_product, product_pairs()),
    (tiled_product, check_tiled_product, product_pairs()),
    (flat_product, check_flat_product, product_pairs()),
    (blocked_product, check_blocked_product, product_pairs()),
    (raked_product, check_raked_product, product_pairs()),
]
IDS = [f"{op.__name__}-{k}" for k, (op, _, _) in enumerate(CASES)]


def bumped(L, data):
    """L with the stride of one leaf of extent > 1 increased by 1: at the index with digit 1
    on that leaf and 0 elsewhere it gives one more, so it is another function."""
    flat, std = list(leaves(L.shape)), list(leaves(L.stride))
    wide = [k for k, s in enumerate(flat) if s > 1]
    assume(wide)
    std[data.draw(st.sampled_from(wide))] += 1
    return Layout(L.shape, unflatten(std, L.shape))


@pytest.mark.parametrize("op, check, operands", CASES, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_the_algebras_results_pass_and_a_changed_stride_fails(op, check, operands, data):
    """A stride changed by 1 changes the function, and each post-condition fixes the
    function of the result (the complement's through its order and the exact cover)."""
    args = data.draw(operands)
    R = op(*args)
    check(*args, R)
    wrong = bumped(R, data)
    with pytest.raises(AssertionError, match=rf"^{op.__name__}\(.* is wrong: "):
        check(*args, wrong)


@SETTINGS
@given(layouts(), st.data())
def test_right_inverse_passes_and_a_wrong_one_fails(L, data):
    check_right_inverse(L, right_inverse(L))
    W = data.draw(layouts(max_size=L.size))
    wrong = any(L(W(i)) != i for i in range(W.size))
    bijection = sorted(L(i) for i in range(L.size)) == list(range(L.size))
    if wrong or (bijection and W.size != L.size):
        with pytest.raises(AssertionError, match=r"^right_inverse\("):
            check_right_inverse(L, W)
    else:
        check_right_inverse(L, W)


@SETTINGS
@given(injective_layouts(), st.data())
def test_left_inverse_passes_and_a_wrong_one_fails(L, data):
    R = left_inverse(L)
    check_left_inverse(L, R)
    wrong = bumped(R, data)
    if any(wrong(L(i)) != i for i in range(L.size)):
        with pytest.raises(AssertionError, match=r"^left_inverse\("):
            check_left_inverse(L, wrong)
    else:
        check_left_inverse(L, wrong)


@SETTINGS
@given(compact_layouts(max_size=64), st.data())
def test_a_right_inverse_of_a_bijection_with_a_mode_dropped_fails(L, data):
    R = right_inverse(L)
    assume(R.rank > 1)
    with pytest.raises(AssertionError, match=r"^right_inverse\(.*bijection"):
        check_right_inverse(L, R[0])


# --- wrong results by hand: a permuted mode, a changed stride, a missing mode -------------
A3 = Layout((4, 2, 3), (2, 1, 8))
SQ = Layout((3, 4), (4, 1))
BL = Layout((2, 5), (1, 2))
WRONG = [
    (check_coalesce, (Layout((2, (1, 6)), (1, (6, 2))), Layout((2, 6), (1, 2))),
     r"^coalesce\(.*modes 0 and 1"),
    (check_coalesce, (Layout((2, (3, 2)), (1, (2, 6))), Layout((2, (3, 2)), (1, (2, 6))), (1, 1)),
     r"^coalesce\(.*, \(1,1\)\) .*mode 1: coalesce\("),
    (check_filter, (Layout((2, 3, 4), (1, 0, 2)), Layout((2, 3, 4), (1, 0, 2))),
     r"^filter\(.*stride 0"),
    (check_composition, (Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1)),
                         Layout((3, (2, 2)), (8, (24, 2)))),             # modes permuted
     r"^composition\(.*not compatible"),
    (check_composition, (A3, (2, None), Layout((2, 2, 3), (4, 1, 8))),
     r"^composition\(.*, \(2,_\)\) .*mode 0: composition\(4:2, 2\) .*at index 1"),
    (check_complement, (Layout((2, 2), (1, 6)), 24, Layout((2, 3), (12, 2))),   # permuted
     r"^complement\(.*not ordered: R\(1\) = 12 >= R\(2\) = 2"),
    (check_complement, (Layout(4, 1), 8, Layout(3, 4)),              # one copy too many
     r"^complement\(.*copies too many"),
    (check_right_inverse, (Layout((4, 2), (2, 1)), Layout(4, 2)), r"^right_inverse\(.*index 1"),
    (check_left_inverse, (Layout((4, 2), (2, 1)), Layout((2, 4), (1, 2))),
     r"^left_inverse\(.*at index 1"),
    (check_logical_divide, (A3, Layout(4, 2), Layout(((2, 3), (2, 2)), ((2, 8), (4, 1)))),
     r"^logical_divide\(.*mode 0"),                                     # modes swapped
    (check_logical_divide, (Layout(8), Layout((2, 2), (1, 1)), Layout(8)),
     r"^logical_divide\(.*no result"),
    (check_zipped_divide, (Layout((128, 64)), (32, 8), tiled_divide(Layout((128, 64)), (32, 8))),
     r"^zipped_divide\(.*rank"),
    (check_tiled_divide, (Layout((128, 64)), (32, 8), flat_divide(Layout((128, 64)), (32, 8))),
     r"^tiled_divide\(.*rank"),
    (check_flat_divide, (A3, Layout(4, 2), logical_divide(A3, Layout(4, 2))),
     r"^flat_divide\(.*rank"),
    (check_logical_product, (Layout((2, 2), (4, 1)), Layout(6, 1),
                             Layout(((2, 2), (2, 3)), ((4, 1), (2, 4)))),
     r"^logical_product\(.*at index 2 of mode 1"),
    (check_logical_product, (SQ, BL, logical_product(BL, SQ)), r"^logical_product\(.*mode 0"),
    (check_zipped_product, (SQ, (2, 5), flat_product(SQ, (2, 5))), r"^zipped_product\(.*rank"),
    (check_tiled_product, (SQ, (2, 5), zipped_product(SQ, (2, 5))), r"^tiled_product\(.*rank"),
    (check_flat_product, (SQ, BL, tiled_product(SQ, BL)), r"^flat_product\(.*rank"),
    (check_blocked_product, (SQ, BL, raked_product(SQ, BL)), r"^blocked_product\(.*mode 0"),
    (check_raked_product, (SQ, BL, blocked_product(SQ, BL)), r"^raked_product\(.*mode 0"),
]


@pytest.mark.parametrize("check, args, message", WRONG,
                         ids=[f"{c.__name__}-{k}" for k, (c, _, _) in enumerate(WRONG)])
def test_a_wrong_result_fails_naming_the_operation(check, args, message):
    with pytest.raises(AssertionError, match=message):
        check(*args)


def test_checkers_return_none_on_a_right_result():
    A = Layout((2, 2), (1, 6))
    assert check_complement(A, 24, complement(A, 24)) is None
    assert check_complement(A, None, complement(A)) is None


# --- hypothesis stays optional ------------------------------------------------------------
def test_import_without_hypothesis_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "hypothesis", None)       # as if it were not installed
    monkeypatch.delitem(sys.modules, "layoutalg.testing")
    with pytest.raises(ImportError, match="pip install hypothesis"):
        importlib.import_module("layoutalg.testing")


def test_import_layoutalg_imports_neither_testing_nor_hypothesis():
    code = ("import sys, layoutalg; "
            "assert 'layoutalg.testing' not in sys.modules and 'hypothesis' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=layoutalg.__path__[0] + "/..")
