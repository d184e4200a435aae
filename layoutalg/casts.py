"""Common vectors and element-size changes: max_common_vector, upcast, downcast, recast.

>>> max_common_vector(Layout((4, 8)), Layout((2, 2, 8), (1, 2, 4)))
32
>>> print(upcast(Layout((8, 4), (1, 8)), 2))
(4,4):(1,4)
"""

from .core import _int_strides, _pairs_layout, coalesce, composition, right_inverse
from .errors import LayoutError
from .int_tuple import _div_int, check_positive_int
from .layout import Layout, _as_layout, _flat, _make
from .swizzle import ComposedLayout, Swizzle

__all__ = ["max_common_vector", "max_common_layout", "upcast", "downcast", "recast"]


# --- common vectors -----------------------------------------------------------------------
def _swizzle_run(L):
    """How many consecutive offsets a composed layout's outer function keeps contiguous."""
    if not isinstance(L, ComposedLayout):
        return None
    run = 1 << L.outer.base if isinstance(L.outer, Swizzle) else 1
    return run if L.offset % run == 0 else 1


def _common(a, b, what):
    a = _as_layout(a, what, shapes=False, composed=True)
    b = _as_layout(b, what, shapes=False, composed=True)
    runs = [r for r in (_swizzle_run(a), _swizzle_run(b)) if r is not None]
    a = a.inner if isinstance(a, ComposedLayout) else a
    b = b.inner if isinstance(b, ComposedLayout) else b
    inv_b = _flat(coalesce(right_inverse(b)))
    # the longest prefix of b's inverse along which a is contiguous (a o b^-1 has stride 1)
    n, prefix = 1, 1
    for k in range(len(inv_b)):
        prefix *= inv_b[k][0]
        try:
            common = _flat(coalesce(composition(a, _pairs_layout(inv_b[:k + 1]))))
        except LayoutError:
            break
        run = common[0][0] if common[0][1] == 1 else 1
        n = max(n, run)
        if run < prefix:
            break
    return min([n] + runs), _pairs_layout(inv_b)


def max_common_vector(a, b):
    """The largest n such that the first n offsets of ``b`` are contiguous and in the same
    order in ``a``: ``a(b^-1(i)) == i`` for ``i < n`` (the widest vector copy between them).

    >>> max_common_vector(Layout((4, 8)), Layout((4, 8), (8, 1)))
    1
    >>> max_common_vector(Layout((4, 8)), Layout((2, 2, 8), (1, 2, 4)))
    32
    """
    return _common(a, b, "max_common_vector")[0]


def max_common_layout(a, b):
    """The layout (into the coordinates of ``b``) of the common contiguous offsets."""
    n, inv_b = _common(a, b, "max_common_layout")
    if n == 1:
        return _make(1, 0)
    return composition(inv_b, Layout(n))


# --- element-size changes -----------------------------------------------------------------
def upcast(L, n):
    """The layout of ``L`` in units of n elements (e.g. 16-bit elements viewed as 32-bit).

    >>> print(upcast(Layout((8, 4), (1, 8)), 2))
    (4,4):(1,4)
    >>> print(upcast(Layout((8, 4), (-1, 8)), 2))
    (4,4):(-1,4)
    """
    if isinstance(L, ComposedLayout):
        raise LayoutError("upcast of a composed layout is not supported; upcast its parts")
    L = _as_layout(L, "upcast", shapes=False)
    check_positive_int(n, "upcast", "n")
    _int_strides(L, "upcast")

    def go(s, d):
        if isinstance(s, tuple):
            parts = [go(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        if d == 0:
            return s, 0
        what = f"upcast({L}, {n}) of mode {s}:{d}"
        step = _div_int(abs(d), n, what)               # |stride| in units of n elements
        return _div_int(s, _div_int(n, abs(d), what), what), (step if d > 0 else -step)

    return _make(*go(L.shape, L.stride))


def downcast(L, n):
    """The layout of ``L`` in units of 1/n element (e.g. 32-bit elements as 16-bit): the mode
    of stride 1 grows n-fold (its elements split into adjacent parts), the other strides
    scale by n.

    >>> print(downcast(Layout((4, 4), (1, 4)), 2))
    (8,4):(1,8)

    As in CuTe, the layout needs a mode of stride +-1 (the adjacent elements to split);
    without one, or with two of size > 1 (the split elements would overlap): LayoutError.
    """
    if isinstance(L, ComposedLayout):
        raise LayoutError("downcast of a composed layout is not supported; downcast its parts")
    L = _as_layout(L, "downcast", shapes=False)
    check_positive_int(n, "downcast", "n")
    _int_strides(L, "downcast")
    flat = _flat(L)
    units = [k for k, (s, d) in enumerate(flat) if abs(d) == 1]
    wide = [k for k in units if flat[k][0] > 1]
    if len(wide) > 1:
        raise LayoutError(f"downcast({L}, {n}): more than one mode of stride 1, so the split "
                          f"elements would overlap")
    if not units:
        raise LayoutError(f"downcast({L}, {n}) needs a mode of stride 1 (adjacent elements to "
                          f"split), as CuTe's downcast does; {L} has none")
    split = (wide or units)[0]
    leaf = iter(range(len(flat)))

    def go(s, d):
        if isinstance(s, tuple):
            parts = [go(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
        return (s * n, d) if next(leaf) == split else (s, d * n)

    return _make(*go(L.shape, L.stride))


def recast(L, old_bits, new_bits):
    """``L`` over elements of ``old_bits`` re-expressed over elements of ``new_bits``.

    >>> print(recast(Layout((8, 4), (1, 8)), 16, 32))
    (4,4):(1,4)
    """
    if not isinstance(L, ComposedLayout):
        L = _as_layout(L, "recast", shapes=False)
    check_positive_int(old_bits, "recast", "old_bits")
    check_positive_int(new_bits, "recast", "new_bits")
    if new_bits == old_bits:
        return L
    if new_bits > old_bits:
        if new_bits % old_bits:
            raise LayoutError(f"recast: {new_bits} bits is not a multiple of {old_bits}")
        return upcast(L, new_bits // old_bits)
    if old_bits % new_bits:
        raise LayoutError(f"recast: {old_bits} bits is not a multiple of {new_bits}")
    return downcast(L, old_bits // new_bits)

