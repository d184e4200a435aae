"""layoutalg.index_expr: run-time index arithmetic without sympy, exact against ints, and
layoutalg's partitions and tiles over it equal to the numeric ones for every thread."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from layoutalg import (Layout, LayoutError, complement, SM80_16x8x16_F32F16F16F32_TN,
                       SM80_CP_ASYNC_CACHEALWAYS, local_partition, local_tile,
                       make_identity_tensor, make_tensor, make_tiled_copy, make_tiled_mma)
from layoutalg.atom import SM90_64xNx16_F32BF16BF16_SS
from layoutalg.index_expr import IndexExpr, index_symbol
from layoutalg.int_tuple import ceil_div

NAMES = ("t", "u", "v")
SYMBOLS = {n: index_symbol(n) for n in NAMES}


def evaluate(x, env):
    """The int value of an expression with its symbols bound in ``env`` (name -> int)."""
    if not isinstance(x, IndexExpr):
        return x
    if x.op == "symbol":
        return env[x.name]
    if x.op == "floordiv":
        return evaluate(x.args[0], env) // x.args[1]
    if x.op == "mod":
        return evaluate(x.args[0], env) % x.args[1]
    terms, const = x.args
    total = const
    for monomial, k in terms:
        p = k
        for atom in monomial:
            p *= evaluate(atom, env)
        total += p
    return total


def trees(depth=4):
    """(expression, the same computed on ints) pairs, given the symbols' values."""
    leaf = st.one_of(st.sampled_from(NAMES).map(lambda n: ("sym", n)),
                     st.integers(-20, 200).map(lambda c: ("int", c)))
    return st.recursive(
        leaf,
        lambda sub: st.one_of(
            st.tuples(st.sampled_from(["+", "-", "*"]), sub, sub),
            st.tuples(st.sampled_from(["//", "%"]), sub, st.integers(1, 96))),
        max_leaves=12)


def build(tree, env):
    """(IndexExpr or int, its value on ``env``) of a tree."""
    kind = tree[0]
    if kind == "sym":
        return SYMBOLS[tree[1]], env[tree[1]]
    if kind == "int":
        return tree[1], tree[1]
    op, a, b = tree
    xa, va = build(a, env)
    if op in ("//", "%"):
        return (xa // b, va // b) if op == "//" else (xa % b, va % b)
    xb, vb = build(b, env)
    return {"+": (xa + xb, va + vb), "-": (xa - xb, va - vb), "*": (xa * xb, va * vb)}[op]


@settings(max_examples=300, deadline=None)
@given(trees(), st.lists(st.integers(0, 5000), min_size=3, max_size=3))
def test_arithmetic_is_exact(tree, values):
    env = dict(zip(NAMES, values))
    expr, value = build(tree, env)
    assert evaluate(expr, env) == value
    assert not isinstance(expr, IndexExpr) or expr.free_symbols <= set(SYMBOLS.values())


def test_normal_forms():
    t, u = SYMBOLS["t"], SYMBOLS["u"]
    assert (4 * t + 2) // 4 == t and (4 * t + 6) % 4 == 2 and (4 * t + 6) // 4 == t + 1
    assert (t // 4) // 8 == t // 32 and (t % 128) % 32 == t % 32 and (t % 8) % 32 == t % 8
    assert (6 * t) % 4 == 2 * (t % 2) and (6 * t + 4) // 4 == t + t // 2 + 1
    assert t + u == u + t and hash(t * u + 1) == hash(1 + u * t) and t - t == 0
    assert t // 1 is t and t % 1 == 0 and (t * 0) == 0 and isinstance(2 * t - t, IndexExpr)
    assert str(4096 * ((t % 128) // 32) + 2 * (t % 4) + u) == "u + 4096*(t % 128 // 32) + 2*(t % 4)"
    assert (t + 1).is_positive and (t + 1).is_zero is False and t.is_zero is None
    assert (t - 1).is_nonnegative is None and ((t % 4) // 2 + 3 * u).is_nonnegative


def test_refusals():
    t = SYMBOLS["t"]
    for bad in (lambda: t < 4, lambda: t >= 0, lambda: bool(t), lambda: t // t,
                lambda: 8 // t, lambda: t % 2.5, lambda: int(t)):
        with pytest.raises(TypeError):
            bad()
    with pytest.raises(ValueError, match="positive"):
        t // 0
    with pytest.raises(LayoutError, match="extent t is not an integer"):
        Layout((t, 4))
    with pytest.raises(LayoutError, match="run-time index, not an extent"):
        ceil_div(8, t)
    with pytest.raises(LayoutError, match="cotarget t must be a positive integer"):
        complement(Layout(4, 2), t)
    with pytest.raises(TypeError, match="expected a layout, an int"):
        local_tile(make_tensor(0, Layout((8, 8))), (t, 4), (0, 0))
    with pytest.raises(TypeError, match="name"):
        index_symbol("")


def _same(sym, num, t):
    """The tensor derived on symbol ``t`` equals the numeric one for thread value ``t``."""
    assert sym.layout == num.layout
    env = {"t": t}
    got = (tuple(evaluate(x, env) for x in sym.engine) if isinstance(num.engine, tuple)
           else evaluate(sym.engine, env))
    want = tuple(num.engine) if isinstance(num.engine, tuple) else num.engine
    assert got == want


def test_thread_partitions_equal_numeric_ones():
    t, p = SYMBOLS["t"], index_symbol("p")
    mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN(), (2, 2))
    wgmma = make_tiled_mma(SM90_64xNx16_F32BF16BF16_SS(64), (1, 1))
    copy = make_tiled_copy(SM80_CP_ASYNC_CACHEALWAYS(8, np.float32), (32, 8), (2, 1))
    cases = [(mma, "partition_A", Layout((64, 32), (32, 1))),
             (mma, "partition_C", Layout((64, 64), (1, 64))),
             (wgmma, "partition_C", Layout((64, 64), (64, 1))),
             (copy, "partition_S", Layout((128, 8), (1, 1000)))]
    for tiled, method, layout in cases:
        sym = getattr(tiled.get_slice(t), method)(make_tensor(p + 0 * t, layout))
        for i in range(tiled.size):
            num = getattr(tiled.get_slice(i), method)(make_tensor(0, layout))
            assert sym.layout == num.layout
            assert evaluate(sym.engine, {"t": i, "p": 0}) == num.engine
    ident = mma.get_slice(t).partition_C(make_identity_tensor((64, 64)))
    for i in (0, 37, 127):
        _same(ident, mma.get_slice(i).partition_C(make_identity_tensor((64, 64))), i)


def test_tiles_at_symbolic_coordinates():
    bx, by = index_symbol("bx"), index_symbol("by")
    A = make_tensor(0, Layout((300, 200), (200, 1)))
    sym = local_tile(A, (64, 32), (bx, by))
    thr = local_partition(make_tensor(0, Layout((64, 32), (200, 1))), Layout((16, 8)), bx)
    for x, y in ((0, 0), (3, 5), (4, 6)):
        num = local_tile(A, (64, 32), (x, y))
        assert sym.layout == num.layout
        assert evaluate(sym.engine, {"bx": x, "by": y}) == num.engine
    for i in range(128):
        num = local_partition(make_tensor(0, Layout((64, 32), (200, 1))), Layout((16, 8)), i)
        assert thr.layout == num.layout and evaluate(thr.engine, {"bx": i}) == num.engine
