"""A column-major copy of a row-major float32 matrix, for 3xTF32 on a row-major B.

wgmma reads tf32 operands K-major only, so ``gemm.matmul``'s float32 default copies a
row-major (K, N) B into a column-major workspace first, where the product is long enough to
pay for the copy (``gemm.api.X3_COPY_ROWS``). The kernel moves 32 x 32 tiles through shared
memory (a padded row, so that the column reads meet no bank conflicts): coalesced 128-byte
reads of B's rows, coalesced writes of the copy's columns. Kept as a cubin file and launched
through the driver (:mod:`gemm.call`); in numba's simulator its twin runs. ``gemm.api``
imports this module when a call first copies (it imports numba).

>>> grid((4096, 1000))
(32, 128, 1)
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Tuple

import numpy as np
from numba import cuda, float32

from .call.launch import compiled_launcher

__all__ = ["column_major_copy", "grid", "BLOCK", "MAX_ELEMENTS"]

TILE = 32
PADDED = TILE + 1               # a tile's row in shared memory: the columns' reads hit every bank
BLOCK = (TILE, 8, 1)            # each thread moves TILE / 8 elements of a tile
MAX_ELEMENTS = 2 ** 32 - 1      # the kernel's uint32 indices
SIGNATURE = "void(float32[::1], float32[::1], uint32, uint32, uint32)"
U = np.uint32


def _kernel(S, D, R, C, lds):
    """D[c * R + r] = S[r * lds + c]: the (R, C) row-major matrix S, R x C column-major in D."""
    tile = cuda.shared.array((TILE, PADDED), float32)
    c0 = U(cuda.blockIdx.x) * U(TILE)
    r0 = U(cuda.blockIdx.y) * U(TILE)
    tx, ty = U(cuda.threadIdx.x), U(cuda.threadIdx.y)
    for j in range(0, TILE, 8):
        r, c = r0 + ty + U(j), c0 + tx
        if r < R and c < C:
            tile[ty + U(j), tx] = S[r * lds + c]
    cuda.syncthreads()
    for j in range(0, TILE, 8):
        r, c = r0 + tx, c0 + ty + U(j)
        if r < R and c < C:
            D[c * R + r] = tile[tx, ty + U(j)]


@lru_cache(maxsize=None)
def _launcher():
    return compiled_launcher("transpose", TILE, _kernel, SIGNATURE, (4, 4), ("uint32",) * 3)


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
