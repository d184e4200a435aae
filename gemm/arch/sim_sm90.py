"""Pure-Python twins of the Hopper instructions of ``gemm.arch.sm90``, for numba's CUDA
simulator (issue 12): the mbarriers, the fences, the TMA loads and stores, wgmma and its
descriptors, named barriers, and warp specialization's ``setmaxnreg``, ``elect_one`` and
``shared_offset_of``.

The simulator runs one Python thread per CUDA thread. An mbarrier's state (its current
phase, the arrivals still due, the transaction bytes still due) lives here, keyed by the
address of its 8 bytes of shared memory; the lock makes each operation atomic, as the
hardware does:

- ``mbarrier_init(bars, idx, count)``: phase 0, ``count`` arrivals due, no bytes;
- ``mbarrier_arrive(bars, idx)``: one arrival; ``mbarrier_arrive_expect_tx(bars, idx,
  nbytes)``: ``nbytes`` more bytes due, then one arrival; :func:`mbarrier_complete_tx`
  (what a TMA load does when its bytes land): ``nbytes`` fewer due. When neither arrivals
  nor bytes are due, the phase completes: the next one starts with ``count`` arrivals due;
- ``mbarrier_wait(bars, idx, parity)``: returns once the phase of that parity has completed,
  that is, while the current phase's parity differs from ``parity``. A wait longer than
  ``WAIT_LIMIT_S`` seconds raises RuntimeError (a hang on the GPU).

The TMA loads read a map made by :func:`sim_tensor_map` (the simulator's stand-in for
``gemm.tma.tensor_map``: 16 words naming a registered numpy buffer, the extents, byte strides,
box and swizzle). ``tma_load_2d/3d`` copy the box at the coordinates (contiguous dimension
first) into shared memory as the hardware does: elements in box order, the 16-byte chunks of
each 128-byte row XORed with the row's index within its 8-row group (``SWIZZLE_128B``; 64B and
32B the same over 2 and 1 bits), on the shared address; elements outside the extents are
zero; then the box's bytes complete on the mbarrier at once. ``bulk_load`` copies a contiguous
run the same way (``cp.async.bulk`` without a map: 16-byte sizes and addresses).

``smem_desc(smem, bits)`` adds the array's shared address >> 4 (its low 14 bits, as the
hardware's field) to ``bits`` and remembers the array for the block. ``wgmma_tile(op, n,
trans_a, trans_b, first)(acc, desc_a, desc_b, scale_d)`` is warpgroup-collective: the
first of the 128 threads to make a call decodes both descriptors per the PTX ISA's canonical
layouts (start, LBO, SBO, swizzle; see :mod:`layoutalg.atom.gmma`), swizzles the byte
addresses and reads A (64 x k) and B (n x k) from shared memory, computing A B^T in float64;
each thread of the warpgroup, at its own matching call (its n-th is the group's n-th), adds
its fragment of that product (per the wgmma atom's C layout) to its ``acc[first:]`` (unless
``scale_d`` is 0), rounded once to float32. Shared memory is read before any thread of the
group could release it, as on the GPU (where all 128 issue together); a thread whose
descriptors differ from its group's raises. So it completes at once and ``wgmma_commit`` is a
no-op; no thread waits for the others at a call (a 128-thread rendezvous per call was the
simulator's bottleneck), but ``wgmma_wait`` returns only once every thread of the warpgroup
has issued as many as the caller, as on the GPU, where a wgmma runs when all four warps have
issued it.

``tma_store_2d/3d`` copy a box from shared memory (unswizzled as the loads swizzle) to the
map's buffer at once, the elements inside the extents only; ``bulk_commit`` /
``bulk_wait_read`` / ``bulk_wait`` are then no-ops. ``named_barrier(idx, count)`` is a
``threading.Barrier`` of ``count`` threads per block and index.

The fences are no-ops here (the twins' writes are visible at once); ``setmaxnreg`` checks its
argument; ``elect_one`` is True in lane 0; ``shared_offset_of`` reads the array's address.

>>> import numpy as np
>>> bars = np.zeros(1, np.uint64)
>>> mbarrier_init(bars, 0, 2)
>>> mbarrier_arrive(bars, 0); phase_of(bars, 0)
0
>>> mbarrier_arrive_expect_tx(bars, 0, 64); phase_of(bars, 0)      # 64 bytes still due
0
>>> mbarrier_complete_tx(bars, 0, 64); phase_of(bars, 0)
1
>>> mbarrier_wait(bars, 0, 0)           # phase 0 has completed: returns at once
"""

import functools
import threading
import time
import weakref

import numpy as np

from layoutalg.atom import SM90_64xNx16_F32BF16BF16_SS
from layoutalg.atom.float8 import FLOAT8, float8_values
from gemm.arch.sim import WARP, block_thread
from gemm.arch.tile_plan import (WGMMA_BITS, WGMMA_TYPES, check_wgmma, chunk_offsets,
                                 wgmma_types)
from gemm.tma import check_encodable

__all__ = ["mbarrier_init", "fence_mbarrier_init", "mbarrier_arrive",
           "mbarrier_arrive_expect_tx", "mbarrier_complete_tx", "mbarrier_wait", "phase_of",
           "tma_store_2d", "tma_store_3d", "bulk_commit", "bulk_wait_read", "bulk_wait",
           "named_barrier",
           "wgmma_fence", "wgmma_commit", "wgmma_wait", "fence_proxy_async", "setmaxnreg_inc",
           "setmaxnreg_dec", "elect_one", "shared_offset_of", "sim_tensor_map", "tma_load_2d",
           "tma_load_3d", "bulk_load", "smem_desc", "wgmma_tile", "split_tf32", "split_tf32_tile",
           "clear_nonfinite_tile", "named_barrier_or", "WAIT_LIMIT_S"]

WAIT_LIMIT_S = 60.0
_lock = threading.Condition()
_bars = {}          # address of the mbarrier's 8 bytes -> [phase, count, arrivals due, bytes due]
_owners = {}        # the same address -> a weak reference to the array that held it then


def _address(bars, idx, op):
    if not isinstance(bars, np.ndarray) or bars.dtype.itemsize != 8 or bars.ndim != 1:
        raise TypeError(f"{op}: bars must be a 1-D array of 8-byte elements (a shared uint64 "
                        f"array), got {bars!r}")
    i = int(idx)
    if not 0 <= i < bars.shape[0]:
        raise IndexError(f"{op}: mbarrier {i} is outside bars (of {bars.shape[0]})")
    return bars.__array_interface__["data"][0] + i * bars.strides[0]


def _root(a):
    """The array whose memory ``a`` views."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _state(bars, idx, op):
    """The mbarrier's state; a state left at the same address by an array since freed (its
    memory reused by ``bars``) is no state."""
    address = _address(bars, idx, op)
    state, owner = _bars.get(address), _owners.get(address)
    if state is None or owner() is not _root(bars):
        raise RuntimeError(f"{op}: mbarrier {int(idx)} was not initialised (mbarrier_init)")
    return state


def _settle(state):
    """Complete the phase where nothing is due (the caller holds the lock)."""
    if state[2] == 0 and state[3] == 0:
        state[0] += 1
        state[2] = state[1]
        _lock.notify_all()


def mbarrier_init(bars, idx, count):
    """Phase 0 with ``count`` (1 .. 2**20 - 1) arrivals due."""
    n = int(count)
    if not 1 <= n < 2 ** 20:
        raise ValueError(f"mbarrier_init: count must be in 1 .. 2**20 - 1, got {count}")
    with _lock:
        address = _address(bars, idx, "mbarrier_init")
        _bars[address], _owners[address] = [0, n, n, 0], weakref.ref(_root(bars))


def _arrive(bars, idx, nbytes, op):
    with _lock:
        state = _state(bars, idx, op)
        if state[2] == 0:
            raise RuntimeError(f"{op}: more arrivals than the phase's count")
        state[3] += int(nbytes)
        state[2] -= 1
        _settle(state)


def mbarrier_arrive(bars, idx):
    """One arrival on ``bars[idx]``."""
    _arrive(bars, idx, 0, "mbarrier_arrive")


def mbarrier_arrive_expect_tx(bars, idx, nbytes):
    """``nbytes`` more bytes due on ``bars[idx]``, then one arrival."""
    _arrive(bars, idx, nbytes, "mbarrier_arrive_expect_tx")


def mbarrier_complete_tx(bars, idx, nbytes):
    """``nbytes`` of asynchronous writes have landed (the TMA twin's completion)."""
    with _lock:
        state = _state(bars, idx, "mbarrier_complete_tx")
        state[3] -= int(nbytes)
        _settle(state)


def phase_of(bars, idx):
    """The number of phases of ``bars[idx]`` completed so far (for tests)."""
    with _lock:
        return _state(bars, idx, "phase_of")[0]


def mbarrier_wait(bars, idx, parity):
    """Return once the phase of ``parity`` (0 or 1) of ``bars[idx]`` has completed."""
    p = int(parity)
    if p not in (0, 1):
        raise ValueError(f"mbarrier_wait: parity must be 0 or 1, got {parity}")
    thread = threading.current_thread()
    deadline = time.monotonic() + WAIT_LIMIT_S
    with _lock:
        state = _state(bars, idx, "mbarrier_wait")
        while state[0] % 2 == p:
            if getattr(thread, "abort", False):
                raise RuntimeError("mbarrier_wait: the simulated kernel was aborted")
            if time.monotonic() > deadline:
                raise RuntimeError(f"mbarrier_wait: the phase of parity {p} of mbarrier "
                                   f"{int(idx)} did not complete in {WAIT_LIMIT_S:.0f} s "
                                   f"({state[2]} arrivals and {state[3]} bytes still due)")
            _lock.wait(0.05)


def _no_op(*_):
    """No-op in the simulator: the twins' writes are visible at once."""


fence_mbarrier_init = wgmma_fence = wgmma_commit = fence_proxy_async = _no_op


def wgmma_wait(n):
    """Returns once every thread of the caller's warpgroup has issued as many wgmma as the
    caller (the twins' wgmma completes at once, but on the GPU a wgmma runs only when all
    four warps of the warpgroup have issued it: a thread past its wait knows the others are
    past their waits for the operands, and one thread may release them for all)."""
    if int(n) != n or not 0 <= n <= 7:
        raise ValueError(f"wgmma_wait: n must be an integer in 0..7, got {n}")
    block, tid = _block("wgmma_wait")
    done = ("issued", tid // 128)       # the warpgroup's last call all its threads issued
    with _groups_done:
        seen = _groups.get(block, {})
        mine = seen.get(tid, 0)
        if not _groups_done.wait_for(lambda: seen.get(done, 0) >= mine, WAIT_LIMIT_S):
            raise RuntimeError(f"wgmma_wait: the warpgroup's threads did not all issue their "
                               f"{mine}th wgmma in {WAIT_LIMIT_S:.0f} s")


def _setmaxnreg(direction):
    def setmaxnreg(n):
        if int(n) != n or not (24 <= n <= 256 and n % 8 == 0):
            raise ValueError(f"setmaxnreg_{direction}: n must be a multiple of 8 in 24..256, "
                             f"got {n}")
    setmaxnreg.__name__ = f"setmaxnreg_{direction}"
    setmaxnreg.__doc__ = "No-op apart from checking ``n`` (registers are not simulated)."
    return setmaxnreg


setmaxnreg_inc = _setmaxnreg("inc")
setmaxnreg_dec = _setmaxnreg("dec")


def elect_one():
    """True in lane 0 of the calling thread's warp."""
    thread, _ = block_thread("elect_one")
    return thread.thread_id % WARP == 0


def shared_offset_of(smem, align):
    """Elements to skip from ``smem`` so that its address is a multiple of ``align`` bytes."""
    a = int(align)
    if a <= 0 or a & (a - 1):
        raise ValueError(f"shared_offset_of: align must be a power of two, got {align}")
    skip = -smem.__array_interface__["data"][0] % a
    if skip % smem.itemsize:
        raise ValueError(f"shared_offset_of: {skip} bytes to skip are not whole elements of "
                         f"{smem.itemsize} bytes")
    return np.uint32(skip // smem.itemsize)


# --- TMA loads --------------------------------------------------------------------------------

_MAP_MAGIC = 0x4D49535F414D54           # "TMA_SIM"
_maps = {}                              # key -> (buffer bytes, offset, dims, strides, box, ...)
_SWIZZLE_MASK = {0: 0, 32: 0x10, 64: 0x30, 128: 0x70}   # the 16-byte chunk bits XORed


def _swizzle(addr, swizzle):
    """Shared byte addresses under a TMA / GMMA swizzle of ``swizzle`` bytes (Swizzle<b,4,3>:
    the 16-byte chunk index XORed with the row's index within its group of 8 rows)."""
    return addr ^ ((addr >> 3) & _SWIZZLE_MASK[swizzle])


def sim_tensor_map(buffer, offset, copy, element_bytes):
    """The simulator's tensor map (16 uint64 words) of a TMA ``copy`` (a
    :class:`layoutalg.atom.tma.TmaCopy` with the call's ``dims`` and byte ``strides``) over
    the global matrix whose first element is byte ``offset`` of the 1-D uint8 array
    ``buffer``. The words name an entry of this module's registry, which keeps every map
    made (the simulator's runs are small). ValueError where the driver would refuse the map
    (``gemm.tma.check_encodable``, the address being the buffer's plus ``offset``)."""
    if not (isinstance(buffer, np.ndarray) and buffer.dtype == np.uint8 and buffer.ndim == 1):
        raise TypeError("sim_tensor_map: buffer must be a 1-D uint8 numpy array")
    if copy.swizzle not in _SWIZZLE_MASK:
        raise ValueError(f"sim_tensor_map: swizzle must be one of {sorted(_SWIZZLE_MASK)}")
    rank = len(copy.dims)
    if len(copy.strides) != rank - 1:
        raise ValueError(f"sim_tensor_map: {rank} extents need {rank - 1} strides, got "
                         f"{copy.strides}")
    box = tuple(copy.box) + (1,) * (rank - len(copy.box))
    check_encodable(copy.dims, copy.strides, box, element_bytes,
                    buffer.__array_interface__["data"][0] + int(offset), copy.swizzle,
                    caller="sim_tensor_map")
    key = len(_maps) + 1
    _maps[key] = (buffer, int(offset), tuple(copy.dims), (element_bytes,) + tuple(copy.strides),
                  box, copy.swizzle, element_bytes)
    words = np.zeros(16, np.uint64)
    words[0], words[1] = _MAP_MAGIC, key
    return words


def _box(smem, idx, tensor_map, coords, op):
    """The box of ``tensor_map`` at ``coords`` against element ``idx`` of ``smem``: (the map's
    buffer, a mask of the box's elements inside the extents, their byte offsets in the
    buffer, their byte offsets in ``smem`` (swizzled), ``smem``'s bytes, element bytes)."""
    if int(tensor_map[0]) != _MAP_MAGIC or int(tensor_map[1]) not in _maps:
        raise RuntimeError(f"{op}: the tensor map was not made by sim_tensor_map")
    buffer, offset, dims, strides, box, swizzle, esize = _maps[int(tensor_map[1])]
    if len(coords) != len(dims):
        raise ValueError(f"{op}: the map has {len(dims)} dimensions")
    # every element of the box, in box order (the contiguous dimension fastest)
    grids = np.meshgrid(*[np.arange(b) for b in box[::-1]], indexing="ij")
    at = [g.ravel() for g in grids[::-1]]                    # per dimension, box order
    glob = [int(c) + i for c, i in zip(coords, at)]
    inside = np.logical_and.reduce([(g >= 0) & (g < d) for g, d in zip(glob, dims)])
    src = offset + sum(np.where(inside, g, 0) * st for g, st in zip(glob, strides))
    start = smem.__array_interface__["data"][0] + int(idx) * smem.itemsize
    dst = _swizzle(start + np.arange(at[0].size) * esize, swizzle)
    dst -= smem.__array_interface__["data"][0]
    raw = smem.reshape(-1).view(np.uint8)
    if dst.min() < 0 or dst.max() + esize > raw.size:
        raise IndexError(f"{op}: the box does not fit in the shared array")
    return buffer, inside, src, dst, raw, esize


def _tma_load(smem, idx, tensor_map, coords, bars, bar):
    buffer, inside, src, dst, raw, esize = _box(smem, idx, tensor_map, coords,
                                                f"tma_load_{len(coords)}d")
    for b in range(esize):
        raw[dst + b] = np.where(inside, buffer[src + b], 0)
    mbarrier_complete_tx(bars, bar, inside.size * esize)


def tma_load_2d(smem, idx, tensor_map, c0, c1, bars, bar):
    """The box at (c0, c1) of ``tensor_map`` to element ``idx`` of shared ``smem``; its
    bytes complete on mbarrier ``bars[bar]``."""
    _tma_load(smem, idx, tensor_map, (c0, c1), bars, bar)


def tma_load_3d(smem, idx, tensor_map, c0, c1, c2, bars, bar):
    """:func:`tma_load_2d` in a 3-D map (``c2``: which matrix of a batch)."""
    _tma_load(smem, idx, tensor_map, (c0, c1, c2), bars, bar)


def bulk_load(smem, idx, src, start, nbytes, bars, bar):
    """``nbytes`` (a multiple of 16) from element ``start`` of ``src`` to element ``idx`` of
    shared ``smem``, both addresses 16-byte aligned; the bytes complete on ``bars[bar]``."""
    n = int(nbytes)
    first = src.__array_interface__["data"][0] + int(start) * src.itemsize
    at = smem.__array_interface__["data"][0] + int(idx) * smem.itemsize
    if n <= 0 or n % 16 or first % 16 or at % 16:
        raise ValueError(f"bulk_load: {n} bytes from address {first:#x} to {at:#x}: the size "
                         f"and both addresses must be multiples of 16 bytes")
    raw_src, raw_dst = src.reshape(-1).view(np.uint8), smem.reshape(-1).view(np.uint8)
    s0, d0 = int(start) * src.itemsize, int(idx) * smem.itemsize
    if s0 < 0 or s0 + n > raw_src.size or d0 < 0 or d0 + n > raw_dst.size:
        raise IndexError("bulk_load: the copy passes the end of its source or destination")
    raw_dst[d0:d0 + n] = raw_src[s0:s0 + n]
    mbarrier_complete_tx(bars, bar, n)


def _tma_store(smem, idx, tensor_map, coords):
    buffer, inside, src, dst, raw, esize = _box(smem, idx, tensor_map, coords,
                                                f"tma_store_{len(coords)}d")
    for b in range(esize):
        buffer[src[inside] + b] = raw[dst[inside] + b]


def tma_store_2d(smem, idx, tensor_map, c0, c1):
    """The box of ``tensor_map`` at (c0, c1) from element ``idx`` of shared ``smem``, the
    elements inside the extents only (at once: the bulk waits are no-ops)."""
    _tma_store(smem, idx, tensor_map, (c0, c1))


def tma_store_3d(smem, idx, tensor_map, c0, c1, c2):
    """:func:`tma_store_2d` in a 3-D map (``c2``: which matrix of a batch)."""
    _tma_store(smem, idx, tensor_map, (c0, c1, c2))


def _bulk_wait(name):
    def wait(n):
        if int(n) != n or n < 0:
            raise ValueError(f"{name}: n must be an integer >= 0, got {n}")
    wait.__name__ = name
    wait.__doc__ = "No-op apart from checking ``n`` (the TMA store twins complete at once)."
    return wait


bulk_commit = _no_op
bulk_wait_read, bulk_wait = _bulk_wait("bulk_wait_read"), _bulk_wait("bulk_wait")
_named = weakref.WeakKeyDictionary()    # simulator block -> {barrier index: threading.Barrier}


def named_barrier(idx, count):
    """Wait until ``count`` threads of the block have arrived at barrier ``idx``."""
    i, n = int(idx), int(count)
    if not 0 <= i < 16 or n <= 0 or n % 32:
        raise ValueError(f"named_barrier: idx must be in 0..15 and count a positive multiple "
                         f"of 32, got {idx}, {count}")
    block, _ = _block("named_barrier")
    with _groups_lock:
        barrier = _named.setdefault(block, {}).setdefault(
            i, threading.Barrier(n, timeout=WAIT_LIMIT_S))
    if barrier.parties != n:
        raise RuntimeError(f"named_barrier: barrier {i} is used with {barrier.parties} and "
                           f"{n} threads")
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        raise RuntimeError(f"named_barrier: {n} threads did not arrive at barrier {i} within "
                           f"{WAIT_LIMIT_S:.0f} s") from None


# --- wgmma --------------------------------------------------------------------------------------

_WINDOW = 1 << 18                       # the descriptor's 14-bit start field, in bytes
_smem = weakref.WeakKeyDictionary()     # simulator block -> its shared array smem_desc saw
_groups = weakref.WeakKeyDictionary()   # simulator block -> {thread: calls, (warpgroup, call):
#                                         [(function, descriptors, scale_d), A B^T, readers due],
#                                         ("issued", warpgroup): calls all its threads issued}
_groups_lock = threading.Lock()
_groups_done = threading.Condition(_groups_lock)     # a thread has issued a wgmma
_MODES = {0: 0, 1: 128, 2: 64, 3: 32}   # descriptor bits 62-63 -> swizzle bytes


def _block(op):
    """The simulator's block (its BlockManager) and the calling thread's index in it."""
    thread, block = block_thread(op)
    return block, thread.thread_id


def smem_desc(smem, bits):
    """``bits`` plus the array's shared address >> 4 in the start field (bits 0-13)."""
    block, _ = _block("smem_desc")
    _smem[block] = smem
    start = (smem.__array_interface__["data"][0] >> 4) & 0x3FFF
    return np.uint64(int(bits) + start)


def _operand(raw, base, desc, rows, k, esize, major):
    """Byte addresses (relative to the array) of the (rows, k) operand a descriptor names."""
    d = int(desc)
    start, lbo, sbo = (((d >> shift) & 0x3FFF) << 4 for shift in (0, 16, 32))
    swizzle = _MODES[d >> 62]
    w, t = max(1, swizzle // 16), 16 // esize
    at = (base & ~(_WINDOW - 1)) | start
    if at < base:
        at += _WINDOW
    r, c = np.meshgrid(np.arange(rows), np.arange(k), indexing="ij")
    if major == "K":            # ((8, n), 2) : ((W, SBO), LBO); swizzled: chunks adjacent
        unit = (r % 8) * w + (r // 8) * (sbo // 16) + (c // t) * (1 if swizzle else lbo // 16)
        inner = c % t
    elif swizzle:               # ((W, n), (8, k)) : ((1, LBO), (W, SBO))
        unit = (r // t % w) + (r // t // w) * (lbo // 16) + (c % 8) * w + (c // 8) * (sbo // 16)
        inner = r % t
    else:                       # ((1, n), (8, k)) : ((-, SBO), (1, LBO))
        unit = (r // t) * (sbo // 16) + (c % 8) + (c // 8) * (lbo // 16)
        inner = r % t
    addr = _swizzle(at + unit * 16 + inner * esize, swizzle) - base
    if addr.min() < 0 or addr.max() + esize > raw.size:
        raise IndexError("wgmma_tile: a descriptor reaches outside the shared array")
    return addr


def _values(raw, addr, elem, esize):
    """The operand's elements (little-endian at ``addr``) of type ``elem`` as float64."""
    if elem in FLOAT8:
        return float8_values(elem)[raw[addr]]
    bits = sum(raw[addr + b].astype(np.uint32) << np.uint32(8 * b) for b in range(esize))
    if elem == "bf16":
        return (bits << 16).view(np.float32).astype(np.float64)
    if elem == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)   # tf32


@functools.lru_cache(maxsize=None)
def _c_layout(n):
    atom = SM90_64xNx16_F32BF16BF16_SS(n)           # (every wgmma's accumulator layout)
    off = np.array([[atom.layout_C(t, v) for v in range(n // 2)] for t in range(128)])
    return off % 64, off // 64                      # [thread, value] -> (m, n) of C


_tiles = {}                             # (op, n, trans_a, trans_b, first) -> its twin
_tiles_lock = threading.Lock()


def wgmma_tile(op, n, trans_a=False, trans_b=False, first=0):
    """The twin of ``gemm.arch.sm90.wgmma_tile``: ``f(acc, desc_a, desc_b, scale_d)``, the
    operands in the shared array ``smem_desc`` saw last; ``f(..., smem_a, smem_b)`` names
    the arrays that A's and B's descriptors address (gemm.cute's tensors). Made once per
    instruction (a warpgroup's threads ask together: each would build the atom's layouts)."""
    key = (op, n, bool(trans_a), bool(trans_b), first)
    tile = _tiles.get(key)
    if tile is None:
        with _tiles_lock:
            tile = _tiles.get(key) or _tiles.setdefault(key, _wgmma_tile(*key))
    return tile


def _wgmma_tile(op, n, trans_a, trans_b, first):
    check_wgmma(op, n, trans_a, trans_b, first)
    k, types = WGMMA_TYPES[op], wgmma_types(op)
    rows, cols = _c_layout(n)
    instruction = (op, n, trans_a, trans_b, first)      # what the warpgroup's calls share

    def operand(smem, desc, rows, major, elem):
        base = smem.__array_interface__["data"][0]
        raw = smem.reshape(-1).view(np.uint8)
        esize = WGMMA_BITS[elem] // 8
        return _values(raw, _operand(raw, base, desc, rows, k, esize, major), elem, esize)

    def tile(acc, desc_a, desc_b, scale_d, smem_a=None, smem_b=None):
        block, tid = _block("wgmma_tile")
        call = (instruction, int(desc_a), int(desc_b), int(scale_d) != 0)
        with _groups_lock:
            seen = _groups.setdefault(block, {})
            count = seen[tid] = seen.get(tid, 0) + 1      # this thread's wgmma calls so far
            key = (tid // 128, count)                     # the warpgroup's call it joins
            got = seen.get(key)
            if got is None:                               # the first thread reads shared
                a = operand(_smem[block] if smem_a is None else smem_a, call[1], 64,
                            "MN" if trans_a else "K", types[0])
                b = operand(_smem[block] if smem_b is None else smem_b, call[2], n,
                            "MN" if trans_b else "K", types[1])
                got = seen[key] = [call, a @ b.T, 128]    # A B^T: (64, n)
            elif got[0] != call:
                raise RuntimeError("wgmma_tile: the warpgroup's threads passed different "
                                   "descriptors or scale_d to the same call")
            got[2] -= 1
            if got[2] == 0:                               # every thread issued call key[1]
                del seen[key]                             # (and so every call before it)
                seen[("issued", key[0])] = key[1]
            _groups_done.notify_all()
        t = tid % 128
        part = got[1][rows[t], cols[t]]
        if call[3]:
            part = part + acc[first:first + n // 2].astype(np.float64)
        acc[first:first + n // 2] = part.astype(np.float32)
    tile.__name__ = f"wgmma_tile_{op}_n{n}_{first}"
    return tile


def _nonfinite(bits):
    return (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)


def split_tf32(x):
    """3xTF32's small parts of float32 array ``x`` (see gemm.arch.sm90.split_tf32_tile): x
    minus x with its 13 low bits cleared, rounded to tf32 (to nearest, ties away); 0 where x
    is inf or NaN."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    mask = np.uint32(0xFFFFE000)
    with np.errstate(invalid="ignore"):
        rest = bits.view(np.float32) - (bits & mask).view(np.float32)
    small = (rest.view(np.uint32) + np.uint32(0x1000)) & mask
    small[_nonfinite(bits)] = 0
    return small.view(np.float32)


def split_tf32_tile(chunks, step):
    """The twin of ``gemm.arch.sm90.split_tf32_tile``: ``f(smem, src, dst) -> uint32``."""
    offsets = chunk_offsets("split_tf32_tile", chunks, step)

    def tile(smem, src, dst):
        raw, flag = smem.reshape(-1).view(np.uint8), 0
        for c in offsets:
            s, d = int(src) + c, int(dst) + c
            x = raw[s:s + 16].view(np.float32)
            raw[d:d + 16] = split_tf32(x).view(np.uint8)
            flag |= int(_nonfinite(x.view(np.uint32)).any())
        return np.uint32(flag)
    return tile


def clear_nonfinite_tile(chunks, step):
    """The twin of ``gemm.arch.sm90.clear_nonfinite_tile``: ``f(smem, at)``."""
    offsets = chunk_offsets("clear_nonfinite_tile", chunks, step)

    def tile(smem, at):
        raw = smem.reshape(-1).view(np.uint8)
        for c in offsets:
            x = raw[int(at) + c:int(at) + c + 16].view(np.uint32)
            x[_nonfinite(x)] = 0
    return tile


_or = weakref.WeakKeyDictionary()       # simulator block -> {barrier index: [any flag]}


def named_barrier_or(idx, count, flag):
    """``named_barrier`` that returns whether any of its threads passed a nonzero ``flag``."""
    block, _ = _block("named_barrier_or")
    with _groups_lock:
        state = _or.setdefault(block, {}).setdefault(int(idx), [False])
        state[0] = state[0] or bool(flag)
    named_barrier(idx, count)           # every flag is in
    got = state[0]
    named_barrier(idx, count)           # every thread has read it
    with _groups_lock:
        state[0] = False
    named_barrier(idx, count)           # cleared before the next use
    return got
