"""Symbolic layouts: strides and extents that are sympy symbols, and a layout's index formula.

The algebra itself (composition, complement, divides, products) already accepts sympy values:
a stride may be any sympy integer expression, an extent a sympy expression declared
``integer=True, positive=True``. Whenever the algebra needs a fact (does 2 divide ``n``? is
``n < 4``?) it asks sympy's assumptions; a fact they cannot decide raises a
:class:`~layoutalg.errors.LayoutError` that names it ("cannot decide whether 2 divides n"),
and the user states it as an assumption, e.g. writes the extent as ``2*m``.

This module adds what a reader needs around that, and is the only part of ``layoutalg`` that
imports sympy (inside its functions, so ``import layoutalg`` does not load sympy):

- :func:`stride_symbols`, :func:`extent_symbols`, :func:`symbolic_layout`: constructors;
- :func:`coord_symbols`, :func:`layout_expr`: the index of a layout as a sympy expression of
  its coordinates, expanded and collected by coordinate;
- :func:`latex` (a :class:`Latex` string that a notebook renders): the formula in LaTeX;
- :func:`substitute`, :func:`same_function`: back to numbers, and equality as functions.

CuTe's documented example, with 16:9 picking every ninth element of (3,6,2,8):

>>> from layoutalg import Layout, composition
>>> w, x, y, z = stride_symbols("w x y z")
>>> R = composition(Layout((3, 6, 2, 8), (w, x, y, z)), Layout(16, 9))
>>> print(R)
(2,2,4):(3*x,y,z)
>>> same_function(R, Layout((1, 2, 2, 4), (9 * w, 3 * x, y, z)))
True

CuTe's documentation writes the result ``(1,2,2,4):(9w,3x,y,z)``. ``layoutalg`` drops the
size-1 mode, in numbers as in symbols (``composition((3,6,2,8):(1,100,1000,10000), 16:9)`` is
``(2,2,4):(300,1000,10000)``): a mode of extent 1 has the single coordinate 0, so its stride
never contributes and both forms are the same function of the same 16 indices. We keep the
algebra's form (one normal form for numeric and symbolic layouts alike) and compare with
:func:`same_function`, not ``==``, when a reference is written in another form.

Coordinate names (:func:`coord_symbols`): mode ``k`` of a layout has the coordinate ``i{k}``
(``i0``, ``i1``, ...; LaTeX ``i_{k}``); a hierarchical mode has one coordinate per leaf,
``i{k}_{j}`` for leaf ``j`` of mode ``k`` (deeper: ``i{k}_{j}_{l}``; LaTeX ``i_{k,j}``). They
are declared integer and non-negative.

>>> layout_expr(Layout(((2, 4), 3), ((1, x), 8)))
i0_0 + i0_1*x + 8*i1
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Union

from .errors import LayoutError
from .int_tuple import _congruent, _is_sympy, fmt, is_int, leaves
from .layout import Layout, _flat

__all__ = [
    "stride_symbols", "extent_symbols", "symbolic_layout", "coord_symbols", "layout_expr",
    "latex", "Latex", "substitute", "same_function", "free_symbols",
]


def _sympy():
    import sympy    # on first use: import layoutalg does without sympy
    return sympy


# --- constructors --------------------------------------------------------------------------
def stride_symbols(names: Union[str, Sequence[str]], **assumptions: Any) -> tuple:
    """A tuple of integer sympy symbols for strides, e.g. ``stride_symbols("w x y z")``.

    Further sympy assumptions may be given (``positive=True`` lets ``cosize`` order them).

    >>> stride_symbols("a b")
    (a, b)
    """
    sympy = _sympy()
    out = sympy.symbols(names, integer=True, **assumptions)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def extent_symbols(names: Union[str, Sequence[str]], **assumptions: Any) -> tuple:
    """A tuple of positive integer sympy symbols for extents (the algebra refuses a symbolic
    extent without these two assumptions). A divisibility fact is stated by writing the
    extent as a multiple: ``8 * n`` is known to be divisible by 8.

    >>> (n,) = extent_symbols("n")
    >>> n.is_positive, n.is_integer
    (True, True)
    """
    sympy = _sympy()
    out = sympy.symbols(names, integer=True, positive=True, **assumptions)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def symbolic_layout(shape: Any, stride: Any) -> Layout:
    """A Layout whose string entries are symbols: in ``shape`` positive integer extents, in
    ``stride`` integer strides. ``stride`` may also be one string of names, one per leaf of
    the shape, in order.

    >>> print(symbolic_layout((3, 6, 2, 8), "w x y z"))
    (3,6,2,8):(w,x,y,z)
    >>> print(symbolic_layout(("n", 4), (1, "n")))
    (n,4):(1,n)
    """
    cache = {}

    def conv(t, maker):
        if isinstance(t, (tuple, list)):
            return tuple(conv(x, maker) for x in t)
        if isinstance(t, str):
            name = t.strip()
            if not name.isidentifier():
                raise LayoutError(f"symbolic_layout: {t!r} is not a symbol name")
            if name not in cache:
                cache[name] = maker(name)[0]
            return cache[name]
        return t

    shp = conv(shape, extent_symbols)
    if isinstance(stride, str) and not stride.strip().isidentifier():
        names = stride.replace(",", " ").split()
        n = len(leaves(shp))
        if len(names) != n:
            raise LayoutError(f"symbolic_layout: {len(names)} stride names for the {n} leaves "
                              f"of shape {fmt(shp)}")
        it = iter(names)
        stride = _unflatten(shp, it)
    std = conv(stride, stride_symbols)
    return Layout(shp, std)


def _unflatten(template, it):
    if isinstance(template, tuple):
        return tuple(_unflatten(t, it) for t in template)
    return next(it)


# --- the index as an expression --------------------------------------------------------------
def coord_symbols(L: Layout, name: str = "i") -> Any:
    """The coordinate symbols of layout ``L``, a nested tuple congruent with its shape (a
    single symbol for a rank-1 layout with an integer shape): ``i{k}`` for mode ``k``,
    ``i{k}_{j}`` for leaf ``j`` of a hierarchical mode ``k``.

    >>> from layoutalg import Layout
    >>> coord_symbols(Layout(((2, 2), 4)))
    ((i0_0, i0_1), i1)
    """
    sympy = _sympy()
    _check_layout(L, "coord_symbols")

    def make(s, path):
        if isinstance(s, tuple):
            return tuple(make(x, path + (j,)) for j, x in enumerate(s))
        return sympy.Symbol(name + "_".join(str(p) for p in path), integer=True,
                            nonnegative=True)

    if not isinstance(L.shape, tuple):
        return make(L.shape, (0,))
    return tuple(make(s, (k,)) for k, s in enumerate(L.shape))


def _check_layout(L, what):
    if isinstance(L, Layout):
        return
    if hasattr(L, "outer") and hasattr(L, "inner"):
        raise LayoutError(f"{what}: {L} is a composed (swizzled) layout; a swizzle is a "
                          f"bitwise XOR, which has no polynomial formula. Use its inner "
                          f"layout, {what}(L.inner), and apply the swizzle to the result")
    raise TypeError(f"{what} needs a Layout, not {type(L).__name__}: {L!r}")


def layout_expr(L: Layout, coords: Any = None) -> Any:
    """The index ``L(coords)`` as a sympy expression, expanded and collected by coordinate.

    ``coords``: None (the symbols of :func:`coord_symbols`); a coordinate congruent with the
    shape, or a flat sequence with one entry per leaf (ints, symbols or expressions); or a
    single index (an int, a sympy expression, or a name) over the whole layout, which is split
    colexicographically as CuTe does: leaf ``k`` gets ``floor(i / p_k) mod s_k`` (``p_k`` the
    product of the extents before it), the last leaf ``floor(i / p_k)``.

    >>> from layoutalg import Layout
    >>> w, x = stride_symbols("w x")
    >>> layout_expr(Layout((3, 4), (w, x)))
    i0*w + i1*x
    >>> layout_expr(Layout((3, 4), (w, x)), "i")
    w*(Mod(i, 3)) + x*floor(i/3)
    >>> layout_expr(Layout((3, 4), (w, x)), (2, 1))
    2*w + x
    """
    sympy = _sympy()
    _check_layout(L, "layout_expr")
    pairs = _flat(L)
    for s, d in pairs:
        if not (is_int(d) or _is_sympy(d)):
            raise LayoutError(f"layout_expr({L}): stride {d!r} is not a number or a sympy "
                              f"expression (a basis stride of an identity layout has none)")
    if coords is None:
        coords = coord_symbols(L)
    if isinstance(coords, str):
        coords = sympy.Symbol(coords, integer=True, nonnegative=True)
    if not (isinstance(coords, (tuple, list)) or is_int(coords) or _is_sympy(coords)):
        raise TypeError(f"layout_expr: coords must be None, a coordinate, an index or a name, "
                        f"not {coords!r}")
    if isinstance(coords, (tuple, list)):
        flat = _flat_coords(coords, L)
    else:                                       # one index over the whole layout
        i, flat, p = sympy.sympify(coords), [], sympy.Integer(1)
        for k, (s, _) in enumerate(pairs):
            c = sympy.floor(i / p)
            flat.append(c if k == len(pairs) - 1 else sympy.Mod(c, s))
            p = p * s
    expr = sympy.expand(sum((sympy.sympify(c) * d for c, (_, d) in zip(flat, pairs)),
                            sympy.Integer(0)))
    syms = [c for c in flat if isinstance(c, sympy.Symbol)]
    return sympy.collect(expr, syms) if syms else expr


def _flat_coords(coords, L):
    n = len(_flat(L))
    shape = L.shape if isinstance(L.shape, tuple) else (L.shape,)
    c = tuple(coords)
    if _congruent(c, shape) or (len(c) == n and not any(isinstance(x, (tuple, list))
                                                         for x in c)):
        flat = list(leaves(c)) if _congruent(c, shape) else list(c)
        for x in flat:
            if not (is_int(x) or _is_sympy(x) or isinstance(x, str)):
                raise TypeError(f"layout_expr: coordinate {x!r} is not an int, a sympy "
                                f"expression or a name")
        return flat
    raise LayoutError(f"layout_expr: coordinate {fmt(c)} neither matches shape "
                      f"{fmt(L.shape)} nor has one entry per leaf ({n})")


# --- LaTeX ------------------------------------------------------------------------------------
class Latex(str):
    """LaTeX text (``$...$``) that a notebook renders (it is a ``str`` in every other way)."""

    def _repr_latex_(self):
        return str(self)

    def __repr__(self):
        return f"Latex({str.__repr__(self)})"


def _latex_names(coords):
    """LaTeX names of coordinate symbols: ``i1_0`` -> ``i_{1,0}``."""
    names = {}
    for c in _iter_leaves(coords):
        name = getattr(c, "name", None)
        if name is None:
            continue
        head = name.rstrip("0123456789_")
        rest = name[len(head):]
        if head and rest and rest[0].isdigit():
            names[c] = f"{head}_{{{rest.replace('_', ',')}}}"
    return names


def _iter_leaves(t):
    if isinstance(t, (tuple, list)):
        for x in t:
            yield from _iter_leaves(x)
    else:
        yield t


def latex(L: Layout, coords: Any = None) -> Latex:
    """The layout and its index formula in LaTeX, as a :class:`Latex` (shown rendered in a
    notebook): ``shape:stride`` then ``coordinates -> index``.

    >>> print(latex(symbolic_layout((3, 4), "w x")))
    $(3,4):(w,x)\\colon\\ (i_{0},i_{1}) \\mapsto i_{0} w + i_{1} x$
    """
    sympy = _sympy()
    _check_layout(L, "latex")
    if coords is None:
        coords = coord_symbols(L)
    if isinstance(coords, str):
        coords = sympy.Symbol(coords, integer=True, nonnegative=True)
    names = _latex_names(coords)
    expr = layout_expr(L, coords)

    def tex(t):
        if isinstance(t, (tuple, list)):
            return "(" + ",".join(tex(x) for x in t) + ")"
        return sympy.latex(sympy.sympify(t), symbol_names=names)

    lhs = f"{tex(L.shape)}:{tex(L.stride)}"
    return Latex(f"${lhs}\\colon\\ {tex(coords)} \\mapsto "
                 f"{sympy.latex(expr, symbol_names=names)}$")


# --- back to numbers ----------------------------------------------------------------------
def free_symbols(L: Layout) -> set:
    """The sympy symbols in the shape and stride of ``L``.

    >>> sorted(map(str, free_symbols(symbolic_layout(("n", 4), (1, "n")))))
    ['n']
    """
    out = set()
    for s, d in _flat(L):
        for v in (s, d):
            if _is_sympy(v):
                out |= v.free_symbols
    return out


def substitute(L: Layout, values: Mapping[Any, Any]) -> Layout:
    """``L`` with its symbols replaced: ``values`` maps symbols (or their names) to numbers.
    Leaves that become integers are stored as ``int``, so the result is a numeric Layout
    when every symbol is given.

    >>> print(substitute(symbolic_layout(("n", 4), (1, "n")), {"n": 3}))
    (3,4):(1,3)
    """
    sympy = _sympy()
    by_name = {}
    for k, v in values.items():
        by_name[k if isinstance(k, str) else k.name] = v
    subs = {s: by_name[s.name] for s in free_symbols(L) if s.name in by_name}

    def conv(t):
        if isinstance(t, tuple):
            return tuple(conv(x) for x in t)
        if not _is_sympy(t):
            return t
        v = sympy.sympify(t).subs(subs)
        return int(v) if v.is_Integer else v

    return Layout(conv(L.shape), conv(L.stride))


def same_function(A: Layout, B: Layout) -> bool:
    """True when layouts ``A`` and ``B`` have the same size and ``A(i) == B(i)`` for every
    index ``i`` (decided by sympy for symbolic strides): equality as functions, which
    ignores how the modes are grouped and size-1 modes. Needs integer sizes.

    >>> from layoutalg import Layout
    >>> same_function(Layout((2, 2), (1, 2)), Layout(4, 1)), Layout((2, 2), (1, 2)) == Layout(4)
    (True, False)
    """
    sympy = _sympy()
    for L in (A, B):
        _check_layout(L, "same_function")
        if not is_int(L.size):
            raise LayoutError(f"same_function: {L} has the symbolic size {L.size}; substitute "
                              f"numbers for its extents first")
    if A.size != B.size:
        return False
    return all(sympy.expand(sympy.sympify(A(i)) - sympy.sympify(B(i))) == 0
               for i in range(A.size))
