"""Which tile of the output a block (or a persistent block's work unit) computes: the grouped
order of CUTLASS's threadblock swizzle and of the CuTe DSL's tile schedulers, as a device
function kernels written with :mod:`gemm.cute` call (``from gemm.cute.scheduler import
grouped_tile``).

Consecutive work units take ``group_m`` tile rows of one tile column, then the same rows of
the next column, so that the blocks running at once read a few A and B panels many times
from L2 instead of every A panel once per wave.

>>> import numpy as np
>>> U = np.uint32
>>> [tuple(map(int, grouped_tile.py_func(U(p), U(3), U(2), U(2)))) for p in range(6)]
[(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]
"""

import numpy as np
from numba import cuda

__all__ = ["grouped_tile"]

U = np.uint32


@cuda.jit(device=True, inline="always")
def grouped_tile(pid, tiles_m, tiles_n, group_m):
    """(tile row, tile column) of work unit ``pid`` of a (tiles_m, tiles_n) grid of tiles in
    grouped order: ``group_m`` tile rows (fewer in the last group) swept column after
    column. uint32 arithmetic, each result cast back (numba widens uint32 products to 64
    bits)."""
    width = U(U(group_m) * U(tiles_n))          # the units of one group of rows
    first = U(U(pid // width) * U(group_m))     # its first tile row
    rows = U(min(U(tiles_m - first), U(group_m)))   # its rows (fewer in the last group)
    r = U(pid - U(pid // width) * width)
    return U(first + U(r % rows)), U(r // rows)
