"""The model that checks a Hopper pipeline's schedule (:mod:`gemm.hopper.pipeline`): mbarriers
with phases and parities, TMA loads that land at random times, wgmma groups that complete at
a ``wgmma.wait_group``, and the roles' events run in many interleavings.

A schedule is ``{role: [event, ...]}`` (``"producer"`` and consumer warpgroups 0, 1, ...);
events are ``("wait", barrier, slot, parity)`` (barrier "full", "empty" or "order"),
``("load", step, slot)`` (arrive.expect_tx and the TMA loads, by any role), ``("mma", step,
slot)`` (a committed wgmma group reading the slot), ``("wgmma_wait", n)``, ``("release",
step, slot)`` (the role no longer reads the slot; one arrival per warp on its empty barrier)
and ``("arrive", barrier, index)``.
"""

import random

__all__ = ["check_schedule"]


class _Barrier:
    """An mbarrier: ``count`` arrivals (and the expected transaction bytes) complete a phase;
    ``phase`` counts completed phases; a wait for parity P passes when the phase of parity P
    has completed, i.e. ``phase & 1 != P``."""

    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def arrive(self, tx=0):
        self.pending -= 1
        self.tx += tx
        self._complete()

    def land(self, nbytes):
        self.tx -= nbytes
        self._complete()

    def _complete(self):
        if self.pending < 0 or self.tx < 0:
            raise AssertionError("mbarrier: more arrivals or bytes than the phase expects")
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def passes(self, parity):
        return (self.phase & 1) != parity


def check_schedule(schedule, pipeline, interleavings=200, seed=0):
    """Run ``schedule`` (a pipeline's ``schedule(tiles, steps)``) against the model
    under ``interleavings`` random orders of the roles and of TMA and wgmma completions (the
    first two eager: producer first, consumers first). AssertionError naming the first
    violation: a slot refilled while a consumer has not released it or a wgmma may still read
    it, a step read before its bytes landed or with another step's data, a release before the
    group reading the slot completed, a deadlock, a step not read or not released by every
    consumer."""
    S, consumers = pipeline.stages, pipeline.consumers
    total = sum(e[0] == "load" for events in schedule.values() for e in events)
    readers = {}                        # step -> the consumers that read it
    for c in range(consumers):
        for e in schedule[c]:
            if e[0] == "mma":
                readers.setdefault(e[1], set()).add(c)
    for run in range(interleavings):
        _run_once(schedule, S, consumers, pipeline.readers, readers, total,
                  random.Random(seed + run), run)
    return (f"ok: {total} steps, {consumers} {pipeline.kind} consumers, {S} slots, "
            f"delay_release {pipeline.delay}, {interleavings} interleavings")


def _run_once(schedule, S, consumers, per_slot, step_readers, total, rng, run):
    bars = {"full": [_Barrier(1) for _ in range(S)],
            "empty": [_Barrier(4 * per_slot) for _ in range(S)],
            "order": [_Barrier(4) for _ in range(consumers)]}
    full, empty = bars["full"], bars["empty"]
    held = [None] * S                   # the step whose data a slot holds (None: not landed)
    readers = [set() for _ in range(S)]   # consumers that may still read the slot
    in_flight = {c: [] for c in range(consumers)}   # per consumer: (step, slot) of groups
    dma = []                            # TMA loads issued, not landed: (step, slot)
    pc = {role: 0 for role in schedule}
    read = {c: [] for c in range(consumers)}
    roles = list(schedule)

    def fail(what):
        raise AssertionError(f"interleaving {run}: {what}")

    def step(role):
        """Try the role's next event; False if it must wait."""
        ev = schedule[role][pc[role]]
        kind = ev[0]
        if kind == "wait":
            if not bars[ev[1]][ev[2]].passes(ev[3]):
                return False
        elif kind == "arrive":
            for _ in range(4):          # one arrival per warp
                bars[ev[1]][ev[2]].arrive()
        elif kind == "load":
            _, i, s = ev
            if readers[s]:
                fail(f"step {i} refills slot {s} while consumers {sorted(readers[s])} may "
                     "still read it")
            if any(s == sl for groups in in_flight.values() for _, sl in groups):
                fail(f"step {i} refills slot {s} while a wgmma group reads it")
            held[s] = None
            readers[s] = set(step_readers.get(i, ()))
            full[s].arrive(tx=1)
            dma.append((i, s))
        elif kind == "mma":
            _, i, s = ev
            if held[s] != i:
                fail(f"consumer {role} reads step {i} from slot {s} holding {held[s]}")
            in_flight[role].append((i, s))
            read[role].append(i)
        elif kind == "wgmma_wait":
            groups = in_flight[role]
            del groups[:max(0, len(groups) - ev[1])]
        elif kind == "release":
            _, i, s = ev
            if any(sl == s for _, sl in in_flight[role]):
                fail(f"consumer {role} releases slot {s} (step {i}) while its wgmma reads it")
            if role not in readers[s]:
                fail(f"consumer {role} releases slot {s} (step {i}) twice")
            readers[s].discard(role)
            for _ in range(4):          # one arrival per warp
                empty[s].arrive()
        pc[role] += 1
        return True

    policy = run % 3        # 0: producer eager, 1: consumers eager, 2: random
    while True:
        live = [r for r in roles if pc[r] < len(schedule[r])]
        if not live and not dma:
            break
        progressed = False
        # asynchronous completions: TMA bytes land, wgmma groups finish (at random times)
        if dma and (policy == 2 and rng.random() < 0.5 or policy != 2 and rng.random() < 0.3):
            i, s = dma.pop(0)
            held[s] = i
            full[s].land(1)
            progressed = True
        order = (sorted(live, key=lambda r: r != "producer") if policy == 0 else
                 sorted(live, key=lambda r: r == "producer") if policy == 1 else
                 rng.sample(live, len(live)))
        for role in order:
            if step(role):
                progressed = True
                break
        if not progressed and dma:
            i, s = dma.pop(0)
            held[s] = i
            full[s].land(1)
            progressed = True
        if not progressed:
            fail(f"deadlock: roles at {dict(pc)}")
    for s, who in enumerate(readers):
        if who:
            fail(f"slot {s} is never released by consumers {sorted(who)}")
    for c in range(consumers):
        mine = sorted(i for i, who in step_readers.items() if c in who)
        if read[c] != mine:
            fail(f"consumer {c} read steps {read[c]}, not {mine} in order")
    if sorted(step_readers) != list(range(total)) or any(
            len(who) != per_slot for who in step_readers.values()):
        fail(f"the steps are not each read by {per_slot} consumer(s): {step_readers}")
