"""Type aliases for the annotations of the public API. Only type checkers read them: the
modules import this one under ``typing.TYPE_CHECKING`` and annotate with
``from __future__ import annotations``, so nothing here runs when the algebra is used.

- ``Int``: a Python int, or a sympy integer expression (symbolic layouts).
- ``IntTuple``: an ``Int`` or a nested tuple of them (shapes, strides, coordinates).
- ``Coord``: an ``IntTuple`` whose leaves may be None (CuTe's ``_``: keep that mode).
- ``AnyLayout``: a Layout or a ComposedLayout (a swizzle after a layout).
- ``Tiler``: a layout, an extent, None, or a tuple of tilers (one per mode).
"""

from typing import TYPE_CHECKING, Tuple, Union

if TYPE_CHECKING:
    import sympy

    from .layout import Layout
    from .swizzle import ComposedLayout

Int = Union[int, "sympy.Expr"]
IntTuple = Union[Int, Tuple["IntTuple", ...]]
Coord = Union[Int, None, Tuple["Coord", ...]]
AnyLayout = Union["Layout", "ComposedLayout"]
Tiler = Union[None, int, "Layout", "ComposedLayout", Tuple["Tiler", ...]]

__all__ = ["Int", "IntTuple", "Coord", "AnyLayout", "Tiler"]
