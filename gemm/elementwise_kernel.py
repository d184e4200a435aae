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


def _copy_atom(v):
    return make_tiled_copy(SM80_CP_ASYNC_CACHEGLOBAL(16, np.float32) if v == 4 else
                           SM80_CP_ASYNC_CACHEALWAYS(4 * v, np.float32), Layout(1), Layout(v))


def add_kernel_function(cfg, units, vectors):
    """See :func:`gemm.elementwise.kernel_function`."""
    bm, bn = cfg.block
    T, S = cfg.threads, cfg.stages
    plan = ring_plan(S, cfg.delay_release)
    AHEAD, WAIT = plan.ahead, plan.wait
    STEPS_AHEAD = static_range(AHEAD)
    BLOCK = static(cfg.block)
    UX, UY = units
    VX, VY, VO = vectors
    RX, RY, RO = (_Runs(cfg.block, u, v, T) for u, v in zip(units + (1,), vectors))
    COPY_X, COPY_Y = _copy_atom(VX), _copy_atom(VY)
    BODY = make_tiled_copy(UniversalCopy(32 * VO, np.float32), Layout(1), Layout(VO))
    RUN_X, RUN_Y, RUN_O = RX.tile, RY.tile, RO.tile
    LINE_X, LINE_Y, LINE_O = RX.per_line, RY.per_line, RO.per_line
    RUNS_X, RUNS_Y, RUNS_O = RX.count, RY.count, RO.count
    GROUPS_X, GROUPS_Y, GROUPS_O = RX.groups, RY.groups, RO.groups
    VALUES = static_range(VO)
    SLOT = cfg.slot
    # the rings: (bm, bn, stages), each slot in the operand's major
    SX = Layout((bm, bn, S), (bn, 1, SLOT) if UX else (1, bm, SLOT))
    SY = Layout((bm, bn, S), (bn, 1, SLOT) if UY else (1, bm, SLOT))
    FRAGMENT = Layout(VO)
    DYNAMIC, ROW_X, ROW_Y = cfg.dynamic, UX == 1, UY == 1
    ALIGN = shared_alignment()

    @unrolled
    def issue(mX, mY, cI, sX, sY, pred, t, M, N, nbc, q, slot):
        """The copies of step ``q``'s block (q the block's index) into ``slot``."""
        at = (q // nbc, q % nbc)
        gX, gY = local_tile(mX, BLOCK, at), local_tile(mY, BLOCK, at)
        cB = local_tile(cI, BLOCK, at)
        for k in unroll(GROUPS_X):
            r = t + U(T * k)
            if r < U(RUNS_X):
                if ROW_X:                   # runs along the rows, else down the columns
                    run = (r // U(LINE_X), r % U(LINE_X))
                else:
                    run = (r % U(LINE_X), r // U(LINE_X))
                src = local_tile(gX, RUN_X, run)
                pred[0] = elem_less(local_tile(cB, RUN_X, run)[0], (M, N))
                if ROW_X:
                    copy_if(COPY_X, pred, src[0, None],
                            local_tile(sX[None, None, slot], RUN_X, run)[0, None])
                else:
                    copy_if(COPY_X, pred, src[None, 0],
                            local_tile(sX[None, None, slot], RUN_X, run)[None, 0])
        for k in unroll(GROUPS_Y):
            r = t + U(T * k)
            if r < U(RUNS_Y):
                if ROW_Y:                   # runs along the rows, else down the columns
                    run = (r // U(LINE_Y), r % U(LINE_Y))
                else:
                    run = (r % U(LINE_Y), r // U(LINE_Y))
                src = local_tile(gY, RUN_Y, run)
                pred[0] = elem_less(local_tile(cB, RUN_Y, run)[0], (M, N))
                if ROW_Y:
                    copy_if(COPY_Y, pred, src[0, None],
                            local_tile(sY[None, None, slot], RUN_Y, run)[0, None])
                else:
                    copy_if(COPY_Y, pred, src[None, 0],
                            local_tile(sY[None, None, slot], RUN_Y, run)[None, 0])

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
