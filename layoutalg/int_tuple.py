"""IntTuples: an ``int`` or a nested ``tuple`` of them, and CuTe's functions on them.

Shapes are IntTuples of positive ints. Strides are IntTuples whose leaves are ints or
"stride values" that only need ``*`` by an int and ``+`` (sympy symbols, the basis
vectors of identity layouts). Coordinates and offsets may also be symbolic: sympy
expressions, or :class:`layoutalg.index_expr.IndexExpr` (run-time indices without
sympy). All indexing is 0-based and colexicographic (the first
mode varies fastest), as in CuTe.

>>> idx2crd(7, (2, (2, 3)))
(1, (1, 1))
>>> crd2idx((1, (1, 1)), (2, (2, 3)))
7
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Optional, Tuple, Union

from .errors import LayoutError
from .index_expr import IndexExpr

if TYPE_CHECKING:
    from .types import Coord, Int, IntTuple

__all__ = [
    "is_int", "is_tuple", "flatten", "leaves", "product", "prefix_product", "suffix_product",
    "shape_div", "ceil_div", "idx2crd", "crd2idx", "crd2crd", "congruent", "compatible",
    "weakly_congruent", "slice_", "has_none", "fill_none", "fmt", "tuple_max", "elem_scale",
    "divides", "less", "less_equal", "equal", "is_zero", "is_nonnegative", "is_positive_extent",
]


def is_int(x: object) -> bool:
    """True for a Python or numpy integer; False for bool."""
    return type(x) is int or (isinstance(x, numbers.Integral) and not isinstance(x, bool))


def _is_sympy(x):
    return type(x).__module__.startswith("sympy")


def _is_symbolic(x):
    """An integer known symbolically: a sympy expression or an IndexExpr."""
    return isinstance(x, IndexExpr) or _is_sympy(x)


def is_positive_extent(x):
    """An int > 0, or a sympy expression declared integer and positive (a symbolic extent)."""
    if is_int(x):
        return x > 0
    return (_is_sympy(x) and getattr(x, "is_integer", None) is True
            and getattr(x, "is_positive", None) is True)


# --- checks of the arguments of the public functions ------------------------------------------
# Each public function of IntTuples checks its arguments once, at its entry, and then runs its
# unchecked twin (``_product`` for ``product``...), which the rest of the package calls on
# values it has already checked (so the algebra's hot paths pay nothing).

def _leaf_problem(x, kind):
    """Why ``x`` is not a leaf of ``kind`` (None when it is one). Kinds: ``"extent"`` (an int
    > 0, or a sympy expression declared integer and positive), ``"index"`` (an int >= 0 or a
    sympy expression), ``"int"`` (an int or a sympy expression), ``"stride"`` (also a basis
    stride of an identity layout), ``"coord"`` (an index or None, CuTe's ``_``), ``"leaf"`` (a
    stride or None)."""
    if x is None:
        return None if kind == "coord" or kind == "leaf" else "None is not an integer"
    if type(x) is int or is_int(x):
        if kind == "extent" and x <= 0:
            return f"the extent {x} is not positive"
        if (kind == "index" or kind == "coord") and x < 0:
            return f"{x} is negative"
        return None
    if isinstance(x, IndexExpr):
        return f"{x} is a run-time index, not an extent" if kind == "extent" else None
    if _is_sympy(x):
        if kind == "extent" and not is_positive_extent(x):
            return (f"the symbolic extent {x} must be declared integer=True, positive=True")
        return None
    if (kind == "stride" or kind == "leaf") and getattr(x, "is_layout_stride", False):
        return None
    if isinstance(x, list):
        return f"{x!r} is a list (IntTuples are tuples)"
    return f"{x!r} is not an integer"


def _first_problem(t, kind):
    if type(t) is tuple:
        for x in t:
            if type(x) is int and x > 0:
                continue
            why = _first_problem(x, kind)
            if why is not None:
                return why
        return None
    return _leaf_problem(t, kind)


def check_int_tuple(t, what, name, kind="int"):
    """Check the IntTuple argument ``name`` of the public function ``what``: an int (not a
    bool) or a sympy expression, or a nested tuple of them, each leaf of ``kind`` (see
    ``_leaf_problem``). Raises TypeError for a leaf of the wrong type, LayoutError for a wrong
    value (a non-positive extent), naming the function, the argument and the leaf."""
    if type(t) is int and kind == "int":
        return
    why = _first_problem(t, kind)
    if why is not None:
        err = TypeError if "not an integer" in why or "a list" in why else LayoutError
        raise err(f"{what}: {name} {t!r}: {why}")


def check_positive_int(n, what, name):
    """The count or width ``n`` of the public function ``what``: a positive int (TypeError
    for another type, LayoutError for n <= 0, both naming ``what`` and ``name``)."""
    if not is_int(n):
        raise TypeError(f"{what}: {name} must be a positive int, not {n!r}")
    if n <= 0:
        raise LayoutError(f"{what}: {name} = {n} is not positive")
    return n


def _check_congruent(a, b, what, a_name, b_name):
    if not _congruent(a, b):
        raise LayoutError(f"{what}: {b_name} {fmt(b)} is not congruent with {a_name} {fmt(a)}")


# --- facts the algebra needs, decided for ints and for sympy expressions ----------------------
# An int answers at once; a sympy expression answers through its assumptions (``is_zero``,
# ``is_positive``), and a question it cannot answer raises LayoutError naming the missing fact,
# so a symbolic layout is never silently wrong either. ``what`` (a string, or a function
# returning one, so that messages cost nothing until needed) names the operation.


class _Undecided(LayoutError):
    """A fact about symbolic values that their sympy assumptions do not decide (a LayoutError;
    the algebra re-raises it as it is where it would otherwise wrap a LayoutError)."""


def _fact(x, attr):
    """``x.is_zero``/``is_positive``/``is_nonnegative`` (True, False or None), asking again
    in factored form where sympy's assumptions fail on the expanded one (``4*n*m - 2*n``
    is ``2*n*(2*m - 1)``, known >= 0)."""
    flag = getattr(x, attr)
    if flag is None and _is_sympy(x):
        import sympy  # symbolic values only: import layoutalg does without sympy
        flag = getattr(sympy.factor(x), attr)
    return flag


def _decide(flag, question, what):
    if flag is None:
        what = what() if callable(what) else what
        raise _Undecided(f"{what}: cannot decide whether {question} for symbolic values; "
                          f"state it as a sympy assumption (for example write an extent as "
                          f"128*m with m = Symbol('m', integer=True, positive=True))")
    return bool(flag)


def divides(a, b, what="layout algebra"):
    """True when ``a`` divides ``b`` (``a > 0``); symbolic values must decide it.

    >>> divides(4, 12), divides(8, 12)
    (True, False)
    """
    if type(a) is int and type(b) is int:
        return b % a == 0
    r = b % a
    if not _is_symbolic(r):
        return r == 0
    flag = r.is_zero
    if flag is None and _is_sympy(r):
        import sympy  # symbolic values only: import layoutalg does without sympy
        flag = sympy.cancel(b / a).is_integer
    return _decide(flag, f"{fmt(a)} divides {fmt(b)}", what)


def less(a, b, what="layout algebra"):
    """``a < b``, for ints or decidable sympy expressions."""
    if type(a) is int and type(b) is int:
        return a < b
    d = b - a
    if not _is_symbolic(d):
        return d > 0
    return _decide(_fact(d, "is_positive"), f"{fmt(a)} < {fmt(b)}", what)


def equal(a, b, what="layout algebra"):
    """``a == b``, for ints or decidable sympy expressions (equal as values, not as forms)."""
    if type(a) is int and type(b) is int:
        return a == b
    d = b - a
    if not _is_symbolic(d):
        return d == 0
    return _decide(_fact(d, "is_zero"), f"{fmt(a)} == {fmt(b)}", what)


def less_equal(a, b, what="layout algebra"):
    """``a <= b``, for ints or decidable sympy expressions."""
    if type(a) is int and type(b) is int:
        return a <= b
    d = b - a
    if not _is_symbolic(d):
        return d >= 0
    return _decide(_fact(d, "is_nonnegative"), f"{fmt(a)} <= {fmt(b)}", what)


def is_nonnegative(x, what="layout algebra"):
    """``x >= 0``, for ints or decidable sympy expressions."""
    if type(x) is int or not _is_symbolic(x):
        return x >= 0
    return _decide(_fact(x, "is_nonnegative"), f"{fmt(x)} >= 0", what)


def is_zero(x, what="layout algebra"):
    """``x == 0``, for ints, decidable sympy expressions, or other stride values."""
    if type(x) is int or not _is_symbolic(x):
        return x == 0
    return _decide(x.is_zero, f"{fmt(x)} is 0", what)


def is_tuple(x: object) -> bool:
    return isinstance(x, tuple)


def leaves(t: Coord) -> Tuple[Union[Int, None], ...]:
    """The leaves of ``t`` as a flat tuple (an int gives a 1-tuple)."""
    if not isinstance(t, tuple):
        return (t,)
    out = []
    for x in t:
        if isinstance(x, tuple):
            out.extend(leaves(x))
        else:
            out.append(x)
    return tuple(out)


def flatten(t: Coord) -> Coord:
    """CuTe's flatten: a flat tuple of the leaves; an int stays an int."""
    return leaves(t) if isinstance(t, tuple) else t


def product(t: IntTuple) -> Int:
    """Product of all leaves (1 for the empty tuple).

    >>> product((2, (3, 4))), product(())
    (24, 1)
    """
    check_int_tuple(t, "product", "t")
    return _product(t)


def _product(t):
    if not isinstance(t, tuple):
        return t
    p = 1
    for x in t:
        p *= _product(x)
    return p


def prefix_product(t: IntTuple, init: IntTuple = 1) -> IntTuple:
    """Exclusive prefix products, congruent with ``t``: ``prefix_product((2,(3,4))) == (1,(2,6))``."""
    check_int_tuple(t, "prefix_product", "t")
    check_int_tuple(init, "prefix_product", "init", "stride")
    return _prefix_product(t, init)


def _prefix_product(t, init=1):
    if not isinstance(t, tuple):
        return init
    out = []
    for x in t:
        out.append(_prefix_product(x, init))
        init = init * _product(x)
    return tuple(out)


def suffix_product(t: IntTuple, init: IntTuple = 1) -> IntTuple:
    """Exclusive suffix products (row-major strides): ``suffix_product((2,3,4)) == (12,4,1)``."""
    check_int_tuple(t, "suffix_product", "t")
    check_int_tuple(init, "suffix_product", "init", "stride")
    return _suffix_product(t, init)


def _suffix_product(t, init=1):
    if not isinstance(t, tuple):
        return init
    out = []
    for x in reversed(t):
        out.append(_suffix_product(x, init))
        init = init * _product(x)
    return tuple(reversed(out))


def _div_int(a, b, what):
    if divides(b, a, what):
        return a // b
    if divides(a, b, what):
        return 1
    raise LayoutError(f"{what}: neither of {a} and {b} divides the other")


def shape_div(a: IntTuple, b: IntTuple) -> IntTuple:
    """Divide shape ``a`` by ``b`` through its modes (CuTe's shape_div).

    ``a`` and ``b`` must be divisible one by the other at every step (the "shape
    divisibility condition"); otherwise LayoutError.

    >>> shape_div((4, 3), 2), shape_div((4, 5, 6), 40), shape_div(2, 4)
    ((2, 3), (1, 1, 3), 1)
    """
    check_int_tuple(a, "shape_div", "a", "extent")
    check_int_tuple(b, "shape_div", "b", "extent")
    return _shape_div(a, b)


def _shape_div(a, b):
    if isinstance(a, tuple):
        if isinstance(b, tuple):
            if len(a) != len(b):
                raise LayoutError(f"shape_div: ranks differ: {fmt(a)} / {fmt(b)}")
            return tuple(_shape_div(x, y) for x, y in zip(a, b))
        out = []
        for x in a:
            out.append(_shape_div(x, b))
            b = _div_int(b, _product(x), "shape divisibility condition") if b != 1 else 1
        return tuple(out)
    if isinstance(b, tuple):
        return _shape_div(a, _product(b))
    return _div_int(a, b, "shape divisibility condition")


def ceil_div(a: IntTuple, b: IntTuple) -> IntTuple:
    """Ceiling division; elementwise for congruent tuples, through the modes for tuple / int.
    ``a``'s leaves are ints >= 0, ``b``'s extents (> 0).

    >>> ceil_div(10, 4), ceil_div((10, 7), (4, 2)), ceil_div((4, 6), 8)
    (3, (3, 4), (1, 3))
    """
    check_int_tuple(a, "ceil_div", "a", "index")
    check_int_tuple(b, "ceil_div", "b", "extent")
    return _ceil_div(a, b)


def _ceil_div(a, b):
    if isinstance(a, tuple):
        if isinstance(b, tuple):
            if len(a) != len(b):
                raise LayoutError(f"ceil_div: ranks differ: {fmt(a)} / {fmt(b)}")
            return tuple(_ceil_div(x, y) for x, y in zip(a, b))
        out = []
        for x in a:
            out.append(_ceil_div(x, b))
            b = -(-b // _product(x)) if _product(x) else b
        return tuple(out)
    if isinstance(b, tuple):
        b = _product(b)
    return -(-a // b)


def elem_scale(a, b):
    """Multiply congruent IntTuples leaf by leaf."""
    if isinstance(a, tuple):
        return tuple(elem_scale(x, y) for x, y in zip(a, b))
    return a * b


def tuple_max(t):
    return max(leaves(t))


def congruent(a: Coord, b: Coord) -> bool:
    """Same tree structure (profile).

    >>> congruent((2, (3, 4)), (1, (2, 6))), congruent((2, 3), 6)
    (True, False)
    """
    check_int_tuple(a, "congruent", "a", "leaf")
    check_int_tuple(b, "congruent", "b", "leaf")
    return _congruent(a, b)


def _congruent(a, b):
    if isinstance(a, tuple):
        return (isinstance(b, tuple) and len(a) == len(b)
                and all(_congruent(x, y) for x, y in zip(a, b)))
    return not isinstance(b, tuple)


def weakly_congruent(a: Coord, b: Coord) -> bool:
    """``a``'s profile is a coarsening of ``b``'s: an int in ``a`` may stand for any subtree."""
    check_int_tuple(a, "weakly_congruent", "a", "leaf")
    check_int_tuple(b, "weakly_congruent", "b", "leaf")
    return _weakly_congruent(a, b)


def _weakly_congruent(a, b):
    if not isinstance(a, tuple):
        return True
    return (isinstance(b, tuple) and len(a) == len(b)
            and all(_weakly_congruent(x, y) for x, y in zip(a, b)))


def compatible(a: IntTuple, b: IntTuple) -> bool:
    """Shape ``a`` is compatible with shape ``b``: equal sizes, and every coordinate of ``a``
    is a coordinate of ``b``."""
    check_int_tuple(a, "compatible", "a", "extent")
    check_int_tuple(b, "compatible", "b", "extent")
    return _compatible(a, b)


def _compatible(a, b):
    if isinstance(a, tuple):
        return (isinstance(b, tuple) and len(a) == len(b)
                and all(_compatible(x, y) for x, y in zip(a, b)))
    return a == _product(b)


def _check_crd_args(what, crd, shape, stride, crd_name="crd"):
    check_int_tuple(crd, what, crd_name, "index")
    check_int_tuple(shape, what, "shape", "extent")
    if stride is not None:
        check_int_tuple(stride, what, "stride", "stride")
        _check_congruent(shape, stride, what, "shape", "stride")


def idx2crd(idx: IntTuple, shape: IntTuple, stride: Optional[IntTuple] = None) -> IntTuple:
    """The natural (hierarchical) coordinate of ``idx`` in ``shape``, colexicographic.

    With ``stride``, the coordinate ``(idx // stride) % shape`` leaf by leaf (CuTe's form;
    an extent-1 leaf has the coordinate 0, and a stride-0 leaf of a larger extent has none:
    LayoutError). A tuple ``idx`` is converted mode by mode.

    >>> idx2crd(7, (2, (2, 3))), idx2crd(7, (2, 4), (4, 1))
    ((1, (1, 1)), (1, 3))
    """
    _check_crd_args("idx2crd", idx, shape, stride, "idx")
    return _idx2crd(idx, shape, stride)


def _idx2crd(idx, shape, stride=None):
    if isinstance(idx, tuple):
        if not isinstance(shape, tuple) or len(idx) != len(shape):
            raise LayoutError(f"idx2crd: coordinate {fmt(idx)} does not match shape {fmt(shape)}")
        if stride is None:
            return tuple(_idx2crd(i, s) for i, s in zip(idx, shape))
        return tuple(_idx2crd(i, s, d) for i, s, d in zip(idx, shape, stride))
    if stride is None:
        stride = _prefix_product(shape)
    if isinstance(shape, tuple):
        return tuple(_idx2crd(idx, s, d) for s, d in zip(shape, stride))
    if shape == 1:
        return 0
    if stride == 0:
        raise LayoutError(f"idx2crd: the mode {shape}:0 repeats its index {shape} times, so "
                          f"an index has no coordinate in it")
    return (idx // stride) % shape


def crd2idx(crd: IntTuple, shape: IntTuple, stride: Optional[IntTuple] = None) -> Int:
    """Inner product of a coordinate with the strides (default: compact column-major).

    An int coordinate into a tuple shape is split colexicographically; the last mode is
    unbounded, so indices past the size extend the layout along its last mode (CuTe).
    """
    _check_crd_args("crd2idx", crd, shape, stride)
    return _crd2idx(crd, shape, stride)


def _crd2idx(crd, shape, stride=None):
    if stride is None:
        stride = _prefix_product(shape)
    if isinstance(crd, tuple):
        if not isinstance(shape, tuple) or len(crd) != len(shape):
            raise LayoutError(f"coordinate {fmt(crd)} does not match shape {fmt(shape)}")
        total = 0
        for c, s, d in zip(crd, shape, stride):
            total = total + _crd2idx(c, s, d)
        return total
    if not isinstance(shape, tuple):
        return crd * stride
    total = 0
    last = len(shape) - 1
    for k, (s, d) in enumerate(zip(shape, stride)):
        if k == last:
            total = total + _crd2idx(crd, s, d)
        else:
            n = _product(s)
            total = total + _crd2idx(crd % n, s, d)
            crd //= n
    return total


def crd2crd(crd: IntTuple, src_shape: IntTuple, dst_shape: IntTuple) -> IntTuple:
    """Convert a coordinate of ``src_shape`` into the coordinate of the same index in ``dst_shape``.

    >>> crd2crd((1, 2), (4, 8), (8, 4))
    (1, 1)
    """
    check_int_tuple(crd, "crd2crd", "crd", "index")
    check_int_tuple(src_shape, "crd2crd", "src_shape", "extent")
    check_int_tuple(dst_shape, "crd2crd", "dst_shape", "extent")
    return _idx2crd(_crd2idx(crd, src_shape), dst_shape)


def has_none(crd: Coord) -> bool:
    """Whether ``crd`` holds None (CuTe's ``_``) at any depth: a slice, not an element."""
    if crd is None:
        return True
    if not isinstance(crd, tuple):
        return False
    for c in crd:                   # (a loop, not any() over a generator: a hot path)
        if c is None or (isinstance(c, tuple) and has_none(c)):
            return True
    return False


def slice_(crd: Coord, t: Coord) -> Coord:
    """Keep the parts of ``t`` paired with None (CuTe's ``_``); nested results are flattened
    into one tuple, as CuTe's ``slice`` does.

    >>> slice_((None, 2), (4, 8)), slice_(((None, 1), None), ((2, 3), 4)), slice_(None, (2, 3))
    ((4,), (2, 4), (2, 3))
    """
    check_int_tuple(crd, "slice_", "crd", "coord")
    check_int_tuple(t, "slice_", "t", "stride")
    return _slice(crd, t)


def _slice(crd, t):
    if crd is None:
        return t
    if isinstance(crd, tuple):
        return _lift_slice(crd, t)
    return ()


def _lift_slice(crd, t):
    if crd is None:
        return (t,)
    if not isinstance(crd, tuple):
        return ()
    if not isinstance(t, tuple) or len(crd) != len(t):
        raise LayoutError(f"slice: coordinate {fmt(crd)} does not match {fmt(t)}")
    out = ()
    for c, x in zip(crd, t):
        out += _lift_slice(c, x)
    return out


def fill_none(crd: Coord, value: Int = 0) -> IntTuple:
    """Replace every None in a coordinate by ``value``."""
    if crd is None:
        return value
    if isinstance(crd, tuple):
        return tuple(fill_none(c, value) for c in crd)
    return crd


def fmt(t: Coord) -> str:
    """CuTe's text form: ``((2,2),3)``."""
    if isinstance(t, tuple):
        return "(" + ",".join(fmt(x) for x in t) + ")"
    if t is None:
        return "_"
    return str(t)
