"""The SIMT GEMM's configuration: :class:`SimtConfig` (one kernel's tiles, threads, pipeline
and split-K) and :func:`copy_vector` (the cp.async width a tile allows). :mod:`gemm.simt`
compiles and runs the kernels, :mod:`gemm.cute_kernels` writes them."""

from dataclasses import dataclass

from ..splitk import MAX_SPLIT_K

__all__ = ["SimtConfig", "copy_vector", "PIPELINES"]

PIPELINES = ("prefetch", "double_buffer")


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
    not change what is compiled.
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

    def __post_init__(self):
        if not (isinstance(self.split_k, int) and not isinstance(self.split_k, bool)
                and 1 <= self.split_k <= MAX_SPLIT_K):
            raise ValueError(f"split_k must be an int in 1..{MAX_SPLIT_K}, not {self.split_k!r}")
        if self.pipeline not in PIPELINES:
            raise ValueError(f"pipeline must be one of {PIPELINES}, not {self.pipeline!r}")
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
