"""The SM90 GEMM written with :mod:`gemm.cute`, the one ``gemm.matmul`` runs on Hopper.

Seed 000's warp-specialized GEMM in CuTe's words (it replaced, on 2026-11-29, the kernel
the library generated as source text, whose structure it took):

- a persistent grid: each block walks the output tiles ``blockIdx.x, + gridDim.x, ...`` in
  grouped order (``group_m`` tile rows per sweep) over the batch;
- shared memory: a ring of ``stages`` slots, each holding A's (rows x bK) and B's (bN x bK)
  blocks in the 128-byte-swizzled GMMA layouts, guarded by :mod:`gemm.cute.pipeline`'s
  mbarriers;
- warpgroup 0, the producer (its registers lowered by ``setmaxnreg``): one thread waits for a
  free slot, expects its bytes and loads both blocks with ``copy(tma, ...)``;
- warpgroups 1.., the consumers (registers raised): each waits for a full slot, multiplies
  its ``bM`` rows of A's block by B's with ``gemm(mma, acc, tCsA, tCsB)`` (wgmma, its
  descriptors from the layouts), waits for the wgmma (``delay_release`` 1: for the one
  before, keeping a group in flight), releases the slot, and after the last K block writes
  ``alpha * acc`` out (:mod:`gemm.hopper.cute_epilogue`: by TMA through
  staged pieces, or ``alpha * acc + beta * C`` through ``partition_C``; a fused bias and
  activation, :mod:`gemm.epilogue`, in either);
- FP8 (``gemm.scaled_matmul``): the same kernel on e4m3 / e5m2 blocks of 128-byte K rows
  (wgmma k32), the scales in the epilogue (per tensor folded into alpha, per row and column
  staged with the bias); ``v.promote``: each k-tile's products promoted to a float32 sum
  (:mod:`gemm.hopper.cute_promote`, with DeepSeek's block scales; ``v.stage_scales``: the
  producer puts each k-tile's scales in shared memory beside its slot, A's rows by a bulk
  copy and B's by a store, and each consumer warp releases the slot after its reads);
- the schedules: "cooperative", the consumers splitting each tile's rows; "pingpong", each
  consumer taking whole ``bM x bN`` tiles in turn (the block's tiles ``c, c + consumers,
  ...``), skipping the others' steps of the ring (``advance_by``), its products issued
  after the tile before has issued its own (an ``order`` mbarrier per consumer), so that one
  consumer's epilogue runs while the other multiplies; "plain", no producer: one warpgroup
  loads and multiplies, its thread 0 keeping the ring ``stages`` k-steps ahead along the
  block's steps (``plain_tiles``; the registers epilogue);
- split-K (``v.split_k``): the work units are the tiles of each of ``SK`` ranges of K, the K
  ranges outermost; each unit writes its float32 partial tile to the workspace ``W`` and
  :mod:`gemm.splitk`'s reduction adds them (with alpha, beta and the out's type);
- 3xTF32 (``config.tf32x3``): each k-tile's slot split into big and small parts by its
  readers, three products, the sum on the CUDA cores (:mod:`gemm.hopper.cute_tf32x3`).

Its arguments are :attr:`HopperVariant.signature`'s (tensor maps of X and Y, C, the
workspace, the bias, the scales of X and Y, sizes, strides, the batch, alpha and beta), its
forms the variants': split-K for products without a fused epilogue, swapped operands (C
stored by columns from registers) for all but FP8, 3xTF32 in every schedule
(:func:`supports` names what it does not run); :mod:`gemm.hopper` plans, compiles, caches
and launches it.
"""

import numpy as np
from numba import cuda, float32, uint8, uint16, uint64

from layoutalg import Layout, make_tiled_mma
from gemm import arch
from gemm.arch.smem import SWIZZLE_ALIGN
from gemm.cute import (axpby, copy, dynamic_range, fill, gemm, get_slice, local_tile,
                       make_fragment_like, make_identity_tensor, make_tensor,
                       make_warp_uniform, partition_A, partition_B, partition_C, static,
                       tma_store_wait, warpgroup_arrive, warpgroup_commit_batch,
                       warpgroup_reg_alloc, warpgroup_reg_dealloc, warpgroup_wait)
from gemm.cute.divide import ceil_div
from gemm.cute.scheduler import grouped_tile
from gemm.cute.pipeline import (advance, advance_by, consumer_release, consumer_start,
                                consumer_wait, pipeline_init, producer_acquire,
                                producer_expect_tx, producer_start)
from gemm.arch.smem import shared_alignment
from gemm.hopper.cute_epilogue import epilogue_functions
from gemm.hopper.cute_promote import promotion_functions
from gemm.hopper.cute_tf32x3 import tf32x3_functions
from gemm.hopper.plan import BITS, atom_of, hopper_copies, stage_layout

__all__ = ["kernel_function", "supports", "tile_decoder"]


def supports(v):
    """Why variant ``v`` has no kernel written with gemm.cute (None: it has one)."""
    cfg = v.config
    if cfg.schedule == "plain" and v.promote:
        return "the plain schedule with FP8's promotion (its slots' readers)"
    if v.promote and cfg.delay_release:
        return "promotion with delay_release 1 (promotion keeps one group in flight itself)"
    if v.split_k and (v.bias != "none" or v.activation != "none" or v.scale != "none"):
        return "split-K with a fused epilogue or FP8 scales (the reduction adds neither)"
    if v.c_columns and v.scale != "none":
        return "FP8 with swapped operands"
    return None


def tile_decoder(group, split, order=grouped_tile):
    """The device function ``tile_coords(tile, tiles_m, tiles_n, NB)``: (row, column, matrix,
    K range) of work unit ``tile`` (uint32s), the K ranges outermost (``split``: there are
    ranges), then the ``NB`` matrices, each in grouped order (``order``:
    :func:`gemm.cute.scheduler.grouped_tile`, or its Python function to run the decoder as
    Python): sweeps of ``group`` tile rows (fewer in the last), each sweep down its rows
    column after column."""
    U = np.uint32

    @cuda.jit(device=True, inline="always")
    def tile_coords(tile, tiles_m, tiles_n, NB):
        tiles_mn = U(tiles_m * tiles_n)         # (each result cast back: numba widens
        per_range = U(tiles_mn * NB)            # uint32 products to 64 bits)
        ks = U(tile // per_range) if split else U(0)
        tile = U(tile - U(ks * per_range))
        bz = U(tile // tiles_mn)
        row, col = order(U(tile - U(bz * tiles_mn)), tiles_m, tiles_n, group)
        return row, col, bz, ks
    return tile_coords


def kernel_function(v):
    """Variant ``v``'s kernel as a Python function for ``cuda.jit(v.signature)``."""
    why = supports(v)
    if why is not None:
        raise ValueError(f"kernel 'cute_hopper': no kernel for {why}")
    cfg = v.config
    bits = BITS[cfg.dtype]
    elem = {32: float32, 16: uint16, 8: uint8}[bits]
    rows, bm, bn, bk, stages, wgs = cfg.tile_m, cfg.bM, cfg.bN, cfg.bK, cfg.stages, cfg.consumers
    plan = hopper_copies(v)             # the TMA copies whose maps the host makes
    sa, sb = stage_layout(v.a_major, rows, bk, bits), stage_layout(v.b_major, bn, bk, bits)
    tma_a, tma_b = plan.copy_x, plan.copy_y
    pingpong, delay = cfg.schedule == "pingpong", cfg.delay_release
    plain = cfg.schedule == "plain"     # no producer: one warpgroup loads and multiplies
    turns = wgs if pingpong else 1      # consumers taking a block's tiles in turn
    parts = 1 if pingpong else wgs      # consumers splitting a tile's rows
    order = 2 * stages                  # pingpong: consumer c's turn, bars[order + c]
    step_bytes, n_bars = tma_a.bytes + tma_b.bytes, cfg.mbarriers
    a_elems, slot_elems = np.uint32(rows * bk), np.uint32((rows + bn) * bk)
    flat_a, flat_b = Layout(rows * bk), Layout(bn * bk)
    mma = make_tiled_mma(atom_of(v, bn))
    acc_shape = Layout((bm, bn), (bn, 1))           # what a consumer's fragment is shaped by
    block_a, block_c = static((bm, bk)), static((bm, bn))
    tma_store = v.tma_store
    low, high = cfg.registers           # (None: no setmaxnreg, as plain's one warpgroup)
    split_registers = low is not None               # (a bool: numba prunes its branches)
    scale_tensor, promote = v.scale == "tensor", v.promote     # FP8's scales, promotion
    staged, slot_floats = v.stage_scales, v.scale_floats        # block scales in the slots
    scales_at = v.scales_at // 4                    # (floats past the ring's aligned start)
    releasing = 32 if staged else 128               # consumer threads a release stands for
    split = v.split_k                   # K in ranges (SK of them), each range a work unit
    align = shared_alignment()          # (the descriptors' starts: a base computed once)
    tile_coords = tile_decoder(cfg.group_m, split)

    @cuda.jit(device=True, inline="always")
    def operands(raw, at, part, thr):
        """This consumer's partitions of the blocks of the slot at element ``at``: the
        ``part``-th ``bM`` rows of A's, and B's."""
        return (partition_A(thr, local_tile(make_tensor(raw, sa, at), block_a, (part, 0))),
                partition_B(thr, make_tensor(raw, sb, at + a_elems)))

    @cuda.jit(device=True, inline="always")
    def issue(acc, raw, bars, st, part, thr, base, accumulate):
        """Wait until the state's slot is full and issue its wgmma (the ``part``-th ``bM``
        rows of A's block by B's) into ``acc`` (added to it if ``accumulate``), one group."""
        consumer_wait(bars, st)
        tCsA, tCsB = operands(raw, base + st[0] * slot_elems, part, thr)
        warpgroup_arrive()
        gemm(mma, acc, tCsA, tCsB, accumulate)
        warpgroup_commit_batch()

    @cuda.jit(device=True, inline="always")
    def release(bars, st):
        """The state's slot released, its wgmma done (the wgmma read the slot for the whole
        warpgroup: one thread releases for all; with staged block scales, which each warp
        reads itself, one thread a warp, after a syncwarp orders the warp's reads before
        it)."""
        if staged:
            arch.syncwarp()
        if cuda.threadIdx.x % releasing == 0:
            consumer_release(bars, st, stages)

    @cuda.jit(device=True, inline="always")
    def k_tiles_of(acc, raw, bars, st, part, thr, base, k_tiles, nxt):
        """The tile's products into ``acc``, each slot released once its wgmma ran (one step
        late with ``delay_release``); pingpong: the next consumer's turn (``nxt``) given as
        the last group is issued. Returns the state past the tile."""
        prev = st
        for k in dynamic_range(k_tiles):
            issue(acc, raw, bars, st, part, thr, base, k > 0)
            if delay:
                warpgroup_wait(1)       # the group before ran: release its slot
                if k > 0:
                    release(bars, prev)
            else:
                warpgroup_wait(0)       # the warpgroup's wgmma ran: release its slot
                release(bars, st)
            prev, st = st, advance(st, stages)
        pass_turn(bars, nxt)
        if delay:
            warpgroup_wait(0)           # (on every path: ptxas serializes all wgmma where
            if k_tiles > 0:             #  one path reaches the epilogue without it)
                release(bars, prev)
        return st

    @cuda.jit(device=True, inline="always")
    def pass_turn(bars, nxt):
        """Pingpong: consumer ``nxt`` may issue its tile's products (one arrival a warp: each
        warp has issued its own)."""
        if pingpong and cuda.threadIdx.x % 32 == 0:
            arch.mbarrier_arrive(bars, order + nxt)

    ep = epilogue_functions(v, plan, mma)
    store_tma, staging_buffers = ep.store_tma, ep.staging_buffers
    registers_epilogue = ep.registers_epilogue
    partial_epilogue = ep.partial_epilogue
    fetch_vectors, stage_vectors, held, vectors = (ep.fetch_vectors, ep.stage_vectors,
                                                   ep.held, ep.vectors)
    pro = promotion_functions(v, mma, issue, release)
    promoted_k_tiles, slot_layout = pro.promoted_k_tiles, pro.slot_layout
    x3 = cfg.tf32x3
    if x3:
        x3f = tf32x3_functions(v, mma, operands, release, pass_turn)
        x3_k_tiles, x3_issue = x3f.x3_k_tiles, x3f.x3_issue

    @cuda.jit(device=True, inline="always")
    def load(XM, YM, raw, bars, slot, base, at, k, k_tiles, zX, zY):
        """The k-tile ``k`` of the work unit at ``at`` (:func:`tile_coords`) into ring slot
        ``slot`` by TMA (one thread), its bytes completing the slot's full barrier (which
        the caller has told to expect them)."""
        tm, tn, bz, ks = at
        first = base + slot * slot_elems
        kk = (ks * k_tiles + k) * bk
        copy(tma_a, XM, (tm * rows, kk, bz * zX), make_tensor(raw, flat_a, first), bars, slot)
        copy(tma_b, YM, (tn * bn, kk, bz * zY), make_tensor(raw, flat_b, first + a_elems),
             bars, slot)

    @cuda.jit(device=True, inline="always")
    def next_step(unit, k, at, k_tiles, tiles_m, tiles_n, NB):
        """The block's step after k-tile ``k`` of work unit ``unit`` (at ``at``): (unit,
        k-tile, the unit's coordinates, computed only when the unit changes)."""
        k = np.uint32(k + 1)
        if k == k_tiles:
            unit, k = np.uint32(unit + cuda.gridDim.x), np.uint32(0)
            at = tile_coords(unit, tiles_m, tiles_n, NB)
        return unit, k, at

    @cuda.jit(device=True, inline="always")
    def plain_tiles(XM, YM, C, W, BIAS, SA, SB, raw, raw8, bars, base, base8, tiles, tiles_m,
                    tiles_n, k_tiles, M, N, ldc, ldw, NB, sCb, zX, zY, alpha, beta):
        """The plain schedule (Pallas' ``emit_pipeline``): one warpgroup loads and
        multiplies. Thread 0 keeps the ring ``stages`` k-steps ahead along the block's
        sequence of steps (its units' k-tiles in turn): the first ``stages`` before the
        loop, then, once the warpgroup is past a step's wgmma (``delay_release`` 1: the
        step before's), that step's slot with the step ``stages`` later. No empty barriers:
        the block's barrier orders the warpgroup's reads before the refill. 3xTF32: each
        k-tile's three products (:mod:`gemm.hopper.cute_tf32x3`), the sum in ``tot``."""
        t = cuda.threadIdx.x
        first = np.uint32(cuda.blockIdx.x)
        thr = get_slice(mma, t)
        unit, kn = first, np.uint32(0)              # the next step to load
        at = tile_coords(unit, tiles_m, tiles_n, NB)
        if t == 0:
            for i in range(stages):
                if unit < tiles and k_tiles > 0:
                    producer_expect_tx(bars, (np.uint32(i),), step_bytes)
                    load(XM, YM, raw, bars, np.uint32(i), base, at, kn, k_tiles, zX, zY)
                    unit, kn, at = next_step(unit, kn, at, k_tiles, tiles_m, tiles_n, NB)
        st = consumer_start()
        prev = st
        for tile in dynamic_range(first, tiles, cuda.gridDim.x):
            tm, tn, bz, ks = tile_coords(tile, tiles_m, tiles_n, NB)
            acc = make_fragment_like(partition_C(thr, make_tensor(C, acc_shape)), float32)
            if x3:
                tot = make_fragment_like(acc, float32)
                fill(tot, 0.0)
            for k in dynamic_range(k_tiles):
                if x3:
                    x3_issue(tot, acc, raw, raw8, bars, st, 0, thr, base, base8, 0, k)
                else:
                    issue(acc, raw, bars, st, 0, thr, base, k > 0)
                warpgroup_wait(delay)
                freed = prev if delay else st
                cuda.syncthreads()              # every warp's reads of the freed slot done
                if t == 0 and unit < tiles and (k > 0 or tile != first or not delay):
                    producer_expect_tx(bars, freed, step_bytes)
                    load(XM, YM, raw, bars, freed[0], base, at, kn, k_tiles, zX, zY)
                    unit, kn, at = next_step(unit, kn, at, k_tiles, tiles_m, tiles_n, NB)
                prev, st = st, advance(st, stages)
            warpgroup_wait(0)                   # the tile's last group, before its epilogue
            if x3:
                if k_tiles > 0:
                    axpby(1.0, acc, 1.0, tot)
                acc = tot
            if split:
                partial_epilogue(acc, (tm, tn), W, M, N, ldw, (ks * NB + bz) * M * ldw)
            else:
                registers_epilogue(acc, (tm, tn), bz, C, BIAS, SA, SB, M, N, ldc, sCb, alpha,
                                   beta)

    def kernel(XM, YM, CM, C, W, BIAS, SA, SB, M, N, K, ldc, ldw, NB, sCb, zX, zY, SK, alpha,
               beta):
        raw = cuda.shared.array(0, elem, alignment=align)
        bars = cuda.shared.array(n_bars, uint64)
        base = arch.shared_offset_of(raw, SWIZZLE_ALIGN)
        SS = cuda.shared.array(0, float32, alignment=align)     # the staged block scales
        raw8 = cuda.shared.array(0, uint8, alignment=align)     # (3xTF32's split, by bytes)
        base8 = arch.shared_offset_of(raw8, SWIZZLE_ALIGN)
        s_base = arch.shared_offset_of(SS, SWIZZLE_ALIGN) + scales_at
        t = cuda.threadIdx.x
        wg = make_warp_uniform(t // 128)    # (ptxas then keeps the k-loops uniform)
        tiles_m, tiles_n = ceil_div(M, rows), ceil_div(N, bn)
        tiles, k_tiles = tiles_m * tiles_n * NB, ceil_div(K, bk)
        if split:       # a unit's k-tiles: one of SK ranges (the last may pass K: TMA reads 0)
            tiles, k_tiles = tiles * SK, ceil_div(k_tiles, SK)
        if t == 0:
            pipeline_init(bars, stages, 1, parts * 128 // releasing)   # a slot's releases
            if pingpong:
                for i in range(wgs):
                    arch.mbarrier_init(bars, order + i, 4)
                arch.fence_mbarrier_init()
        cuda.syncthreads()
        if plain:
            plain_tiles(XM, YM, C, W, BIAS, SA, SB, raw, raw8, bars, base, base8, tiles,
                        tiles_m, tiles_n, k_tiles, M, N, ldc, ldw, NB, sCb, zX, zY, alpha,
                        beta)
            return
        if wg == 0:                                     # the producer warpgroup
            if split_registers:
                warpgroup_reg_dealloc(low)
            if t == 0:
                st = producer_start()
                for tile in dynamic_range(cuda.blockIdx.x, tiles, cuda.gridDim.x):
                    tm, tn, bz, ks = tile_coords(tile, tiles_m, tiles_n, NB)
                    if staged:
                        sb_next = SB[tn * bn // 128 * k_tiles]
                    for k in dynamic_range(k_tiles):
                        producer_acquire(bars, st, stages)
                        if staged:      # the k-tile's block scales into the slot's own
                            at = s_base + st[0] * slot_floats
                            SS[at + rows] = sb_next             # B's (loaded a step ahead)
                            if k + 1 < k_tiles:
                                sb_next = SB[tn * bn // 128 * k_tiles + k + 1]
                            a_bytes = min(rows, M - tm * rows) * 4      # A's rows
                            producer_expect_tx(bars, st, step_bytes + a_bytes)
                            arch.bulk_load(SS, at, SA, k * M + tm * rows, a_bytes, bars, st[0])
                        else:
                            producer_expect_tx(bars, st, step_bytes)
                        load(XM, YM, raw, bars, st[0], base, (tm, tn, bz, ks), k, k_tiles, zX,
                             zY)
                        st = advance(st, stages)
            return
        if split_registers:
            warpgroup_reg_alloc(high)
        thr = get_slice(mma, t % 128)
        c = wg - 1
        part = 0 if pingpong else c                     # this consumer's rows of a tile
        st, sq = consumer_start(), 0                    # sq: the pieces staged so far
        if tma_store:
            bufs = staging_buffers(c)
        if pingpong:
            st = advance_by(st, c * k_tiles, stages)
        if scale_tensor:
            alpha *= SA[0] * SB[0]
        j = 0                                           # this consumer's tiles so far
        gx = cuda.gridDim.x
        for tile in dynamic_range(cuda.blockIdx.x + (c * gx if pingpong else 0), tiles,
                                  turns * gx):
            tm, tn, bz, ks = tile_coords(tile, tiles_m, tiles_n, NB)
            at = (tm * parts + part, tn)                # the consumer's (bM x bN) block of C
            acc = make_fragment_like(partition_C(thr, make_tensor(C, acc_shape)), float32)
            h = make_fragment_like(make_tensor(C, held), float32)    # the tile's vectors
            if vectors:
                fetch_vectors(h, SA, SB, BIAS, at[0] * bm, tn * bn, M, N)
            if pingpong and (c > 0 or j > 0):           # the tile before has issued its own
                arch.mbarrier_wait(bars, order + c, (j - (c == 0)) & 1)
            nxt = (c + 1) % wgs
            if x3:
                tot = make_fragment_like(acc, float32)
                st = x3_k_tiles(tot, acc, raw, raw8, bars, st, part, thr, base, base8, c,
                                k_tiles, nxt)
                acc = tot
            elif promote:
                tot = make_fragment_like(acc, float32)
                sv = make_tensor(C, slot_layout)            # (block scales' row slots)
                st = promoted_k_tiles(tot, acc, make_fragment_like(acc, float32),
                                      make_fragment_like(sv, float32),
                                      make_fragment_like(sv, float32), raw, bars, st, part,
                                      thr, base,
                                      (SA, SB, SS,
                                       partition_C(thr, make_identity_tensor(block_c)),
                                       at[0] * bm, tn * bn // 128, M, s_base + part * bm,
                                       s_base + rows), k_tiles)
                pass_turn(bars, nxt)
                acc = tot
            else:
                st = k_tiles_of(acc, raw, bars, st, part, thr, base, k_tiles, nxt)
            if pingpong:                                # past the others' tiles' steps
                st = advance_by(st, (wgs - 1) * k_tiles, stages)
            j += 1
            if at[0] * bm >= M:                         # this consumer's rows are past M
                continue
            if split:
                partial_epilogue(acc, at, W, M, N, ldw, (ks * NB + bz) * M * ldw)
            elif tma_store:
                vat = stage_vectors(h, c) if vectors else 0
                sq = store_tma(acc, c, bufs, at, bz, CM, vat, alpha, sq)
            else:
                registers_epilogue(acc, at, bz, C, BIAS, SA, SB, M, N, ldc, sCb, alpha, beta)
        if tma_store and t % 128 == 0:
            tma_store_wait(0)                           # shared memory outlives the stores
    return kernel

