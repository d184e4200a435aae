"""TMA tensor maps in device memory, for eager calls and for calls captured in CUDA graphs.

A Hopper kernel reads each operand's tensor map (128 bytes from cuTensorMapEncodeTiled)
from global memory. A map lives in a slot: 128 bytes of device memory with a twin of
pinned host memory that holds its words. Slots come in blocks and are never given back,
because a graph captured with a map reads its slot at every replay.

- Outside a capture, a new map is written with ``cuMemcpyHtoD`` from its pinned twin: done
  when the call returns, so a kernel on any stream may read it.
- Inside a capture, ``cuMemAlloc`` and synchronous copies are refused (they would
  invalidate the capture). A new map is written there with ``cuMemcpyHtoDAsync`` on the
  capturing stream: a copy node of the graph, run before the kernel at each replay. The map
  stays *pending* until a use outside a capture writes it too, so that an eager call never
  reads a slot that only a graph writes.
- A block is added outside a capture when fewer than a quarter of a block's slots are
  free. A capture that finds none free raises RuntimeError.

:class:`MapSlots` takes the driver's few calls as an object, so its rules are tested
without a GPU; :func:`device_map` is the kernels' entry, one MapSlots per CUDA context.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Dict, Tuple

__all__ = ["SLOT_BYTES", "MapSlots", "device_map"]

SLOT_BYTES = 128        # a CUtensorMap, 64-byte aligned (every slot is 128-byte aligned)
BLOCK_SLOTS = 1024


class MapSlots:
    """The tensor maps of one CUDA context by key, in slots of ``block`` maps.

    ``driver`` has ``alloc(nbytes) -> (device address, host address)`` (device memory and a
    pinned twin), ``put(host, words)`` (the words into host memory), ``write(device, host,
    nbytes)`` (synchronous), ``write_async(device, host, nbytes, stream)`` and
    ``capturing(stream) -> bool``."""

    def __init__(self, driver: Any, block: int = BLOCK_SLOTS):
        self.driver, self.block = driver, block
        self.free = []                          # (device, host) addresses of unused slots
        self.maps: Dict[Any, list] = {}         # key -> [device, host, pending]

    def address(self, key: Any, words: Callable[[], Any], stream: int) -> Tuple[int, bool]:
        """``(device address, ready)`` of the map under ``key``, made by ``words()`` when
        new, for a launch on ``stream``. ``ready`` False: the map is written for this launch
        only (a copy node of the capture on ``stream``); ask again for a later launch."""
        got = self.maps.get(key)
        if got is not None and not got[2]:
            return got[0], True                 # written: no question to the driver
        capturing = self.driver.capturing(stream)
        if got is None:
            if len(self.free) < self.block // 4 and not capturing:
                self._grow()
            if not self.free:
                raise RuntimeError(
                    "gemm: a Hopper call captured in a CUDA graph needs a new TMA tensor map "
                    f"and all {len(self.maps)} slots are taken; slots are added "
                    "outside a capture only: run such calls once before capturing")
            device, host = self.free.pop()
            self.driver.put(host, words())
            got = self.maps[key] = [device, host, True]
        if got[2]:
            if capturing:
                self.driver.write_async(got[0], got[1], SLOT_BYTES, stream)
                return got[0], False
            self.driver.write(got[0], got[1], SLOT_BYTES)
            got[2] = False
        return got[0], True

    def _grow(self):
        device, host = self.driver.alloc(SLOT_BYTES * self.block)
        self.free[:0] = [(device + SLOT_BYTES * i, host + SLOT_BYTES * i)
                         for i in reversed(range(self.block))]


class _Driver:
    """MapSlots' calls through ``cuda.bindings``' driver API."""

    def __init__(self):
        from .binary import _check, _driver, stream_capturing
        self.drv, self.check, self.capturing = _driver(), _check, stream_capturing

    def alloc(self, nbytes):
        device = self.check(self.drv.cuMemAlloc(nbytes), "cuMemAlloc(tensor maps)")
        host = self.check(self.drv.cuMemAllocHost(nbytes), "cuMemAllocHost(tensor maps)")
        return int(device), int(host)

    def put(self, host, words):
        ctypes.memmove(host, words.ctypes.data, SLOT_BYTES)

    def write(self, device, host, nbytes):
        self.check(self.drv.cuMemcpyHtoD(device, host, nbytes), "cuMemcpyHtoD(tensor map)")

    def write_async(self, device, host, nbytes, stream):
        self.check(self.drv.cuMemcpyHtoDAsync(device, host, nbytes, stream),
                   "cuMemcpyHtoDAsync(tensor map)")


_slots: Dict[int, MapSlots] = {}     # CUDA context -> its maps


def device_map(copy: Any, address: int, dims: tuple, strides: tuple, value_type: str,
               stream: int) -> Tuple[int, bool]:
    """``(device address, ready)`` of the tensor map of ``copy`` (a gemm.tma copy) over the
    global matrix at ``address`` with ``dims`` and byte ``strides``, for a launch on
    ``stream`` of the current context (see :meth:`MapSlots.address`)."""
    from dataclasses import replace

    from .binary import _current_context
    from .tma import tensor_map
    ctx = int(_current_context())
    slots = _slots.get(ctx)
    if slots is None:
        slots = _slots[ctx] = MapSlots(_Driver())
    key = (address, dims, strides, copy.box, copy.swizzle, value_type)
    return slots.address(key, lambda: tensor_map(address, replace(
        copy, dims=dims, strides=strides), value_type), stream)
