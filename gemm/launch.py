"""Launching generated kernels with little host overhead.

numba's ``kernel[grid, block, stream, shmem](*args)`` wraps every array argument (a torch
tensor becomes a numba DeviceNDArray through ``__cuda_array_interface__``) and converts every
scalar on every call: about 50 us with torch tensors; the cuda-python binding of
``cuLaunchKernel`` alone costs about 10 us. Our kernels take only 1-D C-contiguous arrays and
scalars, so :class:`Launcher` packs all parameters with one ``struct.pack_into`` into a buffer
(an array is passed in numba's ABI as the seven parameters ``meminfo, parent, nitems, itemsize,
data, shape[0], strides[0]``), keeps a fixed array of pointers into that buffer, and calls the
driver's ``cuLaunchKernel`` through ctypes. The driver copies the parameters during the call,
so reusing the buffer is safe (a Launcher is not meant to be shared between threads). In the
CUDA simulator the ordinary numba launch is used.
"""

import ctypes
import struct

import numpy as np

from gemm._env import simulator_active

__all__ = ["Launcher"]

_FORMATS = {"uint32": "I", "int32": "i", "float32": "f"}      # 4-byte scalars only
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
    """Launch ``dispatcher`` (a ``cuda.jit`` kernel with one signature whose parameters are
    ``n_arrays`` 1-D arrays of ``itemsize``-byte elements followed by scalars of the types
    ``scalar_types``, e.g. "uint32", "float32").

    ``launch(grid, block, stream, arrays, scalars, shared_bytes=0)``: ``arrays`` holds a
    ``(device address, elements)`` pair per array on a GPU and the numpy arrays themselves in
    the simulator.
    """

    def __init__(self, dispatcher, n_arrays, itemsize, scalar_types):
        self.dispatcher = dispatcher
        self.n_arrays, self.itemsize = n_arrays, itemsize
        self.scalar_types = tuple(scalar_types)
        self._func = None

    def _prepare(self):
        (kernel,) = self.dispatcher.overloads.values()
        self._func = int(kernel._codelibrary.get_cufunc().handle)
        self._launch, self._describe = _cuda_driver()
        # One little-endian buffer: 7 int64 per array, then the scalars (no padding needed:
        # every int64 comes first, every later field is 4 bytes).
        fmt = "<" + "q" * 7 * self.n_arrays + "".join(_FORMATS[t] for t in self.scalar_types)
        self._pack = struct.Struct(fmt).pack_into
        self._buffer = ctypes.create_string_buffer(struct.calcsize(fmt))
        sizes = [8] * 7 * self.n_arrays + [struct.calcsize(_FORMATS[t]) for t in self.scalar_types]
        base, offsets = ctypes.addressof(self._buffer), []
        for size in sizes:
            offsets.append(base)
            base += size
        self._params = (ctypes.c_void_p * len(offsets))(*offsets)

    def __call__(self, grid, block, stream, arrays, scalars, shared_bytes=0):
        if simulator_active():
            values = [getattr(np, t)(v) for t, v in zip(self.scalar_types, scalars)]
            self.dispatcher[grid, block, 0, shared_bytes](*arrays, *values)
            return
        if self._func is None:
            self._prepare()
        isz = self.itemsize
        fields = []
        for ptr, n in arrays:
            fields += (0, 0, n, isz, ptr, n, isz)
        self._pack(self._buffer, 0, *fields, *scalars)
        err = self._launch(self._func, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                           shared_bytes, stream, self._params, None)
        if err:
            text = ctypes.c_char_p()
            self._describe(err, ctypes.byref(text))
            raise RuntimeError(f"cuLaunchKernel failed ({err}): {text.value}")
