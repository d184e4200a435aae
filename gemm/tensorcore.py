"""A tensor-core GEMM generated from layoutalg's tiled copies and tiled MMAs: bf16 / f16 / tf32
in, f32 accumulate, f32 / bf16 / f16 out.

``out = alpha * A @ B + beta * out`` with A (M, K) and B (K, N) of either major (each with one
unit stride) and ``out`` (M, N) row- or column-major. The kernel sees two K-side operands X
(MM, K) and Y (NN, K) and a row-major C (MM, NN): X = A, Y = B^T for a row-major out, and
X = B^T, Y = A (C^T = B^T A^T) for a column-major one. Each of X and Y is "K"-major (K
contiguous) or "MN"-major; a :class:`Variant` names everything a compiled kernel depends on.

The kernel is described in CuTe's vocabulary, like :mod:`gemm.simt`, over tensors whose
engines are sympy expressions of the thread index ``t``, the block indices and the run-time
strides:

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
(checked at generation), else swizzles at run time. Fragments are named scalars (no local
memory).
"""

import math
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import sympy

from layoutalg import ComposedLayout, Layout, Swizzle, product
from layoutalg.atom import (SM75_U16x8_LDSM_T, SM75_U32x4_LDSM_N,
                            SM80_16x8x8_F32TF32TF32F32_TN, SM80_16x8x16_F32BF16BF16F32_TN,
                            SM80_16x8x16_F32F16F16F32_TN, SM80_CP_ASYNC_CACHEALWAYS,
                            SM80_CP_ASYNC_CACHEGLOBAL, UniversalCopy)
from layoutalg.tensor import local_tile, make_identity_tensor, make_tensor
from layoutalg.tiled import make_tiled_copy, make_tiled_copy_A, make_tiled_copy_B, make_tiled_mma
from .codegen import Source, code, load_module, sym
from .launch import Launcher
from .operands import (check_same_device, check_spans, current_stream, kernel_buffer, operand,
                       output_operand)
from .partition import (BX, BY, NOMINAL_TILES, T, element_coords, element_offsets,
                        global_tensor, split_offsets)
from .arch.tile_plan import ADD, SWIZZLE, XOR
from .pipeline import DYNAMIC_SHARED_LIMIT, STATIC_SHARED_LIMIT, emit_ring, ring_schedule

__all__ = ["TensorCoreConfig", "Variant", "DTYPES", "OUT_DTYPES", "MAJORS", "smem_layout",
           "tensorcore_source", "tensorcore_function", "tensorcore_kernel", "tensorcore_matmul",
           "plan_call", "launch_matmul", "compile_variant", "bank_conflicts", "ring_events",
           "RAW16"]

DTYPES = ("bfloat16", "float16", "tfloat32")
OUT_DTYPES = ("float32", "bfloat16", "float16")
MAJORS = ("K", "MN")
# dtype -> (MMA atom, gemm.arch intrinsic, k of the atom, bytes per element in memory)
_MMA = {"bfloat16": (SM80_16x8x16_F32BF16BF16F32_TN, "mma_m16n8k16_f32_bf16", 16, 2),
        "float16": (SM80_16x8x16_F32F16F16F32_TN, "mma_m16n8k16_f32_f16", 16, 2),
        "tfloat32": (SM80_16x8x8_F32TF32TF32F32_TN, "mma_m16n8k8_f32_tf32", 8, 4)}
LDA, LDB, LDC = sym("lda"), sym("ldb"), sym("ldc")
_PAD_C = 8          # f32 elements of padding per row of the staged C tile (see _Epilogue)


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _copy_threads(cfg, bmn, major, vec):
    """The thread layout of the global -> shared copy of a (bmn, bK) tile: threads along the
    contiguous axis first, ``vec`` elements each."""
    n = cfg.threads
    if major == "K":
        chunks = cfg.bK // vec
        tk = min(chunks, n)
        tm = n // tk
        if bmn % tm:
            raise ValueError(f"TensorCoreConfig: bM and bN must be multiples of {tm} (the rows "
                             f"{n} threads copy per pass)")
        return Layout((tm, tk), (tk, 1))
    chunks = bmn // vec
    tm = min(chunks, n)
    tk = n // tm
    if cfg.bK % tk:
        raise ValueError(f"TensorCoreConfig: bK must be a multiple of {tk} (the k-rows {n} "
                         "threads copy per pass of an MN-major tile)")
    return Layout((tm, tk), (1, tm))


@dataclass(frozen=True)
class TensorCoreConfig:
    """One tensor-core kernel: block tile (bM, bN, bK; bK None: 128-byte K rows, 64 elements
    of bf16/f16, 32 of tf32), warp layout (wm, wn), cp.async ring
    ``stages`` (2..6) and ``delay_release`` (a stage is refilled only ``delay_release`` k-tiles
    after it was read; 0..stages-2), operand ``dtype`` ("bfloat16", "float16", or "tfloat32"
    for float32 operands; raw 16-bit arrays are read as ``dtype``), ``min_blocks`` (launch
    bounds: blocks per SM the registers must allow), ``group_m`` (the launch order: blocks
    that start together sweep ``group_m`` block rows of C, then move one block column on, so
    that they share their A and B tiles in L2; a value at least the number of block rows is
    plain column-by-column order).

    The default, 256x128x64 with 4x2 warps (each warp 64x64), 3 stages and group_m 8, was the
    fastest config timed at 4096^3 and 8192^3 bf16 on an H100 (benchmarks/RESULTS.md: 4
    stages were as fast, and need a third more shared memory).

    >>> cfg = TensorCoreConfig()
    >>> cfg.bK, cfg.threads, cfg.shared_bytes, str(smem_layout(cfg, cfg.bM, "K").outer)
    (64, 256, 147456, 'Sw<3,3,3>')
    >>> TensorCoreConfig(dtype="tfloat32").bK
    32
    """

    bM: int = 256
    bN: int = 128
    bK: int = None
    warps: tuple = (4, 2)
    stages: int = 3
    dtype: str = "bfloat16"
    min_blocks: int = 1
    delay_release: int = 0
    group_m: int = 8

    def __post_init__(self):
        if self.dtype in DTYPES and self.bK is None:
            object.__setattr__(self, "bK", 128 // self.element_bytes)
        for name in ("bM", "bN", "bK", "stages", "min_blocks", "group_m"):
            v = getattr(self, name)
            if not (_is_int(v) and v >= 1):
                raise ValueError(f"TensorCoreConfig: {name} must be a positive int, got {v!r}")
        w = self.warps
        if not (isinstance(w, tuple) and len(w) == 2 and all(_is_int(x) and x >= 1 for x in w)):
            raise ValueError(f"TensorCoreConfig: warps must be a pair of positive ints, got {w!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"TensorCoreConfig: dtype must be one of {DTYPES}, got "
                             f"{self.dtype!r}")
        if self.group_m > 65535:        # group_m * grid columns must fit in 32 bits
            raise ValueError(f"TensorCoreConfig: group_m must be at most 65535, got "
                             f"{self.group_m}")
        if not 2 <= self.stages <= 6:
            raise ValueError(f"TensorCoreConfig: stages must be in 2..6, got {self.stages}")
        d = self.delay_release
        if not (_is_int(d) and 0 <= d <= self.stages - 2):
            raise ValueError(f"TensorCoreConfig: delay_release must be an int in 0..stages-2 "
                             f"(stages={self.stages}: a copy must be in flight), got {d!r}")
        eb = self.element_bytes
        if self.bK * eb not in (64, 128):
            raise ValueError(f"TensorCoreConfig: bK must be {64 // eb} or {128 // eb} for "
                             f"{self.dtype} (64- or 128-byte K rows: an even number of k-blocks "
                             f"and whole 16-byte swizzle chunks), got {self.bK}")
        wm, wn = w
        if self.bM % (16 * wm) or self.bN % (16 * wn):
            raise ValueError(f"TensorCoreConfig: bM={self.bM} must be a multiple of 16*wm="
                             f"{16 * wm} and bN={self.bN} of 16*wn={16 * wn} (m16n8 atoms, "
                             "ldmatrix x4 covering two n8 blocks)")
        if self.threads > 1024:
            raise ValueError(f"TensorCoreConfig: {self.threads} threads exceed 1024")
        if self.shared_bytes > DYNAMIC_SHARED_LIMIT:
            raise ValueError(f"TensorCoreConfig: {self.shared_bytes} bytes of shared memory "
                             f"(stages x (bM + bN) x bK x {eb} bytes) exceed the "
                             f"{DYNAMIC_SHARED_LIMIT} a block can have on any GPU (sm_90)")
        for bmn in (self.bM, self.bN):
            for major in MAJORS:
                for vec in [v for v in (1, 2, 4, 8) if v * eb <= 16]:   # every copy width
                    _copy_threads(self, bmn, major, vec)     # must fit (ValueError)

    @property
    def threads(self):
        return 32 * self.warps[0] * self.warps[1]

    @property
    def element_bytes(self):
        return _MMA[self.dtype][3]

    @property
    def ring_bytes(self):
        return self.element_bytes * self.stages * (self.bM + self.bN) * self.bK

    @property
    def shared_bytes(self):
        """Dynamic shared memory: the ring, reused by the epilogue's staged C tile."""
        return max(self.ring_bytes, 4 * self.bM * (self.bN + _PAD_C))


@dataclass(frozen=True)
class Variant:
    """Everything one compiled kernel depends on: the config, the majors of the kernel's
    operands X (MM, K) and Y (NN, K), the output type, the elements per global -> shared copy
    of X and Y (``16 / element bytes`` at most; 1: plain copies of 16-bit data) and whether C
    takes 16-byte stores."""

    config: TensorCoreConfig = TensorCoreConfig()
    a_major: str = "K"
    b_major: str = "K"
    out_dtype: str = "float32"
    vec_a: int = 8
    vec_b: int = 8
    vec_c: bool = True

    def __post_init__(self):
        if not isinstance(self.config, TensorCoreConfig):
            raise TypeError(f"Variant: config must be a TensorCoreConfig, got {self.config!r}")
        for name in ("a_major", "b_major"):
            if getattr(self, name) not in MAJORS:
                raise ValueError(f"Variant: {name} must be one of {MAJORS}")
        if self.out_dtype not in OUT_DTYPES:
            raise ValueError(f"Variant: out_dtype must be one of {OUT_DTYPES}")
        top = 16 // self.config.element_bytes
        if self.vec_a == 8 and top == 4:        # the default, for a tf32 config
            object.__setattr__(self, "vec_a", 4)
        if self.vec_b == 8 and top == 4:
            object.__setattr__(self, "vec_b", 4)
        for name in ("vec_a", "vec_b"):
            v = getattr(self, name)
            if v not in (1, 2, 4, 8) or v > top:
                raise ValueError(f"Variant: {name} must be 1, 2, 4 or 8 and at most {top} for "
                                 f"{self.config.dtype}, got {v!r}")

    @property
    def signature(self):
        ab = "float32" if self.config.dtype == "tfloat32" else "uint16"
        c = "float32" if self.out_dtype == "float32" else "uint16"
        return (f"void({ab}[::1], {ab}[::1], {c}[::1], " + ", ".join(["uint32"] * 6)
                + ", float32, float32)")


def smem_layout(cfg, bmn, major="K"):
    """The shared tile of one stage, (bmn, bK) -> element offset, swizzled.

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
        tiled = make_tiled_copy(atom, _copy_threads(cfg, bmn, major, vec), vals)
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
        src(f"{p}_g = U({code(self.src[0])})", f"{p}_d = U({code(self.dst[0])})")
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
        (zero-filled past the edge), as a loop over the copy grid: this path runs once per
        block edge, and unrolled it would multiply the kernel's code."""
        p = self.p
        loops, steps, modes = self._loops()

        def value(name):
            f0, unit = steps[name]
            terms = [code(f0)] + [f"{code(unit[j])} * U({idx})"
                                  for (idx, _), j in zip(loops, modes) if unit[j] != 0]
            return " + ".join(terms)

        src(f"{p}_kk = U({p}_ck + {kt} * U({self.bK}))")
        with ExitStack() as nest:
            for idx, n in loops:
                nest.enter_context(src.block(f"for {idx} in range({n}):"))
            self._predicated_copy(src, slot_base, ext, value)

    def _predicated_copy(self, src, slot_base, ext, value):
        p, v = self.p, self.vec
        dst = self.sw._swz(f"U({p}_d + {value('d')})")
        at = f"U({p}_gk + {value('g')})"
        src(f"mn = U({p}_cm + {value('m')})", f"kk = U({p}_kk + {value('k')})")
        if self.bytes < 4:
            src(f"if mn < {ext} and kk < K:",
                f"    sm[U({slot_base} + {dst})] = {self.name}[{at}]",
                "else:",
                f"    sm[U({slot_base} + {dst})] = ZERO")
        else:
            # elements of the vector inside the matrix, along the contiguous axis
            if self.major == "K":
                n_in = f"(min(U({v}), U(K - kk)) if kk < K else U(0)) if mn < {ext} else U(0)"
            else:
                n_in = f"(min(U({v}), U({ext} - mn)) if mn < {ext} else U(0)) if kk < K else U(0)"
            kind = "cg" if self.bytes == 16 else "ca"
            src(f"nb = {n_in}",
                f"cp_async_{kind}_zfill(sm, U({slot_base} + {dst}), {self.name}, "
                f"{at} if nb != U(0) else U(0), {self.bytes}, U(nb * U({self.eb})))")


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
        atom, self.mma_fn, kmma, _ = _MMA[cfg.dtype]
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
        "from gemm.arch import (bf16_to_f32, bf16x2_to_f32, cp_async_ca_zfill,",
        "                       cp_async_cg_zfill, cp_async_commit, cp_async_tile,",
        "                       cp_async_wait, cvt_rn_bf16_f32, cvt_rn_bf16x2_f32,",
        "                       cvt_rn_f16_f32, cvt_rn_f16x2_f32, f16_to_f32, f16x2_to_f32,",
        "                       fill_tile, ld_v4_b32, ld_v4_f32, load_tile, mma_tile,",
        "                       scaled_store_tile, st_v4_b32, st_v4_f32)",
        "U = np.uint32",
        f"ZERO = {'np.float32(0)' if smem_type == 'float32' else 'np.uint16(0)'}",
        f"# {v}",
        "")
    with src.block("def kernel(A, B, C, M, N, K, lda, ldb, ldc, alpha, beta):"):
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
    src("nz = beta != float32(0)", f"m0 = bx * U({cfg.bM})", f"n0 = by * U({cfg.bN})")
    with src.block(f"for i in range({iters}):"):
        src(f"j = t + U(i) * U({cfg.threads})",
            f"r = j // U({runs_per_row})", f"q = (j % U({runs_per_row})) * U({ve})",
            "gm = m0 + r", "gn = n0 + q", f"s = r * U({k.ldsc}) + q", "g = gm * ldc + gn")
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


def _variant(v):
    if isinstance(v, TensorCoreConfig):
        return Variant(v)
    if not isinstance(v, Variant):
        raise TypeError(f"expected a Variant or a TensorCoreConfig, got {v!r}")
    return v


@lru_cache(maxsize=None)
def _plan(v):
    return _Kernel(v)


def tensorcore_source(variant, simulator=False):
    """The numba source of the kernel of a :class:`Variant` (a TensorCoreConfig means
    ``Variant(config)``: K-major operands, f32 out, 16-byte copies)."""
    return _emit(_plan(_variant(variant)), simulator)


def tensorcore_function(variant):
    """The generated kernel as a plain Python function (for ``compile_ptx``)."""
    from gemm._env import simulator_active
    return load_module(tensorcore_source(variant, simulator_active()), "tensorcore").kernel


@lru_cache(maxsize=None)
def tensorcore_kernel(variant):
    """The kernel compiled for the variant's signature (numba's on-disk cache off the
    simulator)."""
    from numba import cuda
    from gemm._env import simulator_active
    v = _variant(variant)
    fn = tensorcore_function(v)
    if simulator_active():
        return cuda.jit(v.signature)(fn)
    return cuda.jit(v.signature, cache=True,
                    launch_bounds=(v.config.threads, v.config.min_blocks))(fn)


def compile_variant(variant):
    """Compile a variant (into numba's on-disk cache off the simulator); safe to call in a
    spawned child process, so a parent can compile many variants in parallel first."""
    v = _variant(variant)
    kern = tensorcore_kernel(v)
    from gemm._env import simulator_active
    if not simulator_active():
        kern.compile(v.signature)


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
    k = _plan(v)
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


# --- the call ----------------------------------------------------------------------------------

# 16-bit integer arrays holding bfloat16/float16 bits (CuPy and numba name them by typestr)
RAW16 = ("uint16", "int16", "<u2", "<i2")
_SCALARS = ("uint32",) * 6 + ("float32",) * 2
_TYPED = {"bfloat16": "bfloat16", "float16": "float16", "float32": "tfloat32"}


# The kernel's arrays are 1-D C-contiguous: numba indexes them with the static element size
# of their type, so the Launcher's one (4-byte) itemsize field is harmless for 16-bit arrays.
_launchers = {}


def _launcher(v):
    launch = _launchers.get(v)
    if launch is None:
        from gemm._env import simulator_active
        kern = tensorcore_kernel(v)
        if not simulator_active():
            kern.compile(v.signature)
            if v.config.shared_bytes > STATIC_SHARED_LIMIT:
                from gemm.arch.smem import allow_dynamic_shared
                allow_dynamic_shared(kern, v.config.shared_bytes)
        launch = _launchers[v] = Launcher(kern, 3, 4, _SCALARS, free_scalars=2)
    return launch


def _vector(op, ld, other_extent, elem_bytes, top):
    """Elements per copy along the operand's contiguous axis that its address and leading
    dimension allow (the leading dimension does not matter when there is one line)."""
    for v in (8, 4, 2):
        if v <= top and op.ptr % (v * elem_bytes) == 0 and (ld % v == 0 or other_extent == 1):
            return v
    return 1


class _Call:
    """A checked call: the variant, the kernel's operands and scalars, and the grid."""

    def __init__(self, A, B, out, alpha, beta, config, out_dtype, caller):
        from gemm._env import simulator_active
        sim = self.sim = simulator_active()
        if config is not None and not isinstance(config, TensorCoreConfig):
            raise TypeError(f"{caller}: config must be a TensorCoreConfig, got {config!r}")
        for name, x in (("alpha", alpha), ("beta", beta)):
            if not isinstance(x, (int, float, np.floating, np.integer)) or isinstance(x, bool):
                raise TypeError(f"{caller}: {name} must be a real number, got {x!r}")
        a, b = operand(A, "A", sim, caller), operand(B, "B", sim, caller)
        (m, k), (k2, n) = a.shape, b.shape
        if k != k2:
            raise ValueError(f"{caller}: inner dimensions differ: A is {a.shape}, B is {b.shape}")
        dtype = self._dtype(a, b, config or _with_dtype(None, "bfloat16"), caller)
        config = _with_dtype(config, dtype)
        stored = out_dtype = out_dtype or None
        if out is not None:         # a 16-bit integer out holds the bits of out_dtype
            stored = operand(out, "out", sim, caller).dtype
            if not (stored in RAW16 and out_dtype in ("bfloat16", "float16")):
                if out_dtype is not None and out_dtype != stored:
                    raise ValueError(f"{caller}: out_dtype={out_dtype!r} but out is {stored}")
                out_dtype = stored
        out_dtype = out_dtype or "float32"
        if out_dtype not in OUT_DTYPES:
            raise TypeError(f"{caller}: out has dtype {out_dtype}; supported: "
                            f"{', '.join(OUT_DTYPES)} (or 16-bit integers with out_dtype)")
        self.out, c = output_operand(caller, out, a, (m, n), sim, dtype=stored or out_dtype,
                                     beta=beta)
        named = (("A", a), ("B", b), ("out", c))
        check_same_device(caller, named)
        check_spans(caller, named, limit=2 ** 31)
        # the kernel's X (MM, K) and Y (NN, K), each K-major (K the unit stride) or MN-major
        eb = config.element_bytes

        def side(op, k_mode, extent):
            kmajor = op.unit_mode == k_mode
            ld = op.strides[1 - op.unit_mode]
            lines = extent if kmajor else k          # rows of the contiguous axis
            return "K" if kmajor else "MN", ld, _vector(op, ld, lines, eb, 16 // eb)

        if c.unit_mode == 1:       # out row-major: C = A B
            (xmaj, ldx, vx), (ymaj, ldy, vy) = side(a, 1, m), side(b, 0, n)
            self.ops, self.swapped, mm, nn, ldc = (a, b, c), False, m, n, c.strides[0]
        else:                      # out column-major: C^T = B^T A^T
            (xmaj, ldx, vx), (ymaj, ldy, vy) = side(b, 0, n), side(a, 1, m)
            self.ops, self.swapped, mm, nn, ldc = (b, a, c), True, n, m, c.strides[1]
        ve = 4 if out_dtype == "float32" else 8
        vc = c.ptr % 16 == 0 and (ldc % ve == 0 or mm == 1)
        self.variant = Variant(config, xmaj, ymaj, out_dtype, vx, vy, vc)
        self.scalars = (mm, nn, k, ldx, ldy, ldc, float(alpha), float(beta))
        self.grid = (-(-mm // config.bM), -(-nn // config.bN), 1)
        if self.grid[1] > 65535:
            raise ValueError(f"{caller}: {self.grid[1]} column blocks exceed the grid limit")
        self.stream_of = a

    @staticmethod
    def _dtype(a, b, config, caller):
        typed = set()
        for name, op in (("A", a), ("B", b)):
            if op.dtype in _TYPED:
                typed.add(_TYPED[op.dtype])
            elif op.dtype not in RAW16:
                raise TypeError(f"{caller}: {name} has dtype {op.dtype}; supported: bfloat16, "
                                "float16, float32 (as tf32), or 16-bit integers holding "
                                "bfloat16/float16 bits")
        if len(typed) > 1 or (typed == {"tfloat32"} and {a.dtype, b.dtype} & set(RAW16)):
            raise TypeError(f"{caller}: A is {a.dtype} and B is {b.dtype}; they must match")
        if typed:
            return typed.pop()
        if config.dtype == "tfloat32":
            raise TypeError(f"{caller}: 16-bit integer operands hold bfloat16 or float16 bits; "
                            "config.dtype is tfloat32")
        return config.dtype


@lru_cache(maxsize=256)
def _with_dtype(config, dtype):
    """``config`` for operands of ``dtype`` (None: the default config); cached, since building
    a config checks every copy layout it allows."""
    return TensorCoreConfig(dtype=dtype) if config is None else replace(config, dtype=dtype)


def plan_call(A, B, out=None, *, config=None, out_dtype=None):
    """The :class:`Variant` a call with these arguments compiles (hashable and picklable; see
    :func:`compile_variant`). Checks the arguments like :func:`tensorcore_matmul`."""
    return _Call(A, B, out, 1.0, 0.0, config, out_dtype, "plan_call").variant


def tensorcore_matmul(A, B, out=None, *, alpha=1.0, beta=0.0, config=None, out_dtype=None):
    """``out = alpha * A @ B + beta * out`` on the tensor cores.

    ``A`` (M, K) and ``B`` (K, N): CUDA arrays (numba device arrays, CuPy arrays, torch
    tensors), each with one unit stride (row- or column-major), of bfloat16 or float16, or
    raw 16-bit integer arrays holding their bits (then ``config.dtype`` says which), or
    float32 (multiplied as tf32: each operand rounded to 10 mantissa bits, f32 accumulate).
    ``out``: (M, N) float32, bfloat16 or float16, row- or column-major; None makes a
    row-major one of ``out_dtype`` (default float32; ``beta`` must then be 0). ``config``: a
    :class:`TensorCoreConfig` (None: ``TensorCoreConfig(dtype=<the operands' type>)``,
    256x128 tiles of 128-byte K rows, 4x2 warps, 3 stages; a config's dtype is replaced by
    the operands'). Returns ``out``.
    """
    return launch_matmul(A, B, out, alpha, beta, config, out_dtype, "tensorcore_matmul")[0]


def launch_matmul(A, B, out, alpha, beta, config, out_dtype, caller):
    """:func:`tensorcore_matmul` for callers that repeat a call: returns ``(out, plan)``, where
    ``plan(addresses, stream, alpha, beta)`` launches the same kernel again on operands of the
    same shapes, strides, types and 16-byte alignment at the device ``addresses`` of A, B and
    out (None in the simulator)."""
    call = _Call(A, B, out, alpha, beta, config, out_dtype, caller)
    v = call.variant
    launch = _launcher(v)
    x, y, c = call.ops
    ab = np.float32 if v.config.dtype == "tfloat32" else np.uint16
    cd = np.float32 if v.out_dtype == "float32" else np.uint16
    bound = launch(call.grid, (v.config.threads, 1, 1),
                   0 if call.sim else current_stream(call.stream_of),
                   (kernel_buffer(x, ab), kernel_buffer(y, ab), kernel_buffer(c, cd)),
                   call.scalars, v.config.shared_bytes)
    if bound is None:
        return call.out, None
    if call.swapped:            # the kernel computes C^T = B^T A^T: X is B, Y is A
        def plan(addresses, stream, alpha, beta):
            a, b, c = addresses
            bound((b, a, c), stream, alpha, beta)
        return call.out, plan
    return call.out, bound
