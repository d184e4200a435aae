"""gemm._env: choosing numba's CUDA simulator before numba is imported."""

import os
import subprocess
import sys

import pytest

from gemm import _env


def _child(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                          capture_output=True, text=True)


def test_use_simulator_without_gpu_keeps_a_simulator_asked_for():
    code = ("from gemm._env import use_simulator_without_gpu as u; import os; "
            "print(u(), os.environ['NUMBA_ENABLE_CUDASIM'])")
    done = _child(code, NUMBA_ENABLE_CUDASIM="1")
    assert done.returncode == 0 and done.stdout.split() == ["True", "1"], done.stderr


def test_use_simulator_without_gpu_refuses_once_numba_cuda_is_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba.cuda", sys.modules.get("numba.cuda", object()))
    with pytest.raises(RuntimeError, match="numba.cuda is imported already"):
        _env.use_simulator_without_gpu()
