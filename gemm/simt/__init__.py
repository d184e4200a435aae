"""MoYe's two SIMT pipelines (fp32, FMA): their configurations and the compiled kernels.

The two pipelines of the MoYe.jl "Pipelining" page:

- ``prefetch``: one shared buffer; each k-tile is copied shared -> registers whole, then the
  cp.async copy of the next k-tile is issued before the FMAs of this one.
- ``double_buffer``: two shared buffers (the stage mode of ``(bM, bK, 2)``) and two register
  k-blocks: while k-block ``kb`` is multiplied, ``kb + 1`` is loaded from shared memory, and
  the next k-tile streams into the other shared buffer.

A ``SimtConfig(cute=True)`` (gemm.matmul's defaults, "tuned" and "small_m") is the kernel
written with :mod:`gemm.cute` (:mod:`gemm.cute_kernels`); otherwise the kernel is generated
from layoutalg's tiled copies and tiled MMAs by :mod:`gemm.simt.gen`. Either is compiled by
numba only when a variant is first needed: a process that finds the variant's compiled
kernel on disk (:func:`simt_binary`) imports neither gemm.cute, the generator, sympy nor
numba (``simt_source`` is reachable from here too). The configuration
(:class:`SimtConfig`, :func:`copy_vector`) is defined in :mod:`gemm.simt.config`, below the
generators that read it.
"""

from functools import lru_cache

from .._env import simulator_active
from ..call.binary import compiled_binary, load_or_compile
from ..codegen import kernel_module, module_name
from ..splitk import MAX_SPLIT_K  # noqa: F401 - importable from here, as before
from .config import PIPELINES, SimtConfig, copy_vector

__all__ = ["SimtConfig", "copy_vector", "simt_source", "simt_function", "simt_kernel",
           "simt_binary", "SIGNATURE", "PIPELINES"]


def __getattr__(name):
    # the generator, imported on first use (sympy and layoutalg come with it)
    if name == "simt_source":
        from gemm.simt.gen import simt_source
        return simt_source
    raise AttributeError(f"module 'gemm.simt' has no attribute {name!r}")


SIGNATURE = ("void(float32[::1], float32[::1], float32[::1], "
              + ", ".join(["uint32"] * 14) + ", float32, float32)")


def simt_function(cfg, a_unit, b_unit, vec_a=4, vec_b=4):
    """The generated kernel as a plain Python function (for ``compile_ptx`` and inspection):
    its module is generated once (:func:`gemm.codegen.kernel_module`), later processes import
    the file."""
    sim = simulator_active()
    if cfg.cute:
        # imported to build a kernel only: it imports numba (a loaded kernel does without)
        from gemm.cute_kernels import kernel_function
        return kernel_function(cfg, a_unit, b_unit, vec_a, vec_b)

    def source():
        from gemm.simt.gen import simt_source     # sympy: only to generate
        return simt_source(cfg, a_unit, b_unit, vec_a, vec_b, sim)
    return kernel_module("simt", (cfg, a_unit, b_unit, vec_a, vec_b, sim), source).kernel


@lru_cache(maxsize=None)
def simt_kernel(cfg, a_unit, b_unit, vec_a=4, vec_b=4):
    """The variant's numba ``cuda.jit`` kernel (compiled on its first launch or ``compile``;
    :func:`simt_binary` keeps the compiled code); see ``simt_source`` for the parameters."""
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
    name = module_name("simt", (cfg, a_unit, b_unit, vec_a, vec_b, False))
    return load_or_compile(name, lambda: compiled_binary(
        simt_kernel(cfg, a_unit, b_unit, vec_a, vec_b), SIGNATURE))
