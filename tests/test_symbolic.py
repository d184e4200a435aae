"""Symbolic layouts: every symbolic result of the algebra, with random positive integers put
in for its symbols, is the function the numeric algebra computes from the same numbers; and
a fact the algebra cannot decide is a LayoutError that names it.

The random cases are seeded (each test draws its own ``random.Random(seed)``) and each test
also checks that most of its cases had a result, so that a test cannot pass by skipping."""

import random
import subprocess
import sys

import pytest

sympy = pytest.importorskip("sympy")

from layoutalg import (  # noqa: E402
    ComposedLayout, Layout, LayoutError, Swizzle, blocked_product, complement, composition,
    left_inverse, logical_divide, logical_product, raked_product, right_inverse, zipped_divide,
)
from layoutalg.int_tuple import leaves  # noqa: E402
from layoutalg.symbolic import (  # noqa: E402
    Latex, coord_symbols, extent_symbols, latex, layout_expr, same_function, stride_symbols,
    substitute, symbolic_layout,
)

CASES = 60


# --- CuTe's documented example -----------------------------------------------------------
def test_cute_documented_composition():
    """CuTe's docs: (3,6,2,8):(w,x,y,z) o 16:9 = (1,2,2,4):(9w,3x,y,z)."""
    w, x, y, z = stride_symbols("w x y z")
    R = composition(Layout((3, 6, 2, 8), (w, x, y, z)), Layout(16, 9))
    documented = Layout((1, 2, 2, 4), (9 * w, 3 * x, y, z))
    assert same_function(R, documented)
    # the algebra's normal form drops the size-1 mode (see layoutalg.symbolic's docstring)
    assert R == Layout((2, 2, 4), (3 * x, y, z))
    # the single-index formula of the result is the documented layout at each of 16 indices
    for i in range(16):
        assert sympy.expand(layout_expr(R, i) - documented(i)) == 0
    rng = random.Random(0)
    for _ in range(10):
        vals = {s: rng.randint(1, 50) for s in (w, x, y, z)}
        A = Layout((3, 6, 2, 8), tuple(vals[s] for s in (w, x, y, z)))
        assert same_function(composition(A, Layout(16, 9)), substitute(R, vals))


def test_same_function_tells_different_layouts_apart():
    w, x = stride_symbols("w x")
    assert not same_function(Layout((2, 2), (w, x)), Layout((2, 2), (x, w)))
    assert not same_function(Layout(4, w), Layout(5, w))
    (n,) = extent_symbols("n")
    with pytest.raises(LayoutError, match="symbolic size"):
        same_function(Layout(n, 1), Layout(4, 1))


def test_import_layoutalg_does_not_import_sympy():
    probe = ("import sys, layoutalg, layoutalg.symbolic; "
             "sys.exit(1 if 'sympy' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", probe]).returncode == 0


# --- layout_expr and its names --------------------------------------------------------------
def random_shape(rng, max_leaves=4):
    """A rank-1..3 shape of small extents, some modes hierarchical."""
    out = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.3:
            out.append(tuple(rng.randint(1, 4) for _ in range(rng.randint(2, 3))))
        else:
            out.append(rng.randint(1, 6))
    return out[0] if len(out) == 1 and rng.random() < 0.5 else tuple(out)


def with_symbolic_strides(shape, prefix="d"):
    n = len(leaves(shape))
    syms = stride_symbols(" ".join(f"{prefix}{k}" for k in range(n)) + ("," if n == 1 else ""))
    it = iter(syms)

    def go(s):
        return tuple(go(x) for x in s) if isinstance(s, tuple) else next(it)

    return Layout(shape, go(shape)), syms


def all_coords(shape):
    """Every natural coordinate of ``shape`` (congruent nested tuples)."""
    if not isinstance(shape, tuple):
        return list(range(shape))
    out = [()]
    for s in shape:
        out = [c + (x,) for c in out for x in all_coords(s)]
    return out


@pytest.mark.parametrize("seed", range(5))
def test_layout_expr_is_the_layout(seed):
    rng = random.Random(seed)
    for _ in range(CASES // 5):
        shape = random_shape(rng)
        while Layout(shape).size > 48:                  # sympy's floor/Mod are slow
            shape = random_shape(rng)
        L, syms = with_symbolic_strides(shape)
        expr, crd_syms = layout_expr(L), coord_symbols(L)
        flat_syms = leaves(crd_syms) if isinstance(crd_syms, tuple) else (crd_syms,)
        index = layout_expr(L, "i")
        (i,) = index.free_symbols - set(syms)
        for n, crd in enumerate(all_coords(L.shape)):
            want = L(crd)
            flat = leaves(crd) if isinstance(crd, tuple) else (crd,)
            assert sympy.expand(expr.subs(dict(zip(flat_syms, flat))) - want) == 0
            assert sympy.expand(layout_expr(L, crd) - want) == 0
            if n % 3 == 0:      # the single-index form splits n colexicographically, like L(n)
                assert sympy.expand(index.subs(i, n) - L(n)) == 0
                assert sympy.expand(layout_expr(L, n) - L(n)) == 0


def test_coordinate_names_are_as_documented():
    crd = coord_symbols(Layout(((2, 2), 4, (3, (2, 2)))))
    assert [[str(c) for c in leaves(m)] if isinstance(m, tuple) else str(m)
            for m in crd] == [["i0_0", "i0_1"], "i1", ["i2_0", "i2_1_0", "i2_1_1"]]
    assert str(coord_symbols(Layout(8, 2))) == "i0"
    assert all(c.is_integer and c.is_nonnegative for c in leaves(crd))


def test_latex_names_every_coordinate_and_stride():
    L = symbolic_layout(((2, 4), 3), "w x y")
    tex = latex(L)
    assert isinstance(tex, Latex) and tex._repr_latex_() == str(tex)
    assert tex.startswith("$") and tex.endswith("$") and tex.count("$") == 2
    head, formula = tex[1:-1].split(r"\mapsto")
    assert head.startswith("((2,4),3):((w,x),y)")
    assert "((i_{0,0},i_{0,1}),i_{1})" in head
    for term in ("i_{0,0} w", "i_{0,1} x", "i_{1} y"):
        assert term in formula


def test_symbolic_layout_checks_its_names():
    with pytest.raises(LayoutError, match="3 stride names for the 4 leaves"):
        symbolic_layout((3, 6, 2, 8), "w x y")
    L = symbolic_layout(("n", 8), (1, "n"))
    (n,) = L.shape[0].free_symbols
    assert n.is_positive and n.is_integer and L.stride[1] == n


def test_layout_expr_refuses_what_has_no_formula():
    sw = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1)))
    with pytest.raises(LayoutError, match="swizzle is a bitwise XOR"):
        layout_expr(sw)
    with pytest.raises(LayoutError, match="one entry per leaf"):
        layout_expr(Layout((2, 3)), (1, 2, 0))
    with pytest.raises(TypeError, match="needs a Layout"):
        layout_expr((2, 3))


# --- the algebra, symbolic vs numeric ----------------------------------------------------------
def generic_values(syms, rng):
    """Distinct primes > 1000 for stride symbols: no two strides line up by accident, so the
    numeric algebra cannot coalesce modes that the symbolic one keeps apart."""
    primes = [p for p in range(1009, 3000) if all(p % q for q in range(2, 55))]
    return dict(zip(syms, rng.sample(primes, len(syms))))


def random_numeric_layout(rng, max_size):
    shape = random_shape(rng)
    stride = tuple(rng.choice([0, 1, 2, 3, 4, 6, 8]) for _ in leaves(shape))
    it = iter(stride)

    def go(s):
        return tuple(go(x) for x in s) if isinstance(s, tuple) else next(it)

    L = Layout(shape, go(shape))
    return L if L.size <= max_size else Layout(rng.randint(1, max_size), rng.randint(1, 3))


def modes_agree(symbolic, numeric):
    """Same top-level modes, each the same function."""
    assert symbolic.rank == numeric.rank
    return all(same_function(symbolic[k], numeric[k]) for k in range(symbolic.rank))


@pytest.mark.parametrize("seed", range(4))
def test_composition_with_symbolic_strides_matches_numbers(seed):
    rng = random.Random(seed)
    results = 0
    for _ in range(CASES // 4):
        A, syms = with_symbolic_strides(random_shape(rng))
        B = random_numeric_layout(rng, A.size)
        vals = generic_values(syms, rng)
        try:
            R = composition(A, B)
        except LayoutError:
            # not a failure of symbols: the numbers must refuse it too
            with pytest.raises(LayoutError):
                composition(substitute(A, vals), B)
            continue
        results += 1
        N = composition(substitute(A, vals), B)
        assert same_function(substitute(R, vals), N), (A, B, R, N)
        assert substitute(R, vals).shape == N.shape or modes_agree(substitute(R, vals), N)
    assert results >= CASES // 8


def sorted_layout_with_symbolic_extents(rng):
    """(L, extent symbols, span): modes in increasing stride order, each stride a multiple of
    the previous mode's span, the last (largest-stride) extent often symbolic (c * n). Only
    that one is, so that the strides stay integers (symbolic strides are tested below)."""
    n_modes = rng.randint(1, 3)
    shape, stride, syms = [], [], []
    d = rng.choice([1, 2])
    for k in range(n_modes):
        if k == n_modes - 1 and rng.random() < 0.7:
            (n,) = extent_symbols(f"n{k}")
            syms.append(n)
            e = rng.choice([1, 2, 4]) * n
        else:
            e = rng.randint(2, 4)
        shape.append(e)
        stride.append(d)
        d = d * e * rng.choice([1, 2, 3])
    order = list(range(n_modes))
    rng.shuffle(order)                  # the algebra sorts by stride itself
    return (Layout(tuple(shape[k] for k in order), tuple(stride[k] for k in order)),
            syms, d)


@pytest.mark.parametrize("seed", range(3))
def test_complement_with_symbolic_extents_matches_numbers(seed):
    rng = random.Random(seed)
    symbolic = 0
    for _ in range(CASES // 3):
        L, syms, span = sorted_layout_with_symbolic_extents(rng)
        cotarget = span * rng.choice([1, 2, 3])
        vals = {s: rng.randint(1, 5) for s in syms}
        R = complement(L, cotarget)
        symbolic += bool(syms)
        num_cot = int(sympy.sympify(cotarget).subs(vals))
        N = complement(substitute(L, vals), num_cot)
        assert same_function(substitute(R, vals), N), (L, cotarget, vals, R, N)
    assert symbolic >= CASES // 6


@pytest.mark.parametrize("seed", range(3))
def test_logical_divide_with_symbolic_strides_matches_numbers(seed):
    rng = random.Random(seed)
    for _ in range(CASES // 3):
        m, k = rng.choice([4, 6, 8, 12]), rng.choice([2, 4, 8])
        A, syms = with_symbolic_strides((m, k))
        tiler = (Layout(rng.choice([t for t in (1, 2, 3, 4) if m % t == 0]),
                        rng.choice([1, 1, 2])),
                 Layout(rng.choice([t for t in (1, 2, 4) if k % t == 0])))
        tiler = tuple(t if m % (t.size * t.stride) == 0 else Layout(t.size) for t in tiler)
        vals = generic_values(syms, rng)
        for op in (logical_divide, zipped_divide):
            R = op(A, tiler)
            N = op(substitute(A, vals), tiler)
            assert modes_agree(substitute(R, vals), N), (op.__name__, A, tiler, R, N)


@pytest.mark.parametrize("seed", range(3))
def test_divide_with_symbolic_extents_matches_numbers(seed):
    rng = random.Random(seed)
    (n,) = extent_symbols("n")
    for _ in range(CASES // 3):
        c, k = rng.choice([2, 4, 8]), rng.choice([2, 4])
        A = Layout((c * n, k))                       # column-major, n * c rows
        tiler = (Layout(rng.choice([t for t in (1, 2, 4, 8) if c % t == 0])),
                 Layout(rng.choice([1, 2, k])))
        R = logical_divide(A, tiler)
        vals = {n: rng.randint(1, 5)}
        N = logical_divide(substitute(A, vals), tiler)
        assert modes_agree(substitute(R, vals), N), (A, tiler, R, N)


@pytest.mark.parametrize("product", [logical_product, blocked_product, raked_product])
def test_products_with_symbolic_extents_match_numbers(product):
    rng = random.Random(product.__name__)          # str seeds are stable across runs
    (n,) = extent_symbols("n")
    for _ in range(CASES // 3):
        a = rng.choice([1, 2, 4])
        # the symbolic extent has the largest stride (the strides stay integers)
        A = Layout((a, n)) if rng.random() < 0.5 else Layout((n, a), (a, 1))
        B = Layout((rng.randint(1, 4), rng.randint(1, 4)))
        if product is logical_product:
            B = Layout(rng.randint(1, 6))
        R = product(A, B)
        vals = {n: rng.randint(1, 6)}
        N = product(substitute(A, vals), B)
        assert modes_agree(substitute(R, vals), N), (product.__name__, A, B, R, N)


# --- facts a symbol cannot give ---------------------------------------------------------------
def test_missing_divisibility_names_the_assumption():
    (n,) = extent_symbols("n")
    with pytest.raises(LayoutError, match=r"cannot decide whether 2 divides n.*assumption"):
        composition(Layout((n, 8), (1, 2 * n)), Layout(4, 2))
    # stated as an assumption (an extent 8*m: 2 divides it, and it is >= 8 > 2*4/2), it works
    (m,) = extent_symbols("m")
    R = composition(Layout((8 * m, 8), (1, 16 * m)), Layout(4, 2))
    for v in range(1, 5):
        A = Layout((8 * v, 8), (1, 16 * v))
        assert same_function(substitute(R, {m: v}), composition(A, Layout(4, 2)))


def test_undecidable_order_names_the_comparison():
    (n,) = extent_symbols("n")
    with pytest.raises(LayoutError, match=r"cannot decide whether n < 16"):
        composition(Layout((n, 8), (1, 2 * n)), Layout(16, 1))


def test_extent_without_assumptions_is_refused():
    n = sympy.Symbol("n")
    with pytest.raises(LayoutError, match="integer=True, positive=True"):
        Layout((n, 4))


# --- strides built from symbols: complement, inverses, products, composition -------------------
def layout_with_symbolic_strides(rng, prefix="n", gaps=True):
    """(L, extent symbols, span): 1..3 modes of extents 2..4 or ``n_k``, ``2 n_k``, ``n_k + 1``
    (symbols; ``n_k`` may be 1, and where that matters the algebra raises), laid
    out in a random order of strides, each stride the previous one times its mode's extent
    (times a gap of 2 or 3 when ``gaps``): strides such as ``n`` or ``4 * n0 * n1``, the
    column-major ``(n,4):(1,n)`` among them. The image is ``[0, span)`` without gaps."""
    k = rng.randint(1, 3)
    extents, syms = [], []
    for i in range(k):
        if rng.random() < 0.6:
            (n,) = extent_symbols(f"{prefix}{i}")
            syms.append(n)
            extents.append(rng.choice([n, n, 2 * n, n + 1]))
        else:
            extents.append(rng.randint(2, 4))
    order = list(range(k))
    rng.shuffle(order)
    strides = [None] * k
    d = rng.choice([1, 1, 2]) if gaps else 1
    for i in order:
        strides[i] = d
        d = d * extents[i] * (rng.choice([1, 1, 2, 3]) if gaps else 1)
    return Layout(tuple(extents), tuple(strides)), syms, d


def has_symbolic_stride(L):
    return any(not isinstance(d, int) for d in leaves(L.stride))


def numeric_values(syms, rng):
    return {s: rng.randint(1, 5) for s in syms}


def undecided(e):
    """A LayoutError of the symbolic algebra may only be a fact it could not decide."""
    assert "cannot decide whether" in str(e) and "assumption" in str(e), str(e)


@pytest.mark.parametrize("seed", range(3))
def test_complement_with_symbolic_strides_matches_numbers(seed):
    rng = random.Random(seed)
    results = with_symbols = 0
    for _ in range(CASES // 3):
        L, syms, span = layout_with_symbolic_strides(rng)
        cotarget = None if rng.random() < 0.3 else span * rng.choice([1, 2, 3])
        try:
            R = complement(L, cotarget)
        except LayoutError as e:
            undecided(e)
            continue
        results += 1
        with_symbols += has_symbolic_stride(L)
        for _ in range(3):
            vals = numeric_values(syms, rng)
            num_cot = None if cotarget is None else int(sympy.sympify(cotarget).subs(vals))
            N = complement(substitute(L, vals), num_cot)
            assert same_function(substitute(R, vals), N), (L, cotarget, vals, R, N)
    assert results >= CASES // 3 - 2 and with_symbols >= CASES // 9


@pytest.mark.parametrize("inverse", [right_inverse, left_inverse])
def test_inverses_with_symbolic_strides_match_numbers(inverse):
    rng = random.Random(inverse.__name__)
    results = with_symbols = 0
    for _ in range(CASES // 2):
        L, syms, _ = layout_with_symbolic_strides(rng, gaps=rng.random() < 0.5)
        try:
            R = inverse(L)
        except LayoutError as e:
            undecided(e)
            continue
        results += 1
        with_symbols += has_symbolic_stride(L)
        for _ in range(3):
            vals = numeric_values(syms, rng)
            N = inverse(substitute(L, vals))
            assert same_function(substitute(R, vals), N), (inverse.__name__, L, vals, R, N)
    assert results >= CASES // 2 - 3 and with_symbols >= CASES // 6


@pytest.mark.parametrize("product", [logical_product, blocked_product, raked_product])
def test_products_with_symbolic_strides_match_numbers(product):
    """A's strides built from symbols (e.g. ``(n,4)`` column-major); B numeric, or with
    symbolic strides of its own."""
    rng = random.Random("strides " + product.__name__)
    results = with_symbols = 0
    for _ in range(CASES // 3):
        # gaps in A often leave no room for B's modes (then the numbers refuse it too)
        A, syms, _ = layout_with_symbolic_strides(rng, gaps=rng.random() < 0.3)
        if rng.random() < 0.5:
            B, bsyms, _ = layout_with_symbolic_strides(rng, prefix="m", gaps=False)
        else:
            B, bsyms = Layout((rng.randint(1, 4), rng.randint(1, 4))), []
        if product is logical_product and rng.random() < 0.5:
            B = Layout(rng.randint(1, 6))
            bsyms = []
        try:
            R = product(A, B)
        except LayoutError as e:
            if "cannot decide" not in str(e):     # a refusal of the numbers too
                with pytest.raises(LayoutError):
                    vals = numeric_values(syms + bsyms, rng)
                    product(substitute(A, vals), substitute(B, vals))
            continue
        results += 1
        with_symbols += has_symbolic_stride(A) or has_symbolic_stride(B)
        for _ in range(2):
            vals = numeric_values(syms + bsyms, rng)
            N = product(substitute(A, vals), substitute(B, vals))
            assert modes_agree(substitute(R, vals), N), (product.__name__, A, B, vals, R, N)
    assert results >= CASES // 4 and with_symbols >= CASES // 6


@pytest.mark.parametrize("seed", range(3))
def test_composition_with_symbolic_B_strides_matches_numbers(seed):
    """B with strides built from symbols, into an A of the same symbolic extents: A one of
    those layouts too, or column-major over them; B a permutation of A's domain."""
    rng = random.Random(seed)
    results = with_symbols = 0
    for _ in range(CASES // 3):
        A, syms, _ = layout_with_symbolic_strides(rng)
        if rng.random() < 0.4:
            A = Layout(A.shape)
        extents = list(A.shape)
        positions = [Layout(A.shape).stride[k] for k in range(A.rank)]
        order = list(range(A.rank))
        rng.shuffle(order)
        B = Layout(tuple(extents[k] for k in order), tuple(positions[k] for k in order))
        try:
            R = composition(A, B)
        except LayoutError as e:
            undecided(e)
            continue
        results += 1
        with_symbols += has_symbolic_stride(B)
        for _ in range(3):
            vals = numeric_values(syms, rng)
            N = composition(substitute(A, vals), substitute(B, vals))
            assert same_function(substitute(R, vals), N), (A, B, vals, R, N)
    assert results >= CASES // 3 - 3 and with_symbols >= CASES // 9


def test_symbolic_strides_in_the_documented_cases():
    (n,) = extent_symbols("n")
    assert complement(Layout((n, 4), (1, 2 * n))) == Layout(2, n)
    assert complement(Layout((n, 4), (1, 2 * n)), 16 * n) == Layout((2, 2), (n, 8 * n))
    assert right_inverse(Layout((4, n), (n, 1))) == Layout((n, 4), (4, 1))
    assert left_inverse(Layout((n, 4), (4, 1))) == Layout((4, n), (n, 1))
    assert logical_product(Layout((n, 4)), Layout(3)) == Layout(((n, 4), 3), ((1, n), 4 * n))
    assert composition(Layout((8 * n, 8)), Layout((4, n), (n, 1))) == Layout((4, n), (n, 1))


def test_undecidable_stride_facts_name_them():
    (n,) = extent_symbols("n")
    with pytest.raises(LayoutError, match=r"cannot decide whether n divides 8.*assumption"):
        complement(Layout((n, 4), (1, 8)))
    with pytest.raises(LayoutError, match=r"cannot decide whether 1 < n"):    # n == 1?
        left_inverse(Layout((2, n), (1, 8)))
    x, y = stride_symbols("x y")
    with pytest.raises(LayoutError, match=r"cannot decide whether x is 0"):
        complement(Layout((2, 2), (x, y)), 64)
    with pytest.raises(LayoutError, match=r"cannot decide whether x >= 0"):
        composition(Layout(64), Layout(4, x))
    with pytest.raises(LayoutError, match=r"cannot decide whether x == 2"):
        right_inverse(Layout((2, 2), (1, x)))
