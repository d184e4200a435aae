"""Shared by the simulator case scripts (tests/sim_*_cases.py and the test files that run
themselves in the simulator): what each bad call raised, and running a script there."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def switch_threads_often():
    """Set Python's thread switch interval (5 ms) to 2 ms. The simulator runs a Python
    thread per CUDA thread, and one that waits (a lock, an mbarrier) runs again only at a
    switch. Before :mod:`gemm.arch.sim_threads` (the block's loop woken by events, not
    polling), 50 us made the Hopper kernel's simulations five times faster; since, the
    switches cost more than they save: the Hopper simulator suites (test_hopper_cute's and
    test_fp8's, under ``-n 2`` on a 2-core machine) took 137 s at 50 us and 80-95 s at 1-15 ms
    (2026-11-29), the other users of this function 43 s and 37 s at 50 us and 2 ms.

    At such switches numba's stock simulator can give two threads of a block different
    copies of one static ``cuda.shared.array``; :mod:`gemm.arch.sim_threads` (installed here
    too) makes its lookup atomic."""
    from gemm.arch.sim_threads import install
    sys.setswitchinterval(2e-3)
    install()


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


def check_outcomes(got, expected):
    """Assert that ``got`` (:func:`outcomes`' report) names the cases of ``expected`` ({name:
    (exception type name, text its message holds)}) and each ended as expected."""
    assert set(got) == set(expected), set(got) ^ set(expected)
    for name, (kind, text) in expected.items():
        assert got[name] is not None, f"{name}: no error raised"
        assert got[name][0] == kind and text in got[name][1], (name, got[name])
