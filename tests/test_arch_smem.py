"""gemm.arch.smem without a GPU: argument checks, limits, and the driver calls it makes, seen
through stand-ins for the device, the compiled kernel and numba's driver wrapper (the real
attribute is exercised by the GPU tests)."""

import types as pytypes

import pytest

from gemm._env import simulator_active

if simulator_active():
    pytest.skip("needs the real numba.cuda driver bindings", allow_module_level=True)

from numba import cuda  # noqa: E402
from numba.cuda.cudadrv import driver as numba_driver  # noqa: E402

from gemm.arch import smem  # noqa: E402

ATTR = numba_driver.binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


class Recorder:
    def __init__(self):
        self.calls = []

    def cuKernelSetAttribute(self, *args):
        self.calls.append(("cuKernelSetAttribute", args))

    def cuFuncSetAttribute(self, *args):
        self.calls.append(("cuFuncSetAttribute", args))


def fake_kernel(handle, static=0):
    cufunc = pytypes.SimpleNamespace(handle=handle, attrs=pytypes.SimpleNamespace(shared=static))
    return pytypes.SimpleNamespace(_codelibrary=pytypes.SimpleNamespace(get_cufunc=lambda: cufunc))


@pytest.fixture
def fake_gpu(monkeypatch):
    device = pytypes.SimpleNamespace(id=0, name="Fake H100",
                                     MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=232448)
    recorder = Recorder()
    monkeypatch.setattr(cuda, "get_current_device", lambda: device)
    monkeypatch.setattr(numba_driver, "driver", recorder)
    monkeypatch.setattr(smem, "_done", {})
    return recorder


def test_sets_the_kernel_attribute_once(fake_gpu):
    handle = numba_driver.binding.CUkernel(1234)
    k = fake_kernel(handle, static=1024)
    smem.allow_dynamic_shared(k, 96 * 1024)
    smem.allow_dynamic_shared(k, 64 * 1024)        # already allowed: no second call
    assert fake_gpu.calls == [("cuKernelSetAttribute", (ATTR, 96 * 1024, handle, 0))]
    smem.allow_dynamic_shared(k, 128 * 1024)
    assert fake_gpu.calls[-1] == ("cuKernelSetAttribute", (ATTR, 128 * 1024, handle, 0))


def test_cufunction_handles_use_cuFuncSetAttribute(fake_gpu):
    handle = numba_driver.binding.CUfunction(99)
    smem.allow_dynamic_shared(fake_kernel(handle), 50 * 1024)
    assert fake_gpu.calls == [("cuFuncSetAttribute", (handle, ATTR, 50 * 1024))]


def test_small_sizes_need_nothing_and_large_ones_are_refused(fake_gpu):
    k = fake_kernel(numba_driver.binding.CUkernel(7), static=8 * 1024)
    smem.allow_dynamic_shared(k, 40 * 1024)        # 48 KiB with the static part: default limit
    assert fake_gpu.calls == []
    with pytest.raises(ValueError, match="exceed the 224256 bytes"):
        smem.allow_dynamic_shared(k, 224257)


def test_argument_errors():
    with pytest.raises(ValueError, match="nbytes must be an int"):
        smem.allow_dynamic_shared(None, -1)
    with pytest.raises(ValueError, match="nbytes must be an int"):
        smem.allow_dynamic_shared(None, 1.5)

    @cuda.jit
    def never_compiled(x):
        x[0] = 1
    with pytest.raises(ValueError, match="no compiled overload yet"):
        smem.allow_dynamic_shared(never_compiled, 64 * 1024)
    with pytest.raises(ValueError, match="no compiled overload for"):
        smem.allow_dynamic_shared(never_compiled, 64 * 1024, "void(float32[::1])")
    with pytest.raises(TypeError, match="must be a @cuda.jit dispatcher"):
        smem.allow_dynamic_shared(object(), 64 * 1024)
    assert smem.max_dynamic_shared_bytes(2048, 232448) == 230400
