"""The SM80 tensor-core GEMM written with :mod:`gemm.cute`: CUTLASS's SM80 mainloop (a ring
of cp.async stages, ldmatrix, mma.sync) in CuTe's words, over the operands the generated
kernel of :mod:`gemm.tensorcore.gen` sees (X (MM, K), Y (NN, K), a row-major C (MM, NN), the
same arguments), for X and Y of bf16 / f16 or float32 multiplied as tf32, either major,
read in cp.async copies of 4 to 16 bytes.

- shared memory: per operand a ``(bMN, bK, stages)`` tensor of swizzled atoms
  (:func:`smem_layout`: 8 lines of K or of MN, the 16-byte chunks of a line XORed with the
  line, so the 8 lines of an ldmatrix phase and the 8 stores of a cp.async phase fall into
  8 different bank groups);
- global -> shared: a tiled copy of cp.async along the operand's contiguous mode;
  written twice, as the whole mainloop is: plain copies for a block inside the matrices
  with K a multiple of bK, and copies predicated by their first element's coordinate
  (elements past M, N or K fill zeros) for the rest;
- the MMA: ``make_tiled_mma`` of the m16n8k16 atom over (wm, wn) warps, permuted to (16 wm,
  16 wn, 16) so that an ldmatrix x4 fills two n8 blocks of B; shared -> registers by
  ``make_tiled_copy_A/B`` of ``SM75_U32x4_LDSM_N`` (K-major) or ``SM75_U16x8_LDSM_T``
  (MN-major) and ``retile_D``, or for tf32 of 4-byte loads (ldmatrix moves 16-bit values),
  ``gemm`` rounding each value to tf32;
- the mainloop is CUTLASS's: ``stages - 1`` k-tiles in flight, the register fragments of
  k-block ``kb + 1`` read while ``kb`` is multiplied, the next k-tile's shared stage waited
  for before the last k-block, and the k-tile ``stages - 1`` ahead issued at the first;
- launch order: the blocks of ``group_m`` tile rows of one tile column first (L2 reuse);
- epilogue: ``alpha * acc`` staged through shared memory (a padded float32 tile), then
  each thread's 16-byte runs of a row of C with ``beta * C`` added, converted to the out
  type; runs past the edge element by element.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import cuda, float32, int32, uint16

from layoutalg import (ComposedLayout, Layout, Swizzle, UniversalCopy, make_tiled_copy,
                       make_tiled_copy_A, make_tiled_copy_B, make_tiled_mma, tile_to_shape)
from layoutalg.atom import (SM75_U16x8_LDSM_T, SM75_U32x4_LDSM_N,
                            SM80_16x8x8_F32TF32TF32F32_TN, SM80_16x8x16_F32BF16BF16F32_TN,
                            SM80_16x8x16_F32F16F16F32_TN, SM80_CP_ASYNC_CACHEALWAYS,
                            SM80_CP_ASYNC_CACHEGLOBAL)
from gemm import arch
from gemm.arch.smem import SWIZZLE_ALIGN, shared_alignment
from gemm.cute import (copy, copy_if, cosize, elem_less, fill, gemm, get_slice, local_tile,
                       make_fragment_like, make_identity_tensor, make_layout, make_shared_tensor,
                       make_tensor, make_warp_uniform, partition_A, partition_B, partition_C,
                       partition_D, partition_S, retile_D, size, static, static_range, unroll,
                       unrolled)
from gemm.epilogue_kernel import conversions
from gemm.tensorcore.config import _PAD_C

__all__ = ["smem_layout", "supports", "kernel_function"]

U = np.uint32
ONE = static(1)
ATOMS = {"bfloat16": SM80_16x8x16_F32BF16BF16F32_TN, "float16": SM80_16x8x16_F32F16F16F32_TN,
         "tfloat32": SM80_16x8x8_F32TF32TF32F32_TN}


def smem_layout(major, bmn, bk, stages, bits=16):
    """An operand's ``(bmn, bk, stages)`` shared tensor of ``bits``-bit elements: its atoms
    are 8 lines of a row of K (K-major) or of a column of at most 128 bytes of MN (MN-major),
    the 16-byte chunks of a line XORed with the line's index (CuTe's ``Sw<3,3,3>`` for
    128-byte lines of 16-bit values, ``Sw<3,2,3>`` of 32-bit ones), tiled along MN (K-major)
    or along K first (MN-major), then the stages."""
    per_chunk = 128 // bits                         # elements of a 16-byte chunk
    if major == "K":
        atom, order = Layout((8, bk), (bk, 1)), None
    else:
        line = min(1024 // bits, bmn)
        atom, order = Layout((line, 8), (1, line)), (2, 1, 3)
    chunks = size(atom) // 8 // per_chunk           # 16-byte chunks of a line
    swizzle = Swizzle(chunks.bit_length() - 1, per_chunk.bit_length() - 1, 3)
    return tile_to_shape(ComposedLayout(swizzle, 0, atom), (bmn, bk, stages), order)


def _operand(major, vec, bmn, bk, stages, threads, mma, which, tf32):
    """(shared layout, global -> shared tiled copy, shared -> register tiled copy, the device
    function making the operand's global (MN, K) tensor) of an operand read in copies of
    ``vec`` elements along its contiguous mode."""
    element = np.float32 if tf32 else np.uint16
    nbytes = vec * np.dtype(element).itemsize
    atom = (SM80_CP_ASYNC_CACHEGLOBAL(16, element) if nbytes == 16
            else SM80_CP_ASYNC_CACHEALWAYS(nbytes, element))
    if major == "K":
        along = bk // vec                           # copies along a row of K
        g2s = make_tiled_copy(atom, Layout((threads // along, along), (along, 1)),
                              Layout((1, vec)))

        @cuda.jit(device=True, inline="always")
        def matrix(X, MN, K, ld, at):
            return make_tensor(X, make_layout((MN, K), (ld, ONE)), at)
    else:
        along = min(bmn // vec, threads)            # copies along a column of MN
        g2s = make_tiled_copy(atom, Layout((along, threads // along)), Layout((vec, 1)))

        @cuda.jit(device=True, inline="always")
        def matrix(X, MN, K, ld, at):
            return make_tensor(X, make_layout((MN, K), (ONE, ld)), at)
    # shared -> registers: ldmatrix for 16-bit values, 4-byte loads of the MMA's own values
    # for tf32 (ldmatrix moves 16-bit elements)
    s2r = (UniversalCopy(32, np.float32) if tf32
           else SM75_U32x4_LDSM_N() if major == "K" else SM75_U16x8_LDSM_T())
    tiled_s2r = (make_tiled_copy_A if which == "A" else make_tiled_copy_B)(s2r, mma)
    return (smem_layout(major, bmn, bk, stages, 32 if tf32 else 16), g2s, tiled_s2r, matrix)


@cuda.jit(device=True, inline="always")
def block_order(group_m):
    """(tile row, tile column) of this block: consecutive blocks take ``group_m`` tile rows of
    one tile column, then the same rows of the next column, so that the blocks running at
    once read a few A and B panels many times from L2."""
    gx, gy = U(cuda.gridDim.x), U(cuda.gridDim.y)      # (each result cast back: numba
    pid = U(U(cuda.blockIdx.x) + U(cuda.blockIdx.y) * gx)  # widens uint32 arithmetic)
    width = U(U(group_m) * gy)                  # the blocks of one group of rows
    first = U(U(pid // width) * U(group_m))     # its first tile row
    rows = U(min(U(gx - first), U(group_m)))    # its rows (fewer in the last group)
    r = U(pid - U(pid // width) * width)
    return U(first + U(r % rows)), U(r // rows)


def supports(v):
    """Whether this kernel runs Variant ``v``: X and Y of bf16, f16 or float32 multiplied as
    tf32 (either major) read in cp.async copies (4, 8 or 16 bytes), no delayed release, and
    an epilogue whose 16-byte runs of a row of C the block's threads cover in whole rows. The
    call must also have its operands' contiguous extents (K of a K-major one, M or N of an
    MN-major one) multiples of its copies' elements: each copy's predicate is its first
    element's, so a run is copied whole or not at all (CUTLASS's alignment rule);
    :mod:`gemm.tensorcore` gives other calls the generated kernel."""
    cfg = v.config
    runs = cfg.bN // (4 if v.out_dtype == "float32" else 8)
    return (min(v.vec_a, v.vec_b) * cfg.element_bytes >= 4 and cfg.delay_release == 0
            and runs > 0 and cfg.threads % runs == 0 and cfg.bM % (cfg.threads // runs) == 0)


@lru_cache(maxsize=None)
def kernel_function(v):
    """The kernel of Variant ``v`` (see :func:`supports`) as a Python function for
    ``cuda.jit``: ``kernel(A, B, C, M, N, K, lda, ldb, ldc, sAb, sBb, sCb, alpha, beta)``,
    the generated kernel's arguments."""
    if not supports(v):
        raise ValueError(f"the SM80 kernel written with gemm.cute does not run {v}")
    cfg = v.config
    bM, bN, bK, S, GROUP = cfg.bM, cfg.bN, cfg.bK, cfg.stages, cfg.group_m
    wm, wn = cfg.warps
    threads = cfg.threads
    tf32 = cfg.dtype == "tfloat32"
    kmma = 8 if tf32 else 16                        # the atom's K
    MMA = make_tiled_mma(ATOMS[cfg.dtype](), Layout((wm, wn, 1)), (16 * wm, 16 * wn, kmma))
    SA, G2S_A, S2R_A, matrix_a = _operand(v.a_major, v.vec_a, bM, bK, S, threads, MMA, "A",
                                          tf32)
    SB, G2S_B, S2R_B, matrix_b = _operand(v.b_major, v.vec_b, bN, bK, S, threads, MMA, "B",
                                          tf32)
    A_ELEMS = cosize(SA.inner)
    TILE_A, TILE_B, TILE_C = static((bM, bK)), static((bN, bK)), static((bM, bN))
    VEC_A, VEC_B = v.vec_a, v.vec_b
    COPIES_A = static_range(bM * bK // VEC_A // threads)
    COPIES_B = static_range(bN * bK // VEC_B // threads)
    KB = bK // kmma
    T = float32 if tf32 else uint16
    PER_FLOAT = 1 if tf32 else 2                    # operand elements in 4 bytes

    # the epilogue: C staged as float32 rows of bN + PAD_C, read back in 16-byte runs
    half = v.out_dtype != "float32"
    VE = 8 if half else 4                           # elements per 16-byte run of C
    SC = Layout((bM, bN), (bN + _PAD_C, 1))
    runs = bN // VE
    OUT = np.uint16 if half else np.float32
    S2G = make_tiled_copy(UniversalCopy(128 if v.vec_c else 8 * np.dtype(OUT).itemsize, OUT),
                          Layout((threads // runs, runs), (runs, 1)), Layout((1, VE)))
    LD_C = make_tiled_copy(UniversalCopy(128, np.float32),          # the same runs as float32
                           Layout((threads // runs, runs), (runs, 1)), Layout((1, VE)))
    ST_ACC = make_tiled_copy(UniversalCopy(64, np.float32), Layout(threads), Layout(2))
    N_ACC = bM * bN // threads
    store, load = conversions(v.out_dtype)
    C_RUNS = bM * bN // VE // threads
    RUN = static_range(VE)

    align = shared_alignment()          # (the pads to the ring's start fold away)

    def copy_inside(tAgA, tAsA, tBgB, tBsB, tApA, tBpB, tAcA, tBcB, M, N, K, k, stage):
        """k-tile ``k`` of a block inside the matrices into ``stage``."""
        copy(G2S_A, tAgA[None, None, None, k], tAsA[None, None, None, stage])
        copy(G2S_B, tBgB[None, None, None, k], tBsB[None, None, None, stage])

    @unrolled
    def copy_edges(tAgA, tAsA, tBgB, tBsB, tApA, tBpB, tAcA, tBcB, M, N, K, k, stage):
        """k-tile ``k`` into ``stage``, the copies of elements past M, N or K left out (zeros);
        the predicates computed anew each time (fewer registers held through the loop)."""
        for r in unroll(COPIES_A):
            tApA[r] = elem_less(tAcA[None, None, None, k][r * VEC_A], (M, K))
        for r in unroll(COPIES_B):
            tBpB[r] = elem_less(tBcB[None, None, None, k][r * VEC_B], (N, K))
        copy_if(G2S_A, tApA, tAgA[None, None, None, k], tAsA[None, None, None, stage])
        copy_if(G2S_B, tBpB, tBgB[None, None, None, k], tBsB[None, None, None, stage])

    mainloop_inside = _mainloop(cuda.jit(device=True, inline="always")(copy_inside), S, KB,
                                MMA, S2R_A, S2R_B)
    mainloop_edges = _mainloop(cuda.jit(device=True, inline="always")(copy_edges), S, KB,
                               MMA, S2R_A, S2R_B)

    @unrolled
    def kernel(A, B, C, M, N, K, lda, ldb, ldc, sAb, sBb, sCb, alpha, beta):
        t = cuda.threadIdx.x
        bx, by = block_order(GROUP)
        bx, by = make_warp_uniform(bx), make_warp_uniform(by)    # (uniform registers)
        z = U(cuda.blockIdx.z)
        raw = cuda.shared.array(0, T, alignment=align)
        base = arch.shared_offset_of(raw, SWIZZLE_ALIGN)
        sA = make_shared_tensor(raw, SA, base)                                    # (bM, bK, S)
        sB = make_shared_tensor(raw, SB, base + U(A_ELEMS))                       # (bN, bK, S)
        gA = local_tile(matrix_a(A, M, K, lda, z * sAb), TILE_A, (bx, None))    # (bM, bK, k)
        gB = local_tile(matrix_b(B, N, K, ldb, z * sBb), TILE_B, (by, None))    # (bN, bK, k)
        cA = local_tile(make_identity_tensor((M, K)), TILE_A, (bx, None))
        cB = local_tile(make_identity_tensor((N, K)), TILE_B, (by, None))

        g2s_a, g2s_b = get_slice(G2S_A, t), get_slice(G2S_B, t)
        tAgA, tAsA = partition_S(g2s_a, gA), partition_D(g2s_a, sA)     # (CPY, CPY_M, CPY_K, k)
        tBgB, tBsB = partition_S(g2s_b, gB), partition_D(g2s_b, sB)
        tAcA, tBcB = partition_S(g2s_a, cA), partition_S(g2s_b, cB)
        tApA = make_fragment_like(tAsA[0, None, None, 0], int32)   # a predicate per copy
        tBpB = make_fragment_like(tBsB[0, None, None, 0], int32)

        thr = get_slice(MMA, t)
        tCrA = make_fragment_like(partition_A(thr, sA[None, None, 0]), T)   # (V, MMA_M, KB)
        tCrB = make_fragment_like(partition_B(thr, sB[None, None, 0]), T)   # (V, MMA_N, KB)
        tCrC = make_fragment_like(partition_C(thr, make_identity_tensor(TILE_C)), float32)
        fill(tCrC, 0)
        s2r_a, s2r_b = get_slice(S2R_A, t), get_slice(S2R_B, t)
        tXsA, tXrA = partition_S(s2r_a, sA), retile_D(s2r_a, tCrA)         # (CPY, M, KB, S)
        tXsB, tXrB = partition_S(s2r_b, sB), retile_D(s2r_b, tCrB)

        k_tiles = (K + U(bK - 1)) // U(bK)
        # a block inside the matrices with whole k-tiles: its copies need no predicates
        if (bx + U(1)) * U(bM) <= M and (by + U(1)) * U(bN) <= N and K % U(bK) == 0:
            mainloop_inside(tAgA, tAsA, tBgB, tBsB, tApA, tBpB, tAcA, tBcB, tXsA, tXrA, tXsB,
                            tXrB, tCrA, tCrB, tCrC, M, N, K, k_tiles)
        else:
            mainloop_edges(tAgA, tAsA, tBgB, tBsB, tApA, tBpB, tAcA, tBcB, tXsA, tXrA, tXsB,
                           tXrB, tCrA, tCrB, tCrC, M, N, K, k_tiles)

        # epilogue: alpha * acc staged in shared memory, then C in 16-byte runs of a row
        arch.cp_async_wait(0)
        cuda.syncthreads()                      # every ldmatrix of the ring is done
        smc = cuda.shared.array(0, float32, alignment=align)
        sC = make_shared_tensor(smc, SC, base // U(PER_FLOAT))
        tCsC = partition_C(thr, sC)
        for i in unroll(static_range(N_ACC)):
            tCrC[i] = alpha * tCrC[i]
        copy(ST_ACC, tCrC, tCsC)                # a pair of columns a store
        cuda.syncthreads()
        s2g = get_slice(S2G, t)
        gC = local_tile(make_tensor(C, make_layout((M, N), (ldc, ONE)), z * sCb), TILE_C,
                        (bx, by))
        cC = local_tile(make_identity_tensor((M, N)), TILE_C, (bx, by))
        tDsC = partition_S(get_slice(LD_C, t), sC)                     # (VE, C_RUNS, 1)
        tDgC, tDcC = partition_D(s2g, gC), partition_S(s2g, cC)
        x = make_fragment_like(tDsC[None, 0, 0], float32)                  # (VE)
        o = make_fragment_like(tDgC[None, 0, 0], uint16 if half else float32)
        for r in range(C_RUNS):                 # (a loop: NVVM unrolls it, numba compiles it once)
            copy(LD_C, tDsC[None, r, 0], x)
            if elem_less(tDcC[None, r, 0][VE - 1], (M, N)):
                if beta != float32(0):
                    copy(S2G, tDgC[None, r, 0], o)
                    for e in unroll(RUN):
                        x[e] += beta * load(o[e])
                for e in unroll(RUN):
                    o[e] = store(x[e])
                copy(S2G, o, tDgC[None, r, 0])
            elif elem_less(tDcC[None, r, 0][0], (M, N)):      # a run across N's edge
                for e in unroll(RUN):
                    if elem_less(tDcC[None, r, 0][e], (M, N)):
                        y = x[e]
                        if beta != float32(0):
                            y += beta * load(tDgC[None, r, 0][e])
                        tDgC[None, r, 0][e] = store(y)

    return kernel


def _mainloop(issue, S, KB, MMA, S2R_A, S2R_B):
    """CUTLASS's SM80 mainloop over a ring of ``S`` shared stages (a device function),
    ``issue(..., k, stage)`` copying k-tile ``k`` into a stage: ``S - 1`` k-tiles in
    flight, one commit group each (empty past the last); the register fragments of k-block
    ``kb + 1`` read while ``kb`` is multiplied; the next k-tile's stage waited for before
    the last k-block, the k-tile ``S - 1`` ahead issued at the first."""
    WAIT = S - 2                                    # commit groups left in flight
    AHEAD = static_range(S - 1)
    K_BLOCKS = static_range(KB)

    @unrolled
    def mainloop(tAgA, tAsA, tBgB, tBsB, tApA, tBpB, tAcA, tBcB, tXsA, tXrA, tXsB, tXrB, tCrA,
                 tCrB, tCrC, M, N, K, k_tiles):
        for s in unroll(AHEAD):
            if U(s) < k_tiles:
                issue(tAgA, tAsA, tBgB, tBsB, tApA, tBpB, tAcA, tBcB, M, N, K, U(s), U(s))
            arch.cp_async_commit()
        read, write = U(0), U(S - 1)            # the stages read and written next
        arch.cp_async_wait(WAIT)
        cuda.syncthreads()
        copy(S2R_A, tXsA[None, None, 0, read], tXrA[None, None, 0])
        copy(S2R_B, tXsB[None, None, 0, read], tXrB[None, None, 0])
        k = U(0)
        while k < k_tiles:
            for kb in unroll(K_BLOCKS):
                if kb == KB - 1:                # the next k-tile's stage, from here on
                    arch.cp_async_wait(WAIT)
                    cuda.syncthreads()
                    read = U(read + U(1)) if read + U(1) < U(S) else U(0)
                nb = (kb + 1) % KB
                copy(S2R_A, tXsA[None, None, nb, read], tXrA[None, None, nb])
                copy(S2R_B, tXsB[None, None, nb, read], tXrB[None, None, nb])
                if kb == 0:                     # the k-tile S - 1 ahead into its stage
                    ahead = U(k + U(S - 1))
                    if ahead < k_tiles:
                        issue(tAgA, tAsA, tBgB, tBsB, tApA, tBpB, tAcA, tBcB, M, N, K, ahead,
                              write)
                    arch.cp_async_commit()
                    write = U(write + U(1)) if write + U(1) < U(S) else U(0)
                gemm(MMA, tCrC, tCrA[None, None, kb], tCrB[None, None, kb])
            k = U(k + U(1))

    return cuda.jit(device=True, inline="always")(mainloop)
