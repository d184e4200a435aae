"""A tensor-core GEMM generated from layoutalg's tiled copies and tiled MMAs (bf16 / f16 in,
f32 accumulate, f32 out).

``out = alpha * A @ B + beta * out`` with A (M, K) and B (K, N) both K-contiguous ("TN": A
row-major, B the transposed view of an (N, K) row-major matrix) and ``out`` (M, N) f32.

The kernel is described in CuTe's vocabulary, like :mod:`gemm.simt`, over tensors whose
engines are sympy expressions of the thread index ``t``, the block indices and the run-time
strides:

- the MMA: ``make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN (or F16), warps, permutation
  (16 wm, 16 wn, 16))``: each warp owns 16 columns of every 16*wn-column slab of N, so B's
  fragments come two n8 blocks at a time;
- shared memory: per stage a (bMN, bK) K-major tile composed with ``Swizzle(log2(bK/8), 3, 3)``
  (``Sw<2,3,3>`` for 32-element rows, CuTe's ``Sw<3,3,3>`` for 64): the 16-byte chunk index
  of a row is XORed with row bits, so the eight 16-byte rows of an ldmatrix phase and the
  eight 16-byte cp.async stores of a phase fall into eight different bank groups
  (:func:`bank_conflicts` counts them);
- global -> shared: ``make_tiled_copy`` of the cp.async atom (16 bytes when alignment
  allows, else 8 or 4, else plain 2-byte copies), predicated through identity tensors with
  cp.async's zero-fill;
- shared -> registers: ``make_tiled_copy_A/B(SM75_U32x4_LDSM_N, mma)``: ldmatrix x4, the
  registers placed in the MMA fragments through ``retile_D``;
- an N-stage cp.async ring (``stages`` 2..6, see :data:`LOOP` and :func:`ring_schedule`) and
  register fragments double-buffered over the k-blocks of a k-tile (k-block kb + 1 is loaded
  while kb is multiplied, across k-tile boundaries too);
- epilogue: alpha/beta, masked direct stores from the accumulator fragments.

Why not :func:`gemm.pipeline.emit_pipeline`: it allocates static shared arrays (at most
48 KiB: three stages of a 128x128x32 bf16 tile), while 4..6 stages need dynamic shared memory
above 48 KiB; and it places the wait + syncthreads of a step at the top of that step, so a
body cannot prefetch the next step's first k-block into registers before the last MMAs of the
current step. The ring here commits one cp.async group per k-tile, empty or not, so the wait
count is ``stages - 2`` everywhere, the drain included (an empty group completes at once; see
:func:`ring_schedule`, whose checker is the test of this bookkeeping).

Every offset is uint32 code; swizzled shared offsets are computed once per thread
(``sw(base)``) and each access adds or XORs a constant when that is exact for every thread
(checked at generation), else swizzles at run time. Fragments are named scalars (no local
memory).
"""

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy

from layoutalg import ComposedLayout, Layout, Swizzle, product
from layoutalg.atom import (SM75_U32x4_LDSM_N, SM80_16x8x16_F32BF16BF16F32_TN,
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

__all__ = ["TensorCoreConfig", "DTYPES", "SIGNATURE", "LOOP", "smem_layout", "tensorcore_source",
           "tensorcore_function", "tensorcore_kernel", "tensorcore_matmul", "bank_conflicts",
           "ring_schedule", "check_ring"]

DTYPES = ("bfloat16", "float16")
_MMA = {"bfloat16": (SM80_16x8x16_F32BF16BF16F32_TN, "mma_m16n8k16_f32_bf16"),
        "float16": (SM80_16x8x16_F32F16F16F32_TN, "mma_m16n8k16_f32_f16")}
LDA, LDB, LDC = sym("lda"), sym("ldb"), sym("ldc")
SIGNATURE = ("void(uint16[::1], uint16[::1], float32[::1], "
             + ", ".join(["uint32"] * 6) + ", float32, float32)")


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class TensorCoreConfig:
    """One tensor-core kernel: block tile (bM, bN, bK), warp layout (wm, wn), cp.async ring
    ``stages`` (2..6), operand ``dtype`` ("bfloat16" or "float16"; raw 16-bit arrays are
    read as this type), ``min_blocks`` (launch bounds: blocks per SM the registers must allow).

    >>> cfg = TensorCoreConfig()
    >>> cfg.threads, cfg.shared_bytes, str(smem_layout(cfg, cfg.bM).outer)
    (128, 49152, 'Sw<2,3,3>')
    """

    bM: int = 128
    bN: int = 128
    bK: int = 32
    warps: tuple = (2, 2)
    stages: int = 3
    dtype: str = "bfloat16"
    min_blocks: int = 1

    def __post_init__(self):
        for name in ("bM", "bN", "bK", "stages", "min_blocks"):
            v = getattr(self, name)
            if not (_is_int(v) and v >= 1):
                raise ValueError(f"TensorCoreConfig: {name} must be a positive int, got {v!r}")
        w = self.warps
        if not (isinstance(w, tuple) and len(w) == 2 and all(_is_int(x) and x >= 1 for x in w)):
            raise ValueError(f"TensorCoreConfig: warps must be a pair of positive ints, got {w!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"TensorCoreConfig: dtype must be one of {DTYPES}, got "
                             f"{self.dtype!r}")
        if not 2 <= self.stages <= 6:
            raise ValueError(f"TensorCoreConfig: stages must be in 2..6, got {self.stages}")
        if self.bK not in (32, 64):
            raise ValueError(f"TensorCoreConfig: bK must be 32 or 64 (an even number of "
                             f"16-deep k-blocks, 16-byte swizzle chunks), got {self.bK}")
        wm, wn = w
        if self.bM % (16 * wm) or self.bN % (16 * wn):
            raise ValueError(f"TensorCoreConfig: bM={self.bM} must be a multiple of 16*wm="
                             f"{16 * wm} and bN={self.bN} of 16*wn={16 * wn} (m16n8k16 atoms, "
                             "ldmatrix x4 covering two n8 blocks)")
        if self.threads > 1024:
            raise ValueError(f"TensorCoreConfig: {self.threads} threads exceed 1024")
        chunks = self.bK // 8
        if self.threads % chunks:
            raise ValueError("TensorCoreConfig: threads must be a multiple of bK/8")
        rows = self.threads // chunks
        if self.bM % rows or self.bN % rows:
            raise ValueError(f"TensorCoreConfig: bM and bN must be multiples of {rows} (the rows "
                             f"{self.threads} threads copy per pass)")

    @property
    def threads(self):
        return 32 * self.warps[0] * self.warps[1]

    @property
    def shared_bytes(self):
        return 2 * self.stages * (self.bM + self.bN) * self.bK


def smem_layout(cfg, bmn):
    """The shared tile of one stage: (bmn, bK) K-major composed with Swizzle(log2(bK/8), 3, 3)."""
    return ComposedLayout(Swizzle(int(math.log2(cfg.bK // 8)), 3, 3), 0,
                          Layout((bmn, cfg.bK), (cfg.bK, 1)))


# --- the ring ----------------------------------------------------------------------------------
# The k-tile loop, one iteration per k-tile kt, as operations on k-blocks kb (emitted unrolled):
#   before the loop: prologue issue of k-tiles 0..stages-2 (one commit each, empty or not),
#                    wait(stages-2), sync, load k-block 0 of k-tile 0
#   per kb:  [kb == last: wait(stages-2), sync, advance read slot]
#            [kb == 0: issue k-tile kt+stages-1 into the write slot (if it exists), commit]
#            load k-block kb+1 (of k-tile kt+1 when kb is the last)
#            mma k-block kb
LOOP = ("wait", "sync", "advance", "issue", "load", "mma")


def ring_schedule(stages, k_tiles, k_blocks=2):
    """The events of the ring for ``k_tiles`` k-tiles, in program order of one thread:
    ("issue", kt, slot), ("commit",), ("wait", n), ("sync",), ("read", kt, kb, slot),
    ("mma", kt, kb). ``read`` of a k-tile >= k_tiles is the harmless prefetch past the end."""
    ev = []
    for s in range(stages - 1):
        if s < k_tiles:
            ev.append(("issue", s, s % stages))
        ev.append(("commit",))
    ev += [("wait", stages - 2), ("sync",), ("read", 0, 0, 0)]
    rs, ws = 0, stages - 1
    for kt in range(k_tiles):
        for kb in range(k_blocks):
            last = kb == k_blocks - 1
            if last:
                ev += [("wait", stages - 2), ("sync",)]
                rs = (rs + 1) % stages
            if kb == 0:
                kn = kt + stages - 1
                if kn < k_tiles:
                    ev.append(("issue", kn, ws))
                ev.append(("commit",))
                ws = (ws + 1) % stages
            nt, nb = (kt + 1, 0) if last else (kt, kb + 1)
            ev.append(("read", nt, nb, rs))
            ev.append(("mma", kt, kb))
    return ev


def check_ring(events, k_tiles):
    """Check a schedule with cp.async's semantics: ``wait n`` completes all but the newest n
    groups; a read needs its k-tile's copies complete, issued into the slot read, and no other
    k-tile issued there since; a copy into a slot must come after a sync that follows every
    read of the k-tile it overwrites (other threads may lag until that sync). Returns a list
    of violations (empty when correct)."""
    groups, pending, landed = [], [], set()   # groups: list of k-tiles per committed group
    open_group, slot_of, bad = [], {}, []
    last_read, last_sync = {}, -1
    for i, e in enumerate(events):
        kind = e[0]
        if kind == "issue":
            _, kt, slot = e
            for other, s in slot_of.items():
                if s == slot and last_read.get(other, -1) > last_sync:
                    bad.append(f"event {i}: k-tile {kt} overwrites slot {slot} of k-tile "
                               f"{other} before a sync after its last read")
            slot_of = {k: s for k, s in slot_of.items() if s != slot}
            slot_of[kt] = slot
            open_group.append(kt)
        elif kind == "commit":
            groups.append(list(open_group))
            pending.append(len(groups) - 1)
            open_group = []
        elif kind == "wait":
            n = e[1]
            done = pending[:len(pending) - n] if n else pending
            for g in done:
                landed.update(groups[g])
            pending = pending[len(pending) - n:] if n else []
        elif kind == "sync":
            last_sync = i
        elif kind == "read":
            _, kt, kb, slot = e
            if kt >= k_tiles:
                continue
            if kt not in landed:
                bad.append(f"event {i}: k-tile {kt} read before its copies completed")
            if slot_of.get(kt) != slot:
                bad.append(f"event {i}: k-tile {kt} read from slot {slot}, it is in "
                           f"{slot_of.get(kt)}")
            last_read[kt] = i
    if open_group:
        bad.append("copies left in an uncommitted group")
    return bad


# --- the generator -----------------------------------------------------------------------------

def _swizzle_int(sw, x):
    return sw(int(x))


def _thread_values(expr, threads):
    f = sympy.lambdify(T, expr, "math")
    return [int(f(t)) for t in range(threads)]


class _Swizzled:
    """Shared offsets ``sw(base(t) + c)``: the base swizzled once per thread (as ``name``), each
    constant classified as additive, XOR or run-time, checked over every thread."""

    def __init__(self, sw, name, base, threads):
        self.sw, self.name, self.base = sw, name, base
        self.values = _thread_values(base, threads) if base.free_symbols else [int(base)] * threads

    def decl(self):
        b = code(self.base)
        return f"{self.name} = {self._swz(b)}"

    def _swz(self, x):
        sw = self.sw
        return f"(({x}) ^ ((({x}) & U({sw.yyy_mask})) >> U({sw.shift})))"

    def at(self, c):
        c = int(c)
        sw, vals = self.sw, self.values
        if all(sw(b + c) == sw(b) + c for b in vals):
            return f"({self.name} + U({c}))" if c else self.name
        if all(sw(b + c) == sw(b) ^ c for b in vals):
            return f"({self.name} ^ U({c}))"
        return self._swz(f"{code(self.base)} + U({c})")   # pragma: no cover - not for our tiles


class _Copy:
    """Global -> shared copies of one operand (A: bMN = bM over M, B: bN over N)."""

    def __init__(self, cfg, name, bmn, block, ld, vec):
        self.name, self.p, self.bmn, self.vec = name, name.lower(), bmn, vec
        chunks = cfg.bK // vec
        thr = Layout((cfg.threads // chunks, chunks), (chunks, 1))
        if vec == 8:
            atom = SM80_CP_ASYNC_CACHEGLOBAL(16, 16)
        elif vec > 1:
            atom = SM80_CP_ASYNC_CACHEALWAYS(2 * vec, 16)
        else:
            atom = UniversalCopy(16, 16)
        tiled = make_tiled_copy(atom, thr, Layout((1, vec)))
        thr_copy = tiled.get_slice(T)
        KT = sym("kt")
        gX = local_tile(global_tensor(ld, 1, bmn, cfg.bK), (bmn, cfg.bK), (block, None))
        cX = local_tile(make_identity_tensor((bmn * NOMINAL_TILES, cfg.bK * NOMINAL_TILES)),
                        (bmn, cfg.bK), (block, None))
        sX = make_tensor(sympy.Integer(0), smem_layout(cfg, bmn).inner)
        self.src = split_offsets(element_offsets(thr_copy.partition_S(gX), KT), [KT])
        self.coords = element_coords(thr_copy.partition_S(cX), KT)
        self.dst = split_offsets(element_offsets(thr_copy.partition_D(sX)))
        self.sw = _Swizzled(smem_layout(cfg, bmn).outer, f"{self.p}_s", self.dst[0], cfg.threads)
        self.kstep = sympy.expand(self.src[1]).coeff(KT)
        self.bK = cfg.bK

    def decls(self, src):
        p = self.p
        first = next(iter(self.coords))
        zero = (0,) * len(first)
        c0 = self.coords[zero]
        src(f"{p}_g = {code(self.src[0])}", self.sw.decl(),
            f"{p}_cm = {code(c0[0])}", f"{p}_ck = {code(sympy.expand(c0[1]).subs(sym('kt'), 0))}")

    def issue(self, src, kt, slot_base, ext):
        """Lines copying k-tile ``kt`` (a name) to the stage at shared offset ``slot_base``."""
        p, v = self.p, self.vec
        zero = (0,) * len(next(iter(self.coords)))
        m0, k0 = self.coords[zero]
        src(f"{p}_kk = {p}_ck + {kt} * U({self.bK})",
            f"{p}_gk = {p}_g + {kt} * U({int(self.kstep)})")
        for crd, rest in self.src[2].items():
            if crd[0] != 0:
                continue                  # one instruction moves the whole vector
            mn, k = self.coords[crd]
            dm, dk = sympy.expand(mn - m0), sympy.expand(k - k0)
            dst = self.sw.at(self.dst[2][crd])
            src(f"mn = {p}_cm + {code(dm)}", f"kk = {p}_kk + {code(dk)}")
            if v == 1:
                src(f"if mn < {ext} and kk < K:",
                    f"    sm[{slot_base} + {dst}] = {self.name}[{p}_gk + {code(rest)}]",
                    "else:",
                    f"    sm[{slot_base} + {dst}] = Z16")
            else:
                kind = "cg" if v == 8 else "ca"
                src(f"nb = (min(U({v}), K - min(kk, K)) * U(2)) if mn < {ext} else U(0)",
                    f"si = ({p}_gk + {code(rest)}) if nb != U(0) else U(0)",
                    f"cp_async_{kind}_zfill(sm, {slot_base} + {dst}, {self.name}, si, "
                    f"{2 * v}, nb)")


class _Ldsm:
    """Shared -> register copies of one operand through ldmatrix x4 and the MMA fragment."""

    def __init__(self, cfg, which, mma, bmn):
        self.which = which
        p = which.lower()
        sX = make_tensor(sympy.Integer(0), smem_layout(cfg, bmn).inner)
        tiled = (make_tiled_copy_A if which == "A" else make_tiled_copy_B)(
            SM75_U32x4_LDSM_N(16), mma)
        thr = tiled.get_slice(T)
        thr_mma = mma.get_slice(T)
        frag = (thr_mma.partition_fragment_A if which == "A" else
                thr_mma.partition_fragment_B)(sX)
        self.frag = frag.layout
        src = split_offsets(element_offsets(thr.partition_S(sX)))
        self.sw = _Swizzled(smem_layout(cfg, bmn).outer, f"l{p}", src[0], cfg.threads)
        self.rest = src[2]
        retile = thr.retile_D(frag).layout
        shape = retile.shape
        self.n_mn, self.n_k = product(shape[1]), product(shape[2])
        vals = product(self.frag.shape[0])
        self.vals, self.mma_mn = vals, product(self.frag.shape[1])
        self.loads = {}       # kb -> [(src const, (reg names x4))]
        for kb in range(self.n_k):
            out = []
            for i in range(self.n_mn):
                regs = []
                for r in range(4):
                    lo, hi = retile((2 * r, i, kb)), retile((2 * r + 1, i, kb))
                    if hi != lo + 1 or lo % 2:
                        raise AssertionError(f"ldmatrix register {r} of {which} does not fill "
                                             f"one fragment register ({lo}, {hi})")
                    regs.append(self.reg(lo, kb))
                out.append((self.rest[(0, i, kb)], tuple(regs)))
            self.loads[kb] = out

    def reg(self, offset, kb):
        """Name of the fragment register holding fragment offset ``offset`` (and offset+1) of
        k-block kb, in register slot kb % 2."""
        o0 = self.frag((0, 0, kb))
        span = self.vals * self.mma_mn
        rel = offset - o0
        if not 0 <= rel < span:
            raise AssertionError(f"fragment {self.which} offsets of k-block {kb} are not compact")
        return f"{self.which.lower()}{rel // 2}_{kb % 2}"

    def operand(self, idx, kb):
        """Register names of MMA operand ``idx`` (M or N block) in k-block kb."""
        return [self.reg(self.frag((v, idx, kb)), kb) for v in range(0, self.vals, 2)]


class _Kernel:
    """Everything the source needs, computed once per (config, vectors)."""

    def __init__(self, cfg, vec_a, vec_b):
        self.cfg = cfg
        atom, self.mma_fn = _MMA[cfg.dtype]
        wm, wn = cfg.warps
        self.mma = make_tiled_mma(atom(), Layout((wm, wn, 1)), (16 * wm, 16 * wn, 16))
        self.a = _Copy(cfg, "A", cfg.bM, BX, LDA, vec_a)
        self.b = _Copy(cfg, "B", cfg.bN, BY, LDB, vec_b)
        self.la = _Ldsm(cfg, "A", self.mma, cfg.bM)
        self.lb = _Ldsm(cfg, "B", self.mma, cfg.bN)
        if self.la.n_k != self.lb.n_k or self.la.n_k != cfg.bK // 16:
            raise AssertionError("A and B k-blocks differ")
        thr = self.mma.get_slice(T)
        gC = local_tile(global_tensor(LDC, 1, cfg.bM, cfg.bN), (cfg.bM, cfg.bN), (BX, BY))
        cC = local_tile(make_identity_tensor((cfg.bM * NOMINAL_TILES, cfg.bN * NOMINAL_TILES)),
                        (cfg.bM, cfg.bN), (BX, BY))
        pc = thr.partition_C(gC)
        self.c = split_offsets(element_offsets(pc))
        self.c_coords = element_coords(thr.partition_C(cC))
        self.fragC = thr.partition_fragment_C(gC).layout
        shape = pc.layout.shape
        self.mma_m, self.mma_n = product(shape[1]), product(shape[2])
        self.slot_a, self.slot_b = cfg.bM * cfg.bK, cfg.bN * cfg.bK
        dom = smem_layout(cfg, cfg.bM).outer.domain_size
        if self.slot_a % dom or self.slot_b % dom:
            raise AssertionError("stage size is not a multiple of the swizzle domain")
        self.b_base = cfg.stages * self.slot_a


def _emit(k, simulator):
    cfg = k.cfg
    src = Source()
    KB = cfg.bK // 16
    src("import numpy as np",
        "from numba import cuda, float32, uint16",
        "from gemm.arch import (cp_async_ca_zfill, cp_async_cg_zfill, cp_async_commit,",
        f"                       cp_async_wait, ldmatrix_x4, {k.mma_fn})",
        "U = np.uint32",
        "Z16 = np.uint16(0)",
        f"# {cfg}, A vector {k.a.vec}, B vector {k.b.vec}",
        "")
    with src.block("def kernel(A, B, C, M, N, K, lda, ldb, ldc, alpha, beta):"):
        src("t = U(cuda.threadIdx.x)", "bx = U(cuda.blockIdx.x)", "by = U(cuda.blockIdx.y)",
            "sm = cuda.shared.array(0, uint16)",
            f"KT = (K + U({cfg.bK - 1})) // U({cfg.bK})")
        k.a.decls(src)
        k.b.decls(src)
        src(k.la.sw.decl(), k.lb.sw.decl())
        n_acc = k.fragC.cosize
        for r in range(0, n_acc, 8):
            names = [f"c{x}" for x in range(r, min(r + 8, n_acc))]
            src(", ".join(names) + " = " + ", ".join("float32(0)" for _ in names))

        def issue(kt, slot):
            k.a.issue(src, kt, f"{slot} * U({k.slot_a})", "M")
            k.b.issue(src, kt, f"U({k.b_base}) + {slot} * U({k.slot_b})", "N")

        def load(kb):
            for ld, base in ((k.la, "ra"), (k.lb, "rb")):
                for const, regs in ld.loads[kb]:
                    src(f"{', '.join(regs)} = ldmatrix_x4(sm, {base} + {ld.sw.at(const)})")

        def mma(kb):
            for i in range(k.mma_m):
                js = range(k.mma_n) if i % 2 == 0 else reversed(range(k.mma_n))
                for j in js:
                    a = k.la.operand(i, kb)
                    b = k.lb.operand(j, kb)
                    c = [f"c{k.fragC((v, i, j))}" for v in range(4)]
                    src(f"{', '.join(c)} = {k.mma_fn}({', '.join(a + b + c)})")

        src("# prologue: k-tiles 0..stages-2, one group each")
        for s in range(cfg.stages - 1):
            src(f"kn = U({s})")
            with src.block("if kn < KT:"):
                issue("kn", f"U({s})")
            src("cp_async_commit()")
        src(f"cp_async_wait({cfg.stages - 2})", "cuda.syncthreads()",
            "rs = U(0)", f"ws = U({cfg.stages - 1})", "ra = U(0)", f"rb = U({k.b_base})")
        load(0)
        src("kt = U(0)")
        with src.block("while kt < KT:"):
            for kb in range(KB):
                src(f"# k-block {kb}")
                if kb == KB - 1:
                    src(f"cp_async_wait({cfg.stages - 2})", "cuda.syncthreads()",
                        f"rs = rs + U(1) if rs != U({cfg.stages - 1}) else U(0)",
                        f"ra = rs * U({k.slot_a})", f"rb = U({k.b_base}) + rs * U({k.slot_b})")
                if kb == 0:
                    src(f"kn = kt + U({cfg.stages - 1})")
                    with src.block("if kn < KT:"):
                        issue("kn", "ws")
                    src("cp_async_commit()",
                        f"ws = ws + U(1) if ws != U({cfg.stages - 1}) else U(0)")
                load((kb + 1) % KB)
                mma(kb)
            src("kt += U(1)")
        src("cp_async_wait(0)")
        _epilogue(src, k)
    return src.text()


def _epilogue(src, k):
    """``alpha * acc + beta * C`` stored to the in-bounds elements of the block's C tile."""
    base, _, rest = k.c
    coords = k.c_coords
    zero = (0, 0, 0)
    m0, n0 = coords[zero]
    src(f"cg = {code(base)}", f"cm = {code(m0)}", f"cn = {code(n0)}")
    rows, cols = set(), set()
    items = []
    for crd, off in rest.items():
        r = int(sympy.expand(coords[crd][0] - m0))
        c = int(sympy.expand(coords[crd][1] - n0))
        rows.add(r)
        cols.add(c)
        items.append((crd, off, r, c))
    for r in sorted(rows):
        src(f"rok{r} = cm + U({r}) < M")
    for c in sorted(cols):
        src(f"cok{c} = cn + U({c}) < N")
    src("nz = beta != float32(0)")
    for crd, off, r, c in items:
        at = f"C[cg + {code(off)}]"
        src(f"if rok{r} and cok{c}:",
            f"    {at} = alpha * c{k.fragC(crd)} + (beta * {at} if nz else float32(0))")


@lru_cache(maxsize=None)
def _plan(cfg, vec_a, vec_b):
    return _Kernel(cfg, vec_a, vec_b)


def tensorcore_source(cfg, vec_a=8, vec_b=8, simulator=False):
    """The numba source of the kernel. ``vec_a``/``vec_b``: elements per global -> shared copy
    (8: 16-byte cp.async.cg, 4 or 2: cp.async.ca, 1: plain loads), which the operand's
    address and leading dimension must be aligned to."""
    for v in (vec_a, vec_b):
        if v not in (1, 2, 4, 8):
            raise ValueError(f"tensorcore_source: vectors must be 1, 2, 4 or 8, got {v!r}")
    return _emit(_plan(cfg, vec_a, vec_b), simulator)


def tensorcore_function(cfg, vec_a=8, vec_b=8):
    """The generated kernel as a plain Python function (for ``compile_ptx``)."""
    from gemm._env import simulator_active
    return load_module(tensorcore_source(cfg, vec_a, vec_b, simulator_active()),
                       "tensorcore").kernel


@lru_cache(maxsize=None)
def tensorcore_kernel(cfg, vec_a=8, vec_b=8):
    """The kernel compiled for :data:`SIGNATURE` (numba's on-disk cache off the simulator)."""
    from numba import cuda
    from gemm._env import simulator_active
    fn = tensorcore_function(cfg, vec_a, vec_b)
    if simulator_active():
        return cuda.jit(SIGNATURE)(fn)
    return cuda.jit(SIGNATURE, cache=True,
                    launch_bounds=(cfg.threads, cfg.min_blocks))(fn)


# --- bank conflicts ----------------------------------------------------------------------------

def bank_conflicts(cfg, swizzle=True):
    """Worst number of shared-memory wavefronts per 8-thread phase of the kernel's 16-byte
    accesses (1 = conflict-free): {"cp.async A", "cp.async B", "ldmatrix A", "ldmatrix B"}.

    A 16-byte access per thread is served a quarter-warp (8 threads, 128 bytes) at a time; a
    phase needs as many wavefronts as the largest number of distinct 16-byte-aligned
    addresses that fall on one group of four banks. ``swizzle=False`` counts the same
    accesses on the plain K-major tile (to show what the swizzle buys).
    """
    k = _plan(cfg, 8, 8)
    out = {}

    def worst(addresses):       # addresses: element offsets, one per thread of the phase
        groups = {}
        for a in addresses:
            byte = 2 * a
            groups.setdefault((byte // 16) % 8, set()).add(byte // 16)
        return max(len(s) for s in groups.values())

    def sw_of(sw):
        return sw if swizzle else (lambda x: x)

    for name, cp in (("cp.async A", k.a), ("cp.async B", k.b)):
        sw = sw_of(cp.sw.sw)
        consts = [c for crd, c in cp.dst[2].items() if crd[0] == 0]
        w = 1
        for c in consts:
            addrs = [sw(b + int(c)) for b in cp.sw.values]
            for ph in range(0, cfg.threads, 8):
                w = max(w, worst(addrs[ph:ph + 8]))
        out[name] = w
    for name, ld in (("ldmatrix A", k.la), ("ldmatrix B", k.lb)):
        sw = sw_of(ld.sw.sw)
        w = 1
        for kb, loads in ld.loads.items():
            for c, _ in loads:
                addrs = [sw(b + int(c)) for b in ld.sw.values]
                for ph in range(0, cfg.threads, 8):
                    w = max(w, worst(addrs[ph:ph + 8]))
        out[name] = w
    return out


# --- the call ----------------------------------------------------------------------------------


_RAW16 = ("uint16", "int16", "<u2", "<i2")
_SCALARS = ("uint32",) * 6 + ("float32",) * 2


# The kernel's arrays are 1-D C-contiguous: numba indexes them with the static element size
# of their type, so the Launcher's one (4-byte) itemsize field is harmless for A and B.
_launchers = {}


def _launcher(cfg, va, vb):
    key = (cfg, va, vb)
    if key not in _launchers:
        from gemm._env import simulator_active
        kern = tensorcore_kernel(cfg, va, vb)
        if not simulator_active():
            kern.compile(SIGNATURE)
            if cfg.shared_bytes > 48 * 1024:
                from gemm.arch.smem import allow_dynamic_shared
                allow_dynamic_shared(kern, cfg.shared_bytes)
        _launchers[key] = Launcher(kern, 3, 4, _SCALARS)
    return _launchers[key]


def _vector(ptr, ld, rows):
    if rows == 1:
        ld = 8 * ld
    for v in (8, 4, 2):
        if ptr % (2 * v) == 0 and ld % v == 0:
            return v
    return 1


def tensorcore_matmul(A, B, out=None, *, alpha=1.0, beta=0.0, config=None):
    """``out = alpha * A @ B + beta * out`` on the tensor cores.

    ``A`` (M, K) and ``B`` (K, N): CUDA arrays (numba device arrays, CuPy arrays, torch
    tensors) of bfloat16 or float16, or raw 16-bit integer arrays holding their bits (then
    ``config.dtype`` says which), both contiguous along K: A row-major, B column-major (the
    ``.T`` of an (N, K) row-major matrix). ``out``: (M, N) float32, row- or column-major;
    None makes a row-major one (``beta`` must then be 0). ``config``: a
    :class:`TensorCoreConfig` (default 128x128x32, 2x2 warps, 3 stages; its dtype is
    replaced by the operands' when they are typed). Returns ``out``.
    """
    from gemm._env import simulator_active
    sim = simulator_active()
    if config is None:
        config = TensorCoreConfig()
    if not isinstance(config, TensorCoreConfig):
        raise TypeError(f"tensorcore_matmul: config must be a TensorCoreConfig, got {config!r}")
    for name, x in (("alpha", alpha), ("beta", beta)):
        if not isinstance(x, (int, float, np.floating, np.integer)) or isinstance(x, bool):
            raise TypeError(f"tensorcore_matmul: {name} must be a real number, got {x!r}")
    caller = "tensorcore_matmul"
    a, b = operand(A, "A", sim, caller), operand(B, "B", sim, caller)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"tensorcore_matmul: inner dimensions differ: A is {a.shape}, "
                         f"B is {b.shape}")
    dts = set()
    for name, op in (("A", a), ("B", b)):
        if op.dtype in DTYPES:
            dts.add(op.dtype)
        elif op.dtype not in _RAW16:
            raise TypeError(f"tensorcore_matmul: {name} has dtype {op.dtype}; supported: "
                            "bfloat16, float16 (or their bits as 16-bit integers)")
    if len(dts) > 1:
        raise TypeError(f"tensorcore_matmul: A is {a.dtype} and B is {b.dtype}; they must match")
    if dts:
        (dt,) = dts
        if dt != config.dtype:
            config = TensorCoreConfig(config.bM, config.bN, config.bK, config.warps,
                                      config.stages, dt, config.min_blocks)
    if not ((a.strides[1] == 1 or k == 1) and (b.strides[0] == 1 or k == 1)):
        raise ValueError("tensorcore_matmul: A must be contiguous along K (row-major) and B "
                         "along K (column-major, e.g. the .T of an (N, K) row-major matrix); "
                         "other majors are not supported yet")
    out, c = output_operand(caller, out, a, (m, n), sim, beta=beta)
    named = (("A", a), ("B", b), ("out", c))
    check_same_device(caller, named)
    check_spans(caller, named, limit=2 ** 31)
    lda, ldb = a.strides[0], b.strides[1]
    if c.unit_mode == 1:       # out row-major: C = A B
        x, y, mm, nn, lx, ly, ldc = a, b, m, n, lda, ldb, c.strides[0]
    else:                      # out column-major: C^T = B^T A^T, both still K-contiguous
        x, y, mm, nn, lx, ly, ldc = b, a, n, m, ldb, lda, c.strides[1]
    va, vb = _vector(x.ptr, lx, mm), _vector(y.ptr, ly, nn)
    launch = _launcher(config, va, vb)
    grid = (-(-mm // config.bM), -(-nn // config.bN), 1)
    if grid[1] > 65535:
        raise ValueError(f"tensorcore_matmul: {grid[1]} column blocks exceed the grid limit")
    launch(grid, (config.threads, 1, 1), 0 if sim else current_stream(a),
           (kernel_buffer(x, np.uint16), kernel_buffer(y, np.uint16), kernel_buffer(c)),
           (mm, nn, k, lx, ly, ldc, float(alpha), float(beta)), config.shared_bytes)
    return out
