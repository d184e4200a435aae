"""Brute-force oracles of the project's own tests, independent of the algebra under test:
whether a function is a layout, whether a complement exists, CuTe's swizzle bit by bit.
(The strategies and the post-condition checkers are public: layoutalg.testing.)"""

from layoutalg.int_tuple import leaves, prefix_product, product
from layoutalg.testing import _unflatten as unflatten  # noqa: F401  (for the tests)


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
