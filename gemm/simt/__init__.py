"""MoYe's two SIMT pipelines (fp32, FMA): their configurations and the compiled kernels.

The two pipelines of the MoYe.jl "Pipelining" page:

- ``prefetch``: one shared buffer; each k-tile is copied shared -> registers whole, then the
  cp.async copy of the next k-tile is issued before the FMAs of this one.
- ``double_buffer``: two shared buffers (the stage mode of ``(bM, bK, 2)``) and two register
  k-blocks: while k-block ``kb`` is multiplied, ``kb + 1`` is loaded from shared memory, and
  the next k-tile streams into the other shared buffer.

Both are written with :mod:`gemm.cute` (:mod:`gemm.cute_kernels`), in the seed's structure.
numba compiles a variant only when it is first needed: a process that finds the variant's
compiled kernel on disk (:func:`simt_binary`) imports neither gemm.cute nor numba. The
configuration (:class:`SimtConfig`, :func:`copy_vector`) is defined in
:mod:`gemm.simt.config`.
"""

from functools import lru_cache

from .._env import simulator_active
from ..call.binary import binary_name, compiled_binary, load_or_compile
from ..splitk import MAX_SPLIT_K  # noqa: F401 - importable from here, as before
from .config import PIPELINES, SimtConfig, copy_vector

__all__ = ["SimtConfig", "copy_vector", "simt_function", "simt_kernel", "simt_binary",
           "SIGNATURE", "PIPELINES"]


SIGNATURE = ("void(float32[::1], float32[::1], float32[::1], "
              + ", ".join(["uint32"] * 14) + ", float32, float32)")


def simt_function(cfg, a_unit, b_unit, vec_a=4, vec_b=4):
    """The kernel of ``cfg`` for A's and B's unit modes (0: along M or N) and the cp.async
    widths their addresses allow, as a plain Python function (for ``compile_ptx`` and
    inspection): :func:`gemm.cute_kernels.kernel_function`."""
    from gemm.cute_kernels import kernel_function     # numba and gemm.cute: only to compile
    return kernel_function(cfg, a_unit, b_unit, vec_a, vec_b)


@lru_cache(maxsize=None)
def simt_kernel(cfg, a_unit, b_unit, vec_a=4, vec_b=4):
    """The variant's numba ``cuda.jit`` kernel (compiled on its first launch or ``compile``;
    :func:`simt_binary` keeps the compiled code); see :func:`simt_function` for the
    parameters."""
    from numba import cuda      # only to compile: a loaded kernel does without numba
    fn = simt_function(cfg, a_unit, b_unit, vec_a, vec_b)
    if simulator_active():
        return cuda.jit(SIGNATURE)(fn)
    bounds = {"launch_bounds": (cfg.threads, cfg.min_blocks)} if cfg.min_blocks > 1 else {}
    return cuda.jit(SIGNATURE, **bounds)(fn)


@lru_cache(maxsize=None)
def simt_binary(cfg, a_unit, b_unit, vec_a=4, vec_b=4):
    """The variant's compiled kernel for the current device (a :class:`gemm.call.binary.Binary`):
    its cubin file when an earlier call or process compiled it, else compiled now (numba)."""
    name = binary_name("simt", (cfg, a_unit, b_unit, vec_a, vec_b, False))
    return load_or_compile(name, lambda: compiled_binary(
        simt_kernel(cfg, a_unit, b_unit, vec_a, vec_b), SIGNATURE))
