"""gemm.cute.pipeline: a ring of shared slots guarded by mbarriers, its state a value in the
kernel. In numba's CUDA simulator (this file as a script in a subprocess) a producer warp
feeds two consumer warps through 3 slots over 11 steps (the parity flips three times), on
fresh random data against numpy; the same kernel compiled to PTX for sm_90 on the CPU holds
the mbarrier instructions and no local memory; the state's arithmetic in plain Python; and
on a GPU of compute capability 9.x the ring again."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32, uint64

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:   # run as a script by the simulator test
    sys.path.insert(0, str(ROOT))

from gemm.cute import pipeline as pl  # noqa: E402

STAGES, STEPS, CONSUMER_WARPS = 3, 11, 2
SLOT_FLOATS, BARS = STAGES * 32, 2 * STAGES     # (numba sizes shared arrays by constants)


def ring(src, out):
    """Warp 0 writes step k's 32 values into slot k % STAGES; warps 1 and 2 each read every
    step and keep ``sum_k (k + 1) * (warp) * src[k]`` per lane. Every consumer thread
    releases each slot (64 arrivals), the producer's lanes commit it (32)."""
    buf = cuda.shared.array(SLOT_FLOATS, float32)
    bars = cuda.shared.array(BARS, uint64)
    t = cuda.threadIdx.x
    lane, warp = t % 32, t // 32
    if t == 0:
        pl.pipeline_init(bars, STAGES, 32, 32 * CONSUMER_WARPS)
    cuda.syncthreads()
    if warp == 0:
        st = pl.producer_start()
        for k in range(STEPS):
            pl.producer_acquire(bars, st, STAGES)
            buf[st[0] * 32 + lane] = src[k * 32 + lane]
            pl.producer_commit(bars, st)
            st = pl.advance(st, STAGES)
    else:
        acc = float32(0)
        st = pl.consumer_start()
        for k in range(STEPS):
            pl.consumer_wait(bars, st)
            acc += buf[st[0] * 32 + lane] * float32((k + 1) * warp)
            pl.consumer_release(bars, st, STAGES)
            st = pl.advance(st, STAGES)
        out[(warp - 1) * 32 + lane] = acc


def expect_tx(src, nbytes):
    """A producer's arrival with bytes due (TMA's form), compiled only."""
    bars = cuda.shared.array(2, uint64)
    if cuda.threadIdx.x == 0:
        pl.pipeline_init(bars, 1, 1, 1)
    cuda.syncthreads()
    st = pl.producer_start()
    pl.producer_acquire(bars, st, 1)
    pl.producer_expect_tx(bars, st, nbytes)
    src[0] = 1.0


def check_ring(seed):
    rng = np.random.default_rng(seed)
    src = rng.integers(-8, 8, 32 * STEPS).astype(np.float32)
    out = np.full(32 * CONSUMER_WARPS, np.nan, np.float32)
    cuda.jit(ring)[1, 32 * (1 + CONSUMER_WARPS)](src, out)
    weights = np.arange(1, STEPS + 1)[:, None]
    per_step = (src.reshape(STEPS, 32) * weights).sum(0)
    want = np.concatenate([per_step * w for w in range(1, CONSUMER_WARPS + 1)])
    return bool(np.array_equal(out, want.astype(np.float32)))


def test_the_state_moves_slot_by_slot_and_flips_its_parity_past_the_last():
    """The device functions as plain Python (numba's py_func): three laps of 3 slots."""
    st, seen = pl.producer_start.py_func(), []
    for _ in range(9):
        seen.append(st)
        st = pl.advance.py_func(st, 3)
    assert seen == [(0, 1), (1, 1), (2, 1), (0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    assert pl.consumer_start.py_func() == (0, 0)


def test_a_producer_warp_feeds_two_consumer_warps_in_the_simulator():
    from simcase import simulator_report
    seed = int.from_bytes(os.urandom(4), "little")
    report = simulator_report(__file__, seed)
    assert report == {"ring": True}, (seed, report)


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                    reason="compiles PTX: the simulator is on")
def test_the_ring_compiles_to_mbarrier_instructions_without_local_memory():
    ptx = cuda.compile_ptx(ring, "void(float32[::1], float32[::1])", cc=(9, 0))[0]
    for instruction in ("mbarrier.init.shared::cta.b64", "fence.mbarrier_init",
                        "mbarrier.try_wait.parity.shared::cta.b64",
                        "mbarrier.arrive.shared::cta.b64"):
        assert instruction in ptx, instruction
    assert ".local" not in ptx
    ptx = cuda.compile_ptx(expect_tx, "void(float32[::1], int32)", cc=(9, 0))[0]
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in ptx


@pytest.mark.gpu
def test_a_producer_warp_feeds_two_consumer_warps_on_a_hopper_gpu():
    """The same ring on the GPU (mbarrier.try_wait needs compute capability 9.x)."""
    from gpucase import require_gpu
    require_gpu()
    if cuda.get_current_device().compute_capability[0] != 9:
        pytest.skip("needs a GPU of compute capability 9.x")
    assert check_ring(int.from_bytes(os.urandom(4), "little"))


if __name__ == "__main__":
    from simcase import switch_threads_often
    switch_threads_often()
    print(json.dumps({"ring": check_ring(int(sys.argv[1]))}))
