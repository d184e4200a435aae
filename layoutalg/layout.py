"""The Layout: a function from coordinates to offsets, given by a shape and a stride.

>>> L = Layout((4, 2), (2, 1))
>>> str(L), L(5), L(1, 1), L(None, 1)
('(4,2):(2,1)', 3, 3, Layout((4,), (2,)))
"""

from .errors import LayoutError
from .int_tuple import (
    _is_sympy, congruent, crd2idx, fill_none, fmt, has_none, is_int, is_positive_extent, leaves,
    less, prefix_product, product, slice_, suffix_product, weakly_congruent,
)

__all__ = [
    "Layout", "make_layout", "make_row_major", "make_ordered_layout", "size", "cosize",
    "rank", "depth", "shape", "stride", "flatten", "group_modes", "select", "take",
    "append", "prepend", "slice_and_offset", "is_stride_value", "print_layout",
    "format_layout",
]


def is_stride_value(x):
    """A stride leaf: an int, a sympy expression, or a basis vector of an identity layout."""
    if is_int(x):
        return True
    if isinstance(x, (bool, float, complex, str, bytes, tuple, list)) or x is None:
        return False
    return getattr(x, "is_layout_stride", False) or _is_sympy(x)


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


def _check_coordinate(c, L):
    """A coordinate's leaves are ints, sympy expressions or None (slicing): LayoutError for
    anything else (a float, a bool, a string) instead of arithmetic on it."""
    bad = [x for x in leaves(c) if not (x is None or is_int(x) or _is_sympy(x))]
    if bad:
        raise LayoutError(f"coordinate {fmt(c)} of {L}: {bad[0]!r} is not an integer "
                          "(coordinates are ints, sympy integers or None)")


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
    __slots__ = ("_shape", "_stride", "_hash", "_flat")

    def __init__(self, shape, stride=None):
        shp = _norm_shape(shape, shape)
        if stride is None:
            std = prefix_product(shp)
        else:
            std = _norm_stride(stride, stride)
            if not congruent(shp, std):
                raise LayoutError(f"shape {fmt(shp)} and stride {fmt(std)} are not congruent")
        self._shape = shp
        self._stride = std
        self._hash = None
        self._flat = None

    shape = property(lambda self: self._shape, doc="The shape, an IntTuple.")
    stride = property(lambda self: self._stride, doc="The stride, congruent with the shape.")

    # --- properties -------------------------------------------------------------------
    @property
    def size(self):
        shp = self._shape
        return shp if type(shp) is int else product(shp)

    @property
    def cosize(self):
        """One past the largest offset (0-stride and negative-stride modes add nothing).

        Symbolic strides count when their sign is known (declare them positive)."""
        top = 0
        for s, d in _flat(self):
            if type(d) is int:
                if d > 0:
                    top += (s - 1) * d
            elif not _is_sympy(d):
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
        _check_coordinate(c, self)
        if has_none(c):
            return slice_and_offset(c, self)[0]
        if not weakly_congruent(c, self.shape):
            raise LayoutError(f"coordinate {fmt(c)} does not fit shape {fmt(self.shape)}")
        return crd2idx(c, self.shape, self.stride)

    def __getitem__(self, i):
        if type(self._shape) is tuple:
            return _make(self._shape[i], self._stride[i])
        if i in (0, -1):
            return self
        raise IndexError(f"mode {i} of a rank-1 layout")

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
        from .viz import repr_svg
        return repr_svg(self)


_new = object.__new__


def _make(shp, std, flat=None):
    """Build a Layout from already-valid parts (internal: skips the checks). ``flat``, when
    given, is the tuple of its (shape, stride) leaves."""
    L = _new(Layout)
    L._shape = shp
    L._stride = std
    L._hash = None
    L._flat = flat
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


def make_layout(*args):
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


def make_row_major(shp):
    """The compact layout in which the last mode is fastest.

    >>> print(make_row_major((2, 3, 4)))
    (2,3,4):(12,4,1)
    """
    shp = _norm_shape(shp, shp)
    return _make(shp, suffix_product(shp))


def make_ordered_layout(shp, order=None):
    """Compact layout whose modes are laid out in increasing ``order`` (default: col-major).

    >>> print(make_ordered_layout((2, 3, 4), (1, 2, 0)))
    (2,3,4):(4,8,1)
    """
    shp = _norm_shape(shp, shp)
    if order is None:
        return _make(shp, prefix_product(shp))
    if not isinstance(shp, tuple):
        shp, order = (shp,), (order,)
    if len(order) != len(shp):
        raise LayoutError(f"order {order!r} does not match the rank of shape {fmt(shp)}")
    strides = [None] * len(shp)
    running = 1
    for i in sorted(range(len(shp)), key=lambda i: (order[i], i)):
        strides[i] = prefix_product(shp[i], running)
        running *= product(shp[i])
    return _make(shp, tuple(strides))


# --- module-level accessors (work on layouts and IntTuples alike) --------------------
def size(x):
    return x.size if hasattr(x, "size") and not isinstance(x, (int, tuple)) else product(x)


def cosize(L):
    return L.cosize


def rank(x):
    if hasattr(x, "rank") and not isinstance(x, (int, tuple)):
        return x.rank
    return len(x) if isinstance(x, tuple) else 1


def depth(x):
    if hasattr(x, "depth") and not isinstance(x, (int, tuple)):
        return x.depth
    return _depth(x)


def shape(x):
    return x.shape


def stride(x):
    return x.stride


def flatten(x):
    """Layout with the leaves of ``x`` as its modes; an IntTuple gives its flat tuple."""
    if isinstance(x, Layout):
        if not isinstance(x.shape, tuple):
            return x
        return _make(leaves(x.shape), leaves(x.stride))
    if hasattr(x, "with_inner"):
        return x.with_inner(flatten(x.inner))
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


def group_modes(L, begin, end=None):
    """Modes ``[begin, end)`` of ``L`` grouped into one mode.

    >>> print(group_modes(Layout((2, 3, 4)), 0, 2))
    ((2,3),4):((1,2),6)
    """
    m = _modes(L)
    end = len(m) if end is None else end
    grouped = m[:begin] + [_concat(m[begin:end])] + m[end:]
    return _concat(grouped)


def select(L, *idx):
    """The layout of modes ``idx`` of ``L``, in that order."""
    return _concat([L[i] for i in idx])


def take(L, begin, end=None):
    """The layout of modes ``[begin, end)`` of ``L``."""
    m = _modes(L)
    return _concat(m[begin:len(m) if end is None else end])


def append(L, x=None, n=None):
    """``L`` with mode ``x`` (default ``1:0``) appended once, or until its rank is ``n``."""
    x = _make(1, 0) if x is None else x
    m = _modes(L)
    m.extend([x] * (1 if n is None else max(0, n - len(m))))
    return _concat(m)


def prepend(L, x=None, n=None):
    """``L`` with mode ``x`` (default ``1:0``) prepended once, or until its rank is ``n``."""
    x = _make(1, 0) if x is None else x
    m = _modes(L)
    return _concat([x] * (1 if n is None else max(0, n - len(m))) + m)


def slice_and_offset(crd, L):
    """The sub-layout of the modes where ``crd`` is None, and the offset of the rest.

    >>> sub, off = slice_and_offset((None, 2), Layout((4, 8)))
    >>> str(sub), off
    ('(4):(1)', 8)
    """
    if crd is None:
        return L, 0
    if not weakly_congruent(crd, L.shape):
        raise LayoutError(f"coordinate {fmt(crd)} does not fit shape {fmt(L.shape)}")
    sub = _make(slice_(crd, L.shape), slice_(crd, L.stride))
    return sub, crd2idx(fill_none(crd), L.shape, L.stride)


def format_layout(L, max_rows=64, max_cols=64):
    """The text grid of a rank-1 or rank-2 layout: rows are mode 0, columns mode 1. A grid of
    more than ``max_rows`` rows or ``max_cols`` columns shows its first ones and a ``...``
    row or column (None: no limit), so that a 512 x 512 layout prints a page, not megabytes."""
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


def print_layout(L, max_rows=64, max_cols=64):
    """Print a rank-1 or rank-2 layout as a grid of its offsets (see :func:`format_layout`)."""
    print(format_layout(L, max_rows, max_cols))
