"""MoYe's two SIMT pipelines (fp32, FMA): their configurations and the compiled kernels.

The two pipelines of the MoYe.jl "Pipelining" page:

- ``prefetch``: one shared buffer; each k-tile is copied shared -> registers whole, then the
  cp.async copy of the next k-tile is issued before the FMAs of this one.
- ``double_buffer``: two shared buffers (the stage mode of ``(bM, bK, 2)``) and two register
  k-blocks: while k-block ``kb`` is multiplied, ``kb + 1`` is loaded from shared memory, and
  the next k-tile streams into the other shared buffer.

The kernels are generated from layoutalg's tiled copies and tiled MMAs by
:mod:`gemm.simt_gen` and compiled by numba only when a variant is first needed: a process that
finds the variant's compiled kernel on disk (:func:`simt_binary`) imports neither the
generator, sympy nor numba (``simt_source`` is reachable from here too).
"""

from dataclasses import dataclass
from functools import lru_cache

from ._env import simulator_active
from .binary import compiled_binary, load_or_compile
from .codegen import kernel_module, module_name
from .splitk import MAX_SPLIT_K

__all__ = ["SimtConfig", "copy_vector", "simt_source", "simt_function", "simt_kernel",
           "simt_binary", "SIGNATURE", "PIPELINES"]

PIPELINES = ("prefetch", "double_buffer")


def __getattr__(name):
    # the generator, imported on first use (sympy and layoutalg come with it)
    if name == "simt_source":
        from layoutalg.gemm.simt_gen import simt_source
        return simt_source
    raise AttributeError(f"module 'layoutalg.gemm.simt' has no attribute {name!r}")


@dataclass(frozen=True)
class SimtConfig:
    """One SIMT kernel configuration (fp32, UniversalFMA).

    ``mma_threads`` is the (M, N) thread layout of the tiled MMA; ``threads`` must equal its
    size. ``pad`` is the column padding of the shared tiles (``bM + pad`` elements between
    columns; default 1 for ``prefetch`` and 2 for ``double_buffer``, as in the seed).
    ``vector_mn``: each thread owns runs of this many consecutive M (and N) elements, so its
    shared -> register reads may be vectorized (a permutation of the tiled MMA); 1 is MoYe's
    plain layout. ``min_blocks > 1`` asks the compiler (launch bounds) for few enough
    registers that this many blocks fit on one SM. ``split_k``: K cut into that many ranges
    of whole k-tiles, one block per (range, tile), the f32 partials added in order by a
    second kernel (gemm.splitk); the kernel takes the ranges at run time, so this field does
    not change what is compiled. ``cute``: the kernel written with gemm.cute
    (:mod:`gemm.cute_kernels`, the seed's kernels in CuTe's vocabulary) instead of the
    generated one; it takes ``vector_mn`` 1 only.
    """

    bM: int = 128
    bN: int = 128
    bK: int = 8
    mma_threads: tuple = (16, 16)
    pipeline: str = "double_buffer"
    pad: int = None
    vector_mn: int = 1
    min_blocks: int = 1
    split_k: int = 1
    cute: bool = False

    def __post_init__(self):
        if not (isinstance(self.split_k, int) and not isinstance(self.split_k, bool)
                and 1 <= self.split_k <= MAX_SPLIT_K):
            raise ValueError(f"split_k must be an int in 1..{MAX_SPLIT_K}, not {self.split_k!r}")
        if self.pipeline not in PIPELINES:
            raise ValueError(f"pipeline must be one of {PIPELINES}, not {self.pipeline!r}")
        if self.cute and self.vector_mn != 1:
            raise ValueError(f"the gemm.cute kernels take vector_mn=1, not {self.vector_mn}")
        if self.pad is None:
            object.__setattr__(self, "pad", 1 if self.pipeline == "prefetch" else 2)
        tm, tn = self.mma_threads
        for what, tile, thr in (("bM", self.bM, tm), ("bN", self.bN, tn)):
            if tile % (thr * self.vector_mn):
                raise ValueError(f"{what}={tile} is not a multiple of {thr} threads x "
                                 f"{self.vector_mn} values")
            if tile * self.bK < tm * tn:
                raise ValueError(f"{what} x bK = {tile} x {self.bK} has fewer elements than "
                                 f"the {tm * tn} threads that copy it")

    @property
    def threads(self):
        return self.mma_threads[0] * self.mma_threads[1]

    @property
    def stages(self):
        return 1 if self.pipeline == "prefetch" else 2


def copy_vector(cfg, unit, bmn, vec):
    """Elements per cp.async for an operand whose global tile allows ``vec``: 1 when its unit
    stride is along K (the shared tile is MN-contiguous, so the copy transposes), else the
    largest power of two <= vec that divides the shared column stride ``bmn + pad`` and
    leaves every thread a copy of the (bmn, bK) tile (``bmn / vec`` threads along MN times
    bK along K at least the block's threads: a 32-row tile of 128 threads copies 2 values
    each, not 4)."""
    if unit == 1:
        return 1
    while vec > 1 and ((bmn + cfg.pad) % vec or bmn % vec
                       or (bmn // vec) * cfg.bK < cfg.threads):
        vec //= 2
    return vec


SIGNATURE = ("void(float32[::1], float32[::1], float32[::1], "
              + ", ".join(["uint32"] * 14) + ", float32, float32)")


def simt_function(cfg, a_unit, b_unit, vec_a=4, vec_b=4):
    """The generated kernel as a plain Python function (for ``compile_ptx`` and inspection):
    its module is generated once (:func:`gemm.codegen.kernel_module`), later processes import
    the file."""
    sim = simulator_active()
    if cfg.cute:
        from layoutalg.gemm.cute_kernels import kernel_function
        return kernel_function(cfg, a_unit, b_unit, vec_a, vec_b)

    def source():
        from layoutalg.gemm.simt_gen import simt_source
        return simt_source(cfg, a_unit, b_unit, vec_a, vec_b, sim)
    return kernel_module("simt", (cfg, a_unit, b_unit, vec_a, vec_b, sim), source).kernel


@lru_cache(maxsize=None)
def simt_kernel(cfg, a_unit, b_unit, vec_a=4, vec_b=4):
    """The variant's numba ``cuda.jit`` kernel (compiled on its first launch or ``compile``;
    :func:`simt_binary` keeps the compiled code); see ``simt_source`` for the parameters."""
    from numba import cuda
    fn = simt_function(cfg, a_unit, b_unit, vec_a, vec_b)
    if simulator_active():
        return cuda.jit(SIGNATURE)(fn)
    bounds = {"launch_bounds": (cfg.threads, cfg.min_blocks)} if cfg.min_blocks > 1 else {}
    return cuda.jit(SIGNATURE, **bounds)(fn)


@lru_cache(maxsize=None)
def simt_binary(cfg, a_unit, b_unit, vec_a=4, vec_b=4):
    """The variant's compiled kernel for the current device (a :class:`gemm.binary.Binary`):
    its cubin file when an earlier call or process compiled it, else compiled now (numba)."""
    name = module_name("simt", (cfg, a_unit, b_unit, vec_a, vec_b, False))
    return load_or_compile(name, lambda: compiled_binary(
        simt_kernel(cfg, a_unit, b_unit, vec_a, vec_b), SIGNATURE))
