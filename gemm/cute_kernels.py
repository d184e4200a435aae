"""The SIMT kernels: the seed's two MoYe pipelines written with :mod:`gemm.cute`, as
``gemm.matmul`` kernels.

Every :class:`gemm.simt.SimtConfig` (``gemm.matmul(A, B, kernel="prefetch")``,
``"double_buffer"``, the defaults "tuned" and "small_m") runs one of the seed's two SIMT
pipelines written in CuTe's vocabulary, in the seed's structure (tests/cute_kernels.py has
them line for line, for static sizes). What a library kernel needs on top of the seed is
written in the same vocabulary:

- **run-time shapes**: the global tensors are ``make_tensor(A, make_layout((M, K), (ONE,
  lda)))`` with M, K and lda kernel arguments, so one compile serves every size (the tiles,
  thread layouts and shared layouts stay static);
- **partial tiles**: identity tensors partitioned as the data give each copy's coordinates;
  ``copy_if`` zero-fills the values outside (M, K), and the epilogue writes only
  coordinates inside (M, N) (CuTe's predication);
- **either major** of A and B: the unit stride is static (``ONE``) in the mode it is in, and
  the copy's thread layout is chosen for it (along the unit stride, ``vec`` values per
  cp.async); **batches** and **split-K ranges** along the grid's z; ``alpha`` and ``beta``.

The kernels take :data:`gemm.simt.SIGNATURE`'s arguments (``A, B, C, M, N, K, sAm, sAk,
sBn, sBk, sCm, sCn, sAb, sBb, sCb, NB, KPS, alpha, beta``: MoYe's A (M, K), B (N, K), C (M,
N) and their strides, batch strides, the batch count and the k-tiles per split-K range).
"""

import numpy as np
from numba import cuda, float32, int32

from layoutalg import (Layout, UniversalCopy, make_tiled_copy, make_tiled_copy_A,
                       make_tiled_copy_B, make_tiled_mma)
from layoutalg.atom.copy import SM80_CP_ASYNC_CACHEALWAYS
from layoutalg.atom.mma import UniversalFMA
from gemm.arch import cp_async_wait_all
from gemm.cute import (axpby, copy, copy_if, elem_less, fill, gemm, get_slice,
                       local_tile, make_fragment_like, make_identity_tensor,
                       make_layout, make_shared_tensor, make_tensor, partition_A,
                       partition_B, partition_C, partition_D, partition_S, size,
                       static, static_range, unroll, unrolled)
from gemm.simt.config import copy_vector

__all__ = ["kernel_function", "tiled_copy"]

ONE = static(1)
U = np.uint32               # 32-bit unsigned index math (a signed // is a 64-bit division)


def tiled_copy(unit, bmn, bk, vec, threads):
    """The cp.async TiledCopy of an operand's (bmn, bk) tile into an MN-contiguous shared
    tile: along MN with ``vec`` values per copy when the global unit stride is along MN
    (``unit`` 0; threads over (bmn / vec) x (threads / (bmn / vec))), else one value per
    copy with consecutive threads along K (coalesced global reads)."""
    atom = SM80_CP_ASYNC_CACHEALWAYS(4 * vec, np.float32)
    if unit == 0:                       # every thread along MN if a column has more vectors
        along = min(bmn // vec, threads)
        return make_tiled_copy(atom, Layout((along, threads // along)), Layout((vec, 1)))
    tk = min(bk, threads)
    return make_tiled_copy(atom, Layout((threads // tk, tk), (tk, 1)), Layout((1, 1)))


def kernel_function(cfg, a_unit, b_unit, vec_a, vec_b):
    """The kernel of a ``SimtConfig`` for A's and B's unit modes (0: along M or
    N) and the copy vectors their addresses allow (values per cp.async, narrowed by
    ``gemm.simt.copy_vector`` to what the tile takes), as a Python function for
    ``cuda.jit(gemm.simt.SIGNATURE)``."""
    make = _prefetch if cfg.pipeline == "prefetch" else _double_buffer
    return make(cfg, a_unit, b_unit, copy_vector(cfg, a_unit, cfg.bM, vec_a),
                copy_vector(cfg, b_unit, cfg.bN, vec_b))


def tiled_mma(cfg):
    """The tiled UniversalFMA over ``cfg.mma_threads``; with ``vector_mn`` v > 1 permuted so
    that each thread holds runs of v consecutive rows of M (and of N): thread i's first
    rows are v i .. v i + v - 1 (CuTe's PermutationMNK ``(tm, v):(v, 1)``)."""
    tm, tn = cfg.mma_threads
    v = cfg.vector_mn
    perm = None if v == 1 else (Layout((tm, v), (v, 1)), Layout((tn, v), (v, 1)), None)
    return make_tiled_mma(UniversalFMA(np.float32), Layout((tm, tn)), perm)


def _parts(cfg, a_unit, b_unit, vec_a, vec_b):
    """The static pieces both kernels use. The shared -> register copies read a thread's
    runs of ``vector_mn`` values with one vector load each where the shared tiles' columns
    keep them aligned (``bM + pad`` a multiple of it), else value by value."""
    threads, v = cfg.threads, cfg.vector_mn
    mma = tiled_mma(cfg)
    per_a = v if (cfg.bM + cfg.pad) % v == 0 else 1
    per_b = v if (cfg.bN + cfg.pad) % v == 0 else 1
    return dict(
        tiles=_block_tiles(cfg, a_unit == 0, b_unit == 0),
        copy_a=tiled_copy(a_unit, cfg.bM, cfg.bK, vec_a, threads),
        copy_b=tiled_copy(b_unit, cfg.bN, cfg.bK, vec_b, threads),
        mma=mma,
        s2r_a=make_tiled_copy_A(UniversalCopy(32 * per_a, np.float32), mma),
        s2r_b=make_tiled_copy_B(UniversalCopy(32 * per_b, np.float32), mma),
        groups_a=static_range(cfg.bM * cfg.bK // threads // vec_a),     # copies per thread
        groups_b=static_range(cfg.bN * cfg.bK // threads // vec_b))


def _block_tiles(cfg, a_m_major, b_n_major):
    """A device function (inlined) giving a block's tiles of A, B and C and of their
    coordinates (identity tensors): the problem has run-time extents and strides, the unit
    stride of A and B static (in the mode the variant has it)."""
    TILE_A, TILE_B = static((cfg.bM, cfg.bK)), static((cfg.bN, cfg.bK))
    TILE_C = static((cfg.bM, cfg.bN))

    def tiles(A, B, C, M, N, K, sAm, sAk, sBn, sBk, sCm, sCn, sAb, sBb, sCb, NB, bx, by, z):
        if a_m_major:
            mA = make_tensor(A, make_layout((M, K), (ONE, sAk)), (z % NB) * sAb)
        else:
            mA = make_tensor(A, make_layout((M, K), (sAm, ONE)), (z % NB) * sAb)
        if b_n_major:
            mB = make_tensor(B, make_layout((N, K), (ONE, sBk)), (z % NB) * sBb)
        else:
            mB = make_tensor(B, make_layout((N, K), (sBn, ONE)), (z % NB) * sBb)
        mC = make_tensor(C, make_layout((M, N), (sCm, sCn)), z * sCb)
        return (local_tile(mA, TILE_A, (bx, None)),                  # (bM, bK, k)
                local_tile(mB, TILE_B, (by, None)),                  # (bN, bK, k)
                local_tile(mC, TILE_C, (bx, by)),                    # (bM, bN)
                local_tile(make_identity_tensor((M, K)), TILE_A, (bx, None)),
                local_tile(make_identity_tensor((N, K)), TILE_B, (by, None)),
                local_tile(make_identity_tensor((M, N)), TILE_C, (bx, by)))
    return cuda.jit(device=True, inline="always")(tiles)


def _prefetch(cfg, a_unit, b_unit, vec_a, vec_b):
    """The seed's first kernel: one shared buffer; a k-tile goes shared -> registers whole,
    then the next k-tile's cp.async starts before this one's FMAs."""
    p = _parts(cfg, a_unit, b_unit, vec_a, vec_b)
    SA_LAYOUT = Layout((cfg.bM, cfg.bK), (1, cfg.bM + cfg.pad))
    SB_LAYOUT = Layout((cfg.bN, cfg.bK), (1, cfg.bN + cfg.pad))
    COPY_A, COPY_B, MMA_C, TILES = p["copy_a"], p["copy_b"], p["mma"], p["tiles"]
    S2R_A, S2R_B = p["s2r_a"], p["s2r_b"]
    GROUPS_A, GROUPS_B = p["groups_a"], p["groups_b"]
    VEC_A, VEC_B = vec_a, vec_b

    @unrolled
    def matmul_kernel(A, B, C, M, N, K, sAm, sAk, sBn, sBk, sCm, sCn, sAb, sBb, sCb, NB, KPS,
                      alpha, beta):
        bx, by, z, t = cuda.blockIdx.x, cuda.blockIdx.y, U(cuda.blockIdx.z), cuda.threadIdx.x
        k0 = (z // NB) * KPS                    # this block's split-K range starts here
        sA = make_shared_tensor(float32, SA_LAYOUT)
        sB = make_shared_tensor(float32, SB_LAYOUT)

        # The block's tiles of the problem, and of its coordinates
        gA, gB, gC, cA, cB, cC = TILES(A, B, C, M, N, K, sAm, sAk, sBn, sBk, sCm, sCn, sAb,
                                       sBb, sCb, NB, bx, by, z)

        # Copy partition
        thr_copy_a = get_slice(COPY_A, t)
        tAgA = partition_S(thr_copy_a, gA)                    # (CPY, CPY_M, CPY_K, k)
        tAsA = partition_D(thr_copy_a, sA)                    # (CPY, CPY_M, CPY_K)
        tAcA = partition_S(thr_copy_a, cA)
        tApA = make_fragment_like(tAsA[0, None, None], int32)     # a predicate per copy

        thr_copy_b = get_slice(COPY_B, t)
        tBgB = partition_S(thr_copy_b, gB)
        tBsB = partition_D(thr_copy_b, sB)
        tBcB = partition_S(thr_copy_b, cB)
        tBpB = make_fragment_like(tBsB[0, None, None], int32)

        # Copy gmem to smem for the first k-tile (zeros outside the problem)
        k_tile_max = min(size(tAgA[0, 0, 0, None]), k0 + KPS)
        tAcA_k, tBcB_k = tAcA[None, None, None, k0], tBcB[None, None, None, k0]
        for r in unroll(GROUPS_A):
            tApA[r] = elem_less(tAcA_k[r * VEC_A], (M, K))
        for r in unroll(GROUPS_B):
            tBpB[r] = elem_less(tBcB_k[r * VEC_B], (N, K))
        copy_if(COPY_A, tApA, tAgA[None, None, None, k0], tAsA)
        copy_if(COPY_B, tBpB, tBgB[None, None, None, k0], tBsB)

        # MMA partition
        thr_mma = get_slice(MMA_C, t)
        tCsA = partition_A(thr_mma, sA)                       # (MMA, MMA_M, MMA_K)
        tCsB = partition_B(thr_mma, sB)                       # (MMA, MMA_N, MMA_K)
        tCgC = partition_C(thr_mma, gC)                       # (MMA, MMA_M, MMA_N)
        tCcC = partition_C(thr_mma, cC)

        # MMA registers
        tCrA = make_fragment_like(tCsA, float32)              # (MMA, MMA_M, MMA_K)
        tCrB = make_fragment_like(tCsB, float32)              # (MMA, MMA_N, MMA_K)
        tCrC = make_fragment_like(tCgC, float32)              # (MMA, MMA_M, MMA_N)
        fill(tCrC, 0)

        k = k0
        while k < k_tile_max:
            cp_async_wait_all()
            cuda.syncthreads()

            # Copy from smem to rmem
            copy(S2R_A, tCsA, tCrA)
            copy(S2R_B, tCsB, tCrB)
            cuda.syncthreads()

            if k + U(1) < k_tile_max:
                tAcA_k, tBcB_k = tAcA[None, None, None, k + U(1)], tBcB[None, None, None, k + U(1)]
                for r in unroll(GROUPS_A):
                    tApA[r] = elem_less(tAcA_k[r * VEC_A], (M, K))
                for r in unroll(GROUPS_B):
                    tBpB[r] = elem_less(tBcB_k[r * VEC_B], (N, K))
                copy_if(COPY_A, tApA, tAgA[None, None, None, k + U(1)], tAsA)
                copy_if(COPY_B, tBpB, tBgB[None, None, None, k + U(1)], tBsB)

            gemm(tCrC, tCrA, tCrB)
            k += U(1)

        # Epilogue: C = alpha * acc + beta * C inside (M, N); C not read when beta is 0
        axpby(alpha, tCrC, beta, tCgC, tCcC, (M, N))

    return matmul_kernel


def _double_buffer(cfg, a_unit, b_unit, vec_a, vec_b):
    """The seed's second kernel: two shared buffers (the stage mode of ``(bM, bK, 2)``) and
    register fragments double-buffered over k-blocks: k-block ``kb + 1`` is read from shared
    memory while ``kb`` is multiplied, and the next k-tile streams into the other buffer."""
    p = _parts(cfg, a_unit, b_unit, vec_a, vec_b)
    bM, bN, bK, pad = cfg.bM, cfg.bN, cfg.bK, cfg.pad
    SA_LAYOUT = Layout((bM, bK, 2), (1, bM + pad, (bM + pad) * bK))
    SB_LAYOUT = Layout((bN, bK, 2), (1, bN + pad, (bN + pad) * bK))
    COPY_A, COPY_B, MMA_C, TILES = p["copy_a"], p["copy_b"], p["mma"], p["tiles"]
    S2R_A, S2R_B = p["s2r_a"], p["s2r_b"]
    GROUPS_A, GROUPS_B = p["groups_a"], p["groups_b"]
    VEC_A, VEC_B = vec_a, vec_b
    K_BLOCK_MAX = bK                        # the k-blocks of a tile (UniversalFMA: K 1 each)
    K_BLOCKS = static_range(K_BLOCK_MAX)

    @unrolled
    def matmul_kernel(A, B, C, M, N, K, sAm, sAk, sBn, sBk, sCm, sCn, sAb, sBb, sCb, NB, KPS,
                      alpha, beta):
        bx, by, z, t = cuda.blockIdx.x, cuda.blockIdx.y, U(cuda.blockIdx.z), cuda.threadIdx.x
        k0 = (z // NB) * KPS                    # this block's split-K range starts here
        sA = make_shared_tensor(float32, SA_LAYOUT)           # (bM, bK, 2)
        sB = make_shared_tensor(float32, SB_LAYOUT)           # (bN, bK, 2)

        # The block's tiles of the problem, and of its coordinates
        gA, gB, gC, cA, cB, cC = TILES(A, B, C, M, N, K, sAm, sAk, sBn, sBk, sCm, sCn, sAb,
                                       sBb, sCb, NB, bx, by, z)

        # Copy partition
        thr_copy_a = get_slice(COPY_A, t)
        tAgA = partition_S(thr_copy_a, gA)                    # (CPY, CPY_M, CPY_K, k)
        tAsA = partition_D(thr_copy_a, sA)                    # (CPY, CPY_M, CPY_K, 2)
        tAcA = partition_S(thr_copy_a, cA)
        tApA = make_fragment_like(tAsA[0, None, None, 0], int32)  # a predicate per copy

        thr_copy_b = get_slice(COPY_B, t)
        tBgB = partition_S(thr_copy_b, gB)                    # (CPY, CPY_N, CPY_K, k)
        tBsB = partition_D(thr_copy_b, sB)                    # (CPY, CPY_N, CPY_K, 2)
        tBcB = partition_S(thr_copy_b, cB)
        tBpB = make_fragment_like(tBsB[0, None, None, 0], int32)

        # Copy gmem to smem for the first k-tile (zeros outside the problem)
        k_tile_max = min(size(tAgA[0, 0, 0, None]), k0 + KPS)
        tAcA_k, tBcB_k = tAcA[None, None, None, k0], tBcB[None, None, None, k0]
        for r in unroll(GROUPS_A):
            tApA[r] = elem_less(tAcA_k[r * VEC_A], (M, K))
        for r in unroll(GROUPS_B):
            tBpB[r] = elem_less(tBcB_k[r * VEC_B], (N, K))
        copy_if(COPY_A, tApA, tAgA[None, None, None, k0], tAsA[None, None, None, 0])
        copy_if(COPY_B, tBpB, tBgB[None, None, None, k0], tBsB[None, None, None, 0])

        # MMA partition
        thr_mma = get_slice(MMA_C, t)
        tCsA = partition_A(thr_mma, sA)                       # (MMA, MMA_M, MMA_K, 2)
        tCsB = partition_B(thr_mma, sB)                       # (MMA, MMA_N, MMA_K, 2)
        tCgC = partition_C(thr_mma, gC)                       # (MMA, MMA_M, MMA_N)
        tCcC = partition_C(thr_mma, cC)

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
        copy(S2R_A, tCsA_p[None, None, 0], tCrA[None, None, 0])
        copy(S2R_B, tCsB_p[None, None, 0], tCrB[None, None, 0])

        k_tile = k0
        while k_tile < k_tile_max:
            for k_block in unroll(K_BLOCKS):                   # static: 0 .. K_BLOCK_MAX-1
                k_block_next = k_block + 1
                if k_block == K_BLOCK_MAX - 1:
                    cp_async_wait_all()
                    cuda.syncthreads()
                    tCsA_p = tCsA[None, None, None, smem_read]
                    tCsB_p = tCsB[None, None, None, smem_read]
                    k_block_next = 0

                copy(S2R_A, tCsA_p[None, None, k_block_next], tCrA[None, None, k_block_next])
                copy(S2R_B, tCsB_p[None, None, k_block_next], tCrB[None, None, k_block_next])

                if k_block == 0 and k_tile + U(1) < k_tile_max:
                    tAcA_k = tAcA[None, None, None, k_tile + U(1)]
                    tBcB_k = tBcB[None, None, None, k_tile + U(1)]
                    for r in unroll(GROUPS_A):
                        tApA[r] = elem_less(tAcA_k[r * VEC_A], (M, K))
                    for r in unroll(GROUPS_B):
                        tBpB[r] = elem_less(tBcB_k[r * VEC_B], (N, K))
                    copy_if(COPY_A, tApA, tAgA[None, None, None, k_tile + U(1)],
                            tAsA[None, None, None, smem_write])
                    copy_if(COPY_B, tBpB, tBgB[None, None, None, k_tile + U(1)],
                            tBsB[None, None, None, smem_write])
                    smem_read, smem_write = smem_write, smem_read

                gemm(tCrC, tCrA[None, None, k_block], tCrB[None, None, k_block])
            k_tile += U(1)

        # Epilogue: C = alpha * acc + beta * C inside (M, N); C not read when beta is 0
        axpby(alpha, tCrC, beta, tCgC, tCcC, (M, N))

    return matmul_kernel
