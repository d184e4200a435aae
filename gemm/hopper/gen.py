"""The Hopper GEMM generator: the kernel of a :class:`gemm.hopper.HopperVariant` (bf16 / f16 /
tf32 in, f32 accumulate, f32 / bf16 / f16 out; the operands X (MM, K), Y (NN, K) and a
row-major C = X Y^T as in gemm.tensorcore), written by the warp-specialized pipeline of
:mod:`gemm.hopper.pipeline` from layoutalg's SM90 atoms:

- shared memory: per ring slot, X's (consumers * bM, bK) block and Y's (bN, bK) block, each
  ``tile_to_shape`` of CuTe's ``Layout_{K,MN}_SW128_Atom`` (128-byte K rows; bK = 64 bf16/f16
  or 32 tf32 elements);
- the loads: ``make_tma_copy`` of each block (boxes, their shared offsets and coordinates;
  the tensor maps are made per call by gemm.hopper); out-of-bounds rows and K are zero;
- the MMA: ``SM90_64xNx16_F32BF16BF16_SS(bN)`` (F16, or ``SM90_64xNx8_F32TF32TF32_SS``), one
  wgmma per 64-row atom and instruction k-block; the descriptors are ``gmma_descriptor`` of
  each slice of the stage layouts, encoded at generation (the slot's address is added at run
  time; consumer ``c``'s rows are checked to be a constant step away);
- 3xTF32 (``tf32x3``): each step, the consumers that read the slot meet at a named barrier
  (every wgmma of their last step is done), write the small parts of the slot's X and Y to
  their buffer with ``split_tf32_tile`` (same layout, so the slot's descriptors shifted by
  the buffer's offset read it), fence them for the async proxy and meet again (learning
  whether any of them met an inf or NaN); then wgmma big(X) big(Y) (big: the slot itself,
  read by wgmma as tf32), and small(X) big(Y), big(X) small(Y). Where an inf or NaN was
  met, the slot's are cleared to 0 between the two (after the big products are done), so
  that they reach the result through the big product alone, as in float32. Each step's
  products start from 0 and are added to the tile's sum ``tot`` on the CUDA cores (round
  to nearest) at the next step: the tensor cores' own f32 accumulation truncates, which
  over a long K was 10x float32's error;
- the epilogue: the accumulator fragment read off the atom's ``layout_C`` (each thread's
  column pairs at fixed offsets from its base). With ``tma_store`` (HopperConfig.epilogue
  "tma", beta 0): per piece of 64 rows x 128 bytes, ``stage_pairs_tile`` writes ``alpha *
  acc`` converted to the output type into one of the consumer's two staging buffers (the
  128-byte swizzle: conflict-free), the consumer's 128 threads meet at their named barrier,
  and one thread stores the piece with TMA (C's map clips the edges). Else
  ``store_pairs_tile`` stores straight from registers: ``alpha * acc + beta * C``,
  predicated at the edges, 8- (f32) or 4-byte (16-bit) stores when C's address and ldc
  allow (scalar stores where C is stored column by column: a row-major out of the
  transposed product);
- the consumers share the tiles as ``config.schedule`` says (:mod:`gemm.hopper.pipeline`:
  "cooperative" splits a tile's rows among them, "pingpong" gives them whole tiles in turn;
  "plain" has no producer: one warpgroup loads and multiplies, ``emit_pipeline``);
- persistent blocks over the output tiles in grouped order: ``group_m`` tile rows of one
  tile column, then the next column (the tiles running at once share X and Y panels in L2).
"""

from functools import lru_cache

import numpy as np

from layoutalg.tensor import layout_offsets
from layoutalg.atom.gmma import gmma_descriptor

from ..arch.smem import SWIZZLE_ALIGN
from ..codegen import Source, align_arg
from .config import STAGING_BYTES
from .plan import BITS, OUT_BITS, atom_of, hopper_copies, stage_layout
from .pipeline import (ARCH_IMPORTS_SM90, ComputeContext, PersistentGrid, TmaSpec,
                       emit_pipeline, emit_pipeline_warp_specialized)

__all__ = ["hopper_source", "HopperPlan", "hopper_plan", "pipeline_of"]

WGMMA_OP = {"bfloat16": "bf16", "float16": "f16", "tfloat32": "tf32"}
TMA_EPILOGUE_IMPORTS = ("stage_pairs_tile", "tma_store_3d", "bulk_commit", "bulk_wait_read",
                        "bulk_wait", "named_barrier", "fence_proxy_async")


class HopperPlan:
    """Everything the kernel's code is generated from, read off layoutalg."""

    def __init__(self, v):
        cfg = self.cfg = v.config
        self.v = v
        bits = self.bits = BITS[cfg.dtype]
        self.kinst = 256 // bits                       # k of one wgmma
        self.kblocks = cfg.bK // self.kinst
        self.m_atoms = cfg.bM // 64
        self.rows = cfg.tile_m                          # X rows per slot
        self.cooperative = cfg.schedule == "cooperative"
        self.atom = atom_of(v, cfg.bN)
        lx = stage_layout(v.a_major, self.rows, cfg.bK, bits)
        ly = stage_layout(v.b_major, cfg.bN, cfg.bK, bits)
        self.copy_x, self.copy_y, self.copy_c = hopper_copies(v)
        shape = (64, self.kinst)

        def desc(layout, major, mn_block, kb, sh):
            return gmma_descriptor(layout, bits, major, k_block=kb, mn_block=mn_block,
                                   shape=sh).encode()
        # X: [a][kb] for consumer 0, and the step between consumers
        self.desc_x = [[desc(lx, v.a_major, a, kb, shape) for kb in range(self.kblocks)]
                       for a in range(self.m_atoms)]
        self.desc_y = [desc(ly, v.b_major, 0, kb, (cfg.bN, self.kinst))
                       for kb in range(self.kblocks)]
        self.consumer_step = 0
        if self.cooperative and cfg.consumers > 1:
            self.consumer_step = (desc(lx, v.a_major, self.m_atoms, 0, shape)
                                  - self.desc_x[0][0])
        for c in range(cfg.consumers if self.cooperative else 1):
            for a in range(self.m_atoms):
                for kb in range(self.kblocks):
                    got = desc(lx, v.a_major, c * self.m_atoms + a, kb, shape)
                    if got != self.desc_x[a][kb] + c * self.consumer_step:
                        raise AssertionError("consumer blocks are not a constant step apart")
        self.store_plan, self.thread_base = self._fragment()
        if v.tma_store:
            self._staging()

    def _staging(self):
        """The TMA epilogue's pieces: 64 rows (one atom) x 128 bytes of columns (``chunk``),
        each a copy of C's map (``copy_c``: one box, the 128-byte swizzle) and the plan of
        the column pairs each thread holds in it (``pieces``: (atom, column piece, plan) with
        rows and columns relative to the piece)."""
        self.chunk = 1024 // OUT_BITS[self.v.out_dtype]
        self.pieces = []
        for a in range(self.m_atoms):
            for j in range(self.cfg.bN // self.chunk):
                plan = tuple((reg, r - 64 * a, c - j * self.chunk)
                             for reg, r, c in self.store_plan
                             if r // 64 == a and c // self.chunk == j)
                self.pieces.append((a, j, plan))

    def _fragment(self):
        """The epilogue plan ``(reg, r, c)`` per column pair and each thread's base (row,
        column), from the atom's accumulator layout (thr, val) -> m + 64 n."""
        lc, n = self.atom.layout_C, self.cfg.bN
        table = layout_offsets(lc).reshape(-1, lc[0].size).T        # [thread, value]
        rows, cols = table % 64, table // 64
        w, lane = np.divmod(np.arange(128), 32)
        if not (np.array_equal(rows[:, 0], 16 * w + lane // 4)
                and np.array_equal(cols[:, 0], 2 * (lane % 4))):
            raise AssertionError("the wgmma accumulator base differs from the code's")
        plan = []
        for a in range(self.m_atoms):
            for v in range(0, n // 2, 2):
                dr, dc = rows[:, v] - rows[:, 0], cols[:, v] - cols[:, 0]
                if np.ptp(dr) or np.ptp(dc) or np.any(table[:, v + 1] - table[:, v] != 64):
                    raise AssertionError("accumulator pairs are not at fixed thread offsets")
                plan.append((a * n // 2 + v, 64 * a + int(dr[0]), int(dc[0])))
        return tuple(plan), list(zip(rows[:, 0].tolist(), cols[:, 0].tolist()))

    def specs(self):
        """The pipeline's TMA inputs (3-D maps: a batch of matrices): X's block at
        (k * bK, tm * rows) of matrix ``bz * zX``, Y's at (k * bK, tn * bN) of matrix
        ``bz * zY``, contiguous dimension first (``zX``, ``zY``: 1 for a batch, 0 for a
        matrix every product shares)."""
        cfg, v = self.cfg, self.v

        def spec(name, copy, major, rows, tile):
            boxes = tuple((b.smem_offset * self.bits // 8, *b.coords) for b in copy.boxes)

            def index_map(coords, k):
                mn = f"{coords[tile]} * U({rows})"
                kk = (f"({k} + {coords[3]} * steps) * U({cfg.bK})" if v.split_k
                      else f"{k} * U({cfg.bK})")
                batch = f"{coords[2]} * z{name[0]}"
                return (kk, mn, batch) if major == "K" else (mn, kk, batch)
            return TmaSpec(name, copy.bytes, boxes, index_map)
        return [spec("XM", self.copy_x, v.a_major, self.rows, 0),
                spec("YM", self.copy_y, v.b_major, cfg.bN, 1)]


@lru_cache(maxsize=None)
def hopper_plan(v):
    return HopperPlan(v)


def _coords(group_m, split_k):
    """Work unit ``tile``'s range of K (``ks``, with ``split_k``), product ``bz`` of the batch
    and its (row, column) of C there: the K ranges outermost, then the products one after the
    other, each in the grouped order."""
    def coords(src, tile):
        if split_k:
            src(f"ks = {tile} // (tiles_mn * NB)", f"tq = {tile} - ks * (tiles_mn * NB)")
            tile = "tq"
        src(f"bz = {tile} // tiles_mn",
            f"tp = {tile} - bz * tiles_mn",
            f"pg = U({group_m}) * tiles_n",
            f"g0 = (tp // pg) * U({group_m})",
            f"gs = min(tiles_m - g0, U({group_m}))",
            "gr = tp - (tp // pg) * pg",
            "tm = g0 + gr % gs", "tn = gr // gs")
        return ("tm", "tn", "bz") + (("ks",) if split_k else ())
    return coords


def hopper_source(v, simulator=False):
    """The kernel module's source for variant ``v`` (``simulator``: for numba's simulator,
    where gemm.arch's names are the twins of gemm.arch.sim_sm90 and shared arrays take no
    alignment)."""
    p = hopper_plan(v)
    cfg = v.config
    src = Source()
    nacc = p.m_atoms * cfg.bN // 2
    result = "tot" if cfg.tf32x3 else "acc"     # the registers the epilogue stores
    trans = (v.a_major == "MN", v.b_major == "MN")
    mma = [src.define(f"wgmma_tile({WGMMA_OP[cfg.dtype]!r}, {cfg.bN}, {trans[0]}, {trans[1]}, "
                      f"{a * cfg.bN // 2})") for a in range(p.m_atoms)]
    split = v.split_k
    store = src.define(f"store_pairs_tile({'float32' if split else v.out_dtype!r}, "
                       f"{p.store_plan!r}, {split or v.vec_c}, {v.c_columns and not split})")
    names = ARCH_IMPORTS_SM90 + ("smem_desc", "wgmma_tile", "store_pairs_tile")
    if v.tma_store:
        names += TMA_EPILOGUE_IMPORTS
        stage = [src.define(f"stage_pairs_tile({v.out_dtype!r}, {plan!r})")
                 for _, _, plan in p.pieces]
    if cfg.tf32x3:
        split_slot, clear_slot = _split_plan(src, cfg)
        zero, add = src.define(f"fill_tile({nacc})"), src.define(f"add_tile({nacc})")
        names += tuple(n for n in ("split_tf32_tile", "clear_nonfinite_tile", "named_barrier",
                                   "named_barrier_or", "fence_proxy_async", "fill_tile",
                                   "add_tile") if n not in names)
    src("import numpy as np",
        "from numba import cuda, float32, uint8, uint64",
        "from gemm.arch import (" + ", ".join(names) + ")",
        "U = np.uint32", "U64 = np.uint64", f"# {v}", "")

    def desc(start, bits):
        """A descriptor: the 32-bit run-time ``start`` added to the low word of ``bits``, its
        high word a constant (see gemm.arch.sm90.wgmma_tile: no 64-bit sums)."""
        return f"U64({bits >> 32 << 32}) | U64({start} + U({bits & 0xFFFFFFFF}))"

    def body(src, step):
        bases = [("dx", "dy", step.slot)]
        if cfg.tf32x3:
            split_slot(src, step.slot)
            bases.append(("ex", "ey", "sbuf"))
        for x, y, at in bases:
            src(f"{x} = d0 + (({at} + U({step.offsets[0]})) >> U(4))"
                + (f" + {step.wg} * U({p.consumer_step})" if p.consumer_step else ""),
                f"{y} = d0 + (({at} + U({step.offsets[1]})) >> U(4))")
        if cfg.tf32x3:      # the last step's sum into tot (round to nearest), acc anew
            with src.block(f"if {step.first}:"):
                src(f"{zero}(tot, float32(0))")
            with src.block("else:"):
                src(f"{add}(tot, acc)")
            src("wgmma_fence()", "sc = U(0)")
        else:
            src(f"sc = U(0) if {step.first} else U(1)")

        def products(pairs, first):
            for kb in range(p.kblocks):
                for a in range(p.m_atoms):
                    for x, y in pairs:
                        scale = "sc" if first and kb == 0 and (x, y) == pairs[0] else "U(1)"
                        src(f"{mma[a]}(acc, {desc(x, p.desc_x[a][kb])}, "
                            f"{desc(y, p.desc_y[kb])}, {scale})")
        products((("dx", "dy"),), True)
        if cfg.tf32x3:
            # where the slot holds an inf or NaN, the big products carry it; the small ones
            # read the slot with those cleared (else inf * 0 gives NaN)
            with src.block("if bad:"):
                src("wgmma_commit()", "wgmma_wait(0)")
                clear_slot(src, step.slot)
                src("wgmma_fence()")
            products((("ex", "dy"), ("dx", "ey")), False)

    def setup(src, wg):
        if cfg.tf32x3:      # the tile's sum; acc holds one step's products
            src(f"tot = cuda.local.array({nacc}, float32)")
        src(f"acc = cuda.local.array({nacc}, float32)",
            "d0 = U(smem_desc(sm, U64(0)))",       # the array's start-address field
            "srow_t = (t % U(128)) // U(32) * U(16) + lane // U(4)",    # in the atom
            "row_t = " + (f"{wg} * U({cfg.bM}) + " if p.cooperative else "") + "srow_t",
            "col_t = U(2) * (lane % U(4))")
        if cfg.tf32x3:      # the thread among the slot's readers, their buffer and barrier
            pingpong = cfg.schedule == "pingpong"
            src("tt = t % U(128)" + ("" if pingpong else f" + {wg} * U(128)"),
                f"sbuf = pad + U({cfg.stages * cfg.slot_bytes})"
                + (f" + {wg} * U({cfg.slot_bytes})" if pingpong else ""),
                "bar_x = U(3)" + (f" + {wg}" if pingpong else ""))
        if v.tma_store:     # this consumer's two staging pieces, its barrier, its leader
            src(f"stg = pad + U({cfg.shared_bytes - SWIZZLE_ALIGN}) + {wg} * "
                f"U({STAGING_BYTES})",
                f"bar_c = U(1) + {wg}", "lead = t % U(128) == U(0)", "sq = U(0)")

    def staged(src, tm, tn, bz):
        """The TMA epilogue: per piece, wait until the store two pieces back has read its
        staging buffer, stage the piece (all 128 threads), make it visible to TMA, store."""
        piece = STAGING_BYTES // 2
        for q, (a, j, _) in enumerate(p.pieces):
            rows, cols = f"{tm} * U({p.rows}) + U({64 * a})", f"{tn} * U({cfg.bN})"
            with src.block("if lead:"):
                src("bulk_wait_read(1)")
            src("named_barrier(bar_c, 128)", f"so = stg + (sq & U(1)) * U({piece})",
                f"{stage[q]}(sm, so, {result}, alpha, srow_t, col_t)",
                "fence_proxy_async()", "named_barrier(bar_c, 128)")
            with src.block("if lead:"):
                src(f"tma_store_3d(sm, so, CM, {cols} + U({j * p.chunk}), "
                    f"{rows} + row_t - srow_t, {bz})", "bulk_commit()")
            src("sq += U(1)")

    def teardown(src):
        with src.block("if lead:"):        # the block's shared memory outlives its stores
            src("bulk_wait(0)")

    def after_tile(src, coords, steps):
        tm, tn, bz = coords[:3]
        where = f"{tm} * U({p.rows}) + row_t, {tn} * U({cfg.bN}) + col_t, M, N"
        if cfg.tf32x3:      # the last step's products (every tile has a step)
            src(f"{add}(tot, acc)")
        if v.tma_store:
            staged(src, tm, tn, bz)
        elif split:     # the partial tile, f32, to matrix (ks, bz) of the workspace
            src(f"{store}(W[({coords[3]} * NB + {bz}) * M * ldw:], {result}, float32(1), "
                f"float32(0), {where}, ldw)")
        else:
            src(f"{store}(C[{bz} * sCb:], {result}, alpha, beta, {where}, ldc)")

    k_tiles = f"(K + U({cfg.bK - 1})) // U({cfg.bK})"
    pipe = _pipeline(v, body, PersistentGrid(
        "tiles_mn * NB * SK" if split else "tiles_mn * NB",
        f"({k_tiles} + SK - U(1)) // SK" if split else k_tiles,
        _coords(cfg.group_m, split)), ComputeContext(
            setup=setup, after_tile=after_tile, teardown=teardown if v.tma_store else None))
    if (pipe.stages + cfg.split_buffers) * pipe.slot_bytes + SWIZZLE_ALIGN != cfg.shared_bytes:
        raise AssertionError("the ring's size differs from HopperConfig.shared_bytes")
    with src.block("def kernel(XM, YM, CM, C, W, M, N, K, ldc, ldw, NB, sCb, zX, zY, SK, "
                   "alpha, beta):"):
        src(f"sm = cuda.shared.array(0, uint8{align_arg(1024, simulator)})",
            f"tiles_m = (M + U({p.rows - 1})) // U({p.rows})",
            f"tiles_n = (N + U({cfg.bN - 1})) // U({cfg.bN})",
            "tiles_mn = tiles_m * tiles_n")
        pipe.emit(src, simulator=simulator)
    return src.text()


def _split_plan(src, cfg):
    """tf32x3's split of a step's slot by its readers (``tt``: the thread among them): a
    function writing the code that splits the slot at ``slot`` into ``sbuf`` (``bad``: an
    inf or NaN was met), and one that clears the slot's infs and NaNs."""
    readers = cfg.consumers if cfg.schedule == "cooperative" else 1
    n = 128 * readers
    full, rest = divmod(cfg.slot_bytes // 16, n)
    tail = 16 * n * full            # the bytes past the full rounds
    every = [src.define(f"{f}({full}, {16 * n})") if full else None
             for f in ("split_tf32_tile", "clear_nonfinite_tile")]
    last = [src.define(f"{f}(1, 16)") if rest else None
            for f in ("split_tf32_tile", "clear_nonfinite_tile")]

    def split(src, slot):
        src(f"named_barrier(bar_x, {n})",       # every reader's last wgmma is done
            f"nf = {every[0]}(sm, {slot} + tt * U(16), sbuf + tt * U(16))" if full
            else "nf = U(0)")
        if rest:
            with src.block(f"if tt < U({rest}):"):
                src(f"nf |= {last[0]}(sm, {slot} + tt * U(16) + U({tail}), "
                    f"sbuf + tt * U(16) + U({tail}))")
        src("fence_proxy_async()", f"bad = named_barrier_or(bar_x, {n}, nf)")

    def clear(src, slot):
        src(f"named_barrier(bar_x, {n})")       # every reader's big products are done
        if full:
            src(f"{every[1]}(sm, {slot} + tt * U(16))")
        if rest:
            with src.block(f"if tt < U({rest}):"):
                src(f"{last[1]}(sm, {slot} + tt * U(16) + U({tail}))")
        src("fence_proxy_async()", f"named_barrier(bar_x, {n})")
    return split, clear


def _pipeline(v, body, grid, context):
    """The variant's pipeline: plain, or warp-specialized with its consumer schedule."""
    p, cfg = hopper_plan(v), v.config
    if cfg.schedule == "plain":
        return emit_pipeline(body, grid, p.specs(), max_concurrent_steps=cfg.stages,
                             delay_release=cfg.delay_release, compute_context=context)
    return emit_pipeline_warp_specialized(
        body, grid, p.specs(), max_concurrent_steps=cfg.stages,
        delay_release=cfg.delay_release, num_compute_wgs=cfg.consumers,
        memory_registers=cfg.memory_registers, compute_context=context,
        consumer_schedule=cfg.schedule)


def pipeline_of(v):
    """The variant's pipeline (for its schedule and sizes), without writing code."""
    return _pipeline(v, None, PersistentGrid("tiles", "steps"), None)
