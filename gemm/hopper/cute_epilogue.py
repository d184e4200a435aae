"""The epilogues of the Hopper GEMM written with :mod:`gemm.cute` (:mod:`gemm.hopper.cute_gemm`):
a consumer's ``alpha * acc`` written out once its tile's k-tiles are multiplied.

- The TMA epilogue (``v.tma_store``): 64-row x 128-byte pieces staged in two swizzled
  shared buffers past the ring (a thread's two adjacent values of a row in one store: a
  tiled copy of ``UniversalCopy`` pairs over the wgmma's C layout) and stored by TMA, one
  piece staged while the one before is stored.
- Its fused form (a bias, an activation: :mod:`gemm.epilogue`; FP8's scales per row and
  column): a piece's values in a register fragment, scaled and biased, then ``transform``
  applies the activation. Those vectors are a consumer's share of the tile, read from
  global memory into registers as the tile starts (``fetch_vectors``) and staged in shared
  memory past the pieces after its products (``stage_vectors``), so that no piece waits for
  a load.
- The registers epilogue: ``act(alpha * acc * sa * sb + beta * C + bias)`` through
  ``partition_C``, predicated at the matrix's edges by an identity tensor (a tile inside the
  matrix, C's pairs aligned, read and stored by pairs of columns); split-K's
  partial tiles, float32, into the workspace by pairs of columns (its rows padded to an
  even length, so that every pair is aligned and a pair at the last column may write the
  padding).
"""

from types import SimpleNamespace

import numpy as np
from numba import cuda, float32, uint8, uint16

from layoutalg import Layout, UniversalCopy, make_tiled_copy_C, make_tiled_mma
from gemm import arch
from gemm.arch.smem import SWIZZLE_ALIGN
from gemm.cute import (copy, copy_if, elem_less, fence_view_async_shared, get_slice,
                       local_tile, make_fragment_like, make_identity_tensor, make_layout,
                       make_tensor, named_barrier_sync, partition_C, partition_D, static,
                       static_groups, static_range, tma_store_arrive, tma_store_wait,
                       transform, unroll, unrolled)
from gemm.epilogue import activation_function
from gemm.epilogue_kernel import conversions
from gemm.arch.smem import shared_alignment
from gemm.hopper.config import STAGING_BYTES
from gemm.hopper.plan import atom_of, stage_layout

__all__ = ["epilogue_functions"]

ONE = static(1)
U = np.uint32
_OUT = {"float32": float32, "bfloat16": uint16, "float16": uint16}
_PAIR = {"float32": np.float32, "bfloat16": np.uint16, "float16": np.uint16}
_TO_PAIR = {"bfloat16": arch.cvt_rn_bf16x2_f32, "float16": arch.cvt_rn_f16x2_f32}


def pairs_of(mma, dtype):
    """The tiled copy of a thread's C values of ``mma`` two adjacent columns at a time (one
    store of 2 x ``dtype``), in ``partition_C``'s order."""
    return make_tiled_copy_C(UniversalCopy(2 * 8 * np.dtype(dtype).itemsize, dtype), mma)


def epilogue_functions(v, plan, mma):
    """Variant ``v``'s epilogues as device functions, for the kernel's tiled MMA ``mma`` and
    the copies of ``plan`` (:func:`gemm.hopper.plan.hopper_copies`): ``store_tma(acc, c,
    bufs, at, bz, CM, vat, alpha, sq)`` (the TMA epilogue, fused where the variant has a
    bias, an activation or row scales; ``bufs``: consumer ``c``'s ``staging_buffers(c)``),
    ``registers_epilogue``, ``partial_epilogue`` (split-K),
    ``fetch_vectors`` and ``stage_vectors``, with ``held`` (the layout of a thread's share
    of the vectors) and ``vectors`` (whether it has any)."""
    cfg = v.config
    bm, bn, stages, wgs = cfg.bM, cfg.bN, cfg.stages, cfg.consumers
    tma_store = v.tma_store
    block_c = static((bm, bn))
    to_out, from_out = conversions(v.out_dtype)
    to_pair = _TO_PAIR.get(v.out_dtype)     # 16-bit outs: two values by one packed cvt
    packs = to_pair is not None
    from_bias = conversions(v.bias_dtype)[1]
    # (bools: numba prunes their branches); a 16-bit out rounds away tanh.approx's error
    has_bias, bias_rows, has_act = v.bias != "none", v.bias == "rows", v.activation != "none"
    scale_rows = v.scale == "rows"         # FP8's scales of X's rows and Y's columns
    c_columns = v.c_columns                 # swapped operands: C stored column by column
    act = activation_function(v.activation, fast=v.out_dtype != "float32")
    n_values = bm // 64 * bn // 2                   # a consumer thread's accumulators
    starts, group = static_groups(n_values)         # (written out one by one: 30 s more)
    # the TMA epilogue's pieces of 64 rows (a wgmma atom's) x 128 bytes of columns
    out = _OUT[v.out_dtype]
    out_bits = out.bitwidth
    chunk = 1024 // out_bits                        # 128 bytes of columns
    sc = stage_layout("K", 64, chunk, out_bits)
    tma_c = plan.copy_c if tma_store else None      # (the host makes C's map only then)
    mma_c = make_tiled_mma(atom_of(v, chunk))       # a piece's share of each thread
    r2s = pairs_of(mma_c, _PAIR[v.out_dtype])       # staged by pairs
    r2g = pairs_of(mma, np.float32)                 # split-K's partial tiles by pairs
    r2c = pairs_of(mma, _PAIR[v.out_dtype])         # a whole tile of C by pairs
    paired = v.vec_c and not c_columns      # whole tiles by pairs (the host checked C's)
    pairs = static_range(bm * bn // 256)            # a thread's pairs of a tile
    one_per_pair = Layout(len(pairs))
    # the TMA epilogue's vectors (row scales, column scales, bias): a consumer's share of
    # the tile read from global memory into registers as the tile starts, and staged in
    # shared memory past the pieces after its products (so that no piece waits for a load)
    n_sa = bm if scale_rows and tma_store else 0
    n_sb = bn if scale_rows and tma_store else 0
    staged_bias = has_bias and tma_store
    vec_floats = v.vector_floats                    # n_sa + n_sb + the bias's
    vectors = vec_floats > 0
    ring = (stages + cfg.split_buffers) * cfg.slot_bytes   # the ring and 3xTF32's buffers
    vec_at = (ring + wgs * STAGING_BYTES) // 4      # floats past them
    loads_m, loads_n = static_range(-(-bm // 128)), static_range(-(-bn // 128))
    held = Layout(len(loads_m) + 2 * len(loads_n))  # SA's, then SB's, then the bias's
    per_atom = bn // chunk                          # pieces of an atom's rows
    row_atoms = static_range(bm // 64)
    piece_elems = STAGING_BYTES // 2 * 8 // out_bits
    staging = ring * 8 // out_bits                  # past the ring, in out elements
    piece = static((64, chunk))
    col_pieces = static_range(per_atom)
    even_pieces = len(row_atoms) * per_atom % 2 == 0
    align = shared_alignment()
    held_shares = not (v.promote or scale_rows)  # (else ptxas spilled them)

    @cuda.jit(device=True, inline="always")
    def out_pair(lo, hi):
        """Two float32 values as the out's elements (16-bit ones by one packed cvt, whose
        word the staging copy stores as it is)."""
        if packs:
            return arch.unpack_b16x2(to_pair(lo, hi))
        return lo, hi

    @cuda.jit(device=True, inline="always")
    def staging_buffers(c):
        """Consumer ``c``'s two staging buffers, each with this thread's share of it (its
        pairs' swizzled addresses: made once, before the consumer's tiles, they stay in
        registers): (buffer 0, buffer 1, share of 0, share of 1)."""
        raw_c = cuda.shared.array(0, out, alignment=align)
        stage = arch.shared_offset_of(raw_c, SWIZZLE_ALIGN) + staging + c * 2 * piece_elems
        s0 = make_tensor(raw_c, sc, stage)
        s1 = make_tensor(raw_c, sc, stage + piece_elems)
        thr_s = get_slice(r2s, cuda.threadIdx.x % 128)
        return s0, s1, partition_D(thr_s, s0), partition_D(thr_s, s1)

    @cuda.jit(device=True, inline="always")
    def piece_buffer(c, bufs, q):
        """The shared buffer of the next piece and this thread's share of it, of ``bufs``
        (:func:`staging_buffers`) the one of ``q``'s parity (``q``: the pieces staged before
        it; where a tile has an even number of pieces, its place in the tile, a constant once
        the loops are unrolled), once the TMA store two pieces back has read it and every
        thread of the consumer is past it."""
        if cuda.threadIdx.x % 128 == 0:
            tma_store_wait(1)
        named_barrier_sync(1 + c, 128)
        if held_shares:
            if q & 1:
                return bufs[1], bufs[3]
            return bufs[0], bufs[2]
        sC = bufs[1] if q & 1 else bufs[0]
        return sC, partition_D(get_slice(r2s, cuda.threadIdx.x % 128), sC)

    @cuda.jit(device=True, inline="always")
    def store_piece(c, sC, CM, row0, col0, bz):
        """The staged piece at (row0, col0) of matrix bz, stored by one thread with TMA."""
        fence_view_async_shared()                       # the stores, seen by TMA
        named_barrier_sync(1 + c, 128)
        if cuda.threadIdx.x % 128 == 0:
            copy(tma_c, CM, (row0, col0, bz), sC)
            tma_store_arrive()

    @cuda.jit(device=True, inline="always")
    @unrolled
    def fetch_vectors(h, SA, SB, BIAS, row0, col0, M, N):
        """Into ``h``: this thread's share of the tile's vectors from global memory (rows
        ``row0 + q * 128 + i`` and columns ``col0 + q * 128 + i``, clamped inside)."""
        i = cuda.threadIdx.x % 128
        for q in unroll(loads_m):
            r = U(min(row0 + q * 128 + i, M - 1))
            if scale_rows:
                h[q] = SA[r]
            if staged_bias and bias_rows:
                h[len(loads_m) + len(loads_n) + q] = from_bias(BIAS[r])
        for q in unroll(loads_n):
            col = U(min(col0 + q * 128 + i, N - 1))
            if scale_rows:
                h[len(loads_m) + q] = SB[col]
            if staged_bias and not bias_rows:
                h[len(loads_m) + len(loads_n) + q] = from_bias(BIAS[col])

    @cuda.jit(device=True, inline="always")
    @unrolled
    def stage_vectors(h, c):
        """``h`` into consumer ``c``'s vectors in shared memory (its readers of the last
        tile are past the last piece's barrier; this tile's wait at the first piece's);
        returns their first float."""
        vec = cuda.shared.array(0, float32, alignment=align)
        at = U(arch.shared_offset_of(vec, SWIZZLE_ALIGN) + vec_at + c * vec_floats)
        i = U(cuda.threadIdx.x % 128)
        for q in unroll(loads_m):
            if q * 128 + i < bm:
                if scale_rows:
                    vec[at + q * 128 + i] = h[q]
                if staged_bias and bias_rows:
                    vec[at + n_sa + n_sb + q * 128 + i] = h[len(loads_m) + len(loads_n) + q]
        for q in unroll(loads_n):
            if q * 128 + i < bn:
                if scale_rows:
                    vec[at + n_sa + q * 128 + i] = h[len(loads_m) + q]
                if staged_bias and not bias_rows:
                    vec[at + n_sa + n_sb + q * 128 + i] = h[len(loads_m) + len(loads_n) + q]
        return at

    @cuda.jit(device=True, inline="always")
    @unrolled
    def tma_epilogue(acc, c, bufs, at, bz, CM, vat, alpha, sq):
        """``alpha * acc`` stored by TMA: 64-row x 128-byte pieces staged in the two
        swizzled shared buffers ``bufs`` (:func:`staging_buffers`), one staged while the one
        before is stored; returns the count of pieces staged (``sq``, this one's
        included)."""
        # each wgmma atom's 64 rows, chunk columns at a time; NVVM unrolls the two inner
        # loops (written out by unroll(), they took seconds more to compile)
        for a in unroll(row_atoms):
            for p in range(per_atom):
                sC, tRSsC = piece_buffer(c, bufs, a * per_atom + p if even_pieces else sq)
                y = make_fragment_like(tRSsC, out)
                for j in range(0, chunk // 2, 2):
                    i = a * (bn // 2) + p * (chunk // 2) + j
                    y[j], y[j + 1] = out_pair(alpha * acc[i], alpha * acc[i + 1])
                copy(r2s, y, tRSsC)
                store_piece(c, sC, CM, at[0] * bm + a * 64, at[1] * bn + p * chunk, bz)
                sq += 1
        return sq

    @cuda.jit(device=True, inline="always")
    @unrolled
    def fused_tma_epilogue(acc, c, bufs, at, bz, CM, vat, alpha, sq):
        """:func:`tma_epilogue` of ``act(alpha * acc * sa * sb + bias)`` (``sa``, ``sb``:
        FP8's scales of the row and column, where they are per row): a piece's values in a
        register fragment, scaled and the bias added (the vectors staged from ``vat``, their
        values past the matrix's edges the nearest inside: TMA leaves those out), then
        ``transform`` applies the activation (one
        compiled function called at constant indices: numba-inlined at each value it took
        seconds to compile). The pieces of an atom's rows are written out: with the
        activation in it NVVM left that loop rolled, and the accumulators went to local
        memory. The vectors' indices are uint32 (signed ones, from the coordinates' int64,
        make numba wrap negative indices around at each read)."""
        thr_c = get_slice(mma_c, cuda.threadIdx.x % 128)
        tCcP = partition_C(thr_c, make_identity_tensor(piece))     # (row, column) in a piece
        vec = cuda.shared.array(0, float32, alignment=align)
        for a in unroll(row_atoms):
            for p in unroll(col_pieces):
                sC, tRSsC = piece_buffer(c, bufs, a * per_atom + p if even_pieces else sq)
                row0, col0 = at[0] * bm + a * 64, at[1] * bn + p * chunk
                x = make_fragment_like(tCcP, float32)
                for j in range(chunk // 2):
                    v = alpha * acc[a * (bn // 2) + p * (chunk // 2) + j]
                    r, col = tCcP[j]
                    i, jj = a * 64 + r, p * chunk + col     # in the tile
                    if scale_rows:
                        v *= vec[U(vat + i)] * vec[U(vat + n_sa + jj)]
                    if has_bias:
                        v += vec[U(vat + n_sa + n_sb + (i if bias_rows else jj))]
                    x[j] = v
                if has_act:
                    transform(x, act)
                y = make_fragment_like(tRSsC, out)
                for j in range(0, chunk // 2, 2):
                    y[j], y[j + 1] = out_pair(x[j], x[j + 1])
                copy(r2s, y, tRSsC)
                store_piece(c, sC, CM, row0, col0, bz)
                sq += 1
        return sq

    store_tma = fused_tma_epilogue if has_bias or has_act or scale_rows else tma_epilogue

    @cuda.jit(device=True, inline="always")
    def value_of(acc, j, cin, tCcC, BIAS, SA, SB, alpha, beta):
        """``act(alpha * acc[j] * sa * sb + beta * C + bias)`` of value ``j``, C's value
        ``cin[j]`` (read only where beta is not 0)."""
        x = alpha * acc[j]
        if scale_rows:
            x *= SA[U(tCcC[j][0])] * SB[U(tCcC[j][1])]
        if beta != 0:
            x += beta * from_out(cin[j])
        if has_bias:
            x += from_bias(BIAS[U(tCcC[j][0] if bias_rows else tCcC[j][1])])
        if has_act:
            x = act(x)
        return x

    @cuda.jit(device=True, inline="always")
    @unrolled
    def store_values(acc, tCgC, tCcC, BIAS, SA, SB, M, N, alpha, beta):
        """The registers epilogue's values inside the matrix, each stored into C,
        predicated by its coordinates."""
        for s in unroll(starts):
            for i in range(group):
                j = s + i
                if elem_less(tCcC[j], (M, N)):
                    tCgC[j] = to_out(value_of(acc, j, tCgC, tCcC, BIAS, SA, SB, alpha, beta))

    @cuda.jit(device=True, inline="always")
    @unrolled
    def tile_values(acc, y, tCcC, BIAS, SA, SB, alpha, beta):
        """A tile inside the matrix: its values into ``acc`` (C's from ``y``: a fragment
        loaded by pairs, or C itself), without predicates."""
        for s in unroll(starts):
            for i in range(group):
                acc[s + i] = value_of(acc, s + i, y, tCcC, BIAS, SA, SB, alpha, beta)

    @cuda.jit(device=True, inline="always")
    def registers_epilogue(acc, at, bz, C, BIAS, SA, SB, M, N, ldc, sCb, alpha, beta):
        """``act(alpha * acc * sa * sb + beta * C + bias)`` through ``partition_C``,
        predicated at the edges (C not read where beta is 0); a tile inside the matrix, C's
        pairs aligned, is stored (and a 16-bit C read, where beta is not 0) by pairs of
        columns without predicates: one 4- or 8-byte access a pair (``r2c``)."""
        tid = cuda.threadIdx.x % 128
        thr = get_slice(mma, tid)
        if c_columns:           # swapped operands: the kernel's C^T, stored by columns
            gC = make_tensor(C, make_layout((M, N), (ONE, ldc)), bz * sCb)
        else:
            gC = make_tensor(C, make_layout((M, N), (ldc, ONE)), bz * sCb)
        tile = local_tile(gC, block_c, at)
        tCgC = partition_C(thr, tile)
        tCcC = partition_C(thr, local_tile(make_identity_tensor((M, N)), block_c, at))
        if paired:
            if (at[0] + 1) * bm <= M and (at[1] + 1) * bn <= N:
                tRgC = partition_D(get_slice(r2c, tid), tile)
                y = make_fragment_like(tRgC, out)
                if packs:               # 16-bit C: the tile's pairs loaded first
                    if beta != 0:
                        copy(r2c, tRgC, y)
                    tile_values(acc, y, tCcC, BIAS, SA, SB, alpha, beta)
                else:                   # float32: read as used (held, ptxas spilled them)
                    tile_values(acc, tCgC, tCcC, BIAS, SA, SB, alpha, beta)
                for j in range(0, n_values, 2):
                    y[j], y[j + 1] = out_pair(acc[j], acc[j + 1])
                copy(r2c, y, tRgC)
                return
        store_values(acc, tCgC, tCcC, BIAS, SA, SB, M, N, alpha, beta)

    @cuda.jit(device=True, inline="always")
    @unrolled
    def partial_epilogue(acc, at, W, M, N, ldw, start):
        """Split-K: ``acc``, the products of one K range, to the float32 workspace's
        row-major (M, ldw) matrix at ``start`` (alpha, beta and the out's type are the
        reduction's), by pairs of columns, predicated at the edges (a pair whose first column
        is inside: ``ldw`` and ``start`` are even)."""
        thr = get_slice(r2g, cuda.threadIdx.x % 128)
        gW = make_tensor(W, make_layout((M, N), (ldw, ONE)), start)
        tCgW = partition_D(thr, local_tile(gW, block_c, at))
        tCcW = partition_D(thr, local_tile(make_identity_tensor((M, N)), block_c, at))
        inside = make_fragment_like(make_tensor(W, one_per_pair), uint8)
        for j in unroll(pairs):
            inside[j] = elem_less(tCcW[2 * j], (M, N))
        copy_if(r2g, inside, acc, tCgW)

    return SimpleNamespace(store_tma=store_tma, staging_buffers=staging_buffers,
                           registers_epilogue=registers_epilogue,
                           partial_epilogue=partial_epilogue, fetch_vectors=fetch_vectors,
                           stage_vectors=stage_vectors, held=held, vectors=vectors)
