"""The tensor-core GEMM generator: the kernel of a :class:`gemm.tensorcore.Variant` (bf16 /
f16 / tf32 in, f32 accumulate, f32 / bf16 / f16 out; see gemm.tensorcore for the operands X,
Y and C it sees) built from layoutalg's tiled copies and tiled MMAs.

The kernel is described in CuTe's vocabulary, like :mod:`gemm.simt`, over tensors whose
engines are sympy expressions of the thread index ``t``, the block indices and the run-time
strides; each unrolled tile of work becomes one tile-level instruction of
:mod:`gemm.arch.tile` (a static plan the intrinsic unrolls into PTX):

- the MMA: ``make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN (F16, or SM80_16x8x8 TF32), warps,
  permutation (16 wm, 16 wn, k))``: each warp owns 16 columns of every 16*wn-column slab of N,
  so B's fragments come two n8 blocks at a time;
- shared memory: per stage a (bMN, bK) tile composed with a swizzle (:func:`smem_layout`):
  K-major rows ``Swizzle(log2(row bytes / 16), log2(16 / element bytes), 3)`` (CuTe's
  ``Sw<3,3,3>`` for 64-element bf16 rows); MN-major tiles are CuTe's 128-byte x 8 atoms with
  ``Sw<3,3,3>`` (``Sw<3,2,3>`` for tf32). The 16-byte chunk index of a 128-byte line is XORed
  with line bits, so the eight 16-byte rows of an ldmatrix phase and the eight 16-byte
  cp.async stores of a phase fall into eight different bank groups (:func:`bank_conflicts`);
- global -> shared: ``make_tiled_copy`` of the cp.async atom (16 bytes when alignment
  allows, else 8 or 4, else plain 2-byte copies) along the contiguous axis. Blocks inside the
  matrix and full k-tiles take unpredicated copies; the edges are predicated through identity
  tensors with cp.async's zero-fill;
- shared -> registers: ``make_tiled_copy_A/B`` of ``SM75_U32x4_LDSM_N`` (K-major) or
  ``SM75_U16x8_LDSM_T`` (MN-major): ldmatrix x4 (.trans), the registers placed in the MMA
  fragments through ``retile_D``; tf32 fragments are read with 4-byte shared loads from the
  MMA partition (ldmatrix moves 16-bit elements) and rounded with ``cvt.rna.tf32.f32``;
- the N-stage cp.async ring of :func:`gemm.pipeline.emit_ring` (``stages`` 2..6 and
  ``delay_release``: the prologue, one commit group per k-tile, empty or not, so every wait
  is ``cp_async_wait(stages - 2 - delay_release)``, the drain included; :func:`ring_events`
  models it for :func:`gemm.pipeline.check_ring`). The body waits for the next k-tile before
  its last k-block, not at the top of the next step, so that the next k-tile's first k-block
  is loaded into registers while the last MMAs run: register fragments are double-buffered
  over the k-blocks of a k-tile and across k-tiles;
- the main loop is written twice: for blocks inside the matrix when K is a multiple of bK
  (no copy is predicated) and for the rest; one loop holding both kinds of copies would pay
  the edge path's instructions in every k-tile;
- launch order: consecutive blocks take ``group_m`` block rows of one block column, then
  the next column (:func:`_block_order`), so the blocks running at once share A and B
  panels in L2;
- epilogue: the accumulators times alpha are staged through shared memory (a padded f32 tile,
  8-byte stores free of bank conflicts), then each thread stores 16-byte runs of a row of C
  (``beta * C`` read the same way), converted to the output type; partial runs at the edges
  store element by element.

Every offset is uint32 code; swizzled shared offsets are computed once per thread
(``sw(base)``) and each access adds or XORs a constant when that is exact for every thread
(checked at generation), else swizzles at run time (the offset modes of the tile plans).
Fragments and accumulators are local arrays that only the plans index, with constants, so
they stay in registers (no local memory).
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from functools import lru_cache
from typing import Any

import sympy

from layoutalg import ComposedLayout, Layout, Swizzle, product
from layoutalg.atom import (SM75_U16x8_LDSM_T, SM75_U32x4_LDSM_N,
                            SM80_16x8x8_F32TF32TF32F32_TN, SM80_16x8x16_F32BF16BF16F32_TN,
                            SM80_16x8x16_F32F16F16F32_TN, SM80_CP_ASYNC_CACHEALWAYS,
                            SM80_CP_ASYNC_CACHEGLOBAL, UniversalCopy)
from layoutalg.tensor import local_tile, make_identity_tensor, make_tensor
from layoutalg.tiled import make_tiled_copy, make_tiled_copy_A, make_tiled_copy_B, make_tiled_mma
from ..arch.tile_plan import ADD, SWIZZLE, XOR
from ..codegen import Source, batch_offset, code, sym
from ..partition import (BX, BY, NOMINAL_TILES, T, element_coords, element_offsets,
                         global_tensor, split_offsets)
from ..pipeline import emit_ring, ring_schedule
from .config import _MMA, _PAD_C, Variant, copy_grid, variant_of

__all__ = ["smem_layout", "ring_events", "tensorcore_source", "bank_conflicts", "kernel_plan"]

ATOMS = {"bfloat16": SM80_16x8x16_F32BF16BF16F32_TN, "float16": SM80_16x8x16_F32F16F16F32_TN,
         "tfloat32": SM80_16x8x8_F32TF32TF32F32_TN}
LDA, LDB, LDC = sym("lda"), sym("ldb"), sym("ldc")


def smem_layout(cfg, bmn, major="K"):
    """The shared tile of one stage, (bmn, bK) -> element offset, swizzled.

    >>> from gemm.tensorcore import TensorCoreConfig
    >>> cfg = TensorCoreConfig(bK=64)
    >>> print(smem_layout(cfg, 128, "K"))
    Sw<3,3,3> o 0 o (128,64):(64,1)
    >>> print(smem_layout(cfg, 128, "MN"))
    Sw<3,3,3> o 0 o ((64,2),64):((1,4096),64)
    """
    eb = cfg.element_bytes
    base = int(math.log2(16 // eb))              # elements per 16-byte chunk, log2
    if major == "K":
        bits = int(math.log2(cfg.bK * eb // 16))  # 16-byte chunks per row, log2
        return ComposedLayout(Swizzle(bits, base, 3), 0, Layout((bmn, cfg.bK), (cfg.bK, 1)))
    line = min(128 // eb, bmn)                    # MN elements of one atom row (<= 128 bytes)
    bits = int(math.log2(line * eb // 16))
    inner = Layout(((line, bmn // line), cfg.bK), ((1, line * cfg.bK), line))
    return ComposedLayout(Swizzle(bits, base, 3), 0, inner)


# --- the ring ----------------------------------------------------------------------------------

def ring_events(stages, k_tiles, k_blocks=2, delay_release=0):
    """The cp.async ring of the kernel as events (:func:`gemm.pipeline.ring_schedule` with the
    GEMM's body: ("read", kt, slot) per k-block, the last k-block of a k-tile reading the next
    k-tile's first one after the ring's wait and sync), to check with
    :func:`gemm.pipeline.check_ring`.

    >>> from gemm.pipeline import check_ring
    >>> check_ring(ring_events(4, 9, delay_release=1), 9)
    []
    """
    def prime(ev, slot):
        ev.append(("read", 0, slot))

    def body(ev, kt, slot, ready):
        for kb in range(k_blocks):
            if kb == k_blocks - 1:
                ev.append(("read", kt + 1, ready()))
            else:
                ev.append(("read", kt, slot))
            ev.append(("mma", kt, kb))

    return ring_schedule(stages, k_tiles, delay_release, body=body, prime=prime)


# --- the generator -----------------------------------------------------------------------------

def _thread_values(expr, threads):
    f = sympy.lambdify(T, expr, "math")
    return [int(f(t)) for t in range(threads)]


class _Swizzled:
    """Shared offsets ``sw(base(t) + c)``: the base swizzled once per thread (as ``name``), each
    constant classified as additive, XOR or run-time, checked over every thread."""

    def __init__(self, sw, name, base, threads):
        self.sw, self.name, self.base = sw, name, base
        self.values = _thread_values(base, threads) if base.free_symbols else [int(base)] * threads

    def decl(self, src):
        """Declare the per-thread base, unswizzled (``raw``) and swizzled (``name``)."""
        src(f"{self.raw} = U({code(self.base)})", f"{self.name} = {self._swz(self.raw)}")

    @property
    def raw(self):
        """Name of the unswizzled base (for SWIZZLE-mode entries of a tile plan)."""
        return f"{self.name}_r"

    @property
    def swizzle(self):
        """(mask, shift) of the swizzle, as the tile plans take it."""
        return (self.sw.yyy_mask, self.sw.shift)

    def _swz(self, x):
        sw = self.sw
        return f"U(({x}) ^ ((({x}) & U({sw.yyy_mask})) >> U({sw.shift})))"

    def mode(self, c):
        """(offset mode, c) of constant ``c`` in a tile plan: ADD or XOR when that equals the
        swizzle of ``base + c`` for every thread, else SWIZZLE (computed at run time)."""
        c = int(c)
        sw, vals = self.sw, self.values
        if all(sw(b + c) == sw(b) + c for b in vals):
            return ADD, c
        if all(sw(b + c) == sw(b) ^ c for b in vals):
            return XOR, c
        return SWIZZLE, c


class _Copy:
    """Global -> shared copies of one operand (X: bMN = bM over MM, Y: bN over NN), ``vec``
    elements per copy along the contiguous axis (K for a K-major operand, MN otherwise)."""

    def __init__(self, cfg, name, bmn, block, ld, major, vec):
        self.name, self.p, self.bmn, self.vec, self.major = name, name.lower(), bmn, vec, major
        self.ld = ld
        self.eb = eb = cfg.element_bytes
        self.bytes = vec * eb
        if self.bytes == 16:
            atom = SM80_CP_ASYNC_CACHEGLOBAL(16, 8 * eb)
        elif self.bytes >= 4:
            atom = SM80_CP_ASYNC_CACHEALWAYS(self.bytes, 8 * eb)
        else:
            atom = UniversalCopy(8 * eb, 8 * eb)
        vals = Layout((1, vec)) if major == "K" else Layout((vec, 1))
        tiled = make_tiled_copy(atom, Layout(*copy_grid(cfg, bmn, major, vec)), vals)
        thr_copy = tiled.get_slice(T)
        KT = sym("kt")
        strides = (ld, 1) if major == "K" else (1, ld)
        gX = local_tile(global_tensor(*strides, bmn, cfg.bK), (bmn, cfg.bK), (block, None))
        cX = local_tile(make_identity_tensor((bmn * NOMINAL_TILES, cfg.bK * NOMINAL_TILES)),
                        (bmn, cfg.bK), (block, None))
        layout = smem_layout(cfg, bmn, major)
        sX = make_tensor(sympy.Integer(0), layout.inner)
        self.src = split_offsets(element_offsets(thr_copy.partition_S(gX), KT), [KT])
        self.coords = element_coords(thr_copy.partition_S(cX), KT)
        self.dst = split_offsets(element_offsets(thr_copy.partition_D(sX)))
        self.sw = _Swizzled(layout.outer, f"{self.p}_s", self.dst[0], cfg.threads)
        self.kstep = sympy.expand(self.src[1]).coeff(KT)
        self.bK = cfg.bK
        # one instruction per vector: the elements with value coordinate 0
        self.copies = [crd for crd in self.src[2] if crd[0] == 0]
        zero = (0,) * len(next(iter(self.coords)))
        self.m0, self.k0 = self.coords[zero]

    def decls(self, src, ext):
        """Per-thread values set before the loop; ``ext`` names the MN extent (M or N)."""
        p = self.p
        src(f"{p}_g = U({code(self.src[0])} + {batch_offset(f's{self.name}b')})",
            f"{p}_d = U({code(self.dst[0])})")
        self.sw.decl(src)
        src(f"{p}_cm = U({code(self.m0)})",
            f"{p}_ck = U({code(sympy.expand(self.k0).subs(sym('kt'), 0))})",
            f"{p}_in = {code(self._block_end())} <= {ext}")

    def _block_end(self):
        """The MN coordinate one past this block's tile."""
        blk = BX if self.p == "a" else BY
        return (blk + 1) * self.bmn

    def issue(self, src, kt, slot_base, ext, interior):
        """Lines copying k-tile ``kt`` (a name) to the stage at shared offset ``slot_base``:
        unpredicated when the block lies inside the matrix and the k-tile is full, which
        ``interior`` (the kernel's fast path) promises for every k-tile."""
        p = self.p
        src(f"{p}_gk = U({p}_g + {kt} * {code(self.kstep)})")
        if self.bytes < 4:
            self._predicated(src, kt, slot_base, ext)
        elif interior:
            self._whole(src, slot_base)
        else:
            with src.block(f"if {p}_in and {kt} < KF:"):
                self._whole(src, slot_base)
            with src.block("else:"):
                self._predicated(src, kt, slot_base, ext)

    def _whole(self, src, slot_base):
        kind = "cg" if self.bytes == 16 else "ca"
        plan = tuple(self.sw.mode(self.dst[2][crd]) + self._global(self.src[2][crd])
                     for crd in self.copies)
        tile = src.define(f"cp_async_tile({kind!r}, {self.bytes}, {plan!r}, "
                          f"{self.sw.swizzle!r})")
        src(f"{tile}(sm, U({slot_base}), {self.sw.name}, {self.sw.raw}, {self.name}, "
            f"{self.p}_gk, {self.ld.name})")

    def _global(self, offset):
        """(g, gl) with ``offset == g + gl * ld`` (a copy's global offset from the k-tile's)."""
        offset = sympy.expand(offset)
        gl = offset.coeff(self.ld)
        g = sympy.expand(offset - gl * self.ld)
        if not (g.is_Integer and gl.is_Integer and g >= 0 and gl >= 0):
            raise AssertionError(f"copy offset {offset} is not g + gl * {self.ld}")
        return int(g), int(gl)

    def _loops(self):
        """The copies as a loop nest: [(index name, count)] and, for each field (global
        offset, unswizzled shared offset, mn and k relative to the first copy), its value at
        the first copy and its step per index. The copies of a partition are a grid, so each
        field is affine in the grid indices (checked)."""
        crds = self.copies
        n_modes = len(crds[0]) - 1
        counts = [1 + max(c[1 + j] for c in crds) for j in range(n_modes)]
        fields = {
            "g": lambda c: sympy.expand(self.src[2][c]),
            "d": lambda c: sympy.Integer(int(self.dst[2][c])),
            "m": lambda c: sympy.expand(self.coords[c][0] - self.m0),
            "k": lambda c: sympy.expand(self.coords[c][1] - self.k0),
        }
        first = crds[0]
        steps = {}
        for name, f in fields.items():
            f0 = f(first)
            unit = []
            for j in range(n_modes):
                e = list(first)
                e[1 + j] = min(1, counts[j] - 1)
                unit.append(sympy.expand(f(tuple(e)) - f0))
            for c in crds:
                if sympy.expand(f(c) - f0 - sum(c[1 + j] * unit[j] for j in range(n_modes))):
                    raise AssertionError(f"copy field {name} is not affine in the copy grid")
            steps[name] = (f0, unit)
        loops = [(f"i{j}", n) for j, n in enumerate(counts) if n > 1]
        return loops, steps, [j for j, n in enumerate(counts) if n > 1]

    def _predicated(self, src, kt, slot_base, ext):
        """The copies of a k-tile at the matrix's edges, element- or vector-wise predicated
        (zero-filled past the edge): one cp_async_zfill_tile call for cp.async copies, a loop
        over the copy grid for the plain 2-byte copies of unaligned 16-bit operands."""
        p = self.p
        kk0 = f"U({p}_ck + {kt} * U({self.bK}))"
        if self.bytes >= 4:
            plan = tuple(self.sw.mode(self.dst[2][crd]) + self._global(self.src[2][crd])
                         + self._coords(crd) for crd in self.copies)
            kind = "cg" if self.bytes == 16 else "ca"
            along = 1 if self.major == "K" else 0
            tile = src.define(f"cp_async_zfill_tile({kind!r}, {self.bytes}, {self.eb}, {along}, "
                              f"{plan!r}, {self.sw.swizzle!r})")
            src(f"{tile}(sm, U({slot_base}), {self.sw.name}, {self.sw.raw}, {self.name}, "
                f"{p}_gk, {self.ld.name}, {p}_cm, {kk0}, {ext}, K)")
            return
        loops, steps, modes = self._loops()

        def value(name):
            f0, unit = steps[name]
            terms = [code(f0)] + [f"{code(unit[j])} * U({idx})"
                                  for (idx, _), j in zip(loops, modes) if unit[j] != 0]
            return " + ".join(terms)

        src(f"{p}_kk = {kk0}")
        with ExitStack() as nest:
            for idx, n in loops:
                nest.enter_context(src.block(f"for {idx} in range({n}):"))
            dst = self.sw._swz(f"U({p}_d + {value('d')})")
            at = f"U({p}_gk + {value('g')})"
            src(f"mn = U({p}_cm + {value('m')})", f"kk = U({p}_kk + {value('k')})",
                f"if mn < {ext} and kk < K:",
                f"    sm[U({slot_base} + {dst})] = {self.name}[{at}]",
                "else:",
                f"    sm[U({slot_base} + {dst})] = ZERO")

    def _coords(self, crd):
        """(dmn, dk): a copy's element relative to the thread's first copy."""
        mn, k = (sympy.expand(x - x0) for x, x0 in zip(self.coords[crd], (self.m0, self.k0)))
        if not (mn.is_Integer and k.is_Integer and mn >= 0 and k >= 0):
            raise AssertionError(f"copy {crd} is not at a constant offset: {mn}, {k}")
        return int(mn), int(k)


class _Fragments:
    """Shared -> register loads of one operand's MMA fragments: ldmatrix x4 (.trans for an
    MN-major tile) for 16-bit types, 4-byte shared loads rounded to tf32 otherwise. Register
    ``{x}{r}_{kb % 2}`` holds 32 bits of k-block kb's fragment (two 16-bit values or one tf32)."""

    def __init__(self, cfg, which, mma, bmn, major):
        self.which, self.p = which, which.lower()
        layout = smem_layout(cfg, bmn, major)
        sX = make_tensor(sympy.Integer(0), layout.inner)
        thr_mma = mma.get_slice(T)
        frag = (thr_mma.partition_fragment_A if which == "A" else
                thr_mma.partition_fragment_B)(sX)
        self.frag = frag.layout
        self.per_reg = 4 // cfg.element_bytes            # values per 32-bit register
        self.vals = product(self.frag.shape[0])
        self.mma_mn = product(self.frag.shape[1])
        self.n_k = product(self.frag.shape[2])
        self.loads = {}       # kb -> [(src const, (register indices))]
        self.nregs = self.vals * self.mma_mn // self.per_reg    # per k-block
        if cfg.element_bytes == 2:
            atom = SM75_U32x4_LDSM_N(16) if major == "K" else SM75_U16x8_LDSM_T(16)
            self.op = "ldmatrix_x4" if major == "K" else "ldmatrix_x4_trans"
            tiled = (make_tiled_copy_A if which == "A" else make_tiled_copy_B)(atom, mma)
            thr = tiled.get_slice(T)
            src = split_offsets(element_offsets(thr.partition_S(sX)))
            retile = thr.retile_D(frag).layout
            n_mn = product(retile.shape[1])
            for kb in range(self.n_k):
                out = []
                for i in range(n_mn):
                    regs = []
                    for r in range(4):
                        lo, hi = retile((2 * r, i, kb)), retile((2 * r + 1, i, kb))
                        if hi != lo + 1 or lo % 2:
                            raise AssertionError(f"ldmatrix register {r} of {which} does not "
                                                 f"fill one fragment register ({lo}, {hi})")
                        regs.append(self.reg(lo, kb))
                    out.append((src[2][(0, i, kb)], tuple(regs)))
                self.loads[kb] = out
        else:
            self.op = None
            part = (thr_mma.partition_A if which == "A" else thr_mma.partition_B)(sX)
            src = split_offsets(element_offsets(part))
            for kb in range(self.n_k):
                self.loads[kb] = [(src[2][(v, i, kb)], (self.reg(self.frag((v, i, kb)), kb),))
                                  for i in range(self.mma_mn) for v in range(self.vals)]
        self.sw = _Swizzled(layout.outer, f"l{self.p}", src[0], cfg.threads)

    def reg(self, offset, kb):
        """Index in the fragment array (``{x}f``, two k-blocks of registers) of the register
        holding fragment offset ``offset`` of k-block kb."""
        rel = offset - self.frag((0, 0, kb))
        if not 0 <= rel < self.vals * self.mma_mn:
            raise AssertionError(f"fragment {self.which} offsets of k-block {kb} are not compact")
        return rel // self.per_reg + (kb % 2) * self.nregs

    def emit_loads(self, src, kb, base):
        """One load_tile call: k-block kb's fragment from the stage at shared offset base."""
        plan = tuple(self.sw.mode(const) + (regs,) for const, regs in self.loads[kb])
        tile = src.define(f"load_tile({self.op or 'ld_tf32'!r}, {plan!r}, "
                          f"{self.sw.swizzle!r})")
        src(f"{tile}({self.p}f, sm, {base}, {self.sw.name}, {self.sw.raw})")

    def operand(self, idx, kb):
        """Register indices of MMA operand ``idx`` (M or N block) in k-block kb."""
        return tuple(self.reg(self.frag((v, idx, kb)), kb)
                     for v in range(0, self.vals, self.per_reg))


class _Kernel:
    """Everything the source needs, computed once per variant."""

    def __init__(self, v):
        self.v = cfg = v.config
        self.variant = v
        self.mma_fn, kmma, _ = _MMA[cfg.dtype]
        atom = ATOMS[cfg.dtype]
        wm, wn = cfg.warps
        self.mma = make_tiled_mma(atom(), Layout((wm, wn, 1)), (16 * wm, 16 * wn, kmma))
        self.cfg = cfg
        self.a = _Copy(cfg, "A", cfg.bM, BX, LDA, v.a_major, v.vec_a)
        self.b = _Copy(cfg, "B", cfg.bN, BY, LDB, v.b_major, v.vec_b)
        self.la = _Fragments(cfg, "A", self.mma, cfg.bM, v.a_major)
        self.lb = _Fragments(cfg, "B", self.mma, cfg.bN, v.b_major)
        if self.la.n_k != self.lb.n_k or self.la.n_k != cfg.bK // kmma:
            raise AssertionError("A and B k-blocks differ")
        thr = self.mma.get_slice(T)
        gC = local_tile(global_tensor(LDC, 1, cfg.bM, cfg.bN), (cfg.bM, cfg.bN), (BX, BY))
        self.fragC = thr.partition_fragment_C(gC).layout
        ldsc = cfg.bN + _PAD_C
        sC = make_tensor(sympy.Integer(0), Layout((cfg.bM, cfg.bN), (ldsc, 1)))
        pc = thr.partition_C(sC)
        self.c_stage = split_offsets(element_offsets(pc))
        shape = pc.layout.shape
        self.mma_m, self.mma_n = product(shape[1]), product(shape[2])
        self.ldsc = ldsc
        self.slot_a, self.slot_b = cfg.bM * cfg.bK, cfg.bN * cfg.bK
        for major, slot, bmn in ((v.a_major, self.slot_a, cfg.bM), (v.b_major, self.slot_b, cfg.bN)):
            if slot % smem_layout(cfg, bmn, major).outer.domain_size:
                raise AssertionError("stage size is not a multiple of the swizzle domain")
        self.b_base = cfg.stages * self.slot_a


def _emit(k, simulator):
    cfg, v = k.cfg, k.variant
    src = Source()
    KB = k.la.n_k
    smem_type = "float32" if cfg.dtype == "tfloat32" else "uint16"
    src("import numpy as np",
        "from numba import cuda, float32, uint16",
        "from gemm.arch import (",
        "    bf16_to_f32, bf16x2_to_f32, cp_async_commit, cp_async_tile, cp_async_wait,",
        "    cp_async_zfill_tile, cvt_rn_bf16_f32, cvt_rn_bf16x2_f32, cvt_rn_f16_f32,",
        "    cvt_rn_f16x2_f32, f16_to_f32, f16x2_to_f32, fill_tile, ld_v4_b32, ld_v4_f32,",
        "    load_tile, mma_tile, scaled_store_tile, st_v4_b32, st_v4_f32)",
        "U = np.uint32",
        f"ZERO = {'np.float32(0)' if smem_type == 'float32' else 'np.uint16(0)'}",
        f"# {v}",
        "")
    with src.block("def kernel(A, B, C, M, N, K, lda, ldb, ldc, sAb, sBb, sCb, alpha, beta):"):
        src("t = U(cuda.threadIdx.x)")
        _block_order(src, cfg.group_m)
        src(f"sm = cuda.shared.array(0, {smem_type})",
            f"KT = U((K + U({cfg.bK - 1})) // U({cfg.bK}))",
            f"KF = U(K // U({cfg.bK}))")
        k.a.decls(src, "M")
        k.b.decls(src, "N")
        k.la.sw.decl(src)
        k.lb.sw.decl(src)
        n_acc = k.fragC.cosize
        src(f"acc = cuda.local.array({n_acc}, float32)",
            f"af = cuda.local.array({2 * k.la.nregs}, np.uint32)",
            f"bf = cuda.local.array({2 * k.lb.nregs}, np.uint32)",
            f"{src.define(f'fill_tile({n_acc})')}(acc, float32(0))")

        def issue(kt, slot, interior):
            k.a.issue(src, kt, f"{slot} * U({k.slot_a})", "M", interior)
            k.b.issue(src, kt, f"U({k.b_base}) + {slot} * U({k.slot_b})", "N", interior)

        def load(kb):
            k.la.emit_loads(src, kb, "ra")
            k.lb.emit_loads(src, kb, "rb")

        def mma(kb):
            plan = []
            for i in range(k.mma_m):        # serpentine: consecutive MMAs share A or B
                js = range(k.mma_n) if i % 2 == 0 else reversed(range(k.mma_n))
                for j in js:
                    c = tuple(int(k.fragC((x, i, j))) for x in range(4))
                    plan.append((c, k.la.operand(i, kb), k.lb.operand(j, kb)))
            src(f"{src.define(f'mma_tile({k.mma_fn!r}, {tuple(plan)!r})')}(acc, af, bf)")

        def slots(slot):
            src(f"ra = U({slot} * U({k.slot_a}))", f"rb = U(U({k.b_base}) + {slot} * U({k.slot_b}))")

        def prime(slot):
            slots(slot)
            load(0)

        def body(kt, slot, ready_next):
            for kb in range(KB):
                src(f"# k-block {kb}")
                if kb == KB - 1:
                    slots(ready_next())         # the next k-tile's slot from here on
                load((kb + 1) % KB)
                mma(kb)

        # The main loop twice: for blocks inside the matrix when K is a multiple of bK (no
        # copy needs a predicate), and for the rest. One loop with both kinds of copies
        # costs the predicated path's instructions in every k-tile (the compiler
        # if-converts the two).
        for branch, interior in (("if a_in and b_in and KF == KT:", True), ("else:", False)):
            with src.block(branch):
                emit_ring(src, stages=cfg.stages, delay_release=cfg.delay_release, steps="KT",
                          issue=lambda kt, slot, i=interior: issue(kt, slot, i), body=body,
                          prime=prime)
        src("cuda.syncthreads()")       # every ldmatrix is done before the epilogue reuses
        _epilogue(src, k)
    return src.text()


def _block_order(src, group_m):
    """``bx``, ``by``: the block's tile of C. Blocks are launched in the order of their linear
    index; consecutive ones take ``group_m`` block rows of one block column, then the same
    rows of the next column, so the blocks running at once read a few A panels and B panels
    many times from L2 instead of every A panel once per wave."""
    src("gx = U(cuda.gridDim.x)", "gy = U(cuda.gridDim.y)",
        "pid = U(U(cuda.blockIdx.x) + U(cuda.blockIdx.y) * gx)",
        f"gw = U(U({group_m}) * gy)",                 # blocks of one group of rows
        f"g0 = U((pid // gw) * U({group_m}))",        # its first block row
        f"gs = min(U(gx - g0), U({group_m}))",        # its rows (fewer in the last group)
        "gr = U(pid - (pid // gw) * gw)",
        "bx = U(g0 + gr % gs)", "by = U(gr // gs)")


def _epilogue(src, k):
    """Stage ``alpha * acc`` in shared memory (a (bM, bN + 8) f32 tile: each thread's pairs of
    columns are 8-byte stores, two wavefronts per warp), then store C in 16-byte runs of a
    row: ``beta * C`` added in f32 and the sum converted to the output type. Runs that cross
    the matrix's edge, or a C whose address or ldc does not allow 16-byte stores, go element
    by element."""
    cfg, v = k.cfg, k.variant
    base, _, rest = k.c_stage
    src("smc = cuda.shared.array(0, float32)", f"cs = {code(base)}")
    plan = []
    for crd, off in rest.items():
        if crd[0] % 2:
            continue                    # stored with its even neighbour
        pair = (crd[0] + 1,) + crd[1:]
        if int(rest[pair]) != int(off) + 1:
            raise AssertionError("accumulator pairs are not adjacent columns")
        plan.append((int(off), (int(k.fragC(crd)), int(k.fragC(pair)))))
    src(f"{src.define(f'scaled_store_tile({tuple(plan)!r})')}(smc, cs, acc, alpha)",
        "cuda.syncthreads()")
    half = v.out_dtype != "float32"
    ve = 8 if half else 4                       # elements per 16-byte run of C
    runs_per_row = cfg.bN // ve
    iters = cfg.bM * runs_per_row // cfg.threads
    cvt1 = {"bfloat16": "cvt_rn_bf16_f32", "float16": "cvt_rn_f16_f32"}.get(v.out_dtype)
    cvt2 = {"bfloat16": "cvt_rn_bf16x2_f32", "float16": "cvt_rn_f16x2_f32"}.get(v.out_dtype)
    back1 = {"bfloat16": "bf16_to_f32", "float16": "f16_to_f32"}.get(v.out_dtype)
    back2 = {"bfloat16": "bf16x2_to_f32", "float16": "f16x2_to_f32"}.get(v.out_dtype)
    src("nz = beta != float32(0)", f"m0 = bx * U({cfg.bM})", f"n0 = by * U({cfg.bN})",
        f"cz = {batch_offset('sCb')}")
    with src.block(f"for i in range({iters}):"):
        src(f"j = t + U(i) * U({cfg.threads})",
            f"r = j // U({runs_per_row})", f"q = (j % U({runs_per_row})) * U({ve})",
            "gm = m0 + r", "gn = n0 + q", f"s = r * U({k.ldsc}) + q", "g = cz + gm * ldc + gn")
        vec_ok = f"gm < M and gn + U({ve}) <= N" + ("" if v.vec_c else " and False")
        with src.block(f"if {vec_ok}:"):
            names = [f"x{e}" for e in range(ve)]
            for h in range(0, ve, 4):
                src(f"{', '.join(names[h:h + 4])} = ld_v4_f32(smc, s + U({h}))")
            if half:
                with src.block("if nz:"):
                    src("w0, w1, w2, w3 = ld_v4_b32(C, g)")
                    for e in range(4):
                        src(f"o0, o1 = {back2}(w{e})",
                            f"x{2 * e} += beta * o0", f"x{2 * e + 1} += beta * o1")
                src("st_v4_b32(C, g, " + ", ".join(f"{cvt2}(x{2 * e}, x{2 * e + 1})"
                                                  for e in range(4)) + ")")
            else:
                with src.block("if nz:"):
                    src("o0, o1, o2, o3 = ld_v4_f32(C, g)")
                    src(*(f"x{e} += beta * o{e}" for e in range(4)))
                src("st_v4_f32(C, g, x0, x1, x2, x3)")
        with src.block("elif gm < M:"):
            with src.block(f"for e in range({ve}):"):
                with src.block("if gn + U(e) < N:"):
                    src("x = smc[s + U(e)]")
                    if half:
                        src(f"C[g + U(e)] = {cvt1}(x + beta * {back1}(C[g + U(e)]) if nz "
                            "else x)")
                    else:
                        src("C[g + U(e)] = x + beta * C[g + U(e)] if nz else x")


@lru_cache(maxsize=None)
def kernel_plan(v):
    """Everything the source of Variant ``v`` needs (computed once per variant)."""
    return _Kernel(v)


def tensorcore_source(variant: Any, simulator: bool = False) -> str:
    """The numba source of the kernel of a :class:`Variant` (a TensorCoreConfig means
    ``Variant(config)``: K-major operands, f32 out, 16-byte copies)."""
    return _emit(kernel_plan(variant_of(variant)), simulator)


# --- bank conflicts ----------------------------------------------------------------------------

def bank_conflicts(cfg, swizzle=True, majors=("K", "K")):
    """Worst number of shared-memory wavefronts per phase of the kernel's shared accesses
    (1 = conflict-free): {"cp.async A", "cp.async B", "ldmatrix A", "ldmatrix B"} (for tf32:
    "lds A", "lds B", its 4-byte fragment loads). ``majors``: of the kernel's X and Y.

    A 16-byte access per thread is served a quarter-warp (8 threads, 128 bytes) at a time, a
    4-byte one a warp at a time; a phase needs as many wavefronts as the largest number of
    distinct aligned addresses that fall on one bank (group). ``swizzle=False`` counts the
    same accesses on the unswizzled tiles (to show what the swizzle buys).
    """
    v = Variant(cfg, *majors)
    k = kernel_plan(v)
    eb = cfg.element_bytes
    out = {}

    def worst(offsets, size):   # element offsets of one phase, access size in bytes
        groups = {}
        for a in offsets:
            unit = (eb * a) // size
            groups.setdefault(unit % (128 // size), set()).add(unit)
        return max(len(s) for s in groups.values())

    def count(sw_obj, consts, size):
        sw = sw_obj.sw if swizzle else (lambda x: x)
        phase = 128 // size
        w = 1
        for c in consts:
            addrs = [sw(b + int(c)) for b in sw_obj.values]
            for ph in range(0, cfg.threads, phase):
                w = max(w, worst(addrs[ph:ph + phase], size))
        return w

    for name, cp in (("cp.async A", k.a), ("cp.async B", k.b)):
        out[name] = count(cp.sw, [cp.dst[2][crd] for crd in cp.copies], 16)
    for which, fr in (("A", k.la), ("B", k.lb)):
        consts = [c for loads in fr.loads.values() for c, _ in loads]
        if fr.op:
            out[f"ldmatrix {which}"] = count(fr.sw, consts, 16)
        else:
            out[f"lds {which}"] = count(fr.sw, consts, 4)
    return out


