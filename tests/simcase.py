"""Shared by the simulator case scripts (tests/sim_*_cases.py and the test files that run
themselves in the simulator): what each bad call raised, and running a script there."""

import json
import os
import subprocess
import sys
import threading
import traceback
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

    At such switches numba's simulator can give two threads of a block different copies of
    one static ``cuda.shared.array``: it looks the array up by its source line and creates
    it when absent, unlocked (a Hopper case failed so in CI, a consumer finding its mbarriers
    uninitialised). Its lookup is made atomic here."""
    sys.setswitchinterval(2e-3)
    _lock_shared_arrays()


def _lock_shared_arrays():
    """numba's ``FakeCUDAShared.array`` with its lookup-or-create of a static array under a
    lock (the same keys: the caller's file and line; dynamic arrays as before)."""
    import numpy as np
    from numba.cuda import types
    from numba.cuda.np import numpy_support
    from numba.cuda.simulator.kernelapi import FakeCUDAShared
    unlocked = FakeCUDAShared.array
    if getattr(unlocked, "locked", False):
        return
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:     # no lookup: the dynamic array, or refused
            return unlocked(self, shape, dtype, alignment)
        caller = tuple(traceback.extract_stack(sys._getframe())[-2][0:2])
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                dt = numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else dtype
                res = self._allocations[caller] = np.empty(shape, dt)
        return res
    array.locked = True
    FakeCUDAShared.array = array


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
