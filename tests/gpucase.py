"""Shared by the GPU test modules (tests/test_*_gpu.py): skip a whole module without a GPU, or a
test without a Hopper GPU."""

import os

import pytest


def require_gpu():
    """Skip the calling test module unless numba sees a usable CUDA GPU (the simulator off)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1":
        pytest.skip("no CUDA GPU: numba's CUDA simulator is on", allow_module_level=True)
    try:
        from numba import cuda
        usable = cuda.is_available()
    except Exception:  # noqa: BLE001 - no driver at all
        usable = False
    if not usable:
        pytest.skip("no CUDA GPU", allow_module_level=True)


def require_hopper():
    """Skip the calling test unless numba sees a GPU of compute capability 9.x (wgmma, TMA,
    mbarrier.try_wait)."""
    require_gpu()
    from numba import cuda
    if cuda.get_current_device().compute_capability[0] != 9:
        pytest.skip("needs a GPU of compute capability 9.x")
