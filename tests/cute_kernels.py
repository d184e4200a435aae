"""Kernels written with gemm.cute (layouts and tensors in the kernel), shared by the
simulator, PTX and GPU tests: a transpose through two layouts, and a small GEMM whose A and B
tiles go through shared memory as tensors of padded layouts."""

import numpy as np
from numba import cuda, float32

from layoutalg import Layout
from gemm.cute import (cosize, local_partition, local_tile, make_tensor, size,
                                  static)

ROW = Layout((4, 8), (8, 1))                  # 4 x 8, row-major
COL = Layout((4, 8), (1, 4))                  # 4 x 8, column-major
ODD = Layout((3, (5, 2)), (10, (1, 5)))       # a hierarchical mode, extents 3 and 5

M, N, K = 16, 24, 12
LA = Layout((M, K), (K, 1))                   # A row-major
LB = Layout((K, N), (1, K))                   # B stored as (N, K) row-major: K-major
LC = Layout((M, N), (1, M))                   # C column-major
SA = Layout((M, K), (1, M + 1))               # shared tiles, padded columns
SB = Layout((K, N), (N + 2, 1))
SA_ELEMENTS, SB_ELEMENTS = cosize(SA), cosize(SB)     # shared arrays need constant sizes


def transpose(src, dst, odd, base):
    """dst (COL) = src (ROW, from element base) + 1000 * odd's offset of the thread's index."""
    t = cuda.threadIdx.x
    S = make_tensor(src, ROW, base)
    D = make_tensor(dst, COL)
    if t < size(ROW):
        i = t % 4
        j = t // 4
        D[i, j] = S[(i, j)] + float32(1000 * ODD(t)) + float32(cosize(ODD))
        odd[t] = ODD(t)


def small_gemm(a, b, c):
    """C = A @ B for the fixed (M, N, K): A and B copied to shared tensors, then the block's
    threads take the elements of C in turn."""
    sa = cuda.shared.array(SA_ELEMENTS, float32)
    sb = cuda.shared.array(SB_ELEMENTS, float32)
    gA, gB, gC = make_tensor(a, LA), make_tensor(b, LB), make_tensor(c, LC)
    tA, tB = make_tensor(sa, SA), make_tensor(sb, SB)
    t = cuda.threadIdx.x
    for e in range(t, size(LA), cuda.blockDim.x):
        tA[e] = gA[e]                      # a 1-D index: colexicographic in both
    for e in range(t, size(LB), cuda.blockDim.x):
        tB[e] = gB[e]
    cuda.syncthreads()
    for e in range(t, size(LC), cuda.blockDim.x):
        acc = float32(0)
        for k in range(K):
            acc += tA[e % M, k] * tB[k, e // M]
        gC[e] = acc


def transpose_reference(src, base):
    out = np.zeros(32, np.float32)
    odd = np.zeros(32, np.uint32)
    for t in range(32):
        i, j = t % 4, t // 4
        odd[t] = ODD(t)
        out[COL((i, j))] = src[base + ROW((i, j))] + 1000 * ODD(t) + cosize(ODD)
    return out, odd


def operands(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    return a, b


def run_small_gemm(seed):
    """max |C - A @ B| of small_gemm on fresh operands (A row-major, B K-major, C
    column-major), C poisoned with NaN first."""
    a, b = operands(seed)
    c = np.full(M * N, np.nan, np.float32)
    dA, dB = cuda.to_device(a.ravel()), cuda.to_device(np.ascontiguousarray(b.T).ravel())
    dC = cuda.to_device(c)
    cuda.jit(small_gemm)[1, 128](dA, dB, dC)
    got = dC.copy_to_host().reshape(N, M).T
    return float(np.nan_to_num(np.abs(got - a.astype(np.float64) @ b), nan=np.inf).max())


def run_transpose(seed):
    """(max error, offsets right) of transpose on fresh data."""
    rng = np.random.default_rng(seed)
    src = rng.standard_normal(40).astype(np.float32)
    dst = cuda.to_device(np.full(32, np.nan, np.float32))
    odd = cuda.to_device(np.zeros(32, np.uint32))
    cuda.jit(transpose)[1, 64](cuda.to_device(src), dst, odd, 5)
    ref, ref_odd = transpose_reference(src, 5)
    err = float(np.nan_to_num(np.abs(dst.copy_to_host() - ref), nan=np.inf).max())
    return err, bool((odd.copy_to_host() == ref_odd).all())


# --- tiles and partitions: MoYe's copy of a block's tile by a thread layout ------------------

GM, GK = 96, 40                               # a (GM, GK) row-major matrix
GL = Layout((GM, GK), (GK, 1))
OL = Layout((GM, GK), (1, GM))                # copied into a column-major one
TILE = static((32, 8))
THREADS = Layout((8, 4))                      # 32 threads, column-major over the tile


def tiled_copy(src, dst):
    """Block (bx, by) copies tile (bx, by) of src to dst, each thread its partition of it;
    column k of its partition (the slice T[None, k]) in a loop."""
    bx, by, t = cuda.blockIdx.x, cuda.blockIdx.y, cuda.threadIdx.x
    gS = local_tile(make_tensor(src, GL), TILE, (bx, by))        # (32, 8)
    gD = local_tile(make_tensor(dst, OL), TILE, (bx, by))
    tS = local_partition(gS, THREADS, t)                         # (4, 2)
    tD = local_partition(gD, THREADS, t)
    for k in range(size(tS) // 4):
        col_s, col_d = tS[None, k], tD[None, k]                  # (4,)
        for i in range(4):
            col_d[i] = col_s[i]


def run_tiled_copy(seed):
    """max error of tiled_copy on fresh data (the out poisoned with NaN)."""
    rng = np.random.default_rng(seed)
    src = rng.standard_normal(GM * GK).astype(np.float32)
    dst = cuda.to_device(np.full(GM * GK, np.nan, np.float32))
    cuda.jit(tiled_copy)[(GM // 32, GK // 8), 32](cuda.to_device(src), dst)
    got = dst.copy_to_host().reshape(GK, GM).T
    return float(np.nan_to_num(np.abs(got - src.reshape(GM, GK)), nan=np.inf).max())


# --- dynamic_range: its loops against Python's range -------------------------------------

from gemm.cute import dynamic_range  # noqa: E402

RANGES = [(0, 10, 1), (5, 5, 1), (7, 3, 1), (3, 100, 7), (0, 1, 5),
          (2 ** 32 - 5, 2 ** 32 - 1, 1), (2 ** 32 - 10, 2 ** 32 - 1, 4),
          (0, 2 ** 32 - 1, 2 ** 31), (2, 2 ** 32 - 1, 2 ** 32 - 2)]


def ranges(args, out):
    """Thread t: ``dynamic_range`` of ``args[t]`` (start, stop, step; thread 0, whose range
    starts at 0 by steps of 1, through the one-argument form) into ``out[t]``: the count of
    values, their sum and their last."""
    t = cuda.threadIdx.x
    if t >= args.shape[0]:
        return
    count, total, last = np.uint64(0), np.uint64(0), np.uint64(0)
    if t == 0:
        for i in dynamic_range(args[t, 1]):
            count, total, last = count + np.uint64(1), total + np.uint64(i), np.uint64(i)
    else:
        for i in dynamic_range(args[t, 0], args[t, 1], args[t, 2]):
            count, total, last = count + np.uint64(1), total + np.uint64(i), np.uint64(i)
    out[t, 0], out[t, 1], out[t, 2] = count, total, last


def run_ranges():
    """(got, want) for :data:`RANGES`: each range's count, sum and last value (0 when
    empty), from the kernel and from Python's range."""
    args = np.array(RANGES, np.uint32)
    out = cuda.to_device(np.full((len(RANGES), 3), 7, np.uint64))
    cuda.jit(ranges)[1, 32](cuda.to_device(args), out)
    want = np.array([(len(r), sum(r), r[-1] if len(r) else 0)
                     for r in (range(*a) for a in RANGES)], np.uint64)
    return out.copy_to_host(), want


# --- MoYe's first pipeline (the seed's "prefetch" kernel), line for line -------------------
# A static problem: MoYe's column-major A (M, K), B (N, K), C (M, N); the seed's tiles
# 128 x 128 x 8, copies over 32 x 8 threads, UniversalFMA over 16 x 16 threads.

from layoutalg import make_tiled_copy, make_tiled_mma  # noqa: E402
from layoutalg.atom.copy import SM80_CP_ASYNC_CACHEALWAYS, UniversalCopy  # noqa: E402
from gemm.arch import cp_async_wait_all  # noqa: E402
from layoutalg.atom.mma import UniversalFMA  # noqa: E402
from gemm.cute import (copy, fill, gemm, get_slice, make_fragment_like,  # noqa: E402
                                 make_shared_tensor, partition_A, partition_B, partition_C,
                                 partition_D, partition_S)

def moye_prefetch(M, N, K, tile=(128, 128, 8), copy_threads=(32, 8), mma_threads=(16, 16),
                  cp_async=False):
    """The kernel for a static (M, N, K) and its launch (grid, threads): the seed's
    configuration by default. The problem and the tiles are closure constants. Global ->
    shared copies: cp.async when ``cp_async`` (as the seed; the shared tiles are padded to
    bM + 1 as gemm's "prefetch" config, so one value (4 bytes) per cp.async: an 8-byte copy
    would be misaligned, which partition_D refuses), else the universal copy."""
    bM, bN, bK = tile
    if copy_threads[0] * copy_threads[1] != mma_threads[0] * mma_threads[1]:
        raise ValueError(f"moye_prefetch: the copies' {copy_threads} and the MMA's "
                         f"{mma_threads} threads differ in number")
    if M % bM or N % bN or K % bK:
        raise ValueError(f"moye_prefetch: ({M}, {N}, {K}) is not a multiple of the tile {tile}")
    MA, MB, MC = Layout((M, K), (1, M)), Layout((N, K), (1, N)), Layout((M, N), (1, M))
    SA_LAYOUT, SB_LAYOUT = Layout((bM, bK), (1, bM + 1)), Layout((bN, bK), (1, bN + 1))
    TILE_A, TILE_B, TILE_C = static((bM, bK)), static((bN, bK)), static((bM, bN))
    atom = SM80_CP_ASYNC_CACHEALWAYS(4, np.float32) if cp_async else UniversalCopy(32, np.float32)
    COPY_A = make_tiled_copy(atom, Layout(copy_threads), Layout((1, 1)))
    COPY_B = make_tiled_copy(atom, Layout(copy_threads), Layout((1, 1)))
    MMA_C = make_tiled_mma(UniversalFMA(np.float32), Layout(mma_threads))
    K_TILES = K // bK

    def matmul_kernel(A, B, C):
        sA = make_shared_tensor(float32, SA_LAYOUT)
        sB = make_shared_tensor(float32, SB_LAYOUT)

        mA = make_tensor(A, MA)
        mB = make_tensor(B, MB)
        mC = make_tensor(C, MC)

        gA = local_tile(mA, TILE_A, (cuda.blockIdx.x, None))
        gB = local_tile(mB, TILE_B, (cuda.blockIdx.y, None))
        gC = local_tile(mC, TILE_C, (cuda.blockIdx.x, cuda.blockIdx.y))

        # Copy partition
        thr_copy_a = get_slice(COPY_A, cuda.threadIdx.x)
        tAgA = partition_S(thr_copy_a, gA)                 # (CPY, CPY_M, CPY_K, k)
        tAsA = partition_D(thr_copy_a, sA)                 # (CPY, CPY_M, CPY_K)

        thr_copy_b = get_slice(COPY_B, cuda.threadIdx.x)
        tBgB = partition_S(thr_copy_b, gB)                 # (CPY, CPY_N, CPY_K, k)
        tBsB = partition_D(thr_copy_b, sB)                 # (CPY, CPY_N, CPY_K)

        # Copy gmem to smem for k_tile=0
        copy(COPY_A, tAgA[None, None, None, 0], tAsA)
        copy(COPY_B, tBgB[None, None, None, 0], tBsB)

        # MMA partition
        thr_mma = get_slice(MMA_C, cuda.threadIdx.x)
        tCsA = partition_A(thr_mma, sA)                    # (MMA, MMA_M, MMA_K)
        tCsB = partition_B(thr_mma, sB)                    # (MMA, MMA_N, MMA_K)
        tCgC = partition_C(thr_mma, gC)                    # (MMA, MMA_M, MMA_N)

        # MMA registers
        tCrA = make_fragment_like(tCsA, float32)           # (MMA, MMA_M, MMA_K)
        tCrB = make_fragment_like(tCsB, float32)           # (MMA, MMA_N, MMA_K)
        tCrC = make_fragment_like(tCgC, float32)           # (MMA, MMA_M, MMA_N)
        fill(tCrC, 0)

        for k in range(K_TILES):
            cp_async_wait_all()
            cuda.syncthreads()

            # Copy from smem to rmem
            copy(tCsA, tCrA)
            copy(tCsB, tCrB)
            cuda.syncthreads()

            if k + 1 < K_TILES:
                copy(COPY_A, tAgA[None, None, None, k + 1], tAsA)
                copy(COPY_B, tBgB[None, None, None, k + 1], tBsB)

            gemm(tCrC, tCrA, tCrB)

        copy(tCrC, tCgC)

    threads = mma_threads[0] * mma_threads[1]
    return matmul_kernel, (M // bM, N // bN), threads


def run_moye_prefetch(seed, M, N, K, **config):
    """max |C - A B| / (|A| |B|) of moye_prefetch on fresh operands, C poisoned with NaN."""
    return _run_moye(moye_prefetch, seed, M, N, K, config)


def _run_moye(make, seed, M, N, K, config):
    """max |C - A B| / (|A| |B|) of the kernel ``make(M, N, K, **config)`` builds, on fresh
    column-major operands (B given as (N, K)), C poisoned with NaN."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    bt = rng.standard_normal((N, K)).astype(np.float32)      # B as (N, K)
    dA = cuda.to_device(a.ravel(order="F"))
    dB = cuda.to_device(bt.ravel(order="F"))
    dC = cuda.to_device(np.full(M * N, np.nan, np.float32))
    kernel, grid, threads = make(M, N, K, **config)
    cuda.jit(kernel)[grid, threads](dA, dB, dC)
    got = dC.copy_to_host().reshape(N, M).T
    ref = a.astype(np.float64) @ bt.T.astype(np.float64)
    bound = np.abs(a).astype(np.float64) @ np.abs(bt.T).astype(np.float64)
    return float(np.nan_to_num(np.abs(got - ref) / bound, nan=np.inf).max())


# --- MoYe's second pipeline (the seed's double-buffered kernel), line for line -------------

from gemm.cute import static_range, unroll, unrolled  # noqa: E402
# Two shared buffers (bM, bK, 2) padded to bM + 2 (8-byte cp.async of two floats, as the
# seed's Float64 copies), register fragments double-buffered over k_block.

def moye_double_buffer(M, N, K, tile=(128, 128, 8), copy_threads=(32, 8), mma_threads=(32, 8)):
    """The seed's double-buffered kernel for a static (M, N, K), and its launch (grid,
    threads). Seed configuration by default: 128 x 128 x 8 tiles, cp.async of 8 bytes (two
    values) over 32 x 8 threads, UniversalFMA over 32 x 8 threads."""
    bM, bN, bK = tile
    if copy_threads[0] * copy_threads[1] != mma_threads[0] * mma_threads[1]:
        raise ValueError(f"moye_double_buffer: the copies' {copy_threads} and the MMA's "
                         f"{mma_threads} threads differ in number")
    if M % bM or N % bN or K % bK:
        raise ValueError(f"moye_double_buffer: ({M}, {N}, {K}) is not a multiple of the "
                         f"tile {tile}")
    MA, MB, MC = Layout((M, K), (1, M)), Layout((N, K), (1, N)), Layout((M, N), (1, M))
    sA_layout = Layout((bM, bK, 2), (1, bM + 2, (bM + 2) * bK))
    sB_layout = Layout((bN, bK, 2), (1, bN + 2, (bN + 2) * bK))
    TILE_A, TILE_B, TILE_C = static((bM, bK)), static((bN, bK)), static((bM, bN))
    atom = SM80_CP_ASYNC_CACHEALWAYS(8, np.float32)
    copy_A = make_tiled_copy(atom, Layout(copy_threads), Layout((2, 1)))
    copy_B = make_tiled_copy(atom, Layout(copy_threads), Layout((2, 1)))
    mma_C = make_tiled_mma(UniversalFMA(np.float32), Layout(mma_threads))
    K_BLOCKS = static_range(bK)             # the k-blocks of a tile (UniversalFMA: K 1 each)

    @unrolled
    def matmul_kernel(A, B, C):
        sA = make_shared_tensor(float32, sA_layout)        # (bM, bK, 2)
        sB = make_shared_tensor(float32, sB_layout)        # (bN, bK, 2)

        mA = make_tensor(A, MA)
        mB = make_tensor(B, MB)
        mC = make_tensor(C, MC)

        gA = local_tile(mA, TILE_A, (cuda.blockIdx.x, None))
        gB = local_tile(mB, TILE_B, (cuda.blockIdx.y, None))
        gC = local_tile(mC, TILE_C, (cuda.blockIdx.x, cuda.blockIdx.y))

        # Copy partition
        thr_copy_a = get_slice(copy_A, cuda.threadIdx.x)
        tAgA = partition_S(thr_copy_a, gA)                 # (CPY, CPY_M, CPY_K, k)
        tAsA = partition_D(thr_copy_a, sA)                 # (CPY, CPY_M, CPY_K, 2)

        thr_copy_b = get_slice(copy_B, cuda.threadIdx.x)
        tBgB = partition_S(thr_copy_b, gB)                 # (CPY, CPY_N, CPY_K, k)
        tBsB = partition_D(thr_copy_b, sB)                 # (CPY, CPY_N, CPY_K, 2)

        # Copy gmem to smem for k_tile=0
        copy(copy_A, tAgA[None, None, None, 0], tAsA[None, None, None, 0])
        copy(copy_B, tBgB[None, None, None, 0], tBsB[None, None, None, 0])

        # MMA partition
        thr_mma = get_slice(mma_C, cuda.threadIdx.x)
        tCsA = partition_A(thr_mma, sA)                    # (MMA, MMA_M, MMA_K, 2)
        tCsB = partition_B(thr_mma, sB)                    # (MMA, MMA_N, MMA_K, 2)
        tCgC = partition_C(thr_mma, gC)                    # (MMA, MMA_M, MMA_N)

        # MMA registers
        tCrA = make_fragment_like(tCsA[None, None, None, 0], float32)   # (MMA, MMA_M, MMA_K)
        tCrB = make_fragment_like(tCsB[None, None, None, 0], float32)   # (MMA, MMA_N, MMA_K)
        tCrC = make_fragment_like(tCgC, float32)                        # (MMA, MMA_M, MMA_N)
        fill(tCrC, 0)

        cp_async_wait_all()
        cuda.syncthreads()

        # Copy smem to rmem for k_block=0
        smem_read = 0
        smem_write = 1
        tCsA_p = tCsA[None, None, None, smem_read]
        tCsB_p = tCsB[None, None, None, smem_read]
        copy(tCsA_p[None, None, 0], tCrA[None, None, 0])
        copy(tCsB_p[None, None, 0], tCrB[None, None, 0])

        k_tile_max = size(tAgA[0, 0, 0, None])
        k_block_max = size(tCrA[0, 0, None])
        for k_tile in range(k_tile_max):
            for k_block in unroll(K_BLOCKS):                   # static: 0 .. k_block_max-1
                k_block_next = k_block + 1
                if k_block == k_block_max - 1:
                    cp_async_wait_all()
                    cuda.syncthreads()
                    tCsA_p = tCsA[None, None, None, smem_read]
                    tCsB_p = tCsB[None, None, None, smem_read]
                    k_block_next = 0

                copy(tCsA_p[None, None, k_block_next], tCrA[None, None, k_block_next])
                copy(tCsB_p[None, None, k_block_next], tCrB[None, None, k_block_next])

                if k_block == 0 and k_tile + 1 < k_tile_max:
                    copy(copy_A, tAgA[None, None, None, k_tile + 1],
                         tAsA[None, None, None, smem_write])
                    copy(copy_B, tBgB[None, None, None, k_tile + 1],
                         tBsB[None, None, None, smem_write])
                    smem_read, smem_write = smem_write, smem_read

                gemm(tCrC, tCrA[None, None, k_block], tCrB[None, None, k_block])

        copy(tCrC, tCgC)

    threads = mma_threads[0] * mma_threads[1]
    return matmul_kernel, (M // bM, N // bN), threads


def run_moye_double_buffer(seed, M, N, K, **config):
    """max |C - A B| / (|A| |B|) of moye_double_buffer on fresh operands, C poisoned."""
    return _run_moye(moye_double_buffer, seed, M, N, K, config)


# --- run-time shapes: make_layout, identity tensors, copy_if ------------------------------

from gemm.cute import (axpby, copy_if, elem_less,  # noqa: E402
                                 make_identity_tensor, make_layout)
from numba import int32  # noqa: E402

ONE = static(1)
ANY_TILE = static((16, 8))
ANY_COPY = make_tiled_copy(UniversalCopy(32, np.float32), Layout((8, 4)), Layout((1, 1)))
ANY_GROUPS = 16 * 8 // 32


def any_shape_copy(src, dst, M, N, lds, ldd):
    """dst (M, N), column-major with leading dimension ldd, = src (M, N), row-major with
    leading dimension lds, for any (M, N): block (bx, by) copies its (16, 8) tile with
    copy_if, the predicates from an identity tensor partitioned as the data."""
    bx, by, t = cuda.blockIdx.x, cuda.blockIdx.y, cuda.threadIdx.x
    mS = make_tensor(src, make_layout((M, N), (lds, ONE)))
    mD = make_tensor(dst, make_layout((M, N), (ONE, ldd)))
    thr = get_slice(ANY_COPY, t)
    tS = partition_S(thr, local_tile(mS, ANY_TILE, (bx, by)))      # (CPY, CPY_M, CPY_N)
    tD = partition_D(thr, local_tile(mD, ANY_TILE, (bx, by)))
    tC = partition_S(thr, local_tile(make_identity_tensor((M, N)), ANY_TILE, (bx, by)))
    pred = make_fragment_like(tD[0, None, None], int32)
    for r in range(ANY_GROUPS):
        pred[r] = elem_less(tC[r], (M, N))
    copy_if(ANY_COPY, pred, tS, tD)


def run_any_shape_copy(seed, m=37, n=21):
    """(every element copied, nothing outside written) of any_shape_copy on fresh data, a
    padded source and destination."""
    rng = np.random.default_rng(seed)
    lds, ldd = n + 3, m + 2
    src = rng.standard_normal(m * lds).astype(np.float32)
    out = np.full(n * ldd, np.nan, np.float32)
    dst = cuda.to_device(out)
    grid = (-(-m // 16), -(-n // 8))
    cuda.jit(any_shape_copy)[grid, 32](cuda.to_device(src), dst, m, n, lds, ldd)
    got = dst.copy_to_host().reshape(n, ldd).T
    inside = np.array_equal(got[:m], src.reshape(m, lds)[:, :n])
    return bool(inside), bool(np.isnan(got[m:]).all())


# --- tensor cores: gemm(tiled_mma, ...) issuing mma.sync -----------------------------------

from numba import uint16  # noqa: E402
from layoutalg.atom.mma import (SM80_16x8x8_F32TF32TF32F32_TN,  # noqa: E402
                                SM80_16x8x16_F32BF16BF16F32_TN, SM80_16x8x16_F32F16F16F32_TN)

# kind -> (tiled MMA over 2 x 2 warps, the fragments' element type: bits for 16-bit floats)
MMAS = {"tf32": (make_tiled_mma(SM80_16x8x8_F32TF32TF32F32_TN(), Layout((2, 2))), float32),
        "bf16": (make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN(), Layout((2, 2))), uint16),
        "f16": (make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN(), Layout((2, 2))), uint16)}
MMA_TF32 = MMAS["tf32"][0]
TM, TN, TK = 64, 32, 32                       # a warp: 2 x 2 atoms of 16 x 8, 2 or 4 k-blocks
TA = Layout((TM, TK), (TK, 1))                # A row-major
TB = Layout((TN, TK), (TK, 1))                # B as (N, K), K-major
TC = Layout((TM, TN), (1, TM))                # C column-major


def mma_tile(kind):
    """The kernel C = A B for one (TM, TN, TK) tile on the tensor cores with the ``kind``
    atom: each thread's partition_A/B/C of the tiled MMA loaded into register fragments,
    one gemm, stored back."""
    MMA, T = MMAS[kind]

    def kernel(a, b, c):
        thr = get_slice(MMA, cuda.threadIdx.x)
        tCgA = partition_A(thr, make_tensor(a, TA))            # (V_A, MMA_M, MMA_K)
        tCgB = partition_B(thr, make_tensor(b, TB))            # (V_B, MMA_N, MMA_K)
        tCgC = partition_C(thr, make_tensor(c, TC))            # (4, MMA_M, MMA_N)
        tCrA = make_fragment_like(tCgA, T)
        tCrB = make_fragment_like(tCgB, T)
        tCrC = make_fragment_like(tCgC, float32)
        copy(tCgA, tCrA)
        copy(tCgB, tCrB)
        fill(tCrC, 0)
        gemm(MMA, tCrC, tCrA, tCrB)
        copy(tCrC, tCgC)
    return kernel


def _as_bits(x, kind):
    """(the array the kernel reads, the values it stands for in float64) of float32 ``x``."""
    if kind == "tf32":
        return x, x.astype(np.float64)
    if kind == "f16":
        h = x.astype(np.float16)
        return h.view(np.uint16), h.astype(np.float64)
    from gemm.report import bfloat16_bits
    return bfloat16_bits(x)


def _relative_error(got, a64, bt64):
    """max |C - A B| / (|A| |B|) (a NaN left in C: inf)."""
    ref, bound = a64 @ bt64.T, np.abs(a64) @ np.abs(bt64.T)
    return float(np.nan_to_num(np.abs(got - ref) / bound, nan=np.inf).max())


def _run_tile(kernel, seed, kind):
    """max |C - A B| / (|A| |B|) of a one-tile kernel (TM x TN x TK, 128 threads) on fresh
    operands, C poisoned with NaN; for bf16 and f16 the reference multiplies the 16-bit
    values themselves."""
    rng = np.random.default_rng(seed)
    a, a64 = _as_bits(rng.standard_normal((TM, TK)).astype(np.float32), kind)
    bt, bt64 = _as_bits(rng.standard_normal((TN, TK)).astype(np.float32), kind)
    dC = cuda.to_device(np.full(TM * TN, np.nan, np.float32))
    cuda.jit(kernel)[1, 128](cuda.to_device(a.ravel()), cuda.to_device(bt.ravel()), dC)
    return _relative_error(dC.copy_to_host().reshape(TN, TM).T, a64, bt64)


def run_mma_tile(seed, kind="tf32"):
    """_run_tile of mma_tile(kind)."""
    return _run_tile(mma_tile(kind), seed, kind)


# --- ldmatrix: shared -> MMA fragments by make_tiled_copy_A/B and retile_D -----------------

from layoutalg.atom.copy import SM75_U32x2_LDSM_N, SM75_U32x4_LDSM_N  # noqa: E402
from layoutalg.tiled import make_tiled_copy_A, make_tiled_copy_B  # noqa: E402
from gemm.cute import retile_D  # noqa: E402

SA_ROWS = Layout((TM, TK), (TK + 8, 1))       # K-contiguous rows, 16-byte aligned, padded
SB_ROWS = Layout((TN, TK), (TK + 8, 1))


def ldmatrix_tile(kind):
    """mma_tile with the operands staged in shared memory and loaded into the MMA's
    fragments by ldmatrix (x4 for A, x2 for B: each thread holds 4 values of a B k-block):
    make_tiled_copy_A/B of the tiled MMA, partition_S of the
    shared tile, retile_D of the fragment (``kind``: "bf16" or "f16")."""
    MMA, T = MMAS[kind]
    COPY_A = make_tiled_copy_A(SM75_U32x4_LDSM_N(), MMA)
    COPY_B = make_tiled_copy_B(SM75_U32x2_LDSM_N(), MMA)

    def kernel(a, b, c):
        t = cuda.threadIdx.x
        sA, sB = make_shared_tensor(T, SA_ROWS), make_shared_tensor(T, SB_ROWS)
        gA, gB = make_tensor(a, TA), make_tensor(b, TB)
        for e in range(t, size(TA), cuda.blockDim.x):
            sA[e] = gA[e]
        for e in range(t, size(TB), cuda.blockDim.x):
            sB[e] = gB[e]
        cuda.syncthreads()
        thr = get_slice(MMA, t)
        tCgC = partition_C(thr, make_tensor(c, TC))
        tCrA = make_fragment_like(partition_A(thr, sA), T)     # (V_A, MMA_M, MMA_K)
        tCrB = make_fragment_like(partition_B(thr, sB), T)
        tCrC = make_fragment_like(tCgC, float32)
        copy_a, copy_b = get_slice(COPY_A, t), get_slice(COPY_B, t)
        copy(COPY_A, partition_S(copy_a, sA), retile_D(copy_a, tCrA))
        copy(COPY_B, partition_S(copy_b, sB), retile_D(copy_b, tCrB))
        fill(tCrC, 0)
        gemm(MMA, tCrC, tCrA, tCrB)
        copy(tCrC, tCgC)
    return kernel


def run_ldmatrix_tile(seed, kind="bf16"):
    """_run_tile of ldmatrix_tile(kind)."""
    return _run_tile(ldmatrix_tile(kind), seed, kind)


# --- an SM80 tensor-core GEMM in the vocabulary: cp.async, ldmatrix, mma.sync ---------------

from layoutalg.atom.copy import SM80_CP_ASYNC_CACHEGLOBAL  # noqa: E402
from gemm.arch import cp_async_commit  # noqa: E402


def sm80_gemm(kind="bf16", tile=(128, 128, 32), warps=(2, 2), group_m=1):
    """C (M, N) float32, column-major = A (M, K) @ B for 16-bit A row-major and B given as
    (N, K) row-major (both K-major, as CUTLASS's TN), run-time M, N, K and leading dimensions
    (K and both leading dimensions multiples of 8: 16-byte rows), and its launch: (kernel,
    threads, grid of (M, N)). Two shared stages of K-contiguous rows padded by 16 bytes
    (ldmatrix without bank conflicts), 16-byte cp.async copies predicated by identity
    tensors, ldmatrix into the MMA's fragments, mma.sync, an axpby epilogue. ``group_m`` > 1:
    a 1-D grid whose blocks run ``group_m`` tile rows at a time (the generated kernels'
    order, for L2 reuse), else a (tiles of M, tiles of N) grid."""
    bM, bN, bK = tile
    GROUP = group_m
    MMA, T = MMAS[kind]
    MMA = make_tiled_mma(MMA.atom, Layout(warps))
    threads = 32 * warps[0] * warps[1]
    S_A = Layout((bM, bK, 2), (bK + 8, 1, bM * (bK + 8)))
    S_B = Layout((bN, bK, 2), (bK + 8, 1, bN * (bK + 8)))
    along_k = bK // 8                             # 16-byte copies along a row
    G2S = make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, np.uint16),
                          Layout((threads // along_k, along_k), (along_k, 1)), Layout((1, 8)))
    LDSM_A = make_tiled_copy_A(SM75_U32x4_LDSM_N(), MMA)
    LDSM_B = make_tiled_copy_B(SM75_U32x2_LDSM_N(), MMA)
    TILE_A, TILE_B, TILE_C = static((bM, bK)), static((bN, bK)), static((bM, bN))
    GROUPS_A = static_range(bM * bK // 8 // threads)
    GROUPS_B = static_range(bN * bK // 8 // threads)
    K_BLOCKS = static_range(bK // 16)
    U = np.uint32

    @unrolled
    def kernel(A, B, C, M, N, K, lda, ldb, ldc, alpha, beta):
        bx, by, t = U(cuda.blockIdx.x), U(cuda.blockIdx.y), cuda.threadIdx.x
        if GROUP > 1:                 # tile rows in groups of GROUP, down the columns
            tiles_m = (M + U(bM - 1)) // U(bM)
            per_group = U(GROUP) * ((N + U(bN - 1)) // U(bN))
            first = (bx // per_group) * U(GROUP)
            rows = min(tiles_m - first, U(GROUP))
            by = (bx % per_group) // rows
            bx = first + (bx % per_group) % rows
        sA = make_shared_tensor(T, S_A)                       # (bM, bK, 2)
        sB = make_shared_tensor(T, S_B)                       # (bN, bK, 2)
        gA = local_tile(make_tensor(A, make_layout((M, K), (lda, ONE))), TILE_A, (bx, None))
        gB = local_tile(make_tensor(B, make_layout((N, K), (ldb, ONE))), TILE_B, (by, None))
        gC = local_tile(make_tensor(C, make_layout((M, N), (ONE, ldc))), TILE_C, (bx, by))
        cA = local_tile(make_identity_tensor((M, K)), TILE_A, (bx, None))
        cB = local_tile(make_identity_tensor((N, K)), TILE_B, (by, None))
        cC = local_tile(make_identity_tensor((M, N)), TILE_C, (bx, by))

        g2s = get_slice(G2S, t)
        tAgA, tAsA, tAcA = partition_S(g2s, gA), partition_D(g2s, sA), partition_S(g2s, cA)
        tBgB, tBsB, tBcB = partition_S(g2s, gB), partition_D(g2s, sB), partition_S(g2s, cB)
        tApA = make_fragment_like(tAsA[0, None, None, 0], int32)
        tBpB = make_fragment_like(tBsB[0, None, None, 0], int32)

        thr = get_slice(MMA, t)
        tCrA = make_fragment_like(partition_A(thr, sA[None, None, 0]), T)   # (8, MMA_M, MMA_K)
        tCrB = make_fragment_like(partition_B(thr, sB[None, None, 0]), T)   # (4, MMA_N, MMA_K)
        tCgC = partition_C(thr, gC)
        tCcC = partition_C(thr, cC)
        tCrC = make_fragment_like(tCgC, float32)
        fill(tCrC, 0)
        ldsm_a, ldsm_b = get_slice(LDSM_A, t), get_slice(LDSM_B, t)
        tXsA, tXrA = partition_S(ldsm_a, sA), retile_D(ldsm_a, tCrA)       # (CPY, M, K, 2)
        tXsB, tXrB = partition_S(ldsm_b, sB), retile_D(ldsm_b, tCrB)

        k_tiles = size(tAgA[0, 0, 0, None])
        for r in unroll(GROUPS_A):
            tApA[r] = elem_less(tAcA[None, None, None, 0][r * 8], (M, K))
        for r in unroll(GROUPS_B):
            tBpB[r] = elem_less(tBcB[None, None, None, 0][r * 8], (N, K))
        copy_if(G2S, tApA, tAgA[None, None, None, 0], tAsA[None, None, None, 0])
        copy_if(G2S, tBpB, tBgB[None, None, None, 0], tBsB[None, None, None, 0])
        cp_async_commit()
        k = U(0)
        while k < k_tiles:
            cp_async_wait_all()
            cuda.syncthreads()
            if k + U(1) < k_tiles:                # the next k-tile into the other stage
                for r in unroll(GROUPS_A):
                    tApA[r] = elem_less(tAcA[None, None, None, k + U(1)][r * 8], (M, K))
                for r in unroll(GROUPS_B):
                    tBpB[r] = elem_less(tBcB[None, None, None, k + U(1)][r * 8], (N, K))
                copy_if(G2S, tApA, tAgA[None, None, None, k + U(1)],
                        tAsA[None, None, None, (k + U(1)) % U(2)])
                copy_if(G2S, tBpB, tBgB[None, None, None, k + U(1)],
                        tBsB[None, None, None, (k + U(1)) % U(2)])
                cp_async_commit()
            for kb in unroll(K_BLOCKS):
                copy(LDSM_A, tXsA[None, None, kb, k % U(2)], tXrA[None, None, kb])
                copy(LDSM_B, tXsB[None, None, kb, k % U(2)], tXrB[None, None, kb])
                gemm(MMA, tCrC, tCrA[None, None, kb], tCrB[None, None, kb])
            k += U(1)
        axpby(alpha, tCrC, beta, tCgC, tCcC, (M, N))

    def grid(m, n):
        tiles = (-(-m // bM), -(-n // bN))
        return (tiles[0] * tiles[1], 1) if GROUP > 1 else tiles
    return kernel, threads, grid


def run_sm80_gemm(seed, m, n, k, kind="bf16", **config):
    """max |C - A B| / (|A| |B|) of sm80_gemm on fresh operands (padded leading dimensions),
    C poisoned with NaN; the reference multiplies the 16-bit values themselves."""
    rng = np.random.default_rng(seed)
    lda, ldb, ldc = k + 8, k + 16, m + 3
    a, a64 = _as_bits(rng.standard_normal((m, lda)).astype(np.float32), kind)
    bt, bt64 = _as_bits(rng.standard_normal((n, ldb)).astype(np.float32), kind)
    dC = cuda.to_device(np.full(n * ldc, np.nan, np.float32))
    kernel, threads, grid = sm80_gemm(kind, **config)
    cuda.jit(kernel)[grid(m, n), threads](cuda.to_device(a.ravel()), cuda.to_device(bt.ravel()),
                                          dC, m, n, k, lda, ldb, ldc, 1.0, 0.0)
    got = dC.copy_to_host().reshape(n, ldc).T[:m]
    return _relative_error(got, a64[:, :k], bt64[:, :k])


# --- a swizzled tensor's elements: one swizzle XOR a constant, or each swizzled --------

from numba import uint16  # noqa: E402
from layoutalg import UniversalCopy, make_tiled_copy_C, make_tiled_mma  # noqa: E402
from gemm.cute import copy, get_slice, make_fragment_like, partition_D  # noqa: E402
from layoutalg.atom.mma import SM90_64xNx16_F32BF16BF16_SS  # noqa: E402
from layoutalg.swizzle import ComposedLayout, Swizzle  # noqa: E402
from gemm.cute import _python as python_cute  # noqa: E402

SW_TILE = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((64, 64), (64, 1)))   # 128-byte, 16-bit
SW_TWO = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((128, 64), (64, 1)))   # two such tiles
SW_BLOCK = static((64, 64))
SW_PAIRS = make_tiled_copy_C(UniversalCopy(32, np.uint16),
                             make_tiled_mma(SM90_64xNx16_F32BF16BF16_SS(64)))


def swizzled_stores(out, row_tile):
    """Thread t's values ``t * 32 + j`` stored by pairs (SW_PAIRS) through its share of a
    swizzled 64 x 64 tile twice: the tile at the shared array's start (the share's offset
    bits known: each element its one swizzle XOR a constant) and tile ``row_tile`` of a
    128 x 64 view of the array from its element 4096 (a run-time tile: each element's own
    swizzle); the shared array into ``out``."""
    t = cuda.threadIdx.x
    raw = cuda.shared.array(3 * 4096, uint16)
    thr = get_slice(SW_PAIRS, t)
    known = partition_D(thr, make_tensor(raw, SW_TILE))
    run_time = partition_D(thr, local_tile(make_tensor(raw, SW_TWO, 4096), SW_BLOCK,
                                           (row_tile, 0)))
    y = make_fragment_like(known, uint16)
    for j in range(32):
        y[j] = t * 32 + j
    copy(SW_PAIRS, y, known)
    copy(SW_PAIRS, y, run_time)
    cuda.syncthreads()
    for i in range(t, 3 * 4096, 128):
        out[i] = raw[i]


def run_swizzled_stores(row_tile):
    """(got, want) of swizzled_stores: the kernel's shared array, and the Python twin's
    (gemm.cute's functions on numpy arrays) where it wrote; elsewhere the kernel's array
    is not compared."""
    out = cuda.to_device(np.full(3 * 4096, 0xFFFF, np.uint16))
    cuda.jit(swizzled_stores)[1, 128](out, np.uint32(row_tile))
    want = np.zeros(3 * 4096, np.uint16)
    written = np.zeros(3 * 4096, bool)
    c = python_cute
    for t in range(128):
        thr = c.get_slice(SW_PAIRS, t)
        y = c.make_tensor(np.arange(t * 32, t * 32 + 32, dtype=np.uint16), Layout(32))
        for dst in (c.make_tensor(want, SW_TILE),
                    c.local_tile(c.make_tensor(want, SW_TWO, 4096), (64, 64), (row_tile, 0))):
            c.copy(SW_PAIRS, y, c.partition_D(thr, dst))
    written[:4096] = True
    written[4096 + row_tile * 4096:4096 + (row_tile + 1) * 4096] = True
    return out.copy_to_host()[written], want[written]
