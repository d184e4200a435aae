"""The cp.async ring's plan and model (gemm.pipeline) and the pipelined add_matrices.

- ``check_ring``, the model of cp.async groups and shared slots, on small hand-written
  schedules: it accepts a correct one and names each broken rule.
- ``ring_schedule`` passes the model over stages 2..6, delay_release 0..stages-2, 0..12
  steps, with a constant wait count and the full prefetch depth; broken plans (a wait one
  too large, no sync, one step too far ahead, no empty groups) fail it.
- add_matrices (written with gemm.cute) in numba's CUDA simulator
  (tests/sim_pipeline_cases.py) with the strict cp.async twins, thread 0's copies, waits and
  barriers equal to the ring's schedule; its PTX for sm_80 compiled on the CPU.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from gemm.elementwise import AddConfig
from gemm.pipeline import check_ring, ring_schedule, _Ring, _ring_events

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


# --- add_matrices -------------------------------------------------------------------------------

def test_add_config_shared_memory():
    assert not AddConfig().dynamic
    assert AddConfig(shared="dynamic").dynamic
    cfg = AddConfig(block=(16, 128), stages=4)                  # 8 tiles of 8 KiB: 64 KiB
    assert cfg.dynamic and cfg.shared_bytes == 8 * 8192
    assert AddConfig(block=(3, 5)).slot == 16                    # 15 floats, padded to 16
    with pytest.raises(ValueError, match="static shared memory"):
        AddConfig(block=(16, 128), stages=4, shared="static")
    with pytest.raises(ValueError, match="227 KiB of dynamic"):
        AddConfig(block=(64, 128), stages=4)                   # 256 KiB
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
    # thread 0's copies (x's and y's into one slot: one event), commits, waits and barriers
    # are the ring's schedule, event for event
    expected = [e if e[0] != "copy_in" else ("copy_in", e[2])
                for e in ring_schedule(stages, got["steps"], delay) if e[0] != "read"]
    trace = []
    for e in map(tuple, got["trace"]):
        if not (trace and e[0] == "copy_in" and trace[-1] == e):
            trace.append(e)
    assert trace == expected


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
        assert got[name][1].startswith("add_matrices:"), got[name]


# --- PTX for sm_80, compiled on the CPU ----------------------------------------------------------

def _compile_ptx(cfg):
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1":
        pytest.skip("PTX is compiled outside the simulator")
    from numba import cuda
    from gemm.elementwise import ADD_SIGNATURE, kernel_function
    return cuda.compile_ptx(kernel_function(cfg), ADD_SIGNATURE, cc=(8, 0))[0]


@pytest.mark.parametrize("cfg", [
    AddConfig(),
    AddConfig(block=(4, 128), stages=6, delay_release=1),
    AddConfig(block=(32, 128), stages=4, threads=256)])       # 128 KiB of dynamic shared memory
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
