"""Post-conditions of coalesce, filter, composition, complement and the inverses, on random
hierarchical layouts (hypothesis), checked by brute force over every index."""

import re

from hypothesis import example, given, settings, strategies as st

from layoutalg import (
    Layout, LayoutError, coalesce, complement, composition, filter, left_inverse, make_layout,
    nullspace, right_inverse,
)
from layoutalg.int_tuple import leaves

from layoutalg.testing import (
    check_coalesce, check_complement, check_composition, check_filter, check_left_inverse,
    check_right_inverse, composable_pairs, compact_layouts, injective_layouts, layout_and_block,
    layout_and_mode_tiler, layouts, offsets,
)

from oracles import complement_exists, greedy_translates, representable_compatible_with

SETTINGS = settings(max_examples=150, deadline=None)


def flat_modes(L):
    return list(zip(leaves(L.shape), leaves(L.stride)))


# --- coalesce and filter ------------------------------------------------------------------
@SETTINGS
@given(layouts())
def test_coalesce_keeps_the_function_and_is_flat(L):
    check_coalesce(L, coalesce(L))


@SETTINGS
@given(layouts(max_depth=2), st.data())
def test_coalesce_with_profile_keeps_the_rank_and_each_mode(L, data):
    profile = (1,) * data.draw(st.integers(1, L.rank))
    C = coalesce(L, profile)
    check_coalesce(L, C, profile)


@SETTINGS
@given(layouts())
def test_filter_keeps_the_offsets_without_broadcast_modes(L):
    check_filter(L, filter(L))


# --- composition --------------------------------------------------------------------------
def divisibility_fails(A, B):
    """CuTe's divisibility conditions, walked independently for every leaf n:d of B over the
    coalesced extents of A: the stride d must step over whole extents until one of them is a
    multiple of what is left of it (stride divisibility), and from there the n elements must
    fill whole extents until the last one holds the rest (shape divisibility). One relaxation
    is allowed: a leaf whose elements all fit in one extent needs no divisibility."""
    ext = [s for s, _ in flat_modes(coalesce(A))][:-1]
    for n, d in flat_modes(B):
        if n == 1 or d == 0:
            continue
        rest_n, rest_d = n, d
        for s in ext:
            if s % rest_d == 0:
                room = s // rest_d
                if rest_n <= room:
                    break
                if rest_n % room:
                    return True
                rest_n //= room
                rest_d = 1
            elif rest_d % s == 0:
                rest_d //= s
            elif (rest_n - 1) * rest_d < s:
                break
            else:
                return True
    return False


def compose_or_explain(A, B):
    """R == A o B satisfies the post-conditions, or it raises only where no layout can."""
    truth = lambda i: A(B(i))
    try:
        R = composition(A, B)
    except LayoutError as e:
        msg = str(e)
        assert "divisibility condition" in msg or "overlap" in msg, msg
        representable = representable_compatible_with(truth, B.shape)
        if "overlap" in msg:
            assert not representable, msg
        else:
            assert divisibility_fails(A, B) or not representable, msg
        return None
    check_composition(A, B, R)
    return R


@settings(max_examples=400, deadline=None)
@given(composable_pairs())
@example((Layout((6, 2), (1, 7)), Layout((3, 2), (2, 3))))     # cutlass issue 2955
@example((Layout((4, 3), (3, 1)), Layout(3, 2)))
def test_composition_is_a_o_b_or_raises_with_reason(pair):
    compose_or_explain(*pair)


@settings(max_examples=300, deadline=None)
@given(st.one_of(composable_pairs(), layout_and_block()))
@example((Layout((4, 1), (1, 0)), Layout(8, 1)))               # A's last leaf has size 1
@example((Layout(6, 5), Layout((2, 3), (3, 1))))                # A is one mode
@example((Layout((4, 3), (3, 1)), Layout((1, 3), (-1, 2))))    # a negative stride in B
def test_composition_fast_paths_agree_with_the_checked_walk(pair):
    """The int fast paths of composition give the layout of the general walk (the one that
    also serves symbolic layouts), and raise exactly where it raises."""
    from layoutalg.core import _compose_checked, _extended_modes
    A, B = pair
    try:
        expected = _compose_checked(A, B, _extended_modes(A))
    except LayoutError as e:
        try:
            R = composition(A, B)
        except LayoutError as e2:
            assert str(e2) == str(e)
            return
        raise AssertionError(f"fast path returned {R}, the checked walk raised {e}")
    assert composition(A, B) == expected


@SETTINGS
@given(layout_and_block())
def test_composition_with_a_block_always_succeeds(pair):
    A, B = pair
    assert compose_or_explain(A, B) is not None


def test_cutlass_2955_has_no_correct_layout_and_raises():
    A, B = Layout((6, 2), (1, 7)), Layout((3, 2), (2, 3))
    assert not representable_compatible_with(lambda i: A(B(i)), B.shape)
    try:
        composition(A, B)
    except LayoutError as e:
        assert "overlap" in str(e) and "2955" in str(e)
    else:
        raise AssertionError("composition returned a layout for cutlass issue 2955")


def test_stride_divisibility_case_is_not_a_layout_and_raises():
    A, B = Layout((4, 3), (3, 1)), Layout(3, 2)
    assert not representable_compatible_with(lambda i: A(B(i)), B.shape)
    try:
        composition(A, B)
    except LayoutError as e:
        assert "shape divisibility condition" in str(e)
    else:
        raise AssertionError("(4,3):(3,1) o 3:2 returned a layout")


@SETTINGS
@given(layout_and_mode_tiler())
def test_composition_by_mode(pair):
    A, tiler = pair
    check_composition(A, tiler, composition(A, tiler))


# --- complement ---------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(layouts(max_size=128), st.integers(1, 300))
@example(Layout((2, 2), (1, 1)), 8)
@example(Layout(4, 2), 24)
def test_complement_post_conditions_or_no_complement(L, cotarget):
    """CuTe's complement completes L's whole codomain (then repeats it up to the cotarget): it
    exists exactly when L, without its stride-0 modes, is injective and its image tiles
    ``[0, max(cotarget, cosize))`` by the translates of a layout (brute force)."""
    distinct = sorted(set(offsets(L)))
    nonzero = [s for s, d in flat_modes(L) if d != 0]
    injective_on_nonzero = len(distinct) == _product(nonzero)
    exists = injective_on_nonzero and complement_exists(distinct, max(cotarget, L.cosize))
    try:
        R = complement(L, cotarget)
    except LayoutError as e:
        assert not exists, (L, cotarget, str(e))
        assert "not injective" in str(e) or "no complement" in str(e)
        return
    assert exists, (L, cotarget, R)
    check_complement(L, cotarget, R)        # ordered, (L, R) a bijection onto a cover
    assert offsets(R) == greedy_translates(distinct, len(distinct) * R.size)   # forced


def _product(xs):
    p = 1
    for x in xs:
        p *= x
    return p


# --- inverses and nullspace ---------------------------------------------------------------
@SETTINGS
@given(layouts())
def test_right_inverse(L):
    check_right_inverse(L, right_inverse(L))


@SETTINGS
@given(compact_layouts())
def test_right_inverse_of_a_bijection_is_its_inverse(L):
    R = right_inverse(L)
    check_right_inverse(L, R)
    check_left_inverse(L, R)
    assert R.size == L.size


@SETTINGS
@given(injective_layouts())
def test_left_inverse(L):
    check_left_inverse(L, left_inverse(L))


@SETTINGS
@given(layouts(max_size=128))
def test_left_inverse_exists_exactly_with_a_complement(L):
    distinct = set(offsets(L))
    try:
        R = left_inverse(L)
    except LayoutError as e:
        assert len(distinct) < L.size or not complement_exists(distinct, L.cosize), str(e)
        assert "complement" in str(e) or "injective" in str(e)
        return
    assert len(distinct) == L.size
    check_left_inverse(L, R)


def test_left_inverse_of_2_2_2_3_raises():
    try:
        left_inverse(Layout((2, 2), (2, 3)))
    except LayoutError as e:
        assert re.search("complement|injective", str(e))
    else:
        raise AssertionError("left_inverse((2,2):(2,3)) returned a layout")


@SETTINGS
@given(layouts(kinds=("zeros",)))
def test_nullspace(L):
    N = nullspace(L)
    assert all(L(N(i)) == 0 for i in range(N.size))
    assert len({N(i) for i in range(N.size)}) == N.size             # distinct indices
    # the strides that are left form a bijection, so exactly these indices map to 0
    assert N.size == sum(1 for x in offsets(L) if x == 0)


def test_make_layout_of_layout_and_complement_is_a_bijection():
    L = Layout((2, 2), (1, 6))
    full = make_layout(L, complement(L, 24))
    assert sorted(offsets(full)) == list(range(24))
