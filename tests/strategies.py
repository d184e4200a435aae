"""Hypothesis strategies for the layout algebra: random hierarchical layouts and admissible pairs.

Layouts have depth 1-3 and size <= 1024; their strides are compact (column- or row-major),
permuted, gapped, with zeros, or arbitrary. Admissible pairs are built so that the operation
under test has a result (a tiler that divides a layout, a layout and a composable right
operand); random pairs, for which the operation may raise, come from the plain strategies.
"""

from hypothesis import strategies as st

from layoutalg import Layout, Swizzle, make_ordered_layout
from layoutalg.int_tuple import leaves, prefix_product, product

MAX_SIZE = 1024


# --- IntTuples ----------------------------------------------------------------------------
def _nest(draw, flat, depth):
    """Group the flat list ``flat`` into a random tree of at most ``depth`` tuple levels."""
    if depth == 0 or len(flat) <= 1:
        return flat[0] if len(flat) == 1 else tuple(flat)
    cuts = sorted(draw(st.sets(st.integers(1, len(flat) - 1), max_size=len(flat) - 1)))
    groups = [flat[i:j] for i, j in zip([0] + cuts, cuts + [len(flat)])]
    out = []
    for g in groups:
        if len(g) == 1 and draw(st.booleans()):
            out.append(g[0])
        else:
            out.append(_nest(draw, g, depth - 1) if len(g) > 1 else (g[0],))
    return tuple(out)


def unflatten(flat, profile):
    """Put the leaves of ``flat`` into the tree structure of ``profile``."""
    it = iter(flat)

    def go(p):
        if isinstance(p, tuple):
            return tuple(go(x) for x in p)
        return next(it)

    return go(profile)


@st.composite
def extents(draw, max_leaves=5, max_size=MAX_SIZE, max_extent=8):
    """A flat list of 1-5 positive extents whose product is at most ``max_size``."""
    n = draw(st.integers(1, max_leaves))
    out, total = [], 1
    for _ in range(n):
        hi = max(1, min(max_extent, max_size // total))
        e = draw(st.integers(1, hi))
        out.append(e)
        total *= e
    return out


@st.composite
def shapes(draw, max_depth=3, max_leaves=5, max_size=MAX_SIZE):
    """A hierarchical shape of depth 0..max_depth (an int or nested tuples)."""
    flat = draw(extents(max_leaves=max_leaves, max_size=max_size))
    depth = draw(st.integers(0 if len(flat) == 1 else 1, max_depth))
    return _nest(draw, flat, depth)


# --- strides ------------------------------------------------------------------------------
def _permuted(draw, flat):
    order = draw(st.permutations(range(len(flat))))
    return list(leaves(make_ordered_layout(tuple(flat), tuple(order)).stride))


STRIDE_KINDS = ("compact", "row_major", "permuted", "gapped", "zeros", "arbitrary")


def _strides(draw, flat, kind):
    if kind == "compact":
        return list(leaves(prefix_product(tuple(flat))))
    if kind == "row_major":
        return list(reversed(leaves(prefix_product(tuple(reversed(flat))))))
    if kind == "permuted":
        return _permuted(draw, flat)
    if kind == "gapped":     # permuted, each mode placed after a gap of a small factor
        order = draw(st.permutations(range(len(flat))))
        out, running = [0] * len(flat), 1
        for i in order:
            running *= draw(st.integers(1, 3))
            out[i] = running
            running *= flat[i]
        return out
    if kind == "zeros":      # permuted with some modes broadcast (stride 0)
        out = _permuted(draw, flat)
        return [0 if draw(st.booleans()) else d for d in out]
    return [draw(st.integers(0, 40)) for _ in flat]


@st.composite
def layouts(draw, kinds=STRIDE_KINDS, max_depth=3, max_leaves=5, max_size=MAX_SIZE):
    """A random hierarchical Layout with non-negative integer strides of the given kinds."""
    shp = draw(shapes(max_depth=max_depth, max_leaves=max_leaves, max_size=max_size))
    flat = list(leaves(shp))
    std = _strides(draw, flat, draw(st.sampled_from(kinds)))
    return Layout(shp, unflatten(std, shp))


def injective_layouts(**kw):
    """Layouts with distinct offsets (compact, permuted or gapped strides)."""
    return layouts(kinds=("compact", "row_major", "permuted", "gapped"), **kw)


def compact_layouts(**kw):
    """Bijections onto [0, size): compact strides in a random order."""
    return layouts(kinds=("compact", "row_major", "permuted"), **kw)


@st.composite
def swizzles(draw):
    """A Swizzle(bits, base, shift) with |shift| >= bits, either sign of shift."""
    bits = draw(st.integers(0, 3))
    base = draw(st.integers(0, 3))
    shift = draw(st.integers(max(bits, 1), 4)) * draw(st.sampled_from((1, -1)))
    return Swizzle(bits, base, shift)


# --- admissible pairs ---------------------------------------------------------------------
def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def prefix_divisor(draw, flat_shape):
    """A tile extent that walks through ``flat_shape`` in order: the product of its first k
    extents times a divisor of extent k (the extents a by-mode tiler may take)."""
    k = draw(st.integers(0, len(flat_shape) - 1))
    return product(tuple(flat_shape[:k])) * draw(st.sampled_from(_divisors(flat_shape[k])))


@st.composite
def layout_and_block(draw, layout_strategy=None):
    """``(A, B)``: B selects the first ``t_i`` coordinates of each leaf i of A's domain
    (``t_i`` divides extent i), as a layout into A's compact index space. B always composes
    with A and has a complement in ``size(A)``; its modes may come in any order."""
    A = draw(layout_strategy if layout_strategy is not None else layouts())
    flat = list(leaves(A.shape))
    pos = list(leaves(prefix_product(A.shape)))
    picked = [(draw(st.sampled_from(_divisors(s))), p) for s, p in zip(flat, pos)]
    picked = [m for m in picked if m[0] > 1] or [(1, 0)]
    picked = draw(st.permutations(picked))
    shp = tuple(m[0] for m in picked)
    std = tuple(m[1] for m in picked)
    if len(shp) == 1:
        return A, Layout(shp[0], std[0])
    return A, Layout(shp, std)


@st.composite
def layout_and_mode_tiler(draw, layout_strategy=None):
    """``(A, tiler)``: a tuple of ints, one per leading mode of A, each a prefix divisor of
    that mode's (flattened) shape, with an occasional None (keep the mode)."""
    A = draw(layout_strategy if layout_strategy is not None else layouts(max_depth=2))
    n = draw(st.integers(1, A.rank))
    tiler = []
    for i in range(n):
        if draw(st.integers(0, 5)) == 0:
            tiler.append(None)
        else:
            tiler.append(draw(prefix_divisor(list(leaves(A[i].shape)))))
    return A, tuple(tiler)


@st.composite
def composable_pairs(draw):
    """``(A, B)`` where B's offsets stay inside A's domain (``cosize(B) <= size(A)``); the
    composition may still be inadmissible, which the tests check by brute force."""
    A = draw(layouts(max_size=256))
    B = draw(layouts(max_size=64, max_leaves=3))
    if B.cosize > A.size:
        B = Layout(B.shape, unflatten([d % 3 for d in leaves(B.stride)], B.shape))
    return A, B


@st.composite
def product_pairs(draw):
    """``(A, B)`` for the products: A a bijection onto ``[0, size)`` (so its complement has no
    holes and composes with any B), B injective."""
    A = draw(compact_layouts(max_size=64, max_leaves=3))
    B = draw(injective_layouts(max_size=16, max_leaves=3))
    return A, B


# --- brute-force oracles (independent of the algebra under test) ---------------------------
def offsets(L):
    """``[L(i) for i < size(L)]``."""
    return [L(i) for i in range(L.size)]


def flat_digits(i, flat_shape):
    """The colexicographic digits of index ``i`` in a flat shape."""
    out = []
    for s in flat_shape:
        out.append(i % s)
        i //= s
    return out


def _divisors_above_one(n):
    return [d for d in range(2, n + 1) if n % d == 0]


def is_layout_function(values, _memo=None):
    """Whether ``i -> values[i]`` (``values[0] == 0``) equals some 1-D layout
    ``(s0,s1,...):(d0,d1,...)`` with ``s0*s1*... == len(values)``: brute force over the first
    extent s0 (then ``values[i] == (i % s0) * values[1] + values[s0 * (i // s0)]``)."""
    values = tuple(values)
    if _memo is None:
        _memo = {}
    if values in _memo:
        return _memo[values]
    n = len(values)
    if values[0] != 0:
        ok = False
    elif n == 1:
        ok = True
    else:
        d0 = values[1]
        ok = False
        for s0 in _divisors_above_one(n):
            if all(values[i] == (i % s0) * d0 + values[s0 * (i // s0)] for i in range(n)):
                if is_layout_function(values[::s0], _memo):
                    ok = True
                    break
    _memo[values] = ok
    return ok


def representable_compatible_with(f, B_shape):
    """Whether the function ``f`` on the indices of ``B_shape`` equals a layout compatible with
    ``B_shape``: it must be a sum of one function per leaf of ``B_shape``, each a 1-D layout."""
    flat = list(leaves(B_shape))
    pos = list(leaves(prefix_product(B_shape)))
    size = product(B_shape)
    values = [f(i) for i in range(size)]
    per_leaf = [[values[c * p] for c in range(s)] for s, p in zip(flat, pos)]
    for i in range(size):
        digits = flat_digits(i, flat)
        if values[i] != sum(g[c] for g, c in zip(per_leaf, digits)):
            return False
    return all(is_layout_function(g) for g in per_leaf)


def greedy_translates(image, limit):
    """The translates t, in increasing order, with ``image (+) {t}`` tiling ``[0, limit)``
    without overlap, stopping before the first that would overlap. The smallest uncovered
    offset x can only be covered by the translate x itself (0 is in the image), so the
    sequence is forced."""
    image = sorted(set(image))
    covered = set()
    T = []
    for x in range(limit):
        if x in covered:
            continue
        shifted = {x + y for y in image}
        if shifted & covered:
            break
        covered |= shifted
        T.append(x)
    return T


def complement_exists(image, cotarget):
    """Whether some ordered layout R has offsets that, added to ``image`` without overlap,
    cover ``[0, cotarget)``: R's offsets must be a prefix of the forced translates (at least
    those below the cotarget) that is itself a layout."""
    image = sorted(set(image))
    limit = cotarget + 2 * (max(image) + 1) + 2
    T = greedy_translates(image, limit)
    covered = {t + y for t in T for y in image}
    if any(x not in covered for x in range(cotarget)):
        return False            # an offset below the cotarget cannot be covered
    k_min = sum(1 for t in T if t < cotarget)
    return any(is_layout_function(T[:k]) for k in range(max(k_min, 1), len(T) + 1))


def swizzle_reference(bits, base, shift, x):
    """CuTe's Swizzle<bits, base, shift>, bit by bit: for shift >= 0 bit ``base + b`` is XORed
    with bit ``base + shift + b``; for shift < 0 bit ``base - shift + b`` with bit ``base + b``."""
    out = x
    for b in range(bits):
        if shift >= 0:
            src, dst = base + shift + b, base + b
        else:
            src, dst = base + b, base - shift + b
        out ^= ((x >> src) & 1) << dst
    return out
