"""numba's CUDA simulator, its block of threads driven by events, and device functions
called without a swap per call: installed by ``gemm.arch`` when it picks the twins.

The simulator runs a Python thread per CUDA thread, and its ``BlockManager.run`` polls them
all in a loop, without pause, to see which wait at ``syncthreads`` (all of them: it releases
them) and which have ended. That loop holds the GIL as often as any thread of the kernel:
with 256 threads mostly waiting on mbarriers, a Hopper kernel's simulation spent about half
its time there. Here each thread puts itself on a list and signals an event as it waits at
``syncthreads`` and as it ends, and the loop looks at those threads alone, then (or every
``_POLL_S`` at most). The loop keeps the stock one's locals (``threads``, ``blockedthreads``),
which :func:`gemm.arch.sim._manager_sets` reads.

A static ``cuda.shared.array`` is looked up by the caller's source line and made when
absent, without a lock: two threads of a block could get different arrays (a Hopper case
failed so, a consumer finding its mbarriers uninitialised). Here the lookup is atomic, and
the line is read from the caller's frame, not from a whole extracted stack.

A device function's call in the simulator puts the kernel's fake ``cuda`` module into the
function's module's globals and takes it out again, under two locks, through a context
manager: a Hopper kernel's simulation makes half a million such calls. Here a module's
globals are swapped at its first device call in a launch and restored when the launch ends
(the simulator runs one launch at a time).
"""

import sys
import threading

import numpy as np

__all__ = ["install"]

_POLL_S = 0.01      # the longest the loop waits for a signal before it looks anyway


def install():
    """Replace ``BlockManager.run`` and ``BlockThread``'s ``run`` and ``syncthreads`` of
    numba's simulator with the signalling ones, ``FakeCUDAKernel.__call__`` with one that
    swaps a device function's module once a launch, and ``FakeCUDAShared.array`` with an
    atomic lookup (once)."""
    from numba.cuda.simulator import kernel, kernelapi
    if getattr(kernel.BlockManager.run, "signalled", False):
        return
    _install_device_calls(kernel)
    _install_shared_arrays(kernelapi.FakeCUDAShared)
    thread_run = kernel.BlockThread.run

    def run_thread(self):
        try:
            thread_run(self)
        finally:
            self._manager.ended.append(self)    # (list appends are atomic)
            self._manager.changed.set()

    def syncthreads(self):
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        self.syncthreads_blocked = True
        self._manager.arrived.append(self)
        self._manager.changed.set()
        self.syncthreads_event.wait()
        self.syncthreads_event.clear()
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def run_block(self, grid_point, *args):
        self.changed = threading.Event()
        self.ended, self.arrived = [], []       # threads, as they end / wait at syncthreads
        threads, blockedthreads = set(), set()
        for block_point in np.ndindex(*self._block_dim):
            t = kernel.BlockThread(lambda: self._f(*args), self, grid_point, block_point,
                                   self._debug)
            t.start()
            threads.add(t)
        livethreads = set(threads)
        while livethreads:
            self.changed.wait(_POLL_S)
            self.changed.clear()                # before the look: a later signal counts
            while self.arrived:
                blockedthreads.add(self.arrived.pop())
            while self.ended:
                t = self.ended.pop()
                if t.exception:
                    for other in threads:       # abort the others, without joining them
                        other.abort = True
                        other.syncthreads_blocked = False
                        other.syncthreads_event.set()
                    raise t.exception[0].with_traceback(t.exception[1])
                livethreads.discard(t)
                blockedthreads.discard(t)
            if livethreads and livethreads == blockedthreads:
                for t in blockedthreads:
                    t.syncthreads_blocked = False
                    t.syncthreads_event.set()
                blockedthreads = set()
        for t in threads:
            if t.exception:
                raise t.exception[0].with_traceback(t.exception[1])

    run_block.signalled = True
    kernel.BlockThread.run = run_thread
    kernel.BlockThread.syncthreads = syncthreads
    kernel.BlockManager.run = run_block


def _install_device_calls(kernel):
    """``FakeCUDAKernel.__call__``: inside a launch, a device function's module's globals
    bound to the real ``cuda`` module are bound to the launch's fake one at its first call,
    and restored when the launch ends; elsewhere (a launch, a device function called from
    the host) the stock call."""
    from numba import cuda
    stock = kernel.FakeCUDAKernel.__call__
    held = {}                   # id(module globals) -> (those globals, their real bindings)
    lock = threading.Lock()

    def call(self, *args):
        context = kernel._kernel_context
        if context is None:     # a launch (or a device function called from the host)
            try:
                return stock(self, *args)
            finally:
                if not self._device:
                    with lock:
                        for globs, real in held.values():
                            globs.update(real)
                        held.clear()
        globs = self.fn.__globals__
        if id(globs) not in held:
            with lock:
                if id(globs) not in held:
                    real = {k: v for k, v in globs.items() if v is cuda}
                    globs.update(dict.fromkeys(real, context))
                    held[id(globs)] = (globs, real)
        return self.fn(*args)
    kernel.FakeCUDAKernel.__call__ = call


def _install_shared_arrays(shared):
    """``FakeCUDAShared.array`` with its lookup-or-create of a static array under a lock, keyed
    as numba's (the caller's file and line); dynamic arrays as before."""
    from numba.cuda import types
    from numba.cuda.np import numpy_support
    stock = shared.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:     # no lookup: the dynamic array, or refused
            return stock(self, shape, dtype, alignment)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                dt = numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else dtype
                res = self._allocations[caller] = np.empty(shape, dt)
        return res
    shared.array = array
