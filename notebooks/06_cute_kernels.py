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
# # 6. Writing a kernel with the algebra: `gemm.cute`
#
# The other notebooks show what `gemm` builds kernels from. This one writes a kernel by hand,
# in CuTe's vocabulary, inside `numba.cuda.jit`: layouts and tensors are values of the kernel,
# `local_tile` cuts a block's tile, `partition_S/D/A/B/C` give a thread its share of it,
# `copy` and `gemm` move and multiply fragments. The layouts are compile-time constants (they
# live in numba's types), so every index below becomes constant arithmetic, and the register
# fragments stay in registers.
#
# The kernel is the first of MoYe.jl's two pipelines (the seed's "prefetch" kernel), line for
# line. Next to its code come the pictures of the layouts it uses: what each thread copies
# and what each thread multiplies.
#
# **GPU or simulator.** As in notebook 3, the first cell picks numba's CUDA simulator when no
# GPU is usable, before anything imports numba. In the simulator the same kernel runs as
# Python on a small problem (a 32x16x8 tile on 8x4 threads), and is checked against numpy. On
# a GPU it runs in the seed's configuration (128x128x8 tiles, 16x16 threads) at 2048^3, beside
# gemm.matmul's kernel of the same pipeline.

# %%
from gemm._env import use_simulator_without_gpu     # imports no numba

SIMULATOR = use_simulator_without_gpu()     # before anything imports numba
print("numba's CUDA simulator (a small problem, checked)" if SIMULATOR
      else "a CUDA GPU (the seed's configuration, checked and timed)")

# %%
import numpy as np
from numba import cuda, float32

from layoutalg import Layout, make_tiled_copy, make_tiled_mma
from layoutalg.atom.copy import UniversalCopy
from layoutalg.atom.mma import UniversalFMA
from gemm.cute import (copy, fill, gemm, get_slice, local_tile, make_fragment_like,
                                  make_shared_tensor, make_tensor, partition_A, partition_B,
                                  partition_C, partition_D, partition_S, static)
from layoutalg.viz import svg_layout, svg_tv_layout

# %% [markdown]
# ## The kernel
#
# MoYe's operands are column-major: A is (M, K), B is given as (N, K), C is (M, N). The
# problem size, the tiles and the thread layouts are closure constants of the kernel, so
# numba compiles one kernel per configuration and size.
#
# - `sA`, `sB`: shared tensors of the padded layouts `(bM, bK):(1, bM + 1)`.
# - `gA = local_tile(mA, (bM, bK), (blockIdx.x, None))`: the block's rows of A, all its
#   k-tiles (the `None` is CuTe's `_`: keep that mode).
# - `partition_S` / `partition_D` of the tiled copy: the values a thread copies from global to
#   shared memory; `partition_A/B/C` of the tiled MMA: the values it multiplies.
# - Each k-tile: copy shared -> registers, `syncthreads`, start the copy of the next k-tile
#   into the same shared tile, then the FMAs of this one from registers.

# %%
def moye_prefetch(M, N, K, tile, copy_threads, mma_threads):
    """The seed's first pipeline for a static (M, N, K): (kernel, grid, threads, the
    layouts it uses)."""
    bM, bN, bK = tile
    MA, MB, MC = Layout((M, K), (1, M)), Layout((N, K), (1, N)), Layout((M, N), (1, M))
    SA, SB = Layout((bM, bK), (1, bM + 1)), Layout((bN, bK), (1, bN + 1))
    TILE_A, TILE_B, TILE_C = static((bM, bK)), static((bN, bK)), static((bM, bN))
    COPY = make_tiled_copy(UniversalCopy(32, np.float32), Layout(copy_threads), Layout((1, 1)))
    MMA = make_tiled_mma(UniversalFMA(np.float32), Layout(mma_threads))
    K_TILES = K // bK

    def matmul_kernel(A, B, C):
        sA = make_shared_tensor(float32, SA)
        sB = make_shared_tensor(float32, SB)
        mA, mB, mC = make_tensor(A, MA), make_tensor(B, MB), make_tensor(C, MC)

        gA = local_tile(mA, TILE_A, (cuda.blockIdx.x, None))       # (bM, bK, k)
        gB = local_tile(mB, TILE_B, (cuda.blockIdx.y, None))       # (bN, bK, k)
        gC = local_tile(mC, TILE_C, (cuda.blockIdx.x, cuda.blockIdx.y))

        thr_copy = get_slice(COPY, cuda.threadIdx.x)
        tAgA, tAsA = partition_S(thr_copy, gA), partition_D(thr_copy, sA)
        tBgB, tBsB = partition_S(thr_copy, gB), partition_D(thr_copy, sB)
        copy(COPY, tAgA[None, None, None, 0], tAsA)                 # k-tile 0
        copy(COPY, tBgB[None, None, None, 0], tBsB)

        thr_mma = get_slice(MMA, cuda.threadIdx.x)
        tCsA, tCsB = partition_A(thr_mma, sA), partition_B(thr_mma, sB)
        tCgC = partition_C(thr_mma, gC)
        tCrA = make_fragment_like(tCsA, float32)                    # registers
        tCrB = make_fragment_like(tCsB, float32)
        tCrC = make_fragment_like(tCgC, float32)
        fill(tCrC, 0)

        for k in range(K_TILES):
            cuda.syncthreads()
            copy(tCsA, tCrA)                                        # shared -> registers
            copy(tCsB, tCrB)
            cuda.syncthreads()
            if k + 1 < K_TILES:                                     # the next k-tile
                copy(COPY, tAgA[None, None, None, k + 1], tAsA)
                copy(COPY, tBgB[None, None, None, k + 1], tBsB)
            gemm(tCrC, tCrA, tCrB)                                  # FMAs from registers

        copy(tCrC, tCgC)

    layouts = dict(SA=SA, COPY=COPY, MMA=MMA)
    return matmul_kernel, (M // bM, N // bN), mma_threads[0] * mma_threads[1], layouts


# %% [markdown]
# ## Its layouts, drawn
#
# The small configuration (a 32x16x8 tile, 8x4 threads) keeps the pictures readable; the
# seed's is the same picture, larger. The shared tile of A, `(32, 8):(1, 33)`: each column is
# padded by one element, so that a row of the tile (a k) starts at a different bank.

# %%
SMALL = dict(tile=(32, 16, 8), copy_threads=(8, 4), mma_threads=(8, 4))
_, _, _, small = moye_prefetch(64, 32, 16, **SMALL)
svg_layout(small["SA"], title="sA: (32, 8):(1, 33)")

# %% [markdown]
# The tiled copy: which thread (T) copies which element of a (32, 8) tile of A, and as
# which of its values (V). Thread t takes row t % 8 and column t // 8 of an 8x4 block, then
# the block repeats over the tile.

# %%
svg_tv_layout(small["COPY"])

# %% [markdown]
# The tiled MMA (UniversalFMA on 8x4 threads): the values of A, B and C each thread holds.
# Thread t multiplies rows t % 8 (+ 8 i) of A by columns t // 8 (+ 4 j) of B, into those of C.

# %%
svg_tv_layout(small["MMA"])

# %% [markdown]
# ## Run it
#
# Fresh random operands, C poisoned with NaN first, compared with numpy in float64.

# %%
def run(M, N, K, config):
    """(max relative error, the launch) of the kernel on fresh operands."""
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(np.float32)
    bt = rng.standard_normal((N, K)).astype(np.float32)                 # B as (N, K)
    dA, dB = cuda.to_device(a.ravel(order="F")), cuda.to_device(bt.ravel(order="F"))
    dC = cuda.to_device(np.full(M * N, np.nan, np.float32))
    kernel, grid, threads, _ = moye_prefetch(M, N, K, **config)
    jitted = cuda.jit(kernel)

    def launch():
        jitted[grid, threads](dA, dB, dC)
    launch()
    got = dC.copy_to_host().reshape(N, M).T
    ref = a.astype(np.float64) @ bt.T.astype(np.float64)
    bound = np.abs(a).astype(np.float64) @ np.abs(bt.T).astype(np.float64)
    return float(np.nan_to_num(np.abs(got - ref) / bound, nan=np.inf).max()), launch, jitted


if SIMULATOR:
    err, _, _ = run(64, 32, 16, SMALL)
else:
    SEED = dict(tile=(128, 128, 8), copy_threads=(32, 8), mma_threads=(16, 16))
    err, launch, jitted = run(2048, 2048, 2048, SEED)
print(f"max |C - A B| / (|A| |B|) = {err:.1e}")
assert err < 1e-5

# %% [markdown]
# On a GPU: the time of the kernel beside gemm.matmul's kernel of the same pipeline and
# configuration (`gemm.matmul(..., kernel="prefetch")`: the same code with run-time shapes
# and predicated partial tiles, `gemm.cute_kernels`), and its registers (no local memory:
# the fragments are registers). `benchmarks/cute_moye.py` measures both seed kernels both
# ways (`benchmarks/RESULTS.md`, "Kernels in CuTe's vocabulary").

# %%
if not SIMULATOR:
    from gemm import matmul

    def ms(fn, reps=20):
        fn()
        cuda.synchronize()
        start, stop = cuda.event(), cuda.event()
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        return cuda.event_elapsed_time(start, stop) / reps

    n = 2048                # the cute kernel's operand majors: A and C column-major, B (K, N)
    A = cuda.to_device(np.asfortranarray(np.random.rand(n, n).astype(np.float32)))
    B = cuda.to_device(np.random.rand(n, n).astype(np.float32))
    C = cuda.device_array((n, n), np.float32, order="F")
    flops = 2 * n ** 3
    regs = jitted.get_regs_per_thread()
    regs = regs if isinstance(regs, int) else max(regs.values())
    print(f"cute kernel:      {flops / ms(launch) / 1e9:.1f} TFLOP/s, {regs} registers")
    print(f"gemm.matmul's:    "
          f"{flops / ms(lambda: matmul(A, B, C, kernel='prefetch')) / 1e9:.1f} TFLOP/s")
else:
    print("the simulator runs kernels as Python: nothing to time")

# %% [markdown]
# ## Run-time shapes and partial tiles
#
# The kernel above is compiled for one size. A library kernel takes the size at run time:
# `make_layout((M, K), (ONE, lda))` builds a layout in the kernel from run-time integers
# (`ONE = static(1)` marks the static unit stride; numba types every other integer of a
# tuple as a run-time value, as C++ CuTe does with plain ints). Tiles and partitions of it
# keep static shapes; their strides and offsets compute with M, K and lda.
#
# A tile that sticks out of the matrix is predicated as in CuTe: an identity tensor
# (`make_identity_tensor((M, N))`, whose element at each coordinate *is* that coordinate) is
# tiled and partitioned like the data, so each thread knows the coordinates of its values, and
# `elem_less(crd, (M, N))` says which are inside. `copy_if` and `axpby(alpha, x, beta, y,
# coords, bound)` take such predicates. The kernel below scales a matrix of any size by
# tiles; `gemm.matmul(kernel="cute_prefetch")` and `"cute_double_buffer"` are the seed's two
# pipelines written this way (`gemm/cute_kernels.py`).

# %%
from gemm.cute import (elem_less, local_partition, make_identity_tensor,  # noqa: E402
                                  make_layout, size)

ONE = static(1)
TILE = static((16, 8))
THREADS = Layout((8, 4))                    # 32 threads, each a (2, 2) share of a 16 x 8 tile


def scale_any_shape(src, dst, M, N, lds, factor):
    """dst (M, N), column-major, = factor * src (M, N), row-major with leading dimension lds."""
    bx, by, t = cuda.blockIdx.x, cuda.blockIdx.y, cuda.threadIdx.x
    mS = make_tensor(src, make_layout((M, N), (lds, ONE)))       # run-time extents, strides
    mD = make_tensor(dst, make_layout((M, N)))                   # column-major by default
    tS = local_partition(local_tile(mS, TILE, (bx, by)), THREADS, t)
    tD = local_partition(local_tile(mD, TILE, (bx, by)), THREADS, t)
    tC = local_partition(local_tile(make_identity_tensor((M, N)), TILE, (bx, by)), THREADS, t)
    for i in range(size(tD)):                                    # 4: a static shape
        if elem_less(tC[i], (M, N)):
            tD[i] = factor * tS[i]


M, N, LDS = 37, 21, 24                      # partial tiles in both modes, a padded row
src = np.random.rand(M, LDS).astype(np.float32)
dst = cuda.to_device(np.full(M * N, np.nan, np.float32))
grid = (-(-M // 16), -(-N // 8))
cuda.jit(scale_any_shape)[grid, 32](cuda.to_device(src.ravel()), dst, M, N, LDS, 3.0)
got = dst.copy_to_host().reshape(N, M).T
print("every element right:", np.array_equal(got, 3.0 * src[:, :N]))
assert np.array_equal(got, 3.0 * src[:, :N])
