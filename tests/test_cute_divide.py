"""gemm.cute.divide: a division by a run-time divisor as a multiply-high and a shift. Exact
against Python's divmod for every uint32 dividend below 2**31 and divisor in 1..2**31 - 1
(hypothesis, and the edges: powers of two and their neighbours); compiled for sm_90 the
quotient takes no division instruction."""

from hypothesis import given, strategies as st
from numba import cuda

from gemm.cute.divide import divisor, divmod_by

LIMIT = 2 ** 31
EDGES = sorted({d + e for k in range(31) for e in (-1, 0, 1) for d in (2 ** k,)
                if 1 <= d + e < LIMIT})


def _divmod(n, d):
    q, r = divmod_by.py_func(n, divisor.py_func(d))
    return int(q), int(r)


@given(st.integers(0, LIMIT - 1), st.integers(1, LIMIT - 1))
def test_divmod_by_is_exact(n, d):
    assert _divmod(n, d) == divmod(n, d)


def test_divmod_by_is_exact_at_the_edges():
    for d in EDGES:
        for n in {0, 1, d - 1, d, d + 1, 2 * d - 1, LIMIT - 2, LIMIT - 1}:
            if 0 <= n < LIMIT:
                assert _divmod(n, d) == divmod(n, d), (n, d)


def test_divmod_by_compiles_without_a_division():
    def kernel(out, n, d, mul, shift):
        q, r = divmod_by(n, (d, mul, shift))
        out[0], out[1] = q, r

    ptx = cuda.compile_ptx(kernel, "void(uint32[::1], uint32, uint32, uint32, uint32)",
                           cc=(9, 0))[0]
    assert "mul.hi.u32" in ptx or "mul.wide.u32" in ptx
    assert "div." not in ptx and "rem." not in ptx
