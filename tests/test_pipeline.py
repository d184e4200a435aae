"""The cp.async ring and pipeline emitter (gemm.pipeline) and the pipelined add_matrices.

- ``check_ring``, the model of cp.async groups and shared slots, on small hand-written
  schedules: it accepts a correct one and names each broken rule.
- ``ring_schedule`` (the plan that ``emit_ring`` walks, as events) passes the model over
  stages 2..6, delay_release 0..stages-2, 0..12 steps, with a constant wait count and the
  full prefetch depth; broken plans (a wait one too large, no sync, one step too far ahead,
  no empty groups) fail it.
- The code ``emit_ring`` and ``Pipeline.emit`` write, run as plain Python by one fake CUDA
  thread whose cp.async copies land either at the wait that retires their group ("lazy":
  catches reads before the right wait) or at once ("eager": catches refills of a slot still
  being read): its trace equals the schedule, passes the model, and its results are exact;
  the same with static and dynamic shared memory.
- add_matrices in numba's CUDA simulator (tests/sim_pipeline_cases.py) with a strict cp.async
  model, and its PTX for sm_80 compiled on the CPU.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import deque
from types import SimpleNamespace

import numpy as np
import pytest
import sympy
from hypothesis import given, settings, strategies as st

from gemm.codegen import Source, sym
from gemm.elementwise import AddConfig, add_source
from gemm.pipeline import (BlockSpec, GlobalMatrix, check_ring, emit_pipeline, emit_ring,
                                     ring_schedule, _Ring, _emit_ring, _ring_events, _thread_copies)
from layoutalg import ComposedLayout, Layout, Swizzle

HERE = os.path.dirname(__file__)
GRID = [(s, d) for s in range(2, 7) for d in range(0, s - 1)]
STEPS = range(0, 13)


# --- the checker on hand-written schedules -----------------------------------------------------

def test_check_ring_accepts_a_correct_double_buffer():
    good = [("copy_in", 0, 0), ("commit",), ("wait", 0), ("sync",),
            ("copy_in", 1, 1), ("commit",), ("read", 0, 0), ("wait", 0), ("sync",),
            ("commit",), ("read", 1, 1), ("wait", 0), ("sync",)]
    assert check_ring(good, 2) == []


@pytest.mark.parametrize("events, words", [
    # read with its group still pending (wait 1 leaves the only group in flight)
    ([("copy_in", 0, 0), ("commit",), ("wait", 1), ("sync",), ("read", 0, 0), ("wait", 0)],
     "read before a wait retired"),
    # retired by the wait, but no sync: other threads' copies may not be visible
    ([("copy_in", 0, 0), ("commit",), ("wait", 0), ("read", 0, 0)], "read before a wait"),
    # step 1 overwrites slot 0 with no sync after step 0's read
    ([("copy_in", 0, 0), ("commit",), ("wait", 0), ("sync",), ("read", 0, 0),
      ("copy_in", 1, 0), ("commit",), ("wait", 0), ("sync",), ("read", 1, 0)],
     "with no sync after its last read"),
    # step 1 copied into slot 0 while step 0's copy there is still in flight
    ([("copy_in", 0, 0), ("commit",), ("copy_in", 1, 0), ("commit",), ("wait", 0), ("sync",),
      ("read", 1, 0)], "in flight"),
    # step 0 read from the wrong slot
    ([("copy_in", 0, 0), ("commit",), ("wait", 0), ("sync",), ("read", 0, 1)],
     "which holds step None"),
    ([("copy_in", 0, 0), ("wait", 0), ("sync",), ("read", 0, 0)], "uncommitted"),
    ([("copy_in", 0, 0), ("commit",), ("wait", 0), ("sync",)], "never read"),
    ([("copy_in", 0, 0), ("commit",), ("wait", 0), ("sync",), ("read", 0, 0),
      ("copy_in", 1, 1), ("commit",), ("read", 1, 1)], "still in flight at the end"),
])
def test_check_ring_names_each_broken_rule(events, words):
    steps = max(e[1] for e in events if e[0] == "copy_in") + 1
    errors = check_ring(events, steps)
    assert any(words in m for m in errors), errors


def test_reads_past_the_end_are_ignored():
    events = [("copy_in", 0, 0), ("commit",), ("wait", 0), ("sync",), ("read", 0, 0),
              ("read", 1, 1)]
    assert check_ring(events, 1) == []
    assert check_ring(events, 2)


# --- the ring's plan as events -------------------------------------------------------------------

def _bodies_started(events):
    """Index of each body's first event in a default ring_schedule: the first read of step
    i's window that follows the step's commit."""
    return [k for k, e in enumerate(events) if e[0] == "commit" and k + 1 < len(events)
            and events[k + 1][0] == "read"]


@pytest.mark.parametrize("stages, delay", GRID)
def test_every_ring_schedule_passes_the_model(stages, delay):
    ahead = stages - 1 - delay
    for steps in STEPS:
        events = ring_schedule(stages, steps, delay)
        assert check_ring(events, steps) == [], (stages, delay, steps)
        waits = [e[1] for e in events if e[0] == "wait"]
        assert waits == [stages - 2 - delay] * (steps + 1) + [0]     # constant, then wait(0)
        assert events.count(("commit",)) == ahead + steps           # one group per issue point
        copies = [e[1] for e in events if e[0] == "copy_in"]
        assert copies == list(range(steps))
        # the prefetch depth: when step i's body starts, steps up to i + ahead are issued
        for i, at in enumerate(_bodies_started(events)):
            issued = max([e[1] for e in events[:at] if e[0] == "copy_in"], default=-1)
            assert issued == min(steps - 1, i + ahead), (stages, delay, steps, i)


def _broken(stages, delay, change):
    plan = _Ring(stages, delay, "test")
    change(plan)
    return plan


BROKEN_PLANS = {
    "wait one too large": lambda p: setattr(p, "wait", p.wait + 1),
    "no sync in ready": lambda p: setattr(p, "ready", ("wait",)),
    "one step too far ahead": lambda p: setattr(p, "ahead", p.ahead + 1),
    "no wait before the first step": lambda p: setattr(p, "start", ("sync", "prime")),
}


@pytest.mark.parametrize("name", BROKEN_PLANS)
def test_broken_plans_fail_the_model(name):
    for stages, delay in GRID:
        plan = _broken(stages, delay, BROKEN_PLANS[name])
        steps = stages + 3
        assert check_ring(_ring_events(plan, steps), steps), (name, stages, delay)


def test_the_drain_trap_fails_the_model():
    """Without the empty groups of the drain, the constant wait count lets the last steps be
    read while their copies are in flight."""
    for stages, delay in GRID:
        if stages - 2 - delay == 0:
            continue                 # wait_group 0 everywhere: no trap to fall into
        events, steps = ring_schedule(stages, stages + 2, delay), stages + 2
        trap = [e for k, e in enumerate(events)
                if not (e == ("commit",) and events[k - 1][0] != "copy_in")]
        assert any("read before a wait" in m for m in check_ring(trap, steps)), (stages, delay)


def test_ring_schedule_callbacks_and_errors():
    seen = []

    def body(ev, step, slot, ready):
        ev.append(("compute", step, slot))
        seen.append(ready())
    events = ring_schedule(3, 4, issue=lambda ev, s, k: ev.append(("copy_in", s, k)),
                           body=body, prime=lambda ev, slot: ev.append(("prime", slot)))
    assert seen == [1, 2, 0, 1]
    assert events.index(("prime", 0)) == events.index(("sync",)) + 1
    with pytest.raises(ValueError, match="never called ready_next"):
        ring_schedule(3, 2, body=lambda ev, step, slot, ready: None)
    with pytest.raises(ValueError, match="twice"):
        ring_schedule(3, 2, body=lambda ev, step, slot, ready: (ready(), ready()))
    with pytest.raises(ValueError, match="steps must be an int >= 0"):
        ring_schedule(3, -1)
    with pytest.raises(ValueError, match="delay_release \\+ 2"):
        ring_schedule(3, 4, delay_release=2)


# --- emit_ring's code, run by one fake thread ----------------------------------------------------

class CpAsyncGroups:
    """cp.async's commit groups for a fake thread: ``open`` holds the landings of the copies
    issued since the last commit; ``wait(n)`` lands every group but the ``n`` newest."""

    def __init__(self, landing):
        self.landing, self.events = landing, []
        self.groups, self.open = deque(), []

    def commit(self):
        self.events.append(("commit",))
        self.groups.append(self.open)
        self.open = []

    def wait(self, n):
        self.events.append(("wait", n))
        while len(self.groups) > n:
            for land in self.groups.popleft():
                land()


class RingThread(CpAsyncGroups):
    """Runs emit_ring code with ``COPY(step, slot)`` issues and ``READ(step, slot)`` reads:
    a copy lands (the slot then holds the step) at the retiring wait ("lazy") or at once
    ("eager"); a read of an existing step returns what its slot holds."""

    def __init__(self, landing, stages):
        super().__init__(landing)
        self.slots = [None] * stages
        self.values = []

    def copy(self, step, slot):
        step, slot = int(step), int(slot)
        self.events.append(("copy_in", step, slot))

        def land():
            self.slots[slot] = step
        if self.landing == "eager":
            land()
        else:
            self.open.append(land)

    def read(self, step, slot, steps):
        step, slot = int(step), int(slot)
        self.events.append(("read", step, slot))
        if step < steps:
            self.values.append((step, self.slots[slot]))

    def run(self, text, steps):
        ns = {"U": np.uint32, "COPY": self.copy,
              "READ": lambda s, k: self.read(s, k, steps),
              "cuda": SimpleNamespace(syncthreads=lambda: self.events.append(("sync",))),
              "cp_async_commit": self.commit, "cp_async_wait": self.wait}
        exec(text, ns)
        ns["kernel"](np.uint32(steps))
        return self


def ring_kernel(stages, delay, plan=None):
    """A kernel whose ring issues COPY and whose body reads its delay window, calls
    ready_next, then reads the next step's window (like the GEMM's register prefetch)."""
    src = Source()

    def window(step, slot_expr_of):
        for k in range(delay + 1):
            with src.block(f"if {step} >= U({k}):"):
                src(f"READ({step} - U({k}), {slot_expr_of(k)})")

    def body(step, slot, ready_next):
        window(step, lambda k: f"({slot} + U({stages - k})) % U({stages})")
        nxt = ready_next()
        window(f"({step} + U(1))", lambda k: f"({nxt} + U({stages - k})) % U({stages})")

    with src.block("def kernel(steps):"):
        args = dict(steps="steps", issue=lambda step, slot: src(f"COPY({step}, {slot})"),
                    body=body)
        if plan is None:
            emit_ring(src, stages=stages, delay_release=delay, **args)
        else:
            _emit_ring(src, plan, prime=None, **args)
    return src.text()


def reads_in_window_order(events, delay):
    """ring_schedule's default body reads steps i-d..i; ring_kernel's i..i-d: compare sets."""
    out, run = [], []
    for e in events + [("end",)]:
        if e[0] == "read":
            run.append(e)
            continue
        out.extend(sorted(run))
        run = []
        out.append(e)
    return out[:-1]


@pytest.mark.parametrize("stages, delay", GRID)
def test_emitted_ring_follows_its_schedule(stages, delay):
    text = ring_kernel(stages, delay)
    for steps in STEPS:
        expected = reads_in_window_order(ring_schedule(stages, steps, delay), delay)
        for landing in ("lazy", "eager"):
            thread = RingThread(landing, stages).run(text, steps)
            trace = reads_in_window_order(thread.events, delay)
            assert trace == expected, (stages, delay, steps, landing)
            assert check_ring(thread.events, steps) == []
            assert all(step == held for step, held in thread.values), (stages, delay, steps)


def test_broken_emitted_rings_read_wrong_slots():
    """A wait one too large reads copies still in flight (lazy landing); one step too far
    ahead overwrites the slot being read (eager landing); without its sync the trace fails
    the model (one thread cannot see a missing barrier)."""
    for name, landing in (("wait one too large", "lazy"), ("one step too far ahead", "eager")):
        text = ring_kernel(4, 1, _broken(4, 1, BROKEN_PLANS[name]))
        thread = RingThread(landing, 4).run(text, 7)
        assert any(step != held for step, held in thread.values), name
        assert check_ring(thread.events, 7), name
    text = ring_kernel(4, 0, _broken(4, 0, BROKEN_PLANS["no sync in ready"]))
    thread = RingThread("lazy", 4).run(text, 7)
    assert all(step == held for step, held in thread.values)
    assert any("a sync" in m for m in check_ring(thread.events, 7))


def test_emit_ring_prime_and_callbacks():
    src, calls = Source(), []

    def body(step, slot, ready_next):
        calls.append(("body", step, slot))
        calls.append(("next", ready_next()))
    emit_ring(src, stages=3, steps="KT", issue=lambda step, slot: calls.append((step, slot)),
              body=body, prime=lambda slot: src(f"PRIME({slot})"))
    text = src.text()
    assert calls == [("_rg_n", "U(0)"), ("_rg_n", "U(1)"), ("_rg_n", "_rg_ws"),
                     ("body", "_rg_i", "_rg_rs"), ("next", "_rg_nx")]
    assert text.index("cuda.syncthreads()") < text.index("PRIME(_rg_rs)") < text.index("while")
    assert text.count("cp_async_wait(1)") == 2 and text.count("cp_async_wait(0)") == 1


def test_emit_ring_refuses_bad_use():
    ok = dict(steps="KT", issue=lambda step, slot: None)
    with pytest.raises(ValueError, match="never called ready_next"):
        emit_ring(Source(), stages=3, body=lambda step, slot, ready: None, **ok)
    with pytest.raises(ValueError, match="twice"):
        emit_ring(Source(), stages=3, body=lambda step, slot, ready: (ready(), ready()), **ok)

    def branchy(src):
        def body(step, slot, ready):
            with src.block("if t == U(0):"):
                ready()
        return body
    src = Source()
    with pytest.raises(ValueError, match="inside an emitted branch"):
        emit_ring(src, stages=3, body=branchy(src), **ok)
    body = lambda step, slot, ready: ready()  # noqa: E731
    with pytest.raises(ValueError, match="stages must be an int >= 2"):
        emit_ring(Source(), stages=1, body=body, **ok)
    with pytest.raises(ValueError, match="delay_release \\+ 2"):
        emit_ring(Source(), stages=3, delay_release=2, body=body, **ok)
    with pytest.raises(TypeError, match="steps must be the name"):
        emit_ring(Source(), stages=3, steps="K + 1", issue=lambda s, k: None, body=body)
    with pytest.raises(TypeError, match="issue must be callable"):
        emit_ring(Source(), stages=3, steps="K", issue=None, body=body)
    with pytest.raises(TypeError, match="prime must be callable"):
        emit_ring(Source(), stages=3, body=body, prime=1, **ok)


# --- the pipeline's schedule ---------------------------------------------------------------------

def _pipe(stages, delay, outputs=True):
    spec = BlockSpec((8, 32), lambda k: (0, k))
    return emit_pipeline(lambda *a: None, ("K",), [spec, spec], [spec] if outputs else [],
                         stages, delay)


def out_tile_errors(events):
    """The single-buffered out tile: a sync between compute i and copy_out i (all threads'
    writes done), and between copy_out i and compute i+1 (all threads' reads done)."""
    errors, last = [], None
    for at, e in enumerate(events):
        if e[0] in ("compute", "copy_out"):
            if last is not None and ("sync",) not in events[last + 1:at]:
                errors.append(f"event {at}: {e} follows {events[last]} with no sync")
            last = at
    return errors


@pytest.mark.parametrize("stages, delay", GRID)
def test_every_pipeline_schedule_passes_the_model(stages, delay):
    for outputs in (False, True):
        pipe = _pipe(stages, delay, outputs)
        for n in STEPS:
            events = pipe.schedule(n)
            assert check_ring(events, n) == [], (stages, delay, n)
            assert out_tile_errors(events) == []
            computes = [e for e in events if e[0] == "compute"]
            assert computes == [("compute", i, i % stages) for i in range(n)]
            reads = [e for e in events if e[0] == "read"]
            assert len(reads) == sum(min(i, delay) + 1 for i in range(n))
            assert len([e for e in events if e[0] == "copy_out"]) == (n if outputs else 0)


def test_out_tile_checker_catches_a_missing_sync():
    events = _pipe(3, 0).schedule(3)
    k = events.index(("copy_out", 0))
    assert out_tile_errors(events[:k - 1] + events[k:])


# --- validation ---------------------------------------------------------------------------------

def test_bad_parameters_are_refused():
    spec = BlockSpec((4, 8), lambda k: (0, k))
    body = lambda *a: None  # noqa: E731
    with pytest.raises(ValueError, match="stages must be an int >= 2"):
        emit_pipeline(body, (4,), [spec], stages=1)
    with pytest.raises(ValueError, match="delay_release \\+ 2"):
        emit_pipeline(body, (4,), [spec], stages=3, delay_release=2)
    with pytest.raises(ValueError, match="delay_release must be an int >= 0"):
        emit_pipeline(body, (4,), [spec], stages=3, delay_release=-1)
    with pytest.raises(ValueError, match="at least one in_spec"):
        emit_pipeline(body, (4,), [])
    with pytest.raises(ValueError, match="at least one dimension"):
        emit_pipeline(body, (), [spec])
    with pytest.raises(TypeError, match="body must be callable"):
        emit_pipeline(None, (4,), [spec])
    with pytest.raises(TypeError, match="BlockSpecs"):
        emit_pipeline(body, (4,), [(4, 8)])
    with pytest.raises(ValueError, match="num_steps"):
        emit_pipeline(body, (4,), [spec]).schedule(-1)
    with pytest.raises(ValueError, match="block_shape"):
        BlockSpec((4, 0), lambda k: (0, k))
    with pytest.raises(ValueError, match="block_shape"):
        BlockSpec((4, 8, 2), lambda k: (0, k))
    with pytest.raises(TypeError, match="index_map"):
        BlockSpec((4, 8), (0, 1))
    with pytest.raises(ValueError, match="shape"):
        BlockSpec((4, 8), lambda k: (0, k), Layout((8, 4)))
    with pytest.raises(ValueError, match="injective"):
        BlockSpec((4, 8), lambda k: (0, k), Layout((4, 8), (1, 2)))
    with pytest.raises(ValueError, match="unit_mode"):
        GlobalMatrix("X", "M", "N", "ld", unit_mode=2)
    pipe = emit_pipeline(body, (4,), [spec], [spec])
    X = GlobalMatrix("X", "M", "N", "ld")
    with pytest.raises(ValueError, match="1 inputs and 1 outputs expected"):
        pipe.emit(Source(), [X], [], threads=32)
    with pytest.raises(ValueError, match="shared must be 'static' or 'dynamic'"):
        pipe.emit(Source(), [X], [X], threads=32, shared="global")
    with pytest.raises(ValueError, match="index_map"):
        emit_pipeline(body, (4, 4), [spec]).emit(Source(), [X], threads=32)


def test_shared_memory_limits():
    big = BlockSpec((64, 64), lambda k: (0, k))            # 16 KiB per slot
    X = GlobalMatrix("X", "M", "N", "ld", vector=4)
    pipe = emit_pipeline(lambda *a: None, ("K",), [big], [big], stages=3)
    with pytest.raises(ValueError, match="static shared memory.*use shared='dynamic'"):
        pipe.emit(Source(), [X], [X], threads=32)          # 64 KiB
    info = pipe.emit(Source(), [X], [X], threads=32, shared="dynamic")
    assert (info.shared_bytes, info.dynamic) == (65536, True)
    huge = emit_pipeline(lambda *a: None, ("K",), [big, big], [big], stages=7)
    with pytest.raises(ValueError, match="dynamic shared memory"):
        huge.emit(Source(), [X, X], [X], threads=32, shared="dynamic")   # 240 KiB


def test_back_is_limited_to_the_delay_window():
    seen = []

    def body(src, step, x):
        seen.append(x.back(1).base)
        with pytest.raises(ValueError, match="delay_release=1"):
            x.back(2)
    pipe = emit_pipeline(body, ("K",), [BlockSpec((4, 8), lambda k: (0, k))], [], 3, 1)
    pipe.emit(Source(), [GlobalMatrix("X", "M", "N", "ld")], threads=32)
    assert seen == ["(((_rg_rs + U(2)) % U(3)) * U(32))"]


# --- the copy partition -------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.sampled_from([1, 2, 4]), st.integers(0, 1),
       st.sampled_from([1, 3, 8, 32, 50]))
def test_threads_cover_every_vector_once(rows, cols, vec, unit, threads):
    shape = (rows, cols * vec) if unit == 1 else (rows * vec, cols)
    t = sym("t")
    seen = []
    for tid in range(threads):
        for (r, c), guard in _thread_copies(shape, unit, vec, threads, t):
            if guard is not None and not tid < int(guard.split("U(")[1].rstrip(")")):
                continue
            seen.append((int(sympy.sympify(r).subs(t, tid)), int(sympy.sympify(c).subs(t, tid))))
    expected = [(r, c) for r in range(shape[0]) for c in range(shape[1])
                if (c if unit == 1 else r) % vec == 0]
    assert sorted(seen) == sorted(expected)


# --- the pipeline's code run by one fake thread --------------------------------------------------

class FakeThread(CpAsyncGroups):
    """A one-thread block running generated source as plain Python, with a cp.async model:
    ``landing="lazy"``: a copy lands when a wait retires its group; ``"eager"``: at issue.
    Shared arrays are NaN-poisoned; dynamic ones (size 0) all view one buffer of
    ``dynamic_bytes``."""

    def __init__(self, landing, dynamic_bytes=0):
        super().__init__(landing)
        self.shared = []
        self.dynamic = np.full(dynamic_bytes // 4, np.nan, np.float32).view(np.uint8)

    def shared_array(self, n, dtype, alignment=None):
        if n == 0:
            a = self.dynamic.view(dtype)
        else:
            a = np.full(n, np.nan, dtype)
        self.shared.append(a)
        return a

    def copy(self, dst, di, src, si, nbytes, src_bytes):
        di, si, src_bytes = int(di), int(si), int(src_bytes)
        n = nbytes // dst.itemsize
        assert nbytes in (4, 8, 16) and di % n == 0 and 0 <= src_bytes <= nbytes
        assert di + n <= dst.size, "copy past the end of shared memory"
        if src_bytes:
            assert si % n == 0 and si + math.ceil(src_bytes / src.itemsize) <= src.size

        def land():
            out = dst[di:di + n].view(np.uint8)
            out[:] = 0
            if src_bytes:
                out[:src_bytes] = src[si:si + n].view(np.uint8)[:src_bytes]
        self.events.append(("copy", next(k for k, a in enumerate(self.shared) if a is dst), di))
        if self.landing == "eager":
            land()
        else:
            self.open.append(land)

    def run(self, source, *args):
        U = np.uint32
        ns = {"np": np, "U": U, "TRACE": lambda step, base: self.events.append(
            ("compute", int(step), int(base))),
              "cuda": SimpleNamespace(
                  threadIdx=SimpleNamespace(x=0), blockIdx=SimpleNamespace(x=0),
                  gridDim=SimpleNamespace(x=1), shared=SimpleNamespace(array=self.shared_array),
                  syncthreads=lambda: self.events.append(("sync",))),
              "cp_async_ca_zfill": self.copy, "cp_async_cg_zfill": self.copy,
              "cp_async_commit": self.commit, "cp_async_wait": self.wait}
        for v in (2, 4):
            ns[f"ld_v{v}_f32"] = _vector_load(v)
            ns[f"st_v{v}_f32"] = _vector_store(v)
        # the module's constants and kernel, not its imports (this namespace stands in)
        exec("\n".join(line for line in source.splitlines()
                       if not line.startswith(("import ", "from "))), ns)
        ns["kernel"](*[U(a) if isinstance(a, int) else a for a in args])
        return self


def _vector_load(v):
    def load(a, i):
        i = int(i)
        assert i % v == 0, "misaligned vector load"
        return tuple(a[i:i + v])
    return load


def _vector_store(v):
    def store(a, i, *xs):
        i = int(i)
        assert i % v == 0, "misaligned vector store"
        a[i:i + v] = xs
    return store


def trace_of(thread, slot_elems, stages):
    """The fake thread's events as the schedule's: copies by slot (the ring of an input may
    start inside a dynamic buffer: slots counted from element 0, modulo stages), computes
    by the slot of their first input."""
    out = []
    for e in thread.events:
        if e[0] == "copy":
            e = ("copy_in", (e[2] // slot_elems) % stages)
            if out and out[-1] == e:
                continue
        elif e[0] == "compute":
            e = ("compute", e[1], (e[2] // slot_elems) % stages)
        out.append(e)
    return out


def projected(schedule):
    """A schedule as the fake thread sees it: copies by slot, no reads or copy_outs."""
    return [("copy_in", e[2]) if e[0] == "copy_in" else e for e in schedule
            if e[0] not in ("read", "copy_out")]


def window_kernel(stages, delay, block=(2, 8), smem_layout=None, mutate=None,
                  shared="static"):
    """out block s = x block s + x block s - delay (2 x for delay 0; x for s < delay): the body
    reads the oldest tile the delay window keeps."""
    R, C = block
    spec = BlockSpec(block, lambda s: (0, s), smem_layout)

    def body(src, step, x, o):
        src(f"TRACE({step.index}, {x.base})")
        for r in range(R):
            for c in range(C):
                src(f"_v = {x.array}[{x.offset(r, c)}]")
                if delay:
                    with src.block(f"if {step.index} >= U({delay}):"):
                        src(f"_v = _v + {x.array}[{x.back(delay).offset(r, c)}]")
                else:
                    src("_v = _v + _v")
                src(f"{o.array}[{o.offset(r, c)}] = _v")

    pipe = emit_pipeline(body, ("steps",), [spec], [BlockSpec(block, lambda s: (0, s))],
                         stages, delay)
    if mutate:
        mutate(pipe._plan)
    src = Source()
    with src.block("def kernel(X, O, M, N, ld, steps):"):
        src("t = U(0)")
        info = pipe.emit(src, [GlobalMatrix("X", "M", "N", "ld", vector=4)],
                         [GlobalMatrix("O", "M", "N", "ld", vector=4)], threads=1,
                         simulator=True, shared=shared)
    return pipe, info, src.text()


def run_window(stages, delay, steps, landing, **kw):
    pipe, info, text = window_kernel(stages, delay, **kw)
    R, C = kw.get("block", (2, 8))
    n, ld = C * steps - 3, C * steps               # a partial last block, padded rows
    x = np.random.default_rng(steps).standard_normal((R, ld)).astype(np.float32)
    out = np.full((R, ld), -7.0, np.float32)
    thread = FakeThread(landing, info.shared_bytes if info.dynamic else 0)
    thread.run(text, x.reshape(-1), out.reshape(-1), R, n, ld, steps)
    shifted = np.zeros_like(x)                   # x block s - delay at block s
    shifted[:, C * delay:] = x[:, :max(0, ld - C * delay)]
    want = 2 * x if delay == 0 else x + shifted
    want[:, n:] = -7.0
    return pipe, info, thread, np.array_equal(out, want)


@pytest.mark.parametrize("stages, delay", GRID)
def test_emitted_pipeline_follows_the_schedule_and_is_exact(stages, delay):
    for steps in range(1, 11):
        for landing in ("lazy", "eager"):
            shared = "dynamic" if (steps + stages) % 2 else "static"
            pipe, info, thread, exact = run_window(stages, delay, steps, landing, shared=shared)
            assert exact, (stages, delay, steps, landing, shared)
            assert info.dynamic == (shared == "dynamic")
            assert trace_of(thread, info.slot_elems[0], stages) == projected(pipe.schedule(steps))


def test_dynamic_shared_layout():
    """Dynamic shared memory: the input ring, then the out tile, in one aliased buffer."""
    _, info, text = window_kernel(3, 0, shared="dynamic")
    assert (info.shared_bytes, info.slot_elems) == (4 * 16 * (3 + 1), (16,))
    assert text.count("cuda.shared.array(0, np.dtype(np.float32))") == 2
    assert "(_u48 + " in text                         # the out tile after 3 slots of 16


def test_broken_plans_give_wrong_results():
    """The fake thread's cp.async model can fail: a wait count one too large reads tiles
    still in flight; refilling the slot being read (one step too far ahead) overwrites it."""
    for mutate, landing in ((BROKEN_PLANS["wait one too large"], "lazy"),
                            (BROKEN_PLANS["one step too far ahead"], "eager")):
        for shared in ("static", "dynamic"):
            pipe, _, _, exact = run_window(3, 0, 6, landing, mutate=mutate, shared=shared)
            assert not exact, (landing, shared)
            assert check_ring(pipe.schedule(6), 6)


def test_swizzled_and_transposed_shared_layouts():
    swizzled = ComposedLayout(Swizzle(3, 2, 3), 0, Layout((8, 32), (32, 1)))
    for layout, vec in ((swizzled, 4), (Layout((8, 32), (1, 8)), 1)):
        for landing in ("lazy", "eager"):
            _, info, _, exact = run_window(3, 1, 5, landing, block=(8, 32), smem_layout=layout)
            assert exact and info.in_vectors == (vec,), (layout, landing)


@pytest.mark.parametrize("stages, delay, shared", [(2, 0, "static"), (3, 1, "dynamic"),
                                                   (5, 2, "static"), (6, 0, "dynamic")])
def test_add_kernel_by_one_fake_thread(stages, delay, shared):
    cfg = AddConfig(block=(2, 8), stages=stages, delay_release=delay, threads=1, shared=shared)
    text = add_source(cfg, simulator=True, jit=False)
    assert ("cuda.shared.array(0," in text) == (shared == "dynamic")
    for steps in (1, 4, 9):
        m, n = 3, 4 * steps - 1                   # 2 x ceil(n / 8) blocks
        x, y = (np.random.default_rng(k).standard_normal((m, n + 1)).astype(np.float32)
                for k in (steps, steps + 100))
        for landing in ("lazy", "eager"):
            out = np.full((m, n + 1), np.nan, np.float32)
            FakeThread(landing, cfg.shared_bytes).run(
                text, x.reshape(-1), y.reshape(-1), out.reshape(-1), m, n, n + 1, n + 1, n + 1)
            assert np.array_equal(out[:, :n], (x + y)[:, :n]), (stages, delay, steps, landing)


def test_add_config_shared_memory():
    assert not AddConfig().dynamic
    assert AddConfig(shared="dynamic").dynamic
    cfg = AddConfig(block=(16, 128), stages=3)                  # 7 tiles of 8 KiB: 56 KiB
    assert cfg.dynamic and cfg.shared_bytes == 7 * 8192
    with pytest.raises(ValueError, match="static shared memory"):
        AddConfig(block=(16, 128), stages=3, shared="static")
    with pytest.raises(ValueError, match="227 KiB of dynamic"):
        AddConfig(block=(64, 128), stages=4)                   # 288 KiB
    with pytest.raises(ValueError, match="shared must be"):
        AddConfig(shared="global")


# --- the numba CUDA simulator --------------------------------------------------------------------

def simulate(which):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "sim_pipeline_cases.py"), which],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("stages, delay, shared", [     # stages 2-4, delays 0-2, both kinds
    (2, 0, "static"), (3, 1, "dynamic"), (4, 0, "dynamic"), (4, 2, "static")])
def test_add_matrices_in_simulator_with_strict_cp_async(stages, delay, shared):
    got = simulate(f"strict:{stages}:{delay}:{shared}")
    assert got["results"] and all(got["results"].values()), got["results"]
    assert got["trace_run"]
    spec = AddConfig(block=(4, 16), stages=stages, delay_release=delay)._spec()
    pipe = emit_pipeline(lambda *a: None, ("steps",), [spec, spec], [spec], stages, delay)
    expected = projected(pipe.schedule(got["steps"]))
    trace = []
    for e in map(tuple, got["trace"]):
        if not (trace and e[0] == "copy_in" and trace[-1] == e):
            trace.append(e)
    assert trace == [e for e in expected if e[0] != "compute"]


def test_add_matrices_in_simulator_with_stock_twins():
    got = simulate("stock")
    assert got and all(got.values()), got


EXPECTED_ERRORS = {
    "shapes differ": ("ValueError", "must match"),
    "float64": ("TypeError", "float64"),
    "int32 out": ("TypeError", "int32"),
    "host array": ("TypeError", "host"),
    "3-D": ("ValueError", "2-D"),
    "strided view": ("ValueError", "stride"),
    "out shape": ("ValueError", "out has shape"),
    "stages": ("ValueError", "stages"),
    "delay_release": ("ValueError", "delay_release"),
    "block": ("ValueError", "block"),
    "threads": ("ValueError", "threads"),
    "num_blocks": ("ValueError", "num_blocks"),
    "too much shared": ("ValueError", "dynamic shared memory"),
    "static too small": ("ValueError", "static shared memory"),
    "shared option": ("ValueError", "shared must be"),
    "empty": ("ValueError", "empty"),
}


def test_add_matrices_refuses_bad_input():
    got = simulate("errors")
    for name, (etype, words) in EXPECTED_ERRORS.items():
        assert got[name][0] == etype, (name, got[name])
        assert words in got[name][1], (name, got[name])
        assert got[name][1].startswith(("add_matrices:", "emit_pipeline:")), got[name]


# --- PTX for sm_80, compiled on the CPU ----------------------------------------------------------

def _compile_ptx(cfg):
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1":
        pytest.skip("PTX is compiled outside the simulator")
    from numba import cuda
    from gemm.codegen import load_module
    from gemm.elementwise import ADD_SIGNATURE
    kernel = load_module(add_source(cfg, jit=False), "add_ptx").kernel
    return cuda.compile_ptx(kernel, ADD_SIGNATURE, cc=(8, 0))[0]


@pytest.mark.parametrize("cfg", [
    AddConfig(),
    AddConfig(block=(4, 128), stages=6, delay_release=1),
    AddConfig(block=(32, 128), stages=4, threads=256)])       # 144 KiB of dynamic shared memory
def test_ptx_has_cp_async_and_no_local_memory(cfg):
    ptx = _compile_ptx(cfg)
    assert "cp.async.cg.shared.global" in ptx and "cp.async.commit_group" in ptx
    assert "st.global.v4.f32" in ptx and "ld.shared.v4.f32" in ptx
    assert ".local" not in ptx
    dynamic = re.findall(r"\.extern \.shared \.align (\d+) \.b8 \w+\[\]", ptx)
    static = re.findall(r"\.visible \.shared \.align \d+ \.b8 \w+\[(\d+)\]", ptx)
    if cfg.dynamic:
        assert dynamic and not static and all(int(a) >= 16 for a in dynamic)
    else:
        assert not dynamic and sum(map(int, static)) == cfg.shared_bytes
    waits = {int(n) for n in re.findall(r"cp\.async\.wait_group (\d+)", ptx)}
    assert waits == {cfg.stages - 2 - cfg.delay_release, 0}
    ptxas = shutil.which("ptxas") or _nvcc_ptxas()
    if ptxas:
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"add_{os.getpid()}.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        proc = subprocess.run([ptxas, "-arch=sm_80", "-v", path, "-o", os.devnull],
                              capture_output=True, text=True)
        os.remove(path)
        assert proc.returncode == 0, proc.stderr
        assert "0 bytes spill stores" in proc.stderr and "0 bytes spill loads" in proc.stderr


def _nvcc_ptxas():
    try:
        import nvidia.cuda_nvcc as nvcc
    except ImportError:
        return None
    for root in getattr(nvcc, "__path__", []):
        path = os.path.join(root, "bin", "ptxas")
        if os.path.exists(path):
            return path
    return None
