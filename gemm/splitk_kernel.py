"""Split-K's reduction kernel (:func:`gemm.splitk.reduce_splits` launches it): ``out = alpha *
(partial_0 + ... + partial_{S-1}) + beta * out``, the partials added in order in float32
(deterministic). The partials are float32 (split-K's) or of a 16-bit type (the reduce-scatter
of :mod:`gemm.collective.reduce_scatter`).

Written with :mod:`gemm.cute`: each product's partials are an (M, N) tensor per K range and
its out an (M, N) tensor, all of run-time extents and strides; thread i takes a (1, VEC)
tile of them (VEC consecutive columns of one row), sums its K ranges into a register
fragment, two ranges a turn (VEC loads of each in flight, each sum still taken in the
ranges' order), and writes it; a row's last columns, fewer than VEC, one at a time. One
variant per out type and partials' type (float32, or bfloat16 / float16 bits), kept as a
cubin file and launched through the driver (:mod:`gemm.call`); in numba's simulator its twin
runs. Imported when a split call first reduces (it imports numba).
"""

from functools import lru_cache

import numpy as np
from numba import cuda, float32

from gemm.call.launch import compiled_launcher
from gemm.cute import (fill, local_tile, make_fragment_like, make_layout, make_tensor,
                       static, static_range, unroll, unrolled)
from gemm.dtypes import STORAGE
from gemm.epilogue_kernel import conversions

__all__ = ["THREADS", "VEC", "SCALARS", "launcher"]

THREADS = 256
VEC = 4             # consecutive columns of one row per thread
SCALARS = ("uint32",) * 8 + ("float32",) * 2
U = np.uint32
ONE = static(1)
RUN = static((1, VEC))              # a thread's tile of a partial and of the out
COLUMNS = static_range(VEC)


def _reduce_function(out_dtype, part_dtype):
    """The kernel ``kernel(W, C, M, N, ldw, NB, S, ldc, cs, sCb, alpha, beta)``: W the
    partials (S x NB matrices of M rows, ldw apart), C the out (element (row, col) of product
    z at ``z * sCb + row * ldc + col * cs``)."""
    store, load = conversions(out_dtype)
    part = conversions(part_dtype)[1]

    @cuda.jit(device=True, inline="always")
    def finish(gC, j, acc, alpha, beta):
        """Column j of a thread's tile of the out: alpha * acc + beta * the out."""
        v = alpha * acc
        if beta != float32(0):
            v += beta * load(gC[0, j])
        gC[0, j] = store(v)

    @unrolled
    def kernel(W, C, M, N, ldw, NB, S, ldc, cs, sCb, alpha, beta):
        i = U(cuda.blockIdx.x) * U(THREADS) + U(cuda.threadIdx.x)
        nq = (N + U(VEC - 1)) // U(VEC)
        mq = M * nq
        if i >= NB * mq:
            return
        z = i // mq
        row = (i - z * mq) // nq
        q = i - z * mq - row * nq                   # this thread's (1, VEC) tile: (row, q)
        step = NB * M * ldw                         # from one K range's partials to the next
        partials = make_layout((M, N), (ldw, ONE))
        gC = local_tile(make_tensor(C, make_layout((M, N), (ldc, cs)), z * sCb), RUN,
                        (row, q))                                       # (1, VEC)
        acc = make_fragment_like(gC, float32)                           # (1, VEC)
        fill(acc, 0)
        col = q * U(VEC)
        if col + U(VEC) <= N:
            s = U(0)
            while s + U(1) < S:                     # two K ranges a turn, added in order
                gX = local_tile(make_tensor(W, partials, (s * NB + z) * M * ldw), RUN,
                                (row, q))
                gY = local_tile(make_tensor(W, partials, (s * NB + z) * M * ldw + step),
                                RUN, (row, q))
                for j in unroll(COLUMNS):
                    acc[0, j] = (acc[0, j] + part(gX[0, j])) + part(gY[0, j])
                s += U(2)
            if s < S:
                gX = local_tile(make_tensor(W, partials, (s * NB + z) * M * ldw), RUN,
                                (row, q))
                for j in unroll(COLUMNS):
                    acc[0, j] += part(gX[0, j])
            for j in unroll(COLUMNS):
                finish(gC, j, acc[0, j], alpha, beta)
        else:                                       # the row's last columns, fewer than VEC
            for j in range(N - col):
                a = float32(0)
                for s in range(S):
                    gX = local_tile(make_tensor(W, partials, (U(s) * NB + z) * M * ldw),
                                    RUN, (row, q))
                    a += part(gX[0, j])
                finish(gC, j, a, alpha, beta)
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
