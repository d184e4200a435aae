"""Tiling: the divides and products of layouts, and tile_to_shape.

A divide splits a layout into tiles and the arrangement of the tiles; a product repeats a
layout as another one says. The zipped, tiled and flat forms only regroup the modes.

>>> print(logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2)))
((2,2),(2,3)):((4,1),(2,8))
>>> print(zipped_divide(Layout((128, 64)), (32, 8)))
((32,8),(4,8)):((1,128),(32,1024))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .core import (
    _algebra_strides, _complement, _compose, by_mode, cached, check_tiler, coalesce, complement,
    composition,
)
from .errors import LayoutError
from .int_tuple import _product, check_int_tuple, fmt
from .layout import Layout, _as_layout, _concat, _make, append, make_ordered_layout
from .swizzle import ComposedLayout

if TYPE_CHECKING:
    from .types import AnyLayout, IntTuple, Tiler

__all__ = [
    "logical_divide", "zipped_divide", "tiled_divide", "flat_divide", "logical_product",
    "zipped_product", "tiled_product", "flat_product", "blocked_product", "raked_product",
    "tile_to_shape",
]


def _pair(A, B):
    return _make((A._shape, B._shape), (A._stride, B._stride))


def _operands(A, B, what):
    """Check the operands of a divide or product; an int B means ``B:1``."""
    if not isinstance(A, (Layout, ComposedLayout)):
        raise TypeError(f"{what}: expected a layout, not {A!r}")
    if isinstance(B, tuple):
        check_tiler(B, what)
        return B
    if B is None:
        return B
    B = _as_layout(B, what, composed=True)
    if isinstance(B, ComposedLayout):
        raise LayoutError(f"{what}: the swizzled layout {B} as the right operand is not "
                          f"supported (its complement is not defined)")
    return B


# --- divides ------------------------------------------------------------------------------
def logical_divide(A: AnyLayout, B: Tiler) -> AnyLayout:
    """``composition(A, make_layout(B, complement(B, size(A))))``: mode 0 is the tile B,
    mode 1 the tiles' arrangement. A tuple B divides mode by mode.

    >>> print(logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2)))
    ((2,2),(2,3)):((4,1),(2,8))
    """
    return _logical_divide(A, _operands(A, B, "logical_divide"))


def _divide_mode(A, B):
    """logical_divide of one mode of A by one element of a by-mode tiler."""
    if type(B) is Layout and type(A) is Layout:
        return _divide_plain(A, B)
    return _logical_divide(A, _operands(A, B, "logical_divide"))


def _divide_plain(A, B):
    """``A o (B, complement(B, size(A)))`` for plain layouts (the common case, called
    directly: its two steps are cached)."""
    n = A.size
    if type(n) is int:
        return _compose(A, _pair(B, _complement(B, n)))
    return composition(A, _pair(B, complement(B, n)))


@cached
def _logical_divide(A, B):
    if B is None:
        return A
    if isinstance(B, tuple):
        return by_mode(_divide_mode, A, B)
    if isinstance(A, ComposedLayout):
        return A.with_inner(_logical_divide(A.inner, B))
    if type(A) is Layout and type(B) is Layout:
        return _divide_plain(A, B)
    return composition(A, _pair(B, complement(B, A.size)))


def _zip_tiles(R, tiler, A_rank):
    """Regroup a by-mode divide or product ``R`` into ((tiles...), (rests...)). Works on the
    shape and stride tuples: mode i of R is the pair (tile_i, rest_i), or mode i of A where
    the tiler holds None (its rest is then ``1:0``)."""
    if isinstance(R, ComposedLayout):
        return R.with_inner(_zip_tiles(R.inner, tiler, A_rank))
    if not isinstance(tiler, tuple):
        return R
    shp, std = R._shape, R._stride
    ts, td, rs, rd = [], [], [], []
    for i, t in enumerate(tiler):
        if isinstance(t, tuple):
            raise LayoutError("zipped/tiled/flat forms take a flat tuple of tilers")
        if t is None:
            ts.append(shp[i])
            td.append(std[i])
            rs.append(1)
            rd.append(0)
        else:
            ts.append(shp[i][0])
            td.append(std[i][0])
            rs.append(shp[i][1])
            rd.append(std[i][1])
    n = len(tiler)
    return _make((tuple(ts), tuple(rs) + shp[n:A_rank]), (tuple(td), tuple(rd) + std[n:A_rank]))


def _regroup(Z, modes):
    if isinstance(Z, ComposedLayout):
        return Z.with_inner(_regroup(Z.inner, modes))
    return _make(*modes(Z._shape, Z._stride))


def _as_modes(s, d):
    """The modes of the layout s:d, as a tuple of shapes and a tuple of strides."""
    return (s, d) if type(s) is tuple else ((s,), (d,))


def _tiled(shp, std):
    """((tile modes), rest0, rest1, ...) from ((tile modes), (rest modes))."""
    s1, d1 = _as_modes(shp[1], std[1])
    return (shp[0],) + s1, (std[0],) + d1


def _flat_modes(shp, std):
    """(tile0, tile1, ..., rest0, rest1, ...) from ((tile modes), (rest modes))."""
    s0, d0 = _as_modes(shp[0], std[0])
    s1, d1 = _as_modes(shp[1], std[1])
    return s0 + s1, d0 + d1


def zipped_divide(A: AnyLayout, B: Tiler) -> AnyLayout:
    """``logical_divide`` regrouped as ``((tile modes), (rest modes))``.

    >>> print(zipped_divide(Layout((128, 64)), (32, 8)))
    ((32,8),(4,8)):((1,128),(32,1024))
    """
    return _zipped_divide(A, _operands(A, B, "zipped_divide"))


@cached
def _zipped_divide(A, B):
    return _zip_tiles(_logical_divide(A, B), B, A.rank)


def tiled_divide(A: AnyLayout, B: Tiler) -> AnyLayout:
    """``logical_divide`` regrouped as ``((tile modes), rest0, rest1, ...)``."""
    return _tiled_divide(A, _operands(A, B, "tiled_divide"))


@cached
def _tiled_divide(A, B):
    return _regroup(_zipped_divide(A, B), _tiled)


def flat_divide(A: AnyLayout, B: Tiler) -> AnyLayout:
    """``logical_divide`` regrouped as ``(tile0, tile1, ..., rest0, rest1, ...)``."""
    return _flat_divide(A, _operands(A, B, "flat_divide"))


@cached
def _flat_divide(A, B):
    return _regroup(_zipped_divide(A, B), _flat_modes)


# --- products -----------------------------------------------------------------------------
def logical_product(A: AnyLayout, B: Tiler) -> AnyLayout:
    """``make_layout(A, composition(complement(A, size(A) * cosize(B)), B))``: mode 0 is A,
    mode 1 is B's arrangement of copies of A. An int B means ``B:1`` (a product, never a
    divide); a tuple B multiplies mode by mode.

    >>> print(logical_product(Layout((2, 2), (4, 1)), Layout(6, 1)))
    ((2,2),(2,3)):((4,1),(2,8))
    """
    return _logical_product(A, _operands(A, B, "logical_product"))


def _product_mode(A, B):
    """logical_product of one mode of A by one element of a by-mode tiler."""
    if type(B) is Layout and type(A) is Layout:
        return _product_plain(A, B)
    return _logical_product(A, _operands(A, B, "logical_product"))


def _product_plain(A, B):
    """``(A, complement(A, size(A) * cosize(B)) o B)`` for plain layouts."""
    _algebra_strides(B, "logical_product")
    n = A.size * B.cosize
    if type(n) is int:
        return _pair(A, _compose(_complement(A, n), B))
    return _pair(A, composition(complement(A, n), B))


@cached
def _logical_product(A, B):
    if B is None:
        return A
    if isinstance(B, tuple):
        return by_mode(_product_mode, A, B)
    if isinstance(A, ComposedLayout):
        return A.with_inner(_logical_product(A.inner, B))
    if type(A) is Layout and type(B) is Layout:
        return _product_plain(A, B)
    _algebra_strides(B, "logical_product")
    return _pair(A, composition(complement(A, A.size * B.cosize), B))


def zipped_product(A: AnyLayout, B: Tiler) -> AnyLayout:
    """``logical_product`` regrouped as ``((A modes), (copies modes))``."""
    return _zipped_product(A, _operands(A, B, "zipped_product"))


@cached
def _zipped_product(A, B):
    return _zip_tiles(_logical_product(A, B), B, A.rank)


def tiled_product(A: AnyLayout, B: Tiler) -> AnyLayout:
    """``logical_product`` regrouped as ``((A modes), copies0, copies1, ...)``."""
    return _regroup(zipped_product(A, B), _tiled)


def flat_product(A: AnyLayout, B: Tiler) -> AnyLayout:
    """``logical_product`` regrouped as ``(A0, A1, ..., copies0, copies1, ...)``."""
    return _regroup(zipped_product(A, B), _flat_modes)


def _rank_product(A, B, what):
    """``logical_product`` of A and B padded to the same rank, and that rank (A and B checked
    by ``_rank_operands``)."""
    r = max(A.rank, B.rank)
    return _logical_product(append(A, n=r), append(B, n=r)), r


def blocked_product(A: AnyLayout, B: Layout) -> AnyLayout:
    """Copies of block A arranged as B, mode by mode: mode i is (A_i, B_i).

    >>> print(blocked_product(Layout((3, 4), (4, 1)), Layout((2, 5), (1, 2))))
    ((3,2),(4,5)):((4,12),(1,24))
    """
    return _blocked_product(*_rank_operands(A, B, "blocked_product"))


def _rank_operands(A, B, what):
    """The operands of blocked_product and raked_product: A a layout, B a layout or a shape."""
    if not isinstance(A, (Layout, ComposedLayout)):
        raise TypeError(f"{what}: expected a layout, not {A!r}")
    B = _as_layout(B, what, composed=True)
    if isinstance(B, ComposedLayout):
        raise LayoutError(f"{what}: the swizzled layout {B} as the right operand is not "
                          f"supported (its complement is not defined)")
    return A, B


@cached
def _blocked_product(A, B):
    if isinstance(A, ComposedLayout):
        return A.with_inner(_blocked_product(A.inner, B))
    P, r = _rank_product(A, B, "blocked_product")
    return _concat([_pair(P[0][i], P[1][i]) for i in range(r)])


def raked_product(A: AnyLayout, B: Layout) -> AnyLayout:
    """A's elements raked across B's arrangement, mode by mode: mode i is (B_i, A_i).

    >>> print(raked_product(Layout((3, 4), (4, 1)), Layout((2, 5), (1, 2))))
    ((2,3),(5,4)):((12,4),(24,1))
    """
    return _raked_product(*_rank_operands(A, B, "raked_product"))


@cached
def _raked_product(A, B):
    if isinstance(A, ComposedLayout):
        return A.with_inner(_raked_product(A.inner, B))
    P, r = _rank_product(A, B, "raked_product")
    return _concat([_pair(P[1][i], P[0][i]) for i in range(r)])


def tile_to_shape(block: AnyLayout, trg_shape: IntTuple,
                  order: Optional[IntTuple] = None) -> AnyLayout:
    """Repeat ``block`` (blocked_product) until it has shape ``trg_shape``, the copies laid
    out in ``order`` (default column-major); each mode is coalesced.

    >>> print(tile_to_shape(Layout((2, 2), (1, 2)), (4, 6)))
    ((2,2),(2,3)):((1,4),(2,8))
    """
    if isinstance(block, ComposedLayout):
        return block.with_inner(tile_to_shape(block.inner, trg_shape, order))
    if not isinstance(block, Layout):
        raise TypeError(f"tile_to_shape: expected a layout, not {block!r}")
    check_int_tuple(trg_shape, "tile_to_shape", "trg_shape", "extent")
    if order is not None:
        check_int_tuple(order, "tile_to_shape", "order")
    return _tile_to_shape(block, trg_shape, order)


@cached
def _tile_to_shape(block, trg_shape, order):
    trg = trg_shape if isinstance(trg_shape, tuple) else (trg_shape,)
    if block.rank > len(trg):
        raise LayoutError(f"tile_to_shape: block {block} has more modes than {fmt(trg_shape)}")
    padded = append(block, n=len(trg))
    reps = []
    for i, t in enumerate(trg):
        b = padded[i].size
        if _product(t) % b:
            raise LayoutError(f"tile_to_shape: extent {_product(t)} of mode {i} is not a "
                              f"multiple of the block's extent {b}")
        reps.append(_product(t) // b)
    tiled = _blocked_product(padded, make_ordered_layout(tuple(reps), order))
    return coalesce(tiled, tuple(1 for _ in trg))
