"""Pure-Python twins of the tile-level instructions of :mod:`gemm.arch.tile`, for numba's CUDA
simulator: the same factories, plans (checked by :mod:`gemm.arch.tile_plan`) and semantics.

Warp-collective tiles (``mma_tile``, ``load_tile`` of ldmatrix) meet their warp *once* per
call: every lane deposits all of the plan's operands, the last lane computes each instruction
in plan order with the scalar twins' warp functions, and every lane takes its registers. A
kernel then crosses one rendezvous per tile instead of one per instruction. Imports only
numpy and the standard library.

>>> import numpy as np
>>> acc, fa, fb = np.ones(2, np.float32), np.float32([2]), np.float32([3, 4])
>>> fma_tile(((0, 0, 0), (1, 0, 1)))(acc, fa, fb)
>>> acc.tolist()
[7.0, 9.0]
"""

from functools import lru_cache

import numpy as np

from gemm.arch import sim
from gemm.arch.tile_plan import (LOAD_OPS, MMA_FORMS, check_cp_async, check_op,
                                 check_plan, check_store_plan, check_swizzle, check_zfill,
                                 shared_offset)

__all__ = ["mma_tile", "fma_tile", "load_tile", "cp_async_tile", "cp_async_zfill_tile",
           "scaled_store_tile", "store_c_tile", "fill_tile"]

_U32 = 0xFFFFFFFF


@lru_cache(maxsize=None)
def mma_tile(op, plan):
    """Twin of ``gemm.arch.tile.mma_tile``: one warp rendezvous for the whole plan."""
    _, _, _, na, nb, nc = MMA_FORMS[check_op("mma_tile", op, MMA_FORMS)]
    check_plan("mma_tile", plan, (("regs", nc), ("regs", na), ("regs", nb)))
    one = sim.mma_compute(op)

    def compute(lanes):
        accs = {lane: list(acc) for lane, (acc, _, _) in lanes.items()}
        for cs, as_, bs in plan:
            d = one({lane: (tuple(fa[i] for i in as_), tuple(fb[i] for i in bs),
                            tuple(accs[lane][i] for i in cs))
                     for lane, (_, fa, fb) in lanes.items()})
            for lane, values in d.items():
                for i, v in zip(cs, values):
                    accs[lane][i] = v
        return accs

    def tile(acc, fa, fb):
        out = sim._warp_collective(f"mma_tile_{op}", (tuple(acc), tuple(fa), tuple(fb)),
                                   compute)
        acc[:len(out)] = out
    return tile


@lru_cache(maxsize=None)
def fma_tile(plan):
    """Twin of ``gemm.arch.tile.fma_tile`` (each FMA rounded once to float32)."""
    check_plan("fma_tile", plan, ("uint", "uint", "uint"))
    c, a, b = (np.array(x, np.intp) for x in zip(*plan))
    distinct = len(set(c.tolist())) == len(c)

    def tile(acc, fa, fb):
        if distinct:
            acc[c] = (fa[a].astype(np.float64) * fb[b] + acc[c]).astype(np.float32)
            return
        for ci, ai, bi in plan:
            acc[ci] = np.float32(np.float64(fa[ai]) * fb[bi] + acc[ci])
    return tile


@lru_cache(maxsize=None)
def fill_tile(n):
    """Twin of ``gemm.arch.tile.fill_tile``."""
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"fill_tile: n must be a positive int, got {n!r}")

    def tile(frag, value):
        frag[:n] = value
    return tile


@lru_cache(maxsize=None)
def load_tile(op, plan, swizzle=None):
    """Twin of ``gemm.arch.tile.load_tile``: ldmatrix meets the warp once for the plan."""
    nregs, _, _ = LOAD_OPS[check_op("load_tile", op, LOAD_OPS)]
    check_plan("load_tile", plan, ("mode", "uint", ("regs", nregs)))
    swizzle = check_swizzle("load_tile", plan, swizzle)

    def offsets(slot, sw, raw):
        return [(int(slot) + shared_offset(mode, c, int(sw), int(raw), swizzle)) & _U32
                for mode, c, _ in plan]

    if op.startswith("ldmatrix"):
        one = sim.ldmatrix_compute(op, nregs, op.endswith("_trans"))

        def compute(lanes):
            out = {lane: [] for lane in lanes}
            for k in range(len(plan)):
                regs = one({lane: (smem, idx[k]) for lane, (smem, idx) in lanes.items()})
                for lane, values in regs.items():
                    out[lane].append(values)
            return out

        def tile(frag, smem, slot, sw, raw):
            got = sim._warp_collective(f"load_tile_{op}", (smem, offsets(slot, sw, raw)),
                                       compute)
            for (_, _, regs), values in zip(plan, got):
                for r, v in zip(regs, values):
                    frag[r] = v
        return tile

    def tile(frag, smem, slot, sw, raw):
        for (_, _, regs), idx in zip(plan, offsets(slot, sw, raw)):
            if op == "ld_tf32":
                frag[regs[0]] = sim.cvt_rna_tf32_f32(smem[idx])
            elif nregs == 1:
                frag[regs[0]] = smem[idx]
            else:
                values = (sim.ld_v4_f32 if nregs == 4 else sim.ld_v2_f32)(smem, idx)
                for r, v in zip(regs, values):
                    frag[r] = v
    return tile


@lru_cache(maxsize=None)
def cp_async_tile(kind, nbytes, plan, swizzle=None):
    """Twin of ``gemm.arch.tile.cp_async_tile`` (the copies of :func:`gemm.arch.sim.cp_async_ca`)."""
    check_cp_async("cp_async_tile", kind, nbytes, plan, ("mode", "uint", "uint", "uint"))
    swizzle = check_swizzle("cp_async_tile", plan, swizzle)
    copy = sim.cp_async_cg if kind == "cg" else sim.cp_async_ca

    def tile(smem, slot, sw, raw, src, base, ld):
        for mode, c, g, gl in plan:
            di = (int(slot) + shared_offset(mode, c, int(sw), int(raw), swizzle)) & _U32
            copy(smem, di, src, (int(base) + g + gl * int(ld)) & _U32, nbytes)
    return tile


@lru_cache(maxsize=None)
def cp_async_zfill_tile(kind, nbytes, esize, along, plan, swizzle=None):
    """Twin of ``gemm.arch.tile.cp_async_zfill_tile`` (the copies of ``cp_async_ca_zfill``)."""
    vec = check_zfill("cp_async_zfill_tile", kind, nbytes, esize, along, plan)
    swizzle = check_swizzle("cp_async_zfill_tile", plan, swizzle)
    copy = sim.cp_async_cg_zfill if kind == "cg" else sim.cp_async_ca_zfill

    def tile(smem, slot, sw, raw, src, base, ld, mn0, k0, ext_mn, ext_k):
        for mode, c, g, gl, dmn, dk in plan:
            mn, kk = int(mn0) + dmn, int(k0) + dk
            at, ext, other, other_ext = ((mn, int(ext_mn), kk, int(ext_k)) if along == 0 else
                                         (kk, int(ext_k), mn, int(ext_mn)))
            n = min(vec, ext - min(at, ext)) if other < other_ext else 0
            si = (int(base) + g + gl * int(ld)) & _U32 if n else 0
            di = (int(slot) + shared_offset(mode, c, int(sw), int(raw), swizzle)) & _U32
            copy(smem, di, src, si, nbytes, n * esize)
    return tile


@lru_cache(maxsize=None)
def scaled_store_tile(plan):
    """Twin of ``gemm.arch.tile.scaled_store_tile``."""
    width = check_store_plan("scaled_store_tile", plan)
    store = {2: sim.st_v2_f32, 4: sim.st_v4_f32}.get(width)

    def tile(smem, base, frag, scale):
        s = np.float32(scale)
        for c, regs in plan:
            values = [s * np.float32(frag[r]) for r in regs]
            at = (int(base) + c) & _U32
            if store is None:
                smem[at] = values[0]
            else:
                store(smem, at, *values)
    return tile


@lru_cache(maxsize=None)
def store_c_tile(plan):
    """Twin of ``gemm.arch.tile.store_c_tile``."""
    check_plan("store_c_tile", plan, ("uint", "uint", "uint"))

    def tile(C, base, acc, alpha, beta, m0, n0, M, N, ldm, ldn):
        al, be = np.float32(alpha), np.float32(beta)
        for reg, r, c in plan:
            if int(m0) + r < int(M) and int(n0) + c < int(N):
                i = (int(base) + r * int(ldm) + c * int(ldn)) & _U32
                v = al * np.float32(acc[reg])
                C[i] = v + be * np.float32(C[i]) if be != 0 else v
    return tile
