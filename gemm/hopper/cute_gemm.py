"""The SM90 GEMM written with :mod:`gemm.cute`: ``gemm.matmul(..., kernel="cute_hopper")``.

The generated Hopper kernel's structure (seed 000's warp-specialized GEMM) in CuTe's words:

- a persistent grid: each block walks the output tiles ``blockIdx.x, + gridDim.x, ...`` in
  grouped order (``group_m`` tile rows per sweep) over the batch;
- shared memory: a ring of ``stages`` slots, each holding A's (rows x bK) and B's (bN x bK)
  blocks in the 128-byte-swizzled GMMA layouts, guarded by :mod:`gemm.cute.pipeline`'s
  mbarriers;
- warpgroup 0, the producer (its registers lowered by ``setmaxnreg``): one thread waits for a
  free slot, expects its bytes and loads both blocks with ``copy(tma, ...)``;
- warpgroups 1.., the consumers (registers raised): each waits for a full slot, multiplies
  its ``bM`` rows of A's block by B's with ``gemm(mma, acc, tCsA, tCsB)`` (wgmma, its
  descriptors from the layouts), waits for the wgmma, releases the slot, and after the last
  K block writes ``alpha * acc`` out: with the TMA epilogue (``v.tma_store``), 64-row x
  128-byte pieces staged in two swizzled shared buffers and stored by TMA, one piece
  staged while the one before is stored; else ``alpha * acc + beta * C`` through
  ``partition_C``, predicated at the matrix's edges by an identity tensor. A variant with a
  fused epilogue (``v.bias``, ``v.activation``: :mod:`gemm.epilogue`) adds a bias per row or
  column and applies the activation (``transform``) before either store;
- FP8 (``gemm.scaled_matmul``): the same kernel on e4m3 / e5m2 blocks of 128-byte K rows
  (wgmma k32), the scales in the epilogue (per tensor folded into alpha, per row and column
  staged in shared memory with the bias); ``v.promote``: each k-tile's products in one of
  two accumulator sets by turns, added to a float32 sum while the next k-tile multiplies.

It takes the generated kernel's arguments, the bias and FP8's scales
(:attr:`HopperVariant.signature`: tensor maps of X and Y, C, the workspace, the bias, the
scales of X and Y, sizes, strides, the batch, alpha and beta) and its variants' cooperative, unsplit, unswapped form (:func:`supports`), so
:mod:`gemm.hopper` plans, compiles, caches and launches it as it does the generated one.
"""

import numpy as np
from numba import cuda, float32, uint8, uint16, uint64

from layoutalg import Layout, make_tiled_mma
from layoutalg.tensor import make_identity_tensor as make_identity_tensor_host
from gemm import arch
from gemm.cute import (axpby, copy, elem_less, fence_view_async_shared, fill, gemm, get_slice,
                       local_tile, make_fragment_like, make_identity_tensor, make_layout,
                       make_tensor, named_barrier_sync, partition_A, partition_B, partition_C,
                       static, static_range, tma_store_arrive, tma_store_wait, transform,
                       unroll, unrolled, warpgroup_arrive, warpgroup_commit_batch,
                       warpgroup_reg_alloc, warpgroup_reg_dealloc, warpgroup_wait)
from gemm.cute.pipeline import (advance, consumer_release, consumer_start, consumer_wait,
                                pipeline_init, producer_acquire, producer_expect_tx,
                                producer_start)
from gemm.epilogue import activation_function
from gemm.hopper.config import STAGING_BYTES
from gemm.hopper.gen import BITS, atom_of, hopper_plan, pipeline_of, stage_layout

__all__ = ["kernel_function", "supports"]

ONE = static(1)
_OUT = {"float32": float32, "bfloat16": uint16, "float16": uint16}


def supports(v):
    """Why variant ``v`` has no kernel written with gemm.cute (None: it has one)."""
    cfg = v.config
    if cfg.schedule != "cooperative" or cfg.delay_release:
        return f"the {cfg.schedule} schedule with delay_release {cfg.delay_release}"
    if v.split_k or v.c_columns or cfg.tf32x3:
        return "split-K, swapped operands and 3xTF32"
    return None


def _out_functions(out_dtype):
    """(float32 -> the out's element, the out's element -> float32): a numba type or an
    instruction, called in the kernel without a device function (each inlined device function
    of an unrolled loop is compiled again: they had made the first compile seconds longer)."""
    if out_dtype == "float32":
        return float32, float32
    if out_dtype == "bfloat16":
        return arch.cvt_rn_bf16_f32, arch.bf16_to_f32
    return arch.cvt_rn_f16_f32, arch.f16_to_f32


def _row_slots(mma, bm, bn):
    """The number of rows a consumer thread's (bm, bn) accumulators lie on, checked to be
    numbered as the kernel numbers them (two per 64-row atom; value ``j`` on row slot
    ``slot(j)``, slot ``q`` holding value ``value(q)``) for every thread of the warpgroup."""
    def rows(t):
        coords = mma.get_slice(t).partition_C(make_identity_tensor_host((bm, bn)))
        return [coords[j][0] for j in range(bm * bn // 128)]
    slot, value = _slot.py_func, _value.py_func
    for t in range(128):
        got = rows(t)
        distinct = sorted(set(got))
        if any(distinct.index(got[j]) != slot(j, bn) for j in range(len(got))) or any(
                got[value(q, bn)] != r for q, r in enumerate(distinct)):
            raise AssertionError("the accumulators' rows are not the kernel's row slots")
    return len(distinct)


@cuda.jit(device=True, inline="always")
def _slot(j, bn):
    """Accumulator ``j``'s row slot (wgmma's fragment: per 64-row atom of bn / 2 values,
    groups of four values on rows g, g, g + 8, g + 8)."""
    return (j % 4) // 2 + 2 * (j // (bn // 2))


@cuda.jit(device=True, inline="always")
def _value(q, bn):
    """An accumulator on row slot ``q``."""
    return q // 2 * (bn // 2) + 2 * (q % 2)


def kernel_function(v):
    """Variant ``v``'s kernel as a Python function for ``cuda.jit(v.signature)``."""
    why = supports(v)
    if why is not None:
        raise ValueError(f"kernel 'cute_hopper': no kernel for {why}")
    cfg = v.config
    bits = BITS[cfg.dtype]
    elem = {32: float32, 16: uint16, 8: uint8}[bits]
    rows, bm, bn, bk, stages, wgs = cfg.tile_m, cfg.bM, cfg.bN, cfg.bK, cfg.stages, cfg.consumers
    plan = hopper_plan(v)               # the TMA copies whose maps the host makes
    sa, sb = stage_layout(v.a_major, rows, bk, bits), stage_layout(v.b_major, bn, bk, bits)
    tma_a, tma_b = plan.copy_x, plan.copy_y
    step_bytes, n_bars = tma_a.bytes + tma_b.bytes, 2 * stages
    a_elems, slot_elems = rows * bk, (rows + bn) * bk
    flat_a, flat_b = Layout(a_elems), Layout(bn * bk)
    mma = make_tiled_mma(atom_of(v, bn))
    acc_shape = Layout((bm, bn), (bn, 1))           # what a consumer's fragment is shaped by
    block_a, block_c = static((bm, bk)), static((bm, bn))
    pipe = pipeline_of(v)               # the generated kernel's register split, to match it
    tma_store = v.tma_store
    group, low, high = cfg.group_m, pipe.memory_registers, pipe.compute_registers
    split_registers = low is not None               # (a bool: numba prunes its branches)
    to_out, from_out = _out_functions(v.out_dtype)
    from_bias = _out_functions(v.bias_dtype)[1]
    # (bools: numba prunes their branches); a 16-bit out rounds away tanh.approx's error
    has_bias, bias_rows, has_act = v.bias != "none", v.bias == "rows", v.activation != "none"
    # FP8: scales of X and Y, one each or one per row of X and of Y; each k-tile's products
    # promoted to a float32 sum
    scale_tensor, scale_rows, promote = v.scale == "tensor", v.scale == "rows", v.promote
    act = activation_function(v.activation, fast=v.out_dtype != "float32")
    values = static_range(bm // 64 * bn // 2)      # a consumer thread's accumulators
    # the TMA epilogue's pieces of 64 rows (a wgmma atom's) x 128 bytes of columns
    out = _OUT[v.out_dtype]
    out_bits = out.bitwidth
    chunk = 1024 // out_bits                        # 128 bytes of columns
    sc = stage_layout("K", 64, chunk, out_bits)
    tma_c = plan.copy_c if tma_store else None      # (the host makes C's map only then)
    mma_c = make_tiled_mma(atom_of(v, chunk))       # a piece's share of each thread
    # the TMA epilogue's vectors (row scales, column scales, bias): a consumer's share of
    # the tile read from global memory into registers as the tile starts, and staged in
    # shared memory past the pieces after its products (so that no piece waits for a load)
    n_sa = bm if scale_rows and tma_store else 0
    n_sb = bn if scale_rows and tma_store else 0
    staged_bias = has_bias and tma_store
    vec_floats = v.vector_floats                    # n_sa + n_sb + the bias's
    vectors = vec_floats > 0
    vec_at = (stages * cfg.slot_bytes + wgs * STAGING_BYTES) // 4   # floats past the ring
    loads_m, loads_n = static_range(-(-bm // 128)), static_range(-(-bn // 128))
    held = Layout(len(loads_m) + 2 * len(loads_n))  # SA's, then SB's, then the bias's
    # FP8 block scales, applied to each k-tile's products as they are promoted: a thread's
    # accumulators lie on few rows (two per 64-row atom), its row slots (_slot, _value)
    blocks, scale_a_mn = v.scale == "blocks", v.scale_a_mn
    n_slots = _row_slots(mma, bm, bn) if blocks else 1
    slots, slot_layout = static_range(n_slots), Layout(n_slots)
    per_atom = bn // chunk                          # pieces of an atom's rows
    row_atoms = static_range(bm // 64)
    piece_elems = STAGING_BYTES // 2 * 8 // out_bits
    staging = (stages * cfg.slot_bytes) * 8 // out_bits     # past the ring, in out elements
    piece = static((64, chunk))
    col_pieces = static_range(per_atom)

    @cuda.jit(device=True, inline="always")
    def tile_coords(tile, tiles_m, tiles_n):
        """(row, column, matrix) of work unit ``tile``: grouped order within a matrix."""
        tiles_mn = tiles_m * tiles_n
        bz = tile // tiles_mn
        tp = tile - bz * tiles_mn
        per_group = np.uint32(group) * tiles_n
        g0 = tp // per_group * np.uint32(group)
        gs = min(tiles_m - g0, np.uint32(group))
        gr = tp - tp // per_group * per_group
        return g0 + gr % gs, gr // gs, bz

    @cuda.jit(device=True, inline="always")
    def piece_buffer(c, sq):
        """The shared buffer of the next piece (``sq`` staged before it), once the TMA
        store two pieces back has read it and every thread of the consumer is past it."""
        if cuda.threadIdx.x % 128 == 0:
            tma_store_wait(1)
        named_barrier_sync(1 + c, 128)
        raw_c = cuda.shared.array(0, out)
        stage = arch.shared_offset_of(raw_c, 1024) + staging + c * 2 * piece_elems
        return make_tensor(raw_c, sc, stage + (sq & 1) * piece_elems)

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
            r = min(row0 + q * 128 + i, M - 1)
            if scale_rows:
                h[q] = SA[r]
            if staged_bias and bias_rows:
                h[len(loads_m) + len(loads_n) + q] = from_bias(BIAS[r])
        for q in unroll(loads_n):
            col = min(col0 + q * 128 + i, N - 1)
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
        vec = cuda.shared.array(0, float32)
        at = arch.shared_offset_of(vec, 1024) + vec_at + c * vec_floats
        i = cuda.threadIdx.x % 128
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
    def tma_epilogue(acc, c, at, bz, CM, vat, alpha, sq):
        """``alpha * acc`` stored by TMA: 64-row x 128-byte pieces staged in two swizzled
        shared buffers past the ring, one staged while the one before is stored; returns
        the count of pieces staged (``sq``, this one's included)."""
        thr_c = get_slice(mma_c, cuda.threadIdx.x % 128)
        # each wgmma atom's 64 rows, chunk columns at a time; NVVM unrolls the two inner
        # loops (written out by unroll(), they took seconds more to compile)
        for a in unroll(row_atoms):
            for p in range(per_atom):
                sC = piece_buffer(c, sq)
                tCsC = partition_C(thr_c, sC)
                for j in range(chunk // 2):
                    tCsC[j] = to_out(alpha * acc[a * (bn // 2) + p * (chunk // 2) + j])
                store_piece(c, sC, CM, at[0] * bm + a * 64, at[1] * bn + p * chunk, bz)
                sq += 1
        return sq

    @cuda.jit(device=True, inline="always")
    @unrolled
    def fused_tma_epilogue(acc, c, at, bz, CM, vat, alpha, sq):
        """:func:`tma_epilogue` of ``act(alpha * acc * sa * sb + bias)`` (``sa``, ``sb``:
        FP8's scales of the row and column, where they are per row): a piece's values in a
        register fragment, scaled and the bias added (the vectors staged from ``vat``, their
        values past the matrix's edges the nearest inside: TMA leaves those out), then
        ``transform`` applies the activation (one
        compiled function called at constant indices: numba-inlined at each value it took
        seconds to compile). The pieces of an atom's rows are written out: with the
        activation in it NVVM left that loop rolled, and the accumulators went to local
        memory."""
        thr_c = get_slice(mma_c, cuda.threadIdx.x % 128)
        tCcP = partition_C(thr_c, make_identity_tensor(piece))     # (row, column) in a piece
        vec = cuda.shared.array(0, float32)
        for a in unroll(row_atoms):
            for p in unroll(col_pieces):
                sC = piece_buffer(c, sq)
                tCsC = partition_C(thr_c, sC)
                row0, col0 = at[0] * bm + a * 64, at[1] * bn + p * chunk
                x = make_fragment_like(tCcP, float32)
                for j in range(chunk // 2):
                    v = alpha * acc[a * (bn // 2) + p * (chunk // 2) + j]
                    r, col = tCcP[j]
                    i, jj = a * 64 + r, p * chunk + col     # in the tile
                    if scale_rows:
                        v *= vec[vat + i] * vec[vat + n_sa + jj]
                    if has_bias:
                        v += vec[vat + n_sa + n_sb + (i if bias_rows else jj)]
                    x[j] = v
                if has_act:
                    transform(x, act)
                for j in range(chunk // 2):
                    tCsC[j] = to_out(x[j])
                store_piece(c, sC, CM, row0, col0, bz)
                sq += 1
        return sq

    store_tma = fused_tma_epilogue if has_bias or has_act or scale_rows else tma_epilogue

    @cuda.jit(device=True, inline="always")
    @unrolled
    def registers_epilogue(acc, at, bz, C, BIAS, SA, SB, M, N, ldc, sCb, alpha, beta):
        """``act(alpha * acc * sa * sb + beta * C + bias)`` through ``partition_C``,
        predicated at the edges."""
        thr = get_slice(mma, cuda.threadIdx.x % 128)
        gC = make_tensor(C, make_layout((M, N), (ldc, ONE)), bz * sCb)
        tCgC = partition_C(thr, local_tile(gC, block_c, at))
        tCcC = partition_C(thr, local_tile(make_identity_tensor((M, N)), block_c, at))
        for j in unroll(values):
            if elem_less(tCcC[j], (M, N)):
                x = alpha * acc[j]
                if scale_rows:
                    x *= SA[tCcC[j][0]] * SB[tCcC[j][1]]
                if beta != 0:
                    x += beta * from_out(tCgC[j])
                if has_bias:
                    x += from_bias(BIAS[tCcC[j][0] if bias_rows else tCcC[j][1]])
                if has_act:
                    x = act(x)
                tCgC[j] = to_out(x)

    @cuda.jit(device=True, inline="always")
    def issue(acc, raw, bars, st, c, thr, base, accumulate):
        """Wait until the state's slot is full and issue its wgmma (consumer ``c``'s rows of
        A's block by B's) into ``acc`` (added to it if ``accumulate``), one group."""
        consumer_wait(bars, st)
        slot = base + st[0] * slot_elems
        tCsA = partition_A(thr, local_tile(make_tensor(raw, sa, slot), block_a, (c, 0)))
        tCsB = partition_B(thr, make_tensor(raw, sb, slot + a_elems))
        warpgroup_arrive()
        gemm(mma, acc, tCsA, tCsB, accumulate)
        warpgroup_commit_batch()

    @cuda.jit(device=True, inline="always")
    def release(bars, st):
        """The state's slot released, its wgmma done (every warp of the warpgroup is past
        its wait: one thread releases for all)."""
        if cuda.threadIdx.x % 128 == 0:
            consumer_release(bars, st, stages)

    @cuda.jit(device=True, inline="always")
    @unrolled
    def block_scales(sv, SA, SB, tCcC, row0, b_block, M, k_tiles, k):
        """Into ``sv``: k-tile ``k``'s scale of each of this thread's rows (A's 1 x 128 block
        times B's 128 x 128 one, read as the k-tile is issued: they are used a step later)."""
        sb = SB[b_block * k_tiles + k]
        for q in unroll(slots):
            r = min(row0 + tCcC[_value(q, bn)][0], M - 1)
            sv[q] = sb * (SA[k * M + r] if scale_a_mn else SA[r * k_tiles + k])

    @cuda.jit(device=True, inline="always")
    @unrolled
    def retire(tot, acc, sv):
        """A k-tile's products added to the sum (scaled per row slot with block scales)."""
        if blocks:
            for j in unroll(values):
                tot[j] += acc[j] * sv[_slot(j, bn)]
        else:
            axpby(1.0, acc, 1.0, tot)

    @cuda.jit(device=True, inline="always")
    def turn(tot, fresh, sv_fresh, done, sv_done, older, st, k, raw, bars, c, thr, base, SA,
             SB, tCcC, row0, b_block, M, k_tiles):
        """Issue k-tile ``k`` into ``fresh`` (its block scales into ``sv_fresh``), then the
        one before (in ``done``) is retired: its slot released, its products added to
        ``tot`` while ``k``'s multiply. Returns (k's state, the next)."""
        issue(fresh, raw, bars, st, c, thr, base, False)
        if blocks:
            block_scales(sv_fresh, SA, SB, tCcC, row0, b_block, M, k_tiles, k)
        warpgroup_wait(1)                   # the older group is done
        release(bars, older)
        retire(tot, done, sv_done)
        return st, advance(st, stages)

    @cuda.jit(device=True, inline="always")
    def promoted_k_tiles(tot, acc0, acc1, sv0, sv1, raw, bars, st, c, thr, base, SA, SB,
                         tCcC, row0, b_block, M, k_tiles):
        """FP8's promotion (use_fast_accum=False, and block scales: the tensor cores' own
        sums keep fewer bits than float32): each k-tile's products alone, in ``acc0`` and
        ``acc1`` by turns, added to ``tot`` on the CUDA cores (rounded to nearest) while the
        tensor cores multiply the next k-tile; returns the state past the tile."""
        fill(tot, 0.0)
        issue(acc0, raw, bars, st, c, thr, base, False)
        if blocks:
            block_scales(sv0, SA, SB, tCcC, row0, b_block, M, k_tiles, 0)
        older, st = st, advance(st, stages)
        k = 1
        while k + 1 < k_tiles:              # k-tile k in acc1, then k + 1 in acc0
            older, st = turn(tot, acc1, sv1, acc0, sv0, older, st, k, raw, bars, c, thr, base,
                             SA, SB, tCcC, row0, b_block, M, k_tiles)
            older, st = turn(tot, acc0, sv0, acc1, sv1, older, st, k + 1, raw, bars, c, thr,
                             base, SA, SB, tCcC, row0, b_block, M, k_tiles)
            k += 2
        if k < k_tiles:                     # an even number: the last in acc1
            older, st = turn(tot, acc1, sv1, acc0, sv0, older, st, k, raw, bars, c, thr, base,
                             SA, SB, tCcC, row0, b_block, M, k_tiles)
            warpgroup_wait(0)
            release(bars, older)
            retire(tot, acc1, sv1)
        else:
            warpgroup_wait(0)
            release(bars, older)
            retire(tot, acc0, sv0)
        return st

    def kernel(XM, YM, CM, C, W, BIAS, SA, SB, M, N, K, ldc, ldw, NB, sCb, zX, zY, SK, alpha,
               beta):
        raw = cuda.shared.array(0, elem)
        bars = cuda.shared.array(n_bars, uint64)
        base = arch.shared_offset_of(raw, 1024)
        t = cuda.threadIdx.x
        wg = t // 128
        tiles_m, tiles_n = (M + (rows - 1)) // rows, (N + (bn - 1)) // bn
        tiles, k_tiles = tiles_m * tiles_n * NB, (K + (bk - 1)) // bk
        if t == 0:
            pipeline_init(bars, stages, 1, wgs)         # one release per consumer
        cuda.syncthreads()
        if wg == 0:                                     # the producer warpgroup
            if split_registers:
                warpgroup_reg_dealloc(low)
            if t == 0:
                st = producer_start()
                for tile in range(cuda.blockIdx.x, tiles, cuda.gridDim.x):
                    tm, tn, bz = tile_coords(tile, tiles_m, tiles_n)
                    for k in range(k_tiles):
                        producer_acquire(bars, st, stages)
                        producer_expect_tx(bars, st, step_bytes)
                        slot = base + st[0] * slot_elems
                        copy(tma_a, XM, (tm * rows, k * bk, bz * zX),
                             make_tensor(raw, flat_a, slot), bars, st[0])
                        copy(tma_b, YM, (tn * bn, k * bk, bz * zY),
                             make_tensor(raw, flat_b, slot + a_elems), bars, st[0])
                        st = advance(st, stages)
            return
        if split_registers:
            warpgroup_reg_alloc(high)
        thr = get_slice(mma, t % 128)
        c = wg - 1                                      # this consumer's rows of the tile
        st, sq = consumer_start(), 0                    # sq: the pieces staged so far
        if scale_tensor:
            alpha *= SA[0] * SB[0]
        for tile in range(cuda.blockIdx.x, tiles, cuda.gridDim.x):
            tm, tn, bz = tile_coords(tile, tiles_m, tiles_n)
            acc = make_fragment_like(partition_C(thr, make_tensor(C, acc_shape)), float32)
            h = make_fragment_like(make_tensor(C, held), float32)    # the tile's vectors
            if vectors:
                fetch_vectors(h, SA, SB, BIAS, (tm * wgs + c) * bm, tn * bn, M, N)
            if promote:
                tot = make_fragment_like(acc, float32)
                sv = make_tensor(C, slot_layout)            # (block scales' row slots)
                st = promoted_k_tiles(tot, acc, make_fragment_like(acc, float32),
                                      make_fragment_like(sv, float32),
                                      make_fragment_like(sv, float32), raw, bars, st, c, thr,
                                      base, SA, SB,
                                      partition_C(thr, make_identity_tensor(block_c)),
                                      (tm * wgs + c) * bm, tn * bn // 128, M, k_tiles)
                acc = tot
            else:
                for k in range(k_tiles):
                    issue(acc, raw, bars, st, c, thr, base, k > 0)
                    warpgroup_wait(0)       # the warpgroup's wgmma ran: release its slot
                    release(bars, st)
                    st = advance(st, stages)
            at = (tm * wgs + c, tn)
            if at[0] * bm >= M:                         # this consumer's rows are past M
                continue
            if tma_store:
                vat = stage_vectors(h, c) if vectors else 0
                sq = store_tma(acc, c, at, bz, CM, vat, alpha, sq)
            else:
                registers_epilogue(acc, at, bz, C, BIAS, SA, SB, M, N, ldc, sCb, alpha, beta)
        if tma_store and t % 128 == 0:
            tma_store_wait(0)                           # shared memory outlives the stores
    return kernel
