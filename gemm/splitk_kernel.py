"""Split-K's reduction kernel (:func:`gemm.splitk.reduce_splits` launches it): ``out = alpha *
(partial_0 + ... + partial_{S-1}) + beta * out``, the partials added in order in float32
(deterministic). The partials are float32 (split-K's) or of a 16-bit type (the reduce-scatter
of :mod:`gemm.collective.reduce_scatter`).

Written with :mod:`gemm.cute`: each product's partials are an (M, N) tensor per K range and
its out an (M, N) tensor, all of run-time extents and strides; thread i takes a (1, v) tile
of them (v consecutive columns of one row), sums its K ranges into a register fragment, two
ranges a turn (v loads of each in flight, each sum still taken in the ranges' order), and
writes it; a row's last columns, fewer than v, one at a time. Two forms: ``vector``, where
the partials' rows and the out's are 16-byte aligned (:func:`vector_fits`), v is 16 bytes of
partials (8 of a 16-bit type, 4 floats) read by one load, and the tile of the out is written
(and read, for beta) in loads and stores of up to 16 bytes; else v = :data:`VEC`, element by
element. One variant per form, out type and partials' type (float32, or bfloat16 / float16
bits), kept as a cubin file and launched through the driver (:mod:`gemm.call`); in numba's
simulator its twin runs. Imported when a split call first reduces (it imports numba).
"""

from functools import lru_cache

import numba
import numpy as np
from numba import cuda, float32

from layoutalg import Layout, UniversalCopy, make_tiled_copy
from gemm.call.launch import compiled_launcher
from gemm.cute import (copy, fill, local_tile, make_fragment_like, make_layout, make_tensor,
                       static, static_range, unroll, unrolled)
from gemm.dtypes import STORAGE
from gemm.epilogue_kernel import conversions

__all__ = ["THREADS", "VEC", "SCALARS", "launcher", "columns", "vector_fits"]

THREADS = 256
VEC = 4             # consecutive columns of one row per thread, element by element
VECTOR_BYTES = 16   # the vector form's load of partials
SCALARS = ("uint32",) * 8 + ("float32",) * 2
U = np.uint32
ONE = static(1)


def _bytes(dtype):
    return np.dtype(STORAGE[dtype]).itemsize


def columns(part_dtype, vector):
    """The columns of a thread's tile: 16 bytes of partials in the vector form, else VEC."""
    return VECTOR_BYTES // _bytes(part_dtype) if vector else VEC


def vector_fits(part_dtype, out_dtype, ldw, ldc, col_step, out_stride, addresses):
    """Whether the vector form can run: the out's rows contiguous (``col_step`` 1), and every
    partial's row, every row of the out and each of ``addresses`` (the partials', the out's,
    in bytes; in the simulator None, no address to look at) on 16-byte boundaries
    (:data:`VECTOR_BYTES`; the out's tile takes up to that many bytes a store)."""
    pb, ob = _bytes(part_dtype), _bytes(out_dtype)
    return (col_step == 1 and ldw * pb % VECTOR_BYTES == 0 and ldc * ob % VECTOR_BYTES == 0
            and out_stride * ob % VECTOR_BYTES == 0
            and all(a is None or a % VECTOR_BYTES == 0 for a in addresses))


def _reduce_function(out_dtype, part_dtype, vector=False):
    """The kernel ``kernel(W, C, M, N, ldw, NB, S, ldc, cs, sCb, alpha, beta)``: W the
    partials (S x NB matrices of M rows, ldw apart), C the out (element (row, col) of product
    z at ``z * sCb + row * ldc + col * cs``); ``vector``: the vector form (its alignment is
    the caller's promise, :func:`vector_fits`)."""
    store, load = conversions(out_dtype)
    part = conversions(part_dtype)[1]
    V = columns(part_dtype, vector)
    RUN = static((1, V))                # a thread's tile of a partial and of the out
    COLUMNS = static_range(V)
    # the storage types (uint16 bits or float32): numba's for fragments, numpy's for atoms
    PART_BITS, OUT_BITS = (getattr(numba, STORAGE[d]) for d in (part_dtype, out_dtype))
    PART, OUT = (np.dtype(STORAGE[d]).type for d in (part_dtype, out_dtype))
    VECTOR = vector
    LOAD = WRITE = None
    if vector:                          # a thread's loads of partials, loads and stores of out
        LOAD = make_tiled_copy(UniversalCopy(8 * VECTOR_BYTES, PART), Layout(1), Layout(V))
        WRITE = make_tiled_copy(UniversalCopy(min(8 * VECTOR_BYTES,
                                                  8 * V * _bytes(out_dtype)), OUT),
                                Layout(1), Layout(V))

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
        nq = (N + U(V - 1)) // U(V)
        mq = M * nq
        if i >= NB * mq:
            return
        z = i // mq
        row = (i - z * mq) // nq
        q = i - z * mq - row * nq                   # this thread's (1, V) tile: (row, q)
        step = NB * M * ldw                         # from one K range's partials to the next
        partials = make_layout((M, N), (ldw, ONE))
        # (the vector form's out has unit column steps: cs is 1)
        out = make_layout((M, N), (ldc, ONE)) if VECTOR else make_layout((M, N), (ldc, cs))
        gC = local_tile(make_tensor(C, out, z * sCb), RUN, (row, q))   # (1, V)
        acc = make_fragment_like(gC, float32)                           # (1, V)
        fill(acc, 0)
        col = q * U(V)
        if col + U(V) <= N:
            rX = make_fragment_like(gC[0, None], PART_BITS)             # (V)
            rY = make_fragment_like(gC[0, None], PART_BITS)
            s = U(0)
            while s + U(1) < S:                     # two K ranges a turn, added in order
                gX = local_tile(make_tensor(W, partials, (s * NB + z) * M * ldw), RUN,
                                (row, q))
                gY = local_tile(make_tensor(W, partials, (s * NB + z) * M * ldw + step),
                                RUN, (row, q))
                if VECTOR:
                    copy(LOAD, gX[0, None], rX)
                    copy(LOAD, gY[0, None], rY)
                    for j in unroll(COLUMNS):
                        acc[0, j] = (acc[0, j] + part(rX[j])) + part(rY[j])
                else:
                    for j in unroll(COLUMNS):
                        acc[0, j] = (acc[0, j] + part(gX[0, j])) + part(gY[0, j])
                s += U(2)
            if s < S:
                gX = local_tile(make_tensor(W, partials, (s * NB + z) * M * ldw), RUN,
                                (row, q))
                if VECTOR:
                    copy(LOAD, gX[0, None], rX)
                    for j in unroll(COLUMNS):
                        acc[0, j] += part(rX[j])
                else:
                    for j in unroll(COLUMNS):
                        acc[0, j] += part(gX[0, j])
            if VECTOR:
                rC = make_fragment_like(gC[0, None], OUT_BITS)
                if beta != float32(0):
                    copy(WRITE, gC[0, None], rC)
                    for j in unroll(COLUMNS):
                        acc[0, j] = alpha * acc[0, j] + beta * load(rC[j])
                else:
                    for j in unroll(COLUMNS):
                        acc[0, j] = alpha * acc[0, j]
                for j in unroll(COLUMNS):          # (written outside the branches: no
                    rC[j] = store(acc[0, j])        # local memory for 16-bit outs)
                copy(WRITE, rC, gC[0, None])
            else:
                for j in unroll(COLUMNS):
                    finish(gC, j, acc[0, j], alpha, beta)
        else:                                       # the row's last columns, fewer than V
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
def launcher(out_dtype, part_dtype="float32", vector=False):
    """The :class:`gemm.call.launch.Launcher` of the reduction of ``part_dtype`` partials
    into an out of ``out_dtype`` (alpha and beta its free scalars), in the vector form or
    element by element."""
    return compiled_launcher("splitk", (out_dtype, part_dtype) + (("vector",) if vector else ()),
                             _reduce_function(out_dtype, part_dtype, vector),
                             signature(out_dtype, part_dtype),
                             (np.dtype(STORAGE[part_dtype]).itemsize,
                              np.dtype(STORAGE[out_dtype]).itemsize), SCALARS,
                             free_scalars=2)
