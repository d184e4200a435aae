"""gemm.cute's Hopper pieces: pipelines as values (gemm.cute.pipeline: a ring of shared
slots guarded by mbarriers, its state a value in the kernel) and TMA tiles (``copy(tma,
tensor_map, (mn, k), dst, bars, bar)``). In numba's CUDA simulator (this file as a script in a
subprocess): a producer warp feeds two consumer warps through 3 slots over 11 steps (the
parity flips three times), by plain stores and by TMA (the producer expecting each slot's
bytes), and ``copy`` loads a swizzled bf16 tile, cut at the matrix's edges, into exactly the
places of the Hopper kernel's stage layout; all on fresh random data against numpy. The same
kernels compiled to PTX for sm_90 on the CPU hold the mbarrier and TMA instructions (one per
box) and no local memory; ``copy``'s typing refuses what cannot run; the state's arithmetic in
plain Python; and on a GPU of compute capability 9.x all three again."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32, uint16, uint64

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:   # run as a script by the simulator test
    sys.path.insert(0, str(ROOT))

from gemm import arch  # noqa: E402
from gemm.cute import copy, make_tensor, pipeline as pl  # noqa: E402
from gemm.hopper.plan import stage_layout, tma_copy as stage_copy  # noqa: E402
from layoutalg import Layout  # noqa: E402
from layoutalg.atom.tma import make_tma_copy  # noqa: E402

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


ROWS = 8                # rows a step loads of the (ROWS * STEPS, 32) float32 matrix
TMA_FLOATS = STAGES * ROWS * 32 + 32    # the slots, and room to align them to 128 bytes
# layoutalg's TMA copy of one step's (ROWS, 32) row-major tile, over the whole matrix
RING_TMA = make_tma_copy((ROWS * STEPS, 32), (32, 1), Layout((ROWS, 32), (32, 1)), 32)
RING_BYTES, SLOT = RING_TMA.bytes, Layout(ROWS * 32)


def tma_ring(tmap, out):
    """The ring fed by TMA: one elected producer lane expects a slot's bytes and copies step
    k's rows into it (the TMA completes the slot's full phase); warps 1 and 2 keep
    ``sum_k sum_r (k + 1) * warp * M[k * ROWS + r, lane]``."""
    raw = cuda.shared.array(TMA_FLOATS, float32)
    bars = cuda.shared.array(BARS, uint64)
    base = arch.shared_offset_of(raw, 128)
    t = cuda.threadIdx.x
    lane, warp = t % 32, t // 32
    if t == 0:
        pl.pipeline_init(bars, STAGES, 1, 32 * CONSUMER_WARPS)
    cuda.syncthreads()
    if warp == 0:
        if lane == 0:
            st = pl.producer_start()
            for k in range(STEPS):
                pl.producer_acquire(bars, st, STAGES)
                pl.producer_expect_tx(bars, st, RING_BYTES)
                slot = make_tensor(raw, SLOT, base + st[0] * ROWS * 32)
                copy(RING_TMA, tmap, (k * ROWS, 0), slot, bars, st[0])
                st = pl.advance(st, STAGES)
    else:
        acc = float32(0)
        st = pl.consumer_start()
        for k in range(STEPS):
            pl.consumer_wait(bars, st)
            for r in range(ROWS):
                acc += raw[base + (st[0] * ROWS + r) * 32 + lane] * float32((k + 1) * warp)
            pl.consumer_release(bars, st, STAGES)
            st = pl.advance(st, STAGES)
        out[(warp - 1) * 32 + lane] = acc


def check_tma_ring(seed, tensor_map):
    """Run :func:`tma_ring` on fresh data; ``tensor_map(matrix, copy) -> the map's 16 words``
    (the simulator's twin or the driver's map of a device array)."""
    rng = np.random.default_rng(seed)
    m = rng.integers(-8, 8, (ROWS * STEPS, 32)).astype(np.float32)
    out = np.full(32 * CONSUMER_WARPS, np.nan, np.float32)
    cuda.jit(tma_ring)[1, 32 * (1 + CONSUMER_WARPS)](tensor_map(m, RING_TMA), out)
    per_step = (m.reshape(STEPS, ROWS, 32).sum(1) * np.arange(1, STEPS + 1)[:, None]).sum(0)
    want = np.concatenate([per_step * w for w in range(1, CONSUMER_WARPS + 1)])
    return bool(np.array_equal(out, want.astype(np.float32)))


def _sim_map(m, copy):
    from gemm.arch.sim_sm90 import sim_tensor_map
    return sim_tensor_map(m.reshape(-1).view(np.uint8), 0, copy, m.itemsize)


# an MN-major bf16 stage of 128 x 64 (the Hopper kernel's layout, swizzled by 128 bytes: two
# boxes of 64 rows), its tile (1, 1) of a 200 x 100 matrix: cut at both edges
TILE_MN, TILE_K, MATRIX = 128, 64, (200, 100)
STAGE = stage_layout("MN", TILE_MN, TILE_K, 16)
TMA = stage_copy("MN", TILE_MN, TILE_K, 16)
TMA_BYTES = TMA.bytes                    # (a kernel reads the copy's bytes as a constant)
STAGE_ELEMS, RAW_ELEMS = TILE_MN * TILE_K, TILE_MN * TILE_K + 512
FLAT, SMALL = Layout(STAGE_ELEMS), Layout(64)


def tma_tile(tmap, out):
    """Thread 0 loads the tile at (TILE_MN, TILE_K) with copy(TMA, ...); every thread copies
    the landed stage out."""
    raw = cuda.shared.array(RAW_ELEMS, uint16)
    bars = cuda.shared.array(2, uint64)
    skip = arch.shared_offset_of(raw, 1024)
    stage = make_tensor(raw, FLAT, skip)
    t = cuda.threadIdx.x
    if t == 0:
        pl.pipeline_init(bars, 1, 1, 1)
    cuda.syncthreads()
    if t == 0:
        st = pl.producer_start()
        pl.producer_acquire(bars, st, 1)
        pl.producer_expect_tx(bars, st, TMA_BYTES)
        copy(TMA, tmap, (TILE_MN, TILE_K), stage, bars, st[0])
    pl.consumer_wait(bars, pl.consumer_start())
    for i in range(t, STAGE_ELEMS, cuda.blockDim.x):
        out[i] = raw[skip + i]


def check_tma_tile(seed, tensor_map):
    """Run :func:`tma_tile` on a fresh random bf16 matrix (bits as uint16, stored MN-major);
    every element of the tile sits where STAGE says, zeros past the matrix."""
    from dataclasses import replace
    rng = np.random.default_rng(seed)
    m, k = MATRIX
    g = rng.integers(1, 2 ** 16, (m, k), dtype=np.uint64).astype(np.uint16)    # [mn, k]
    ld = -(-m // 8) * 8                                     # MN-major: columns of m, aligned
    store = np.zeros((k, ld), np.uint16)
    store[:, :m] = g.T
    out = np.full(STAGE_ELEMS, 0xFFFF, np.uint16)
    cuda.jit(tma_tile)[1, 64](tensor_map(store, replace(TMA, dims=(m, k), strides=(2 * ld,))),
                              out)
    for i in range(TILE_MN):
        for j in range(TILE_K):
            mn, kk = TILE_MN + i, TILE_K + j
            if out[STAGE(i, j)] != (g[mn, kk] if mn < m and kk < k else 0):
                return False
    return True


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
    assert report == {"ring": True, "tma ring": True, "tma tile": True}, (seed, report)


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                    reason="compiles PTX: the simulator is on")
def test_the_ring_compiles_to_mbarrier_instructions_without_local_memory():
    ptx = cuda.compile_ptx(ring, "void(float32[::1], float32[::1])", cc=(9, 0))[0]
    for instruction in ("mbarrier.init.shared::cta.b64", "fence.mbarrier_init",
                        "mbarrier.try_wait.parity.shared::cta.b64",
                        "mbarrier.arrive.shared::cta.b64"):
        assert instruction in ptx, instruction
    assert ".local" not in ptx
    ptx = cuda.compile_ptx(tma_ring, "void(uint64[::1], float32[::1])", cc=(9, 0))[0]
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in ptx
    assert "cp.async.bulk.tensor.2d" in ptx
    assert ".local" not in ptx
    ptx = cuda.compile_ptx(tma_tile, "void(uint64[::1], uint16[::1])", cc=(9, 0))[0]
    assert ptx.count("cp.async.bulk.tensor.2d") == len(TMA.boxes) > 1
    assert ".local" not in ptx


def _bad_element(tmap, out):
    raw = cuda.shared.array(RAW_ELEMS, float32)
    bars = cuda.shared.array(2, uint64)
    copy(TMA, tmap, (0, 0), make_tensor(raw, FLAT, 0), bars, 0)


def _too_small(tmap, out):
    raw = cuda.shared.array(64, uint16)
    bars = cuda.shared.array(2, uint64)
    copy(TMA, tmap, (0, 0), make_tensor(raw, SMALL, 0), bars, 0)


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                    reason="compiles PTX: the simulator is on")
@pytest.mark.parametrize("kernel, text", [(_bad_element, "moves 16-bit elements"),
                                          (_too_small, "the TMA tile spans 8192")])
def test_a_tma_copy_that_cannot_run_is_a_typing_error(kernel, text):
    with pytest.raises(Exception) as info:
        cuda.compile_ptx(kernel, "void(uint64[::1], uint16[::1])", cc=(9, 0))
    assert type(info.value).__name__ == "TypingError" and text in str(info.value), \
        str(info.value)[-400:]


@pytest.mark.gpu
def test_a_producer_warp_feeds_two_consumer_warps_on_a_hopper_gpu():
    """The same ring on the GPU (mbarrier.try_wait needs compute capability 9.x)."""
    from gpucase import require_hopper
    require_hopper()
    seed = int.from_bytes(os.urandom(4), "little")
    assert check_ring(seed), seed

    def device_map(m, copy):
        from gemm.tma import tensor_map
        d = cuda.to_device(m)
        device_map.keep = d                      # alive until the kernel has run
        kind = "f32" if m.dtype == np.float32 else "bf16"
        return cuda.to_device(tensor_map(d.device_ctypes_pointer.value, copy, kind))
    assert check_tma_ring(seed, device_map), seed
    assert check_tma_tile(seed, device_map), seed


if __name__ == "__main__":
    from simcase import switch_threads_often
    switch_threads_often()
    seed = int(sys.argv[1])
    print(json.dumps({"ring": check_ring(seed), "tma ring": check_tma_ring(seed, _sim_map),
                      "tma tile": check_tma_tile(seed, _sim_map)}))
