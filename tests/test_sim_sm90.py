"""The simulator twins of the Hopper instructions (gemm.arch.sim_sm90): the mbarriers' phase
rules on their own; the TMA twin against the swizzled stage layouts the Hopper kernel is
generated from; and in numba's CUDA simulator (this file as a script in a subprocess with
NUMBA_ENABLE_CUDASIM=1) a producer warp and a consumer warp passing data through a ring of
two shared slots guarded by full and empty mbarriers, and warpgroups running the wgmma twin
on stages laid out and described by layoutalg (bf16, f16, tf32; K- and MN-major; n 32-128).
The stage layouts and descriptors are the kernel's, which its GPU tests hold to the hardware's
TMA and wgmma; a twin that misread the swizzle or LBO/SBO fails here."""

import json
import sys
import threading
import traceback
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32, uint8, uint64

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:   # run as a script by the simulator test
    sys.path.insert(0, str(ROOT))

from gemm.arch import sim_sm90 as sm  # noqa: E402


def test_a_phase_completes_when_its_arrivals_and_bytes_are_in():
    bars = np.zeros(2, np.uint64)
    sm.mbarrier_init(bars, 1, 3)
    for _ in range(2):
        sm.mbarrier_arrive(bars, 1)
    sm.mbarrier_arrive_expect_tx(bars, 1, 128)          # the last arrival, 128 bytes due
    assert sm.phase_of(bars, 1) == 0
    sm.mbarrier_complete_tx(bars, 1, 100)
    assert sm.phase_of(bars, 1) == 0
    sm.mbarrier_complete_tx(bars, 1, 28)
    assert sm.phase_of(bars, 1) == 1                    # the next phase: 3 arrivals due
    sm.mbarrier_wait(bars, 1, 0)                        # phase 0 is done
    for _ in range(3):
        sm.mbarrier_arrive(bars, 1)
    assert sm.phase_of(bars, 1) == 2
    sm.mbarrier_wait(bars, 1, 1)


def test_a_wait_returns_when_another_thread_completes_the_phase(monkeypatch):
    bars = np.zeros(1, np.uint64)
    sm.mbarrier_init(bars, 0, 1)
    done = []
    waiter = threading.Thread(target=lambda: (sm.mbarrier_wait(bars, 0, 0), done.append(1)))
    waiter.start()
    waiter.join(0.2)
    assert not done                                     # phase 0 still open
    sm.mbarrier_arrive(bars, 0)
    waiter.join(5)
    assert done
    monkeypatch.setattr(sm, "WAIT_LIMIT_S", 0.2)
    with pytest.raises(RuntimeError, match="did not complete in"):
        sm.mbarrier_wait(bars, 0, 1)                    # phase 1: nobody arrives


def test_split_tf32_parts_sum_to_the_value():
    """3xTF32's small part: x minus x's 13 low bits cleared, rounded to tf32; big + small is
    x to 2^-21; inf and NaN have none; the tile twin splits 16-byte chunks in place."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(4096) * 10.0 ** rng.integers(-30, 30, 4096)).astype(np.float32)
    big = (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    small = sm.split_tf32(x)
    assert not (small.view(np.uint32) & np.uint32(0x1FFF)).any()      # tf32 values
    rel = np.abs(big.astype(np.float64) + small - x) / np.abs(x)
    assert rel.max() <= 2.0 ** -21
    assert np.array_equal(sm.split_tf32(np.array([1.0, -2.5, np.inf, -np.inf, np.nan],
                                                 np.float32)), np.zeros(5, np.float32))
    raw = np.zeros(64, np.uint8)
    raw[:32] = x[:8].view(np.uint8)
    tile = sm.split_tf32_tile(2, 16)
    assert tile(raw, 0, 32) == 0 and np.array_equal(raw[32:].view(np.float32), small[:8])
    raw[:4] = np.array([np.inf], np.float32).view(np.uint8)
    assert tile(raw, 0, 32) == 1
    sm.clear_nonfinite_tile(1, 16)(raw, 0)
    assert raw[:16].view(np.float32)[0] == 0 and np.array_equal(raw[4:16], x[1:4].view(np.uint8))


def test_bad_uses_are_refused():
    bars = np.zeros(1, np.uint64)
    with pytest.raises(RuntimeError, match="not initialised"):
        sm.mbarrier_arrive(np.zeros(1, np.uint64), 0)
    with pytest.raises(ValueError, match="count must be"):
        sm.mbarrier_init(bars, 0, 0)
    with pytest.raises(IndexError, match="outside bars"):
        sm.mbarrier_init(bars, 1, 1)
    with pytest.raises(TypeError, match="8-byte elements"):
        sm.mbarrier_init(np.zeros(2, np.uint32), 0, 1)
    sm.mbarrier_init(bars, 0, 1)
    sm.mbarrier_arrive(bars, 0)
    with pytest.raises(ValueError, match="parity must be 0 or 1"):
        sm.mbarrier_wait(bars, 0, 2)
    with pytest.raises(ValueError, match="multiple of 8"):
        sm.setmaxnreg_inc(230)
    with pytest.raises(ValueError, match="0..7"):
        sm.wgmma_wait(8)
    with pytest.raises(RuntimeError, match="CUDA simulator"):     # no block outside a kernel
        sm.smem_desc(np.zeros(64, np.uint8), 0)
    with pytest.raises(ValueError, match="tf32 operands must be K-major"):
        sm.wgmma_tile("tf32", 64, True)


def test_bulk_load_copies_a_run_and_completes_its_bytes():
    """The twin of cp.async.bulk (global to shared, no tensor map): the run's bytes land at
    the element given and complete on the mbarrier; a size or an address off 16 bytes, or a
    run past either array, is refused."""
    src = np.arange(64, dtype=np.float32)
    smem = np.zeros(64, np.float32)
    o = int(sm.shared_offset_of(smem, 16))
    at = int(sm.shared_offset_of(src, 16))
    bars = np.zeros(1, np.uint64)
    sm.mbarrier_init(bars, 0, 1)
    sm.mbarrier_arrive_expect_tx(bars, 0, 32)
    sm.bulk_load(smem, o + 4, src, at + 8, 32, bars, 0)
    assert sm.phase_of(bars, 0) == 1
    assert list(smem[o + 4:o + 12]) == list(src[at + 8:at + 16])
    assert not smem[o:o + 4].any() and not smem[o + 12:].any()
    for args, error in (((o, src, at, 24), "multiples of 16"),
                        ((o, src, at + 1, 16), "multiples of 16"),
                        ((o + 2, src, at, 16), "multiples of 16"),
                        ((o, src, at + 48, 80), "passes the end")):
        with pytest.raises((ValueError, IndexError), match=error):
            sm.bulk_load(smem, *args, bars, 0)


def test_shared_offset_of_aligns_the_address():
    raw = np.zeros(4096, np.uint8)
    for start in (0, 1, 16, 700):
        view = raw[start:]
        skip = int(sm.shared_offset_of(view, 1024))
        assert (view.__array_interface__["data"][0] + skip) % 1024 == 0 and skip < 1024
    odd = np.zeros(16, np.uint8)
    odd = odd[1:9] if odd.__array_interface__["data"][0] % 2 == 0 else odd[:8]
    with pytest.raises(ValueError, match="whole elements"):   # floats at an odd address
        sm.shared_offset_of(odd.view(np.float32), 1024)


@pytest.mark.parametrize("major, rows, bk", [("K", 64, 64), ("K", 128, 64), ("MN", 64, 64),
                                             ("MN", 256, 64)])
def test_tma_twin_fills_the_stage_the_generator_reads(major, rows, bk):
    """The TMA twin (the PTX ISA's byte swizzle on shared addresses) loads a block of a
    bf16 matrix, tile (1, 2), partial at the matrix's edges, into exactly the elements that
    layoutalg's swizzled stage layout (which the Hopper kernel's wgmma descriptors are read
    from) says: element (mn, k) of the tile at ``layout(mn, k)``; zeros outside the matrix;
    the mbarrier's phase completes with the copy's bytes."""
    from dataclasses import replace
    from gemm.hopper.plan import stage_layout, tma_copy
    rng = np.random.default_rng(rows + bk)
    layout, copy = stage_layout(major, rows, bk, 16), tma_copy(major, rows, bk, 16)
    m, k = 2 * rows - 5, 3 * bk - 7                     # the tile (1, 2) is cut at both edges
    g = rng.integers(1, 2 ** 16, (m, k), dtype=np.uint64).astype(np.uint16)    # [mn, k]
    inner, outer = (k, m) if major == "K" else (m, k)  # the contiguous extent first
    ld = -(-inner // 8) * 8                             # rows 16-byte aligned
    store = np.zeros((outer, ld), np.uint16)
    store[:, :inner] = g if major == "K" else g.T
    tmap = sm.sim_tensor_map(store.reshape(-1).view(np.uint8), 0,
                             replace(copy, dims=(inner, outer), strides=(2 * ld,)), 2)
    smem = np.full(rows * bk + 512, 0xFFFF, np.uint16)
    skip = int(sm.shared_offset_of(smem, 1024))
    bars = np.zeros(1, np.uint64)
    sm.mbarrier_init(bars, 0, 1)
    sm.mbarrier_arrive_expect_tx(bars, 0, copy.bytes)
    mn0, k0 = rows, 2 * bk
    for box in copy.boxes:
        at = (k0, mn0) if major == "K" else (mn0, k0)
        sm.tma_load_2d(smem, skip + box.smem_offset, tmap, at[0] + box.coords[0],
                       at[1] + box.coords[1], bars, 0)
    assert sm.phase_of(bars, 0) == 1
    for i in range(rows):
        for j in range(bk):
            want = g[mn0 + i, k0 + j] if mn0 + i < m and k0 + j < k else 0
            assert smem[skip + layout(i, j)] == want, (i, j)


# --- in the simulator -------------------------------------------------------------------------

STEPS = 7


def ring(src, out, elected):
    """A producer warp and a consumer warp, a ring of two slots of 32 floats (compiled by
    check_ring, in the simulator: its twins are Python)."""
    buf = cuda.shared.array(64, float32)
    bars = cuda.shared.array(4, uint64)               # full[2], empty[2]
    t = cuda.threadIdx.x
    lane, warp = t % 32, t // 32
    if t == 0:
        for i in range(2):
            sm.mbarrier_init(bars, i, 32)
            sm.mbarrier_init(bars, 2 + i, 32)
        sm.fence_mbarrier_init()
    cuda.syncthreads()
    if sm.elect_one():
        cuda.atomic.add(elected, 0, 1)
    acc = float32(0)
    for k in range(STEPS):
        s, ph = k % 2, (k // 2) % 2
        if warp == 0:                                 # the producer fills slot s
            sm.mbarrier_wait(bars, 2 + s, ph ^ 1)     # free: the first lap passes at once
            buf[s * 32 + lane] = src[k * 32 + lane]
            sm.mbarrier_arrive(bars, s)
        else:                                         # the consumer reads it, frees it
            sm.mbarrier_wait(bars, s, ph)
            acc += buf[s * 32 + lane] * float32(k + 1)
            sm.mbarrier_arrive(bars, 2 + s)
    if warp == 1:
        out[lane] = acc


def check_ring():
    rng = np.random.default_rng(3)
    src = rng.integers(-8, 8, 32 * STEPS).astype(np.float32)
    out = np.full(32, np.nan, np.float32)
    elected = np.zeros(1, np.int32)
    cuda.jit(ring)[1, 64](src, out, elected)
    want = (src.reshape(STEPS, 32) * np.arange(1, STEPS + 1)[:, None]).sum(0)
    assert np.array_equal(out, want.astype(np.float32)), (out, want)
    assert elected[0] == 2, elected                   # one lane of each warp


WGMMA_CASES = {"bf16 K/K n64": ("bf16", 64, "K", "K"), "f16 MN/MN n64": ("f16", 64, "MN", "MN"),
               "bf16 K/MN n128": ("bf16", 128, "K", "MN"), "tf32 K/K n32": ("tf32", 32, "K", "K"),
               "e4m3.e5m2 K/K n64": ("e4m3.e5m2", 64, "K", "K"),
               "e5m2 K/K n24": ("e5m2", 24, "K", "K")}


def wgmma_kernel(op, n, trans_a, trans_b, kblocks, smem_bytes):
    """A stage image (A's block, then B's) copied into shared memory, then 128 threads run
    one k-tile of wgmma twins on it, k-block by k-block; each writes its accumulators."""
    mma = sm.wgmma_tile(op, n, trans_a, trans_b)

    def kernel(image, descs, b_at, out):
        smem = cuda.shared.array(smem_bytes, uint8)
        t = cuda.threadIdx.x
        pad = int(sm.shared_offset_of(smem, 1024))
        if t == 0:                  # numpy slices: this kernel runs in the simulator only
            smem[pad:pad + image.size] = image
        cuda.syncthreads()
        acc = cuda.local.array(n // 2, float32)
        for kb in range(kblocks):
            da = sm.smem_desc(smem, descs[kb]) + np.uint64(pad >> 4)
            db = sm.smem_desc(smem, descs[kblocks + kb]) + np.uint64((pad + b_at) >> 4)
            mma(acc, da, db, 0 if kb == 0 else 1)
        out[t * (n // 2):(t + 1) * (n // 2)] = acc
    return cuda.jit(kernel)


def check_wgmma(name):
    """The wgmma twin on stages laid out by layoutalg's swizzled GMMA layouts (the kernel's)
    and descriptors encoded by layoutalg (address 0, the array's address added by
    smem_desc): A B^T exact for small integers, every thread's fragment at its place."""
    from layoutalg.atom.gmma import gmma_descriptor
    from gemm.hopper.plan import stage_layout
    from layoutalg.tensor import layout_offsets
    from layoutalg.atom import encode
    from gemm.arch.tile_plan import WGMMA_BITS, wgmma_types
    op, n, a_major, b_major = WGMMA_CASES[name]
    types = wgmma_types(op)
    bits = WGMMA_BITS[types[0]]
    bk, kinst = 1024 // bits, 256 // bits          # a k-tile of 128-byte rows; one instruction
    rng = np.random.default_rng(n)
    a = rng.integers(-4, 5, (64, bk)).astype(np.float32)
    b = rng.integers(-4, 5, (n, bk)).astype(np.float32)
    la, lb = stage_layout(a_major, 64, bk, bits), stage_layout(b_major, n, bk, bits)
    esize = bits // 8
    image = np.zeros(64 * bk * esize + n * bk * esize, np.uint8)
    b_at = 64 * bk * esize
    for x, lay, at, elem in ((a, la, 0, types[0]), (b, lb, b_at, types[1])):
        words = (x.view(np.uint32) if bits == 32 else encode(x, elem))
        offsets = np.asarray(layout_offsets(lay)).reshape(bk, x.shape[0]).T      # [i, j]
        image[at:at + x.size * esize].view(words.dtype)[offsets] = words
    descs = np.array([gmma_descriptor(la, bits, a_major, k_block=kb, shape=(64, kinst)).encode()
                      for kb in range(bk // kinst)]
                     + [gmma_descriptor(lb, bits, b_major, k_block=kb, shape=(n, kinst)).encode()
                        for kb in range(bk // kinst)], np.uint64)
    out = np.full(128 * n // 2, np.nan, np.float32)
    kernel = wgmma_kernel(op, n, a_major == "MN", b_major == "MN", bk // kinst,
                          image.size + 1024)
    kernel[1, 128](image, descs, np.uint32(b_at), out)
    rows, cols = sm._c_layout(n)
    got = np.full((64, n), np.nan, np.float32)
    got[rows, cols] = out.reshape(128, n // 2)
    assert np.array_equal(got, a @ b.T), name


def run_checks():
    report = {}
    checks = [("ring", check_ring)] + [(f"wgmma {k}", lambda k=k: check_wgmma(k))
                                       for k in WGMMA_CASES]
    for name, check in checks:
        try:
            check()
            report[name] = "ok"
        except Exception:  # noqa: BLE001 - reported to the test
            report[name] = traceback.format_exc(limit=6)
    return report


def test_producer_and_consumer_warps_share_a_ring_in_the_simulator():
    from simcase import simulator_report
    report = simulator_report(__file__)
    failed = {k: v for k, v in report.items() if v != "ok"}
    assert set(report) == {"ring"} | {f"wgmma {k}" for k in WGMMA_CASES} and not failed, failed


if __name__ == "__main__":
    print(json.dumps(run_checks()))
