"""Launching generated kernels with little host overhead.

numba's ``kernel[grid, block, stream, shmem](*args)`` wraps every array argument (a torch
tensor becomes a numba DeviceNDArray through ``__cuda_array_interface__``) and converts every
scalar on every call: about 50 us with torch tensors. Our kernels take only 1-D C-contiguous
arrays and 4-byte scalars, so a launch here is the driver's ``cuLaunchKernel`` called through
ctypes with a parameter block made once: a ctypes structure holding every kernel parameter
(an array is passed in numba's ABI as the seven parameters ``meminfo, parent, nitems,
itemsize, data, shape[0], strides[0]``) and a fixed array of pointers to its fields.

A Launcher keeps one :class:`BoundLaunch` per launch shape (grid, block, the arrays'
extents, the scalars but the last ``free_scalars``), made once; a call changes only the array
addresses, the stream and the free scalars in it. The driver copies the parameters during the
call, so reusing the block is safe (a Launcher is not meant to be shared between threads). In
the CUDA simulator the ordinary numba launch is used.
"""

import ctypes

import numpy as np

from layoutalg.gemm._env import simulator_active
from layoutalg.gemm.binary import Binary

__all__ = ["Launcher", "BoundLaunch"]

_CTYPES = {"uint32": ctypes.c_uint32, "int32": ctypes.c_int32, "float32": ctypes.c_float}
_ARRAY_FIELDS = ("meminfo", "parent", "nitems", "itemsize", "data", "shape", "stride")
_driver = None


def _cuda_driver():
    """libcuda's cuLaunchKernel and cuGetErrorString through ctypes (loaded once)."""
    global _driver
    if _driver is None:
        lib = ctypes.CDLL("libcuda.so.1")
        launch = lib.cuLaunchKernel
        launch.restype = ctypes.c_int
        launch.argtypes = ([ctypes.c_void_p] + [ctypes.c_uint] * 7
                           + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p])
        describe = lib.cuGetErrorString
        describe.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        _driver = launch, describe
    return _driver


class Launcher:
    """Launch ``kernel`` (a ``cuda.jit`` kernel with one signature, or on a GPU the
    :class:`gemm.binary.Binary` of such a kernel, whose parameters are
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
        self._func = None
        self._bound = {}
        fields = [(f"a{i}_{f}", ctypes.c_int64)
                  for i in range(n_arrays) for f in _ARRAY_FIELDS]
        fields += [(f"s{j}", _CTYPES[t]) for j, t in enumerate(self.scalar_types)]
        self._params_type = type("KernelParams", (ctypes.Structure,), {"_fields_": fields})

    def _prepare(self):
        if isinstance(self.kernel, Binary):
            self._func = self.kernel.function()
        else:
            (kernel,) = self.kernel.overloads.values()
            self._func = int(kernel._codelibrary.get_cufunc().handle)
        self._launch, self._describe = _cuda_driver()

    def __call__(self, grid, block, stream, arrays, scalars, shared_bytes=0):
        if simulator_active():
            values = [getattr(np, t)(v) for t, v in zip(self.scalar_types, scalars)]
            self.kernel[grid, block, 0, shared_bytes](*arrays, *values)
            return None
        fixed = len(scalars) - self.free_scalars
        extents = tuple(n for _, n in arrays)
        key = (grid, block, extents, tuple(scalars[:fixed]), shared_bytes)
        bound = self._bound.get(key)
        if bound is None:
            if self._func is None:
                self._prepare()
            if len(self._bound) >= self.MAX_BOUND:
                self._bound.clear()
            bound = self._bound[key] = BoundLaunch(self, grid, block, extents, scalars,
                                                   shared_bytes)
        bound([ptr for ptr, _ in arrays], stream, *scalars[fixed:])
        return bound


class BoundLaunch:
    """One kernel launch with everything but the array addresses, the stream and the last
    scalars fixed (made and kept by a :class:`Launcher`)."""

    def __init__(self, launcher, grid, block, extents, scalars, shared_bytes):
        if len(extents) != launcher.n_arrays or len(scalars) != len(launcher.scalar_types):
            raise ValueError(f"expected {launcher.n_arrays} arrays and "
                             f"{len(launcher.scalar_types)} scalars")
        params = self._params = launcher._params_type()
        for i, (n, isz) in enumerate(zip(extents, launcher.itemsizes)):
            for name, value in zip(_ARRAY_FIELDS, (0, 0, n, isz, 0, n, isz)):
                setattr(params, f"a{i}_{name}", value)
        for j, value in enumerate(scalars):
            setattr(params, f"s{j}", value)
        base, kind = ctypes.addressof(params), type(params)
        self._pointers = (ctypes.c_void_p * len(kind._fields_))(
            *(base + getattr(kind, name).offset for name, _ in kind._fields_))
        self._data_fields = [f"a{i}_data" for i in range(launcher.n_arrays)]
        self._scalar_fields = [f"s{j}" for j in range(len(scalars))]
        self._fixed = (launcher._func, *grid, *block, shared_bytes)
        self._launch, self._describe = launcher._launch, launcher._describe

    def __call__(self, addresses, stream, *last_scalars):
        params = self._params
        for name, ptr in zip(self._data_fields, addresses):
            setattr(params, name, ptr)
        if last_scalars:
            for name, value in zip(self._scalar_fields[-len(last_scalars):], last_scalars):
                setattr(params, name, value)
        err = self._launch(*self._fixed, stream, self._pointers, None)
        if err:
            text = ctypes.c_char_p()
            self._describe(err, ctypes.byref(text))
            raise RuntimeError(f"cuLaunchKernel failed ({err}): {text.value}")
