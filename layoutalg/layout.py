"""The Layout: a function from coordinates to offsets, given by a shape and a stride.

>>> L = Layout((4, 2), (2, 1))
>>> str(L), L(5), L(1, 1), L(None, 1)
('(4,2):(2,1)', 3, 3, Layout((4,), (2,)))
"""

from __future__ import annotations

import numbers
from functools import lru_cache
from typing import TYPE_CHECKING, Optional, Tuple, Union

from .errors import LayoutError, LayoutIndexError
from .int_tuple import (
    _congruent, _crd2idx, _is_sympy, _is_symbolic,
    _prefix_product, _product, _slice, _suffix_product,
    _weakly_congruent, check_int_tuple, fill_none, fmt, has_none, is_int, is_positive_extent,
    leaves, less,
)
from .viz import repr_svg

if TYPE_CHECKING:
    from .types import AnyLayout, Coord, Int, IntTuple

__all__ = [
    "Layout", "make_layout", "make_row_major", "make_ordered_layout", "size", "cosize",
    "rank", "depth", "shape", "stride", "flatten", "group_modes", "select", "take",
    "append", "prepend", "slice_and_offset", "is_stride_value", "print_layout",
    "format_layout",
]


def is_stride_value(x):
    """A stride leaf: an int, a symbolic integer (sympy or IndexExpr), or a basis vector of
    an identity layout."""
    if is_int(x):
        return True
    if isinstance(x, (bool, float, complex, str, bytes, tuple, list)) or x is None:
        return False
    return getattr(x, "is_layout_stride", False) or _is_symbolic(x)


def _norm_shape(s, whole):
    if isinstance(s, (tuple, list)):
        return tuple(_norm_shape(x, whole) for x in s)
    if is_int(s):
        if s <= 0:
            raise LayoutError(f"shape {whole!r}: extent {s} is not positive")
        return int(s)
    if is_positive_extent(s):
        return s
    if _is_sympy(s):
        raise LayoutError(f"shape {whole!r}: symbolic extent {s} must be declared "
                          f"integer=True, positive=True")
    raise LayoutError(f"shape {whole!r}: extent {s!r} is not an integer")


def _norm_stride(d, whole):
    if isinstance(d, (tuple, list)):
        return tuple(_norm_stride(x, whole) for x in d)
    if is_int(d):
        return int(d)
    if not is_stride_value(d):
        raise LayoutError(f"stride {whole!r}: {d!r} is not an integer stride")
    return d


def _bad_coordinate_leaf(c):
    """``(x,)`` for the first leaf x of coordinate ``c`` that is not an int >= 0, a symbolic
    integer (sympy or IndexExpr) or None; None when every leaf is one."""
    for x in (c if type(c) is tuple else (c,)):
        t = type(x)
        if t is int:
            if x < 0:
                return (x,)
        elif t is tuple:
            bad = _bad_coordinate_leaf(x)
            if bad:
                return bad
        elif x is not None and not _is_symbolic(x) and not (is_int(x) and x >= 0):
            return (x,)
    return None


def _check_coordinate(c, L, what=None):
    """A coordinate's leaves are ints >= 0, symbolic integers or None (slicing): LayoutError
    for anything else (a float, a bool, a string, a negative int) instead of arithmetic on
    it."""
    bad = _bad_coordinate_leaf(c)
    if bad:
        x = bad[0]
        why = (f"{x} is negative" if is_int(x) else f"{x!r} is not an integer (coordinates are "
               "ints, symbolic integers or None)")
        raise LayoutError(f"{what + ': ' if what else ''}coordinate {fmt(c)} of {L}: {why}")


class _Composed:
    """The base of :class:`layoutalg.swizzle.ComposedLayout`, which is built on Layout (so this
    module cannot import it): :func:`_as_layout` accepts a composed layout by this class."""

    __slots__ = ()


def _as_layout(x, what, shapes=True, composed=False):
    """The layout argument ``x`` of the public function ``what``, checked once at its entry:
    a Layout as it is, a ComposedLayout too where ``composed``, and where ``shapes`` (CuTe
    accepts a shape there) a shape, a positive int or a tuple of extents, as its compact
    layout (an int n is ``n:1``). TypeError for anything else, LayoutError for a shape with a
    bad extent, both naming ``what``."""
    if isinstance(x, Layout):
        return x
    if shapes:
        if type(x) is int and x > 0:
            return _make(x, 1, ((x, 1),))
        if is_int(x) or isinstance(x, tuple) or _is_sympy(x):
            try:
                return Layout(x)
            except LayoutError as e:
                raise LayoutError(f"{what}: {e}") from None
    if composed and isinstance(x, _Composed):
        return x
    raise TypeError(f"{what}: expected a layout{' or a shape' if shapes else ''}, not {x!r}")


class Layout:
    """An immutable, hashable pair (shape, stride) of congruent IntTuples.

    ``Layout(shape)`` is column-major (compact, first mode fastest). Calls map
    coordinates to offsets: ``L(i)`` (an index, colexicographic; indices past the size
    extend the last mode, as in CuTe), ``L(crd)`` or ``L(i, j, ...)`` (a coordinate),
    and a coordinate holding ``None`` (CuTe's ``_``) returns the sub-layout of those modes
    (use :func:`slice_and_offset` for the offset too). ``L[i]`` is the i-th mode.
    """

    # The parts live in private slots behind read-only properties: immutable, and cheap to
    # build (the algebra builds many intermediate layouts).
    __slots__ = ("_shape", "_stride", "_hash", "_flat", "_calls")

    def __init__(self, shape, stride=None):
        shp = _norm_shape(shape, shape)
        if stride is None:
            std = _prefix_product(shp)
        else:
            std = _norm_stride(stride, stride)
            if not _congruent(shp, std):
                raise LayoutError(f"shape {fmt(shp)} and stride {fmt(std)} are not congruent")
        self._shape = shp
        self._stride = std
        self._hash = None
        self._flat = None
        self._calls = None

    shape = property(lambda self: self._shape, doc="The shape, an IntTuple.")
    stride = property(lambda self: self._stride, doc="The stride, congruent with the shape.")

    # --- properties -------------------------------------------------------------------
    @property
    def size(self):
        shp = self._shape
        return shp if type(shp) is int else _product(shp)

    @property
    def cosize(self):
        """One past the largest offset (0-stride and negative-stride modes add nothing).

        Symbolic strides count when their sign is known (declare them positive)."""
        top = 0
        for s, d in _flat(self):
            if type(d) is int:
                if d > 0:
                    top += (s - 1) * d
            elif not _is_symbolic(d):
                raise LayoutError(f"cosize of {self} needs integer strides, found {d!r}")
            elif less(0, d, lambda: f"cosize of {self}"):
                top += (s - 1) * d
        return top + 1

    @property
    def rank(self):
        return len(self._shape) if isinstance(self._shape, tuple) else 1

    @property
    def depth(self):
        return _depth(self.shape)

    # --- evaluation -------------------------------------------------------------------
    def __call__(self, *crd):
        if not crd:
            raise LayoutError("a layout is called with an index or a coordinate")
        c = crd[0] if len(crd) == 1 else crd
        if is_int(c):
            if c < 0:
                raise LayoutError(f"index {c} of {self} is negative")
            total = 0
            flat = _flat(self)
            for s, d in flat[:-1]:
                total = total + (c % s) * d
                c //= s
            return total + c * flat[-1][1]
        calls = self._calls
        flat_ints = type(c) is tuple and all(type(x) is int for x in c)
        if calls is not None and flat_ints:
            hit = calls.get(c)
            if hit is not None:
                return hit
        _check_coordinate(c, self)
        if has_none(c):
            return slice_and_offset(c, self)[0]
        if not _weakly_congruent(c, self.shape):
            raise LayoutError(f"coordinate {fmt(c)} does not fit shape {fmt(self.shape)}")
        offset = _crd2idx(c, self.shape, self.stride)
        # a layout is immutable: the offsets of the flat int coordinates it is called with
        # (a simulated kernel's fragments, each element many times) are remembered, up to a
        # bound
        if flat_ints:
            if calls is None:
                calls = self._calls = {}
            if len(calls) < _MEMO_CALLS:
                calls[c] = offset
        return offset

    def __getitem__(self, i):
        if type(self._shape) is tuple:
            try:
                return _make(self._shape[i], self._stride[i])
            except IndexError:
                raise LayoutIndexError(f"mode {i} of {self}: it has {self.rank} modes") from None
        if i in (0, -1):
            return self
        raise LayoutIndexError(f"mode {i!r} of a rank-1 layout")

    def __iter__(self):
        return (self[i] for i in range(self.rank))

    def __eq__(self, other):
        if not isinstance(other, Layout):
            return NotImplemented
        return self._shape == other._shape and self._stride == other._stride

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((self._shape, self._stride))
        return h

    def __str__(self):
        return f"{fmt(self.shape)}:{fmt(self.stride)}"

    def __repr__(self):
        return f"Layout({self.shape!r}, {self.stride!r})"

    def _repr_svg_(self):
        """The picture a notebook shows (see layoutalg.viz); print_layout is the text form."""
        return repr_svg(self)


_new = object.__new__


_MEMO_CALLS = 4096          # coordinates a layout remembers the offsets of


def _make(shp, std, flat=None):
    """Build a Layout from already-valid parts (internal: skips the checks). ``flat``, when
    given, is the tuple of its (shape, stride) leaves."""
    L = _new(Layout)
    L._shape = shp
    L._stride = std
    L._hash = None
    L._flat = flat
    L._calls = None
    return L


def _flat(L):
    """The (shape, stride) leaves of a layout, computed once."""
    f = L._flat
    if f is None:
        if type(L._shape) is tuple:
            out = []
            _collect(L._shape, L._stride, out)
            f = tuple(out)
        else:
            f = ((L._shape, L._stride),)
        L._flat = f
    return f


def _collect(s, d, out):
    for x, y in zip(s, d):
        if type(x) is tuple:
            _collect(x, y, out)
        else:
            out.append((x, y))


def _depth(t):
    if not isinstance(t, tuple):
        return 0
    return 1 + max((_depth(x) for x in t), default=0)


def _unwrap(items):
    return items[0] if len(items) == 1 else tuple(items)


def make_layout(*args: Layout) -> Layout:
    """``make_layout(shape, stride=None)``, or ``make_layout(L0, L1, ...)`` which concatenates
    layouts into one whose i-th mode is ``Li``.

    >>> print(make_layout(Layout(2, 3), Layout((2, 2), (1, 6))))
    (2,(2,2)):(3,(1,6))
    """
    if args and all(isinstance(a, Layout) for a in args):
        return _make(tuple([a._shape for a in args]), tuple([a._stride for a in args]))
    if any(isinstance(a, Layout) for a in args):
        raise LayoutError("make_layout takes (shape, stride) or layouts only, not a mix")
    if not 1 <= len(args) <= 2:
        raise LayoutError("make_layout(shape, stride=None) or make_layout(*layouts)")
    return Layout(*args)


def make_row_major(shp: IntTuple) -> Layout:
    """The compact layout in which the last mode is fastest.

    >>> print(make_row_major((2, 3, 4)))
    (2,3,4):(12,4,1)
    """
    shp = _norm_shape(shp, shp)
    return _make(shp, _suffix_product(shp))


def make_ordered_layout(shp: IntTuple, order: Optional[IntTuple] = None) -> Layout:
    """Compact layout whose modes are laid out in increasing ``order`` (default: col-major).

    >>> print(make_ordered_layout((2, 3, 4), (1, 2, 0)))
    (2,3,4):(4,8,1)
    """
    shp = _norm_shape(shp, shp)
    if order is None:
        return _make(shp, _prefix_product(shp))
    check_int_tuple(order, "make_ordered_layout", "order")
    if not isinstance(shp, tuple):
        shp, order = (shp,), (order,)
    if len(order) != len(shp):
        raise LayoutError(f"order {order!r} does not match the rank of shape {fmt(shp)}")
    strides = [None] * len(shp)
    running = 1
    for i in sorted(range(len(shp)), key=lambda i: (order[i], i)):
        strides[i] = _prefix_product(shp[i], running)
        running *= _product(shp[i])
    return _make(shp, tuple(strides))


# --- module-level accessors (work on layouts and IntTuples alike) --------------------
def _attribute(x, name, what):
    """``x.name`` of a layout, a tensor or another object that has one; TypeError naming
    ``what`` for a number, a string, a class, or an object without it."""
    if isinstance(x, (type, str, bytes, numbers.Number)) or not hasattr(x, name):
        raise TypeError(f"{what}: expected a layout or a tensor, not {x!r}")
    return getattr(x, name)


def _is_int_tuple(x):
    return isinstance(x, (int, tuple)) or is_int(x) or _is_sympy(x)


def size(x: Union[AnyLayout, IntTuple]) -> Int:
    """The size of a layout or a tensor, or the product of a shape's extents.

    >>> size(Layout((4, 8))), size((2, (3, 4)))
    (32, 24)
    """
    if isinstance(x, Layout):
        return x.size
    if _is_int_tuple(x):
        check_int_tuple(x, "size", "x", "extent")
        return _product(x)
    return _attribute(x, "size", "size")


def cosize(L: AnyLayout) -> Int:
    """One past the largest offset of a layout (see :attr:`Layout.cosize`)."""
    if isinstance(L, Layout):
        return L.cosize
    return _attribute(L, "cosize", "cosize")


def rank(x: Union[AnyLayout, IntTuple]) -> int:
    """The number of top-level modes of a layout, a tensor or an IntTuple."""
    if isinstance(x, Layout):
        return x.rank
    if _is_int_tuple(x):
        check_int_tuple(x, "rank", "x", "leaf")
        return len(x) if isinstance(x, tuple) else 1
    return _attribute(x, "rank", "rank")


def depth(x: Union[AnyLayout, IntTuple]) -> int:
    """The nesting depth of a layout's shape, a tensor's or an IntTuple (0 for an int)."""
    if isinstance(x, Layout):
        return x.depth
    if _is_int_tuple(x):
        check_int_tuple(x, "depth", "x", "leaf")
        return _depth(x)
    return _attribute(x, "depth", "depth")


def shape(x: AnyLayout) -> IntTuple:
    """The shape of a layout or a tensor."""
    return _attribute(x, "shape", "shape")


def stride(x: AnyLayout) -> IntTuple:
    """The stride of a layout or a tensor."""
    if hasattr(x, "inner") and hasattr(x, "outer"):
        raise TypeError(f"stride: the composed layout {x} has no stride (its outer function "
                        f"applies after the inner layout's); use stride(L.inner)")
    return _attribute(x, "stride", "stride")


def flatten(x):
    """Layout with the leaves of ``x`` as its modes; an IntTuple gives its flat tuple."""
    if isinstance(x, Layout):
        if not isinstance(x.shape, tuple):
            return x
        return _make(leaves(x.shape), leaves(x.stride))
    if hasattr(x, "with_inner"):
        return x.with_inner(flatten(x.inner))
    if not _is_int_tuple(x) and x is not None and not getattr(x, "is_layout_stride", False):
        raise TypeError(f"flatten: expected a layout or an IntTuple, not {x!r}")
    check_int_tuple(x, "flatten", "x", "leaf")
    return leaves(x) if isinstance(x, tuple) else x


def _modes(L):
    shp, std = L._shape, L._stride
    if type(shp) is not tuple:
        return [L]
    return [_make(s, d) for s, d in zip(shp, std)]


def _concat(modes):
    if not modes:
        raise LayoutError("a layout needs at least one mode")
    return _make(tuple([m._shape for m in modes]), tuple([m._stride for m in modes]))


_MAX_MODES = 1 << 16      # more modes than any layout has: a bigger count is a mistake


def _mode_index(i, r, what, name, end=False):
    """The mode index ``i`` (negative counts from the end, as in Python) of a rank-``r``
    layout: an int in ``[0, r)``, or ``[0, r]`` for the end of a range."""
    if not is_int(i):
        raise TypeError(f"{what}: {name} must be an int, not {i!r}")
    j = i + r if i < 0 else i
    if not 0 <= j < r + end:
        raise LayoutIndexError(f"{what}: {name} {i} is outside the {r} modes of the layout")
    return int(j)


def _mode_range(L, begin, end, what):
    L = _as_layout(L, what, shapes=False)
    r = L.rank
    b = _mode_index(begin, r, what, "begin", True)
    e = r if end is None else _mode_index(end, r, what, "end", True)
    if b >= e:
        raise LayoutError(f"{what}: the modes [{begin}, {end}) of {L} are empty (a layout "
                          f"needs at least one mode)")
    return _modes(L), b, e


def group_modes(L: Layout, begin: int, end: Optional[int] = None) -> Layout:
    """Modes ``[begin, end)`` of ``L`` grouped into one mode.

    >>> print(group_modes(Layout((2, 3, 4)), 0, 2))
    ((2,3),4):((1,2),6)
    """
    m, begin, end = _mode_range(L, begin, end, "group_modes")
    grouped = m[:begin] + [_concat(m[begin:end])] + m[end:]
    return _concat(grouped)


def select(L: Layout, *idx: int) -> Layout:
    """The layout of modes ``idx`` of ``L``, in that order."""
    L = _as_layout(L, "select", shapes=False)
    if not idx:
        raise LayoutError("select: no modes given (a layout needs at least one mode)")
    r = L.rank
    return _concat([L[_mode_index(i, r, "select", "mode")] for i in idx])


def take(L: Layout, begin: int, end: Optional[int] = None) -> Layout:
    """The layout of modes ``[begin, end)`` of ``L``."""
    m, begin, end = _mode_range(L, begin, end, "take")
    return _concat(m[begin:end])


def _padding(L, x, n, what):
    """The modes of L and the mode list to add for append and prepend (checked)."""
    L = _as_layout(L, what, shapes=False)
    x = _make(1, 0) if x is None else _as_layout(x, what, shapes=False)
    m = _modes(L)
    if n is None:
        return m, [x]
    if not is_int(n):
        raise TypeError(f"{what}: n must be None or an int (the rank to reach), not {n!r}")
    if n < 0:
        raise LayoutError(f"{what}: n = {n} is not a rank (an int >= 0)")
    if n > _MAX_MODES:
        raise LayoutError(f"{what}: a rank of {n} is more than a layout holds here "
                          f"(at most {_MAX_MODES} modes)")
    return m, [x] * max(0, n - len(m))


def append(L: Layout, x: Optional[Layout] = None, n: Optional[int] = None) -> Layout:
    """``L`` with mode ``x`` (default ``1:0``) appended once, or until its rank is ``n``."""
    m, more = _padding(L, x, n, "append")
    return _concat(m + more)


def prepend(L: Layout, x: Optional[Layout] = None, n: Optional[int] = None) -> Layout:
    """``L`` with mode ``x`` (default ``1:0``) prepended once, or until its rank is ``n``."""
    m, more = _padding(L, x, n, "prepend")
    return _concat(more + m)


def slice_and_offset(crd: Coord, L: Layout) -> Tuple[Layout, Int]:
    """The sub-layout of the modes where ``crd`` is None, and the offset of the rest.

    >>> sub, off = slice_and_offset((None, 2), Layout((4, 8)))
    >>> str(sub), off
    ('(4):(1)', 8)
    """
    if type(L) is not Layout:
        L = _as_layout(L, "slice_and_offset", shapes=False)
    if crd is None:
        return L, 0
    plain = _plain_coordinate(crd)
    if plain is not _NOT_PLAIN:
        return _slice_and_offset_of_ints(plain, L)
    return _slice_and_offset(crd, L)


_NOT_PLAIN = object()


def _plain_coordinate(crd):
    """``crd`` with its integers as Python ints (numpy's too), or ``_NOT_PLAIN`` where a leaf
    is neither an integer nor None (a symbol, a bool)."""
    if crd is None or type(crd) is int:
        return crd
    if type(crd) is tuple:
        if all(c is None or type(c) is int for c in crd):
            return crd
        out = tuple(_plain_coordinate(c) for c in crd)
        return _NOT_PLAIN if any(c is _NOT_PLAIN for c in out) else out
    if isinstance(crd, numbers.Integral) and not isinstance(crd, bool):
        return int(crd)
    return _NOT_PLAIN


@lru_cache(maxsize=8192)
def _slice_and_offset_of_ints(crd, L):
    """:func:`slice_and_offset` of a coordinate of Python ints and None, remembered (a
    kernel's Python twin slices the same partitions at every step of its loops)."""
    return _slice_and_offset(crd, L)


def _slice_and_offset(crd, L):
    _check_coordinate(crd, L, "slice_and_offset")
    if not _weakly_congruent(crd, L.shape):
        raise LayoutError(f"slice_and_offset: coordinate {fmt(crd)} does not fit shape "
                          f"{fmt(L.shape)}")
    sub = _make(_slice(crd, L.shape), _slice(crd, L.stride))
    return sub, _crd2idx(fill_none(crd), L.shape, L.stride)


def format_layout(L: AnyLayout, max_rows: int = 64, max_cols: int = 64) -> str:
    """The text grid of a rank-1 or rank-2 layout: rows are mode 0, columns mode 1. A grid of
    more than ``max_rows`` rows or ``max_cols`` columns shows its first ones and a ``...``
    row or column (None: no limit), so that a 512 x 512 layout prints a page, not megabytes."""
    L = _as_layout(L, "format_layout", shapes=False, composed=True)
    if L.rank not in (1, 2):
        raise LayoutError(f"print_layout needs a rank-1 or rank-2 layout, not rank {L.rank}")
    if not is_int(L.size):
        raise LayoutError(f"print_layout needs integer extents to draw a grid; {L} has "
                          "symbolic ones (substitute them first)")
    if L.rank == 1:
        rows, cols, at = 1, L.size, lambda i, j: L(j)
    else:
        rows, cols, at = size(L[0]), size(L[1]), lambda i, j: L(i, j)
    for name, limit in (("max_rows", max_rows), ("max_cols", max_cols)):
        if limit is not None and not (is_int(limit) and limit >= 1):
            raise ValueError(f"format_layout: {name} must be a positive int or None, got "
                             f"{limit!r}")
    shown_r = rows if max_rows is None else min(rows, max_rows)
    shown_c = cols if max_cols is None else min(cols, max_cols)
    more_c = shown_c < cols
    cells = [[str(at(i, j)) for j in range(shown_c)] + ["..."] * more_c
             for i in range(shown_r)]
    w = max(len(c) for row in cells for c in row)
    lw = len(str(rows - 1))
    heads = [f"{j:>{w + 1}} " for j in range(shown_c)] + [f"{'...':>{w + 1}} "] * more_c
    rule = " " * (lw + 1) + "+" + "+".join("-" * (w + 2) for _ in heads) + "+"
    lines = [str(L), " " * (lw + 2) + " ".join(heads), rule]
    for i, row in enumerate(cells):
        lines.append(f"{i:>{lw}} |" + "|".join(f" {c:>{w}} " for c in row) + "|")
        lines.append(rule)
    if shown_r < rows or more_c:
        lines.append(f"... showing {shown_r} of {rows} rows, {shown_c} of {cols} columns "
                     "(format_layout(L, max_rows=None, max_cols=None) shows all)")
    return "\n".join(lines)


def print_layout(L: AnyLayout, max_rows: int = 64, max_cols: int = 64) -> None:
    """Print a rank-1 or rank-2 layout as a grid of its offsets (see :func:`format_layout`)."""
    print(format_layout(_as_layout(L, "print_layout", shapes=False, composed=True), max_rows,
                        max_cols))
