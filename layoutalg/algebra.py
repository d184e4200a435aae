"""CuTe's layout algebra: coalesce, composition, complement, inverses, divides, products.

Every function either returns a layout that satisfies its defining post-condition or
raises :class:`LayoutError` naming the condition that fails. Results of pure functions
of hashable layouts are cached.

>>> print(composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))))
((2,2),3):((24,2),8)
>>> print(complement(Layout(4, 2), 24))
(2,3):(1,8)
>>> print(logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2)))
((2,2),(2,3)):((4,1),(2,8))
"""

from functools import lru_cache

from .errors import LayoutError
from .int_tuple import fmt, is_int, prefix_product, product
from .layout import Layout, _concat, _flat, _make, append, make_layout, make_ordered_layout
from .swizzle import ComposedLayout, Swizzle

__all__ = [
    "coalesce", "filter", "composition", "complement", "right_inverse", "left_inverse",
    "nullspace", "logical_divide", "zipped_divide", "tiled_divide", "flat_divide",
    "logical_product", "zipped_product", "tiled_product", "flat_product", "blocked_product",
    "raked_product", "tile_to_shape", "max_common_vector", "max_common_layout", "upcast",
    "downcast", "recast", "clear_caches",
]

_cache = lru_cache(maxsize=1 << 16)


def _from_lists(shapes, strides):
    """A flat layout from parallel lists; no modes gives ``1:0``, one mode an int shape."""
    if not shapes:
        return _make(1, 0)
    if len(shapes) == 1:
        return _make(shapes[0], strides[0])
    return _make(tuple(shapes), tuple(strides))


def _as_layout(x, what):
    if isinstance(x, (Layout, ComposedLayout)):
        return x
    if is_int(x):
        return Layout(x)
    raise TypeError(f"{what}: expected a layout, an int or a tuple of tilers, not {x!r}")


def _int_strides(L, what):
    for s, d in _flat(L):
        if not is_int(d):
            raise LayoutError(f"{what}({L}) needs integer strides, found {d!r}")


def _by_mode(op, A, tiler):
    """Apply ``op`` to each mode of ``A`` with the matching tiler element; extra modes stay."""
    if isinstance(A, ComposedLayout):
        return A.with_inner(_by_mode(op, A.inner, tiler))
    if len(tiler) > A.rank:
        raise LayoutError(f"tiler {tiler!r} has more modes than layout {A} (rank {A.rank})")
    modes = [op(A[i], t) for i, t in enumerate(tiler)]
    return _concat(modes + [A[i] for i in range(len(tiler), A.rank)])


# --- coalesce and filter ------------------------------------------------------------------
def coalesce(L, profile=None):
    """The simplest layout with the same function on ``[0, size(L))``: depth <= 1, no size-1
    modes, adjacent modes merged where ``stride[i+1] == shape[i] * stride[i]``.

    With a tuple ``profile``, each mode ``i < len(profile)`` is coalesced on its own (the
    rank is kept).

    >>> print(coalesce(Layout((2, (1, 6)), (1, (6, 2)))))
    12:1
    """
    if isinstance(L, ComposedLayout):
        return L.with_inner(coalesce(L.inner, profile))
    if not isinstance(L, Layout):
        raise TypeError(f"coalesce: expected a layout, not {L!r}")
    if isinstance(profile, tuple):
        if len(profile) > L.rank:
            raise LayoutError(f"coalesce: profile {fmt(profile)} has more modes than {L}")
        return _concat([coalesce(L[i], p) for i, p in enumerate(profile)]
                       + [L[i] for i in range(len(profile), L.rank)])
    return _coalesce(L)


@_cache
def _coalesce(L):
    shapes, strides = [], []
    for s, d in _flat(L):
        if s == 1:
            continue
        if shapes and d == shapes[-1] * strides[-1]:
            shapes[-1] *= s
        else:
            shapes.append(s)
            strides.append(d)
    return _from_lists(shapes, strides)


def filter(L):
    """``coalesce(L)`` without its stride-0 modes: the layout of the distinct offsets.

    >>> print(filter(Layout((2, 3, 4), (1, 0, 2))))
    8:1
    """
    if isinstance(L, ComposedLayout):
        return L.with_inner(filter(L.inner))
    flat = _flat(L)
    return _coalesce(_from_lists([1 if d == 0 else s for s, d in flat], [d for s, d in flat]))


# --- composition --------------------------------------------------------------------------
def composition(A, B):
    """``R = A o B``: ``R(c) == A(B(c))`` for every coordinate c of B, R compatible with B.

    ``B`` may be a Layout, an int ``n`` (``n:1``), a tuple of tilers applied mode by mode
    (each a Layout, an int, None to keep the mode, or a nested tuple), or None. ``A`` may
    be a Layout, a ComposedLayout or a Swizzle.

    Raises LayoutError when B's strides and shapes do not divide through A's shape (the
    stride and shape divisibility conditions) and when B's modes overlap in a mode of A so
    that the result would not be ``A(B(c))`` (the case of cutlass issue 2955).
    """
    if B is None:
        return A
    if isinstance(B, tuple):
        return _by_mode(composition, A, B)
    B = _as_layout(B, "composition")
    if isinstance(B, ComposedLayout):
        raise LayoutError(f"composition with a swizzled right operand {B} is not supported")
    if isinstance(A, ComposedLayout):
        return A.with_inner(composition(A.inner, B))
    if isinstance(A, Swizzle):
        return ComposedLayout(A, 0, B)
    if not isinstance(A, Layout):
        raise TypeError(f"composition: expected a layout, not {A!r}")
    return _compose(A, B)


@_cache
def _compose(A, B):
    a = _flat(_coalesce(A))
    bounded = len(a) - 1
    digit_max = [0] * bounded    # largest digit B reaches in each bounded mode of A

    def leaf(n, d):
        if not is_int(d) or d < 0:
            raise LayoutError(f"composition {A} o {B}: B needs non-negative integer strides, "
                              f"found {d!r}")
        if n == 1:
            return 1, 0
        if d == 0:
            return n, 0
        shapes, strides = [], []
        rest_n, rest_d = n, d
        for j in range(bounded):
            s, t = a[j]
            if rest_d % s == 0:
                rest_d //= s
                continue
            if s % rest_d:
                raise LayoutError(
                    f"composition {A} o {B}: stride divisibility condition fails: "
                    f"stride {rest_d} (of B's mode {n}:{d}) and A's extent {s} do not divide")
            s1 = s // rest_d
            if rest_n > s1 and rest_n % s1:
                raise LayoutError(
                    f"composition {A} o {B}: shape divisibility condition fails: "
                    f"{rest_n} elements of B's mode {n}:{d} do not split over A's extent {s1}")
            c = min(s1, rest_n)
            shapes.append(c)
            strides.append(t * rest_d)
            digit_max[j] += (c - 1) * rest_d
            rest_n //= c
            rest_d = 1
            if rest_n == 1:
                break
        else:
            shapes.append(rest_n)
            strides.append(a[-1][1] * rest_d)
        r = _coalesce(_from_lists(shapes, strides))
        return r.shape, r.stride

    def build(bs, bd):
        if isinstance(bs, tuple):
            parts = [build(s, d) for s, d in zip(bs, bd)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        return leaf(bs, bd)

    shp, std = build(B.shape, B.stride)
    for j in range(bounded):
        if digit_max[j] >= a[j][0]:
            raise LayoutError(
                f"composition {A} o {B}: B's modes overlap in A's mode {a[j][0]}:{a[j][1]} "
                f"(their coordinates there add up past its extent), so A o B is not a layout "
                f"equal to A(B(c)); see cutlass issue 2955")
    return _make(shp, std)


# --- complement and inverses --------------------------------------------------------------
def complement(L, cotarget=None):
    """The layout R of offsets that ``L`` does not reach, below ``cotarget``: R is ordered
    (increasing strides), its offsets are disjoint from L's (only 0 in common), and
    ``make_layout(L, R)`` covers ``[0, cotarget)``. Default cotarget: ``cosize(L)``.

    Raises LayoutError when no such R exists (L not injective, or its image interleaved).
    """
    if isinstance(L, (ComposedLayout, Swizzle)):
        raise LayoutError(f"complement of the swizzled layout {L} is not defined")
    if not isinstance(L, Layout):
        raise TypeError(f"complement: expected a layout, not {L!r}")
    if cotarget is None:
        _int_strides(L, "complement")
        cotarget = L.cosize
    elif isinstance(cotarget, tuple):
        cotarget = product(cotarget)
    if not is_int(cotarget) or cotarget < 1:
        raise LayoutError(f"complement: cotarget {cotarget!r} must be a positive integer")
    return _complement(L, int(cotarget))


@_cache
def _complement(L, cotarget):
    _int_strides(L, "complement")
    modes = [(s, d) for s, d in _flat(filter(L)) if s != 1]
    if any(d < 0 for s, d in modes):
        raise LayoutError(f"complement({L}) needs non-negative strides")
    modes.sort(key=lambda m: (m[1], m[0]))
    shapes, strides = [], []
    current = 1
    for s, d in modes:
        if d % current:
            raise LayoutError(
                f"complement({L}): stride {d} is not a multiple of {current}, the extent "
                f"covered by the smaller modes: the layout is not injective, or its image has "
                f"no complement")
        shapes.append(d // current)
        strides.append(current)
        current = s * d
    shapes.append(-(-cotarget // current))
    strides.append(current)
    return _coalesce(_from_lists(shapes, strides))


def right_inverse(L):
    """The largest compact R with ``L(R(i)) == i`` for all ``i < size(R)``.

    >>> print(right_inverse(Layout((4, 2), (2, 1))))
    (2,4):(4,1)
    """
    if not isinstance(L, Layout):
        raise LayoutError(f"right_inverse of {L!r}: only plain layouts have one here")
    return _right_inverse(L)


@_cache
def _right_inverse(L):
    _int_strides(L, "right_inverse")
    flat = _flat(_coalesce(L))
    positions = prefix_product(tuple(s for s, _ in flat))
    positions = positions if isinstance(positions, tuple) else (positions,)
    shapes, strides = [], []
    current = 1
    while True:
        k = next((k for k, (s, d) in enumerate(flat) if s > 1 and d == current), None)
        if k is None:
            break
        shapes.append(flat[k][0])
        strides.append(positions[k])
        current *= flat[k][0]
    return _coalesce(_from_lists(shapes, strides))


def left_inverse(L):
    """R with ``R(L(i)) == i`` for all ``i < size(L)``; LayoutError if L has none.

    >>> print(left_inverse(Layout((4, 2), (2, 1))))
    (2,4):(4,1)
    """
    if not isinstance(L, Layout):
        raise LayoutError(f"left_inverse of {L!r}: only plain layouts have one here")
    return _left_inverse(L)


@_cache
def _left_inverse(L):
    _int_strides(L, "left_inverse")
    if any(s > 1 and d == 0 for s, d in _flat(L)):
        raise LayoutError(f"left_inverse({L}): the layout is not injective (a stride-0 mode)")
    try:
        full = make_layout(L, complement(L))
    except LayoutError as e:
        raise LayoutError(f"left_inverse({L}): no left inverse ({e})") from None
    R = _right_inverse(full)
    if R.size != full.size:
        raise LayoutError(f"left_inverse({L}): no left inverse (the layout is not injective)")
    return R


def nullspace(L):
    """The layout of the indices that ``L`` maps to offset 0 through its stride-0 modes.

    >>> print(nullspace(Layout((2, 3, 4), (1, 0, 0))))
    (3,4):(2,6)
    """
    flat = _flat(L)
    positions = prefix_product(tuple(s for s, _ in flat))
    positions = positions if isinstance(positions, tuple) else (positions,)
    keep = [(s, p) for (s, d), p in zip(flat, positions) if s > 1 and d == 0]
    return _from_lists([s for s, _ in keep], [p for _, p in keep])


# --- divides ------------------------------------------------------------------------------
def logical_divide(A, B):
    """``composition(A, make_layout(B, complement(B, size(A))))``: mode 0 is the tile B,
    mode 1 the tiles' arrangement. A tuple B divides mode by mode.

    >>> print(logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2)))
    ((2,2),(2,3)):((4,1),(2,8))
    """
    if B is None:
        return A
    if isinstance(B, tuple):
        return _by_mode(logical_divide, A, B)
    B = _as_layout(B, "logical_divide")
    if isinstance(A, ComposedLayout):
        return A.with_inner(logical_divide(A.inner, B))
    return _logical_divide(A, B)


@_cache
def _logical_divide(A, B):
    return composition(A, make_layout(B, complement(B, A.size)))


def _zip_tiles(R, tiler, A_rank):
    """Regroup a by-mode divide or product ``R`` into ((tiles...), (rests...))."""
    if isinstance(R, ComposedLayout):
        return R.with_inner(_zip_tiles(R.inner, tiler, A_rank))
    if not isinstance(tiler, tuple):
        return R
    tiles, rests = [], []
    for i, t in enumerate(tiler):
        if isinstance(t, tuple):
            raise LayoutError("zipped/tiled/flat forms take a flat tuple of tilers")
        if t is None:
            tiles.append(R[i])
            rests.append(_make(1, 0))
        else:
            tiles.append(R[i][0])
            rests.append(R[i][1])
    rests += [R[i] for i in range(len(tiler), A_rank)]
    return make_layout(_concat(tiles), _concat(rests))


def _modes_of(L):
    return [L[i] for i in range(L.rank)]


def zipped_divide(A, B):
    """``logical_divide`` regrouped as ``((tile modes), (rest modes))``."""
    return _zip_tiles(logical_divide(A, B), B, A.rank)


def tiled_divide(A, B):
    """``logical_divide`` regrouped as ``((tile modes), rest0, rest1, ...)``."""
    Z = zipped_divide(A, B)
    return _regroup(Z, lambda z: [z[0]] + _modes_of(z[1]))


def flat_divide(A, B):
    """``logical_divide`` regrouped as ``(tile0, tile1, ..., rest0, rest1, ...)``."""
    Z = zipped_divide(A, B)
    return _regroup(Z, lambda z: _modes_of(z[0]) + _modes_of(z[1]))


def _regroup(Z, modes):
    if isinstance(Z, ComposedLayout):
        return Z.with_inner(_concat(modes(Z.inner)))
    return _concat(modes(Z))


# --- products -----------------------------------------------------------------------------
def logical_product(A, B):
    """``make_layout(A, composition(complement(A, size(A) * cosize(B)), B))``: mode 0 is A,
    mode 1 is B's arrangement of copies of A. An int B means ``B:1`` (a product, never a
    divide); a tuple B multiplies mode by mode.

    >>> print(logical_product(Layout((2, 2), (4, 1)), Layout(6, 1)))
    ((2,2),(2,3)):((4,1),(2,8))
    """
    if B is None:
        return A
    if isinstance(B, tuple):
        return _by_mode(logical_product, A, B)
    B = _as_layout(B, "logical_product")
    if isinstance(A, ComposedLayout):
        return A.with_inner(logical_product(A.inner, B))
    return _logical_product(A, B)


@_cache
def _logical_product(A, B):
    _int_strides(B, "logical_product")
    return make_layout(A, composition(complement(A, A.size * B.cosize), B))


def zipped_product(A, B):
    return _zip_tiles(logical_product(A, B), B, A.rank)


def tiled_product(A, B):
    return _regroup(zipped_product(A, B), lambda z: [z[0]] + _modes_of(z[1]))


def flat_product(A, B):
    return _regroup(zipped_product(A, B), lambda z: _modes_of(z[0]) + _modes_of(z[1]))


def _block_and_tiler(A, B, what):
    if isinstance(B, tuple):
        B = Layout(B)
    B = _as_layout(B, what)
    r = max(A.rank, B.rank)
    P = logical_product(append(A, n=r), append(B, n=r))
    return P, r


def blocked_product(A, B):
    """Copies of block A arranged as B, mode by mode: mode i is (A_i, B_i).

    >>> print(blocked_product(Layout((3, 4), (4, 1)), Layout((2, 5), (1, 2))))
    ((3,2),(4,5)):((4,12),(1,24))
    """
    if isinstance(A, ComposedLayout):
        return A.with_inner(blocked_product(A.inner, B))
    P, r = _block_and_tiler(A, B, "blocked_product")
    return _concat([make_layout(P[0][i], P[1][i]) for i in range(r)])


def raked_product(A, B):
    """A's elements raked across B's arrangement, mode by mode: mode i is (B_i, A_i).

    >>> print(raked_product(Layout((3, 4), (4, 1)), Layout((2, 5), (1, 2))))
    ((2,3),(5,4)):((12,4),(24,1))
    """
    if isinstance(A, ComposedLayout):
        return A.with_inner(raked_product(A.inner, B))
    P, r = _block_and_tiler(A, B, "raked_product")
    return _concat([make_layout(P[1][i], P[0][i]) for i in range(r)])


def tile_to_shape(block, trg_shape, order=None):
    """Repeat ``block`` (blocked_product) until it has shape ``trg_shape``, the copies laid
    out in ``order`` (default column-major); each mode is coalesced.

    >>> print(tile_to_shape(Layout((2, 2), (1, 2)), (4, 6)))
    ((2,2),(2,3)):((1,4),(2,8))
    """
    if isinstance(block, ComposedLayout):
        return block.with_inner(tile_to_shape(block.inner, trg_shape, order))
    trg = trg_shape if isinstance(trg_shape, tuple) else (trg_shape,)
    if block.rank > len(trg):
        raise LayoutError(f"tile_to_shape: block {block} has more modes than {fmt(trg_shape)}")
    padded = append(block, n=len(trg))
    reps = []
    for i, t in enumerate(trg):
        b = padded[i].size
        if product(t) % b:
            raise LayoutError(f"tile_to_shape: extent {product(t)} of mode {i} is not a "
                              f"multiple of the block's extent {b}")
        reps.append(product(t) // b)
    tiled = blocked_product(padded, make_ordered_layout(tuple(reps), order))
    return coalesce(tiled, tuple(1 for _ in trg))


# --- common vectors -----------------------------------------------------------------------
def _swizzle_run(L):
    """How many consecutive offsets a composed layout's outer function keeps contiguous."""
    if not isinstance(L, ComposedLayout):
        return None
    run = 1 << L.outer.base if isinstance(L.outer, Swizzle) else 1
    return run if L.offset % run == 0 else 1


def _common(a, b):
    runs = [r for r in (_swizzle_run(a), _swizzle_run(b)) if r is not None]
    a = a.inner if isinstance(a, ComposedLayout) else a
    b = b.inner if isinstance(b, ComposedLayout) else b
    inv_b = right_inverse(b)
    try:
        common = coalesce(composition(a, inv_b))
    except LayoutError:
        common = coalesce(composition(a, inv_b[0] if inv_b.rank > 1 else inv_b))
    n, d = _flat(common)[0]
    n = n if d == 1 else 1
    return min([n] + runs), inv_b


def max_common_vector(a, b):
    """The largest n such that the first n offsets of ``b`` are contiguous and in the same
    order in ``a``: ``a(b^-1(i)) == i`` for ``i < n`` (the widest vector copy between them).

    >>> max_common_vector(Layout((4, 8)), Layout((4, 8), (8, 1)))
    1
    >>> max_common_vector(Layout((4, 8)), Layout((2, 2, 8), (1, 2, 4)))
    32
    """
    return _common(a, b)[0]


def max_common_layout(a, b):
    """The layout (into the coordinates of ``b``) of the common contiguous offsets."""
    n, inv_b = _common(a, b)
    if n == 1:
        return _make(1, 0)
    return composition(inv_b, Layout(n))


# --- element-size changes -----------------------------------------------------------------
def _div_exact(a, b, what):
    if a % b == 0:
        return a // b
    if b % a == 0:
        return 1
    raise LayoutError(f"{what}: {a} and {b} do not divide one another")


def upcast(L, n):
    """The layout of ``L`` in units of n elements (e.g. 16-bit elements viewed as 32-bit).

    >>> print(upcast(Layout((8, 4), (1, 8)), 2))
    (4,4):(1,4)
    """
    if isinstance(L, ComposedLayout):
        raise LayoutError("upcast of a composed layout is not supported; upcast its parts")
    _int_strides(L, "upcast")

    def go(s, d):
        if isinstance(s, tuple):
            parts = [go(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        if d == 0:
            return s, 0
        what = f"upcast({L}, {n}) of mode {s}:{d}"
        return _div_exact(s, _div_exact(n, abs(d), what), what), _div_exact(d, n, what)

    return _make(*go(L.shape, L.stride))


def downcast(L, n):
    """The layout of ``L`` in units of 1/n element (e.g. 32-bit elements as 16-bit).

    >>> print(downcast(Layout((4, 4), (1, 4)), 2))
    (8,4):(1,8)
    """
    if isinstance(L, ComposedLayout):
        raise LayoutError("downcast of a composed layout is not supported; downcast its parts")
    _int_strides(L, "downcast")

    def go(s, d):
        if isinstance(s, tuple):
            parts = [go(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        return (s * n, 1) if d == 1 else (s, d * n)

    return _make(*go(L.shape, L.stride))


def recast(L, old_bits, new_bits):
    """``L`` over elements of ``old_bits`` re-expressed over elements of ``new_bits``."""
    if new_bits == old_bits:
        return L
    if new_bits > old_bits:
        if new_bits % old_bits:
            raise LayoutError(f"recast: {new_bits} bits is not a multiple of {old_bits}")
        return upcast(L, new_bits // old_bits)
    if old_bits % new_bits:
        raise LayoutError(f"recast: {old_bits} bits is not a multiple of {new_bits}")
    return downcast(L, old_bits // new_bits)


def clear_caches():
    """Forget the cached results (for benchmarks of cold calls)."""
    for f in (_coalesce, _compose, _complement, _right_inverse, _left_inverse,
              _logical_divide, _logical_product):
        f.cache_clear()

