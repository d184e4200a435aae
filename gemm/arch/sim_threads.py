"""numba's CUDA simulator, its block of threads driven by events: installed by ``gemm.arch``
when it picks the twins.

The simulator runs a Python thread per CUDA thread, and its ``BlockManager.run`` polls them
all in a loop, without pause, to see which wait at ``syncthreads`` (all of them: it releases
them) and which have ended. That loop holds the GIL as often as any thread of the kernel:
with 256 threads mostly waiting on mbarriers, a Hopper kernel's simulation spent about half
its time there. Here each thread signals an event as it waits at ``syncthreads`` and as it
ends, and the loop looks at the threads only then (or every ``_POLL_S`` at most, should a
signal be missed). The loop keeps the stock one's locals (``threads``, ``blockedthreads``),
which :func:`gemm.arch.sim._manager_sets` reads.
"""

import threading

import numpy as np

__all__ = ["install"]

_POLL_S = 0.01      # the longest the loop waits for a signal before it looks anyway


def install():
    """Replace ``BlockManager.run`` and ``BlockThread``'s ``run`` and ``syncthreads`` of
    numba's simulator with the signalling ones (once)."""
    from numba.cuda.simulator import kernel
    if getattr(kernel.BlockManager.run, "signalled", False):
        return
    thread_run = kernel.BlockThread.run

    def run_thread(self):
        try:
            thread_run(self)
        finally:
            self._manager.changed.set()

    def syncthreads(self):
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        self.syncthreads_blocked = True
        self._manager.changed.set()
        self.syncthreads_event.wait()
        self.syncthreads_event.clear()
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def run_block(self, grid_point, *args):
        self.changed = threading.Event()
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
            for t in livethreads:
                if t.syncthreads_blocked:
                    blockedthreads.add(t)
                elif t.exception:
                    for other in threads:       # abort the others, without joining them
                        other.abort = True
                        other.syncthreads_blocked = False
                        other.syncthreads_event.set()
                    raise t.exception[0].with_traceback(t.exception[1])
            if livethreads == blockedthreads:
                for t in blockedthreads:
                    t.syncthreads_blocked = False
                    t.syncthreads_event.set()
                blockedthreads = set()
            livethreads = {t for t in livethreads if t.is_alive()}
        for t in threads:
            if t.exception:
                raise t.exception[0].with_traceback(t.exception[1])

    run_block.signalled = True
    kernel.BlockThread.run = run_thread
    kernel.BlockThread.syncthreads = syncthreads
    kernel.BlockManager.run = run_block
