"""Pure-Python twins of the Hopper instructions of ``gemm.arch.sm90``, for numba's CUDA
simulator (issue 12), first part: the mbarriers, the fences, and warp specialization's
``setmaxnreg``, ``elect_one`` and ``shared_offset_of``. The TMA loads and wgmma follow.

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
  that is, while the current phase's parity differs from ``parity``. A wait that sees no
  change for ``WAIT_LIMIT_S`` seconds raises RuntimeError (a hang on the GPU).

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

import threading
import time

import numpy as np

__all__ = ["mbarrier_init", "fence_mbarrier_init", "mbarrier_arrive",
           "mbarrier_arrive_expect_tx", "mbarrier_complete_tx", "mbarrier_wait", "phase_of",
           "wgmma_fence", "wgmma_commit", "wgmma_wait", "fence_proxy_async", "setmaxnreg_inc",
           "setmaxnreg_dec", "elect_one", "shared_offset_of", "WAIT_LIMIT_S"]

WAIT_LIMIT_S = 60.0
_WARP = 32
_lock = threading.Condition()
_bars = {}          # address of the mbarrier's 8 bytes -> [phase, count, arrivals due, bytes due]


def _address(bars, idx, op):
    if not isinstance(bars, np.ndarray) or bars.dtype.itemsize != 8 or bars.ndim != 1:
        raise TypeError(f"{op}: bars must be a 1-D array of 8-byte elements (a shared uint64 "
                        f"array), got {bars!r}")
    i = int(idx)
    if not 0 <= i < bars.shape[0]:
        raise IndexError(f"{op}: mbarrier {i} is outside bars (of {bars.shape[0]})")
    return bars.__array_interface__["data"][0] + i * bars.strides[0]


def _state(bars, idx, op):
    state = _bars.get(_address(bars, idx, op))
    if state is None:
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
        _bars[_address(bars, idx, "mbarrier_init")] = [0, n, n, 0]


def mbarrier_arrive(bars, idx):
    """One arrival on ``bars[idx]``."""
    with _lock:
        state = _state(bars, idx, "mbarrier_arrive")
        if state[2] == 0:
            raise RuntimeError("mbarrier_arrive: more arrivals than the phase's count")
        state[2] -= 1
        _settle(state)


def mbarrier_arrive_expect_tx(bars, idx, nbytes):
    """``nbytes`` more bytes due on ``bars[idx]``, then one arrival."""
    with _lock:
        state = _state(bars, idx, "mbarrier_arrive_expect_tx")
        state[3] += int(nbytes)
        if state[2] == 0:
            raise RuntimeError("mbarrier_arrive_expect_tx: more arrivals than the phase's count")
        state[2] -= 1
        _settle(state)


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
    """No-op apart from checking ``n`` (the twins' wgmma completes at once)."""
    if int(n) != n or not 0 <= n <= 7:
        raise ValueError(f"wgmma_wait: n must be an integer in 0..7, got {n}")


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
    thread = threading.current_thread()
    if not hasattr(thread, "thread_id"):
        raise RuntimeError("elect_one: call it from a kernel running in numba's CUDA "
                           "simulator (NUMBA_ENABLE_CUDASIM=1)")
    return thread.thread_id % _WARP == 0


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
