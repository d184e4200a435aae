"""The SM80 tensor-core GEMM written with :mod:`gemm.cute`: CUTLASS's SM80 mainloop (a ring
of cp.async stages, ldmatrix, mma.sync) in CuTe's words, over the operands
:mod:`gemm.tensorcore` hands it (X (MM, K), Y (NN, K), a row-major C (MM, NN)), for X and Y
of bf16 / f16 or float32 multiplied as tf32, either major, read in cp.async copies of 4 to
16 bytes (plain 2-byte copies where 16-bit operands are not 4-byte aligned).

- shared memory: per operand a ``(bMN, bK, stages)`` tensor of swizzled atoms
  (:func:`smem_layout`: 8 lines of K or of MN, the 16-byte chunks of a line XORed with the
  line, so the 8 lines of an ldmatrix phase and the 8 stores of a cp.async phase fall into
  8 different bank groups);
- global -> shared: a tiled copy of cp.async (or of plain 2-byte copies) along the
  operand's contiguous mode; written twice, as the whole mainloop is: unpredicated copies
  for a block inside the matrices with K a multiple of bK, and copies predicated by their
  first element's coordinate (elements past M, N or K fill zeros) for the rest;
- the MMA: ``make_tiled_mma`` of the m16n8k16 atom over (wm, wn) warps, permuted to (16 wm,
  16 wn, 16) so that an ldmatrix x4 fills two n8 blocks of B; shared -> registers by
  ``make_tiled_copy_A/B`` of ``SM75_U32x4_LDSM_N`` (K-major) or ``SM75_U16x8_LDSM_T``
  (MN-major) and ``retile_D``, or for tf32 of 4-byte loads (ldmatrix moves 16-bit values),
  ``gemm`` rounding each value to tf32;
- the mainloop is CUTLASS's: ``stages - 1 - delay_release`` k-tiles in flight, the
  register fragments of k-block ``kb + 1`` read while ``kb`` is multiplied, the next
  k-tile's shared stage waited for before the last k-block, and the k-tile that many ahead
  issued at the first;
- launch order: the blocks of ``group_m`` tile rows of one tile column first (L2 reuse);
- epilogue: the accumulators staged through shared memory (a padded float32 tile), then
  each thread's 16-byte runs of a row of C, ``alpha * acc`` with ``beta * C`` added,
  converted to the out type; runs past the edge element by element.
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
from gemm.cute.scheduler import grouped_tile
from gemm.epilogue_kernel import conversions
from gemm.pipeline import ring_plan
from gemm.tensorcore.config import _PAD_C, copy_grid

__all__ = ["smem_layout", "bank_conflicts", "kernel_function"]

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


def _operand(cfg, major, vec, bmn, mma, which):
    """(shared layout, global -> shared tiled copy, shared -> register tiled copy, the device
    function making the operand's global (MN, K) tensor) of an operand read in copies of
    ``vec`` elements along its contiguous mode (cp.async, or plain copies of 2 bytes)."""
    tf32, bk, stages = cfg.dtype == "tfloat32", cfg.bK, cfg.stages
    element = np.float32 if tf32 else np.uint16
    nbytes = vec * np.dtype(element).itemsize
    atom = (SM80_CP_ASYNC_CACHEGLOBAL(16, element) if nbytes == 16
            else SM80_CP_ASYNC_CACHEALWAYS(nbytes, element) if nbytes >= 4
            else UniversalCopy(16, element))        # 2 bytes: a plain load and store
    threads_layout = Layout(*copy_grid(cfg, bmn, major, vec))   # along the contiguous mode
    if major == "K":
        g2s = make_tiled_copy(atom, threads_layout, Layout((1, vec)))

        @cuda.jit(device=True, inline="always")
        def matrix(X, MN, K, ld, at):
            return make_tensor(X, make_layout((MN, K), (ld, ONE)), at)
    else:
        g2s = make_tiled_copy(atom, threads_layout, Layout((vec, 1)))

        @cuda.jit(device=True, inline="always")
        def matrix(X, MN, K, ld, at):
            return make_tensor(X, make_layout((MN, K), (ONE, ld)), at)
    # shared -> registers: ldmatrix for 16-bit values, 4-byte loads of the MMA's own values
    # for tf32 (ldmatrix moves 16-bit elements)
    s2r = (UniversalCopy(32, np.float32) if tf32
           else SM75_U32x4_LDSM_N() if major == "K" else SM75_U16x8_LDSM_T())
    tiled_s2r = (make_tiled_copy_A if which == "A" else make_tiled_copy_B)(s2r, mma)
    return (smem_layout(major, bmn, bk, stages, 32 if tf32 else 16), g2s, tiled_s2r, matrix)


def _tiled_mma(cfg):
    """The kernel's MMA: the m16n8k16 atom (m16n8k8 for tf32) over (wm, wn) warps, permuted
    to (16 wm, 16 wn, k) so that an ldmatrix x4 fills two n8 blocks of B."""
    wm, wn = cfg.warps
    return make_tiled_mma(ATOMS[cfg.dtype](), Layout((wm, wn, 1)),
                          (16 * wm, 16 * wn, 8 if cfg.dtype == "tfloat32" else 16))


@cuda.jit(device=True, inline="always")
def block_order(group_m):
    """(tile row, tile column) of this block of the (tiles of C) grid, in grouped order."""
    gx, gy = U(cuda.gridDim.x), U(cuda.gridDim.y)
    return grouped_tile(U(U(cuda.blockIdx.x) + U(cuda.blockIdx.y) * gx), gx, gy, group_m)


def bank_conflicts(v, swizzle=True):
    """The most shared-memory wavefronts a phase of one of Variant ``v``'s shared accesses
    takes (1: conflict-free), by access: "cp.async A", "cp.async B" (the global -> shared
    copies), "ldmatrix A", "ldmatrix B" (for tf32 "lds A", "lds B": its 4-byte loads),
    from the kernel's own tiled copies over its shared layouts. A warp's accesses of ``w``
    bytes are served ``128 // w`` threads (a phase) at a time; a phase takes as many
    wavefronts as the most distinct ``w``-byte units that fall on one bank group.
    ``swizzle=False``: the same accesses on the layouts without their swizzle (what the
    swizzle buys)."""
    cfg = v.config
    mma, eb = _tiled_mma(cfg), cfg.element_bytes
    out = {}
    for which, major, vec, bmn in (("A", v.a_major, v.vec_a, cfg.bM),
                                   ("B", v.b_major, v.vec_b, cfg.bN)):
        layout, g2s, s2r, _ = _operand(cfg, major, vec, bmn, mma, which)
        offsets = np.arange(cosize(layout.inner))
        stage = make_tensor(offsets, layout if swizzle else layout.inner)[None, None, 0]
        for name, tiled, part in (("cp.async", g2s, partition_D),
                                  ("lds" if s2r.atom.kind == "universal" else "ldmatrix", s2r,
                                   partition_S)):
            parts = [part(get_slice(tiled, t), stage) for t in range(cfg.threads)]
            per = size(parts[0].layout[0])                  # elements of one access
            width = per * eb
            worst = 1
            for r in range(size(parts[0]) // per):
                units = [int(p[r * per]) * eb // width for p in parts]
                for first in range(0, cfg.threads, 128 // width):
                    groups = {}
                    for u in units[first:first + 128 // width]:
                        groups.setdefault(u % (128 // width), set()).add(u)
                    worst = max(worst, max(len(g) for g in groups.values()))
            out[f"{name} {which}"] = worst
    return out


@lru_cache(maxsize=None)
def kernel_function(v):
    """The kernel of Variant ``v`` as a Python function for ``cuda.jit``: ``kernel(A, B, C,
    M, N, K, lda, ldb, ldc, sAb, sBb, sCb, alpha, beta)``: X, Y and C as 1-D arrays, the
    extents, leading dimensions and batch strides in elements (uint32), alpha and beta.
    Each copy's predicate is its first element's, so a run is copied whole or not at all
    (CUTLASS's alignment rule): :mod:`gemm.tensorcore` picks copies whose elements divide
    the operands' contiguous extents."""
    cfg = v.config
    bM, bN, bK, S, GROUP = cfg.bM, cfg.bN, cfg.bK, cfg.stages, cfg.group_m
    threads = cfg.threads
    tf32 = cfg.dtype == "tfloat32"
    kmma = 8 if tf32 else 16                        # the atom's K
    MMA = _tiled_mma(cfg)
    SA, G2S_A, S2R_A, matrix_a = _operand(cfg, v.a_major, v.vec_a, bM, MMA, "A")
    SB, G2S_B, S2R_B, matrix_b = _operand(cfg, v.b_major, v.vec_b, bN, MMA, "B")
    A_ELEMS = cosize(SA.inner)
    TILE_A, TILE_B, TILE_C = static((bM, bK)), static((bN, bK)), static((bM, bN))
    VEC_A, VEC_B = v.vec_a, v.vec_b
    PLAIN_A, PLAIN_B = (G.atom.kind == "universal" for G in (G2S_A, G2S_B))
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
        """k-tile ``k`` into ``stage``, the copies of elements past M, N or K left out (zeros:
        cp.async fills them, a plain copy's are written first); the predicates computed anew
        each time (fewer registers held through the loop)."""
        cA, cB = tAcA[None, None, None, k], tBcB[None, None, None, k]
        for r in unroll(COPIES_A):
            tApA[r] = elem_less(cA[r * VEC_A], (M, K))
        for r in unroll(COPIES_B):
            tBpB[r] = elem_less(cB[r * VEC_B], (N, K))
        if PLAIN_A:
            fill(tAsA[None, None, None, stage], 0)
        if PLAIN_B:
            fill(tBsB[None, None, None, stage], 0)
        copy_if(G2S_A, tApA, tAgA[None, None, None, k], tAsA[None, None, None, stage])
        copy_if(G2S_B, tBpB, tBgB[None, None, None, k], tBsB[None, None, None, stage])

    mainloop_inside, mainloop_edges = (
        _mainloop(cuda.jit(device=True, inline="always")(issue), S, cfg.delay_release, KB, MMA,
                  S2R_A, S2R_B) for issue in (copy_inside, copy_edges))

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

        # epilogue: acc staged in shared memory, then alpha * acc (+ beta * C) in 16-byte
        # runs of a row of C
        arch.cp_async_wait(0)
        cuda.syncthreads()                      # every ldmatrix of the ring is done
        smc = cuda.shared.array(0, float32, alignment=align)
        sC = make_shared_tensor(smc, SC, base // U(PER_FLOAT))
        tCsC = partition_C(thr, sC)
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
            for e in unroll(RUN):
                x[e] = alpha * x[e]
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


def _mainloop(issue, S, delay, KB, MMA, S2R_A, S2R_B):
    """CUTLASS's SM80 mainloop over a ring of ``S`` shared stages (a device function),
    ``issue(..., k, stage)`` copying k-tile ``k`` into a stage: ``S - 1 - delay`` k-tiles
    in flight (a stage is refilled ``delay`` k-tiles after its last read), one commit group
    each (empty past the last); the register fragments of k-block ``kb + 1`` read while
    ``kb`` is multiplied; the next k-tile's stage waited for before the last k-block, the
    k-tile ``S - 1 - delay`` ahead issued at the first."""
    plan = ring_plan(S, delay)                      # gemm.pipeline's ring
    LEAD, WAIT = plan.ahead, plan.wait              # k-tiles in flight, groups left waiting
    AHEAD = static_range(LEAD)
    K_BLOCKS = static_range(KB)

    @unrolled
    def mainloop(tAgA, tAsA, tBgB, tBsB, tApA, tBpB, tAcA, tBcB, tXsA, tXrA, tXsB, tXrB, tCrA,
                 tCrB, tCrC, M, N, K, k_tiles):
        for s in unroll(AHEAD):
            if U(s) < k_tiles:
                issue(tAgA, tAsA, tBgB, tBsB, tApA, tBpB, tAcA, tBcB, M, N, K, U(s), U(s))
            arch.cp_async_commit()
        read, write = U(0), U(LEAD)             # the stages read and written next
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
                if kb == 0:                     # the k-tile LEAD ahead into its stage
                    ahead = U(k + U(LEAD))
                    if ahead < k_tiles:
                        issue(tAgA, tAsA, tBgB, tBsB, tApA, tBpB, tAcA, tBcB, M, N, K, ahead,
                              write)
                    arch.cp_async_commit()
                    write = U(write + U(1)) if write + U(1) < U(S) else U(0)
                gemm(MMA, tCrC, tCrA[None, None, kb], tCrB[None, None, kb])
            k = U(k + U(1))

    return cuda.jit(device=True, inline="always")(mainloop)
