"""The ring on peer memory: each rank's scratch slots and flags are shared with the ranks that
send to it (its neighbour in the ring schedule, every rank in the direct one) by CUDA IPC
(``cuIpcGetMemHandle`` / ``cuIpcOpenMemHandle`` through ``cuda.bindings``, the driver
bindings numba-cuda installs), the shards are pushed by the copy engines (``cuMemcpyAsync``
over NVLink, or within the GPU when ranks share one), and each copy is followed by a remote
flag write (``cuStreamWriteValue32``, which fences the stream's earlier writes) that the
receiver's streams wait for (``cuStreamWaitValue32``, flushing remote writes where the
device can). Nothing runs on the host between steps: the whole call is enqueued on two
streams, the caller's current stream (the matmuls) and a communication stream (the copies),
so the copy of step i+1 overlaps the matmul of step i.

NVLink multicast is never used (no ``cuMulticastCreate``).
"""

import logging

from ..call.binary import _check, _driver
from .plan import ring_plan

# torch is imported inside the methods that use it: importing this module needs no torch.

__all__ = ["PeerRing", "copy_async", "write_value", "wait_value", "clear"]


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
MAX_GRAPHS = 8     # graphs kept per ring (one per scratch set and set of operand addresses)
SETS = 2           # scratch sets, taken in turn by consecutive calls (REUSE_RULE; with one,
                   # the receiver would have to acknowledge each call)


class PeerRing:
    """One rank's side of the ring for one (m, k, dtype) and schedule on one device: its two
    scratch sets (each D - 1 slots of m x k, with an arrival flag per slot), and the peer
    buffers it writes into: the scratch sets and flags of the ranks it sends to
    (:func:`gemm.collective.plan.ring_plan`: rank - 1 in the ring schedule, every other
    rank in the direct one). Made collectively (every rank of ``group`` at once);
    :meth:`run` enqueues one call, in set ``c % 2`` for its c-th call
    (:data:`gemm.collective.plan.REUSE_RULE`).

    Two sets need no acknowledgement from the receiver: the schedule's own waits order a copy
    into a set after the receiver's reads of it two calls before (the tests check this on
    the schedule). With one set, a call's first copy would wait for the receiver to end the
    call before, one flag hop after it ends. The price is twice the scratch. The
    argument needs each rank's calls in order on the GPU, so a call waits for the ring's
    call before to end, on whatever stream each was made (an event; free on one stream).

    The flag values are the same in every call of a set, so a call on operands seen before
    replays a CUDA graph of the first such call in that set: one launch instead of D matmul
    launches and the stream operations, which at small shapes cost more time on the host
    than the GPU takes."""

    def __init__(self, group, rank, size, shape, dtype, device, schedule="ring"):
        import torch
        import torch.distributed as dist
        self.rank, self.size, self.device = rank, size, device
        self.plan = ring_plan(size, schedule)[rank]
        self.calls = 0
        m, k = shape
        with torch.cuda.device(device):
            self.scratch = torch.empty((SETS, size - 1, m, k), dtype=dtype, device=device)
            self.flags = torch.zeros((SETS, size - 1), dtype=torch.int32, device=device)
            torch.cuda.synchronize(device)           # the flags are set before a peer writes
            mine = (export(self.scratch), export(self.flags))
            everyone = [None] * size
            dist.all_gather_object(everyone, mine, group=group)
            self._opened = {to: (_Opened(everyone[to][0]), _Opened(everyone[to][1]))
                            for to in sorted({s.send_to for s in self.plan} - {None})}
            self.comm = torch.cuda.Stream(device)
            dist.barrier(group=group)                # every rank has mapped its peers
        # rank -> its (scratch, flags) mapped here
        self.dest = {to: (o[0].ptr, o[1].ptr) for to, o in self._opened.items()}
        self.slot_bytes = m * k * self.scratch.element_size()
        self.graphs, self.seen, self.graph_error = {}, set(), None
        self.last_end = None                         # an event: the ring's last call ended
        drv = _driver()
        dev = _check(drv.cuDeviceGet(device.index), "cuDeviceGet")
        self.flush = bool(_check(drv.cuDeviceGetAttribute(
            drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, dev),
            "cuDeviceGetAttribute"))

    # --- one call ------------------------------------------------------------------------
    def run(self, a, b, out, m, multiply):
        """``out = AllGather(A) @ b`` on the current stream (``a``: this rank's row-major
        shard, ``multiply(src, b, out_rows)`` the per-shard product): enqueued the first
        time these operands are seen in this call's scratch set, a CUDA graph of that from
        the second on."""
        import torch
        t = self.calls % SETS
        self.calls += 1
        cur = torch.cuda.current_stream(self.device)
        if self.last_end is not None:                # after the call before, on any stream
            cur.wait_event(self.last_end)
        key = (t, a.data_ptr(), b.data_ptr(), out.data_ptr(), tuple(b.stride()),
               tuple(out.stride()), tuple(out.shape), out.dtype)
        graph = self.graphs.get(key)
        if graph is None and GRAPHS and self.graph_error is None and key in self.seen:
            graph = self._capture(key, t, a, b, out, m, multiply)
        if graph is None:
            if len(self.seen) >= 1024:               # operands seen once: forget them
                self.seen.clear()
            self.seen.add(key)
            self._enqueue(t, a, b, out, m, multiply)
        else:
            graph.replay()
        self.last_end = torch.cuda.Event()
        self.last_end.record(cur)

    def _capture(self, key, t, a, b, out, m, multiply):
        import torch
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self._enqueue(t, a, b, out, m, multiply)
        except Exception as e:      # noqa: BLE001  (enqueue every call instead, and say why)
            self.graph_error = f"{type(e).__name__}: {e}"
            self.comm = torch.cuda.Stream(self.device)
            logging.getLogger("gemm.collective").warning(
                "all_gather_matmul: no CUDA graph (%s); every call is enqueued",
                self.graph_error)
            return None
        if len(self.graphs) >= MAX_GRAPHS:
            self.graphs.pop(next(iter(self.graphs)))
        self.graphs[key] = graph
        return graph

    def _enqueue(self, t, a, b, out, m, multiply):
        """One call in scratch set t."""
        import torch
        cur = torch.cuda.current_stream(self.device)
        start = torch.cuda.Event()
        start.record(cur)
        self.comm.wait_event(start)                  # a is ready; out is ours to write
        src = [a] + list(self.scratch[t])
        flag = self.flags[t].data_ptr()              # our arrival flags in set t
        for s in self.plan:                          # the copies, on the comm stream
            if s.send_to is None:
                continue
            if s.send_from is not None:              # the shard to forward has arrived
                wait_value(self.comm, flag + 4 * s.send_from, 1, self.flush)
            scratch, flags = self.dest[s.send_to]
            slot = t * (self.size - 1) + s.dest_slot     # set t's slot there
            copy_async(self.comm, scratch + slot * self.slot_bytes,
                       src[0 if s.send_from is None else s.send_from + 1].data_ptr(),
                       self.slot_bytes)
            write_value(self.comm, flags + 4 * slot, 1)
        for s in self.plan:                          # the matmuls, on the caller's stream
            if s.source is not None:
                wait_value(cur, flag + 4 * s.source, 1, self.flush)
            multiply(src[0 if s.source is None else s.source + 1], b,
                     out[s.compute * m:(s.compute + 1) * m])
        done = torch.cuda.Event()
        done.record(self.comm)
        cur.wait_event(done)                         # the call ends when its copies do
        clear(cur, flag, self.size - 1)              # REUSE_RULE: the set's flags cleared

    def close(self):
        for pair in self._opened.values():
            for o in pair:
                o.close()
