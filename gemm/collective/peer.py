"""Exchanges on peer memory: each rank's scratch slots and flags are shared with the ranks
that write to it (:class:`PeerRing`: its neighbour in the all-gather's ring schedule, every
rank in the direct one; :class:`gemm.collective.reduce_scatter.PeerScatter`: every rank) by
CUDA IPC (``cuIpcGetMemHandle`` / ``cuIpcOpenMemHandle`` through ``cuda.bindings``, the
driver bindings numba-cuda installs), the blocks are pushed by the copy engines
(``cuMemcpyAsync`` over NVLink, or within the GPU when ranks share one) or by a kernel's
stores (:mod:`gemm.collective.push`, ``transfer="sm"``; :data:`TRANSFERS`; the matmuls
beside it may leave its SMs free, :data:`PUSH_CARVEOUT`), and each copy is
followed by a remote flag write (``cuStreamWriteValue32``, which fences the stream's earlier
writes) that the receiver's streams wait for (``cuStreamWaitValue32``, flushing remote writes
where the device can). Nothing runs on the host between steps: the whole call is enqueued on
two streams, the caller's current stream (the matmuls) and a communication stream (the
copies), so each copy overlaps the next matmul.

NVLink multicast is never used (no ``cuMulticastCreate``).
"""

import contextlib
import logging

from ..call.binary import _check, _driver
from ..hopper import sm_carveout
from .plan import ring_plan

# torch is imported inside the methods that use it: importing this module needs no torch.

__all__ = ["PeerExchange", "PeerRing", "copy_async", "write_value", "wait_value", "clear",
           "TRANSFERS", "PUSH_BLOCKS", "PUSH_CARVEOUT", "check_transfer", "DEFAULT_TRANSFER",
           "RING_CHUNKS", "ring_chunks"]

# How a block reaches a peer's scratch: "copy_engine", one ``cuMemcpyAsync`` per copy; "sm",
# one launch per copy of gemm.collective.push's kernel (16-byte stores from PUSH_BLOCKS
# blocks), a copy whose addresses or size are not multiples of 16 bytes by the copy engines;
# "sm_fused" (the direct schedule only), a rank's D - 1 copies of its own shard as one
# launch of that kernel writing every peer at once, their flags set after it.
TRANSFERS = ("copy_engine", "sm", "sm_fused")
PUSH_BLOCKS = 16        # the push kernel's grid (SMs taken from the matmuls beside it)
PUSH_PRIORITY = -1      # the comm stream's priority where a kernel pushes (torch's: -1 high)
# Whether the matmuls beside a push kernel leave its blocks' SMs free (gemm.hopper.sm_carveout):
# without it the Hopper kernel's persistent grid holds every SM, and a push waits for matmul
# blocks to end; with it the matmuls run on fewer SMs, in more waves at some shapes. Off: at
# D = 2 it made the push-kernel calls slower (benchmarks/RESULTS.md, "An SM carveout for the
# push kernel"); benchmarks/collective.py times both.
PUSH_CARVEOUT = False
# The pieces each copy of the ring schedule is cut into, each with its own arrival flag, so
# that a rank forwards a shard's first piece while the next ones arrive: a shard's D - 1 hops
# then cost one flag hop, not D - 1, beside the copies (see ring_chunks).
RING_CHUNKS = 1
CHUNK_ALIGN = 256       # bytes: a piece's start (the push kernel's vectors need 16)


# The transfer all_gather_matmul takes when none is named, at every size: the push kernel
# moves a shard no faster to one peer, and to every peer at once faster than the engines do,
# but beside the matmuls it is slower: the Hopper kernel's persistent grid holds every SM
# (one block of all its registers each), so a push waits for SMs and takes them from the
# matmuls (benchmarks/RESULTS.md, "The copy engines per peer, and SM-driven pushes").
DEFAULT_TRANSFER = "copy_engine"


def ring_chunks(schedule, size, slot_bytes, chunks=None):
    """The pieces a copy of a ``slot_bytes`` slot is cut into: ``chunks`` (default
    :data:`RING_CHUNKS`) for the ring schedule of more than two ranks, where shards are
    forwarded, one elsewhere (no copy waits for another to arrive), and no more than
    :data:`CHUNK_ALIGN`-byte pieces would make (a piece starts at a multiple of it).

    >>> ring_chunks("ring", 4, 2 ** 23, 4), ring_chunks("direct", 4, 2 ** 23, 4)
    (4, 1)
    >>> ring_chunks("ring", 4, 300, 4), ring_chunks("ring", 2, 2 ** 23, 4)
    (2, 1)
    """
    chunks = RING_CHUNKS if chunks is None else chunks
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"ring chunks must be a positive int, not {chunks!r}")
    if schedule != "ring" or size < 3:
        return 1
    return max(1, min(chunks, -(-slot_bytes // CHUNK_ALIGN)))


def check_transfer(transfer, schedule, caller):
    """ValueError unless ``transfer`` is one of :data:`TRANSFERS` and fits ``schedule``."""
    if transfer not in TRANSFERS:
        raise ValueError(f"{caller}: transfer must be one of {TRANSFERS}, not {transfer!r}")
    if transfer == "sm_fused" and schedule != "direct":
        raise ValueError(f"{caller}: transfer 'sm_fused' pushes a rank's own shard to every "
                         f"peer at once, which the direct schedule alone does (schedule "
                         f"{schedule!r})")


# --- stream operations on device addresses (a peer's through its IPC mapping) --------------

def _stream(stream):
    return _driver().CUstream(stream.cuda_stream)


def copy_async(stream, dst, src, nbytes):
    """``nbytes`` from ``src`` to ``dst`` on ``stream`` (``cuMemcpyAsync``: the copy
    engines)."""
    drv = _driver()
    _check(drv.cuMemcpyAsync(drv.CUdeviceptr(dst), drv.CUdeviceptr(src), nbytes,
                             _stream(stream)), "cuMemcpyAsync")


def write_value(stream, ptr, value):
    """Once ``stream``'s earlier work is done and visible, the int32 at ``ptr`` := value
    (``cuStreamWriteValue32``, which fences the stream's earlier writes)."""
    drv = _driver()
    _check(drv.cuStreamWriteValue32(
        _stream(stream), drv.CUdeviceptr(ptr), drv.cuuint32_t(value),
        int(drv.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT)),
        "cuStreamWriteValue32")


def wait_value(stream, ptr, value, flush=False):
    """``stream`` waits until the int32 at ``ptr`` is >= ``value`` (``cuStreamWaitValue32``;
    ``flush``: then flushes remote writes, where the device can)."""
    drv = _driver()
    flags = int(drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ) | (
        int(drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_FLUSH) if flush else 0)
    _check(drv.cuStreamWaitValue32(_stream(stream), drv.CUdeviceptr(ptr),
                                   drv.cuuint32_t(value), flags), "cuStreamWaitValue32")


def clear(stream, ptr, count):
    """Once ``stream``'s earlier work is done, ``count`` int32 from ``ptr`` := 0."""
    drv = _driver()
    _check(drv.cuMemsetD32Async(drv.CUdeviceptr(ptr), 0, count, _stream(stream)),
           "cuMemsetD32Async")


def export(tensor):
    """(IPC handle bytes, byte offset of ``tensor`` in its allocation) for a peer to open."""
    drv = _driver()
    ptr = tensor.data_ptr()
    base, _ = _check(drv.cuMemGetAddressRange(drv.CUdeviceptr(ptr)), "cuMemGetAddressRange")
    handle = _check(drv.cuIpcGetMemHandle(base), "cuIpcGetMemHandle (is the tensor from "
                    "torch's expandable segments? they cannot be shared by CUDA IPC)")
    return bytes(handle.reserved), ptr - int(base)


_mapped = {}     # IPC handle bytes -> [mapped base, number of users]: a handle opens once


class _Opened:
    """A peer's allocation mapped into this process; ``ptr`` is the exported tensor's address.
    Two tensors of one allocation (torch's allocator packs small ones together) share one
    mapping: a process may open a handle only once."""

    def __init__(self, exported):
        drv = _driver()
        self.raw, offset = exported
        if self.raw not in _mapped:
            handle = drv.CUipcMemHandle()
            handle.reserved = self.raw
            flags = drv.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
            _mapped[self.raw] = [_check(drv.cuIpcOpenMemHandle(handle, flags),
                                        "cuIpcOpenMemHandle"), 0]
        _mapped[self.raw][1] += 1
        self.ptr = int(_mapped[self.raw][0]) + offset

    def close(self):
        if self.raw is None:
            return
        entry = _mapped[self.raw]
        entry[1] -= 1
        if entry[1] == 0:
            del _mapped[self.raw]
            _check(_driver().cuIpcCloseMemHandle(entry[0]), "cuIpcCloseMemHandle")
        self.raw = None


GRAPHS = True      # replay a call seen before as a CUDA graph (False: enqueue every call)
MAX_GRAPHS = 8     # graphs kept per exchange (one per scratch set and set of operand addresses)
SETS = 2           # scratch sets, taken in turn by consecutive calls (REUSE_RULE; with one,
                   # the receiver would have to acknowledge each call)


class PeerExchange:
    """One rank's side of an exchange over peer memory: its two scratch sets (each ``slots``
    slots of ``slot_shape``, each slot copied in ``chunks`` pieces with an arrival flag per
    piece) and the scratch sets and flags of the ranks in ``to``, mapped here to be written
    into. Made collectively (every rank of ``group`` at once); a subclass's
    ``_enqueue(t, ...)`` enqueues one call in set ``t``, and :meth:`_call` runs it in set
    ``c % 2`` for the c-th call (:data:`gemm.collective.plan.REUSE_RULE`).

    Two sets need no acknowledgement from the receiver: the schedule's own waits order a copy
    into a set after the receiver's reads of it two calls before (the tests check this on
    the schedules). With one set, a call's first copy would wait for the receiver to end the
    call before, one flag hop after it ends. The price is twice the scratch. The
    argument needs each rank's calls in order on the GPU, so a call waits for the exchange's
    call before to end, on whatever stream each was made (an event; free on one stream).

    The flag values are the same in every call of a set, so a call on operands seen before
    replays a CUDA graph of the first such call in that set: one launch instead of D matmul
    launches and the stream operations, which at small shapes cost more time on the host
    than the GPU takes."""

    def __init__(self, group, rank, size, slots, slot_shape, dtype, device, to,
                 transfer="copy_engine", chunks=1):
        import torch
        import torch.distributed as dist
        self.rank, self.size, self.device = rank, size, device
        self.transfer = transfer
        self.blocks = PUSH_BLOCKS        # the push kernel's grid, as set when made
        self.kernel_pushes = 0          # push kernels enqueued (copies the engines made aside)
        self.calls = 0
        with torch.cuda.device(device):
            self.scratch = torch.empty((SETS, slots, *slot_shape), dtype=dtype, device=device)
            self.flags = torch.zeros((SETS, slots * chunks), dtype=torch.int32,
                                     device=device)
            torch.cuda.synchronize(device)           # the flags are set before a peer writes
            mine = (export(self.scratch), export(self.flags))
            everyone = [None] * size
            dist.all_gather_object(everyone, mine, group=group)
            self._opened = {r: (_Opened(everyone[r][0]), _Opened(everyone[r][1]))
                            for r in sorted(to)}
            self.comm = self._comm_stream()
            dist.barrier(group=group)                # every rank has mapped its peers
        # rank -> its (scratch, flags) mapped here
        self.dest = {r: (o[0].ptr, o[1].ptr) for r, o in self._opened.items()}
        self.slot_bytes = self.scratch[0, 0].numel() * self.scratch.element_size()
        self.chunks = chunks
        step = -(-self.slot_bytes // chunks // CHUNK_ALIGN) * CHUNK_ALIGN
        # piece j of a slot: bytes [lo, lo + n) (the last may be shorter or, rounded, empty)
        self.pieces = [(j * step, max(0, min(step, self.slot_bytes - j * step)))
                       for j in range(chunks)]
        self.graphs, self.seen, self.graph_error = {}, set(), None
        self.last_end = None                         # an event: the exchange's last call ended
        drv = _driver()
        dev = _check(drv.cuDeviceGet(device.index), "cuDeviceGet")
        self.flush = bool(_check(drv.cuDeviceGetAttribute(
            drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, dev),
            "cuDeviceGetAttribute"))

    def carveout(self):
        """The SMs this exchange's matmuls leave free (:func:`gemm.hopper.sm_carveout`): the
        push kernel's blocks where a kernel moves the blocks and :data:`PUSH_CARVEOUT` is
        set, else none."""
        return self.blocks if self.transfer != "copy_engine" and PUSH_CARVEOUT else 0

    def _comm_stream(self):
        """A new communication stream; where a kernel pushes, of :data:`PUSH_PRIORITY` (high:
        its blocks take SMs ahead of the matmuls' blocks waiting for them)."""
        import torch
        return torch.cuda.Stream(self.device, priority=0 if self.transfer == "copy_engine"
                                 else PUSH_PRIORITY)

    def _call(self, key, enqueue):
        """One call on the current stream, ``enqueue(t)`` enqueuing it in set t: enqueued
        the first time the operands ``key`` (their addresses, strides, shapes) are seen in
        this call's scratch set, a CUDA graph of that from the second on."""
        import torch
        t = self.calls % SETS
        self.calls += 1
        cur = torch.cuda.current_stream(self.device)
        if self.last_end is not None:                # after the call before, on any stream
            cur.wait_event(self.last_end)
        carve = self.carveout()
        key = (t, carve, *key)
        graph = self.graphs.get(key)
        if graph is None:
            with sm_carveout(carve):                 # the matmuls' grids, enqueued or captured
                if GRAPHS and self.graph_error is None and key in self.seen:
                    graph = self._capture(key, lambda: enqueue(t))
                if graph is None:
                    if len(self.seen) >= 1024:       # operands seen once: forget them
                        self.seen.clear()
                    self.seen.add(key)
                    enqueue(t)
        if graph is not None:
            graph.replay()
        self.last_end = torch.cuda.Event()
        self.last_end.record(cur)

    def _capture(self, key, enqueue):
        import torch
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                enqueue()
        except Exception as e:      # noqa: BLE001  (enqueue every call instead, and say why)
            self.graph_error = f"{type(e).__name__}: {e}"
            self.comm = self._comm_stream()
            logging.getLogger("gemm.collective").warning(
                "collective matmul: no CUDA graph (%s); every call is enqueued",
                self.graph_error)
            return None
        if len(self.graphs) >= MAX_GRAPHS:
            self.graphs.pop(next(iter(self.graphs)))
        self.graphs[key] = graph
        return graph

    def _start(self):
        """(the current stream, the comm stream waiting for its work so far)."""
        import torch
        cur = torch.cuda.current_stream(self.device)
        start = torch.cuda.Event()
        start.record(cur)
        self.comm.wait_event(start)
        return cur

    def flag(self, t, slot, piece=0):
        """The byte offset of the arrival flag of piece ``piece`` of slot ``slot`` of set t in
        a rank's flags (ours, or a peer's mapped here)."""
        return 4 * (t * self.flags.shape[1] + slot * self.chunks + piece)

    def _push(self, t, to, slot, src_ptr, piece=0):
        """On the comm stream: piece ``piece`` of our ``src_ptr`` into slot ``slot`` of set t of
        rank ``to``, then that piece's arrival flag set there."""
        self._push_all(t, [(to, slot)], src_ptr, piece)

    def _push_all(self, t, where, src_ptr, piece=0):
        """On the comm stream: piece ``piece`` (:attr:`pieces`) of our ``src_ptr`` into slot
        ``slot`` of set t of rank ``to`` for each ``(to, slot)`` of ``where``, then those
        pieces' arrival flags set there. The copy engines copy to one rank after another;
        the push kernel (``transfer`` "sm" or "sm_fused") writes every one of them in one
        launch."""
        lo, nbytes = self.pieces[piece]
        at = [t * self.scratch.shape[1] + slot for _, slot in where]
        dst = [self.dest[to][0] + a * self.slot_bytes + lo for (to, _), a in zip(where, at)]
        if nbytes and not (self.transfer != "copy_engine"
                           and self._kernel_push(src_ptr + lo, dst, nbytes)):
            for d in dst:
                copy_async(self.comm, d, src_ptr + lo, nbytes)
        for to, slot in where:
            write_value(self.comm, self.dest[to][1] + self.flag(t, slot, piece), 1)

    def _kernel_push(self, src_ptr, dst, nbytes):
        """The push kernel's launch on the comm stream, if it can make these copies
        (:func:`gemm.collective.push.fits`): whether it did."""
        import torch
        from . import push
        if not push.fits(src_ptr, dst, nbytes):
            return False
        self.kernel_pushes += 1
        # the kernel is launched in the current context: make it the comm stream's
        same = torch.cuda.current_device() == self.device.index
        with contextlib.nullcontext() if same else torch.cuda.device(self.device):
            push.push(self.comm.cuda_stream, src_ptr, dst, nbytes, self.blocks)
        return True

    def _finish(self, cur, t):
        """The call ends when its copies do; then set t's arrival flags are cleared
        (REUSE_RULE)."""
        import torch
        done = torch.cuda.Event()
        done.record(self.comm)
        cur.wait_event(done)
        clear(cur, self.flags[t].data_ptr(), self.flags.shape[1])

    def close(self):
        for pair in self._opened.values():
            for o in pair:
                o.close()


class PeerRing(PeerExchange):
    """The all-gather ring for one (m, k, dtype) and schedule on one device: D - 1 slots of
    m x k a set; it writes into the ranks it sends to
    (:func:`gemm.collective.plan.ring_plan`: rank - 1 in the ring schedule, every other
    rank in the direct one), by ``transfer`` (one of :data:`TRANSFERS`), each copy in
    ``chunks`` pieces (:func:`ring_chunks`; a forwarded piece waits for its own arrival
    alone, a matmul for every piece of its shard)."""

    def __init__(self, group, rank, size, shape, dtype, device, schedule="ring",
                 transfer="copy_engine", chunks=1):
        self.plan = ring_plan(size, schedule)[rank]
        super().__init__(group, rank, size, size - 1, shape, dtype, device,
                         {s.send_to for s in self.plan} - {None}, transfer, chunks)

    def run(self, a, b, out, m, multiply, tag=None):
        """``out = AllGather(A) @ b`` on the current stream (``a``: this rank's row-major
        shard, ``multiply(src, b, out_rows)`` the per-shard product, ``tag`` what else
        tells one ``multiply`` from another: a graph replays only calls of the same)."""
        key = (a.data_ptr(), b.data_ptr(), out.data_ptr(), tuple(b.stride()),
               tuple(out.stride()), tuple(out.shape), out.dtype, tag)
        self._call(key, lambda t: self._enqueue(t, a, b, out, m, multiply))

    def _enqueue(self, t, a, b, out, m, multiply):
        """One call in scratch set t."""
        cur = self._start()                          # a is ready; out is ours to write
        src = [a] + list(self.scratch[t])
        flags = self.flags.data_ptr()                # our arrival flags
        pieces = range(self.chunks)
        if self.transfer == "sm_fused":             # the direct schedule: all at once
            self._push_all(t, [(s.send_to, s.dest_slot) for s in self.plan
                               if s.send_to is not None], a.data_ptr())
        for s in self.plan:                          # the copies, on the comm stream
            if s.send_to is None or self.transfer == "sm_fused":
                continue
            for j in pieces:
                if s.send_from is not None:          # the piece to forward has arrived
                    wait_value(self.comm, flags + self.flag(t, s.send_from, j), 1,
                               self.flush)
                self._push(t, s.send_to, s.dest_slot,
                           src[0 if s.send_from is None else s.send_from + 1].data_ptr(), j)
        for s in self.plan:                          # the matmuls, on the caller's stream
            if s.source is not None:
                for j in pieces:
                    wait_value(cur, flags + self.flag(t, s.source, j), 1, self.flush)
            multiply(src[0 if s.source is None else s.source + 1], b,
                     out[s.compute * m:(s.compute + 1) * m])
        self._finish(cur, t)
