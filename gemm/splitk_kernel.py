"""Split-K's reduction kernel (:func:`gemm.splitk.reduce_splits` launches it): ``out = alpha *
(partial_0 + ... + partial_{S-1}) + beta * out``, the partials added in order in float32
(deterministic). The partials are float32 (split-K's) or of a 16-bit type (the reduce-scatter
of :mod:`gemm.collective.reduce_scatter`).

Thread i takes columns col .. col + VEC - 1 of one row (those below N): VEC loads in flight per
K range, two ranges a turn, each sum still taken in the ranges' order; the row's last columns,
fewer than VEC, one at a time. One variant per out type and partials' type (float32, or
bfloat16 / float16 bits), kept as a cubin file and launched through the driver
(:mod:`gemm.call`); in numba's simulator its twin runs. Imported when a split call first
reduces (it imports numba).
"""

from functools import lru_cache

import numpy as np
from numba import cuda, float32

from gemm.call.launch import compiled_launcher
from gemm.dtypes import STORAGE
from gemm.epilogue_kernel import conversions

__all__ = ["THREADS", "VEC", "SCALARS", "launcher"]

THREADS = 256
VEC = 4             # consecutive columns of one row per thread (its a0 .. a3)
SCALARS = ("uint32",) * 8 + ("float32",) * 2
U = np.uint32


def _reduce_function(out_dtype, part_dtype):
    """The kernel ``kernel(W, C, M, N, ldw, NB, S, ldc, cs, sCb, alpha, beta)``: W the
    partials (S x NB matrices of M rows, ldw apart), C the out (element (row, col) of product
    z at ``z * sCb + row * ldc + col * cs``)."""
    store, load = conversions(out_dtype)
    part = conversions(part_dtype)[1]

    @cuda.jit(device=True, inline="always")
    def finish(C, g, acc, alpha, beta):
        v = alpha * acc
        if beta != float32(0):
            v += beta * load(C[g])
        C[g] = store(v)

    def kernel(W, C, M, N, ldw, NB, S, ldc, cs, sCb, alpha, beta):
        i = U(cuda.blockIdx.x) * U(THREADS) + U(cuda.threadIdx.x)
        nq = (N + U(VEC - 1)) // U(VEC)
        mq = M * nq
        if i >= NB * mq:
            return
        z = i // mq
        r = i - z * mq
        row = r // nq
        col = (r - row * nq) * U(VEC)
        w = (z * M + row) * ldw + col
        step = NB * M * ldw
        g = z * sCb + row * ldc + col * cs
        if col + U(VEC) <= N:
            a0 = a1 = a2 = a3 = float32(0)
            s = U(0)
            while s + U(1) < S:
                p = w + s * step
                q = p + step
                x0, x1 = part(W[p]), part(W[p + U(1)])
                x2, x3 = part(W[p + U(2)]), part(W[p + U(3)])
                y0, y1 = part(W[q]), part(W[q + U(1)])
                y2, y3 = part(W[q + U(2)]), part(W[q + U(3)])
                a0 = (a0 + x0) + y0
                a1 = (a1 + x1) + y1
                a2 = (a2 + x2) + y2
                a3 = (a3 + x3) + y3
                s += U(2)
            if s < S:
                p = w + s * step
                a0 += part(W[p])
                a1 += part(W[p + U(1)])
                a2 += part(W[p + U(2)])
                a3 += part(W[p + U(3)])
            finish(C, g, a0, alpha, beta)
            finish(C, g + cs, a1, alpha, beta)
            finish(C, g + U(2) * cs, a2, alpha, beta)
            finish(C, g + U(3) * cs, a3, alpha, beta)
        else:                                   # the row's last columns, fewer than VEC
            for j in range(N - col):
                acc = float32(0)
                for s in range(S):
                    acc += part(W[w + U(j) + U(s) * step])
                finish(C, g + U(j) * cs, acc, alpha, beta)
    return kernel


def signature(out_dtype, part_dtype):
    return (f"void({STORAGE[part_dtype]}[::1], {STORAGE[out_dtype]}[::1], uint32, uint32, "
            "uint32, uint32, uint32, uint32, uint32, uint32, float32, float32)")


@lru_cache(maxsize=None)
def launcher(out_dtype, part_dtype="float32"):
    """The :class:`gemm.call.launch.Launcher` of the reduction of ``part_dtype`` partials
    into an out of ``out_dtype`` (alpha and beta its free scalars)."""
    return compiled_launcher("splitk", (out_dtype, part_dtype),
                             _reduce_function(out_dtype, part_dtype),
                             signature(out_dtype, part_dtype),
                             (np.dtype(STORAGE[part_dtype]).itemsize,
                              np.dtype(STORAGE[out_dtype]).itemsize), SCALARS,
                             free_scalars=2)
