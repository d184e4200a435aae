"""The small-M kernel (:mod:`gemm.skinny`) written with :mod:`gemm.cute`.

Two kernels, by the unit stride of B (the configuration and the call are in
:mod:`gemm.skinny`, which says how the work is cut):

- **B's N the unit stride** (:func:`_along_n`): the 32 lanes of a warp read ``vector``
  consecutive columns each, the block's 8 warps take turns over K (a tiled copy of threads
  (8, 32) over a chunk of (8 x unroll, 32 x vector) of B); each thread's sums are added into
  shared memory warp after warp, in warp order.
- **B's K the unit stride** (:func:`_along_k`): the lanes read ``vector`` consecutive K
  positions each, warp ``w`` owns columns ``w, w + 8, ..`` (``columns`` of them); a warp's
  sums are added with butterfly shuffles.

Both first copy A's ``rows`` x the block's K range to shared memory as float32 (zeros past
the edges), then walk the range chunk by chunk: B's loads of the chunk (one vector load
where a run lies inside the matrix, value by value at its edges), then one outer product of
A's rows by each K position's values of B (``gemm`` on UniversalFMA fragments). In the
second kernel a lane's values lie ``vector`` apart in K, so A's shared layout holds K
position ``v + vector * l`` of a chunk (lane l's v-th) at ``32 v + l``: the shared loads of a
warp's K positions are one 16-byte broadcast per 4 rows. The layout does that permutation:
(rows, (vector, 32, chunks)) with strides (1, (32 RP, RP, chunk x RP)).
"""

import numpy as np
from numba import cuda, float32, int32, uint16

from layoutalg import Layout, UniversalCopy, make_tiled_copy
from gemm import arch
from gemm.cute import (copy, copy_if, dynamic_range, elem_less, fill, gemm, get_slice, local_tile,
                       make_fragment_like, make_identity_tensor, make_layout,
                       make_shared_tensor, make_tensor, partition_S, size, static, static_range,
                       unroll, unrolled)
from gemm.dtypes import STORAGE
from gemm.epilogue_kernel import conversions

__all__ = ["kernel_function"]

U = np.uint32
ONE = static(1)


def kernel_function(cfg, b_unit):
    """The kernel of a :class:`gemm.skinny.SkinnyConfig` for B's unit stride along
    ``b_unit`` ("n" or "k"), as a Python function for ``cuda.jit``: ``kernel(X, Y, C, W, M,
    N, K, sam, sak, sbn, sbk, scm, scn, swm, swn, sws, KR, alpha, beta)`` (see
    :func:`gemm.skinny.skinny_function`)."""
    if b_unit not in ("n", "k"):
        raise ValueError(f"b_unit must be 'n' or 'k', got {b_unit!r}")
    return (_along_n if b_unit == "n" else _along_k)(cfg)


def _parts(cfg, b_unit):
    """What both kernels share: the tile shapes, A's shared layout (see the module), the
    copies of A's rows out of shared memory (16 bytes a load where ``rows`` allows), the
    block's sums, B's tiled copy and the epilogue."""
    R, V, KC, BN = cfg.rows, cfg.vector, cfg.chunk(b_unit), cfg.block_columns(b_unit)
    RP, WARPS = cfg.a_stride, cfg.threads // 32
    chunks = cfg.a_capacity(b_unit) // KC
    if b_unit == "n":
        shared_a = Layout((R, KC * chunks), (1, RP))
        threads, tile_b = Layout((WARPS, 32), (32, 1)), (KC, BN)   # B as (K, N)
    else:
        shared_a = Layout((R, (V, 32, chunks)), (1, (32 * RP, RP, KC * RP)))
        threads, tile_b = Layout((WARPS, 32), (32, 1)), (BN, KC)   # B as (N, K)
    element = np.dtype(STORAGE[cfg.dtype])
    row_bits = 32 * min(R, 4)
    return dict(
        R=R, V=V, KC=KC, BN=BN, SA=shared_a, RED=Layout((R, BN), (BN, 1)),
        TILE_A=static((R, KC)), TILE_B=static(tile_b), TILE_C=static((R, BN)),
        LOAD_A=make_tiled_copy(UniversalCopy(row_bits, np.float32), Layout(1),
                               Layout(row_bits // 32)),
        LOAD_B=make_tiled_copy(UniversalCopy(V * 8 * element.itemsize, element), threads,
                               Layout((1, V))),
        ELEMENT=float32 if cfg.dtype == "float32" else uint16,
        TO_F32=conversions(cfg.dtype)[1],
        EPILOGUE=_epilogue(cfg.out_dtype, R, BN, cfg.threads),
        A_TO_SHARED=_a_to_shared(cfg.dtype, R, KC, cfg.threads),
        THREADS=cfg.threads, WARPS=WARPS,
        PRED=Layout(cfg.unroll if b_unit == "n" else cfg.columns))


def _load_b(LOAD_B, runs, V):
    """A device function loading a chunk's runs of B (``src`` (V, runs, 1), their
    coordinates ``crd``) into registers ``dst``: zeros, then one vector load for each run
    inside ``bound`` (predicated: every run's load in flight at once), then value by value
    where a run crosses the bound."""
    RUNS, VALUES = static_range(runs), static_range(V)

    @unrolled
    def load_b(src, crd, dst, pred, bound):
        fill(dst, 0)
        for u in unroll(RUNS):
            pred[u] = elem_less(crd[None, u, 0][V - 1], bound)
        copy_if(LOAD_B, pred, src, dst)
        for u in unroll(RUNS):
            if pred[u] == 0 and elem_less(crd[None, u, 0][0], bound):     # across the edge
                for v in unroll(VALUES):
                    if elem_less(crd[None, u, 0][v], bound):
                        dst[v, u, 0] = src[v, u, 0]
    return cuda.jit(device=True, inline="always")(load_b)


def _walk(p, CHUNK, ROW_B):
    """A device function walking the block's K range ``kbeg .. kend`` chunk by chunk: the
    chunk's runs of B (``tBgB``, their coordinates ``tBcB``: (V, runs, 1, c)) into registers
    ``tBrB``, then ``CHUNK(sAc, tBrB, acc, a, b, which, c - first)`` (its products into
    ``acc``).
    Chunks inside the matrix (whole, and ``full``: the block's columns all inside N) are
    copied without predicates, the rest zero-filled and predicated by ``bound``."""
    LOAD_B, KC, ELEMENT, PRED = p["LOAD_B"], p["KC"], p["ELEMENT"], p["PRED"]
    LOAD_RUNS = _load_b(LOAD_B, size(PRED), p["V"])
    ROW_A = Layout((1, p["R"]))

    def walk(tBgB, tBcB, sAc, acc, which, kbeg, kend, full, bound):
        tBrB = make_fragment_like(tBgB[None, None, None, 0], ELEMENT)
        pred = make_fragment_like(PRED, int32)                  # a run inside the bound
        a = make_fragment_like(ROW_A, float32)
        b = make_fragment_like(ROW_B, float32)
        first, last = kbeg // U(KC), (kend + U(KC - 1)) // U(KC)
        inside = kend // U(KC) if full else first
        for c in dynamic_range(first, inside):
            copy(LOAD_B, tBgB[None, None, None, c], tBrB)
            CHUNK(sAc, tBrB, acc, a, b, which, c - first)
        for c in dynamic_range(inside, last):
            LOAD_RUNS(tBgB[None, None, None, c], tBcB[None, None, None, c], tBrB, pred,
                      bound)
            CHUNK(sAc, tBrB, acc, a, b, which, c - first)
    return cuda.jit(device=True, inline="always")(walk)


def _a_to_shared(dtype, R, KC, THREADS):
    """A device function copying A's rows ``m0 ..`` x K ``kbeg .. kend`` of ``mA`` to shared
    ``sA`` as float32, whole chunks of ``KC`` positions (zeros past M and kend): element
    ``e`` of the block's share at position ``e // R`` of row ``e % R``."""
    to_f32 = conversions(dtype)[1]

    def a_to_shared(mA, sA, t, M, m0, kbeg, kend):
        e = t
        span = (kend - kbeg + U(KC - 1)) // U(KC) * U(KC * R)
        while e < span:
            kk, i = e // U(R), e % U(R)
            x = float32(0)
            if m0 + i < M and kbeg + kk < kend:
                x = to_f32(mA[m0 + i, kbeg + kk])
            sA[i, kk] = x
            e += U(THREADS)
    return cuda.jit(device=True, inline="always")(a_to_shared)


def _epilogue(out_dtype, R, BN, THREADS):
    """A device function writing the block's sums ``red`` (R, BN): to the split-K
    workspace's tile ``gW`` when the grid has several K ranges, else ``alpha * sum + beta *
    out`` to the out's tile ``gC`` (out not read when beta is 0); only inside (M, N)."""
    store, load = conversions(out_dtype)

    def epilogue(red, gC, gW, cC, t, M, N, alpha, beta):
        e = t
        while e < U(R * BN):
            i, col = e // U(BN), e % U(BN)
            if elem_less(cC[i, col], (M, N)):
                if cuda.gridDim.y > 1:
                    gW[i, col] = red[i, col]
                else:
                    v = alpha * red[i, col]
                    if beta != float32(0):
                        v += beta * load(gC[i, col])
                    gC[i, col] = store(v)
            e += U(THREADS)
    return cuda.jit(device=True, inline="always")(epilogue)


def _along_n(cfg):
    """B (K, N) with N the unit stride: lanes along N, warps along K."""
    p = _parts(cfg, "n")
    R, V, BN = p["R"], p["V"], p["BN"]
    SA, RED, TILE_A, TILE_B, TILE_C = p["SA"], p["RED"], p["TILE_A"], p["TILE_B"], p["TILE_C"]
    LOAD_A, LOAD_B, TO_F32 = p["LOAD_A"], p["LOAD_B"], p["TO_F32"]
    EPILOGUE, A_TO_SHARED = p["EPILOGUE"], p["A_TO_SHARED"]
    THREADS, WARPS = p["THREADS"], p["WARPS"]
    ACC = Layout((1, R, V))
    TILE_T = static((R, V))                                 # a thread's sums
    STEPS, VALUES, ROWS = (static_range(n) for n in (cfg.unroll, V, R))

    @unrolled
    def chunk(sAc, tBrB, acc, a, b, w, cc):
        """A chunk's products: A's rows at each of the warp's K positions of chunk ``cc``
        (shared) by the V values of B's row there (registers)."""
        for u in unroll(STEPS):
            copy(LOAD_A, sAc[None, w + U(WARPS * u), cc], a)
            for v in unroll(VALUES):
                b[0, v] = TO_F32(tBrB[v, u, 0])
            gemm(acc, a, b)
    WALK = _walk(p, cuda.jit(device=True, inline="always")(chunk), Layout((1, V)))

    @unrolled
    def kernel(X, Y, C, W, M, N, K, sam, sak, sbn, sbk, scm, scn, swm, swn, sws, KR, alpha,
               beta):
        t = U(cuda.threadIdx.x)
        lane, w = t % U(32), t // U(32)
        bx, s, bz = U(cuda.blockIdx.x), U(cuda.blockIdx.y), U(cuda.blockIdx.z)
        kbeg = s * KR
        kend = min(K, kbeg + KR)
        sA = make_shared_tensor(float32, SA)                 # (R, K range)
        red = make_shared_tensor(float32, RED)               # (R, BN): the block's sums
        mA = make_tensor(X, make_layout((M, K), (sam, sak)))
        A_TO_SHARED(mA, sA, t, M, bz * U(R), kbeg, kend)

        gB = local_tile(make_tensor(Y, make_layout((K, N), (sbk, ONE))), TILE_B, (None, bx))
        cB = local_tile(make_identity_tensor((K, N)), TILE_B, (None, bx))   # (KC, BN, c)
        thr = get_slice(LOAD_B, t)
        tBgB, tBcB = partition_S(thr, gB), partition_S(thr, cB)    # (V, STEPS, 1, c)
        sAc = local_tile(sA, TILE_A, (0, None))              # (R, KC, c)
        acc = make_fragment_like(ACC, float32)
        fill(acc, 0)
        cuda.syncthreads()
        # B's rows k = c KC + w + 8 u of chunk c, a run of V columns each
        WALK(tBgB, tBcB, sAc, acc, w, kbeg, kend, (bx + U(1)) * U(BN) <= N, (kend, N))

        # the block's sums: the warps' added in shared memory, in warp order
        e = t
        while e < U(R * BN):
            red[e % U(R), e // U(R)] = float32(0)
            e += U(THREADS)
        mine = local_tile(red, TILE_T, (0, lane))            # (R, V)
        for q in range(WARPS):
            cuda.syncthreads()
            if w == U(q):
                for i in unroll(ROWS):
                    for v in unroll(VALUES):
                        mine[i, v] += acc[0, i, v]
        cuda.syncthreads()
        gC = local_tile(make_tensor(C, make_layout((M, N), (scm, scn))), TILE_C, (bz, bx))
        gW = local_tile(make_tensor(W, make_layout((M, N), (swm, swn)), s * sws), TILE_C,
                        (bz, bx))
        cC = local_tile(make_identity_tensor((M, N)), TILE_C, (bz, bx))
        EPILOGUE(red, gC, gW, cC, t, M, N, alpha, beta)

    return kernel


def _along_k(cfg):
    """B as (N, K) with K the unit stride: lanes along K, warp ``w`` on columns ``w + 8 j``."""
    p = _parts(cfg, "k")
    R, V = p["R"], p["V"]
    SA, RED, TILE_A, TILE_B, TILE_C = p["SA"], p["RED"], p["TILE_A"], p["TILE_B"], p["TILE_C"]
    LOAD_A, LOAD_B, TO_F32 = p["LOAD_A"], p["LOAD_B"], p["TO_F32"]
    EPILOGUE, A_TO_SHARED = p["EPILOGUE"], p["A_TO_SHARED"]
    WARPS = p["WARPS"]
    NCOL = cfg.columns
    ACC = Layout((1, R, NCOL))
    COLUMNS, VALUES, ROWS = (static_range(n) for n in (NCOL, V, R))
    ACCS = static_range(R * NCOL)
    OFFSETS = (16, 8, 4, 2, 1)
    BN = p["BN"]

    @unrolled
    def chunk(sAc, tBrB, acc, a, b, lane, cc):
        """A chunk's products: A's rows at each of the lane's K positions of chunk ``cc``
        (shared) by the values of B's columns there (registers)."""
        for v in unroll(VALUES):
            copy(LOAD_A, sAc[None, lane * U(V) + U(v), cc], a)
            for j in unroll(COLUMNS):
                b[0, j] = TO_F32(tBrB[v, j, 0])
            gemm(acc, a, b)
            arch.compiler_fence()
    WALK = _walk(p, cuda.jit(device=True, inline="always")(chunk), Layout((1, NCOL)))

    @unrolled
    def kernel(X, Y, C, W, M, N, K, sam, sak, sbn, sbk, scm, scn, swm, swn, sws, KR, alpha,
               beta):
        t = U(cuda.threadIdx.x)
        lane, w = t % U(32), t // U(32)
        bx, s, bz = U(cuda.blockIdx.x), U(cuda.blockIdx.y), U(cuda.blockIdx.z)
        kbeg = s * KR
        kend = min(K, kbeg + KR)
        sA = make_shared_tensor(float32, SA)                 # (R, K range), permuted
        red = make_shared_tensor(float32, RED)               # (R, BN): the block's sums
        mA = make_tensor(X, make_layout((M, K), (sam, sak)))
        A_TO_SHARED(mA, sA, t, M, bz * U(R), kbeg, kend)

        gB = local_tile(make_tensor(Y, make_layout((N, K), (sbn, ONE))), TILE_B, (bx, None))
        cB = local_tile(make_identity_tensor((N, K)), TILE_B, (bx, None))   # (BN, KC, c)
        thr = get_slice(LOAD_B, t)
        tBgB, tBcB = partition_S(thr, gB), partition_S(thr, cB)    # (V, NCOL, 1, c)
        sAc = local_tile(sA, TILE_A, (0, None))              # (R, (V, 32), c)
        acc = make_fragment_like(ACC, float32)
        fill(acc, 0)
        cuda.syncthreads()
        # columns w + 8 j, K positions c KC + V lane .. of chunk c, a run of V each
        WALK(tBgB, tBcB, sAc, acc, lane, kbeg, kend, (bx + U(1)) * U(BN) <= N, (N, kend))

        # the block's sums: each warp's by butterfly shuffles, then lane 0's to shared memory
        for off in unroll(OFFSETS):
            for x in unroll(ACCS):
                acc[x] += arch.shfl_xor_f32(acc[x], off)
        if lane == U(0):
            for i in unroll(ROWS):
                for j in unroll(COLUMNS):
                    red[i, w + U(WARPS * j)] = acc[0, i, j]
        cuda.syncthreads()
        gC = local_tile(make_tensor(C, make_layout((M, N), (scm, scn))), TILE_C, (bz, bx))
        gW = local_tile(make_tensor(W, make_layout((M, N), (swm, swn)), s * sws), TILE_C,
                        (bz, bx))
        cC = local_tile(make_identity_tensor((M, N)), TILE_C, (bz, bx))
        EPILOGUE(red, gC, gW, cC, t, M, N, alpha, beta)

    return kernel
