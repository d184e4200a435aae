"""3xTF32 in the Hopper GEMM written with :mod:`gemm.cute` (:mod:`gemm.hopper.cute_gemm`,
``config.tf32x3``): float32 operands at about float32's accuracy on the tf32 tensor cores.

Each operand is the sum of a big part (its float32 bits, which wgmma reads as tf32, dropping
the low 13 bits) and a small part (the rest, rounded to tf32), and A B is taken as big big +
small big + big small. Each k-tile, the consumers that read its slot meet at a named barrier
(every wgmma of their k-tile before is done), write the small parts of the slot's blocks to
their own buffer past the ring (``gemm.arch.split_tf32_tile``: the same layout, so the
slot's partitions shifted to the buffer read them), fence them for wgmma's proxy and meet
again, learning whether any of them met an inf or NaN. Then wgmma big big, and small big
and big small; where an inf or NaN was met, the slot's are cleared to 0 between the two,
after the big products are done, so that they reach the result through the big product
alone, as in float32. Each k-tile's products start from zero and are added to the tile's
sum on the CUDA cores (rounded to nearest) at the next k-tile: the tensor cores' own
accumulation truncates, which over a long K was 10 times float32's error.
"""

from types import SimpleNamespace

from numba import cuda

from gemm import arch
from gemm.cute import (axpby, dynamic_range, fill, gemm, named_barrier_sync, warpgroup_arrive,
                       warpgroup_commit_batch, warpgroup_wait)
from gemm.cute.pipeline import advance, consumer_wait

__all__ = ["tf32x3_functions"]


def tf32x3_functions(v, mma, operands, release, pass_turn):
    """Variant ``v``'s 3xTF32 k-loop, ``x3_k_tiles(tot, acc, raw, raw8, bars, st, part, thr,
    base, base8, c, k_tiles, nxt)``, and its step, ``x3_issue(tot, acc, raw, raw8, bars, st,
    part, thr, base, base8, c, k)`` (for the plain schedule's loop), over the kernel's
    ``operands(raw, at, part, thr)`` (a consumer's partitions of the blocks at element
    ``at``), ``release`` and ``pass_turn``."""
    cfg = v.config
    stages, slot_bytes = cfg.stages, cfg.slot_bytes
    slot_elems = slot_bytes // 4
    pingpong = cfg.schedule == "pingpong"
    readers = 128 * (1 if pingpong else cfg.consumers)      # the threads that read a slot
    full, rest = divmod(slot_bytes // 16, readers)          # its 16-byte chunks a thread
    tail = 16 * readers * full
    split_all = arch.split_tf32_tile(full, 16 * readers)
    clear_all = arch.clear_nonfinite_tile(full, 16 * readers)
    split_one = arch.split_tf32_tile(1, 16) if rest else None
    clear_one = arch.clear_nonfinite_tile(1, 16) if rest else None

    @cuda.jit(device=True, inline="always")
    def split(raw8, slot, buf, tt, bar):
        """The slot's small parts into the buffer (byte offsets), by the slot's readers;
        whether any reader met an inf or NaN."""
        named_barrier_sync(bar, readers)        # every reader's last wgmma is done
        nf = split_all(raw8, slot + tt * 16, buf + tt * 16)
        if rest and tt < rest:
            nf |= split_one(raw8, slot + tt * 16 + tail, buf + tt * 16 + tail)
        arch.fence_proxy_async()
        return arch.named_barrier_or(bar, readers, nf)

    @cuda.jit(device=True, inline="always")
    def clear(raw8, slot, tt, bar):
        """The slot's infs and NaNs set to 0, once every reader's big products are done."""
        named_barrier_sync(bar, readers)
        clear_all(raw8, slot + tt * 16)
        if rest and tt < rest:
            clear_one(raw8, slot + tt * 16 + tail)
        arch.fence_proxy_async()
        named_barrier_sync(bar, readers)

    @cuda.jit(device=True, inline="always")
    def x3_issue(tot, acc, raw, raw8, bars, st, part, thr, base, base8, c, k):
        """Wait until the state's slot is full, add k-tile ``k - 1``'s products (done) to
        ``tot`` and issue k-tile ``k``'s three into ``acc``, one group."""
        tt = cuda.threadIdx.x % 128 + (0 if pingpong else c * 128)
        own = stages + (c if pingpong else 0)               # this reader's buffer
        bar = 3 + (c if pingpong else 0)
        consumer_wait(bars, st)
        bad = split(raw8, base8 + st[0] * slot_bytes, base8 + own * slot_bytes, tt, bar)
        if k > 0:
            axpby(1.0, acc, 1.0, tot)           # the k-tile before, now done
        big_a, big_b = operands(raw, base + st[0] * slot_elems, part, thr)
        small_a, small_b = operands(raw, base + own * slot_elems, part, thr)
        warpgroup_arrive()
        gemm(mma, acc, big_a, big_b, False)
        if bad:
            warpgroup_commit_batch()
            warpgroup_wait(0)
            clear(raw8, base8 + st[0] * slot_bytes, tt, bar)
            warpgroup_arrive()
        gemm(mma, acc, small_a, big_b, True)
        gemm(mma, acc, big_a, small_b, True)
        warpgroup_commit_batch()

    @cuda.jit(device=True, inline="always")
    def x3_k_tiles(tot, acc, raw, raw8, bars, st, part, thr, base, base8, c, k_tiles, nxt):
        """The tile's products by 3xTF32 into ``tot``, each k-tile's in ``acc`` first;
        returns the state past the tile (pingpong: the next consumer's turn given as the
        last k-tile's products are issued)."""
        fill(tot, 0.0)
        for k in dynamic_range(k_tiles):
            x3_issue(tot, acc, raw, raw8, bars, st, part, thr, base, base8, c, k)
            if k + 1 == k_tiles:
                pass_turn(bars, nxt)
            warpgroup_wait(0)
            release(bars, st)
            st = advance(st, stages)
        if k_tiles > 0:
            axpby(1.0, acc, 1.0, tot)
        else:
            pass_turn(bars, nxt)
        return st

    return SimpleNamespace(x3_k_tiles=x3_k_tiles, x3_issue=x3_issue)
