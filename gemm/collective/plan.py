"""The schedules of ``AllGather(A) @ B`` and ``ReduceScatter(A @ B)`` as data.

``AllGather(A) @ B`` (:func:`ring_plan`): who computes which shard of A when, what each
rank sends to whom, and which scratch slot it lands in. Pure Python; the peer-memory path
(:mod:`gemm.collective.peer`) enqueues exactly these steps, and the tests check the schedule
on the CPU.

D ranks, rank ``r`` holding shard ``A_r`` of A's rows and the columns ``B_r``. In both
schedules rank ``r`` multiplies ``A_{(r+i) % D}`` by ``B_r`` at step ``i`` (its own shard
first), and what it computes at step ``i+1`` arrived in its scratch slot ``i`` during step
``i``. They differ in who sends it (:data:`SCHEDULES`):

- ``"ring"`` (the seed's): at step ``i`` rank ``r`` forwards the shard it computes to rank
  ``(r-1) % D`` (none at the last step: the shard would come back to where it started). A
  shard travels D - 1 hops, each copy waiting for the one before to arrive. Neighbours
  alone talk, which suits a ring of links (or NCCL across hosts).
- ``"direct"``: at step ``i`` rank ``r`` pushes its own shard to rank ``(r-i-1) % D``. Every
  step is still a permutation (each rank sends one shard and receives one), but no copy
  waits for another to arrive: a rank's D - 1 copies run back to back. Suits GPUs that all
  reach each other at the same speed (NVSwitch), where the ring's chain of arrivals (a flag
  hop per copy) is pure latency.

Signals: each scratch slot has an *arrival* flag. After its copy into slot ``j`` the sender
sets the receiver's flag ``j`` to 1; the receiver waits for it before reading slot ``j`` (to
compute from it or to forward it). Every slot is written once per call, so within a call
nothing is overwritten. Across calls, :data:`REUSE_RULE`: two scratch sets (slots and
flags) taken in turn. The flag values are the same in every call of a set, so one call can
be replayed as a CUDA graph.
"""

from dataclasses import dataclass
from typing import Optional, Tuple

__all__ = ["RingStep", "ring_plan", "ScatterStep", "scatter_plan", "REUSE_RULE",
           "SCHEDULES"]

SCHEDULES = ("ring", "direct")

REUSE_RULE = ("consecutive calls take two scratch sets in turn (call c uses set c % 2); at "
              "the end of a call, after its last matmul and last copy, a rank clears that "
              "set's arrival flags. No acknowledgement is sent: the schedule's own waits "
              "order a copy into a set after the receiver's reads of it two calls before "
              "(with one set they would not)")


@dataclass(frozen=True)
class RingStep:
    """One step of one rank.

    ``compute``: the shard of A multiplied at this step (its rows of the output);
    ``source``: the rank's scratch slot holding it (whose arrival flag is waited for), None
    for the rank's own shard; ``send``: the shard sent at this step (None: nothing is sent);
    ``send_from``: the slot it is read from (whose arrival flag is waited for), None for the
    rank's own shard; ``send_to``: the rank it goes to; ``dest_slot``: the slot of
    ``send_to`` it is written into (and whose arrival flag is set after the copy)."""
    rank: int
    step: int
    device: object
    compute: int
    source: Optional[int]
    send: Optional[int]
    send_from: Optional[int]
    send_to: Optional[int]
    dest_slot: Optional[int]


def ring_plan(devices, schedule: str = "ring") -> Tuple[Tuple[RingStep, ...], ...]:
    """The steps of ``schedule`` (one of :data:`SCHEDULES`), ``plan[rank][step]``, for one
    device per rank (``devices``: a sequence of devices, or the number of ranks). D ranks
    take D steps and use D - 1 scratch slots each.

    >>> plan = ring_plan(["cuda:0", "cuda:1", "cuda:2"])
    >>> [(s.compute, s.source, s.send, s.send_from, s.send_to, s.dest_slot) for s in plan[1]]
    [(1, None, 1, None, 0, 0), (2, 0, 2, 0, 0, 1), (0, 1, None, None, None, None)]
    >>> [(s.send, s.send_from, s.send_to) for s in ring_plan(3, "direct")[1]]
    [(1, None, 0), (1, None, 2), (None, None, None)]
    """
    if isinstance(devices, bool) or not isinstance(devices, (int, list, tuple, range)):
        raise TypeError(f"ring_plan: devices must be a sequence of devices or a count, "
                        f"not {devices!r}")
    if schedule not in SCHEDULES:
        raise ValueError(f"ring_plan: schedule must be one of {SCHEDULES}, not {schedule!r}")
    devs = list(range(devices)) if isinstance(devices, int) else list(devices)
    if not devs:
        raise ValueError("ring_plan: the ring needs at least one rank")
    D = len(devs)
    plan = []
    for r in range(D):
        steps = []
        for i in range(D):
            source = None if i == 0 else i - 1
            if i == D - 1:
                send = send_from = send_to = None
            elif schedule == "ring":
                send, send_from, send_to = (r + i) % D, source, (r - 1) % D
            else:
                send, send_from, send_to = r, None, (r - i - 1) % D
            steps.append(RingStep(
                rank=r, step=i, device=devs[r], compute=(r + i) % D, source=source,
                send=send, send_from=send_from, send_to=send_to,
                dest_slot=None if send_to is None else i))
        plan.append(tuple(steps))
    return tuple(plan)


@dataclass(frozen=True)
class ScatterStep:
    """One step of one rank in ``ReduceScatter(A @ B)``: ``block``, the block of rows of its
    partial product computed at this step (block ``j`` is rank ``j``'s part of the result);
    ``send_to``, the rank it is sent to (None: the rank's own block, kept); ``dest_slot``,
    the slot of ``send_to`` it lands in (the sender's rank: slot ``q`` of every rank holds
    rank ``q``'s partial)."""
    rank: int
    step: int
    block: int
    send_to: Optional[int]
    dest_slot: Optional[int]


def scatter_plan(size: int) -> Tuple[Tuple[ScatterStep, ...], ...]:
    """The steps of ``ReduceScatter(A @ B)`` over ``size`` ranks, ``plan[rank][step]``: at
    step ``i < D - 1`` rank ``r`` computes the block of rank ``(r + i + 1) % D`` and pushes
    it there (each step a permutation, as the direct all-gather's); at the last step its own
    block, into its own slot. Each rank then adds its D slots in rank order (the same order
    on every rank and in every call: the sum does not depend on when the blocks arrived).

    >>> [(s.block, s.send_to, s.dest_slot) for s in scatter_plan(3)[1]]
    [(2, 2, 1), (0, 0, 1), (1, None, None)]
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"scatter_plan: size must be a positive number of ranks, not "
                         f"{size!r}")
    plan = []
    for r in range(size):
        steps = [ScatterStep(r, i, (r + i + 1) % size, (r + i + 1) % size, r)
                 for i in range(size - 1)]
        steps.append(ScatterStep(r, size - 1, r, None, None))
        plan.append(tuple(steps))
    return tuple(plan)
