"""TMA tensor maps in device memory, for eager calls and for calls captured in CUDA graphs.

A Hopper kernel reads each operand's tensor map (128 bytes from cuTensorMapEncodeTiled)
from global memory. A map lives in a slot: 128 bytes of device memory with a twin of
pinned host memory that holds its words. Slots come in blocks and are never given back,
because a graph captured with a map reads its slot at every replay (and the pinned twin,
which a copy reads, never changes once written).

- Outside a capture, a new map is written with ``cuMemcpyHtoDAsync`` on the launching
  stream, and an event recorded after it: the host does not wait. A later launch on the
  same stream is ordered after the copy; one on another stream waits for the event
  (``cuStreamWaitEvent``), until the event is seen complete, from when every stream may read
  the map with no further call (the event goes back to a pool).
- Inside a capture, ``cuMemAlloc`` and synchronous calls are refused (they would
  invalidate the capture). A new map is written there with ``cuMemcpyHtoDAsync`` on the
  capturing stream: a copy node of the graph, run before the kernel at each replay. The map
  stays *pending* until a use outside a capture writes it too, so that an eager call never
  reads a slot that only a graph writes. A map written outside a capture whose event is
  complete is read as it is, in a capture too: no copy node.
- A block is added outside a capture when fewer than a quarter of a block's slots are
  free. A capture that finds none free raises RuntimeError.

:class:`MapSlots` takes the driver's few calls as an object, so its rules are tested
without a GPU; :func:`device_map` is the kernels' entry, one MapSlots per CUDA context.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import replace
from typing import Any, Callable, Dict, Tuple

from ..call.binary import _current_context
from ..call.launch import current_context
from ..tma import tensor_map

__all__ = ["SLOT_BYTES", "MapSlots", "device_map"]

SLOT_BYTES = 128        # a CUtensorMap, 64-byte aligned (every slot is 128-byte aligned)
BLOCK_SLOTS = 1024
_PENDING, _WRITTEN = "pending", "written"      # a map's states besides (stream, event)


class MapSlots:
    """The tensor maps of one CUDA context by key, in slots of ``block`` maps.

    ``driver`` has ``alloc(nbytes) -> (device address, host address)`` (device memory and a
    pinned twin), ``put(host, words)`` (the words into host memory), ``write_async(device,
    host, nbytes, stream)``, ``capturing(stream) -> bool``, ``event() -> a new event``,
    ``record(event, stream)``, ``done(event) -> bool`` and ``wait(stream, event)``."""

    def __init__(self, driver: Any, block: int = BLOCK_SLOTS):
        self.driver, self.block = driver, block
        self.free = []                          # (device, host) addresses of unused slots
        self.events = []                        # events no map waits on
        self.maps: Dict[Any, list] = {}         # key -> [device, host, state]
        self.lock = threading.Lock()

    def address(self, key: Any, words: Callable[[], Any], stream: int) -> Tuple[int, bool]:
        """``(device address, ready)`` of the map under ``key``, made by ``words()`` when
        new, for a launch on ``stream``, which it is written for (or ordered after). ``ready``
        False: ask again for a later launch (the write may not be complete, or is a copy
        node of the capture on ``stream``); True: complete, any stream may read it."""
        got = self.maps.get(key)
        if got is not None and got[2] is _WRITTEN:
            return got[0], True                 # no question to the driver
        with self.lock:
            return self._address(key, words, stream)

    def _address(self, key, words, stream):
        drv = self.driver
        capturing = drv.capturing(stream)
        got = self.maps.get(key)
        if got is None:
            if len(self.free) < self.block // 4 and not capturing:
                self._grow()
            if not self.free:
                raise RuntimeError(
                    "gemm: a Hopper call captured in a CUDA graph needs a new TMA tensor map "
                    f"and all {len(self.maps)} slots are taken; slots are added "
                    "outside a capture only: run such calls once before capturing")
            device, host = self.free.pop()
            drv.put(host, words())
            got = self.maps[key] = [device, host, _PENDING]
        device, host, state = got
        if state is _WRITTEN:
            return device, True
        if state is not _PENDING and drv.done(state[1]):    # written eagerly, complete now
            got[2] = _WRITTEN
            self.events.append(state[1])
            return device, True
        if capturing or state is _PENDING:
            drv.write_async(device, host, SLOT_BYTES, stream)
            if capturing:                       # a copy node; eager calls write it again
                return device, False
            event = self.events.pop() if self.events else drv.event()
            drv.record(event, stream)
            got[2] = (stream, event)
            return device, False
        drv.wait(stream, state[1])              # (a no-op on the stream that wrote it)
        return device, False

    def _grow(self):
        device, host = self.driver.alloc(SLOT_BYTES * self.block)
        self.free[:0] = [(device + SLOT_BYTES * i, host + SLOT_BYTES * i)
                         for i in reversed(range(self.block))]


class _Driver:
    """MapSlots' calls through ``cuda.bindings``' driver API."""

    def __init__(self):
        from ..call.binary import _check, _driver, stream_capturing   # as made: tests swap _driver
        self.drv, self.check, self.capturing = _driver(), _check, stream_capturing

    def alloc(self, nbytes):
        device = self.check(self.drv.cuMemAlloc(nbytes), "cuMemAlloc(tensor maps)")
        host = self.check(self.drv.cuMemAllocHost(nbytes), "cuMemAllocHost(tensor maps)")
        return int(device), int(host)

    def put(self, host, words):
        ctypes.memmove(host, words.ctypes.data, SLOT_BYTES)

    def write_async(self, device, host, nbytes, stream):
        self.check(self.drv.cuMemcpyHtoDAsync(device, host, nbytes, stream),
                   "cuMemcpyHtoDAsync(tensor map)")

    def event(self):
        flags = self.drv.CUevent_flags.CU_EVENT_DISABLE_TIMING
        return self.check(self.drv.cuEventCreate(flags), "cuEventCreate(tensor map)")

    def record(self, event, stream):
        self.check(self.drv.cuEventRecord(event, stream), "cuEventRecord(tensor map)")

    def done(self, event):
        """Whether ``event`` (recorded outside any capture) is complete; asked in this
        thread's relaxed capture mode, so that a capture under way allows the query."""
        drv = self.drv
        relaxed = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        mode = self.check(drv.cuThreadExchangeStreamCaptureMode(relaxed),
                          "cuThreadExchangeStreamCaptureMode")
        try:
            err = drv.cuEventQuery(event)[0]
        finally:
            self.check(drv.cuThreadExchangeStreamCaptureMode(mode),
                       "cuThreadExchangeStreamCaptureMode")
        if err == drv.CUresult.CUDA_ERROR_NOT_READY:
            return False
        self.check((err,), "cuEventQuery(tensor map)")
        return True

    def wait(self, stream, event):
        self.check(self.drv.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent(tensor map)")


_slots: Dict[int, MapSlots] = {}     # CUDA context -> its maps


def device_map(copy: Any, address: int, dims: tuple, strides: tuple, value_type: str,
               stream: int) -> Tuple[int, bool]:
    """``(device address, ready)`` of the tensor map of ``copy`` (a gemm.tma copy) over the
    global matrix at ``address`` with ``dims`` and byte ``strides``, for a launch on
    ``stream`` of the current context (see :meth:`MapSlots.address`)."""
    ctx = current_context() or int(_current_context())      # none yet: device 0's primary
    slots = _slots.get(ctx)
    if slots is None:
        slots = _slots[ctx] = MapSlots(_Driver())
    key = (address, dims, strides, copy.box, copy.swizzle, value_type)
    return slots.address(key, lambda: tensor_map(address, replace(
        copy, dims=dims, strides=strides), value_type), stream)
