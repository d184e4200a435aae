"""The cp.async ring of a pipelined kernel, as data: its plan, its schedule and a model that
checks a schedule (Pallas' ``emit_pipeline`` on cp.async, the form of
:mod:`gemm.elementwise`'s ring, written with gemm.cute in :mod:`gemm.elementwise_kernel`).

The ring, with ``ahead = stages - 1 - delay_release`` steps in flight (``d = delay_release``)::

    prologue  for j < ahead:  [if j < steps: issue(j, slot j)]  commit
              wait(stages - 2 - d)  sync  prime(slot 0)
    step i    [if i + ahead < steps: issue(i + ahead, write slot)]  commit
              body(i, slot of i, ready_next)
                  ready_next():  wait(stages - 2 - d)  sync  -> slot of step i + 1
    end       wait(0)

Step ``s`` lives in slot ``s % stages``. One cp.async group is committed per issue point,
empty or not (an empty group completes at once), so when step ``i + 1`` is waited for, the
groups committed after its own are always the ``ahead - 1`` newest: every wait count is the
constant ``stages - 2 - d``, the drain included. (Keeping that count with no groups
committed in the drain is "the drain trap": ``wait_group`` would return with the last steps'
copies still in flight.)

``delay_release = d`` (Pallas' meaning): a slot is refilled only ``d`` steps after its step
ran, so the body of step ``i`` may read steps ``i - d .. i``, and after ``ready_next()``
steps ``i + 1 - d .. i + 1``. It needs ``stages >= d + 2``.

:func:`ring_schedule` walks the plan and returns events, which :func:`check_ring` checks
against a model of cp.async groups and shared slots; tests/sim_pipeline_cases.py records
the add kernel's own cp.async calls, waits and barriers in numba's simulator and compares
them with the schedule.

>>> for event in ring_schedule(2, 2): print(event)
('copy_in', 0, 0)
('commit',)
('wait', 0)
('sync',)
('copy_in', 1, 1)
('commit',)
('read', 0, 0)
('wait', 0)
('sync',)
('read', 1, 1)
('commit',)
('read', 1, 1)
('wait', 0)
('sync',)
('read', 2, 0)
('wait', 0)
"""

from __future__ import annotations

from collections import deque
from typing import Callable, List, Optional, Sequence

__all__ = ["ring_plan", "check_ring_parameters", "ring_schedule", "check_ring"]


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


# --- the ring -----------------------------------------------------------------------------------

class _Ring:
    """The ring's operations in order, walked by :func:`ring_schedule` (as events) and
    written out by the kernels that use it; see the module docstring.

    ``prologue`` runs for j = 0 .. ahead-1 with step j; ``start`` once; ``loop`` for each step
    i, its issue for step i + ahead; ``ready`` inside the body, when it calls ready_next;
    ``end`` once after the loop. Every ``wait`` retires all but the ``wait`` newest groups.
    """

    def __init__(self, stages, delay, caller):
        if not (_is_int(stages) and stages >= 2):
            raise ValueError(f"{caller}: stages must be an int >= 2, got {stages!r}")
        if not (_is_int(delay) and delay >= 0):
            raise ValueError(f"{caller}: delay_release must be an int >= 0, got {delay!r}")
        if stages < delay + 2:
            raise ValueError(f"{caller}: stages={stages} with delay_release={delay} leaves no "
                             "copy in flight: stages must be >= delay_release + 2")
        self.stages, self.delay = stages, delay
        self.ahead = stages - 1 - delay
        self.wait = stages - 2 - delay
        self.prologue = ("issue", "commit")
        self.start = ("wait", "sync", "prime")
        self.loop = ("issue", "commit", "body")
        self.ready = ("wait", "sync")
        self.end = ("wait_all",)

    def walk(self, run, each_step):
        """``run(op, step, phase)`` for every operation in order, ``phase`` one of "prologue"
        (``step`` = j), "start", "loop" (``step``: what ``each_step(fn)`` passes to ``fn``, once
        per step) and "end". (The body runs the "ready" operations itself.)"""
        for j in range(self.ahead):
            for op in self.prologue:
                run(op, j, "prologue")
        for op in self.start:
            run(op, None, "start")
        each_step(lambda i: [run(op, i, "loop") for op in self.loop])
        for op in self.end:
            run(op, None, "end")


def check_ring_parameters(stages: int, delay_release: int, caller: str) -> None:
    """ValueError, named after ``caller``, unless ``stages`` (an int >= 2) and
    ``delay_release`` (an int >= 0, at most ``stages - 2``) leave a copy in flight."""
    _Ring(stages, delay_release, caller)


def ring_plan(stages: int, delay_release: int = 0) -> "_Ring":
    """The ring's plan: ``ahead`` (steps in flight), ``wait`` (every wait's count) and the
    order of its operations (see the module)."""
    return _Ring(stages, delay_release, "ring_plan")


class _ReadyOnce:
    """The ready_next callback given to a body: it must be called exactly once."""

    def __init__(self, caller, step, emit):
        self.caller, self.step, self.emit, self.calls = caller, step, emit, 0

    def __call__(self):
        self.calls += 1
        if self.calls > 1:
            raise ValueError(f"{self.caller}: the body of step {self.step} called ready_next() "
                             "twice; call it once, where the next step's slot is needed")
        return self.emit()

    def check(self):
        if self.calls != 1:
            raise ValueError(f"{self.caller}: the body never called ready_next(); it must, once, "
                             "at the point from which it reads the next step's slot")


def ring_schedule(stages: int, steps: int, delay_release: int = 0, *,
                  issue: Optional[Callable] = None, body: Optional[Callable] = None,
                  prime: Optional[Callable] = None) -> List[tuple]:
    """The events of the ring over ``steps`` steps, in one thread's program order. The ring's
    own events are ("commit",), ("wait", n) and ("sync",); the callbacks model what a
    kernel's copies and body do, by appending events to the list they get first:

    - ``issue(events, step, slot)``; default: ("copy_in", step, slot);
    - ``body(events, step, slot, ready)``; ``ready()`` appends the ring's wait and sync and
      returns the next step's slot. Default: ("read", k, k % stages) for the steps
      k = step-d .. step (d = delay_release), ``ready()``, then the reads of step+1-d ..
      step+1 (a body that prefetches the next step, as a GEMM's does);
    - ``prime(events, slot)``; default: nothing.

    >>> for e in ring_schedule(3, 2): print(e)
    ('copy_in', 0, 0)
    ('commit',)
    ('copy_in', 1, 1)
    ('commit',)
    ('wait', 1)
    ('sync',)
    ('commit',)
    ('read', 0, 0)
    ('wait', 1)
    ('sync',)
    ('read', 1, 1)
    ('commit',)
    ('read', 1, 1)
    ('wait', 1)
    ('sync',)
    ('read', 2, 2)
    ('wait', 0)
    """
    if not (_is_int(steps) and steps >= 0):
        raise ValueError(f"ring_schedule: steps must be an int >= 0, got {steps!r}")
    plan = _Ring(stages, delay_release, "ring_schedule")
    return _ring_events(plan, steps, issue, body, prime)


def _window_reads(events, step, stages, delay):
    for k in range(max(0, step - delay), step + 1):
        events.append(("read", k, k % stages))


def _ring_events(plan, steps, issue=None, body=None, prime=None):
    S, events = plan.stages, []
    if issue is None:
        def issue(ev, step, slot):
            ev.append(("copy_in", step, slot))
    if body is None:
        def body(ev, step, slot, ready):
            _window_reads(ev, step, S, plan.delay)
            ready()
            _window_reads(ev, step + 1, S, plan.delay)

    def run(op, step, phase):
        if op == "issue":
            n = step + plan.ahead if phase == "loop" else step
            if n < steps:
                issue(events, n, n % S)
        elif op == "commit":
            events.append(("commit",))
        elif op == "wait":
            events.append(("wait", plan.wait))
        elif op == "wait_all":
            events.append(("wait", 0))
        elif op == "sync":
            events.append(("sync",))
        elif op == "prime":
            if prime is not None:
                prime(events, 0)
        elif op == "body":
            def ready():
                for r in plan.ready:
                    run(r, None, "ready")
                return (step + 1) % S
            once = _ReadyOnce("ring_schedule", step, ready)
            body(events, step, step % S, once)
            once.check()
        else:
            raise ValueError(f"ring_schedule: unknown ring operation {op!r}")

    def each_step(fn):
        for i in range(steps):
            fn(i)

    plan.walk(run, each_step)
    return events


def check_ring(events: Sequence[tuple], steps: int) -> List[str]:
    """Violations of a ring's events (an empty list: none), from a model of cp.async and
    shared slots, for ``steps`` steps. Events: ("copy_in", step, slot), ("commit",),
    ("wait", n), ("sync",), ("read", step, slot); others are ignored.

    - ``wait n`` retires all committed groups but the newest n; a copy is visible to every
      thread after a wait that retires its group and a ``sync`` after it;
    - a read of a step needs its copies visible and its slot still holding it (a read of a
      step >= ``steps`` is a harmless read past the end and ignored);
    - a copy into a slot needs the slot's previous step retired and a sync after every read
      of it (other threads may still be reading until that sync);
    - every step is read, no copies are left uncommitted or in flight at the end.

    >>> check_ring(ring_schedule(4, 6), 6)
    []
    >>> bad = [("wait", e[1] + 1) if e[0] == "wait" else e for e in ring_schedule(4, 6)]
    >>> check_ring(bad, 6)[0]
    'event 10: step 0 read before a wait retired its copies and a sync made them visible'
    """
    bad = []
    pending, open_group = deque(), []
    landed, visible = set(), set()
    holder, last_read, last_sync = {}, {}, -1
    for at, e in enumerate(events):
        kind = e[0]
        if kind == "copy_in":
            _, step, slot = e
            prev = holder.get(slot)
            if prev is not None and prev != step:
                if prev not in landed:
                    bad.append(f"event {at}: step {step} copied into slot {slot} while step "
                               f"{prev}'s copies into it are in flight")
                if last_read.get(prev, -1) > last_sync:
                    bad.append(f"event {at}: step {step} overwrites slot {slot} of step {prev} "
                               "with no sync after its last read")
            holder[slot] = step
            open_group.append(step)
        elif kind == "commit":
            pending.append(open_group)
            open_group = []
        elif kind == "wait":
            while len(pending) > e[1]:
                landed.update(pending.popleft())
        elif kind == "sync":
            last_sync = at
            visible |= landed
        elif kind == "read":
            _, step, slot = e
            if step >= steps:
                continue
            if step not in visible:
                bad.append(f"event {at}: step {step} read before a wait retired its copies "
                           "and a sync made them visible")
            if holder.get(slot) != step:
                bad.append(f"event {at}: step {step} read from slot {slot}, which holds step "
                           f"{holder.get(slot)}")
            last_read[step] = at
    if open_group:
        bad.append(f"copies of steps {open_group} left in an uncommitted group")
    if any(pending):
        bad.append(f"copies still in flight at the end: {[g for g in pending if g]}")
    unread = [k for k in range(steps) if k not in last_read]
    if unread:
        bad.append(f"steps {unread} never read")
    return bad
