"""A column-major copy of a row-major float32 matrix, for 3xTF32 on a row-major B.

wgmma reads tf32 operands K-major only, so ``gemm.matmul``'s float32 default copies a
row-major (K, N) B into a column-major workspace first, where the product is long enough to
pay for the copy (``gemm.api.X3_COPY_ROWS``). The kernel, written with :mod:`gemm.cute`,
moves 32 x 32 tiles through shared memory: a tiled copy whose consecutive threads run along
the source's rows (coalesced 128-byte reads) into a tile of padded rows, then one whose
consecutive threads run along the tile's columns (coalesced writes of the copy's columns;
the padding puts a column's 32 values in 32 banks). Values outside the matrix are neither
read nor written (``copy_if``). Kept as a cubin file and launched through the driver
(:mod:`gemm.call`); in numba's simulator its twin runs. ``gemm.api`` imports this module
when a call first copies (it imports numba).

>>> grid((4096, 1000))
(32, 128, 1)
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Tuple

import numpy as np
from numba import cuda, float32, int32

from layoutalg import Layout, UniversalCopy, make_tiled_copy
from gemm.cute import (copy_if, elem_less, get_slice, local_tile, make_fragment_like,
                       make_identity_tensor, make_layout, make_shared_tensor, make_tensor,
                       partition_D, partition_S, static, static_range, unroll, unrolled)

from .call.launch import compiled_launcher

__all__ = ["column_major_copy", "grid", "BLOCK", "MAX_ELEMENTS"]

TILE = 32
THREADS = 256
BLOCK = (THREADS, 1, 1)
MAX_ELEMENTS = 2 ** 32 - 1      # gemm.cute's uint32 offsets
SIGNATURE = "void(float32[::1], float32[::1], uint32, uint32, uint32)"
U = np.uint32
ONE = static(1)
BLOCK_TILE = static((TILE, TILE))
# the shared tile: (row, column) at row * 33 + column
SHARED = Layout((TILE, TILE), (TILE + 1, 1))
ATOM = UniversalCopy(32, np.float32)
# reads: thread t at column t % 32 of row t // 32 (and 8, 16, 24 rows below)
READ = make_tiled_copy(ATOM, Layout((THREADS // TILE, TILE), (TILE, 1)), Layout((1, 1)))
# writes: thread t at row t % 32 of column t // 32 (and 8, 16, 24 columns right)
WRITE = make_tiled_copy(ATOM, Layout((TILE, THREADS // TILE), (1, TILE)), Layout((1, 1)))
GROUPS = static_range(TILE * TILE // THREADS)           # a thread's values of a tile


@unrolled
def _kernel(S, D, R, C, lds):
    """D = S^T as a copy: the (R, C) row-major matrix S (leading dimension lds) into D,
    (R, C) column-major (element (r, c) at c * R + r)."""
    bx, by, t = U(cuda.blockIdx.x), U(cuda.blockIdx.y), U(cuda.threadIdx.x)
    tile = make_shared_tensor(float32, SHARED)                       # (32, 32)
    gS = local_tile(make_tensor(S, make_layout((R, C), (lds, ONE))), BLOCK_TILE, (by, bx))
    gD = local_tile(make_tensor(D, make_layout((R, C), (ONE, R))), BLOCK_TILE, (by, bx))
    cT = local_tile(make_identity_tensor((R, C)), BLOCK_TILE, (by, bx))

    read = get_slice(READ, t)
    tSgS = partition_S(read, gS)                                     # (CPY, CPY_R, CPY_C)
    tSsT = partition_D(read, tile)
    tScT = partition_S(read, cT)
    tSp = make_fragment_like(tSsT[0, None, None], int32)             # (CPY_R, CPY_C)
    for r in unroll(GROUPS):
        tSp[r] = elem_less(tScT[r], (R, C))
    copy_if(READ, tSp, tSgS, tSsT)
    cuda.syncthreads()

    write = get_slice(WRITE, t)
    tDsT = partition_S(write, tile)                                  # (CPY, CPY_R, CPY_C)
    tDgD = partition_D(write, gD)
    tDcT = partition_D(write, cT)
    tDp = make_fragment_like(tDsT[0, None, None], int32)
    for r in unroll(GROUPS):
        tDp[r] = elem_less(tDcT[r], (R, C))
    copy_if(WRITE, tDp, tDsT, tDgD)


@lru_cache(maxsize=None)
def _launcher():
    return compiled_launcher("transpose", (TILE, THREADS), _kernel, SIGNATURE, (4, 4),
                             ("uint32",) * 3)


def grid(shape: Tuple[int, int]) -> Tuple[int, int, int]:
    """The launch grid for a matrix of ``shape`` (rows, columns): a block per 32 x 32 tile."""
    rows, cols = shape
    return -(-cols // TILE), -(-rows // TILE), 1


def column_major_copy(src: Any, dst: Any, shape: Tuple[int, int], ld: int,
                      stream: int = 0) -> Any:
    """Launch the copy of the row-major float32 matrix of ``shape`` (rows, columns) and
    leading dimension ``ld`` at ``src`` into ``dst``, column-major and compact (element (r,
    c) at ``c * rows + r``). ``src``, ``dst``: (device address, elements) on a GPU, numpy
    float32 arrays in the simulator. Returns the bound launch (None in the simulator); call
    it as ``bound((src address, dst address), stream)``. ValueError past the kernel's uint32
    indices or its grid's 65535 rows of tiles."""
    rows, cols = shape
    if rows * ld > MAX_ELEMENTS or rows * cols > MAX_ELEMENTS or grid(shape)[1] > 65535:
        raise ValueError(f"column_major_copy: a {rows} x {cols} matrix (leading dimension "
                         f"{ld}) is too large for the copy's uint32 indices or grid")
    return _launcher()(grid(shape), BLOCK, stream, (src, dst), (rows, cols, ld))
