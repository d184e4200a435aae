# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 7. Hopper in `gemm.cute`: swizzled stages, TMA boxes, wgmma
#
# On Hopper the operands of a GEMM never pass through registers: TMA copies a box of global
# memory into shared memory, swizzled, and wgmma reads A and B from there through 64-bit
# descriptors. Both only work if the shared layout is one of CuTe's GMMA layouts, and the
# descriptor's strides and swizzle match it. In `gemm.cute` the layout is the one source:
# the TMA copy, the descriptors and the kernel's own loads and stores are all derived from it.
#
# This notebook draws the pieces of the SM90 GEMM that `gemm.matmul(...,
# kernel="cute_hopper")` runs (`gemm/hopper/cute_gemm.py`), then runs one warpgroup's
# wgmma written with them: in numba's CUDA simulator without a GPU (checked against numpy),
# on a GPU of compute capability 9.x otherwise.

# %%
from gemm._env import use_simulator_without_gpu     # imports no numba

SIMULATOR = use_simulator_without_gpu()     # before anything imports numba
print("numba's CUDA simulator" if SIMULATOR else "a CUDA GPU")

# %% [markdown]
# ## A stage: the 128-byte swizzle atom, tiled
#
# `Layout_K_SW128_Atom(16)` is 8 rows of 64 bf16 values (128 bytes each), K contiguous,
# with `Swizzle<3,3,3>`: the eight 16-byte chunks of row r are permuted by XOR with r. A
# stage of a (128 x 64) block of A is that atom tiled by `tile_to_shape`. The banks each
# element lands in show why: a column of 8 rows, which a thread group reads together, hits
# 8 different groups of banks.

# %%
from layoutalg import Layout, make_tiled_mma, tile_to_shape
from layoutalg.atom import SM90_64xNx16_F32BF16BF16_SS
from layoutalg.atom.gmma import Layout_K_SW128_Atom, gmma_descriptor
from layoutalg.atom.tma import make_tma_copy
from layoutalg.viz import svg_swizzle_banks, svg_tv

atom = Layout_K_SW128_Atom(16)
stage = tile_to_shape(atom, (128, 64))
print("atom: ", atom)
print("stage:", stage)
svg_swizzle_banks(atom, element_bytes=2, highlight=[(r, 0) for r in range(8)])

# %% [markdown]
# ## The TMA copy of the stage
#
# `make_tma_copy` reads the box TMA moves and the shared offsets of the boxes off the stage
# layout (for the 128-byte swizzle a box is at most 128 bytes wide): here one box of 64 x
# 128 rows fills the whole stage. In a kernel, `copy(tma, tensor_map, (mn, k), dst, bars,
# bar)` issues one `cp.async.bulk.tensor` per box.

# %%
tma = make_tma_copy((128, 64), (64, 1), stage, 16)
print("box (contiguous first):", tma.box, " swizzle:", tma.swizzle, "bytes:", tma.bytes)
for box in tma.boxes:
    print("  box at coordinates", box.coords, "-> shared element", box.smem_offset)

# %% [markdown]
# ## The wgmma descriptors
#
# A wgmma of bf16 reads a 64 x 16 slice of A. `gmma_descriptor` reads the slice's layout and
# says where the 8-row core matrices are: the start, the leading and stride byte offsets,
# and the swizzle. Each k-block starts 32 bytes further along the 128-byte row, inside the
# swizzle (the hardware swizzles the address, as the tensor does its offsets); each 64-row
# half of the stage is 8 KiB further.

# %%
for m_block in range(2):
    for k_block in range(4):
        d = gmma_descriptor(stage, 16, "K", k_block=k_block, mn_block=m_block, shape=(64, 16))
        print(f"rows {64 * m_block:3}+, k-block {k_block}: start {d.start:5} B, "
              f"LBO {d.lbo}, SBO {d.sbo}, swizzle {d.swizzle}")

# %% [markdown]
# ## The accumulators
#
# The 128 threads of the warpgroup hold the 64 x N result as the atom's C layout: warp w has
# rows 16w..16w+15, each thread two adjacent columns of every 8, in two rows 8 apart. Here
# N = 8: each thread holds 4 values.

# %%
mma_atom = SM90_64xNx16_F32BF16BF16_SS(8)
svg_tv(mma_atom.layout_C, (64, 8), title="wgmma m64n8 accumulators: (thread, value) -> (m, n)")

# %% [markdown]
# ## One warpgroup's product, written with these
#
# The kernel stores A (128 x 64) and B (16 x 64) into swizzled stages through the tensors
# (the same swizzle TMA would apply), multiplies them with `gemm(mma, acc, partition_A(thr,
# sA), partition_B(thr, sB))` (two m-blocks by four k-blocks of wgmma, their descriptors
# derived from the stages' layouts at compile time), and writes the accumulators out through
# `partition_C`. Small integers keep every product exact in float32: the result must equal
# numpy's.

# %%
import numpy as np
from numba import cuda, float32, uint16

from gemm import arch
from gemm.cute import (copy, fill, gemm, get_slice, make_fragment_like, make_shared_tensor,
                       make_tensor, partition_A, partition_B, partition_C, warpgroup_arrive,
                       warpgroup_commit_batch, warpgroup_wait)

M, N, K = 128, 16, 64
MMA = make_tiled_mma(SM90_64xNx16_F32BF16BF16_SS(N))
SA, SB = stage, tile_to_shape(atom, (N, K))
GA, GB, GC = Layout((M, K), (K, 1)), Layout((N, K), (K, 1)), Layout((M, N), (N, 1))


def warpgroup_gemm(a, b, c):
    t = cuda.threadIdx.x
    sA, sB = make_shared_tensor(uint16, SA), make_shared_tensor(uint16, SB)
    gA, gB, gC = make_tensor(a, GA), make_tensor(b, GB), make_tensor(c, GC)
    for i in range(t, M * K, 128):
        sA[i % M, i // M] = gA[i % M, i // M]
    for i in range(t, N * K, 128):
        sB[i % N, i // N] = gB[i % N, i // N]
    arch.fence_proxy_async()                    # the stores, seen by wgmma
    cuda.syncthreads()
    thr = get_slice(MMA, t)
    tCgC = partition_C(thr, gC)
    acc = make_fragment_like(tCgC, float32)
    fill(acc, 0.0)
    warpgroup_arrive()
    gemm(MMA, acc, partition_A(thr, sA), partition_B(thr, sB))
    warpgroup_commit_batch()
    warpgroup_wait(0)
    copy(acc, tCgC)


def bf16_bits(x):
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


rng = np.random.default_rng(7)
a = rng.integers(-4, 5, (M, K)).astype(np.float32)
b = rng.integers(-4, 5, (N, K)).astype(np.float32)
c = np.full(M * N, np.nan, np.float32)
if SIMULATOR or cuda.get_current_device().compute_capability[0] == 9:
    cuda.jit(warpgroup_gemm)[1, 128](bf16_bits(a).ravel(), bf16_bits(b).ravel(), c)
    print("A @ B^T exact:", np.array_equal(c.reshape(M, N), a @ b.T))
    assert np.array_equal(c.reshape(M, N), a @ b.T)
else:
    print("wgmma needs compute capability 9.x: not run on this GPU")

# %% [markdown]
# The library's SM90 GEMM is this, grown: a ring of such stages fed by TMA from a producer
# warpgroup (`gemm.cute.pipeline`), consumer warpgroups multiplying as above, persistent
# tiles, and an epilogue that stages the accumulators in swizzled pieces and stores them with
# TMA: `gemm.matmul(A, B, kernel="cute_hopper")`, its figures in `benchmarks/RESULTS.md`, "The
# SM90 GEMM written with gemm.cute".
