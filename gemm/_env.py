"""Where the package runs: on a GPU through numba-cuda, or in numba's CUDA simulator.

numba reads ``NUMBA_ENABLE_CUDASIM`` once, when ``numba.cuda`` is first imported, and swaps in
the simulator for the whole process. ``simulator_active()`` answers the same question without
importing numba.cuda: once numba.cuda is imported it asks numba's own config (the value numba
acted on), before that it parses the environment variable the way numba will.

>>> simulator_active() in (True, False)
True
"""

import os
import subprocess
import sys

__all__ = ["simulator_active", "gpu_present", "use_simulator_without_gpu"]

_VAR = "NUMBA_ENABLE_CUDASIM"


def _from_environment():
    """NUMBA_ENABLE_CUDASIM parsed as numba parses it: an int, unset or unparsable means 0."""
    value = os.environ.get(_VAR)
    if value is None:
        return False
    try:
        return int(value) != 0
    except ValueError:
        return False


def simulator_active():
    """True when numba's CUDA simulator is (or, once numba.cuda is imported, will be) in use."""
    if "numba.cuda" in sys.modules:
        config = sys.modules.get("numba.cuda.core.config")
        if config is not None and hasattr(config, "ENABLE_CUDASIM"):
            return bool(config.ENABLE_CUDASIM)
    return _from_environment()


def gpu_present():
    """Whether numba sees a usable CUDA GPU, asked in a child process (with the simulator
    off), so that this process can still choose the simulator before it imports numba."""
    probe = "from numba import cuda; import sys; sys.exit(0 if cuda.is_available() else 1)"
    env = dict(os.environ, **{_VAR: "0"})
    return subprocess.run([sys.executable, "-c", probe], env=env,
                          capture_output=True).returncode == 0


def use_simulator_without_gpu():
    """Turn numba's CUDA simulator on (``NUMBA_ENABLE_CUDASIM=1``) where it is not on already
    and numba sees no GPU; return whether it is on. Call it before anything imports numba.cuda
    (RuntimeError after: numba has chosen by then)."""
    if "numba.cuda" in sys.modules:
        raise RuntimeError("use_simulator_without_gpu: numba.cuda is imported already; call it "
                           "before anything imports numba")
    if not _from_environment() and not gpu_present():
        os.environ[_VAR] = "1"
    return _from_environment()
