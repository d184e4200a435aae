"""Opt a compiled kernel into more than 48 KiB of dynamic shared memory.

A launch asking for more than 48 KiB of dynamic shared memory fails unless the kernel's
``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` was raised first, per kernel and device;
numba has no public API for it (numba-cuda #94). numba-cuda 0.30 loads modules as cuLibrary, so
the handle of a compiled kernel is a ``CUkernel`` and the attribute is set with
``cuKernelSetAttribute(attr, value, kernel, device)``; a ``CUfunction`` handle (older loaders)
takes ``cuFuncSetAttribute(func, attr, value)``. Both go through numba's checked driver wrapper.

Usage, before the first launch with ``nbytes`` of dynamic shared memory::

    kernel.compile(signature)                 # or launch once with a small size
    allow_dynamic_shared(kernel, 96 * 1024)   # all compiled signatures, current device
    kernel[grid, block, stream, 96 * 1024](...)

Setting the attribute is cached per (kernel handle, device): calling it before every launch
costs a dictionary lookup. In the CUDA simulator it only checks its arguments.

>>> max_dynamic_shared_bytes(static_bytes=0, optin_bytes=227 * 1024)
232448
"""

from gemm._env import simulator_active

# numba is imported inside the functions that use it: the kernel builders read the limits
# below in processes that load no numba.

__all__ = ["allow_dynamic_shared", "max_dynamic_shared_bytes", "shared_alignment",
           "STATIC_SHARED_LIMIT", "DYNAMIC_SHARED_LIMIT", "SWIZZLE_ALIGN"]

STATIC_SHARED_LIMIT = 48 * 1024     # static + dynamic shared memory without opting in
DYNAMIC_SHARED_LIMIT = 227 * 1024   # dynamic shared memory of one block (sm_90 opt-in)
# where a 128-byte-swizzled buffer starts (for TMA and wgmma): the swizzle's period, 8 rows
# of 128 bytes
SWIZZLE_ALIGN = 1024
_done = {}                  # (kernel handle as int, device id) -> bytes already allowed


def shared_alignment():
    """The alignment a kernel declares for its dynamic shared arrays that hold swizzled
    tiles: SWIZZLE_ALIGN, so that the pads to the tiles' start fold away; None in numba's
    simulator, which takes no alignment (there the pads are computed)."""
    return None if simulator_active() else SWIZZLE_ALIGN


def max_dynamic_shared_bytes(static_bytes, optin_bytes):
    """Largest dynamic shared memory a kernel with ``static_bytes`` of static shared memory can
    use on a device whose per-block opt-in limit is ``optin_bytes``."""
    if static_bytes < 0 or optin_bytes < 0:
        raise ValueError("shared memory sizes must be >= 0")
    return max(0, optin_bytes - static_bytes)


def _compiled_kernels(kernel, signature):
    overloads = getattr(kernel, "overloads", None)
    if overloads is None:   # a compiled kernel object itself (dispatcher.compile(sig)'s result)
        if hasattr(kernel, "_codelibrary"):
            return [kernel]
        raise TypeError(f"kernel must be a @cuda.jit dispatcher or a compiled kernel, "
                        f"got {type(kernel).__name__}")
    if signature is not None:
        from numba.cuda.core import sigutils
        args, _ = sigutils.normalize_signature(signature)
        if args not in overloads:
            raise ValueError(f"kernel has no compiled overload for {args}; compile it first "
                             f"(kernel.compile(signature))")
        return [overloads[args]]
    if not overloads:
        raise ValueError("kernel has no compiled overload yet: compile it first "
                         "(kernel.compile(signature)) or pass a compiled kernel")
    return list(overloads.values())


def _set_attribute(cufunc, device_id, nbytes):
    from numba.cuda.cudadrv.driver import binding, driver

    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = cufunc.handle
    if isinstance(handle, binding.CUkernel):
        driver.cuKernelSetAttribute(attr, nbytes, handle, device_id)
    elif isinstance(handle, binding.CUfunction):
        driver.cuFuncSetAttribute(handle, attr, nbytes)
    else:
        raise TypeError(f"unexpected kernel handle type {type(handle).__name__}")


def allow_dynamic_shared(kernel, nbytes, signature=None):
    """Let ``kernel`` launch with up to ``nbytes`` of dynamic shared memory on the current device.

    ``kernel``: a ``@cuda.jit`` dispatcher (every compiled overload, or the one of
    ``signature``) or a compiled kernel from ``dispatcher.compile(signature)``. Raises
    ValueError if ``nbytes`` plus the kernel's static shared memory exceeds the device's
    opt-in limit (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN). Below 48 KiB nothing
    needs to be set and nothing is.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"nbytes must be an int >= 0, got {nbytes!r}")
    if simulator_active():
        return
    compiled_kernels = _compiled_kernels(kernel, signature)
    from numba import cuda

    device = cuda.get_current_device()
    optin = device.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    for compiled in compiled_kernels:
        cufunc = compiled._codelibrary.get_cufunc()
        static = cufunc.attrs.shared
        limit = max_dynamic_shared_bytes(static, optin)
        if nbytes > limit:
            raise ValueError(f"{nbytes} bytes of dynamic shared memory exceed the {limit} bytes "
                             f"this kernel can use on {device.name} (opt-in limit {optin}, "
                             f"{static} bytes static)")
        if nbytes + static <= STATIC_SHARED_LIMIT:
            continue
        key = (int(cufunc.handle), device.id)
        if _done.get(key, -1) >= nbytes:
            continue
        _set_attribute(cufunc, device.id, nbytes)
        _done[key] = nbytes
