"""Shared by the simulator case scripts (tests/sim_*_cases.py and the test files that run
themselves in the simulator): what each bad call raised, and running a script there."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def switch_threads_often():
    """Shorten Python's thread switch interval (5 ms) to 50 us. The simulator runs a Python
    thread per CUDA thread, and one that waits (a lock, an mbarrier) runs again only at a
    switch: the Hopper kernel's 128-thread warpgroups spent most of their time waiting
    (64x64x640: 12.8 s at 5 ms, 2.5 s at 50 us). The SM80 kernels' simulations, whose
    threads meet at syncthreads (polled by the simulator's main thread), got slower with it."""
    sys.setswitchinterval(5e-5)


def simulator_report(script, *args):
    """Run ``script`` (with the command-line ``args``) with ``NUMBA_ENABLE_CUDASIM=1``
    (numba reads it at import, so in a process of its own) and return the JSON report on
    the last line of its output."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    done = subprocess.run([sys.executable, str(script), *map(str, args)], env=env,
                          capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def outcomes(cases):
    """{name: [exception type name, message]} for each call in ``cases`` (name -> callable);
    ``["no error", ""]`` where the call returned."""
    out = {}
    for name, call in cases.items():
        try:
            call()
            out[name] = ["no error", ""]
        except Exception as e:  # noqa: BLE001 - the test inspects the type
            out[name] = [type(e).__name__, str(e)]
    return out
