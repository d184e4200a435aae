"""Division by a run-time divisor as a multiplication (Granlund and Montgomery's method, as
CUTLASS's ``FastDivmod``): ``dv = divisor(d)`` once, then ``q, r = divmod_by(n, dv)`` for
any uint32 ``n < 2**31`` costs a multiply and a shift instead of a division (tens of
dependent instructions). For ``d`` with ``2**(l-1) < d <= 2**l``, ``m = ceil(2**(31+l) / d)``
fits in 32 bits and ``n * m >> (31 + l)`` is ``n // d`` for every ``n < 2**31``. And
``ceil_div(a, b)``, CuTe's, in unsigned 32-bit arithmetic (tile counts)."""

from numba import cuda, uint32 as U, uint64

__all__ = ["divisor", "divmod_by", "ceil_div"]


@cuda.jit(device=True, inline="always")
def divisor(d):
    """``d`` (1 <= d < 2**31) as (d, multiplier, shift) for :func:`divmod_by`."""
    d = U(d)
    log = U(0)                                      # ceil(log2(d))
    while (U(1) << log) < d:
        log += U(1)
    shift = U(31) + log
    return d, U(((uint64(1) << uint64(shift)) + uint64(d - U(1))) // uint64(d)), shift


@cuda.jit(device=True, inline="always")
def divmod_by(n, dv):
    """(n // d, n % d) for uint32 ``n < 2**31``, ``dv = divisor(d)``."""
    d, mul, shift = dv
    q = U((uint64(n) * uint64(mul)) >> uint64(shift))
    return q, U(n) - q * d


@cuda.jit(device=True, inline="always")
def ceil_div(a, b):
    """``-(-a // b)`` for uint32 ``a`` and ``b >= 1`` (CuTe's ``ceil_div``), as a uint32:
    tile counts in unsigned arithmetic (numba's ints are signed: a literal in the sum makes
    the division a signed one, with its fix-ups)."""
    return U((uint64(a) + uint64(b) - uint64(1)) // uint64(b))
