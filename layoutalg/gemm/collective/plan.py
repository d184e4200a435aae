"""The ring of ``AllGather(A) @ B`` as data: who computes which shard of A when, what each rank
forwards to whom, and which scratch slot it lands in. Pure Python; the peer-memory path
(:mod:`gemm.collective.peer`) enqueues exactly these steps, and the tests check the schedule
on the CPU.

The ring (D ranks, rank ``r`` holding shard ``A_r`` of A's rows and the columns ``B_r``):
at step ``i`` rank ``r`` multiplies ``A_{(r+i) % D}`` by ``B_r`` into those rows of its output,
and meanwhile forwards that same shard to rank ``(r-1) % D``, into that rank's scratch slot
``i`` (none at the last step: the shard would come back to where it started). So what rank
``r`` computes at step ``i+1`` arrived in its slot ``i`` during step ``i``, sent by rank
``(r+1) % D``.

Signals: each scratch slot has an *arrival* flag. After its copy into slot ``j`` the sender
sets the receiver's flag ``j`` to 1; the receiver waits for it before reading slot ``j`` (to
compute from it or to forward it). Every slot is written once per call, so within a call
nothing is overwritten. Across calls, :data:`REUSE_RULE`: two scratch sets (slots and
flags) taken in turn. The flag values are the same in every call of a set, so one call can
be replayed as a CUDA graph.
"""

from dataclasses import dataclass
from typing import Optional, Tuple

__all__ = ["RingStep", "ring_plan", "REUSE_RULE"]

REUSE_RULE = ("consecutive calls take two scratch sets in turn (call c uses set c % 2); at "
              "the end of a call, after its last matmul and last forward, a rank clears that "
              "set's arrival flags. No acknowledgement is sent: the ring's own waits order a "
              "copy into a set after the receiver's reads of it two calls before (with one "
              "set they would not)")


@dataclass(frozen=True)
class RingStep:
    """One step of one rank.

    ``compute``: the shard of A multiplied at this step (its rows of the output);
    ``source``: the rank's scratch slot holding it (whose arrival flag is waited for), None
    for the rank's own shard; ``send_to``: the rank this shard is forwarded to (None at the
    last step); ``dest_slot``: the slot of ``send_to`` it is written into (and whose arrival
    flag is set after the copy)."""
    rank: int
    step: int
    device: object
    compute: int
    source: Optional[int]
    send_to: Optional[int]
    dest_slot: Optional[int]


def ring_plan(devices) -> Tuple[Tuple[RingStep, ...], ...]:
    """The ring's steps, ``plan[rank][step]``, for one device per rank (``devices``: a sequence
    of devices, or the number of ranks). D ranks take D steps and use D - 1 scratch slots each.

    >>> plan = ring_plan(["cuda:0", "cuda:1", "cuda:2"])
    >>> [(s.compute, s.source, s.send_to, s.dest_slot) for s in plan[1]]
    [(1, None, 0, 0), (2, 0, 0, 1), (0, 1, None, None)]
    """
    if isinstance(devices, bool) or not isinstance(devices, (int, list, tuple, range)):
        raise TypeError(f"ring_plan: devices must be a sequence of devices or a count, "
                        f"not {devices!r}")
    devs = list(range(devices)) if isinstance(devices, int) else list(devices)
    if not devs:
        raise ValueError("ring_plan: the ring needs at least one rank")
    D = len(devs)
    plan = []
    for r in range(D):
        steps = []
        for i in range(D):
            last = i == D - 1
            steps.append(RingStep(
                rank=r, step=i, device=devs[r], compute=(r + i) % D,
                source=None if i == 0 else i - 1, send_to=None if last else (r - 1) % D,
                dest_slot=None if last else i))
        plan.append(tuple(steps))
    return tuple(plan)
