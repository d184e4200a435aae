"""The pipelined add of :mod:`gemm.elementwise`, written with :mod:`gemm.cute`.

A step's block of each operand is cut into runs of ``vector`` elements along its unit
stride (``RUN`` tiles of (1, v) or (v, 1), in the order that puts consecutive threads on
consecutive runs of a line), and thread ``t`` copies runs ``t, t + threads, ..``: one
cp.async each (16 bytes ``.cg``, else ``.ca``), zero-filled past the matrix. The body reads
the out's runs of both slots, adds them and stores them. The ring around them is
:func:`gemm.pipeline.ring_schedule`'s.
"""

import numpy as np
from numba import cuda, float32, int32

from layoutalg import Layout, make_tiled_copy
from layoutalg.atom.copy import (SM80_CP_ASYNC_CACHEALWAYS, SM80_CP_ASYNC_CACHEGLOBAL,
                                 UniversalCopy)
from gemm import arch
from gemm.arch.smem import shared_alignment
from gemm.cute import (copy, copy_if, elem_less, local_tile, make_fragment_like,
                       make_identity_tensor, make_layout, make_shared_tensor, make_tensor,
                       static, static_range, unroll, unrolled)
from gemm.pipeline import ring_plan

__all__ = ["add_kernel_function"]

U = np.uint32
ONE = static(1)
PRED = Layout(1)                # a copy's predicate


class _Runs:
    """How a block of an operand whose unit stride is along ``unit`` (1: N, 0: M) is cut
    into runs of ``v`` elements: the run's tile, the runs of a line, all runs, and each
    thread's share (``threads`` at a time)."""

    def __init__(self, block, unit, v, threads):
        bm, bn = block
        self.tile = static((1, v) if unit else (v, 1))
        self.per_line = (bn if unit else bm) // v
        self.count = bm * bn // v
        self.groups = static_range(-(-self.count // threads))


def _copy_runs(block, unit, v, threads):
    """A device function copying an operand's block ``g`` (global, its coordinates ``c``)
    into a ring slot ``s`` (shared, the operand's major), run by run: one cp.async each (16
    bytes ``.cg``, else ``.ca``), zeros for runs past (M, N)."""
    runs = _Runs(block, unit, v, threads)
    RUN, LINE, COUNT, GROUPS, T = runs.tile, runs.per_line, runs.count, runs.groups, threads
    ROW = unit == 1
    COPY = make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, np.float32) if v == 4 else
                           SM80_CP_ASYNC_CACHEALWAYS(4 * v, np.float32), Layout(1), Layout(v))

    @unrolled
    def copy_runs(g, c, s, pred, t, M, N):
        for k in unroll(GROUPS):
            r = t + U(T * k)
            if r < U(COUNT):
                if ROW:                     # runs along the rows, else down the columns
                    run = (r // U(LINE), r % U(LINE))
                else:
                    run = (r % U(LINE), r // U(LINE))
                pred[0] = elem_less(local_tile(c, RUN, run)[0], (M, N))
                if ROW:
                    copy_if(COPY, pred, local_tile(g, RUN, run)[0, None],
                            local_tile(s, RUN, run)[0, None])
                else:
                    copy_if(COPY, pred, local_tile(g, RUN, run)[None, 0],
                            local_tile(s, RUN, run)[None, 0])
    return cuda.jit(device=True, inline="always")(copy_runs)


def add_kernel_function(cfg, units, vectors):
    """See :func:`gemm.elementwise.kernel_function`."""
    bm, bn = cfg.block
    T, S = cfg.threads, cfg.stages
    plan = ring_plan(S, cfg.delay_release)
    AHEAD, WAIT = plan.ahead, plan.wait
    STEPS_AHEAD = static_range(AHEAD)
    BLOCK = static(cfg.block)
    UX, UY = units
    VO = vectors[2]
    COPY_X, COPY_Y = (_copy_runs(cfg.block, u, v, T) for u, v in zip(units, vectors))
    RO = _Runs(cfg.block, 1, VO, T)                 # the out's runs, along its rows
    BODY = make_tiled_copy(UniversalCopy(32 * VO, np.float32), Layout(1), Layout(VO))
    RUN_O, LINE_O, RUNS_O, GROUPS_O = RO.tile, RO.per_line, RO.count, RO.groups
    VALUES = static_range(VO)
    SLOT = cfg.slot
    # the rings: (bm, bn, stages), each slot in the operand's major
    SX = Layout((bm, bn, S), (bn, 1, SLOT) if UX else (1, bm, SLOT))
    SY = Layout((bm, bn, S), (bn, 1, SLOT) if UY else (1, bm, SLOT))
    FRAGMENT = Layout(VO)
    DYNAMIC, ROW_X, ROW_Y = cfg.dynamic, UX == 1, UY == 1
    ALIGN = shared_alignment()

    def issue(mX, mY, cI, sX, sY, pred, t, M, N, nbc, q, slot):
        """The copies of step ``q``'s block (q the block's index) into ``slot``."""
        at = (q // nbc, q % nbc)
        cB = local_tile(cI, BLOCK, at)
        COPY_X(local_tile(mX, BLOCK, at), cB, sX[None, None, slot], pred, t, M, N)
        COPY_Y(local_tile(mY, BLOCK, at), cB, sY[None, None, slot], pred, t, M, N)

    @unrolled
    def body(mO, cI, sX, sY, rX, rY, t, M, N, nbc, q, slot):
        """out's block ``q`` = the x and y tiles of ``slot``, run by run."""
        at = (q // nbc, q % nbc)
        gO, cB = local_tile(mO, BLOCK, at), local_tile(cI, BLOCK, at)
        for k in unroll(GROUPS_O):
            r = t + U(T * k)
            if r < U(RUNS_O):
                run = (r // U(LINE_O), r % U(LINE_O))
                copy(BODY, local_tile(sX[None, None, slot], RUN_O, run)[0, None], rX)
                copy(BODY, local_tile(sY[None, None, slot], RUN_O, run)[0, None], rY)
                for e in unroll(VALUES):
                    rX[e] += rY[e]
                if elem_less(local_tile(cB, RUN_O, run)[0], (M, N)):
                    copy(BODY, rX, local_tile(gO, RUN_O, run)[0, None])

    ISSUE = cuda.jit(device=True, inline="always")(issue)
    BODY_STEP = cuda.jit(device=True, inline="always")(body)

    @unrolled
    def kernel(X, Y, O, M, N, ldx, ldy, ldo):
        t, bx, nb = U(cuda.threadIdx.x), U(cuda.blockIdx.x), U(cuda.gridDim.x)
        nbc = (N + U(bn - 1)) // U(bn)                  # blocks per row of blocks
        tiles = (M + U(bm - 1)) // U(bm) * nbc
        steps = (tiles - bx + nb - U(1)) // nb if bx < tiles else U(0)
        if DYNAMIC:
            raw = cuda.shared.array(0, float32, alignment=ALIGN)
            sX = make_shared_tensor(raw, SX)
            sY = make_shared_tensor(raw, SY, U(S * SLOT))
        else:
            sX = make_shared_tensor(float32, SX)
            sY = make_shared_tensor(float32, SY)
        if ROW_X:
            mX = make_tensor(X, make_layout((M, N), (ldx, ONE)))
        else:
            mX = make_tensor(X, make_layout((M, N), (ONE, ldx)))
        if ROW_Y:
            mY = make_tensor(Y, make_layout((M, N), (ldy, ONE)))
        else:
            mY = make_tensor(Y, make_layout((M, N), (ONE, ldy)))
        mO = make_tensor(O, make_layout((M, N), (ldo, ONE)))
        cI = make_identity_tensor((M, N))
        pred = make_fragment_like(PRED, int32)
        rX = make_fragment_like(FRAGMENT, float32)
        rY = make_fragment_like(FRAGMENT, float32)

        for j in unroll(STEPS_AHEAD):                   # the prologue: AHEAD steps in flight
            if U(j) < steps:
                ISSUE(mX, mY, cI, sX, sY, pred, t, M, N, nbc, bx + U(j) * nb, U(j % S))
            arch.cp_async_commit()
        arch.cp_async_wait(WAIT)
        cuda.syncthreads()
        read, write = U(0), U(AHEAD % S)
        i = U(0)
        while i < steps:
            ahead = i + U(AHEAD)
            if ahead < steps:
                ISSUE(mX, mY, cI, sX, sY, pred, t, M, N, nbc, bx + ahead * nb, write)
            arch.cp_async_commit()                      # one group a step, empty or not
            write = write + U(1) if write + U(1) < U(S) else U(0)
            BODY_STEP(mO, cI, sX, sY, rX, rY, t, M, N, nbc, bx + i * nb, read)
            arch.cp_async_wait(WAIT)                    # step i + 1's copies have landed
            cuda.syncthreads()
            read = read + U(1) if read + U(1) < U(S) else U(0)
            i = U(i + U(1))
        arch.cp_async_wait(0)

    return kernel
