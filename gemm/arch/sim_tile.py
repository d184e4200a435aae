"""The pure-Python twin of :mod:`gemm.arch.tile`'s ``mma_tile``, for numba's CUDA simulator:
the same factory, plans (checked by :mod:`gemm.arch.tile_plan`) and semantics.

A call meets its warp *once*: every lane deposits all of the plan's operands, the last lane
computes each instruction in plan order with the scalar twins' warp functions, and every
lane takes its registers. A kernel then crosses one rendezvous per tile instead of one per
instruction. Imports only numpy and the standard library.
"""

from functools import lru_cache

from gemm.arch import sim
from gemm.arch.tile_plan import MMA_FORMS, check_op, check_plan

__all__ = ["mma_tile"]


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
