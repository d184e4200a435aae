"""gemm.call.binary and the variant-keyed binary names, on the CPU: a compiled kernel's cubin file
is written once and read back by later calls without compiling, per device architecture and
numba version; a Binary loads its module once per CUDA context and raises the dynamic shared
memory limit only when asked for more (against a stand-in for cuda.bindings' driver)."""

import types

import pytest

from gemm.call import binary


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYOUTALG_CACHE", str(tmp_path))
    monkeypatch.setattr(binary, "device_arch", lambda: "sm_90a")
    return tmp_path


def test_cubin_is_compiled_once_then_read(cache):
    calls = []

    def compile_fn():
        calls.append(1)
        return "_Z6kernelv", b"\x7fELF\n\x00cubin bytes"
    first = binary.load_or_compile("_layoutalg_x_1", compile_fn)
    again = binary.load_or_compile("_layoutalg_x_1", compile_fn)
    assert len(calls) == 1
    assert (again.entry, again.cubin) == (first.entry, first.cubin) == \
        ("_Z6kernelv", b"\x7fELF\n\x00cubin bytes")
    (path,) = (cache / "kernels").glob("_layoutalg_x_1.*.cubin")
    assert ".sm_90a.numba-" in path.name
    binary.load_or_compile("_layoutalg_x_2", compile_fn)       # another variant compiles
    assert len(calls) == 2


def test_cubin_files_are_per_architecture(cache, monkeypatch):
    calls = []
    binary.load_or_compile("_layoutalg_y", lambda: calls.append(1) or ("k", b"a"))
    monkeypatch.setattr(binary, "device_arch", lambda: "sm_80")
    got = binary.load_or_compile("_layoutalg_y", lambda: calls.append(1) or ("k", b"b"))
    assert len(calls) == 2 and got.cubin == b"b"


class FakeDriver:
    """The few cuda.bindings.driver calls gemm.call.binary makes, recorded."""

    def __init__(self):
        self.context, self.calls = 7, []
        self.CUdevice_attribute = types.SimpleNamespace(
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR=75,
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR=76,
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=97)
        self.attributes = {75: 9, 76: 0, 97: 232448}
        self.CUfunction_attribute = types.SimpleNamespace(
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8)

    def cuInit(self, flags):
        return (0,)

    def cuCtxGetCurrent(self):
        return 0, self.context

    def cuDeviceGet(self, index):
        return 0, 40 + index

    def cuCtxGetDevice(self):
        return 0, 40

    def cuDeviceGetName(self, length, dev):
        return 0, b"Fake GPU %d" % dev + b"\0" * (length - 10)

    def cuDeviceGetAttribute(self, attr, dev):
        return 0, self.attributes[attr]

    def cuModuleLoadData(self, image):
        self.calls.append(("load", self.context, image))
        return 0, 100 + len(self.calls)

    def cuModuleGetFunction(self, module, name):
        self.calls.append(("get", module, name))
        return 0, module * 10

    def cuFuncSetAttribute(self, func, attr, value):
        self.calls.append(("attr", func, value))
        return (0,)


def test_binary_loads_once_per_context_and_raises_shared_memory_once_in_each(monkeypatch):
    drv = FakeDriver()
    monkeypatch.setattr(binary, "_driver", lambda: drv)
    b = binary.Binary("kern", b"image")
    f = b.function()
    assert b.function() == f == 1010
    assert drv.calls == [("load", 7, b"image"), ("get", 101, b"kern")]
    b.allow_dynamic_shared(100_000)
    b.allow_dynamic_shared(64_000)              # already allowed
    assert drv.calls[-1] == ("attr", 1010, 100_000) and len(drv.calls) == 3
    drv.context = 8                             # another context (GPU): loaded again, and
    g = b.function()                            # allowed the shared memory there too
    assert g != f
    assert [c[0] for c in drv.calls].count("load") == 2
    assert drv.calls[-1] == ("attr", g, 100_000)
    b.function()
    assert [c[0] for c in drv.calls].count("attr") == 2


def test_device_properties_and_arch_from_the_driver(monkeypatch):
    drv = FakeDriver()
    monkeypatch.setattr(binary, "_driver", lambda: drv)
    binary.device_properties.cache_clear()
    assert binary.device_properties(1) == ("Fake GPU 41", (9, 0), 232448)
    assert binary.device_arch() == "sm_90a"
    drv.attributes.update({75: 8, 76: 6})
    assert binary.device_arch() == "sm_86"
    binary.device_properties.cache_clear()


def test_driver_errors_are_named():
    with pytest.raises(RuntimeError, match="cuModuleLoadData failed"):
        binary._check((200, None), "cuModuleLoadData")


def test_binary_names_follow_the_variant_key():
    a = binary.binary_name("simt", ("cfg", 0, 1))
    assert a == binary.binary_name("simt", ("cfg", 0, 1))
    assert a != binary.binary_name("simt", ("cfg", 1, 1))
    assert a.startswith("_layoutalg_simt_")
    assert len(binary.code_version()) == 16


def test_generated_kernels_depend_on_the_algebra_too():
    """The cache key hashes the algebra's files (the layoutalg package) as well as gemm's
    (it once walked a folder that does not exist, so an edit of the algebra kept stale
    kernels)."""
    import os

    import layoutalg
    root = os.path.dirname(os.path.dirname(os.path.abspath(layoutalg.__file__)))
    files = {os.path.relpath(p, root) for p in binary.source_files()}
    assert {os.path.join("layoutalg", f) for f in ("layout.py", "swizzle.py", "tiled.py")} <= files
    assert {os.path.join("gemm", "api.py"), os.path.join("gemm", "arch", "ptx.py")} <= files
