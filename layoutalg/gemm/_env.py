"""Where the package runs: on a GPU through numba-cuda, or in numba's CUDA simulator.

numba reads ``NUMBA_ENABLE_CUDASIM`` once, when ``numba.cuda`` is first imported, and swaps in
the simulator for the whole process. ``simulator_active()`` answers the same question without
importing numba.cuda: once numba.cuda is imported it asks numba's own config (the value numba
acted on), before that it parses the environment variable the way numba will.

>>> simulator_active() in (True, False)
True
"""

import os
import sys

__all__ = ["simulator_active"]

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
