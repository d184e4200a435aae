"""Does compute-sanitizer's racecheck follow mbarrier ordering? A minimal ring, written with
gemm.cute.pipeline as the Hopper kernel's block scales are (issue 35), for:

    compute-sanitizer --tool racecheck --report-api-errors no python3 benchmarks/racecheck_mbarrier.py

One producer thread fills a ring of 2 slots of shared floats over 8 steps: a value by a
store before its arrive (``store``), or a run of 32 floats by a bulk copy whose bytes
complete the phase (``bulk``); 4 consumer warps read each slot after their wait and release
it one arrival a warp, after a ``syncwarp`` orders the warp's reads before it (as in the
kernel). Both forms are correct by the PTX memory model (the arrive releases,
the wait acquires); a race reported on every access here is racecheck not following the
mbarriers, a report absent here but present in the kernel is the kernel's. Prints each
form's check against the values written (OK or BAD).
"""

import numpy as np
from numba import cuda, float32, uint64

from gemm import arch
from gemm.cute.pipeline import (advance, consumer_release, consumer_start, consumer_wait,
                                pipeline_init, producer_acquire, producer_commit,
                                producer_expect_tx, producer_start)

STAGES, STEPS, RUN = 2, 8, 32


def ring(bulk):
    """The kernel: thread 0 produces, warps 1-4 consume into ``out`` (STEPS x 128)."""
    n_bars, n_buf = 2 * STAGES, STAGES * RUN

    @cuda.jit
    def kernel(src, out):
        bars = cuda.shared.array(n_bars, uint64)
        buf = cuda.shared.array(n_buf, float32)
        t = cuda.threadIdx.x
        if t == 0:
            pipeline_init(bars, STAGES, 1, 4)           # one release a consumer warp
        cuda.syncthreads()
        if t < 32:
            if t == 0:
                st = producer_start()
                for k in range(STEPS):
                    producer_acquire(bars, st, STAGES)
                    if bulk:
                        producer_expect_tx(bars, st, RUN * 4)
                        arch.bulk_load(buf, st[0] * RUN, src, k * RUN, RUN * 4, bars, st[0])
                    else:
                        buf[st[0] * RUN] = src[k * RUN]
                        producer_commit(bars, st)
                    st = advance(st, STAGES)
            return
        c = t - 32
        st = consumer_start()
        for k in range(STEPS):
            consumer_wait(bars, st)
            out[k * 128 + c] = buf[st[0] * RUN + (c % RUN if bulk else 0)]
            arch.syncwarp()                             # the warp's reads, then its release
            if c % 32 == 0:
                consumer_release(bars, st, STAGES)
            st = advance(st, STAGES)
    return kernel


def main():
    src = np.arange(STEPS * RUN, dtype=np.float32) + 1
    for bulk in (False, True):
        out = cuda.to_device(np.zeros(STEPS * 128, np.float32))
        ring(bulk)[1, 160](cuda.to_device(src), out)
        got = out.copy_to_host().reshape(STEPS, 128)
        c = np.arange(128) % RUN if bulk else np.zeros(128, int)
        want = np.stack([src[k * RUN + c] for k in range(STEPS)])
        print("bulk" if bulk else "store", "OK" if np.array_equal(got, want) else "BAD")


if __name__ == "__main__":
    main()
