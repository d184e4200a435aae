"""SM-driven pushes: a small kernel, written with :mod:`gemm.cute`, that copies one buffer
from this GPU's memory into one or several peers' buffers (their CUDA IPC mappings) with
16-byte vector loads and stores, as Pallas Mosaic GPU's collective matmul makes its remote
copies from the kernel instead of the copy engines.

The buffer is ``n`` 32-bit words (a multiple of 4: 16-byte groups) cut into tiles of
``TILE`` words; block ``b`` of a grid of ``blocks`` copies tiles ``b, b + blocks, ...`` (a
grid-stride loop, few blocks, so that the matmuls beside it keep most SMs). Each thread loads
``UNROLL`` 16-byte groups of a tile into registers (consecutive threads on consecutive
groups: coalesced), then stores them into every destination: one kernel writes one shard to
``P`` peers at once, reading it once. The last tile is predicated (``elem_less`` on the
words' coordinates). Kept as a cubin per ``P`` and launched through the driver
(:func:`gemm.call.launch.compiled_launcher`); in numba's simulator its twin runs on numpy
arrays.

The kernel orders nothing: a flag written after it on the same stream
(``cuStreamWriteValue32``, :func:`gemm.collective.peer.write_value`) is, as after a copy
engine's copy (the stream's work is complete and fenced before the write).

>>> tiles(2 ** 21)            # an 8 MiB shard (1024 x 4096 bf16), 8192-word tiles
256
>>> fits(0x7f0000000200, [0x7f2000000400], 2 ** 23), fits(0x7f0000000208, [0], 2 ** 23)
(True, False)
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import numpy as np
from numba import cuda, int32, uint32

from layoutalg import Layout, UniversalCopy, make_tiled_copy
from gemm.cute import (copy_if, dynamic_range, elem_less, get_slice, local_tile,
                       make_fragment_like, make_identity_tensor, make_layout, make_tensor,
                       partition_D, partition_S, static, static_range, unroll, unrolled)

from .._env import simulator_active
from ..call.launch import compiled_launcher

__all__ = ["push", "fits", "tiles", "THREADS", "UNROLL", "TILE", "MAX_PEERS", "ALIGN",
           "BLOCKS"]

THREADS = 512                   # a block's threads
VEC = 4                         # 32-bit words in one 16-byte load or store
UNROLL = 4                      # 16-byte groups a thread has in flight per tile
TILE = THREADS * VEC * UNROLL   # words per tile (32 KiB)
ALIGN = 16                      # bytes: addresses and sizes the vectors need
MAX_PEERS = 7                   # destinations of one launch (every peer of 8 GPUs)
MAX_WORDS = 2 ** 32 - TILE      # uint32 word indices (a tile past the last stays below 2**32)
BLOCKS = 16                     # the default grid: 16 of the H200's 132 SMs
U = np.uint32
ONE = static(1)
TILE_SHAPE = static((TILE,))
# thread t copies words 4t .. 4t+3 of each 2048-word quarter of a tile: one 16-byte vector
COPY = make_tiled_copy(UniversalCopy(128, np.uint32), Layout((THREADS,), (1,)),
                       Layout((VEC,), (1,)))
GROUPS = static_range(UNROLL)


def _kernel(peers):
    """The push to ``peers`` destinations: ``dst[p][i] = src[i]`` for the ``n`` words, each
    block taking every ``gridDim``-th tile of ``tiles``."""
    @unrolled
    def push_kernel(src, dst, n, tiles):
        t = U(cuda.threadIdx.x)
        thr = get_slice(COPY, t)
        gS = make_tensor(src, make_layout((n,), (ONE,)))                 # (n)
        cS = make_identity_tensor((n,))
        for tile in dynamic_range(cuda.blockIdx.x, tiles, cuda.gridDim.x):
            tSgS = partition_S(thr, local_tile(gS, TILE_SHAPE, (tile,)))  # (CPY, UNROLL)
            tScS = partition_S(thr, local_tile(cS, TILE_SHAPE, (tile,)))
            pred = make_fragment_like(tSgS[0, None], int32)               # (UNROLL)
            for u in unroll(GROUPS):
                pred[u] = elem_less(tScS[0, u], (n,))
            frag = make_fragment_like(tSgS, uint32)                      # (CPY, UNROLL)
            copy_if(COPY, pred, tSgS, frag)
            for d in dst:                                               # the peers
                gD = make_tensor(d, make_layout((n,), (ONE,)))
                copy_if(COPY, pred, frag, partition_D(thr, local_tile(gD, TILE_SHAPE,
                                                                      (tile,))))
    return push_kernel


def _signature(peers):
    return f"void(uint32[::1], UniTuple(uint32[::1], {peers}), uint32, uint32)"


@lru_cache(maxsize=None)
def _launcher(peers):
    # the tuple of destinations is passed as ``peers`` arrays after the source (numba's ABI
    # flattens a tuple argument into its members' parameters)
    return compiled_launcher("push", (peers, THREADS, UNROLL), _kernel(peers),
                             _signature(peers), (4,) * (1 + peers), ("uint32",) * 2)


def tiles(words: int) -> int:
    """The number of tiles of a buffer of ``words`` 32-bit words."""
    return -(-words // TILE)


def fits(src: int, dsts: Sequence[int], nbytes: int) -> bool:
    """Whether the kernel can push ``nbytes`` from address ``src`` to each of ``dsts``: every
    address and the size multiples of :data:`ALIGN` bytes (its 16-byte vectors), and the
    size within its uint32 word indices."""
    return (nbytes % ALIGN == 0 and 0 < nbytes // 4 <= MAX_WORDS
            and all(a % ALIGN == 0 for a in (src, *dsts)))


def push(stream: int, src: Any, dsts: Sequence[Any], nbytes: int, blocks: int = BLOCKS) -> None:
    """Launch the copy of ``nbytes`` from ``src`` into every one of ``dsts`` on ``stream`` (a
    raw handle) with a grid of ``blocks`` blocks of :data:`THREADS` threads. ``src`` and each
    of ``dsts``: a device address (an int; a peer's through its IPC mapping), or in numba's
    simulator a 1-D uint32 numpy array (its words). TypeError for other kinds of them;
    ValueError for no or more than :data:`MAX_PEERS` destinations, a grid outside 1..65535
    blocks, a size or addresses :func:`fits` refuses (in the simulator: a size not a
    positive multiple of 16 bytes within the arrays)."""
    dsts = list(dsts)
    if not 1 <= len(dsts) <= MAX_PEERS:
        raise ValueError(f"push: 1 to {MAX_PEERS} destinations, not {len(dsts)}")
    for name, v in (("blocks", blocks), ("nbytes", nbytes)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"push: {name} must be an int, not {v!r}")
    if not 1 <= blocks <= 65535:
        raise ValueError(f"push: blocks must be in 1..65535, not {blocks}")
    words = int(nbytes) // 4
    grid, block = (int(blocks), 1, 1), (THREADS, 1, 1)
    if simulator_active():                      # the arrays themselves
        if not all(isinstance(a, np.ndarray) and a.dtype == np.uint32 and a.ndim == 1
                   for a in (src, *dsts)):
            raise TypeError("push: in the simulator src and dsts are 1-D uint32 numpy arrays")
        if nbytes % ALIGN or not 0 < words <= min(a.size for a in (src, *dsts)):
            raise ValueError(f"push: {nbytes} bytes is not a positive multiple of {ALIGN} "
                             f"within the arrays")
        _launcher(len(dsts))(grid, block, stream, [src, tuple(dsts)], (words, tiles(words)))
        return
    if not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
               for a in (src, *dsts)):
        raise TypeError("push: src and dsts are device addresses (ints)")
    if not fits(src, dsts, nbytes):
        raise ValueError(f"push: {nbytes} bytes from {src:#x} to "
                         f"{', '.join(f'{d:#x}' for d in dsts)}: the addresses and the size "
                         f"must be multiples of {ALIGN} bytes, the size at most "
                         f"{4 * MAX_WORDS} bytes (copy it with the copy engines)")
    _launcher(len(dsts))(grid, block, stream, [(int(src), words)]
                         + [(int(d), words) for d in dsts], (words, tiles(words)))
