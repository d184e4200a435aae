"""The pipeline emitter (gemm.pipeline) and the pipelined add_matrices (gemm.elementwise).

- ``check_schedule``: an independent model of cp.async groups and shared slots that every
  schedule must pass, over stages 2..6, delay_release 0..stages-2, 1..10 steps; and mutated
  schedules (the drain trap, missing syncs, early refills) that it must reject.
- The emitted code run as plain Python by one fake CUDA thread whose cp.async copies land either
  at the wait that retires their group ("lazy": catches reads before the right wait) or at
  once ("eager": catches refills of a slot still being read): its trace of copies, commits,
  waits, syncs and computes equals ``schedule()``, and its results are exact.
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
from gemm.pipeline import (
    BlockSpec, GlobalMatrix, emit_pipeline, _thread_copies,
)
from layoutalg import ComposedLayout, Layout, Swizzle

HERE = os.path.dirname(__file__)
GRID = [(s, d) for s in range(2, 7) for d in range(0, s - 1)]


# --- an independent checker of schedules ------------------------------------------------------

def check_schedule(events, stages, delay, num_steps):
    """Violations of a schedule (empty: none), from a model of cp.async and shared slots.

    cp.async: copies join the open group, ``commit`` closes it, ``wait n`` retires all but the
    newest n committed groups; a copy is usable by all threads after a retiring wait and a
    sync. Slots: step k's tile may be read by computes k..k+delay, so a copy into its slot
    needs those computes done and a sync after them.
    """
    errors = []
    groups, open_group = deque(), []
    landed, visible = set(), set()
    holder, slot_of, computed_at, released = {}, {}, {}, set()
    syncs, issued, computed = [], [], []

    def readers_done(k, at, what):
        last = [computed_at.get(r) for r in range(k, min(k + delay, num_steps - 1) + 1)]
        if None in last:
            errors.append(f"event {at}: {what} while step {k} may still be read")
        elif not any(s > max(last) for s in syncs):
            errors.append(f"event {at}: {what} with no sync after the last read of step {k}")

    for at, ev in enumerate(events):
        kind = ev[0]
        if kind == "copy_in":
            _, step, slot = ev
            if slot in holder:
                prev = holder[slot]
                readers_done(prev, at, f"copy of step {step} into slot {slot}")
                if prev not in released:
                    errors.append(f"event {at}: slot {slot} refilled before step {prev} "
                                  "was released")
            holder[slot], slot_of[step] = step, slot
            open_group.append(step)
            issued.append(step)
        elif kind == "commit":
            groups.append(open_group)
            open_group = []
        elif kind == "wait":
            while len(groups) > ev[1]:
                landed.update(groups.popleft())
        elif kind == "sync":
            syncs.append(at)
            visible |= landed
        elif kind == "compute":
            _, step, slot = ev
            if step != len(computed):
                errors.append(f"event {at}: compute of step {step} out of order")
            if slot_of.get(step) != slot:
                errors.append(f"event {at}: compute of step {step} in slot {slot}, copied "
                              f"into {slot_of.get(step)}")
            for k in range(max(0, step - delay), step + 1):
                if k not in visible:
                    errors.append(f"event {at}: step {step} reads step {k}'s tile before it "
                                  "was retired by a wait and synced")
                if holder.get(slot_of.get(k)) != k:
                    errors.append(f"event {at}: step {step} reads step {k}'s tile, overwritten")
            ahead = stages - 1 - delay
            if max(issued, default=-1) != min(num_steps - 1, step + ahead):
                errors.append(f"event {at}: step {step} computes with steps up to "
                              f"{max(issued, default=-1)} issued, not "
                              f"{min(num_steps - 1, step + ahead)} (pipelining depth)")
            computed_at[step] = at
            computed.append(step)
        elif kind == "release":
            _, step, slot = ev
            readers_done(step, at, f"release of step {step}")
            if holder.get(slot) != step:
                errors.append(f"event {at}: release of step {step} from slot {slot} holding "
                              f"{holder.get(slot)}")
            released.add(step)
        elif kind == "copy_out":
            step = ev[1]
            if step not in computed_at or not any(s > computed_at[step] for s in syncs):
                errors.append(f"event {at}: copy_out of step {step} without compute and sync")
        else:
            errors.append(f"event {at}: unknown event {ev}")
    if open_group or groups:
        errors.append(f"copies not retired at the end: {list(groups)} {open_group}")
    if computed != list(range(num_steps)) or sorted(issued) != list(range(num_steps)):
        errors.append(f"steps computed {computed}, issued {issued}")
    return errors


def _pipe(stages, delay, outputs=True):
    spec = BlockSpec((8, 32), lambda k: (0, k))
    return emit_pipeline(lambda *a: None, ("K",), [spec, spec], [spec] if outputs else [],
                         stages, delay)


@pytest.mark.parametrize("stages, delay", GRID)
def test_every_schedule_passes_the_model(stages, delay):
    for outputs in (False, True):
        pipe = _pipe(stages, delay, outputs)
        for n in range(1, 11):
            events = pipe.schedule(n)
            assert check_schedule(events, stages, delay, n) == [], (stages, delay, n)
            waits = [e[1] for e in events if e[0] == "wait"]
            drain = [min(stages - 2 - delay, n - 1 - i) for i in range(n)]
            assert waits == drain                  # steady value, then decreasing to 0
    assert _pipe(stages, delay).schedule(0) == []


def _mutate(events, fn):
    return [x for e in events for x in fn(e)]


def test_the_model_rejects_broken_schedules():
    good = _pipe(4, 0).schedule(6)
    steady = 2
    trap = _mutate(good, lambda e: [("wait", steady)] if e[0] == "wait" else [e])
    assert any("before it was retired" in m for m in check_schedule(trap, 4, 0, 6))
    no_sync = []
    for e in good:                                 # drop the sync that follows each wait
        if e == ("sync",) and no_sync and no_sync[-1][0] == "wait":
            continue
        no_sync.append(e)
    assert check_schedule(no_sync, 4, 0, 6)
    early = []                                     # refill before the wait and the sync
    for e in _pipe(4, 0, outputs=False).schedule(6):
        if e[0] in ("copy_in", "commit") and "wait" in [x[0] for x in early]:
            k = max(i for i, x in enumerate(early) if x[0] == "wait")
            early.insert(k, e)
        else:
            early.append(e)
    assert any("no sync after the last read" in m for m in check_schedule(early, 4, 0, 6))
    assert any("overwritten" in m for m in check_schedule(_pipe(3, 0).schedule(5), 3, 1, 5))
    last_wait = max(i for i, e in enumerate(good) if e[0] == "wait")
    assert check_schedule(good[:last_wait] + good[last_wait + 1:], 4, 0, 6)


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
    with pytest.raises(ValueError, match="1 inputs and 1 outputs expected"):
        pipe.emit(Source(), [GlobalMatrix("X", "M", "N", "ld")], [], threads=32)
    with pytest.raises(ValueError, match="index_map"):
        emit_pipeline(body, (4, 4), [spec]).emit(Source(), [GlobalMatrix("X", "M", "N", "ld")],
                                                  threads=32)


def test_back_is_limited_to_the_delay_window():
    seen = []

    def body(src, step, x):
        seen.append(x.back(1).base)
        with pytest.raises(ValueError, match="delay_release=1"):
            x.back(2)
    pipe = emit_pipeline(body, ("K",), [BlockSpec((4, 8), lambda k: (0, k))], [], 3, 1)
    pipe.emit(Source(), [GlobalMatrix("X", "M", "N", "ld")], threads=32)
    assert seen == ["(((_pl_i + U(2)) % U(3)) * U(32))"]


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


# --- generated code run by one fake thread --------------------------------------------------------

class FakeThread:
    """A one-thread block running generated source as plain Python, with a cp.async model:
    ``landing="lazy"``: a copy lands when a wait retires its group; ``"eager"``: at issue."""

    def __init__(self, landing):
        self.landing, self.events = landing, []
        self.groups, self.open, self.shared = deque(), [], []

    def shared_array(self, n, dtype, alignment=None):
        a = np.full(n, np.nan, dtype)
        self.shared.append(a)
        return a

    def copy(self, dst, di, src, si, nbytes, src_bytes):
        di, si, src_bytes = int(di), int(si), int(src_bytes)
        n = nbytes // dst.itemsize
        assert nbytes in (4, 8, 16) and di % n == 0 and 0 <= src_bytes <= nbytes
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

    def commit(self):
        self.events.append(("commit",))
        self.groups.append(self.open)
        self.open = []

    def wait(self, n):
        self.events.append(("wait", n))
        while len(self.groups) > n:
            for land in self.groups.popleft():
                land()

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
        exec(source[source.index("def kernel"):], ns)
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


def trace_of(thread, slot_elems):
    """The fake thread's events as the schedule's (copies per slot, computes by slot)."""
    out = []
    for e in thread.events:
        if e[0] == "copy":
            e = ("copy_in", e[2] // slot_elems[e[1]])
            if out and out[-1] == e:
                continue
        elif e[0] == "compute":
            e = ("compute", e[1], e[2] // slot_elems[0])
        out.append(e)
    return out


def projected(schedule):
    keep = {"copy_in": lambda e: ("copy_in", e[2]), "commit": lambda e: ("commit",)}
    return [keep.get(e[0], lambda e: e)(e) for e in schedule
            if e[0] not in ("release", "copy_out")]


def window_kernel(stages, delay, block=(2, 8), smem_layout=None, mutate=None):
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
                         simulator=True)
    return pipe, info, src.text()


def run_window(stages, delay, steps, landing, **kw):
    pipe, info, text = window_kernel(stages, delay, **kw)
    R, C = kw.get("block", (2, 8))
    n, ld = C * steps - 3, C * steps               # a partial last block, padded rows
    x = np.random.default_rng(steps).standard_normal((R, ld)).astype(np.float32)
    out = np.full((R, ld), -7.0, np.float32)
    thread = FakeThread(landing).run(text, x.reshape(-1), out.reshape(-1), R, n, ld, steps)
    shifted = np.zeros_like(x)                   # x block s - delay at block s
    shifted[:, C * delay:] = x[:, :max(0, ld - C * delay)]
    want = 2 * x if delay == 0 else x + shifted
    want[:, n:] = -7.0
    return pipe, info, thread, np.array_equal(out, want)


@pytest.mark.parametrize("stages, delay", GRID)
def test_emitted_code_follows_the_schedule_and_is_exact(stages, delay):
    for steps in range(1, 11):
        for landing in ("lazy", "eager"):
            pipe, info, thread, exact = run_window(stages, delay, steps, landing)
            assert exact, (stages, delay, steps, landing)
            slots = info.slot_elems + (info.slot_elems[0],)
            assert trace_of(thread, slots) == projected(pipe.schedule(steps))


def test_broken_plans_give_wrong_results():
    """The fake thread's cp.async model can fail: the drain trap (the steady-state wait count
    kept in the drain) reads tiles still in flight; refilling the slot being read (one step too
    far ahead) overwrites it."""
    def trap(plan):
        plan.wait_count = lambda remaining: plan.ahead - 1

    def too_far(plan):
        plan.ahead += 1
        plan.loop = [("issue", plan.ahead) if op[0] == "issue" else op for op in plan.loop]

    pipe, _, _, exact = run_window(4, 0, 6, "lazy", mutate=trap)
    assert not exact
    assert check_schedule(pipe.schedule(6), 4, 0, 6)
    pipe, _, _, exact = run_window(3, 0, 6, "eager", mutate=too_far)
    assert not exact
    assert check_schedule(pipe.schedule(6), 3, 0, 6)


def test_swizzled_and_transposed_shared_layouts():
    swizzled = ComposedLayout(Swizzle(3, 2, 3), 0, Layout((8, 32), (32, 1)))
    for layout, vec in ((swizzled, 4), (Layout((8, 32), (1, 8)), 1)):
        for landing in ("lazy", "eager"):
            _, info, _, exact = run_window(3, 1, 5, landing, block=(8, 32), smem_layout=layout)
            assert exact and info.in_vectors == (vec,), (layout, landing)


@pytest.mark.parametrize("stages, delay", [(2, 0), (3, 1), (5, 2), (6, 0)])
def test_add_kernel_by_one_fake_thread(stages, delay):
    cfg = AddConfig(block=(2, 8), stages=stages, delay_release=delay, threads=1)
    text = add_source(cfg, simulator=True, jit=False)
    for steps in (1, 4, 9):
        m, n = 3, 4 * steps - 1                   # 2 x ceil(n / 8) blocks
        x, y = (np.random.default_rng(k).standard_normal((m, n + 1)).astype(np.float32)
                for k in (steps, steps + 100))
        for landing in ("lazy", "eager"):
            out = np.full((m, n + 1), np.nan, np.float32)
            FakeThread(landing).run(text, x.reshape(-1), y.reshape(-1), out.reshape(-1),
                                    m, n, n + 1, n + 1, n + 1)
            assert np.array_equal(out[:, :n], (x + y)[:, :n]), (stages, delay, steps, landing)


# --- the numba CUDA simulator ---------------------------------------------------------------------

def simulate(which):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "sim_pipeline_cases.py"), which],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("stages, delay", [(2, 0), (3, 0), (3, 1), (4, 0), (4, 1), (4, 2)])
def test_add_matrices_in_simulator_with_strict_cp_async(stages, delay):
    got = simulate(f"strict:{stages}:{delay}")
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
    "too much shared": ("ValueError", "shared memory"),
    "empty": ("ValueError", "empty"),
}


def test_add_matrices_refuses_bad_input():
    got = simulate("errors")
    for name, (etype, words) in EXPECTED_ERRORS.items():
        assert got[name][0] == etype, (name, got[name])
        assert words in got[name][1], (name, got[name])
        assert got[name][1].startswith(("add_matrices:", "emit_pipeline:")), got[name]


# --- PTX for sm_80, compiled on the CPU -----------------------------------------------------------

def _compile_ptx(cfg):
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1":
        pytest.skip("PTX is compiled outside the simulator")
    from numba import cuda
    from gemm.codegen import load_module
    from gemm.elementwise import ADD_SIGNATURE
    kernel = load_module(add_source(cfg, jit=False), "add_ptx").kernel
    return cuda.compile_ptx(kernel, ADD_SIGNATURE, cc=(8, 0))[0]


@pytest.mark.parametrize("cfg", [AddConfig(), AddConfig(block=(4, 128), stages=6,
                                                        delay_release=1)])
def test_ptx_has_cp_async_and_no_local_memory(cfg):
    ptx = _compile_ptx(cfg)
    assert "cp.async.cg.shared.global" in ptx and "cp.async.commit_group" in ptx
    assert "st.global.v4.f32" in ptx and "ld.shared.v4.f32" in ptx
    assert ".local" not in ptx
    waits = {int(n) for n in re.findall(r"cp\.async\.wait_group (\d+)", ptx)}
    spec = cfg._spec()
    pipe = emit_pipeline(lambda *a: None, ("s",), [spec], [], cfg.stages, cfg.delay_release)
    assert waits == {e[1] for e in pipe.schedule(12) if e[0] == "wait"}
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
