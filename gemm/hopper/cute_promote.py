"""FP8's promotion in the Hopper GEMM written with :mod:`gemm.cute` (:mod:`gemm.hopper.cute_gemm`,
``v.promote``: ``use_fast_accum=False`` and block scales): the tensor cores' own sums keep
fewer bits than float32, so each k-tile's products go alone into one of two accumulator sets
by turns, and are added to a float32 sum on the CUDA cores while the tensor cores multiply
the next k-tile. DeepSeek-V3's block scales (``v.scale == "blocks"``) scale each k-tile's
products as they are added: a thread's accumulators lie on few rows (two per 64-row atom),
its row slots (``_slot``, ``_value``), each slot's scale read as its k-tile is issued and
used a step later. Where the producer stages them (``v.stage_scales``: A's scales MN-major in
16-byte aligned runs, DeepGEMM's way) they are read from the k-tile's slot in shared memory,
ready once the slot is full; otherwise from global memory, whose latency the step hides.
"""

from types import SimpleNamespace

import numpy as np
from numba import cuda

from layoutalg import Layout
from layoutalg.tensor import make_identity_tensor as make_identity_tensor_host
from gemm.cute import (axpby, fill, static_groups, static_range, unroll, unrolled,
                       warpgroup_wait)
from gemm.cute.pipeline import advance

__all__ = ["promotion_functions"]

U = np.uint32


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


def promotion_functions(v, mma, issue, release):
    """Variant ``v``'s promoted k-loop, ``promoted_k_tiles(tot, acc0, acc1, sv0, sv1, raw,
    bars, st, c, thr, base, sc, k_tiles)``, over the kernel's ``issue`` and ``release``, with
    ``slot_layout`` (a thread's block scales: its row slots' and B's). ``sc``, the block
    scales' context: ``(SA, SB, SS, tCcC, row0, b_block, M, s_rows, s_b)``: the scales in
    global memory, shared floats ``SS`` holding the staged ones (a slot's ``v.scale_floats``
    from ``s_rows``, this consumer's rows, and ``s_b``, B's), the consumer's coordinates of
    its accumulators, its first row, B's block of columns and A's rows."""
    cfg = v.config
    bm, bn, stages = cfg.bM, cfg.bN, cfg.stages
    starts, group = static_groups(bm // 64 * bn // 2)      # a consumer thread's accumulators
    # FP8 block scales, applied to each k-tile's products as they are promoted: a thread's
    # accumulators lie on few rows (two per 64-row atom), its row slots (_slot, _value)
    blocks, scale_a_mn, staged = v.scale == "blocks", v.scale_a_mn, v.stage_scales
    n_slots = _row_slots(mma, bm, bn) if blocks else 1
    slots, slot_layout = static_range(n_slots), Layout(n_slots + 1)
    slot_floats = v.scale_floats

    @cuda.jit(device=True, inline="always")
    @unrolled
    def block_scales(sv, sc, st, k_tiles, k):
        """Into ``sv``: k-tile ``k``'s scales (in slot ``st``), read as the k-tile is issued
        and used a step later: A's 1 x 128 block of each of this thread's rows (``sv[q]``,
        row slot ``q``), and B's 128 x 128 one (``sv[n_slots]``). The indices are uint32:
        a signed one (the coordinates' int64) makes numba wrap negative indices around, its
        arithmetic at each read in the k-loop."""
        SA, SB, SS, tCcC, row0, b_block, M, s_rows, s_b = sc
        if staged:
            at = st[0] * slot_floats
            sv[n_slots] = SS[U(s_b + at)]
            for q in unroll(slots):
                sv[q] = SS[U(s_rows + at + tCcC[_value(q, bn)][0])]
        else:
            sv[n_slots] = SB[U(b_block * k_tiles + k)]
            for q in unroll(slots):
                r = min(row0 + tCcC[_value(q, bn)][0], M - 1)
                sv[q] = SA[U(k * M + r) if scale_a_mn else U(r * k_tiles + k)]

    @cuda.jit(device=True, inline="always")
    @unrolled
    def retire(tot, acc, sv):
        """A k-tile's products added to the sum (with block scales, each scaled by its row
        slot's A scale times the B scale: one product a slot once LLVM has shared them)."""
        if blocks:
            for s in unroll(starts):
                for i in range(group):
                    tot[s + i] += acc[s + i] * (sv[n_slots] * sv[_slot(s + i, bn)])
        else:
            axpby(1.0, acc, 1.0, tot)

    @cuda.jit(device=True, inline="always")
    def turn(tot, fresh, sv_fresh, done, sv_done, older, st, k, raw, bars, c, thr, base, sc,
             k_tiles):
        """Issue k-tile ``k`` into ``fresh`` (its block scales into ``sv_fresh``), then the
        one before (in ``done``) is retired: its slot released, its products added to
        ``tot`` while ``k``'s multiply. Returns (k's state, the next)."""
        issue(fresh, raw, bars, st, c, thr, base, False)
        if blocks:
            block_scales(sv_fresh, sc, st, k_tiles, k)
        warpgroup_wait(1)                   # the older group is done
        release(bars, older)
        retire(tot, done, sv_done)
        return st, advance(st, stages)

    @cuda.jit(device=True, inline="always")
    def promoted_k_tiles(tot, acc0, acc1, sv0, sv1, raw, bars, st, c, thr, base, sc, k_tiles):
        """FP8's promotion (use_fast_accum=False, and block scales: the tensor cores' own
        sums keep fewer bits than float32): each k-tile's products alone, in ``acc0`` and
        ``acc1`` by turns, added to ``tot`` on the CUDA cores (rounded to nearest) while the
        tensor cores multiply the next k-tile; returns the state past the tile."""
        fill(tot, 0.0)
        issue(acc0, raw, bars, st, c, thr, base, False)
        if blocks:
            block_scales(sv0, sc, st, k_tiles, 0)
        older, st = st, advance(st, stages)
        k = 1
        while k + 1 < k_tiles:              # k-tile k in acc1, then k + 1 in acc0
            older, st = turn(tot, acc1, sv1, acc0, sv0, older, st, k, raw, bars, c, thr, base,
                             sc, k_tiles)
            older, st = turn(tot, acc0, sv0, acc1, sv1, older, st, k + 1, raw, bars, c, thr,
                             base, sc, k_tiles)
            k += 2
        if k < k_tiles:                     # an even number: the last in acc1
            older, st = turn(tot, acc1, sv1, acc0, sv0, older, st, k, raw, bars, c, thr, base,
                             sc, k_tiles)
            warpgroup_wait(0)
            release(bars, older)
            retire(tot, acc1, sv1)
        else:
            warpgroup_wait(0)
            release(bars, older)
            retire(tot, acc0, sv0)
        return st

    return SimpleNamespace(promoted_k_tiles=promoted_k_tiles, slot_layout=slot_layout)
