"""Compiled kernels kept as cubin files and loaded with the CUDA driver.

numba compiles a kernel variant once; its cubin, for the architecture of the device it ran on,
goes into a file named after the variant (:func:`binary_name`: so it changes with the variant,
the package's code and the numba-cuda version) in :func:`cache_dir`.
Every later first call of the variant, in this process or another, reads that file and loads
it with ``cuModuleLoadData``, and ``gemm.call.launch`` launches it: numba is not imported for it,
and numba's target initialisation and disk-cache lookup are not paid (the times:
benchmarks/RESULTS.md, "Time to first result"). The CUDA driver is reached through ``cuda.bindings`` (installed
with numba-cuda).

A :class:`Binary` is loaded into the current CUDA context (the primary context of the device,
which torch, CuPy and numba all use), once per context.
"""

import hashlib
import importlib.metadata
import os
from functools import lru_cache

import layoutalg

__all__ = ["Binary", "load_or_compile", "compiled_binary", "device_arch", "device_properties",
           "sm_count", "stream_capturing", "binary_name", "code_version", "cache_dir"]


# --- the files: where, and named after what -------------------------------------------------

def cache_dir():
    """Where compiled kernels live: ``$LAYOUTALG_CACHE/kernels`` or
    ``~/.cache/layoutalg/kernels``."""
    root = os.environ.get("LAYOUTALG_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "layoutalg")
    path = os.path.join(root, "kernels")
    os.makedirs(path, exist_ok=True)
    return path


def binary_name(prefix, key):
    """The name of a kernel variant's compiled file: ``key`` (a value whose repr names
    everything the kernel depends on) and :func:`code_version` hashed, so that a change to
    the variant or to the package's code changes the file."""
    text = f"{key!r} {code_version()}"
    return f"_layoutalg_{prefix}_{hashlib.sha256(text.encode()).hexdigest()[:20]}"


def _package_dirs():
    """The folders of the two packages kernels depend on: gemm and layoutalg (the algebra
    their layouts come from)."""
    return [os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            os.path.dirname(os.path.abspath(layoutalg.__file__))]


def source_files():
    """The Python files of the gemm and layoutalg packages (what compiled kernels depend
    on), in a fixed order: gemm's, then layoutalg's."""
    found = []
    for package in _package_dirs():
        for folder, dirs, files in os.walk(package):
            dirs.sort()
            found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".py")]
    return found


@lru_cache(maxsize=None)
def code_version():
    """A hash of :func:`source_files` (their paths within the folder holding their package,
    as ``gemm/api.py`` and ``layoutalg/layout.py``, and contents), computed once per process."""
    digest = hashlib.sha256()
    packages = _package_dirs()
    for path in source_files():
        root = os.path.dirname(next(p for p in packages if path.startswith(p + os.sep)))
        with open(path, "rb") as fh:
            digest.update(os.path.relpath(path, root).encode() + b"\0" + fh.read())
    return digest.hexdigest()[:16]


# --- the driver -----------------------------------------------------------------------------


def _driver():
    from cuda.bindings import driver    # on first use: importing this module does without
    return driver


def _check(result, what):
    """The value of a ``cuda.bindings`` call's (error, value...) result; RuntimeError naming
    ``what`` and the driver's error otherwise."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err!r}")
    return values[0] if len(values) == 1 else values


def stream_capturing(stream):
    """Whether CUDA stream ``stream`` (a raw handle) is capturing a CUDA graph: then
    ``cuMemAlloc``, ``cuMemFree`` and synchronous copies would invalidate the capture."""
    drv = _driver()
    return int(_check(drv.cuStreamIsCapturing(stream), "cuStreamIsCapturing")) != 0


def _current_context():
    """The current CUDA context, made the primary context of device 0 when there is none
    (as numba does)."""
    drv = _driver()
    _check(drv.cuInit(0), "cuInit")
    ctx = _check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(ctx) == 0:
        ctx = _check(drv.cuDevicePrimaryCtxRetain(0), "cuDevicePrimaryCtxRetain")
        _check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


@lru_cache(maxsize=None)
def sm_count(index):
    """The number of SMs of CUDA device ``index`` (None: 0), from the driver."""
    drv = _driver()
    _check(drv.cuInit(0), "cuInit")
    dev = _check(drv.cuDeviceGet(index or 0), "cuDeviceGet")
    return _check(drv.cuDeviceGetAttribute(
        drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
        "cuDeviceGetAttribute")


@lru_cache(maxsize=None)
def device_properties(index):
    """(name, compute capability, opt-in shared memory bytes per block) of CUDA device
    ``index``, from the driver."""
    drv = _driver()
    _check(drv.cuInit(0), "cuInit")
    dev = _check(drv.cuDeviceGet(index), f"cuDeviceGet({index})")
    name = _check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
    attr = drv.CUdevice_attribute
    major, minor, smem = (
        _check(drv.cuDeviceGetAttribute(a, dev), "cuDeviceGetAttribute")
        for a in (attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                  attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                  attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
    return bytes(name).split(b"\0", 1)[0].decode(), (major, minor), smem


def device_arch():
    """``sm_XY`` of the current context's device, ``sm_XYa`` from 9.0 on (as numba compiles:
    the arch-specific target, for wgmma and setmaxnreg)."""
    drv = _driver()
    _current_context()
    dev = _check(drv.cuCtxGetDevice(), "cuCtxGetDevice")
    attr = drv.CUdevice_attribute
    major = _check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                            dev), "cuDeviceGetAttribute")
    minor = _check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                            dev), "cuDeviceGetAttribute")
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


class Binary:
    """One compiled kernel: its entry name and cubin. :meth:`function` loads it into the
    current context (once per context) and returns the ``CUfunction`` handle as an int; the
    dynamic shared memory :meth:`allow_dynamic_shared` asked for is allowed in every context
    it is loaded into."""

    def __init__(self, entry, cubin):
        self.entry, self.cubin = entry, cubin
        self._functions = {}        # context handle -> (CUfunction, dynamic shared allowed)
        self._dynamic_shared = 0    # bytes asked for, in any context

    def _loaded(self):
        ctx = int(_current_context())
        got = self._functions.get(ctx)
        if got is None:
            drv = _driver()
            module = _check(drv.cuModuleLoadData(self.cubin), "cuModuleLoadData")
            func = _check(drv.cuModuleGetFunction(module, self.entry.encode()),
                          f"cuModuleGetFunction({self.entry})")
            got = self._functions[ctx] = [func, 0]
        if got[1] < self._dynamic_shared:   # a function attribute: set in each context
            drv = _driver()
            attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(drv.cuFuncSetAttribute(got[0], attr, self._dynamic_shared),
                   f"cuFuncSetAttribute({self._dynamic_shared} bytes of dynamic shared memory)")
            got[1] = self._dynamic_shared
        return got

    def function(self):
        return int(self._loaded()[0])

    def allow_dynamic_shared(self, nbytes):
        """Let launches use ``nbytes`` of dynamic shared memory (more than 48 KiB needs the
        function attribute raised, per function), in this context and every later one."""
        self._dynamic_shared = max(self._dynamic_shared, nbytes)
        self._loaded()


@lru_cache(maxsize=None)
def _numba_version():
    return importlib.metadata.version("numba-cuda")


def load_or_compile(name, compile_fn):
    """The :class:`Binary` of the kernel variant ``name`` (:func:`binary_name`) for the
    current device: read from its cubin file, or ``compile_fn()`` -> (entry name, cubin) and
    written there first."""
    path = os.path.join(cache_dir(), f"{name}.{device_arch()}.numba-{_numba_version()}.cubin")
    try:
        with open(path, "rb") as f:
            entry, _, cubin = f.read().partition(b"\n")
        return Binary(entry.decode(), cubin)
    except FileNotFoundError:
        pass
    entry, cubin = compile_fn()
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(entry.encode() + b"\n" + cubin)
    os.replace(tmp, path)
    return Binary(entry, cubin)


def compiled_binary(dispatcher, signature):
    """(entry name, cubin) of a numba ``cuda.jit`` dispatcher compiled for ``signature`` on
    the current device: the ``compile_fn`` of :func:`load_or_compile`."""
    kernel = dispatcher.compile(signature)
    cubin = kernel._codelibrary.get_cubin()
    return kernel.entry_name, bytes(getattr(cubin, "code", cubin))  # cuda.core's ObjectCode
