"""gemm.cute.pallas: Pallas' ``emit_pipeline`` and ``emit_pipeline_warp_specialized`` in numba
kernels, with BlockSpecs whose shared layouts are layoutalg layouts.

Three kernels on fresh random data of odd sizes (blocks cut at every edge, zero-filled by TMA
and clipped by its stores): an elementwise ``2 a + b`` over a batch of matrices through in and
out specs (a 3-D grid); seed 000's
GEMM (one warpgroup, wgmma on 128-byte-swizzled stages, ``delay_release=1`` with
``wgmma_wait(1)``); and seed 000's warp-specialized GEMM (a memory warpgroup, two compute
warpgroups each taking half of B's block, the accumulators made in the compute context).
Small integers make every product exact in float32: the results must equal numpy's float64
ones bit for bit. In numba's CUDA simulator (this file as a script in a subprocess), compiled
to PTX for sm_90 on the CPU, and on a GPU of compute capability 9.x. Bad arguments are
refused by the emitters with clear errors."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:   # run as a script by the simulator test
    sys.path.insert(0, str(ROOT))

from gemm.cute import (elem_less, fill, gemm, get_slice, local_tile,  # noqa: E402
                       make_fragment_like, make_identity_tensor, make_layout, make_tensor,
                       partition_A, partition_B, partition_C, static, static_range, unroll,
                       unrolled, warpgroup_arrive, warpgroup_commit_batch, warpgroup_wait)
from gemm.cute.pallas import BlockSpec, emit_pipeline, emit_pipeline_warp_specialized  # noqa: E402
from layoutalg import Layout, make_tiled_mma, tile_to_shape  # noqa: E402
from layoutalg.atom import SM90_64xNx16_F32BF16BF16_SS  # noqa: E402
from layoutalg.atom.gmma import gmma_layout_atom  # noqa: E402
from layoutalg.errors import LayoutError  # noqa: E402

# --- 2 a + b, elementwise -----------------------------------------------------------------------

EW_BLOCK, EW_THREADS = (16, 32), 64


def ew_step(idx, a, b, o, carry):
    t = cuda.threadIdx.x
    for e in range(t, EW_BLOCK[0] * EW_BLOCK[1], EW_THREADS):
        r, c = e // EW_BLOCK[1], e % EW_BLOCK[1]
        o[r, c] = 2 * a[r, c] + b[r, c]


EW_SPEC = dict(block_shape=(None,) + EW_BLOCK, index_map=lambda b, i, j, nb, rows, cols: (b, i, j),
               bits=32)                 # a batch of matrices: the matrix index first
ew_pipeline = emit_pipeline(ew_step, grid=(lambda nb, rows, cols: nb,
                                           lambda nb, rows, cols: rows,
                                           lambda nb, rows, cols: cols),
                            in_specs=[BlockSpec(**EW_SPEC), BlockSpec(**EW_SPEC)],
                            out_specs=[BlockSpec(**EW_SPEC)], max_concurrent_steps=3)


def ew_kernel(a_map, b_map, o_map, nb, rows, cols):
    ew_pipeline((a_map, b_map, o_map), (nb, rows, cols), 0)


def check_elementwise(seed, tensor_maps, launch):
    rng = np.random.default_rng(seed)
    nb, m, n = 2, 16 * 2 + 5, 32 * 2 + 8
    a = rng.integers(-50, 50, (nb, m, n)).astype(np.float32)
    b = rng.integers(-50, 50, (nb, m, n)).astype(np.float32)
    o = np.full((nb, m, n), np.nan, np.float32)
    maps, back = tensor_maps(ew_pipeline.specs[0], [a, b, o])
    launch(ew_kernel, EW_SIG, None, 1, EW_THREADS, ew_pipeline.shared_bytes,
           (*maps, nb, -(-m // EW_BLOCK[0]), -(-n // EW_BLOCK[1])))
    return bool(np.array_equal(back(2), 2 * a + b))


# --- seed 000's GEMM: one warpgroup, wgmma, delay_release=1 --------------------------------------

BM, BN, BK = 128, 64, 64
MMA = make_tiled_mma(SM90_64xNx16_F32BF16BF16_SS(BN, "K", "MN"))
SA = tile_to_shape(gmma_layout_atom("K", 128, 16), (BM, BK))      # A (M, K) row-major
SB = tile_to_shape(gmma_layout_atom("MN", 128, 16), (BN, BK))     # B (K, N) row-major: N first
TILE_C, ONE = static((BM, BN)), static(1)
VALUES = static_range(BM // 64 * BN // 2)       # a thread's accumulators
ACC_SHAPE = Layout((BM, BN), (BN, 1))           # what a warpgroup's accumulators are shaped by


def mm_step(idx, a_smem, b_smem, carry):
    acc, thr = carry
    warpgroup_arrive()
    gemm(MMA, acc, partition_A(thr, a_smem), partition_B(thr, b_smem))
    warpgroup_commit_batch()
    warpgroup_wait(1)                   # one wgmma group stays in flight: delay_release=1


mm_pipeline = emit_pipeline(
    mm_step, grid=(lambda m, n, k_steps: k_steps,),
    in_specs=[BlockSpec((BM, BK), lambda k, m, n, ks: (m, k), SA),
              BlockSpec((BN, BK), lambda k, m, n, ks: (n, k), SB)],
    max_concurrent_steps=3, delay_release=1)


@cuda.jit(device=True, inline="always")
@unrolled
def store_c(c, acc, thr, m, n, at):
    """The accumulators of output tile ``at`` into row-major ``c`` (M, N) where inside."""
    gC = make_tensor(c, make_layout((m, n), (n, ONE)))
    tCgC = partition_C(thr, local_tile(gC, TILE_C, at))
    tCcC = partition_C(thr, local_tile(make_identity_tensor((m, n)), TILE_C, at))
    for i in unroll(VALUES):            # written out: the accumulators stay in registers
        if elem_less(tCcC[i], (m, n)):
            tCgC[i] = acc[i]


def mm_kernel(a_map, b_map, c, m, n, k):
    thr = get_slice(MMA, cuda.threadIdx.x)
    acc = make_fragment_like(partition_C(thr, make_tensor(c, ACC_SHAPE)),
                             float32)
    fill(acc, 0.0)
    mm_pipeline((a_map, b_map), (cuda.blockIdx.x, cuda.blockIdx.y, (k + BK - 1) // BK),
                (acc, thr))
    warpgroup_wait(0)
    store_c(c, acc, thr, m, n, (cuda.blockIdx.x, cuda.blockIdx.y))


# --- seed 000's warp-specialized GEMM: 2 compute warpgroups, each half of B's block -------------

WS_BN = 2 * BN
MMA_WS = make_tiled_mma(SM90_64xNx16_F32BF16BF16_SS(BN, "K", "MN"))
B_HALF = static((BN, BK))
SB_WS = tile_to_shape(gmma_layout_atom("MN", 128, 16), (WS_BN, BK))


def ws_step(idx, a_smem, b_smem, carry):
    acc, thr, c = carry
    warpgroup_arrive()
    gemm(MMA_WS, acc, partition_A(thr, a_smem),
         partition_B(thr, local_tile(b_smem, B_HALF, (c, 0))))
    warpgroup_commit_batch()
    warpgroup_wait(0)


def ws_compute(run, ring, ctx):
    c, (out, m, n) = ctx
    thr = get_slice(MMA_WS, cuda.threadIdx.x % 128)
    acc = make_fragment_like(partition_C(thr, make_tensor(out, ACC_SHAPE)),
                             float32)
    fill(acc, 0.0)
    run(ring, (acc, thr, c))
    tn = 2 * cuda.blockIdx.y + c
    if tn * BN < n:                     # this half of the block is inside C
        store_c(out, acc, thr, m, n, (cuda.blockIdx.x, tn))


ws_pipeline = emit_pipeline_warp_specialized(
    ws_step, grid=(lambda m, n, k_steps: k_steps,),
    in_specs=[BlockSpec((BM, BK), lambda k, m, n, ks: (m, k), SA),
              BlockSpec((WS_BN, BK), lambda k, m, n, ks: (n, k), SB_WS)],
    compute_context=ws_compute, max_concurrent_steps=2, num_compute_wgs=2,
    memory_registers=40, wg_axis="x")


def ws_kernel(a_map, b_map, c, m, n, k):
    ws_pipeline((a_map, b_map), (cuda.blockIdx.x, cuda.blockIdx.y, (k + BK - 1) // BK),
                (c, m, n))


def _bf16(x):
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def check_matmul(seed, tensor_maps, launch, ws):
    rng = np.random.default_rng(seed)
    m, n, k = BM - 21, WS_BN + 24, 4 * BK + 40     # every edge cut; 5 steps wrap the rings
    a = rng.integers(-4, 5, (m, k)).astype(np.float64)
    b = rng.integers(-4, 5, (k, n)).astype(np.float64)
    c = np.full(m * n, np.nan, np.float32)
    kernel, pipe, bn = (ws_kernel, ws_pipeline, WS_BN) if ws else (mm_kernel, mm_pipeline, BN)
    (a_map,), _ = tensor_maps(pipe.specs[0], [_bf16(a)])
    (b_map,), _ = tensor_maps(pipe.specs[1], [_bf16(b).T])      # (N, K), N contiguous
    (c_dev,), back = tensor_maps(None, [c])
    threads = pipe.threads if ws else 128
    launch(kernel, MM_SIG, (threads, 1), (-(-m // BM), -(-n // bn)), threads,
           pipe.shared_bytes, (a_map, b_map, c_dev, m, n, k))
    return bool(np.array_equal(back(0).reshape(m, n), (a @ b).astype(np.float32)))


def sim_maps(spec, arrays):
    """(the kernel's arguments, fetch(i)): tensor maps of the simulator, or the array."""
    args = [a if spec is None else spec.tensor_map(a) for a in arrays]
    return args, lambda i: arrays[i]


def sim_launch(fn, signature, bounds, grid, block, shared, args):
    cuda.jit(fn)[grid, block, 0, shared](*args)


def gpu_maps(spec, arrays):
    dev = [cuda.to_device(a) for a in arrays]       # (B's transposed view keeps its strides)
    args = [d if spec is None else spec.tensor_map(d) for d in dev]
    gpu_maps.keep = getattr(gpu_maps, "keep", []) + dev     # alive until the kernels ran
    return args, lambda i: dev[i].copy_to_host()


def gpu_launch(fn, signature, bounds, grid, block, shared, args):
    from gemm.arch.smem import allow_dynamic_shared
    kernel = cuda.jit(signature, **({"launch_bounds": bounds} if bounds else {}))(fn)
    allow_dynamic_shared(kernel, shared)
    kernel[grid, block, 0, shared](*args)
    cuda.synchronize()


EW_SIG = "void(uint64[::1], uint64[::1], uint64[::1], int64, int64, int64)"
MM_SIG = "void(uint64[::1], uint64[::1], float32[::1], int64, int64, int64)"


def run_all(seed, maps, launch):
    return [check_elementwise(seed, maps, launch),
            check_matmul(seed + 1, maps, launch, ws=False),
            check_matmul(seed + 2, maps, launch, ws=True)]


def test_pipelines_are_exact_in_the_simulator():
    from simcase import simulator_report
    seed = int.from_bytes(os.urandom(4), "little")
    report = simulator_report(__file__, seed)
    assert report == [True, True, True], (seed, report)


@pytest.mark.parametrize("name", ["elementwise", "matmul", "warp_specialized"])
def test_pipelines_compile_for_sm90_without_local_memory(name):
    fn, sig = {"elementwise": (ew_kernel, EW_SIG), "matmul": (mm_kernel, MM_SIG),
               "warp_specialized": (ws_kernel, MM_SIG)}[name]
    ptx = cuda.compile_ptx(fn, sig, cc=(9, 0))[0]
    assert ".local" not in ptx
    dims = "3d" if name == "elementwise" else "2d"                      # (a batch: 3-D)
    assert f"cp.async.bulk.tensor.{dims}.shared::cluster.global" in ptx  # TMA loads
    if name == "elementwise":
        assert "cp.async.bulk.tensor.3d.global.shared" in ptx               # and a store
    else:
        wgmma = ptx.count("wgmma.mma_async.sync.aligned")   # (k, m) blocks of one atom a
        assert 0 < wgmma and wgmma % (BK // 16 * (BM // 64)) == 0, wgmma    # copy of the loop
    if name == "warp_specialized":
        assert "setmaxnreg.dec.sync.aligned.u32 40" in ptx
        assert f"setmaxnreg.inc.sync.aligned.u32 {ws_pipeline.compute_registers}" in ptx


def _body(idx, a, carry):
    pass


SPEC = BlockSpec((64, 64), lambda k: (0, k))


@pytest.mark.parametrize("call, error, text", [
    (lambda: BlockSpec((64,), lambda k: (0, k)), ValueError, "block_shape"),
    (lambda: BlockSpec((64, 64), lambda k: (0, k), bits=8), ValueError, "bits"),
    (lambda: BlockSpec((64, 64), lambda k: (0, k), Layout((64, 32))), LayoutError, "64 x 64"),
    (lambda: BlockSpec((64, 64), lambda k: (0, k), Layout((64, 64), (2, 128))), LayoutError,
     "TMA"),
    (lambda: emit_pipeline(_body, grid=(4,), in_specs=[SPEC], max_concurrent_steps=2,
                           delay_release=2), ValueError, "delay_release"),
    (lambda: emit_pipeline(_body, grid=(4,), in_specs=[SPEC, SPEC]), TypeError,
     "4 parameters, not 3"),
    (lambda: emit_pipeline(_body, grid=4, in_specs=[SPEC]), ValueError, "grid"),
    (lambda: emit_pipeline(_body, grid=(4,), in_specs=[SPEC], max_concurrent_steps=0),
     ValueError, "max_concurrent_steps"),
    (lambda: emit_pipeline(_body, grid=(4, 4), in_specs=[SPEC]), TypeError, "index_map"),
    (lambda: emit_pipeline(_body, grid=(4,), in_specs=["a"]), TypeError, "BlockSpecs"),
    (lambda: emit_pipeline_warp_specialized(_body, grid=(4,), in_specs=[SPEC],
                                            num_compute_wgs=4), ValueError, "num_compute_wgs"),
    (lambda: emit_pipeline_warp_specialized(_body, grid=(4,), in_specs=[SPEC],
                                            memory_registers=44), ValueError, "memory_regis"),
    (lambda: emit_pipeline_warp_specialized(_body, grid=(4,), in_specs=[SPEC], wg_axis="w"),
     ValueError, "wg_axis"),
    (lambda: emit_pipeline_warp_specialized(_body, grid=(4,), in_specs=[SPEC],
                                            out_specs=[SPEC]), ValueError, "out_specs"),
    (lambda: emit_pipeline_warp_specialized(_body, grid=(4,), in_specs=[SPEC],
                                            compute_context=lambda run: 0), TypeError,
     "compute_context"),
])
def test_bad_arguments_are_refused(call, error, text):
    with pytest.raises(error, match=text):
        call()


def test_tensor_maps_refuse_arrays_that_tma_cannot_read():
    with pytest.raises(ValueError, match="contiguous"):
        SPEC.tensor_map(np.zeros((64, 64), np.uint16).T)
    with pytest.raises(ValueError, match="16-bit"):
        SPEC.tensor_map(np.zeros((64, 64), np.float32))
    with pytest.raises(ValueError, match="2-D"):
        SPEC.tensor_map(np.zeros(64, np.uint16))


@pytest.mark.gpu
def test_pipelines_are_exact_on_a_hopper_gpu():
    from gpucase import require_hopper
    require_hopper()
    seed = int.from_bytes(os.urandom(4), "little")
    assert run_all(seed, gpu_maps, gpu_launch) == [True, True, True], seed


if __name__ == "__main__":
    from simcase import switch_threads_often
    switch_threads_often()
    print(json.dumps(run_all(int(sys.argv[1]), sim_maps, sim_launch)))
