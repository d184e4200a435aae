"""gemm.hopper.tensor_maps.MapSlots' rules, on a recording stand-in for the driver: maps written
by an asynchronous copy on the launching stream outside a CUDA graph capture (no host wait;
another stream waits on the copy's event until the event is seen complete), as a copy on
the capturing stream inside one (pending until a use outside writes them), slots never given
back, blocks added outside a capture only; and gemm.splitk.workspace, which must not allocate
inside a capture."""

import numpy as np
import pytest

from gemm.hopper.tensor_maps import SLOT_BYTES, MapSlots


class FakeDriver:
    """Device and pinned memory as dicts, a stream's queued copies as lists (run by
    ``finish``); records every call."""

    def __init__(self):
        self.calls, self.capture, self.base = [], set(), 0x10000
        self.host, self.device, self.queued, self.complete = {}, {}, {}, set()
        self.made = 0

    def alloc(self, nbytes):
        self.calls.append(("alloc", nbytes))
        self.base += 0x100000
        return self.base, self.base + 0x80000

    def put(self, host, words):
        self.host[host] = bytes(words)

    def write_async(self, device, host, nbytes, stream):
        self.calls.append(("write_async", device, stream))
        if stream not in self.capture:
            self.queued.setdefault(stream, []).append((device, self.host[host]))

    def capturing(self, stream):
        return stream in self.capture

    def event(self):
        self.made += 1
        return f"e{self.made}"

    def record(self, event, stream):
        self.calls.append(("record", event, stream))
        self.complete.discard(event)
        self.queued.setdefault(stream, []).append(("event", event))

    def done(self, event):
        self.calls.append(("query", event))
        return event in self.complete

    def wait(self, stream, event):
        self.calls.append(("wait", stream, event))

    def finish(self, stream):
        """The stream's queued work runs."""
        for device, value in self.queued.pop(stream, []):
            if device == "event":
                self.complete.add(value)
            else:
                self.device[device] = value


def words(n):
    return lambda: np.full(SLOT_BYTES // 8, n, np.uint64)


def test_eager_maps_are_written_on_the_stream_without_waiting():
    drv = FakeDriver()
    slots = MapSlots(drv, block=8)
    a, ready = slots.address("a", words(1), stream=5)
    assert not ready and a not in drv.device                    # queued, not waited for
    assert drv.calls[-2:] == [("write_async", a, 5), ("record", "e1", 5)]
    assert slots.address("a", words(9), stream=5) == (a, False)  # same stream: ordered
    assert drv.calls[-2:] == [("query", "e1"), ("wait", 5, "e1")]
    assert slots.address("a", words(9), stream=6) == (a, False)  # another: waits on it
    assert drv.calls[-1] == ("wait", 6, "e1")
    drv.finish(5)
    assert drv.device[a] == bytes(words(1)())
    assert slots.address("a", words(9), stream=6) == (a, True)   # seen done: kept
    calls = len(drv.calls)
    assert slots.address("a", words(9), stream=7) == (a, True)   # no driver call now
    assert len(drv.calls) == calls
    b, _ = slots.address("b", words(2), stream=5)               # the event is reused
    assert b != a and b % SLOT_BYTES == 0 and a % SLOT_BYTES == 0
    assert drv.calls[-1] == ("record", "e1", 5) and drv.made == 1
    assert [c[0] for c in drv.calls].count("alloc") == 1


def test_a_map_made_in_a_capture_is_a_copy_node_until_used_outside():
    drv = FakeDriver()
    slots = MapSlots(drv, block=8)
    slots.address("warm", words(0), stream=1)           # the first block, outside
    drv.capture.add(7)
    a, ready = slots.address("new", words(3), stream=7)
    assert not ready and drv.calls[-1] == ("write_async", a, 7) and a not in drv.device
    assert slots.address("new", words(3), stream=7) == (a, False)   # another copy node
    assert drv.calls[-1] == ("write_async", a, 7)
    assert slots.address("new", words(3), stream=1) == (a, False)   # eager: written now
    assert drv.calls[-2:] == [("write_async", a, 1), ("record", "e2", 1)]
    assert slots.address("new", words(3), stream=7) == (a, False)   # not seen done: a node
    assert drv.calls[-1] == ("write_async", a, 7)
    drv.finish(1)
    assert drv.device[a] == bytes(words(3)())
    assert slots.address("new", words(3), stream=1) == (a, True)    # seen done (eagerly)
    assert drv.calls[-1] == ("query", "e2")
    assert slots.address("new", words(3), stream=7) == (a, True)    # written: no copy node
    assert drv.calls[-1] == ("query", "e2")


def test_a_map_written_eagerly_and_complete_is_no_copy_node_in_a_capture():
    drv = FakeDriver()
    slots = MapSlots(drv, block=8)
    a, _ = slots.address("m", words(4), stream=1)       # written eagerly, not yet seen done
    drv.capture.add(7)
    assert slots.address("m", words(4), stream=7) == (a, False)     # running: a copy node
    assert drv.calls[-2:] == [("query", "e1"), ("write_async", a, 7)]
    drv.finish(1)
    assert slots.address("m", words(4), stream=7) == (a, True)      # complete: read as is
    assert drv.calls[-1] == ("query", "e1")
    assert slots.maps["m"][2] == "written"


def test_blocks_are_added_outside_a_capture_only():
    drv = FakeDriver()
    slots = MapSlots(drv, block=8)
    for i in range(7):                                  # a block of 8, 1 slot free after
        slots.address(i, words(i), stream=1)
    assert [c for c in drv.calls if c[0] == "alloc"] == [("alloc", 8 * SLOT_BYTES)]
    slots.address(7, words(7), stream=1)                # < 2 free: a second block first
    assert len([c for c in drv.calls if c[0] == "alloc"]) == 2
    drv.capture.add(2)
    for i in range(8, 16):                              # the 8 free slots
        slots.address(i, words(i), stream=2)
    assert len([c for c in drv.calls if c[0] == "alloc"]) == 2      # none in the capture
    with pytest.raises(RuntimeError, match="before capturing"):
        slots.address(16, words(16), stream=2)
    addresses = [slots.maps[i][0] for i in range(16)]
    assert len(set(addresses)) == 16                    # no slot given twice


def test_split_k_workspace_does_not_grow_inside_a_capture(monkeypatch):
    """gemm.splitk.workspace (CuPy and numba calls) on a stand-in driver: it allocates
    outside a capture and keeps the memory per stream; inside a capture, where it would
    have to allocate, RuntimeError says to run the call before capturing."""
    from gemm import splitk
    from gemm.call import binary

    class Driver:
        def __init__(self):
            self.capturing, self.allocated = set(), []

        def cuStreamIsCapturing(self, stream):
            return 0, int(stream in self.capturing)

        def cuMemAlloc(self, size):
            self.allocated.append(size)
            return 0, 0x100000 * len(self.allocated)

        def cuStreamSynchronize(self, stream):
            return (0,)

        def cuMemFree(self, ptr):
            return (0,)

    drv = Driver()
    monkeypatch.setattr(binary, "_driver", lambda: drv)
    monkeypatch.setattr(binary, "_current_context", lambda: 1)
    monkeypatch.setattr(splitk, "_spaces", {})
    ptr, owner = splitk.workspace(4096, 7, 0)
    assert owner is None and drv.allocated == [1 << 20]
    drv.capturing.add(7)
    assert splitk.workspace(2048, 7, 0) == (ptr, None)      # fits: no allocation
    with pytest.raises(RuntimeError, match="before capturing"):
        splitk.workspace(2 << 20, 7, 0)
    assert drv.allocated == [1 << 20]
