"""Property testing of layouts: hypothesis strategies and the algebra's post-conditions.

The strategies draw random hierarchical layouts (:func:`layouts` and its narrower kinds) and
pairs of operands for which an operation has a result (:func:`layout_and_block`,
:func:`layout_and_mode_tiler`, :func:`product_pairs`). The ``check_*`` functions verify the
defining post-condition of one operation by brute force over every index of its domain:
each returns None when the result is right, and otherwise raises AssertionError naming the
operation, its operands and the first index or mode where the result is wrong.

Together they property-test any function that claims to compute an operation of the
algebra, your own or this library's:

>>> from hypothesis import given, settings
>>> from layoutalg import composition
>>> from layoutalg.testing import check_composition, layout_and_block
>>> @settings(max_examples=20, deadline=None)
... @given(layout_and_block())
... def test_my_composition(pair):
...     A, B = pair
...     check_composition(A, B, composition(A, B))      # or: my_composition(A, B)
>>> test_my_composition()                               # passes: nothing is raised

Random pairs for which the operation may have no result come from the plain strategies
(``@given(layouts(), layouts())``); there an implementation should raise, and a checker
given a result fails. This module needs hypothesis, which the algebra does not:
``pip install hypothesis`` (or the ``test`` extra); ``import layoutalg`` never imports it.
"""

from __future__ import annotations

from typing import Any

try:
    from hypothesis import strategies as st
    from hypothesis.strategies import SearchStrategy
except ImportError as e:
    raise ImportError("layoutalg.testing needs hypothesis, which is not installed: "
                      "pip install hypothesis (or pip install 'layoutalg[test]')") from e

from .algebra import complement, logical_divide, logical_product
from .errors import LayoutError
from .int_tuple import compatible, fmt, idx2crd, is_int, leaves, prefix_product, product
from .layout import Layout, append, make_layout, make_ordered_layout
from .swizzle import Swizzle

__all__ = [
    # strategies
    "MAX_SIZE", "STRIDE_KINDS", "extents", "shapes", "layouts", "injective_layouts",
    "compact_layouts", "swizzles", "prefix_divisor", "layout_and_block",
    "layout_and_mode_tiler", "composable_pairs", "product_pairs",
    # post-conditions
    "offsets", "check_coalesce", "check_filter", "check_composition", "check_complement",
    "check_right_inverse", "check_left_inverse", "check_logical_divide", "check_zipped_divide",
    "check_tiled_divide", "check_flat_divide", "check_logical_product",
    "check_zipped_product", "check_tiled_product", "check_flat_product",
    "check_blocked_product", "check_raked_product",
]

MAX_SIZE = 1024
"""The largest size of the layouts drawn by default."""

STRIDE_KINDS = ("compact", "row_major", "permuted", "gapped", "zeros", "arbitrary")
"""The kinds of strides :func:`layouts` draws from: compact (column-major), row-major, a
compact permutation, permuted with gaps between the modes, permuted with some modes
broadcast (stride 0), and arbitrary strides in ``[0, 40]``."""


# --- IntTuples ----------------------------------------------------------------------------
def _nest(draw, flat, depth):
    """Group the flat list ``flat`` into a random tree of at most ``depth`` tuple levels."""
    if depth == 0 or len(flat) <= 1:
        return flat[0] if len(flat) == 1 else tuple(flat)
    cuts = sorted(draw(st.sets(st.integers(1, len(flat) - 1), max_size=len(flat) - 1)))
    groups = [flat[i:j] for i, j in zip([0] + cuts, cuts + [len(flat)])]
    out = []
    for g in groups:
        if len(g) == 1 and draw(st.booleans()):
            out.append(g[0])
        else:
            out.append(_nest(draw, g, depth - 1) if len(g) > 1 else (g[0],))
    return tuple(out)


def _unflatten(flat, profile):
    """Put the leaves of ``flat`` into the tree structure of ``profile``."""
    it = iter(flat)

    def go(p):
        if isinstance(p, tuple):
            return tuple(go(x) for x in p)
        return next(it)

    return go(profile)


@st.composite
def extents(draw, max_leaves=5, max_size=MAX_SIZE, max_extent=8):
    """A flat list of 1 to ``max_leaves`` extents in ``[1, max_extent]`` whose product is at
    most ``max_size``."""
    n = draw(st.integers(1, max_leaves))
    out, total = [], 1
    for _ in range(n):
        hi = max(1, min(max_extent, max_size // total))
        e = draw(st.integers(1, hi))
        out.append(e)
        total *= e
    return out


@st.composite
def shapes(draw, max_depth=3, max_leaves=5, max_size=MAX_SIZE):
    """A hierarchical shape of depth 0 to ``max_depth`` (an int or nested tuples)."""
    flat = draw(extents(max_leaves=max_leaves, max_size=max_size))
    depth = draw(st.integers(0 if len(flat) == 1 else 1, max_depth))
    return _nest(draw, flat, depth)


# --- layouts ------------------------------------------------------------------------------
def _permuted(draw, flat):
    order = draw(st.permutations(range(len(flat))))
    return list(leaves(make_ordered_layout(tuple(flat), tuple(order)).stride))


def _strides(draw, flat, kind):
    if kind == "compact":
        return list(leaves(prefix_product(tuple(flat))))
    if kind == "row_major":
        return list(reversed(leaves(prefix_product(tuple(reversed(flat))))))
    if kind == "permuted":
        return _permuted(draw, flat)
    if kind == "gapped":     # permuted, each mode placed after a gap of a small factor
        order = draw(st.permutations(range(len(flat))))
        out, running = [0] * len(flat), 1
        for i in order:
            running *= draw(st.integers(1, 3))
            out[i] = running
            running *= flat[i]
        return out
    if kind == "zeros":      # permuted with some modes broadcast (stride 0)
        out = _permuted(draw, flat)
        return [0 if draw(st.booleans()) else d for d in out]
    if kind == "arbitrary":
        return [draw(st.integers(0, 40)) for _ in flat]
    raise ValueError(f"unknown stride kind {kind!r}: one of {STRIDE_KINDS}")


@st.composite
def layouts(draw, kinds=STRIDE_KINDS, max_depth=3, max_leaves=5, max_size=MAX_SIZE):
    """A random hierarchical Layout of depth <= ``max_depth`` and size <= ``max_size``, with
    non-negative integer strides of one of ``kinds`` (see :data:`STRIDE_KINDS`)."""
    shp = draw(shapes(max_depth=max_depth, max_leaves=max_leaves, max_size=max_size))
    flat = list(leaves(shp))
    std = _strides(draw, flat, draw(st.sampled_from(kinds)))
    return Layout(shp, _unflatten(std, shp))


def injective_layouts(**kw: Any) -> SearchStrategy:
    """Layouts with distinct offsets (compact, permuted or gapped strides)."""
    return layouts(kinds=("compact", "row_major", "permuted", "gapped"), **kw)


def compact_layouts(**kw: Any) -> SearchStrategy:
    """Bijections onto ``[0, size)``: compact strides in a random order."""
    return layouts(kinds=("compact", "row_major", "permuted"), **kw)


@st.composite
def swizzles(draw):
    """A ``Swizzle(bits, base, shift)`` with ``|shift| >= bits``, either sign of shift."""
    bits = draw(st.integers(0, 3))
    base = draw(st.integers(0, 3))
    shift = draw(st.integers(max(bits, 1), 4)) * draw(st.sampled_from((1, -1)))
    return Swizzle(bits, base, shift)


# --- admissible pairs ---------------------------------------------------------------------
def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def prefix_divisor(draw, flat_shape):
    """A tile extent that walks through ``flat_shape`` in order: the product of its first k
    extents times a divisor of extent k (the extents a by-mode tiler may take)."""
    k = draw(st.integers(0, len(flat_shape) - 1))
    return product(tuple(flat_shape[:k])) * draw(st.sampled_from(_divisors(flat_shape[k])))


@st.composite
def layout_and_block(draw, layout_strategy=None):
    """``(A, B)``: B selects the first ``t_i`` coordinates of each leaf i of A's domain
    (``t_i`` divides extent i), as a layout into A's compact index space. B always composes
    with A and has a complement in ``size(A)``; its modes may come in any order. A is drawn
    from ``layout_strategy`` (default :func:`layouts`)."""
    A = draw(layout_strategy if layout_strategy is not None else layouts())
    flat = list(leaves(A.shape))
    pos = list(leaves(prefix_product(A.shape)))
    picked = [(draw(st.sampled_from(_divisors(s))), p) for s, p in zip(flat, pos)]
    picked = [m for m in picked if m[0] > 1] or [(1, 0)]
    picked = draw(st.permutations(picked))
    shp = tuple(m[0] for m in picked)
    std = tuple(m[1] for m in picked)
    if len(shp) == 1:
        return A, Layout(shp[0], std[0])
    return A, Layout(shp, std)


@st.composite
def layout_and_mode_tiler(draw, layout_strategy=None):
    """``(A, tiler)``: a tuple of ints, one per leading mode of A, each a prefix divisor of
    that mode's (flattened) shape, with an occasional None (keep the mode)."""
    A = draw(layout_strategy if layout_strategy is not None else layouts(max_depth=2))
    n = draw(st.integers(1, A.rank))
    tiler = []
    for i in range(n):
        if draw(st.integers(0, 5)) == 0:
            tiler.append(None)
        else:
            tiler.append(draw(prefix_divisor(list(leaves(A[i].shape)))))
    return A, tuple(tiler)


@st.composite
def composable_pairs(draw):
    """``(A, B)`` where B's offsets stay inside A's domain (``cosize(B) <= size(A)``); the
    composition may still be inadmissible (a divisibility condition fails)."""
    A = draw(layouts(max_size=256))
    B = draw(layouts(max_size=64, max_leaves=3))
    if B.cosize > A.size:
        B = Layout(B.shape, _unflatten([d % 3 for d in leaves(B.stride)], B.shape))
    return A, B


@st.composite
def product_pairs(draw):
    """``(A, B)`` for the products: A a bijection onto ``[0, size)`` (so its complement has no
    holes and composes with any B), B injective."""
    A = draw(compact_layouts(max_size=64, max_leaves=3))
    B = draw(injective_layouts(max_size=16, max_leaves=3))
    return A, B


# --- post-conditions ----------------------------------------------------------------------
def offsets(L: Layout) -> list:
    """``[L(i) for i in range(size(L))]``: the function of a layout, index by index.

    >>> offsets(Layout((2, 3), (3, 1)))
    [0, 3, 1, 4, 2, 5]
    """
    return [L(i) for i in range(L.size)]


def _fail(call, R, why):
    raise AssertionError(f"{call} = {R} is wrong: {why}")


def _call(op, *args):
    return f"{op}({', '.join(fmt(a) for a in args)})"


def _modes(L):
    return [L[k] for k in range(L.rank)]


def _as_layout(B):
    """A tiler element that is an int n means the layout ``n:1``."""
    return Layout(B) if is_int(B) else B


def _check_by_mode(call, check, A, tiler, R):
    """Mode k of R is checked against mode k of A and of the tiler; A's modes where the
    tiler holds None, or past its end, are kept."""
    if len(tiler) > A.rank:
        _fail(call, R, f"the tiler has {len(tiler)} modes, more than A's rank {A.rank}: "
                       "there is no result")
    if R.rank != A.rank:
        _fail(call, R, f"its rank is {R.rank}, not A's rank {A.rank}")
    for k in range(A.rank):
        t = tiler[k] if k < len(tiler) else None
        if t is None:
            if R[k] != A[k]:
                _fail(call, R, f"mode {k} is {R[k]}, not A's mode {A[k]} (kept as it is)")
            continue
        try:
            check(A[k], t, R[k])
        except AssertionError as e:
            _fail(call, R, f"mode {k}: {e}")


def check_coalesce(A: Layout, R: Layout, profile: Any = None) -> None:
    """``R == coalesce(A, profile)``: R has A's size and function, depth <= 1, no size-1
    modes (unless R is ``1:0``), and no neighbours that still merge (``d1 == s0 * d0``).
    With a tuple ``profile``, R has A's rank, mode k < len(profile) is mode k of A coalesced
    (by ``profile[k]``) and the other modes are A's.

    >>> from layoutalg import coalesce
    >>> A = Layout((2, (1, 6)), (1, (6, 2)))
    >>> check_coalesce(A, coalesce(A))
    >>> check_coalesce(A, Layout((2, 6), (1, 2)))
    Traceback (most recent call last):
    AssertionError: coalesce((2,(1,6)):(1,(6,2))) = (2,6):(1,2) is wrong: modes 0 and 1 (2:1, 6:2) still merge into one
    """
    call = _call("coalesce", A) if profile is None else _call("coalesce", A, profile)
    if isinstance(profile, tuple):
        _check_by_mode(call, lambda a, p, r: check_coalesce(a, r, p), A, profile, R)
        return
    if R.size != A.size:
        _fail(call, R, f"its size is {R.size}, not {A.size}")
    for i in range(A.size):
        if R(i) != A(i):
            _fail(call, R, f"at index {i} it gives {R(i)}, not A({i}) = {A(i)}")
    if R.depth > 1:
        _fail(call, R, f"its depth is {R.depth}, more than 1")
    modes = list(zip(leaves(R.shape), leaves(R.stride)))
    if modes != [(1, 0)] and any(s == 1 for s, _ in modes):
        _fail(call, R, "it keeps a mode of size 1")
    for k in range(len(modes) - 1):
        (s0, d0), (s1, d1) = modes[k], modes[k + 1]
        if d1 == s0 * d0:
            _fail(call, R, f"modes {k} and {k + 1} ({s0}:{d0}, {s1}:{d1}) still merge into one")


def check_filter(A: Layout, R: Layout) -> None:
    """``R == filter(A)``: R reaches the same offsets as A, has no stride-0 modes (unless R
    is ``1:0``), and its size is the product of A's extents of non-zero stride.

    >>> from layoutalg import filter
    >>> A = Layout((2, 3, 4), (1, 0, 2))
    >>> check_filter(A, filter(A))
    """
    call = _call("filter", A)
    want, got = set(offsets(A)), set(offsets(R))
    if got != want:
        x = min(want ^ got)
        _fail(call, R, f"offset {x} is reached by {'R' if x in got else 'A'} only")
    if any(d == 0 for d in leaves(R.stride)) and R != Layout(1, 0):
        _fail(call, R, "it keeps a mode of stride 0")
    size = product(tuple(s for s, d in zip(leaves(A.shape), leaves(A.stride)) if d != 0))
    if R.size != size:
        _fail(call, R, f"its size is {R.size}, not {size} (A's extents of non-zero stride)")


def check_composition(A: Layout, B: Any, R: Layout) -> None:
    """``R == A o B``: R is compatible with B's shape and ``R(i) == A(B(i))`` for every index
    i of B's domain. B may be an int n (``n:1``) or a tuple of tilers, applied mode by mode
    (None keeps A's mode). A may be any layout, a swizzled ComposedLayout included.

    >>> from layoutalg import composition
    >>> A, B = Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))
    >>> check_composition(A, B, composition(A, B))
    >>> check_composition(A, B, Layout(((2, 2), 3), ((24, 2), 9)))
    Traceback (most recent call last):
    AssertionError: composition((6,2):(8,2), (4,3):(3,1)) = ((2,2),3):((24,2),9) is wrong: at index 4 (coordinate (0,1) of B) it gives 9, not A(B(4)) = A(1) = 8
    """
    call = _call("composition", A, B)
    if isinstance(B, tuple):
        _check_by_mode(call, check_composition, A, B, R)
        return
    B = _as_layout(B)
    if not compatible(B.shape, R.shape):
        _fail(call, R, f"its shape {fmt(R.shape)} is not compatible with B's {fmt(B.shape)}")
    for i in range(B.size):
        if R(i) != A(B(i)):
            _fail(call, R, f"at index {i} (coordinate {fmt(idx2crd(i, B.shape))} of B) it "
                           f"gives {R(i)}, not A(B({i})) = A({B(i)}) = {A(B(i))}")


def check_complement(A: Layout, M: Any, R: Layout) -> None:
    """``R == complement(A, M)``: with A' the layout of A's modes of non-zero stride, R is
    ordered (``R(k-1) < R(k)``), the concatenation ``(A', R)`` is injective (so R's offsets
    are disjoint from A's but for 0) and reaches exactly ``[0, size(A') * size(R))``, which
    covers ``[0, M)`` with no more copies of its first complete block than that needs. ``M``
    may be a shape (its size counts) or None (``cosize(A)``).

    >>> A = Layout((2, 2), (1, 6))
    >>> check_complement(A, 24, complement(A, 24))
    >>> check_complement(A, 24, Layout((3, 2), (2, 13)))
    Traceback (most recent call last):
    AssertionError: complement((2,2):(1,6), 24) = (3,2):(2,13) is wrong: (A, R) reaches offset 24, outside [0, 24)
    """
    call = _call("complement", A, M)
    cotarget = A.cosize if M is None else product(M)
    r = offsets(R)
    for k in range(1, len(r)):
        if r[k] <= r[k - 1]:
            _fail(call, R, f"it is not ordered: R({k - 1}) = {r[k - 1]} >= R({k}) = {r[k]}")
    kept = [(s, d) for s, d in zip(leaves(A.shape), leaves(A.stride)) if d != 0]
    image = offsets(Layout(tuple(s for s, _ in kept), tuple(d for _, d in kept))) if kept else [0]
    span = len(image) * len(r)
    seen = {}
    for j, y in enumerate(r):
        for x in image:
            if x + y in seen:
                x0, j0 = seen[x + y]
                _fail(call, R, f"(A, R) is not injective: offset {x + y} is A's offset {x0} "
                               f"+ R({j0}) and A's offset {x} + R({j})")
            if not 0 <= x + y < span:
                _fail(call, R, f"(A, R) reaches offset {x + y}, outside [0, {span})")
            seen[x + y] = (x, j)
    if span < cotarget:
        _fail(call, R, f"(A, R) reaches [0, {span}) only, short of the cotarget {cotarget}")
    # (A, R) is a run of whole blocks, each one a copy of the first block [0, n) that R's
    # offsets below n complete; there are no more of them than the cotarget needs
    top = max(image)
    block = next(t + top + 1 for t, u in zip(r, r[1:] + [span]) if t + top < u)
    if block < span and span - block >= cotarget:
        _fail(call, R, f"(A, R) repeats the block [0, {block}) up to {span}, past the cotarget "
                       f"{cotarget}: R has copies too many")


def check_right_inverse(A: Layout, R: Layout) -> None:
    """``R == right_inverse(A)``: ``A(R(i)) == i`` for every index i of R's domain, and R has
    A's size when A is a bijection onto ``[0, size(A))``.

    >>> from layoutalg import right_inverse
    >>> A = Layout((4, 2), (2, 1))
    >>> check_right_inverse(A, right_inverse(A))
    >>> check_right_inverse(A, Layout(4, 2))
    Traceback (most recent call last):
    AssertionError: right_inverse((4,2):(2,1)) = 4:2 is wrong: at index 1 A(R(1)) = A(2) = 4, not 1
    """
    call = _call("right_inverse", A)
    for i in range(R.size):
        if A(R(i)) != i:
            _fail(call, R, f"at index {i} A(R({i})) = A({R(i)}) = {A(R(i))}, not {i}")
    if R.size != A.size and sorted(offsets(A)) == list(range(A.size)):
        _fail(call, R, f"its size is {R.size}, but A is a bijection onto [0, {A.size})")


def check_left_inverse(A: Layout, R: Layout) -> None:
    """``R == left_inverse(A)``: ``R(A(i)) == i`` for every index i of A's domain.

    >>> from layoutalg import left_inverse
    >>> A = Layout((4, 2), (2, 1))
    >>> check_left_inverse(A, left_inverse(A))
    """
    call = _call("left_inverse", A)
    for i in range(A.size):
        if R(A(i)) != i:
            _fail(call, R, f"at index {i} R(A({i})) = R({A(i)}) = {R(A(i))}, not {i}")


def _checked_complement(call, R, L, cotarget):
    """``complement(L, cotarget)``, checked; without one, the operation has no result."""
    try:
        rest = complement(L, cotarget)
    except LayoutError as e:
        _fail(call, R, f"there is no result, as {L} has no complement in {cotarget} ({e})")
    check_complement(L, cotarget, rest)
    return rest


def check_logical_divide(A: Layout, B: Any, R: Layout) -> None:
    """``R == logical_divide(A, B) == A o (B, B*)``, with ``B* = complement(B, size(A))``: R
    has rank 2, mode 0 compatible with B's shape, mode 1 with B*'s, and
    ``R(i, j) == A(B(i) + B*(j))`` for every i in B's domain and j in B*'s. B may be an int
    n (``n:1``) or a tuple of tilers, applied mode by mode (None keeps A's mode); A may be a
    swizzled ComposedLayout.

    >>> from layoutalg import logical_divide
    >>> A, B = Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2)
    >>> check_logical_divide(A, B, logical_divide(A, B))
    >>> check_logical_divide(A, (2, None), logical_divide(A, (2, None)))
    """
    call = _call("logical_divide", A, B)
    if isinstance(B, tuple):
        _check_by_mode(call, check_logical_divide, A, B, R)
        return
    B = _as_layout(B)
    rest = _checked_complement(call, R, B, A.size)
    if R.rank != 2:
        _fail(call, R, f"its rank is {R.rank}, not 2 (the tile, the tiles)")
    if not compatible(B.shape, R[0].shape):
        _fail(call, R, f"mode 0 {R[0]} is not compatible with B's shape {fmt(B.shape)}")
    if not compatible(rest.shape, R[1].shape):
        _fail(call, R, f"mode 1 {R[1]} is not compatible with the shape {fmt(rest.shape)} of "
                       f"B* = complement(B, {A.size}) = {rest}")
    for j in range(rest.size):
        for i in range(B.size):
            want = A(B(i) + rest(j))
            if R(i, j) != want:
                _fail(call, R, f"at coordinate ({i},{j}) it gives {R(i, j)}, not A(B({i}) + "
                               f"B*({j})) = A({B(i) + rest(j)}) = {want}, with B* = {rest}")


def check_logical_product(A: Layout, B: Any, R: Layout) -> None:
    """``R == logical_product(A, B) == (A, A* o B)``, with ``A* = complement(A, size(A) *
    cosize(B))``: R has rank 2, mode 0 is A, mode 1 is compatible with B's shape and
    ``R[1](j) == A*(B(j))`` for every j in B's domain. B may be an int n (``n:1``) or a
    tuple of tilers, applied mode by mode (None keeps A's mode).

    >>> A, B = Layout((2, 2), (4, 1)), Layout(6, 1)
    >>> check_logical_product(A, B, logical_product(A, B))
    >>> check_logical_product(A, B, Layout(((2, 2), (2, 3)), ((4, 1), (2, 4))))
    Traceback (most recent call last):
    AssertionError: logical_product((2,2):(4,1), 6:1) = ((2,2),(2,3)):((4,1),(2,4)) is wrong: at index 2 of mode 1 (coordinate 2 of B) it gives 4, not A*(B(2)) = A*(2) = 8, with A* = (2,3):(2,8)
    """
    call = _call("logical_product", A, B)
    if isinstance(B, tuple):
        _check_by_mode(call, check_logical_product, A, B, R)
        return
    B = _as_layout(B)
    if R.rank != 2:
        _fail(call, R, f"its rank is {R.rank}, not 2 (A, its copies)")
    if R[0] != A:
        _fail(call, R, f"mode 0 is {R[0]}, not A")
    rest = _checked_complement(call, R, A, A.size * B.cosize)
    if not compatible(B.shape, R[1].shape):
        _fail(call, R, f"mode 1 {R[1]} is not compatible with B's shape {fmt(B.shape)}")
    for j in range(B.size):
        if R[1](j) != rest(B(j)):
            _fail(call, R, f"at index {j} of mode 1 (coordinate {fmt(idx2crd(j, B.shape))} of "
                           f"B) it gives {R[1](j)}, not A*(B({j})) = A*({B(j)}) = "
                           f"{rest(B(j))}, with A* = {rest}")


# --- the zipped, tiled and flat forms, and the rank-wise products -------------------------
def _zipped(A, B, P):
    """``P`` (a logical divide or product of A by B) regrouped as ``((tiles), (rests))``:
    a Layout tiler gives P itself; a tuple tiler the tile and the rest of each mode (A's
    mode and ``1:0`` where it holds None, A's modes past it among the rests)."""
    if not isinstance(B, tuple):
        return P
    tiles, rests = [], []
    for k in range(A.rank):
        if k >= len(B):
            rests.append(P[k])
        elif B[k] is None:
            tiles.append(P[k])
            rests.append(Layout(1, 0))
        else:
            tiles.append(P[k][0])
            rests.append(P[k][1])
    return make_layout(make_layout(*tiles), make_layout(*rests))


def _forms(Z):
    """The three forms of a zipped layout ``Z``, as lists of modes."""
    return {"zipped": [Z[0], Z[1]], "tiled": [Z[0]] + _modes(Z[1]),
            "flat": _modes(Z[0]) + _modes(Z[1])}


def _check_regrouped(op, A, B, R, check, reference):
    """R is the zipped, tiled or flat form (``op``'s prefix) of ``reference(A, B)``, which
    ``check`` verifies first."""
    call = _call(op, A, B)
    name = reference.__name__
    try:
        P = reference(A, B)
    except LayoutError as e:
        _fail(call, R, f"there is no result, as {name} raises ({e})")
    check(A, B, P)
    want = _forms(_zipped(A, B, P))[op.split("_")[0]]
    if R.rank != len(want):
        _fail(call, R, f"its rank is {R.rank}, not {len(want)} (from {name} = {P})")
    for k, (got, w) in enumerate(zip(_modes(R), want)):
        if got != w:
            _fail(call, R, f"mode {k} is {got}, not {w} (from {name} = {P})")


def check_zipped_divide(A: Layout, B: Any, R: Layout) -> None:
    """``R == zipped_divide(A, B)``: :func:`check_logical_divide`'s result regrouped as
    ``((tiles), (rests))`` (with a Layout tiler, the logical divide itself).

    >>> from layoutalg import zipped_divide
    >>> A = Layout((128, 64))
    >>> check_zipped_divide(A, (32, 8), zipped_divide(A, (32, 8)))
    """
    _check_regrouped("zipped_divide", A, B, R, check_logical_divide, logical_divide)


def check_tiled_divide(A: Layout, B: Any, R: Layout) -> None:
    """``R == tiled_divide(A, B)``: the zipped divide as ``((tiles), rest0, rest1, ...)``."""
    _check_regrouped("tiled_divide", A, B, R, check_logical_divide, logical_divide)


def check_flat_divide(A: Layout, B: Any, R: Layout) -> None:
    """``R == flat_divide(A, B)``: the zipped divide as ``(tile0, ..., rest0, ...)``."""
    _check_regrouped("flat_divide", A, B, R, check_logical_divide, logical_divide)


def check_zipped_product(A: Layout, B: Any, R: Layout) -> None:
    """``R == zipped_product(A, B)``: :func:`check_logical_product`'s result regrouped as
    ``((A's modes), (copies))`` (with a Layout B, the logical product itself)."""
    _check_regrouped("zipped_product", A, B, R, check_logical_product, logical_product)


def check_tiled_product(A: Layout, B: Any, R: Layout) -> None:
    """``R == tiled_product(A, B)``: the zipped product as ``((A's modes), copies0, ...)``."""
    _check_regrouped("tiled_product", A, B, R, check_logical_product, logical_product)


def check_flat_product(A: Layout, B: Any, R: Layout) -> None:
    """``R == flat_product(A, B)``: the zipped product as ``(A0, A1, ..., copies0, ...)``."""
    _check_regrouped("flat_product", A, B, R, check_logical_product, logical_product)


def _check_rank_product(op, A, B, R):
    """``R`` is the blocked or raked product: with A and B padded to the same rank r and
    ``P = logical_product`` of them (checked), mode i of R is ``(P[0][i], P[1][i])``
    (blocked) or ``(P[1][i], P[0][i])`` (raked)."""
    call = _call(op, A, B)
    Bl = Layout(B) if isinstance(B, tuple) else _as_layout(B)
    r = max(A.rank, Bl.rank)
    A, Bl = append(A, n=r), append(Bl, n=r)
    try:
        P = logical_product(A, Bl)
    except LayoutError as e:
        _fail(call, R, f"there is no result, as logical_product raises ({e})")
    check_logical_product(A, Bl, P)
    if R.rank != r:
        _fail(call, R, f"its rank is {R.rank}, not {r}")
    for k in range(r):
        parts = (P[0][k], P[1][k]) if op == "blocked_product" else (P[1][k], P[0][k])
        if R[k] != make_layout(*parts):
            _fail(call, R, f"mode {k} is {R[k]}, not {make_layout(*parts)} (from "
                           f"logical_product = {P})")


def check_blocked_product(A: Layout, B: Any, R: Layout) -> None:
    """``R == blocked_product(A, B)``: copies of A arranged as B, mode by mode: mode i of R
    is ``(A_i, copies_i)`` of the logical product of A and B padded to the same rank.

    >>> from layoutalg import blocked_product
    >>> A, B = Layout((3, 4), (4, 1)), Layout((2, 5), (1, 2))
    >>> check_blocked_product(A, B, blocked_product(A, B))
    """
    _check_rank_product("blocked_product", A, B, R)


def check_raked_product(A: Layout, B: Any, R: Layout) -> None:
    """``R == raked_product(A, B)``: as :func:`check_blocked_product`, with mode i of R
    ``(copies_i, A_i)``."""
    _check_rank_product("raked_product", A, B, R)
