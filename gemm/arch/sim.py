"""Pure-Python twins of the PTX intrinsics, for numba's CUDA simulator.

Same names, signatures and semantics as ``gemm.arch.ptx``; ``gemm.arch`` picks these when
``NUMBA_ENABLE_CUDASIM=1``. The module imports only numpy and the standard library.

- cp.async reads its source when issued and writes its destination when a wait covers its
  commit group (``cp_async_wait(n)``: all but the thread's ``n`` newest committed groups;
  ``cp_async_wait_all``: every copy), zero-fill honoured: a kernel that reads shared memory
  before its copies are waited for reads the old values, as it may on the GPU.
- ldmatrix and mma.sync are warp-collective: each lane deposits its operands at a rendezvous of
  its warp (the simulator runs one Python thread per CUDA thread); the last lane to arrive
  computes the whole warp's result from the PTX ISA fragment layouts and every lane takes its
  own part. As on the GPU, all 32 lanes of the warp must reach the call (the block size must be
  a multiple of 32); a lane that exits or waits at ``syncthreads`` instead is reported as an
  error rather than a hang.
- mma arithmetic: bf16/f16 inputs are converted exactly, A*B + C is summed in float64 and
  rounded once to the accumulator type (float32, or float16 for the f16 forms); the GPU keeps
  at least f32 precision, in an unspecified order, so results agree to f32 rounding. tf32
  operands are uint32 f32 bit patterns whose low 13 bits the tensor core ignores (truncation,
  as documented for wgmma); round them with ``cvt_rna_tf32_f32`` first for nearest rounding.
- Alignment and bounds are checked and reported as errors (on the GPU they are faults).

>>> hex(cvt_rn_bf16x2_f32(1.0, -2.0))  # lo = 1.0 -> 0x3f80, hi = -2.0 -> 0xc000
'0xc0003f80'
>>> import numpy as np
>>> src = np.arange(8, dtype=np.uint16); dst = np.full(8, 7, np.uint16)
>>> cp_async_ca_zfill(dst, 0, src, 4, 8, 6)  # 8 bytes from src[4:], only 6 of them read
>>> cp_async_wait_all()
>>> dst.tolist()
[4, 5, 6, 0, 7, 7, 7, 7]
"""

import functools
import math
import sys
import threading
import weakref

import numpy as np

__all__ = [
    "cp_async_ca", "cp_async_cg", "cp_async_ca_zfill", "cp_async_cg_zfill",
    "cp_async_commit", "cp_async_wait", "cp_async_wait_all",
    "ldmatrix_x1", "ldmatrix_x2", "ldmatrix_x4",
    "ldmatrix_x1_trans", "ldmatrix_x2_trans", "ldmatrix_x4_trans",
    "mma_m16n8k16_f32_bf16", "mma_m16n8k16_f32_f16", "mma_m16n8k16_f16_f16",
    "mma_m16n8k8_f16_f16", "mma_m16n8k8_f32_tf32",
    "ld_v4_b32", "ld_v4_f32", "st_v4_b32", "st_v4_f32",
    "ld_v2_b32", "ld_v2_f32", "st_v2_b32", "st_v2_f32", "shfl_xor_f32", "warp_uniform",
    "syncwarp", "compiler_fence",
    "tanh_approx_f32", "ex2_approx_f32", "rcp_approx_f32",
    "pack_b16x2", "pack_bf16x2", "pack_f16x2", "unpack_b16x2",
    "cvt_rn_bf16x2_f32", "cvt_rn_f16x2_f32", "cvt_rn_bf16_f32", "cvt_rn_f16_f32",
    "cvt_rna_tf32_f32", "bf16_to_f32", "f16_to_f32", "bf16x2_to_f32", "f16x2_to_f32",
    "float_as_uint32", "uint32_as_float",
    "cvt_rn_satfinite_e4m3x2_f32", "cvt_rn_satfinite_e5m2x2_f32",
]

WARP = 32


# --- memory --------------------------------------------------------------------------------------

def _ndarray(a, op, name):
    """The numpy array behind a kernel argument, a simulator device array or a shared array."""
    if isinstance(a, np.ndarray):
        return a
    inner = vars(a).get("_item", a) if hasattr(a, "__dict__") else a  # in-kernel wrapper
    ary = getattr(inner, "_ary", None)
    if isinstance(ary, np.ndarray):
        return ary
    raise TypeError(f"{op}: {name} must be an array, got {type(a).__name__}")


def _window(a, idx, nbytes, op, name, align, itemsizes=None):
    """Writable uint8 view of the ``nbytes`` bytes starting at element ``idx`` of array ``a``,
    after checking the element size, the alignment of the address and (for nbytes > 0) the
    bounds. ``nbytes = 0`` checks only the address and returns an empty view."""
    ary = _ndarray(a, op, name)
    size = ary.itemsize
    if itemsizes is not None and size not in itemsizes:
        raise TypeError(f"{op}: {name} must have {'/'.join(str(8 * s) for s in itemsizes)}-bit "
                        f"elements, got {ary.dtype}")
    if nbytes % size:
        raise ValueError(f"{op}: {nbytes} bytes is not a multiple of the {size}-byte elements "
                         f"of {name}")
    idx = int(idx)
    if idx < 0:
        raise IndexError(f"{op}: {name} index {idx} is negative")
    if ary.ndim != 1:
        if not ary.flags.c_contiguous:
            raise ValueError(f"{op}: {name} must be 1-D or C-contiguous")
        ary = ary.reshape(-1)
    address = ary.__array_interface__["data"][0] + idx * ary.strides[0]
    if address % align:
        raise ValueError(f"{op}: {name} element {idx} is at address {address:#x}, not "
                         f"{align}-byte aligned")
    count = nbytes // size
    if count > 1 and ary.strides[0] != size:
        raise ValueError(f"{op}: the {count} elements of {name} from {idx} are not contiguous "
                         f"(stride {ary.strides[0]} bytes); the twin needs them adjacent")
    if count and idx + count > ary.shape[0]:
        raise IndexError(f"{op}: {name}[{idx}:{idx + count}] is out of bounds "
                         f"(size {ary.shape[0]})")
    return ary[idx:idx + count].view(np.uint8)


# --- cp.async ------------------------------------------------------------------------------------

_copies = threading.local()     # .groups: this thread's cp.async groups, the open one last


def _groups():
    groups = getattr(_copies, "groups", None)
    if groups is None:
        groups = _copies.groups = [[]]
    return groups


def _cp_async(op, sizes, dst, di, src, si, nbytes, src_bytes):
    if nbytes not in sizes:
        raise ValueError(f"{op}: nbytes must be one of {sizes}, got {nbytes}")
    src_bytes = int(src_bytes)
    if not 0 <= src_bytes <= nbytes:
        raise ValueError(f"{op}: src_bytes must be in 0..{nbytes}, got {src_bytes}")
    out = _window(dst, di, nbytes, op, "dst", nbytes)
    _window(src, si, 0, op, "src", nbytes)  # the source address is checked even if unread
    data = np.zeros(nbytes, np.uint8)
    if src_bytes:
        ary = _ndarray(src, op, "src")
        read = -(-src_bytes // ary.itemsize) * ary.itemsize  # whole elements covering src_bytes
        data[:src_bytes] = _window(src, si, read, op, "src", nbytes)[:src_bytes]
    _groups()[-1].append((out, data))       # written when a wait covers the group


def cp_async_ca(dst, di, src, si, nbytes):
    """Copy ``nbytes`` (4, 8 or 16) bytes from ``src[si:]`` to ``dst[di:]`` (landing at a
    wait that covers the copy's group)."""
    _cp_async("cp_async_ca", (4, 8, 16), dst, di, src, si, nbytes, nbytes)


def cp_async_cg(dst, di, src, si, nbytes):
    """Copy 16 bytes from ``src[si:]`` to ``dst[di:]``; nbytes must be 16."""
    _cp_async("cp_async_cg", (16,), dst, di, src, si, nbytes, nbytes)


def cp_async_ca_zfill(dst, di, src, si, nbytes, src_bytes):
    """Copy the first ``src_bytes`` of ``nbytes`` bytes and write zeros over the rest."""
    _cp_async("cp_async_ca_zfill", (4, 8, 16), dst, di, src, si, nbytes, src_bytes)


def cp_async_cg_zfill(dst, di, src, si, nbytes, src_bytes):
    """16-byte ``cp_async_ca_zfill``."""
    _cp_async("cp_async_cg_zfill", (16,), dst, di, src, si, nbytes, src_bytes)


def cp_async_commit():
    """Close this thread's open group of copies."""
    _groups().append([])


def _land(groups):
    for group in groups:
        for out, data in group:
            out[:] = data


def cp_async_wait(n):
    """Land the copies of this thread's committed groups but the ``n`` newest."""
    if int(n) != n or n < 0:
        raise ValueError(f"cp_async_wait: n must be an integer >= 0, got {n}")
    groups = _groups()
    done = max(0, len(groups) - 1 - int(n))
    _land(groups[:done])
    del groups[:done]


def cp_async_wait_all():
    """Land every copy this thread issued (its open group committed first)."""
    groups = _groups()
    _land(groups)
    groups[:] = [[]]


# --- the warp rendezvous -------------------------------------------------------------------------

class _WarpState:
    def __init__(self):
        self.cond = threading.Condition()
        self.generation = 0
        self.op = None
        self.arrived = {}
        self.results = None
        self.error = None


_warps = weakref.WeakKeyDictionary()   # simulator BlockManager -> {warp id: _WarpState}
_warps_lock = threading.Lock()


def block_thread(what):
    """(the calling thread, its block: numba's BlockManager) in a kernel running in numba's
    simulator; RuntimeError beginning with ``what`` elsewhere."""
    thread = threading.current_thread()
    manager = getattr(thread, "_manager", None)
    if manager is None or not hasattr(thread, "thread_id"):
        raise RuntimeError(f"{what}: call it from a kernel running in numba's CUDA simulator "
                           "(NUMBA_ENABLE_CUDASIM=1)")
    return thread, manager


def _lane_context(op):
    thread, manager = block_thread(f"{op} is warp-collective")
    block = int(np.prod(manager._block_dim))
    warp, lane = divmod(thread.thread_id, WARP)
    if block - warp * WARP < WARP:
        raise RuntimeError(f"{op} is warp-collective and needs full warps: a block of {block} "
                           f"threads leaves warp {warp} with {block - warp * WARP} lanes")
    with _warps_lock:
        state = _warps.setdefault(manager, {}).setdefault(warp, _WarpState())
    return thread, manager, warp, lane, state


def _manager_sets(manager):
    """The simulator's ``BlockManager.run`` locals ``threads`` (every thread started so far,
    exited ones too) and ``blockedthreads`` (those it saw at syncthreads), or None where they
    cannot be found."""
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_name == "run" and frame.f_locals.get("self") is manager:
                threads = frame.f_locals.get("threads")
                blocked = frame.f_locals.get("blockedthreads")
                if isinstance(threads, set) and isinstance(blocked, set):
                    return set(threads), set(blocked)
                return None
            frame = frame.f_back
    return None


def _stuck_lanes(manager, warp, arrived, waited):
    """Lanes of ``warp`` that have not arrived and never will: those that have exited and those
    waiting at syncthreads (which cannot complete while this lane waits here). While the
    manager is releasing a syncthreads (some thread it saw blocked is unblocked already, the
    rest not yet), no lane counts as stuck: under load that release can take seconds."""
    sets = _manager_sets(manager)
    assume_gone = False
    if sets is None:   # unknown simulator internals: the live threads and a long timeout
        started = {t for t in threading.enumerate() if getattr(t, "_manager", None) is manager}
        assume_gone = waited >= _GONE_AFTER_S
    else:
        started, seen_blocked = sets
        if any(not t.syncthreads_blocked for t in seen_blocked):
            return []
    by_lane = {t.thread_id % WARP: t for t in started if t.thread_id // WARP == warp}
    stuck = []
    for lane in range(WARP):
        if lane in arrived:
            continue
        t = by_lane.get(lane)
        if t is None:
            if assume_gone:
                stuck.append(lane)
        elif not t.is_alive() or t.syncthreads_blocked:
            stuck.append(lane)
    return stuck


_STUCK_AFTER_S = 1.0    # how long a lane waits for its warp before looking for stuck lanes
_GONE_AFTER_S = 10.0    # without the simulator's thread set: a lane not running by then exited


def _warp_collective(op, payload, compute):
    """Deposit ``payload``; once all 32 lanes are in, ``compute({lane: payload})`` runs once and
    returns ``{lane: result}``; each lane returns its result."""
    thread, manager, warp, lane, state = _lane_context(op)
    with state.cond:
        if state.arrived and state.op != op:
            raise RuntimeError(f"warp {warp} diverged: lane {lane} calls {op} while lanes "
                               f"{sorted(state.arrived)} are in {state.op}")
        generation = state.generation
        state.op = op
        state.arrived[lane] = payload
        if len(state.arrived) == WARP:
            try:
                state.results, state.error = compute(state.arrived), None
            except Exception as e:  # handed to every lane
                state.results, state.error = None, e
            state.arrived, state.op = {}, None
            state.generation += 1
            state.cond.notify_all()
        else:
            waited = 0.0
            while state.generation == generation:
                if getattr(thread, "abort", False):
                    raise RuntimeError(f"{op}: the simulated kernel was aborted")
                state.cond.wait(0.05)
                waited += 0.05
                # woken by the last lane, the others may be gone already: not stuck
                if waited >= _STUCK_AFTER_S and state.generation == generation:
                    stuck = _stuck_lanes(manager, warp, state.arrived, waited)
                    if stuck:
                        raise RuntimeError(f"{op} is warp-collective but lanes {stuck} of warp "
                                           f"{warp} exited or wait at syncthreads instead")
        results, error = state.results, state.error
    if error is not None:
        raise RuntimeError(f"{op} failed for warp {warp}: {error}") from error
    return results[lane]


# --- ldmatrix ------------------------------------------------------------------------------------

def _ldmatrix(op, num, trans, smem, idx):
    return _warp_collective(op, (smem, int(idx)), ldmatrix_compute(op, num, trans))


@functools.lru_cache(maxsize=None)
def ldmatrix_compute(op, num, trans):
    """The warp's ldmatrix: ``{lane: (smem, idx)} -> {lane: registers}``."""
    def compute(lanes):
        mats = []
        for j in range(num):
            rows = [_window(*lanes[8 * j + r], 16, op, f"smem (lane {8 * j + r})", 16, (2,))
                    .view(np.uint16) for r in range(8)]
            mats.append(np.stack(rows).astype(np.uint32))
        out = {}
        for lane in range(WARP):
            g, t = divmod(lane, 4)
            regs = []
            for m in mats:
                lo, hi = (m[2 * t, g], m[2 * t + 1, g]) if trans else (m[g, 2 * t], m[g, 2 * t + 1])
                regs.append(np.uint32(lo | (hi << 16)))
            out[lane] = tuple(regs)
        return out
    return compute


def ldmatrix_x1(smem, idx):
    """One 8x8 b16 matrix; lanes 0-7 give the row addresses. Returns (r0,)."""
    return _ldmatrix("ldmatrix_x1", 1, False, smem, idx)


def ldmatrix_x2(smem, idx):
    """Two 8x8 b16 matrices; lanes 0-15 give the row addresses. Returns (r0, r1)."""
    return _ldmatrix("ldmatrix_x2", 2, False, smem, idx)


def ldmatrix_x4(smem, idx):
    """Four 8x8 b16 matrices; all 32 lanes give row addresses. Returns (r0, r1, r2, r3)."""
    return _ldmatrix("ldmatrix_x4", 4, False, smem, idx)


def ldmatrix_x1_trans(smem, idx):
    """``ldmatrix_x1`` with each matrix transposed (``.trans``)."""
    return _ldmatrix("ldmatrix_x1_trans", 1, True, smem, idx)


def ldmatrix_x2_trans(smem, idx):
    """``ldmatrix_x2`` with each matrix transposed (``.trans``)."""
    return _ldmatrix("ldmatrix_x2_trans", 2, True, smem, idx)


def ldmatrix_x4_trans(smem, idx):
    """``ldmatrix_x4`` with each matrix transposed (``.trans``)."""
    return _ldmatrix("ldmatrix_x4_trans", 4, True, smem, idx)


# --- mma.sync ------------------------------------------------------------------------------------
# Fragment positions from the PTX ISA ("Matrix Fragments for mma.m16n8k16 / m16n8k8"), with
# g = lane // 4 (groupID) and t = lane % 4 (threadID_in_group). Each function gives, for element
# e of a lane's fragment (register e // 2, half e % 2 for 16-bit types), its (row, col).

def _a_m16n8k16(g, t, e):   # 8 halves in 4 registers over A 16x16
    return g + 8 * ((e // 2) % 2), 2 * t + e % 2 + 8 * (e // 4)


def _b_m16n8k16(g, t, e):   # 4 halves in 2 registers over B 16x8 (K,N)
    return 2 * t + e % 2 + 8 * (e // 2), g


def _c_m16n8(g, t, e):      # 4 values over C/D 16x8
    return g + 8 * (e // 2), 2 * t + e % 2


def _a_m16n8k8(g, t, e):    # 4 halves in 2 registers over A 16x8
    return g + 8 * (e // 2), 2 * t + e % 2


def _b_m16n8k8(g, t, e):    # 2 halves in 1 register over B 8x8 (K,N)
    return 2 * t + e, g


def _a_m16n8k8_tf32(g, t, e):   # 4 registers over A 16x8
    return g + 8 * (e % 2), t + 4 * (e // 2)


def _b_m16n8k8_tf32(g, t, e):   # 2 registers over B 8x8 (K,N)
    return t + 4 * e, g


@functools.lru_cache(maxsize=None)
def _positions(where, per_lane):
    """Flat index arrays (rows, cols) of shape (32, per_lane) for a fragment function."""
    rows = np.empty((WARP, per_lane), np.intp)
    cols = np.empty((WARP, per_lane), np.intp)
    for lane in range(WARP):
        g, t = divmod(lane, 4)
        for e in range(per_lane):
            rows[lane, e], cols[lane, e] = where(g, t, e)
    return rows, cols


def _elements(lanes, part, kind):
    """float64 (32, elements per lane) of the lanes' registers ``lanes[lane][part]``."""
    if kind == "f32":
        return np.array([[float(np.float32(x)) for x in lanes[lane][part]]
                         for lane in range(WARP)], np.float64)
    regs = np.array([[int(x) & 0xFFFFFFFF for x in lanes[lane][part]] for lane in range(WARP)],
                    np.uint32)
    if kind == "tf32":  # the tensor core reads the top 19 bits of an f32 pattern
        return (regs & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    halves = np.stack([regs & 0xFFFF, regs >> 16], axis=-1).reshape(WARP, -1)  # low half first
    if kind == "bf16":
        return (halves << 16).astype(np.uint32).view(np.float32).astype(np.float64)
    return halves.astype(np.uint16).view(np.float16).astype(np.float64)   # f16


def _operand(lanes, part, kind, where, shape):
    """One operand matrix (float64) assembled from the warp's fragments."""
    values = _elements(lanes, part, kind)
    rows, cols = _positions(where, values.shape[1])
    matrix = np.zeros(shape, np.float64)
    matrix[rows, cols] = values
    return matrix


# op -> (shape, operand kind, accumulator kind, A fragment, B fragment)
MMA_SHAPES = {
    "mma_m16n8k16_f32_bf16": ((16, 8, 16), "bf16", "f32", _a_m16n8k16, _b_m16n8k16),
    "mma_m16n8k16_f32_f16": ((16, 8, 16), "f16", "f32", _a_m16n8k16, _b_m16n8k16),
    "mma_m16n8k16_f16_f16": ((16, 8, 16), "f16", "f16", _a_m16n8k16, _b_m16n8k16),
    "mma_m16n8k8_f16_f16": ((16, 8, 8), "f16", "f16", _a_m16n8k8, _b_m16n8k8),
    "mma_m16n8k8_f32_tf32": ((16, 8, 8), "tf32", "f32", _a_m16n8k8_tf32, _b_m16n8k8_tf32),
}


def _mma(op, regs):
    return _warp_collective(op, regs, mma_compute(op))


@functools.lru_cache(maxsize=None)
def mma_compute(op):
    """The warp's mma of ``op``: ``{lane: ((a regs), (b regs), (c regs))} -> {lane: d regs}``."""
    (m, n, k), kind, acc, a_where, b_where = MMA_SHAPES[op]

    def compute(lanes):
        a = _operand(lanes, 0, kind, a_where, (m, k))
        b = _operand(lanes, 1, kind, b_where, (k, n))
        c = _operand(lanes, 2, acc, _c_m16n8, (m, n))
        d = a @ b + c                         # exact products, float64 sums, one rounding below
        rows, cols = _positions(_c_m16n8, 4)
        values = d[rows, cols]                # (32, 4) in fragment order
        if acc == "f32":
            return {lane: tuple(np.float32(v) for v in values[lane]) for lane in range(WARP)}
        bits = values.astype(np.float16).view(np.uint16).astype(np.uint32)
        packed = bits[:, 0::2] | bits[:, 1::2] << 16
        return {lane: (packed[lane, 0], packed[lane, 1]) for lane in range(WARP)}
    return compute


def mma_m16n8k16_f32_bf16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """D (16x8 f32) = A (16x16 bf16) * B (16x8 bf16) + C, one warp; returns (d0, d1, d2, d3)."""
    return _mma("mma_m16n8k16_f32_bf16", ((a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3)))


def mma_m16n8k16_f32_f16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """D (16x8 f32) = A (16x16 f16) * B (16x8 f16) + C, one warp; returns (d0, d1, d2, d3)."""
    return _mma("mma_m16n8k16_f32_f16", ((a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3)))


def mma_m16n8k16_f16_f16(a0, a1, a2, a3, b0, b1, c0, c1):
    """D (16x8 f16, 2 packed registers) = A (16x16 f16) * B (16x8 f16) + C, one warp."""
    return _mma("mma_m16n8k16_f16_f16", ((a0, a1, a2, a3), (b0, b1), (c0, c1)))


def mma_m16n8k8_f16_f16(a0, a1, b0, c0, c1):
    """D (16x8 f16, 2 packed registers) = A (16x8 f16) * B (8x8 f16) + C, one warp."""
    return _mma("mma_m16n8k8_f16_f16", ((a0, a1), (b0,), (c0, c1)))


def mma_m16n8k8_f32_tf32(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """D (16x8 f32) = A (16x8 tf32) * B (8x8 tf32) + C, one warp; a*/b* are f32 bit patterns."""
    return _mma("mma_m16n8k8_f32_tf32", ((a0, a1, a2, a3), (b0, b1), (c0, c1, c2, c3)))


# --- vector loads and stores ---------------------------------------------------------------------

def _itemsizes(dtype):
    """f32 vectors need a float32 array; b32 vectors also move pairs of 16-bit elements."""
    return (4,) if dtype == np.float32 else (2, 4)


def _load(op, n, dtype, array, idx):
    w = _window(array, idx, 4 * n, op, "array", 4 * n, _itemsizes(dtype))
    return tuple(dtype(x) for x in w.view(dtype))


def _store(op, n, dtype, array, idx, xs):
    w = _window(array, idx, 4 * n, op, "array", 4 * n, _itemsizes(dtype))
    w.view(dtype)[:] = [dtype(x) for x in xs]


def ld_v4_b32(array, idx):
    """Elements idx..idx+3 of a 32-bit array as 4 uint32 bit patterns (16-byte aligned)."""
    return _load("ld_v4_b32", 4, np.uint32, array, idx)


def ld_v4_f32(array, idx):
    """Elements idx..idx+3 of a 32-bit array as 4 float32 (16-byte aligned)."""
    return _load("ld_v4_f32", 4, np.float32, array, idx)


def ld_v2_b32(array, idx):
    """Elements idx, idx+1 of a 32-bit array as 2 uint32 bit patterns (8-byte aligned)."""
    return _load("ld_v2_b32", 2, np.uint32, array, idx)


def ld_v2_f32(array, idx):
    """Elements idx, idx+1 of a 32-bit array as 2 float32 (8-byte aligned)."""
    return _load("ld_v2_f32", 2, np.float32, array, idx)


def st_v4_b32(array, idx, x0, x1, x2, x3):
    """Store 4 uint32 bit patterns to elements idx..idx+3 (16-byte aligned)."""
    _store("st_v4_b32", 4, np.uint32, array, idx, (x0, x1, x2, x3))


def st_v4_f32(array, idx, x0, x1, x2, x3):
    """Store 4 float32 to elements idx..idx+3 (16-byte aligned)."""
    _store("st_v4_f32", 4, np.float32, array, idx, (x0, x1, x2, x3))


def st_v2_b32(array, idx, x0, x1):
    """Store 2 uint32 bit patterns to elements idx, idx+1 (8-byte aligned)."""
    _store("st_v2_b32", 2, np.uint32, array, idx, (x0, x1))


def st_v2_f32(array, idx, x0, x1):
    """Store 2 float32 to elements idx, idx+1 (8-byte aligned)."""
    _store("st_v2_f32", 2, np.float32, array, idx, (x0, x1))


# --- warp shuffle --------------------------------------------------------------------------------

def shfl_xor_f32(x, lane_mask):
    """The float32 ``x`` of lane ``lane ^ lane_mask`` (1..31); the whole warp calls it."""
    if not (isinstance(lane_mask, (int, np.integer)) and 1 <= lane_mask <= 31):
        raise ValueError(f"shfl_xor_f32: lane_mask must be in 1..31, got {lane_mask!r}")

    def compute(lanes):
        return {lane: np.float32(lanes[lane ^ lane_mask]) for lane in lanes}
    return _warp_collective(f"shfl_xor_f32 {lane_mask}", np.float32(x), compute)


def warp_uniform(x):
    """Lane 0's integer ``x`` in every lane, as a uint32; the whole warp calls it."""
    def compute(lanes):
        return dict.fromkeys(lanes, lanes[0])
    return _warp_collective("warp_uniform", np.uint32(x), compute)


def tanh_approx_f32(x):
    """tanh of a float32 (the twin of ``tanh.approx.f32``: exact here, to float32)."""
    return np.float32(math.tanh(float(x)))


def ex2_approx_f32(x):
    """2**x of a float32 (the twin of ``ex2.approx.ftz.f32``: exact here, to float32, its
    subnormal results flushed to zero as the instruction does)."""
    with np.errstate(over="ignore"):
        y = np.exp2(np.float32(x))
    return np.float32(0.0) if abs(y) < np.finfo(np.float32).tiny else y


def rcp_approx_f32(x):
    """1 / x of a float32 (the twin of ``rcp.approx.ftz.f32``: exact here, to float32)."""
    with np.errstate(divide="ignore"):
        return np.float32(np.float32(1.0) / np.float32(x))


def syncwarp():
    """The warp's lanes meet here (``__syncwarp()``); the whole warp calls it."""
    _warp_collective("syncwarp", None, dict.fromkeys)


def compiler_fence():
    """Nothing: in Python every access happens where it is written."""


# --- conversions and packing ---------------------------------------------------------------------

def _f32_bits(x):
    return int(np.array(x, np.float32).view(np.uint32))


def _bf16_rn(x):
    """f32 -> bf16 bits, round to nearest even; NaN -> canonical 0x7fff."""
    u = _f32_bits(x)
    if (u & 0x7F800000) == 0x7F800000 and u & 0x7FFFFF:
        return 0x7FFF
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def _f16_rn(x):
    """f32 -> f16 bits, round to nearest even; NaN -> canonical 0x7fff."""
    x = np.float32(x)
    if np.isnan(x):
        return 0x7FFF
    with np.errstate(over="ignore"):
        return int(np.array(x).astype(np.float16).view(np.uint16))


def pack_b16x2(lo, hi):
    """``lo | hi << 16`` of two 16-bit patterns, as uint32."""
    return np.uint32((int(lo) & 0xFFFF) | (int(hi) & 0xFFFF) << 16)


pack_bf16x2 = pack_b16x2
pack_f16x2 = pack_b16x2


def unpack_b16x2(x):
    """The two 16-bit halves of a uint32, low first."""
    x = int(x) & 0xFFFFFFFF
    return np.uint16(x & 0xFFFF), np.uint16(x >> 16)


def cvt_rn_bf16x2_f32(lo, hi):
    """Two f32 rounded to nearest-even bf16, packed ``lo`` low, ``hi`` high."""
    return pack_b16x2(_bf16_rn(lo), _bf16_rn(hi))


def cvt_rn_f16x2_f32(lo, hi):
    """Two f32 rounded to nearest-even f16, packed ``lo`` low, ``hi`` high."""
    return pack_b16x2(_f16_rn(lo), _f16_rn(hi))


def cvt_rn_bf16_f32(x):
    """f32 rounded to nearest-even bf16, as uint16 bits."""
    return np.uint16(_bf16_rn(x))


def cvt_rn_f16_f32(x):
    """f32 rounded to nearest-even f16, as uint16 bits."""
    return np.uint16(_f16_rn(x))


def cvt_rna_tf32_f32(x):
    """f32 rounded to tf32 (nearest, ties away from zero) as uint32 f32 bits, low 13 bits 0;
    NaN -> canonical 0x7fffffff."""
    u = _f32_bits(x)
    if (u & 0x7F800000) == 0x7F800000:
        return np.uint32(0x7FFFFFFF if u & 0x7FFFFF else u)
    return np.uint32(((u + 0x1000) & 0xFFFFE000) & 0xFFFFFFFF)


def bf16_to_f32(x):
    """A bf16 bit pattern as float32 (exact)."""
    return np.array((int(x) & 0xFFFF) << 16, np.uint32).view(np.float32)[()]


def f16_to_f32(x):
    """An f16 bit pattern as float32 (exact)."""
    return np.float32(np.array(int(x) & 0xFFFF, np.uint16).view(np.float16))


def _fp8_satfinite(x, fmt):
    """f32 -> the bits of FP8 ``fmt``, rounded to nearest even, clamped to the largest finite
    value; NaN stays NaN (layoutalg's exact encoder, after the clamp)."""
    from layoutalg.atom.float8 import float8_encode, float8_max
    top = float8_max(fmt)
    x = np.float32(x)
    return int(float8_encode(x if np.isnan(x) else np.clip(x, -top, top), fmt))


def cvt_rn_satfinite_e4m3x2_f32(lo, hi):
    """Two f32 rounded to nearest-even e4m3, saturated, packed ``lo`` in the low byte."""
    return np.uint16(_fp8_satfinite(lo, "e4m3") | _fp8_satfinite(hi, "e4m3") << 8)


def cvt_rn_satfinite_e5m2x2_f32(lo, hi):
    """Two f32 rounded to nearest-even e5m2, saturated, packed ``lo`` in the low byte."""
    return np.uint16(_fp8_satfinite(lo, "e5m2") | _fp8_satfinite(hi, "e5m2") << 8)


def bf16x2_to_f32(x):
    """Two packed bf16 as two float32, low half first."""
    lo, hi = unpack_b16x2(x)
    return bf16_to_f32(lo), bf16_to_f32(hi)


def f16x2_to_f32(x):
    """Two packed f16 as two float32, low half first."""
    lo, hi = unpack_b16x2(x)
    return f16_to_f32(lo), f16_to_f32(hi)


def float_as_uint32(x):
    """The bit pattern of a float32 as uint32."""
    return np.uint32(_f32_bits(x))


def uint32_as_float(x):
    """A uint32 bit pattern as float32."""
    return np.array(int(x) & 0xFFFFFFFF, np.uint32).view(np.float32)[()]
