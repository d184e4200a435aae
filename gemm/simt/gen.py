"""The SIMT GEMM generator: MoYe's two pipelines (see :mod:`gemm.simt`) as numba source, from
layoutalg's tiled copies and tiled MMAs.

A kernel is described in CuTe's vocabulary (``local_tile``, ``partition_S/D``,
``partition_A/B/C``, copy, gemm) over tensors whose engines are sympy expressions of the
thread index ``t``, the block indices ``bx``, ``by``, the k-tile ``kt`` and the run-time
strides. Every per-thread access then has an offset ``base(t, bx, by) + step(kt) + constant``;
the generator emits the bases once, the steps once per k-tile, and each unrolled tile of work
(a k-block's shared -> register loads, its outer product of FMAs, the epilogue) as one
tile-level instruction of :mod:`gemm.arch.tile` whose plan holds the constants. Register
fragments are local arrays only the plans index, so the kernel has no local memory and only
uint32 index math.

Partial tiles are predicated through identity tensors: cp.async's zero-fill form reads only
the in-bounds bytes and the epilogue stores only in-bounds elements.
"""

from __future__ import annotations

from typing import Any

import sympy

from layoutalg import Layout, size
from layoutalg.atom import SM80_CP_ASYNC_CACHEALWAYS, SM80_CP_ASYNC_CACHEGLOBAL, UniversalFMA
from layoutalg.tensor import local_tile, make_identity_tensor, make_tensor
from layoutalg.tiled import make_tiled_copy, make_tiled_mma
from ..arch.tile_plan import ADD
from ..codegen import Source, align_arg, code, sym
from ..partition import (BX, BY, NOMINAL_TILES, T, element_coords, element_offsets,
                         global_tensor, split_offsets)
from .config import copy_vector

__all__ = ["simt_source"]

# Symbols of the generated kernel: thread/block indices, the k-tile, extents and strides.
KT, STAGE = sym("kt"), sym("stage")
M, N, K = sym("M"), sym("N"), sym("K")
S_AM, S_AK, S_BN, S_BK, S_CM, S_CN = (sym(n) for n in ("sAm", "sAk", "sBn", "sBk", "sCm", "sCn"))


class _Operand:
    """One of A and B: its global tile, shared tile, tiled copy and partitions."""

    def __init__(self, name, cfg, unit, vec, bmn, block, s_mn, s_k):
        self.name, self.bmn, self.bK, self.unit = name, bmn, cfg.bK, unit
        ld = bmn + cfg.pad
        stage_stride = ld * cfg.bK
        self.vec = vec = copy_vector(cfg, unit, bmn, vec)
        self.smem_size = stage_stride * cfg.stages
        self.stage_stride = stage_stride
        shape, stride = (bmn, cfg.bK), (1, ld)
        if cfg.stages > 1:
            shape, stride = shape + (cfg.stages,), stride + (stage_stride,)
        self.smem = make_tensor(sympy.Integer(0), Layout(shape, stride))
        if unit == 0:
            s_mn, self.ld = 1, s_k
        else:
            s_k, self.ld = 1, s_mn
        gX = local_tile(global_tensor(s_mn, s_k, bmn, cfg.bK), (bmn, cfg.bK), (block, None))
        cX = local_tile(make_identity_tensor((bmn * NOMINAL_TILES, cfg.bK * NOMINAL_TILES)),
                        (bmn, cfg.bK), (block, None))
        threads = cfg.threads
        if unit == 0:
            tm = bmn // vec
            thr = Layout((tm, threads // tm))
            val = Layout((vec, 1))
        else:
            tk = cfg.bK
            thr = Layout((threads // tk, tk), (tk, 1))
            val = Layout((1, 1))
        atom = (SM80_CP_ASYNC_CACHEGLOBAL(16, "float32") if vec == 4
                else SM80_CP_ASYNC_CACHEALWAYS(4 * vec, "float32"))
        self.cache = "cg" if vec == 4 else "ca"
        tiled_copy = make_tiled_copy(atom, thr, val)
        thr_copy = tiled_copy.get_slice(T)
        self.src = split_offsets(element_offsets(thr_copy.partition_S(gX), KT), [KT])
        self.coords = element_coords(thr_copy.partition_S(cX), KT)
        dst = thr_copy.partition_D(self.smem)
        stage = (STAGE,) if cfg.stages > 1 else ()
        self.dst = split_offsets(element_offsets(dst, *stage), [STAGE])


class _Mma:
    """The tiled MMA (UniversalFMA over the thread layout) and its partitions."""

    def __init__(self, cfg, a, b):
        tm, tn = cfg.mma_threads
        v = cfg.vector_mn
        perm = None
        if v > 1:
            perm = (Layout((tm, v), (v, 1)), Layout((tn, v), (v, 1)), None)
        tiled = make_tiled_mma(UniversalFMA("float32", "float32", "float32"),
                               Layout((tm, tn, 1)), perm)
        thr = tiled.get_slice(T)
        stage = (STAGE,) if cfg.stages > 1 else ()
        self.a = split_offsets(element_offsets(thr.partition_A(a.smem), *stage), [STAGE])
        self.b = split_offsets(element_offsets(thr.partition_B(b.smem), *stage), [STAGE])
        mC = global_tensor(S_CM, S_CN, cfg.bM, cfg.bN)
        gC = local_tile(mC, (cfg.bM, cfg.bN), (BX, BY))
        cC = local_tile(make_identity_tensor((cfg.bM * NOMINAL_TILES, cfg.bN * NOMINAL_TILES)),
                        (cfg.bM, cfg.bN), (BX, BY))
        self.c = split_offsets(element_offsets(thr.partition_C(gC)))
        self.c_coords = element_coords(thr.partition_C(cC))
        shape = thr.partition_C(gC).layout.shape
        self.mma_m, self.mma_n = size(shape[1]), size(shape[2])
        self.mma_k = size(thr.partition_A(a.smem).layout.shape[2])


def _copy_tile(src, op, kt, stage):
    """One cp_async_zfill_tile call: the copies of k-tile ``kt`` of operand ``op`` into
    ``stage``, each reading only its elements inside the matrix."""
    X, sX, ext_mn = op.name, "s" + op.name, ("M" if op.name == "A" else "N")
    p = op.name.lower()
    _, _, src_rest = op.src
    _, _, dst_rest = op.dst
    zero = (0,) * len(next(iter(op.coords)))
    plan = []
    for crd, rest in src_rest.items():
        if crd[0] != 0:
            continue                     # one instruction moves the whole CPY mode
        mn, k = op.coords[crd]
        rest = sympy.expand(rest)
        gl = rest.coeff(op.ld)
        g = sympy.expand(rest - gl * op.ld)
        entry = (ADD, dst_rest[crd], g, gl, sympy.expand(mn - op.coords[zero][0]),
                 sympy.expand(k - op.coords[zero][1]))
        if not all(sympy.sympify(x).is_Integer and x >= 0 for x in entry):
            raise AssertionError(f"copy {crd} of {op.name} is not constant offsets from the "
                                 f"thread's first: {entry}")
        plan.append(tuple(int(x) for x in entry))
    # along mn when a copy moves several elements (the MN-contiguous operand); one element
    # of either axis otherwise
    along = 0 if op.unit == 0 else 1
    tile = src.define(f"cp_async_zfill_tile({op.cache!r}, {4 * op.vec}, 4, {along}, "
                      f"{tuple(plan)!r})")
    src(f"{tile}({sX}, {stage}, {p}_s, {p}_s, {X}, {p}_g + {p}_gk, {op.ld.name}, {p}_cmn, "
        f"{p}_ck + {kt} * U({op.bK}), {ext_mn}, K)")


def _load_frag(src, name, parts, kb, slot, stage, mma_mn, vector):
    """A load_tile call loading k-block ``kb`` of operand fragment ``name`` from shared memory
    into registers ``slot * mma_mn ..`` of its fragment array (128-bit loads where a thread's
    values are 4 consecutive floats, else 32-bit ones)."""
    _, _, rest = parts
    plans = {"ld_v4_f32": [], "ld_f32": []}
    i = 0
    while i < mma_mn:
        offs = [rest[(0, j, kb)] for j in range(i, min(i + vector, mma_mn))]
        if vector == 4 and len(offs) == 4 and all(o - offs[0] == d for d, o in enumerate(offs)):
            plans["ld_v4_f32"].append((ADD, int(offs[0]), tuple(slot * mma_mn + i + d
                                                               for d in range(4))))
            i += 4
        else:
            plans["ld_f32"].append((ADD, int(offs[0]), (slot * mma_mn + i,)))
            i += 1
    base = f"r{name.lower()}"
    for op, plan in plans.items():
        if plan:
            tile = src.define(f"load_tile({op!r}, {tuple(plan)!r})")
            src(f"{tile}(f{name.lower()}, s{name}, {stage}, {base}, {base})")


def _fma(src, mma, slot):
    """One fma_tile call: the outer product of k-block registers ``slot`` of A and B."""
    plan = tuple((i * mma.mma_n + j, slot * mma.mma_m + i, slot * mma.mma_n + j)
                 for i in range(mma.mma_m) for j in range(mma.mma_n))
    src(f"{src.define(f'fma_tile({plan!r})')}(acc, fa, fb)")


def simt_source(cfg: Any, a_unit: int, b_unit: int, vec_a: int = 4, vec_b: int = 4,
                simulator: bool = False) -> str:
    """The numba source of the kernel for ``cfg``, A's and B's unit-stride modes (0: the
    M/N mode, 1: the K mode) and the widest cp.async each global operand allows."""
    a = _Operand("A", cfg, a_unit, vec_a, cfg.bM, BX, S_AM, S_AK)
    b = _Operand("B", cfg, b_unit, vec_b, cfg.bN, BY, S_BN, S_BK)
    mma = _Mma(cfg, a, b)
    src = Source()
    src("import numpy as np",
        "from numba import cuda, float32",
        "from gemm.arch import (cp_async_commit, cp_async_wait_all,",
        "    cp_async_zfill_tile, fill_tile, fma_tile, load_tile, store_c_tile)",
        "U = np.uint32",
        f"# {cfg}, A unit mode {a_unit} (x{a.vec}), B unit mode {b_unit} (x{b.vec})",
        "")
    align = align_arg(16, simulator)
    # Block z computes product z % NB of a batch over k-tiles [k0, KT): its range of K, z // NB
    # (split-K: then C is the workspace of partials, matrix z; else KPS covers all of K).
    with src.block("def kernel(A, B, C, M, N, K, sAm, sAk, sBn, sBk, sCm, sCn, sAb, sBb, sCb, "
                   "NB, KPS, alpha, beta):"):
        src("t = U(cuda.threadIdx.x)", "bx = U(cuda.blockIdx.x)", "by = U(cuda.blockIdx.y)",
            "z = U(cuda.blockIdx.z)", "bz = z % NB", "k0 = (z // NB) * KPS",
            f"sA = cuda.shared.array({a.smem_size}, float32{align})",
            f"sB = cuda.shared.array({b.smem_size}, float32{align})",
            f"KT = min((K + U({cfg.bK - 1})) // U({cfg.bK}), k0 + KPS)")
        for op in (a, b):
            p = op.name.lower()
            base0 = op.coords[(0,) * len(next(iter(op.coords)))]
            src(f"{p}_g = {code(op.src[0])} + bz * s{op.name}b",
                f"{p}_s = {code(op.dst[0])}",
                f"{p}_cmn = {code(base0[0])}",
                f"{p}_ck = {code(sympy.expand(base0[1]).subs(KT, 0))}")
        src(f"ra = {code(mma.a[0])}", f"rb = {code(mma.b[0])}")
        # register fragments: the accumulators, and the A and B values of each k-block in
        # flight (all k-blocks of a k-tile for prefetch, two for double_buffer)
        slots = mma.mma_k if cfg.pipeline == "prefetch" else 2
        n_acc = mma.mma_m * mma.mma_n
        src(f"acc = cuda.local.array({n_acc}, float32)",
            f"fa = cuda.local.array({slots * mma.mma_m}, float32)",
            f"fb = cuda.local.array({slots * mma.mma_n}, float32)",
            f"{src.define(f'fill_tile({n_acc})')}(acc, float32(0))")

        def issue(kt, stage):
            for op in (a, b):
                p = op.name.lower()
                src(f"{p}_gk = {code(op.src[1].subs(KT, sym(kt)))}"
                    if op.src[1] != 0 else f"{p}_gk = U(0)")
                _copy_tile(src, op, kt, stage)
            src("cp_async_commit()")

        def load(kb, slot, stage):
            _load_frag(src, "A", mma.a, kb, slot, stage, mma.mma_m, cfg.vector_mn)
            _load_frag(src, "B", mma.b, kb, slot, stage, mma.mma_n, cfg.vector_mn)

        if cfg.pipeline == "prefetch":
            src("kt = k0")
            issue("kt", "U(0)")
            with src.block("while kt < KT:"):
                src("cp_async_wait_all()", "cuda.syncthreads()")
                for kb in range(mma.mma_k):
                    load(kb, kb, "U(0)")
                src("cuda.syncthreads()")
                with src.block("if kt + U(1) < KT:"):
                    src("kn = kt + U(1)")
                    issue("kn", "U(0)")
                for kb in range(mma.mma_k):
                    _fma(src, mma, kb)
                src("kt += U(1)")
        else:
            stage = f"U({a.stage_stride})"
            if a.stage_stride != b.stage_stride:
                raise ValueError("double buffering needs equal A and B stage sizes")
            # rd/wr: the stages being read and written; cur: the stage the register loads
            # read, switched to the freshly written one once its copies have landed.
            src("rd = U(0)", "wr = U(1)", "cur = U(0)", "kt = k0")
            issue("kt", "U(0)")
            src("cp_async_wait_all()", "cuda.syncthreads()")
            load(0, 0, "U(0)")
            with src.block("while kt < KT:"):
                for kb in range(mma.mma_k):
                    nxt = (kb + 1) % mma.mma_k
                    if kb == mma.mma_k - 1:
                        src("cp_async_wait_all()", "cuda.syncthreads()", "cur = rd")
                    load(nxt, nxt % 2, f"cur * {stage}")
                    if kb == 0:
                        with src.block("if kt + U(1) < KT:"):
                            src("kn = kt + U(1)")
                            issue("kn", f"wr * {stage}")
                            src("rd, wr = wr, rd")
                    _fma(src, mma, kb % 2)
                src("kt += U(1)")
        _epilogue(src, mma)
    return src.text()


def _epilogue(src, mma):
    """One store_c_tile call: ``alpha * acc + beta * C`` to the in-bounds elements of the
    block's C tile. Each accumulator's offset must be ``row * sCm + col * sCn`` from the
    thread's first element (checked)."""
    base, _, rest = mma.c
    coords = mma.c_coords
    m0, n0 = coords[(0, 0, 0)]
    src(f"cg = {code(base)} + z * sCb", f"cm = {code(m0)}", f"cn = {code(n0)}")
    plan = []
    for i in range(mma.mma_m):
        for j in range(mma.mma_n):
            r = int(sympy.expand(coords[(0, i, j)][0] - m0))
            c = int(sympy.expand(coords[(0, i, j)][1] - n0))
            if sympy.expand(rest[(0, i, j)] - r * S_CM - c * S_CN) != 0:
                raise AssertionError(f"C offset {rest[(0, i, j)]} is not {r}*sCm + {c}*sCn")
            plan.append((i * mma.mma_n + j, r, c))
    tile = src.define(f"store_c_tile({tuple(plan)!r})")
    src(f"{tile}(C, cg, acc, alpha, beta, cm, cn, M, N, sCm, sCn)")
