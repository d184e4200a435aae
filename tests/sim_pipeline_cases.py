"""Run the pipelined add_matrices in numba's CUDA simulator and print one JSON line of results.

Used by tests/test_pipeline.py in a child process (the simulator must be chosen before numba is
imported): ``NUMBA_ENABLE_CUDASIM=1 python tests/sim_pipeline_cases.py WHICH`` with WHICH
``strict:STAGES:DELAY:SHARED`` (SHARED: static or dynamic), ``stock`` or ``errors``.

``strict`` runs it with gemm.arch's cp.async twins, which defer each copy until a wait of the
issuing thread retires its group (``cp_async_wait(n)`` retires all but the newest n committed
groups of the thread; copies not yet committed are never retired by it): a kernel that reads a
tile before the right wait reads stale or uninitialised shared memory and fails the exact
comparison. It also records the cp.async calls, commits, waits and syncthreads of thread 0 of
block 0, which the test compares with ``gemm.pipeline.ring_schedule``.
"""

import json
import os
import sys
import threading

import numpy as np

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run me in the simulator"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from numba import cuda  # noqa: E402
from numba.cuda.simulator import kernel as sim_kernel  # noqa: E402

import gemm.arch as arch  # noqa: E402
from simcase import outcomes  # noqa: E402

# (shape, x order, y order, out order, in place) of the cases; blocks of (4, 16), 16 threads
SHAPES = [((16, 64), "C", "C", "C", False),    # whole blocks, 16-byte copies
          ((13, 37), "C", "C", "C", False),    # partial blocks, ld 37: 4-byte copies
          ((9, 20), "F", "C", "C", False),     # mixed majors
          ((33, 70), "C", "C", "F", False),    # column-major out: the transposed problem
          ((1, 1), "C", "C", "C", False),
          ((12, 40), "C", "C", "C", True)]     # out is x
BLOCK, THREADS = (4, 16), 16


class TracedCopies:
    """gemm.arch's cp.async twins, their calls by thread 0 of block 0 recorded."""

    def __init__(self):
        self.trace = []
        self.stock = {name: getattr(arch, name) for name in
                      ("cp_async_ca_zfill", "cp_async_cg_zfill", "cp_async_commit",
                       "cp_async_wait")}

    def _traced(self):
        th = threading.current_thread()
        return getattr(th, "blockIdx", None) is not None and th.blockIdx.x == 0 \
            and th.threadIdx.x == 0

    def copy(self, name):
        stock = self.stock[name]

        def traced(dst, di, src, si, nbytes, src_bytes):
            if self._traced():
                self.trace.append(["copy", int(di)])
            stock(dst, di, src, si, nbytes, src_bytes)
        return traced

    def commit(self):
        if self._traced():
            self.trace.append(["commit"])
        self.stock["cp_async_commit"]()

    def wait(self, n):
        self.stock["cp_async_wait"](n)
        if self._traced():
            self.trace.append(["wait", int(n)])

    def install(self):
        for name in ("cp_async_ca_zfill", "cp_async_cg_zfill"):
            setattr(arch, name, self.copy(name))
        arch.cp_async_commit = self.commit
        arch.cp_async_wait = self.wait
        sync = sim_kernel.BlockThread.syncthreads
        model = self

        def traced_sync(thread):
            if thread.blockIdx.x == 0 and thread.threadIdx.x == 0:
                model.trace.append(["sync"])
            return sync(thread)
        sim_kernel.BlockThread.syncthreads = traced_sync


def run_case(add_matrices, shape, xo, yo, oo, in_place, seed, **kw):
    rng = np.random.default_rng(seed)
    x = np.asarray(rng.standard_normal(shape), np.float32, order=xo)
    y = np.asarray(rng.standard_normal(shape), np.float32, order=yo)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    out = dx if in_place else cuda.to_device(np.full(shape, np.nan, np.float32, order=oo))
    got = add_matrices(dx, dy, out, block=BLOCK, threads=THREADS, num_blocks=2, **kw)
    return bool(got is out and np.array_equal(out.copy_to_host(), x + y))


def strict(stages, delay, shared):
    model = TracedCopies()
    model.install()
    from gemm.elementwise import add_matrices
    results = {}
    for k, (shape, xo, yo, oo, in_place) in enumerate(SHAPES):
        name = f"{shape[0]}x{shape[1]} {xo}{yo}{oo}{' in place' if in_place else ''}"
        results[name] = run_case(add_matrices, shape, xo, yo, oo, in_place, seed=k,
                                 stages=stages, delay_release=delay, shared=shared)
    # the trace of one more run: 33x70 row-major, 9 x 5 = 45 tiles, 23 steps for block 0
    model.trace.clear()
    ok = run_case(add_matrices, (33, 70), "C", "C", "C", False, seed=99, stages=stages,
                  delay_release=delay, shared=shared)
    slot = BLOCK[0] * BLOCK[1]      # in dynamic shared memory y's ring follows x's: modulo
    trace = [["copy_in", (e[1] // slot) % stages] if e[0] == "copy" else e
             for e in model.trace]
    return {"results": results, "trace_run": ok, "trace": trace, "steps": 23}


def stock():
    """The twins untraced: default block and threads, and a small block in dynamic shared
    memory, a few shapes."""
    from gemm.elementwise import add_matrices
    rng = np.random.default_rng(5)
    results = {}
    for shape in ((20, 300), (8, 128), (3, 5)):
        for kw in ({}, dict(block=(4, 32), threads=32, stages=4, shared="dynamic")):
            x = rng.standard_normal(shape).astype(np.float32)
            y = rng.standard_normal(shape).astype(np.float32)
            out = add_matrices(cuda.to_device(x), cuda.to_device(y), **kw)
            results[f"{shape} {kw}"] = bool(np.array_equal(out.copy_to_host(), x + y))
    return results


def errors():
    """{case: [exception type, message]} for inputs add_matrices must refuse."""
    from gemm.elementwise import add_matrices
    d = cuda.to_device
    f32 = np.ones((4, 6), np.float32)
    cases = {
        "shapes differ": lambda: add_matrices(d(f32), d(np.ones((6, 4), np.float32))),
        "float64": lambda: add_matrices(d(f32.astype(np.float64)), d(f32)),
        "int32 out": lambda: add_matrices(d(f32), d(f32), d(f32.astype(np.int32))),
        "host array": lambda: add_matrices(f32, d(f32)),
        "3-D": lambda: add_matrices(d(np.ones((2, 4, 6), np.float32)), d(f32)),
        "strided view": lambda: add_matrices(d(np.ones((8, 12), np.float32))[::2, ::2], d(f32)),
        "out shape": lambda: add_matrices(d(f32), d(f32), d(np.ones((4, 5), np.float32))),
        "stages": lambda: add_matrices(d(f32), d(f32), stages=1),
        "delay_release": lambda: add_matrices(d(f32), d(f32), stages=3, delay_release=2),
        "block": lambda: add_matrices(d(f32), d(f32), block=(0, 8)),
        "threads": lambda: add_matrices(d(f32), d(f32), threads=0),
        "num_blocks": lambda: add_matrices(d(f32), d(f32), num_blocks=0),
        "too much shared": lambda: add_matrices(d(f32), d(f32), block=(64, 128), stages=4),
        "static too small": lambda: add_matrices(d(f32), d(f32), block=(32, 128), stages=3,
                                                 shared="static"),
        "shared option": lambda: add_matrices(d(f32), d(f32), shared="global"),
        "empty": lambda: add_matrices(d(np.ones((0, 3), np.float32)),
                                      d(np.ones((0, 3), np.float32))),
    }
    return outcomes(cases)


def main(which):
    if which.startswith("strict:"):
        _, stages, delay, shared = which.split(":")
        result = strict(int(stages), int(delay), shared)
    elif which == "stock":
        result = stock()
    elif which == "errors":
        result = errors()
    else:
        raise SystemExit(f"unknown case set {which!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
