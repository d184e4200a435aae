"""The core of the algebra: coalesce, filter, composition, complement, inverses, nullspace.

Internally a layout is often handled as its flat tuple of ``(shape, stride)`` leaves (its
"modes"); results of the pure functions of hashable layouts are cached.

>>> print(composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))))
((2,2),3):((24,2),8)
>>> print(complement(Layout(4, 2), 24))
(2,3):(1,8)
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Optional, Union

from .errors import LayoutError
from .int_tuple import (
    _is_sympy, _is_symbolic,
    _prefix_product, _product, _Undecided, check_int_tuple, divides, equal, fmt,
    is_int, is_nonnegative, is_positive_extent, is_zero, less, less_equal,
)
from .layout import Layout, _as_layout, _concat, _flat, _make
from .swizzle import ComposedLayout, Swizzle

if TYPE_CHECKING:
    from .types import AnyLayout, IntTuple, Tiler

__all__ = [
    "coalesce", "filter", "composition", "complement", "right_inverse", "left_inverse",
    "nullspace",
]

_cache = lru_cache(maxsize=1 << 16)
_CACHED = []          # every cached function, for clear_caches


def cached(f):
    """Cache a pure function of hashable arguments (and remember it for clear_caches)."""
    c = _cache(f)
    _CACHED.append(c)
    return c


def clear_caches():
    """Forget every cached result (for benchmarks of cold calls)."""
    for c in _CACHED:
        c.cache_clear()


# --- modes: flat (shape, stride) pairs ----------------------------------------------------
def _pairs_layout(pairs):
    """The flat layout of a list of modes: no modes gives ``1:0``, one mode an int shape."""
    if not pairs:
        return _make(1, 0, ((1, 0),))
    if len(pairs) == 1:
        s, d = pairs[0]
        return _make(s, d, ((s, d),))
    pairs = tuple(pairs)
    return _make(tuple([m[0] for m in pairs]), tuple([m[1] for m in pairs]), pairs)


def _coalesce_pairs(pairs):
    """Drop size-1 modes and merge neighbours with ``stride[i+1] == shape[i] * stride[i]``."""
    out = []
    for s, d in pairs:
        if s == 1:
            continue
        if out:
            ps, pd = out[-1]
            if d == ps * pd:
                out[-1] = (ps * s, pd)
                continue
        out.append((s, d))
    return out


def _all_int(pairs):
    for s, d in pairs:
        if type(s) is not int or type(d) is not int:
            return False
    return True


def _int_strides(L, what):
    for s, d in _flat(L):
        if type(d) is not int and not is_int(d):
            raise LayoutError(f"{what}({L}) needs integer strides, found {d!r}")


def _algebra_strides(L, what):
    """Like ``_int_strides``, but a sympy integer expression is a stride too: the algebra
    decides each fact it needs about it from its assumptions (or names the missing one)."""
    for s, d in _flat(L):
        if (type(d) is not int and not is_int(d)
                and not (_is_symbolic(d) and getattr(d, "is_integer", None) is True)):
            raise LayoutError(f"{what}({L}) needs integer strides, found {d!r}")


def _sorted_by_stride(modes, what):
    """``(stride, shape)`` modes sorted by non-decreasing stride (stable), each comparison
    decided for every value of the symbols: ``1`` sorts before ``n``, which may equal it. A
    symbolic order that the assumptions do not give raises a LayoutError naming it."""
    def first(a, b):                     # a may sort before b: a <= b for every value
        try:
            return less_equal(a, b, what)
        except _Undecided:
            if less_equal(b, a, what):
                return False
            raise

    rest = list(modes)
    out = []
    while rest:
        k = 0
        for j in range(1, len(rest)):
            if not first(rest[k][0], rest[j][0]):
                k = j
        out.append(rest.pop(k))
    return out


def check_tiler(B, what):
    """A tiler is a Layout, a ComposedLayout, a positive int, None, or a tuple of tilers."""
    if type(B) is tuple:
        for b in B:
            if type(b) is not int or b <= 0:
                check_tiler(b, what)
        return
    if B is None or isinstance(B, (Layout, ComposedLayout)):
        return
    if is_int(B):
        if B <= 0:
            raise LayoutError(f"{what}: the tile extent {B} is not positive")
        return
    if isinstance(B, tuple):
        for b in B:
            check_tiler(b, what)
        return
    raise TypeError(f"{what}: expected a layout, an int, None or a tuple of them, not {B!r}")


def by_mode(op, A, tiler):
    """Apply ``op`` to each mode of ``A`` with the matching tiler element; extra modes stay."""
    if isinstance(A, ComposedLayout):
        return A.with_inner(by_mode(op, A.inner, tiler))
    if not isinstance(A, Layout):
        raise TypeError(f"expected a layout, not {A!r}")
    shp, std = A._shape, A._stride
    if type(shp) is not tuple:
        shp, std = (shp,), (std,)
    n = len(tiler)
    if n > len(shp):
        raise LayoutError(f"tiler {fmt(tiler)} has more modes than layout {A} (rank {A.rank})")
    modes = [op(_make(shp[i], std[i]), tiler[i]) for i in range(n)]
    return _make(tuple([m._shape for m in modes]) + shp[n:],
                 tuple([m._stride for m in modes]) + std[n:])


# --- coalesce and filter ------------------------------------------------------------------
def coalesce(L: AnyLayout, profile: Optional[IntTuple] = None) -> AnyLayout:
    """The simplest layout with the same function on ``[0, size(L))``: depth <= 1, no size-1
    modes, adjacent modes merged where ``stride[i+1] == shape[i] * stride[i]``.

    With a tuple ``profile``, each mode ``i < len(profile)`` is coalesced on its own (the
    rank is kept).

    >>> print(coalesce(Layout((2, (1, 6)), (1, (6, 2)))))
    12:1
    >>> print(coalesce(Layout((2, (1, 6)), (1, (6, 2))), (1, 1)))
    (2,6):(1,2)
    """
    if profile is None and type(L) is Layout:
        return _pairs_layout(_coalesce_pairs(_flat(L)))
    if isinstance(L, ComposedLayout):
        return L.with_inner(coalesce(L.inner, profile))
    if not isinstance(L, Layout):
        raise TypeError(f"coalesce: expected a layout, not {L!r}")
    if profile is not None:
        check_int_tuple(profile, "coalesce", "profile")
    if isinstance(profile, tuple):
        if len(profile) > L.rank:
            raise LayoutError(f"coalesce: profile {fmt(profile)} has more modes than {L}")
        return _concat([coalesce(L[i], p) for i, p in enumerate(profile)]
                       + [L[i] for i in range(len(profile), L.rank)])
    return _pairs_layout(_coalesce_pairs(_flat(L)))


def filter(L: Layout) -> Layout:
    """``coalesce(L)`` without its stride-0 modes: the layout of the distinct offsets.

    >>> print(filter(Layout((2, 3, 4), (1, 0, 2))))
    8:1
    """
    if isinstance(L, ComposedLayout):
        return L.with_inner(filter(L.inner))
    if not isinstance(L, Layout):
        raise TypeError(f"filter: expected a layout, not {L!r}")
    return _pairs_layout(_filter_pairs(L))


def _filter_pairs(L):
    return _coalesce_pairs([(s, d) for s, d in _flat(L) if not is_zero(d, "filter")])


# --- composition --------------------------------------------------------------------------
def composition(A: Union[AnyLayout, Swizzle], B: Tiler) -> Union[AnyLayout, Swizzle]:
    """``R = A o B``: ``R(c) == A(B(c))`` for every coordinate c of B, R compatible with B.

    ``B`` may be a Layout, an int ``n`` (``n:1``), a tuple of tilers applied mode by mode
    (each a Layout, an int, None to keep the mode, or a nested tuple), or None. ``A`` may
    be a Layout, a ComposedLayout or a Swizzle. Offsets ``B(c)`` past ``size(A)`` extend A
    along its last mode, as in CuTe.

    Raises LayoutError when B's strides and shapes do not divide through A's shape (the
    stride and shape divisibility conditions) and when B's modes overlap in a mode of A so
    that the result would not be ``A(B(c))`` (the case of cutlass issue 2955).

    >>> print(composition(Layout((12, (4, 8)), (59, (13, 1))), (3, 8)))
    (3,(4,2)):(59,(13,1))
    """
    if type(B) is Layout and type(A) is Layout:
        return _compose(A, B)
    if B is None:
        if not isinstance(A, (Layout, ComposedLayout, Swizzle)):
            raise TypeError(f"composition: expected a layout, not {A!r}")
        return A
    if isinstance(B, tuple):
        check_tiler(B, "composition")
        return _compose_by_mode(A, B)
    B = _as_layout(B, "composition", composed=True)
    if isinstance(B, ComposedLayout):
        raise LayoutError(f"composition with a swizzled right operand {B} is not supported")
    if isinstance(A, ComposedLayout):
        return A.with_inner(composition(A.inner, B))
    if isinstance(A, Swizzle):
        return ComposedLayout(A, 0, B)
    if not isinstance(A, Layout):
        raise TypeError(f"composition: expected a layout, not {A!r}")
    return _compose(A, B)


@cached
def _compose_by_mode(A, B):
    return by_mode(composition, A, B)


def _extended_modes(A):
    """The coalesced modes of A whose last mode also extends A past its size as A does (A's
    last leaf is unbounded, even a size-1 leaf that coalesce drops)."""
    flat = _flat(A)
    a = _coalesce_pairs(flat) or [(1, 0)]
    s_last, d_last = flat[-1]
    if s_last == 1 and not (a[-1][0] * a[-1][1] == d_last):
        if a == [(1, 0)]:
            return [(1, d_last)]
        a.append((1, d_last))
    return a


def _walk(a, n, d, digit_max, what):
    """The modes of ``i -> A(i * d)``, ``i < n``, for A's modes ``a``: divide the stride d out
    of A's extents, then keep n elements (CuTe's shape_div and shape_mod). Every fact it needs
    about symbolic values must be decidable; ints answer at once."""
    out = []
    rest_n, rest_d = n, d
    for j in range(len(a) - 1):
        s, t = a[j]
        if divides(rest_d, s, what):
            room = _quotient(s, rest_d)
            try:
                over = less(room, rest_n, what)
            except _Undecided:       # room | rest_n: c = room whichever of the two is larger
                if _maybe(divides, room, rest_n) is not True:
                    raise
                over = True
            if not over:
                c = rest_n
            elif divides(room, rest_n, what):
                c = room
            else:
                raise LayoutError(f"{what()}: shape divisibility condition fails: {fmt(rest_n)} "
                                  f"elements of B's mode {fmt(n)}:{d} do not split over A's "
                                  f"extent {fmt(room)}")
        elif divides(s, rest_d, what):
            rest_d = _quotient(rest_d, s)
            continue
        elif less((rest_n - 1) * rest_d, s, what):
            c = rest_n
        else:
            raise LayoutError(f"{what()}: stride divisibility condition fails: stride "
                              f"{rest_d} (of B's mode {fmt(n)}:{d}) and A's extent {fmt(s)} "
                              f"do not divide one another")
        out.append((c, t * rest_d))
        digit_max[j] += (c - 1) * rest_d
        rest_n = _quotient(rest_n, c)
        rest_d = 1
        if rest_n == 1:
            return out
    out.append((rest_n, a[-1][1] * rest_d))
    return out


def _compose_int(a, bflat):
    """The leaves of ``A o B`` for int layouts, one (shape, stride) per leaf of B, by the walk
    of ``_walk`` (inlined for ints: this is the algebra's hot path); None where the walk or the
    overlap check fails (``_compose`` then repeats it to raise with the condition named)."""
    last = len(a) - 1
    out = []
    if last == 0:                            # A is one mode: B's strides scale by its stride
        t = a[0][1]
        for n, d in bflat:
            if d < 0:
                return None
            out.append((1, 0) if n == 1 else (n, t * d))
        return out
    digit_max = [0] * last
    for n, d in bflat:
        if d <= 0 or n == 1:
            if d < 0:
                return None
            out.append((1, 0) if n == 1 else (n, 0))
            continue
        modes = []
        rest_n, rest_d = n, d
        for j in range(last):
            s, t = a[j]
            if s % rest_d == 0:
                room = s // rest_d
                if rest_n <= room:
                    c = rest_n
                elif rest_n % room == 0:
                    c = room
                else:
                    return None
            elif rest_d % s == 0:
                rest_d //= s
                continue
            elif (rest_n - 1) * rest_d < s:
                c = rest_n
            else:
                return None
            if c > 1:
                st = t * rest_d
                if modes and modes[-1][0] * modes[-1][1] == st:
                    modes[-1] = (modes[-1][0] * c, modes[-1][1])
                else:
                    modes.append((c, st))
                digit_max[j] += (c - 1) * rest_d
                rest_n //= c
            rest_d = 1
            if rest_n == 1:
                break
        else:
            st = a[last][1] * rest_d
            if rest_n > 1:
                if modes and modes[-1][0] * modes[-1][1] == st:
                    modes[-1] = (modes[-1][0] * rest_n, modes[-1][1])
                else:
                    modes.append((rest_n, st))
        if len(modes) == 1:
            out.append(modes[0])
        elif modes:
            out.append((tuple([m[0] for m in modes]), tuple([m[1] for m in modes])))
        else:
            out.append((1, 0))
    for j in range(last):
        if digit_max[j] >= a[j][0]:
            return None
    return out


def _unflatten_pairs(shape, it):
    """The (shape, stride) of a layout congruent with ``shape`` whose leaves come from ``it``."""
    if type(shape) is not tuple:
        return next(it)
    ss, ds = [], []
    for x in shape:
        s, d = _unflatten_pairs(x, it) if type(x) is tuple else next(it)
        ss.append(s)
        ds.append(d)
    return tuple(ss), tuple(ds)


def _scaled(s, d, t):
    """``s:d`` with its strides times ``t`` (size-1 leaves get stride 0, as the walk gives
    them); None if a stride is not a non-negative int."""
    if type(s) is tuple:
        ss, ds = [], []
        for x, y in zip(s, d):
            r = _scaled(x, y, t)
            if r is None:
                return None
            ss.append(r[0])
            ds.append(r[1])
        return tuple(ss), tuple(ds)
    if type(s) is not int or type(d) is not int or d < 0:
        return None
    return (1, 0) if s == 1 else (s, t * d)


@cached
def _compose(A, B):
    t = A._stride
    if type(A._shape) is int and type(t) is int:
        # A is one mode, A(x) == t * x for every x: A o B is B with its strides scaled
        r = _scaled(B._shape, B._stride, t)
        if r is not None:
            return _make(r[0], r[1])
    a = _extended_modes(A)
    bflat = _flat(B)
    if _all_int(a) and _all_int(bflat):
        leaves_ = _compose_int(a, bflat)
        if leaves_ is not None:
            bs = B._shape
            if type(bs) is not tuple:
                return _make(*leaves_[0])
            if len(bs) == len(leaves_) and not any(type(x) is tuple for x in bs):
                return _make(tuple([x[0] for x in leaves_]), tuple([x[1] for x in leaves_]))
            return _make(*_unflatten_pairs(bs, iter(leaves_)))
    return _compose_checked(A, B, a)


def _compose_checked(A, B, a):
    """The general composition (symbolic values too), raising with the failed condition."""
    digit_max = [0] * (len(a) - 1)   # the largest digit B reaches in each bounded mode of A
    what = lambda: f"composition {A} o {B}"

    def leaf(n, d):
        if type(d) is int or is_int(d):
            if d < 0:
                raise LayoutError(f"{what()}: B needs non-negative integer strides, found {d!r}")
            zero = d == 0
        elif (_is_symbolic(d) and getattr(d, "is_integer", None) is True
              and is_nonnegative(d, what)):
            zero = is_zero(d, what)
        else:
            raise LayoutError(f"{what()}: B needs non-negative integer strides, found {d!r}")
        if n == 1:
            return 1, 0
        if zero:
            return n, 0
        modes = _coalesce_pairs(_walk(a, n, d, digit_max, what))
        if len(modes) == 1:
            return modes[0]
        if not modes:
            return 1, 0
        return tuple(s for s, _ in modes), tuple(t for _, t in modes)

    def build(bs, bd):
        if isinstance(bs, tuple):
            parts = [build(s, d) for s, d in zip(bs, bd)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        return leaf(bs, bd)

    shp, std = build(B.shape, B.stride)
    for j, top in enumerate(digit_max):
        if top and not less(top, a[j][0], what):
            raise LayoutError(
                f"{what()}: B's modes overlap in A's mode {fmt(a[j][0])}:{a[j][1]} (their "
                f"coordinates there add up past its extent), so A o B is not a layout equal to "
                f"A(B(c)); see cutlass issue 2955")
    return _make(shp, std)


# --- complement and inverses --------------------------------------------------------------
def complement(L: Layout, cotarget: Optional[IntTuple] = None) -> Layout:
    """The layout R of offsets that ``L`` does not reach, below ``cotarget``: R is ordered
    (increasing strides), its offsets are disjoint from L's (only 0 in common), and
    ``make_layout(L, R)`` covers ``[0, cotarget)``. Default cotarget: ``cosize(L)``.

    Raises LayoutError when no such R exists (L not injective, or its image interleaved).

    >>> print(complement(Layout((2, 2), (1, 6)), 24))
    (3,2):(2,12)
    """
    if type(cotarget) is int and cotarget > 0 and type(L) is Layout:
        return _complement(L, cotarget)
    if isinstance(L, (ComposedLayout, Swizzle)):
        raise LayoutError(f"complement of the swizzled layout {L} is not defined")
    if not isinstance(L, Layout):
        raise TypeError(f"complement: expected a layout, not {L!r}")
    if cotarget is None:
        _algebra_strides(L, "complement")
        cotarget = L.cosize
        if type(cotarget) is not int and not is_int(cotarget):
            return _complement(L, cotarget)     # symbolic, and >= 1 (one past an offset)
    elif isinstance(cotarget, tuple):
        check_int_tuple(cotarget, "complement", "cotarget", "extent")
        cotarget = _product(cotarget)
    if type(cotarget) is not int:
        if not is_positive_extent(cotarget):
            raise LayoutError(f"complement: cotarget {cotarget!r} must be a positive integer")
        cotarget = int(cotarget) if is_int(cotarget) else cotarget
    elif cotarget < 1:
        raise LayoutError(f"complement: cotarget {cotarget!r} must be a positive integer")
    return _complement(L, cotarget)


def _no_complement(L, cotarget, d, current):
    return LayoutError(
        f"complement({L}, {cotarget}): stride {d} is not a multiple of {current}, the extent "
        f"covered by the smaller modes: the layout is not injective, or its image interleaves "
        f"so that it has no complement")


@cached
def _complement(L, cotarget):
    flat = _flat(L)
    if not _all_int(flat):
        return _complement_symbolic(L, cotarget, flat)
    # the modes by increasing stride, size-1 and stride-0 modes left out (a mode that
    # coalesce would merge with its neighbour is a step of the same chain here)
    modes = sorted([(d, s) for s, d in flat if d != 0 and s != 1])
    if modes and modes[0][0] < 0:
        raise LayoutError(f"complement({L}) needs non-negative strides")
    out = []
    current = 1
    for d, s in modes:
        if d % current:
            raise _no_complement(L, cotarget, d, current)
        q = d // current
        if q != 1:
            out.append((q, current))
        current = s * d
    out.append((-(-cotarget // current), current))
    return _pairs_layout(_coalesce_pairs(out))


def _complement_symbolic(L, cotarget, flat):
    """``_complement`` with symbolic extents or strides: the order of the strides and their
    divisibility are decided by ``less`` and ``divides`` (LayoutError naming a fact that the
    sympy assumptions do not give)."""
    _algebra_strides(L, "complement")
    what = lambda: f"complement({L}, {fmt(cotarget)})"
    modes = []
    for s, d in flat:
        if s == 1 or is_zero(d, what):
            continue
        if not less(0, d, what):
            raise LayoutError(f"complement({L}) needs non-negative strides")
        modes.append((d, s))
    out = []
    current = 1
    modes = _sorted_by_stride(modes, what)
    last = len(modes) - 1
    for k, (d, s) in enumerate(modes):
        # A symbolic extent s may be 1, where the numbers skip its mode. Keeping it gives the
        # same function when q is 1 (s * d is then current there) and, for every mode but the
        # last, when q is not (the next gap starts at d, and the two gaps coalesce); for the
        # last mode with a gap, when d divides the cotarget. Otherwise s > 1 must be decided.
        if not divides(current, d, what):
            if type(s) is not int and not less(1, s, what):
                continue
            raise _no_complement(L, cotarget, d, current)
        q = _quotient(d, current)
        if q != 1:
            if (type(s) is not int and k == last and _maybe(less, 1, s) is not True
                    and _maybe(divides, d, cotarget) is not True and not less(1, s, what)):
                continue
            out.append((q, current))
        current = s * d
    rest = 1 if _maybe(less_equal, cotarget, current) else -(-cotarget // current)
    out.append((rest, current))
    return _pairs_layout(_coalesce_pairs(out))


def _quotient(a, b):
    """``a // b`` where b divides a, as simple as sympy makes it (``(4n+4)/(2n+2)`` is 2)."""
    q = a // b
    if _is_sympy(q) and not q.is_Integer:
        import sympy  # symbolic values only: import layoutalg does without sympy
        exact = sympy.cancel(a / b)
        if exact.is_integer:
            return exact
    return q


def _maybe(fact, a, b):
    """A fact of ``int_tuple`` (``less``, ``divides``...) as True, False, or None where the
    sympy assumptions do not decide it."""
    try:
        return fact(a, b, "")
    except _Undecided:
        return None


def right_inverse(L: Layout) -> Layout:
    """The largest compact R with ``L(R(i)) == i`` for all ``i < size(R)``.

    >>> print(right_inverse(Layout((4, 2), (2, 1))))
    (2,4):(4,1)
    """
    if not isinstance(L, Layout):
        raise LayoutError(f"right_inverse of {L!r}: only plain layouts have one here")
    return _right_inverse(L)


@cached
def _right_inverse(L):
    flat = _flat(L)
    if not _all_int(flat):
        _algebra_strides(L, "right_inverse")
        what = lambda: f"right_inverse({L})"
        return _pairs_layout(_right_inverse_pairs_symbolic(_coalesce_pairs(flat), what))
    return _pairs_layout(_right_inverse_pairs(_coalesce_pairs(flat)))


def _right_inverse_pairs(flat):
    """The modes of the right inverse of the layout with (coalesced) modes ``flat``: follow
    the strides 1, s0, s0*s1, ... through the modes, each at its position in the domain."""
    by_stride = {}
    position = 1
    for s, d in flat:
        if d not in by_stride:
            by_stride[d] = (s, position)
        position *= s
    out = []
    current = 1
    while current in by_stride:
        s, p = by_stride[current]
        if s == 1:
            break
        out.append((s, p))
        current *= s
    return _coalesce_pairs(out)


def _right_inverse_pairs_symbolic(flat, what):
    """``_right_inverse_pairs`` with symbolic values: at each step, the first mode not yet
    taken whose stride surely equals the extent covered so far. A mode whose stride equals it
    only for some values of the symbols (``n`` against ``1``) is passed over when another
    surely does (for an injective layout the two never both count: one has extent 1 there,
    and coalesce drops it), and otherwise raises a LayoutError naming the equality. A
    symbolic extent that may be 1 keeps its mode, which then covers nothing more."""
    positions = []
    position = 1
    for s, _ in flat:
        positions.append(position)
        position *= s
    out = []
    taken = set()
    current = 1
    while True:
        unsure = None
        for k, (s, d) in enumerate(flat):
            if k not in taken:
                same = _maybe(equal, d, current)
                if same:
                    break
                if same is None and unsure is None:
                    unsure = d
        else:
            if unsure is not None:
                equal(unsure, current, what)        # raises, naming the equality
            break
        if s == 1:
            break
        taken.add(k)
        out.append((s, positions[k]))
        current *= s
    return _coalesce_pairs(out)


def left_inverse(L: Layout) -> Layout:
    """R with ``R(L(i)) == i`` for all ``i < size(L)``; LayoutError if L has none.

    >>> print(left_inverse(Layout((4, 2), (2, 1))))
    (2,4):(4,1)
    """
    if not isinstance(L, Layout):
        raise LayoutError(f"left_inverse of {L!r}: only plain layouts have one here")
    return _left_inverse(L)


@cached
def _left_inverse(L):
    _algebra_strides(L, "left_inverse")
    flat = _flat(L)
    what = lambda: f"left_inverse({L})"
    for s, d in flat:
        if is_zero(d, what) and less(1, s, what):
            raise LayoutError(f"left_inverse({L}): the layout is not injective (a stride-0 mode)")
    try:
        rest = complement(L)
    except _Undecided:
        raise
    except LayoutError as e:
        raise LayoutError(f"left_inverse({L}): the layout has no complement, so it has no left "
                          f"inverse right_inverse((L, complement(L))) ({e})") from None
    # right_inverse((L, rest)), on the modes of that pair
    pairs = _coalesce_pairs(flat + _flat(rest))
    if _all_int(pairs):
        inv = _right_inverse_pairs(pairs)
    else:
        inv = _right_inverse_pairs_symbolic(pairs, what)
    n = 1
    for s, _ in inv:
        n *= s
    if not equal(n, L.size * rest.size, what):
        raise LayoutError(f"left_inverse({L}): no left inverse (the layout is not injective)")
    return _pairs_layout(inv)


def nullspace(L: Layout) -> Layout:
    """The layout of the indices that ``L`` maps to offset 0 through its stride-0 modes.

    >>> print(nullspace(Layout((2, 3, 4), (1, 0, 0))))
    (3,4):(2,6)
    """
    if not isinstance(L, Layout):
        raise TypeError(f"nullspace: expected a plain layout, not {L!r}")
    flat = _flat(L)
    positions = _prefix_product(tuple(s for s, _ in flat))
    positions = positions if isinstance(positions, tuple) else (positions,)
    return _pairs_layout([(s, p) for (s, d), p in zip(flat, positions) if s > 1 and d == 0])
