"""Launching compiled kernels with little host overhead.

numba's ``kernel[grid, block, stream, shmem](*args)`` wraps every array argument (a torch
tensor becomes a numba DeviceNDArray through ``__cuda_array_interface__``) and converts every
scalar on every call. Our kernels take only 1-D C-contiguous arrays and 4-byte scalars, so a
launch here is the driver's ``cuLaunchKernelEx`` (``cuLaunchKernel`` where the driver has no
Ex) called through ctypes with a parameter block made once: a ctypes structure holding every
kernel parameter (an array is passed in numba's ABI as the seven parameters ``meminfo,
parent, nitems, itemsize, data, shape[0], strides[0]``), handed to the driver as one
parameter buffer.

A Launcher keeps one :class:`BoundLaunch` per launch shape (grid, block, the arrays'
extents, the scalars but the last ``free_scalars``) and CUDA context (the kernel is loaded
into each context that launches it), made once; a call changes only the array addresses, the
stream and the free scalars in it. The driver copies the parameters during the call, so
reusing the block is safe; a lock keeps two threads from filling one block at once. The
driver's arguments are ctypes objects made once per BoundLaunch and stream (for the Ex form a
launch config holding grid, block, shared bytes and stream: four arguments for ctypes to
pass instead of eleven; benchmarks/RESULTS.md, "The call path"), passed without ``argtypes``
(ctypes then hands them over as they are). In the CUDA simulator the ordinary numba launch
is used.
"""

import ctypes
import threading

import numpy as np

from gemm._env import simulator_active
from gemm.call.binary import Binary, binary_name, compiled_binary, load_or_compile

__all__ = ["Launcher", "BoundLaunch", "LaunchConfig", "current_context", "kept_launcher",
           "compiled_launcher"]

_CTYPES = {"uint32": ctypes.c_uint32, "int32": ctypes.c_int32, "float32": ctypes.c_float}
_ARRAY_FIELDS = ("meminfo", "parent", "nitems", "itemsize", "data", "shape", "stride")
_driver = None
_get_context = None
_BUFFER_POINTER, _BUFFER_SIZE = 1, 2     # CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE (END is 0)


class LaunchConfig(ctypes.Structure):
    """The driver's CUlaunchConfig: grid, block, dynamic shared bytes, stream, and no launch
    attributes."""
    _fields_ = [(name, ctypes.c_uint) for name in ("grid_x", "grid_y", "grid_z", "block_x",
                                                    "block_y", "block_z", "shared_bytes")]
    _fields_ += [("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                 ("num_attrs", ctypes.c_uint)]


def _cuda_driver():
    """``(launch, describe, by_config)``: libcuda's cuLaunchKernelEx (``by_config`` True)
    or, where the driver lacks it, cuLaunchKernel, and cuGetErrorString, through ctypes
    (loaded once)."""
    global _driver
    if _driver is None:
        lib = ctypes.CDLL("libcuda.so.1")
        by_config = hasattr(lib, "cuLaunchKernelEx")
        launch = lib.cuLaunchKernelEx if by_config else lib.cuLaunchKernel
        launch.restype = ctypes.c_int   # called with ctypes objects only (no argtypes)
        describe = lib.cuGetErrorString
        describe.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        _driver = launch, describe, by_config
    return _driver


def current_context() -> int:
    """The calling thread's current CUDA context (0 for none), through libcuda."""
    global _get_context
    if _get_context is None:
        try:
            fn = ctypes.CDLL("libcuda.so.1").cuCtxGetCurrent
        except OSError:                 # no driver (numba's simulator): no context
            _get_context = False
            return 0
        fn.argtypes, fn.restype = [ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int
        ctx = ctypes.c_void_p()
        _get_context = fn, ctx, ctypes.byref(ctx)
    elif _get_context is False:
        return 0
    fn, ctx, ref = _get_context
    fn(ref)
    return ctx.value or 0


class Launcher:
    """Launch ``kernel`` (a ``cuda.jit`` kernel with one signature, or on a GPU the
    :class:`gemm.call.binary.Binary` of such a kernel, whose parameters are
    ``n_arrays`` 1-D arrays of ``itemsize``-byte elements (one size, or a tuple of one per
    array) followed by scalars of the types
    ``scalar_types``, e.g. "uint32", "float32").

    ``launcher(grid, block, stream, arrays, scalars, shared_bytes=0)``: ``arrays`` holds a
    ``(device address, elements)`` pair per array on a GPU and the numpy arrays themselves in
    the simulator. On a GPU it returns the BoundLaunch it used, which the caller may call
    again directly: ``bound(addresses, stream, *free_scalar_values)``. The last
    ``free_scalars`` scalars (alpha and beta, say) do not make a new BoundLaunch.
    """

    MAX_BOUND = 4096            # a process that sees endless shapes starts afresh past this

    def __init__(self, kernel, n_arrays, itemsize, scalar_types, free_scalars=0):
        self.kernel = kernel
        self.n_arrays = n_arrays
        self.itemsizes = (itemsize,) * n_arrays if isinstance(itemsize, int) else tuple(itemsize)
        self.scalar_types = tuple(scalar_types)
        self.free_scalars = free_scalars
        self._funcs = {}                # CUDA context -> the kernel's function there
        self._bound = {}
        fields = [(f"a{i}_{f}", ctypes.c_int64)
                  for i in range(n_arrays) for f in _ARRAY_FIELDS]
        fields += [(f"s{j}", _CTYPES[t]) for j, t in enumerate(self.scalar_types)]
        self._params_type = type("KernelParams", (ctypes.Structure,), {"_fields_": fields})

    def _function(self, context):
        """The kernel's function handle in the current CUDA context (loaded there once)."""
        func = self._funcs.get(context)
        if func is None:
            if isinstance(self.kernel, Binary):
                func = self.kernel.function()
            else:
                (kernel,) = self.kernel.overloads.values()
                func = int(kernel._codelibrary.get_cufunc().handle)
            self._funcs[context] = func
            self._launch, self._describe, self._by_config = _cuda_driver()
        return func

    def __call__(self, grid, block, stream, arrays, scalars, shared_bytes=0):
        if simulator_active():
            values = [getattr(np, t)(v) for t, v in zip(self.scalar_types, scalars)]
            self.kernel[grid, block, 0, shared_bytes](*arrays, *values)
            return None
        fixed = len(scalars) - self.free_scalars
        extents = tuple(n for _, n in arrays)
        context = current_context()
        key = (grid, block, extents, tuple(scalars[:fixed]), shared_bytes, context)
        bound = self._bound.get(key)
        if bound is None:
            func = self._function(context)
            if len(self._bound) >= self.MAX_BOUND:
                self._bound.clear()
            bound = self._bound[key] = BoundLaunch(self, func, grid, block, extents, scalars,
                                                   shared_bytes)
        bound([ptr for ptr, _ in arrays], stream, *scalars[fixed:])
        return bound


def kept_launcher(launchers, variant, kernel, binary, dynamic_shared, n_arrays, itemsize,
                  scalar_types, free_scalars=0):
    """The :class:`Launcher` of a kernel family's ``variant``, kept in ``launchers`` (a
    dict by variant) and made on its first use: in the CUDA simulator of ``kernel(variant)``
    (its ``cuda.jit`` kernel), on a GPU of ``binary(variant)`` (its compiled
    :class:`gemm.call.binary.Binary`), which is first allowed ``dynamic_shared`` bytes of
    dynamic shared memory (0: none asked beyond the default). ``n_arrays``, ``itemsize``,
    ``scalar_types`` and ``free_scalars`` are the Launcher's."""
    launch = launchers.get(variant)
    if launch is None:
        if simulator_active():
            kern = kernel(variant)
        else:
            kern = binary(variant)
            if dynamic_shared:
                kern.allow_dynamic_shared(dynamic_shared)
        launch = launchers[variant] = Launcher(kern, n_arrays, itemsize, scalar_types,
                                               free_scalars=free_scalars)
    return launch


def compiled_launcher(prefix, key, function, signature, itemsizes, scalar_types,
                      free_scalars=0):
    """The :class:`Launcher` of the kernel ``function`` (a Python function written for
    ``cuda.jit``) compiled for ``signature``, its arrays of ``itemsizes`` bytes followed by
    scalars of ``scalar_types``: in numba's simulator the ``cuda.jit`` kernel itself; on a
    GPU its cubin, read from the file named by ``prefix`` and ``key`` (a value whose repr
    names what the kernel depends on) or compiled once and written there
    (:func:`gemm.call.binary.load_or_compile`). numba is imported here, on first use."""
    from numba import cuda
    kernel = cuda.jit(signature)(function)
    if not simulator_active():
        kernel = load_or_compile(binary_name(prefix, key),
                                 lambda: compiled_binary(kernel, signature))
    return Launcher(kernel, len(itemsizes), tuple(itemsizes), scalar_types,
                    free_scalars=free_scalars)


class BoundLaunch:
    """One kernel launch with everything but the array addresses, the stream and the last
    scalars fixed (made and kept by a :class:`Launcher`). The parameters go to the driver as
    one buffer (``CU_LAUNCH_PARAM_BUFFER_POINTER``): the structure is laid out as the kernel's
    parameters are, each at its own alignment, in order."""

    def __init__(self, launcher, func, grid, block, extents, scalars, shared_bytes):
        if len(extents) != launcher.n_arrays or len(scalars) != len(launcher.scalar_types):
            raise ValueError(f"expected {launcher.n_arrays} arrays and "
                             f"{len(launcher.scalar_types)} scalars")
        params = self._params = launcher._params_type()
        for i, (n, isz) in enumerate(zip(extents, launcher.itemsizes)):
            for name, value in zip(_ARRAY_FIELDS, (0, 0, n, isz, 0, n, isz)):
                setattr(params, f"a{i}_{name}", value)
        for j, value in enumerate(scalars):
            setattr(params, f"s{j}", value)
        kind = type(params)
        name, ctype = kind._fields_[-1]
        self._size = ctypes.c_size_t(getattr(kind, name).offset + ctypes.sizeof(ctype))
        self._extra = (ctypes.c_void_p * 5)(_BUFFER_POINTER, ctypes.addressof(params),
                                            _BUFFER_SIZE, ctypes.addressof(self._size), 0)
        # the arrays' fields as one int64 array: array i's address is word 7 i + 4
        self._words = (ctypes.c_int64 * (len(_ARRAY_FIELDS) * launcher.n_arrays)).from_buffer(
            params)
        self._data_words = slice(_ARRAY_FIELDS.index("data"), None, len(_ARRAY_FIELDS))
        free = launcher.free_scalars
        self._free_fields = [f"s{j}" for j in range(len(scalars) - free, len(scalars))]
        self._free_values = tuple(scalars[len(scalars) - free:])   # as the block holds them
        self._func, self._dims = ctypes.c_void_p(func), (*grid, *block, shared_bytes)
        self._extra_pointer = ctypes.c_void_p(ctypes.addressof(self._extra))
        self._arguments = {}            # stream -> the driver's arguments with it
        self._launch, self._describe = launcher._launch, launcher._describe
        self._by_config = launcher._by_config
        self._lock = threading.Lock()

    def _with_stream(self, stream):
        """The driver's arguments for a launch on ``stream`` (a raw handle), made once:
        cuLaunchKernelEx(config, f, kernelParams, extra), or cuLaunchKernel(f, grid x y z,
        block x y z, shared bytes, stream, kernelParams, extra)."""
        if len(self._arguments) >= 64:
            self._arguments.clear()
        if self._by_config:     # (byref keeps the config alive with the arguments)
            config = LaunchConfig(*self._dims, stream, None, 0)
            args = (ctypes.byref(config), self._func, None, self._extra_pointer)
        else:
            args = (self._func, *(ctypes.c_uint(v) for v in self._dims),
                    ctypes.c_void_p(stream), None, self._extra_pointer)
        self._arguments[stream] = args
        return args

    def __call__(self, addresses, stream, *free_scalars):
        with self._lock:
            self._words[self._data_words] = addresses       # (one address per array)
            if free_scalars != self._free_values:
                if free_scalars and len(free_scalars) != len(self._free_fields):
                    raise ValueError(f"expected {len(self._free_fields)} free scalars or none, "
                                     f"got {len(free_scalars)}")
                for name, value in zip(self._free_fields, free_scalars):
                    setattr(self._params, name, value)
                self._free_values = free_scalars
            args = self._arguments.get(stream)
            err = self._launch(*(args or self._with_stream(stream)))
        if err:
            text = ctypes.c_char_p()
            self._describe(err, ctypes.byref(text))
            name = "cuLaunchKernelEx" if self._by_config else "cuLaunchKernel"
            raise RuntimeError(f"{name} failed ({err}): {text.value}")
