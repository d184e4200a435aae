"""Look at the code numba generates, without a GPU: PTX text and ``ptxas -v`` resource usage.

``compile_ptx(kernel, signature, cc)`` compiles a ``@cuda.jit`` kernel (or its Python function)
to PTX for a compute capability; ``ptxas_usage(ptx, cc)`` assembles it with ``ptxas -v`` (the
binary of the ``nvidia-cuda-nvcc-cu12`` wheel, else the one on PATH) and parses registers,
spill stores and loads, stack frame, shared, local and constant memory per entry function;
``resource_usage`` does both for one kernel. ``local_memory_ops(ptx)`` lists the PTX lines that
touch local memory (a register array that did not stay in registers).

>>> import numpy as np
>>> from numba.cuda import types
>>> def axpy(a, x, y):
...     i = np.uint32(cuda.grid(1))
...     if i < np.uint32(x.size):
...         y[i] = a * x[i] + y[i]
>>> from numba import cuda
>>> use = resource_usage(axpy, (types.float32, types.float32[::1], types.float32[::1]), (8, 0))
>>> use.arch, use.spill_stores, use.spill_loads, use.local, use.registers > 0
('sm_80', 0, 0, 0, True)
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

__all__ = ["ResourceUsage", "arch_name", "compile_ptx", "find_ptxas", "local_memory_ops",
           "ptxas_usage", "resource_usage"]


@dataclass(frozen=True)
class ResourceUsage:
    """What ``ptxas -v`` reports for one entry function (sizes in bytes)."""
    function: str
    arch: str
    registers: int
    spill_stores: int
    spill_loads: int
    stack_frame: int
    shared: int      # static shared memory (smem)
    local: int       # local memory per thread (lmem)
    constant: int    # cmem[0], the kernel's parameter bank

    @property
    def spills(self):
        """Spill bytes, stores plus loads."""
        return self.spill_stores + self.spill_loads


def arch_name(cc):
    """``sm_XY`` (or ``sm_XYa``) of a compute capability tuple such as (8, 0) or (9, 0, "a")."""
    if not isinstance(cc, tuple) or len(cc) not in (2, 3) \
            or not all(isinstance(x, int) and x >= 0 for x in cc[:2]) \
            or (len(cc) == 3 and cc[2] not in ("a", "f")):
        raise ValueError(f"cc must be a tuple like (8, 0) or (9, 0, 'a'), got {cc!r}")
    return f"sm_{cc[0]}{cc[1]}{cc[2] if len(cc) == 3 else ''}"


def find_ptxas():
    """Path of ptxas: the nvidia-cuda-nvcc-cu12 wheel's (it matches numba's NVVM), else PATH."""
    for base in sys.path:
        candidate = os.path.join(base, "nvidia", "cuda_nvcc", "bin", "ptxas")
        if base and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("ptxas")
    if found is None:
        raise FileNotFoundError("ptxas not found: install numba-cuda[cu12] (it brings "
                                "nvidia-cuda-nvcc-cu12) or put CUDA's bin directory on PATH")
    return found


def compile_ptx(kernel, signature, cc=(8, 0), **options):
    """PTX text of ``kernel`` compiled for ``signature`` and compute capability ``cc``.

    ``kernel`` is a ``@cuda.jit`` dispatcher (its ``fastmath`` and ``launch_bounds`` options are
    kept unless given in ``options``) or a plain Python function. ``options`` go to
    ``numba.cuda.compile_ptx`` (``fastmath``, ``lineinfo``, ``launch_bounds``, ...). Device
    functions the kernel calls must be intrinsics or ``inline="always"`` to compile without a
    GPU.
    """
    from numba import cuda      # not at import: listing the tools needs no numba

    arch_name(cc)
    pyfunc = getattr(kernel, "py_func", kernel)
    if not callable(pyfunc):
        raise TypeError(f"kernel must be a @cuda.jit kernel or a function, got {kernel!r}")
    for key in ("fastmath", "launch_bounds", "lineinfo"):
        value = getattr(kernel, "targetoptions", {}).get(key)
        if value is not None:
            options.setdefault(key, value)
    ptx, _ = cuda.compile_ptx(pyfunc, signature, cc=cc, **options)
    return ptx


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BYTES = re.compile(r"(\d+) bytes (smem|lmem|cmem)(?:\[(\d+)\])?")


def _parse(text):
    usages, cur = [], None

    def flush():
        if cur is not None:
            usages.append(ResourceUsage(**cur))

    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            flush()
            cur = dict(function=m.group(1), arch=m.group(2), registers=0, spill_stores=0,
                       spill_loads=0, stack_frame=0, shared=0, local=0, constant=0)
            continue
        if cur is None:
            continue
        m = _PROPS.search(line)
        if m:
            cur.update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)),
                       spill_loads=int(m.group(3)))
        m = _USED.search(line)
        if m:
            cur["registers"] = int(m.group(1))
            for size, kind, bank in _BYTES.findall(line):
                if kind == "smem":
                    cur["shared"] = int(size)
                elif kind == "lmem":
                    cur["local"] = int(size)
                elif bank in ("", "0"):
                    cur["constant"] = int(size)
    flush()
    return usages


def ptxas_usage(ptx, cc=(8, 0), extra_args=()):
    """Assemble ``ptx`` with ``ptxas -v`` for ``cc``; one ResourceUsage per entry function.

    Raises RuntimeError with ptxas's message if the PTX does not assemble.
    """
    arch = arch_name(cc)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [find_ptxas(), "-v", f"--gpu-name={arch}", src, "-o", os.path.join(tmp, "k.cubin"),
               *extra_args]
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ptxas failed for {arch}:\n{done.stderr.strip()}")
    usages = _parse(done.stdout + done.stderr)
    if not usages:
        raise RuntimeError(f"no entry function in ptxas -v output:\n{done.stderr.strip()}")
    return usages


def resource_usage(kernel, signature, cc=(8, 0), **options):
    """``ptxas -v`` figures of one kernel: compile_ptx, then ptxas_usage (one entry)."""
    usages = ptxas_usage(compile_ptx(kernel, signature, cc, **options), cc)
    if len(usages) != 1:
        raise RuntimeError(f"expected one entry function, found {[u.function for u in usages]}")
    return usages[0]


_LOCAL = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:ld|st)\.local\b|^\s*\.local\b|\.local\s+\.align",
                    re.MULTILINE)


def local_memory_ops(ptx):
    """Lines of ``ptx`` that declare or access local memory (none for a register-only kernel)."""
    return [line.strip() for line in ptx.splitlines() if _LOCAL.search(line)]
