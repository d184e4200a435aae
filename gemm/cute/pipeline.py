"""Pipelines as values inside a kernel: a ring of shared slots guarded by mbarriers, with
CUTLASS's producer/consumer protocol (issue 33's first piece; the SM90 GEMM,
:mod:`gemm.hopper.cute_gemm`, runs on it).

A ring of ``stages`` slots has two mbarriers per slot in one shared ``uint64`` array ``bars``
of ``2 * stages``: ``full[s] = bars[s]`` (the producers' arrivals, and with TMA the bytes
they expect) and ``empty[s] = bars[stages + s]`` (the consumers' arrivals). A *state* is a
value, the pair ``(index, phase)`` of uint32s: the slot a step uses and the parity of that
slot's lap. Step ``i`` of a sequence uses slot ``i % stages`` in lap ``i // stages``.
Producers start at :func:`producer_start`, ``(0, 1)``, because a fresh ``empty`` barrier
passes parity 1 and the first lap does not wait. Consumers start at :func:`consumer_start`,
``(0, 0)``. Each role
moves on with :func:`advance`::

    if t == 0:
        pipeline_init(bars, STAGES, 1, CONSUMERS)    # before any role uses the ring
    cuda.syncthreads()
    producer:  st = producer_start()
               for each step:
                   producer_acquire(bars, st, STAGES)     # the slot is free
                   ... write slot st[0] ...
                   producer_commit(bars, st)              # (TMA: producer_expect_tx first,
                   st = advance(st, STAGES)               #  the copies complete the phase)
    consumer:  st = consumer_start()
               for each step:
                   consumer_wait(bars, st)                # the slot's data has landed
                   ... read slot st[0] ...
                   consumer_release(bars, st, STAGES)     # one of CONSUMERS arrivals
                   st = advance(st, STAGES)

A consumer that reads only some of the steps (pingpong consumers, each taking whole tiles in
turn) moves past the others' with :func:`advance_by`.

``producers`` and ``consumers`` count arrivals: the threads (or elected lanes) that call
:func:`producer_commit` and :func:`consumer_release` for each step. The arrive has release
and the wait acquire semantics at CTA scope, so plain shared-memory stores before a commit
are seen by the consumers after their wait.

The functions are numba device functions over :mod:`gemm.arch`'s mbarrier instructions,
inlined into the kernel that calls them (``inline="always"``, so a kernel calling them also
compiles to PTX on a machine without a GPU); ``f.py_func`` is each as plain Python. In
numba's CUDA simulator they run on the instructions' twins (``gemm.arch.sim_sm90``).
"""

import numpy as np
from numba import cuda

from gemm import arch

__all__ = ["pipeline_init", "producer_start", "consumer_start", "advance", "advance_by",
           "producer_acquire", "producer_commit", "producer_expect_tx", "consumer_wait",
           "consumer_release"]

_U = np.uint32          # states in 32 bits (numba widens a uint32 sum to 64: each cast back)


@cuda.jit(device=True, inline="always")
def pipeline_init(bars, stages, producers, consumers):
    """Initialise the ring's ``2 * stages`` mbarriers (one thread calls it, and the block
    synchronises before any role uses the ring): ``full[s]`` expects ``producers`` arrivals
    a phase, ``empty[s]`` ``consumers``."""
    for s in range(stages):
        arch.mbarrier_init(bars, s, producers)
        arch.mbarrier_init(bars, stages + s, consumers)
    arch.fence_mbarrier_init()


@cuda.jit(device=True, inline="always")
def producer_start():
    """The producers' first state: slot 0, parity 1 (a fresh slot counts as free)."""
    return _U(0), _U(1)


@cuda.jit(device=True, inline="always")
def consumer_start():
    """The consumers' first state: slot 0, parity 0 (the slot's first fill)."""
    return _U(0), _U(0)


@cuda.jit(device=True, inline="always")
def advance(state, stages):
    """The state of the next step: the next slot, the parity flipped past the last slot."""
    index, phase = state
    index = _U(index + _U(1))
    if index == stages:
        return _U(0), _U(phase ^ _U(1))
    return index, _U(phase)


@cuda.jit(device=True, inline="always")
def advance_by(state, steps, stages):
    """The state ``steps`` steps later (a consumer skipping the steps other consumers read,
    as pingpong consumers skip each other's tiles)."""
    index, phase = state
    index = _U(index + _U(steps))
    laps = _U(index // _U(stages))
    return _U(index - laps * _U(stages)), _U(phase ^ (laps & _U(1)))


@cuda.jit(device=True, inline="always")
def producer_acquire(bars, state, stages):
    """Wait until the state's slot is free: its ``empty`` phase of the state's parity is
    complete (every consumer released the slot's previous fill)."""
    index, phase = state
    arch.mbarrier_wait(bars, stages + index, phase)


@cuda.jit(device=True, inline="always")
def producer_commit(bars, state):
    """One producer's arrival on the slot's ``full`` barrier: its writes are done."""
    arch.mbarrier_arrive(bars, state[0])


@cuda.jit(device=True, inline="always")
def producer_expect_tx(bars, state, nbytes):
    """One producer's arrival on the slot's ``full`` barrier with ``nbytes`` more bytes due:
    the TMA loads issued on that barrier complete the phase as their bytes land."""
    arch.mbarrier_arrive_expect_tx(bars, state[0], nbytes)


@cuda.jit(device=True, inline="always")
def consumer_wait(bars, state):
    """Wait until the state's slot is full: its ``full`` phase of the state's parity is
    complete."""
    index, phase = state
    arch.mbarrier_wait(bars, index, phase)


@cuda.jit(device=True, inline="always")
def consumer_release(bars, state, stages):
    """One consumer's arrival on the slot's ``empty`` barrier: it is done reading it."""
    arch.mbarrier_arrive(bars, stages + state[0])
