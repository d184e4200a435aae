"""Integer expressions of run-time indices, without sympy.

A kernel's offsets depend on values known only when it runs: a thread's or a block's index,
a tensor's offset. :mod:`gemm.cute` types them by running layoutalg's own functions on
symbols for those values, and a kernel whose layouts are static needs nothing more than
sums, products, floor division and modulo of them by constants. This module is that
arithmetic, so such a kernel compiles without importing sympy.

An expression is an int, or an :class:`IndexExpr`: a symbol (:func:`index_symbol`, a
non-negative integer), ``x // c`` or ``x % c`` of an expression and a positive int, or a
polynomial of those with int coefficients. Arithmetic is exact (Python's floor division and
modulo), and every result is put in one normal form, so equal forms compare equal and
constants fold:

- ``(c*q + r) // c`` is ``q + r // c`` and ``(c*q + r) % c`` is ``r % c`` for integer q;
- a factor g common to c and every coefficient cancels: ``(g*x) // (g*c)`` is ``x // c``,
  ``(g*x) % (g*c)`` is ``g * (x % c)``;
- ``(x // a) // b`` is ``x // (a*b)``; ``(x % a) % c`` is ``x % c`` where c divides a and
  ``x % a`` where a <= c;
- ``x // 1`` is x and ``x % 1`` is 0.

Facts (``is_nonnegative``, ``is_positive``, ``is_zero``) are True or False where the form
shows them (symbols are non-negative) and None otherwise, as sympy's assumptions answer, so
layoutalg decides what it needs or names the fact it could not decide. Ordering comparisons
and ``bool`` raise TypeError: the value is not known until the kernel runs.

>>> t = index_symbol("t")
>>> (4 * t + 2) // 4, (4 * t + 6) % 4, (t // 4) // 8, (t % 128) % 32
(t, 2, t // 32, t % 32)
"""

import numbers
from math import gcd

__all__ = ["IndexExpr", "index_symbol", "evaluate", "split_multiples", "constant_term"]


def _int(x):
    """``x`` as an int where it is an integer (not a bool), else None."""
    if type(x) is int:
        return x
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return int(x)
    return None


class IndexExpr:
    """A symbolic non-constant integer (see the module). ``op`` is "symbol" (``args``:
    its name), "floordiv" or "mod" (the expression and the positive int), or "sum" (a tuple
    of (monomial, coefficient), a monomial a sorted tuple of the other kinds, and the
    constant)."""

    __slots__ = ("op", "args", "_key", "_hash")
    is_integer = True               # sympy's names for the facts layoutalg asks
    is_Integer = False

    def __init__(self, op, args, key):
        self.op, self.args, self._key = op, args, key
        self._hash = hash(key)

    # --- facts ---------------------------------------------------------------------------
    @property
    def is_nonnegative(self):
        if self.op == "symbol" or self.op == "mod":
            return True
        if self.op == "floordiv":
            return self.args[0].is_nonnegative
        terms, const = self.args
        if const >= 0 and all(k > 0 and all(a.is_nonnegative for a in m) for m, k in terms):
            return True
        return None

    @property
    def is_positive(self):
        if self.op == "sum" and self.args[1] > 0 and self.is_nonnegative:
            return True
        return None

    @property
    def is_zero(self):
        return False if self.is_positive else None

    @property
    def free_symbols(self):
        if self.op == "symbol":
            return {self}
        if self.op != "sum":
            return self.args[0].free_symbols
        return set().union(*(a.free_symbols for m, _ in self.args[0] for a in m))

    @property
    def name(self):
        if self.op != "symbol":
            raise AttributeError(f"{self} is not a symbol")
        return self.args[0]

    # --- arithmetic ----------------------------------------------------------------------
    def __add__(self, other):
        if _int(other) is None and not isinstance(other, IndexExpr):
            return NotImplemented
        p = _poly(self)
        for m, k in _poly(other).items():
            p[m] = p.get(m, 0) + k
        return _build(p)

    __radd__ = __add__

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        if _int(other) is None and not isinstance(other, IndexExpr):
            return NotImplemented
        return self + other * -1

    def __rsub__(self, other):
        if _int(other) is None:
            return NotImplemented
        return self * -1 + other

    def __mul__(self, other):
        c = _int(other)
        if c is not None:
            return _build({m: k * c for m, k in _poly(self).items()})
        if not isinstance(other, IndexExpr):
            return NotImplemented
        p = {}
        for m1, k1 in _poly(self).items():
            for m2, k2 in _poly(other).items():
                m = tuple(sorted(m1 + m2, key=_sort_key))
                p[m] = p.get(m, 0) + k1 * k2
        return _build(p)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return _floordiv(self, _divisor(self, other, "//"))

    def __mod__(self, other):
        return _mod(self, _divisor(self, other, "%"))

    def __rfloordiv__(self, other):
        raise TypeError(f"{other} // {self}: an index expression divides only by a positive "
                        "int")

    __rmod__ = __rfloordiv__

    # --- comparison ----------------------------------------------------------------------
    def __eq__(self, other):
        if isinstance(other, IndexExpr):
            return self._key == other._key
        if _int(other) is not None:
            return False            # a normal form is never a constant
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return self._hash

    def _undecided(self, other=None):
        raise TypeError(f"cannot compare {self}{'' if other is None else f' with {other}'}: "
                        "its value is known only at run time")

    __lt__ = __le__ = __gt__ = __ge__ = _undecided

    def __bool__(self):
        self._undecided()

    # --- text ----------------------------------------------------------------------------
    def __str__(self):
        if self.op == "symbol":
            return self.args[0]
        if self.op != "sum":
            sign = "//" if self.op == "floordiv" else "%"
            x = self.args[0]
            inner = f"({x})" if x.op == "sum" else str(x)
            return f"{inner} {sign} {self.args[1]}"
        terms, const = self.args
        parts = []
        for m, k in terms:
            factors = [f"({a})" if a.op != "symbol" else str(a) for a in m]
            parts.append("*".join(([str(k)] if k != 1 else []) + factors))
        if const:
            parts.append(str(const))
        return " + ".join(parts).replace("+ -", "- ")

    __repr__ = __str__


def index_symbol(name):
    """The symbol ``name``: a non-negative integer known only at run time."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"index_symbol: a name is a non-empty string, not {name!r}")
    return IndexExpr("symbol", (name,), (0, name))


def evaluate(x, values):
    """The int value of an expression, its symbols bound to the ints of ``values``.

    >>> t = index_symbol("t")
    >>> evaluate((3 * t + 5) // 4 + t % 2, {t: 7})
    7
    """
    if _int(x) is not None:
        return _int(x)
    if x.op == "symbol":
        return values[x]
    if x.op != "sum":
        arg, c = evaluate(x.args[0], values), x.args[1]
        return arg // c if x.op == "floordiv" else arg % c
    terms, const = x.args
    total = evaluate(const, values)
    for monomial, k in terms:
        part = evaluate(k, values)
        for atom in monomial:
            part *= evaluate(atom, values)
        total += part
    return total


def split_multiples(x, m):
    """``(rest, multiple)`` with ``x == rest + multiple``: ``multiple`` the terms of ``x``
    whose coefficient is a multiple of the positive int ``m`` and the constant's whole
    multiples of ``m``; ``rest`` the other terms and the constant's remainder, in ``[0, m)``.

    >>> t, s = index_symbol("t"), index_symbol("s")
    >>> split_multiples(4 * t + 1024 * s + 1100, 512)
    (4*t + 76, 1024*s + 1024)
    """
    whole, rest = {}, {}
    for monomial, k in _poly(x).items():
        if monomial == ():
            whole[()], rest[()] = k - k % m, k % m
        else:
            (whole if k % m == 0 else rest)[monomial] = k
    return _build(rest), _build(whole)


def constant_term(x):
    """The constant term of an expression (an int: itself).

    >>> constant_term(4 * index_symbol("t") + 76), constant_term(index_symbol("t") // 2)
    (76, 0)
    """
    return _poly(x).get((), 0)


def _sort_key(atom):
    return atom._key


def _poly(x):
    """{monomial: coefficient} of an int or an IndexExpr (the constant under ``()``)."""
    if isinstance(x, IndexExpr):
        if x.op != "sum":
            return {(x,): 1}
        terms, const = x.args
        p = dict(terms)
        if const:
            p[()] = const
        return p
    c = _int(x)
    return {(): c} if c else {}


def _build(p):
    """The normal form of {monomial: coefficient}: an int, an atom or a sum."""
    const = p.pop((), 0)
    terms = tuple(sorted(((m, k) for m, k in p.items() if k), key=_term_key))
    if not terms:
        return const
    if not const and len(terms) == 1 and terms[0][1] == 1 and len(terms[0][0]) == 1:
        return terms[0][0][0]
    key = (3, tuple((tuple(a._key for a in m), k) for m, k in terms), const)
    return IndexExpr("sum", (terms, const), key)


def _term_key(term):
    return tuple(a._key for a in term[0])


def _divisor(x, c, sign):
    n = _int(c)
    if n is None:
        raise TypeError(f"{x} {sign} {c}: an index expression divides only by a positive int")
    if n <= 0:
        raise ValueError(f"{x} {sign} {c}: the divisor must be positive")
    return n


def _split(x, c):
    """({monomial: quotient}, {monomial: remainder}) of x's coefficients by c."""
    q, r = {}, {}
    for m, k in _poly(x).items():
        q[m], r[m] = divmod(k, c)
    return q, {m: k for m, k in r.items() if k}


def _floordiv(x, c):
    if c == 1:
        return x
    q, r = _split(x, c)
    if not r:
        return _build(q)
    g = gcd(c, *r.values())
    rest, c = _build({m: k // g for m, k in r.items()}), c // g
    if _int(rest) is not None:      # 0 <= rest < c
        return _build(q)
    if rest.op == "floordiv":       # (y // a) // c is y // (a*c)
        atom = _floordiv(rest.args[0], rest.args[1] * c)
    else:
        atom = IndexExpr("floordiv", (rest, c), (1, rest._key, c))
    return _build(q) + atom


def _mod(x, c):
    if c == 1:
        return 0
    _, r = _split(x, c)
    if not r:
        return 0
    g = gcd(c, *r.values())
    if g > 1:
        return g * _mod(_build({m: k // g for m, k in r.items()}), c // g)
    rest = _build(r)
    if _int(rest) is not None:      # 0 <= rest < c
        return rest
    if rest.op == "mod":
        a = rest.args[1]
        if a <= c:                  # already below c
            return rest
        if a % c == 0:
            return _mod(rest.args[0], c)
    return IndexExpr("mod", (rest, c), (2, rest._key, c))
