"""Post-conditions of the divides, the products and tile_to_shape (hypothesis, brute force)."""

from hypothesis import given, settings, strategies as st

from layoutalg import (
    Layout, LayoutError, append, blocked_product, complement, composition, flat_divide,
    flat_product, logical_divide, logical_product, make_layout, make_ordered_layout,
    raked_product, tile_to_shape, tiled_divide, tiled_product, zipped_divide, zipped_product,
)
from layoutalg.int_tuple import product

from layoutalg.testing import (
    check_blocked_product, check_flat_divide, check_flat_product, check_logical_divide,
    check_logical_product, check_raked_product, check_tiled_divide, check_tiled_product,
    check_zipped_divide, check_zipped_product, compact_layouts, injective_layouts,
    layout_and_block, layout_and_mode_tiler, offsets, product_pairs,
)

from oracles import flat_digits

SETTINGS = settings(max_examples=120, deadline=None)


def same_function(X, Y):
    return X.size == Y.size and offsets(X) == offsets(Y)


# --- logical_divide -----------------------------------------------------------------------
@SETTINGS
@given(layout_and_block())
def test_logical_divide_definition(pair):
    """A / B == A o (B, B*), with B* = complement(B, size(A)), checked point by point: the
    result at (i, j) is A at the j-th repetition of the i-th element of the tile."""
    A, B = pair
    D = logical_divide(A, B)
    check_logical_divide(A, B, D)
    assert D == composition(A, make_layout(B, complement(B, A.size)))
    # the tiles partition A's domain when B's size divides A's
    if A.size % B.size == 0:
        assert D.size == A.size and sorted(offsets(D)) == sorted(offsets(A))


@SETTINGS
@given(layout_and_block())
def test_layout_0_of_zipped_divide_is_composition(pair):
    A, B = pair
    assert zipped_divide(A, B)[0] == composition(A, B)


@SETTINGS
@given(layout_and_block())
def test_divides_by_a_layout_are_regroupings_of_logical_divide(pair):
    """With a Layout tiler, logical_divide is already (tile, rest): zipped_divide is the same
    layout, tiled_divide unpacks the rest, flat_divide unpacks both."""
    A, B = pair
    assert zipped_divide(A, B) == logical_divide(A, B)
    check_zipped_divide(A, B, zipped_divide(A, B))
    check_tiled_divide(A, B, tiled_divide(A, B))
    check_flat_divide(A, B, flat_divide(A, B))


@SETTINGS
@given(layout_and_mode_tiler())
def test_by_mode_divides_are_regroupings_of_logical_divide(pair):
    A, tiler = pair
    LD = logical_divide(A, tiler)
    check_logical_divide(A, tiler, LD)
    for i, t in enumerate(tiler):
        if t is not None:
            assert LD[i][0] == composition(A[i], t)             # mode i's tile
            assert LD[i] == logical_divide(A[i], Layout(t))
    check_zipped_divide(A, tiler, zipped_divide(A, tiler))
    check_tiled_divide(A, tiler, tiled_divide(A, tiler))
    check_flat_divide(A, tiler, flat_divide(A, tiler))


def test_zipped_divide_of_cute_docs_2d_example():
    A = Layout((9, (4, 8)), (59, (13, 1)))
    tiler = (Layout(3, 3), Layout((2, 4), (1, 8)))
    Z = zipped_divide(A, tiler)
    assert (Z[0].size, Z[1].size) == (24, 12)
    assert [m.size for m in Z[0]] == [3, 8] and [m.size for m in Z[1]] == [3, 4]
    # tile (1, 2): rows 3*1.. of mode 0 (stride 3 of 9), columns of mode 1's tile 2
    for i in range(3):
        for j in range(8):
            for r0 in range(3):
                for r1 in range(4):
                    col = (j % 2) + 2 * r1 + 8 * (j // 2)
                    assert Z((i, j), (r0, r1)) == A(3 * i + r0, col)


# --- products -----------------------------------------------------------------------------
@SETTINGS
@given(product_pairs())
def test_logical_product_mode_0_is_a_and_copies_are_disjoint(pair):
    A, B = pair
    P = logical_product(A, B)
    check_logical_product(A, B, P)
    # A is a bijection onto [0, size(A)) and B injective: copy j of A fills the offsets from
    # size(A) * B(j) on, its own
    assert all(P(i, j) == A(i) + A.size * B(j) for i in range(A.size) for j in range(B.size))


@SETTINGS
@given(compact_layouts(max_size=32, max_leaves=3), compact_layouts(max_size=32, max_leaves=3))
def test_products_of_bijections_cover(A, B):
    """A bijection onto [0, m) times a bijection onto [0, n) is a bijection onto [0, m*n)."""
    for f, check in ((logical_product, check_logical_product),
                     (zipped_product, check_zipped_product),
                     (tiled_product, check_tiled_product), (flat_product, check_flat_product)):
        P = f(A, B)
        check(A, B, P)
        assert sorted(offsets(P)) == list(range(A.size * B.size))


@SETTINGS
@given(product_pairs())
def test_blocked_and_raked_products_permute_the_same_offsets(pair):
    A, B = pair
    blocked, raked = blocked_product(A, B), raked_product(A, B)
    check_blocked_product(A, B, blocked)
    check_raked_product(A, B, raked)
    assert sorted(offsets(blocked)) == sorted(offsets(raked))


def test_logical_product_with_int_is_a_product():
    A = Layout((2, 2), (1, 2))
    P = logical_product(A, 3)
    check_logical_product(A, 3, P)
    assert P.size == 12
    assert sorted(offsets(P)) == list(range(12))


def test_by_mode_products_are_regroupings():
    A = Layout((2, 3), (1, 1))            # each mode compact on its own
    LP, Z = logical_product(A, (4, 5)), zipped_product(A, (4, 5))
    T, F = tiled_product(A, (4, 5)), flat_product(A, (4, 5))
    assert LP == make_layout(make_layout(A[0], Layout(4, 2)), make_layout(A[1], Layout(5, 3)))
    assert Z == make_layout(make_layout(A[0], A[1]), make_layout(Layout(4, 2), Layout(5, 3)))
    assert [m.size for m in T] == [6, 4, 5] and T[0] == Z[0]
    assert [m.size for m in F] == [2, 3, 4, 5] and F[2] == Layout(4, 2)
    check_logical_product(A, (4, 5), LP)
    check_zipped_product(A, (4, 5), Z)
    check_tiled_product(A, (4, 5), T)
    check_flat_product(A, (4, 5), F)


@settings(max_examples=200, deadline=None)
@given(injective_layouts(max_size=32, max_leaves=3), injective_layouts(max_size=16, max_leaves=3))
def test_logical_product_of_any_pair_is_right_or_raises(A, B):
    """When A has holes its complement may not compose with B (as in CuTe); then LayoutError."""
    try:
        P = logical_product(A, B)
    except LayoutError as e:
        assert "condition" in str(e) or "overlap" in str(e) or "complement" in str(e)
        Astar = complement(A, A.size * B.cosize)
        try:
            composition(Astar, B)
        except LayoutError:
            return
        raise AssertionError("logical_product raised but A* o B exists")
    check_logical_product(A, B, P)


# --- tile_to_shape ------------------------------------------------------------------------
@SETTINGS
@given(compact_layouts(max_size=16, max_leaves=3, max_depth=2), st.data())
def test_tile_to_shape_repeats_the_block_in_order(block, data):
    """T(x) == block(x mod block extents) + size(block) * ordered(tile index), computed
    coordinate by coordinate."""
    r = block.rank
    rank = data.draw(st.integers(r, 3))
    padded = append(block, n=rank)
    ext = [padded[i].size for i in range(rank)]
    reps = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    target = tuple(e * k for e, k in zip(ext, reps))
    order = tuple(data.draw(st.permutations(range(rank))))
    T = tile_to_shape(block, target, order)
    assert [T[i].size for i in range(rank)] == list(target)
    assert all(T[i].depth <= 1 for i in range(rank))
    ordered = make_ordered_layout(tuple(reps), order)
    for idx in range(T.size):
        x = flat_digits(idx, list(target))
        inner = tuple(xi % e for xi, e in zip(x, ext))
        tile = tuple(xi // e for xi, e in zip(x, ext))
        assert T(tuple(x)) == padded(inner) + block.size * ordered(tile)


def test_tile_to_shape_rejects_a_target_it_cannot_reach():
    try:
        tile_to_shape(Layout((2, 2)), (3, 4))
    except LayoutError as e:
        assert "multiple" in str(e)
    else:
        raise AssertionError("tile_to_shape((2,2), (3,4)) returned a layout")


@SETTINGS
@given(injective_layouts(max_size=64))
def test_divide_by_its_own_size_gives_a_single_tile(A):
    D = logical_divide(A, Layout(A.size))
    assert same_function(D[0], A) and D[1].size == 1
    assert product(D.shape) == A.size
