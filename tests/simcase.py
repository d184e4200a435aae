"""Shared by the simulator case scripts (tests/sim_*_cases.py and the test files that run
themselves in the simulator): what each bad call raised, and running a script there."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
