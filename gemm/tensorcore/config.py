"""The tensor-core GEMM's configuration: :class:`TensorCoreConfig` (one kernel's tiles, warps,
ring and operand type) and :class:`Variant` (everything one compiled kernel depends on), read
by :mod:`gemm.tensorcore` (the call) and :mod:`gemm.tensorcore.cute_gemm` (the kernel). The
operand and output types are :mod:`gemm.dtypes`'."""

from __future__ import annotations

from dataclasses import dataclass

from ..arch.smem import DYNAMIC_SHARED_LIMIT, SWIZZLE_ALIGN
from ..dtypes import DTYPES, MAJORS, OUT_DTYPES, check_variant  # noqa: F401 - re-exported

__all__ = ["TensorCoreConfig", "Variant", "DTYPES", "OUT_DTYPES", "MAJORS", "copy_grid",
           "variant_of"]

_ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "tfloat32": 4}     # in memory
_PAD_C = 8          # f32 elements of padding per row of the staged C tile (the epilogue)


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def copy_grid(cfg, bmn, major, vec):
    """(shape, stride) of the thread layout of the global -> shared copy of a (bmn, bK) tile:
    threads along the contiguous axis first, ``vec`` elements each. ValueError when the
    config's threads do not tile it."""
    n = cfg.threads
    if major == "K":
        chunks = cfg.bK // vec
        tk = min(chunks, n)
        tm = n // tk
        if bmn % tm:
            raise ValueError(f"TensorCoreConfig: bM and bN must be multiples of {tm} (the rows "
                             f"{n} threads copy per pass)")
        return (tm, tk), (tk, 1)
    chunks = bmn // vec
    tm = min(chunks, n)
    tk = n // tm
    if cfg.bK % tk:
        raise ValueError(f"TensorCoreConfig: bK must be a multiple of {tk} (the k-rows {n} "
                         "threads copy per pass of an MN-major tile)")
    return (tm, tk), (1, tm)


@dataclass(frozen=True)
class TensorCoreConfig:
    """One tensor-core kernel: block tile (bM, bN, bK; bK None: 128-byte K rows, 64 elements
    of bf16/f16, 32 of tf32), warp layout (wm, wn), cp.async ring
    ``stages`` (2..6) and ``delay_release`` (a stage is refilled only ``delay_release`` k-tiles
    after it was read; 0..stages-2), operand ``dtype`` ("bfloat16", "float16", or "tfloat32"
    for float32 operands; raw 16-bit arrays are read as ``dtype``), ``min_blocks`` (launch
    bounds: blocks per SM the registers must allow), ``group_m`` (the launch order: blocks
    that start together sweep ``group_m`` block rows of C, then move one block column on, so
    that they share their A and B tiles in L2; a value at least the number of block rows is
    plain column-by-column order). The epilogue stores C in 16-byte runs (4 float32 or 8
    16-bit values) of whole rows at once: a row's runs must divide the threads, and the rows
    the threads store at once must divide bM.

    The default, 256x128x64 with 4x2 warps (each warp 64x64), 3 stages and group_m 8, is the
    tuned choice (benchmarks/RESULTS.md, "Tensor-core GEMM"; 4 stages need a third more
    shared memory).

    >>> cfg = TensorCoreConfig()
    >>> cfg.bK, cfg.threads, cfg.ring_bytes, cfg.shared_bytes     # (+ 1024 to align the ring)
    (64, 256, 147456, 148480)
    >>> TensorCoreConfig(dtype="tfloat32").bK
    32
    """

    bM: int = 256
    bN: int = 128
    bK: int = None
    warps: tuple = (4, 2)
    stages: int = 3
    dtype: str = "bfloat16"
    min_blocks: int = 1
    delay_release: int = 0
    group_m: int = 8

    def __post_init__(self):
        if self.dtype in DTYPES and self.bK is None:
            object.__setattr__(self, "bK", 128 // self.element_bytes)
        for name in ("bM", "bN", "bK", "stages", "min_blocks", "group_m"):
            v = getattr(self, name)
            if not (_is_int(v) and v >= 1):
                raise ValueError(f"TensorCoreConfig: {name} must be a positive int, got {v!r}")
        w = self.warps
        if not (isinstance(w, tuple) and len(w) == 2 and all(_is_int(x) and x >= 1 for x in w)):
            raise ValueError(f"TensorCoreConfig: warps must be a pair of positive ints, got {w!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"TensorCoreConfig: dtype must be one of {DTYPES}, got "
                             f"{self.dtype!r}")
        if self.group_m > 65535:        # group_m * grid columns must fit in 32 bits
            raise ValueError(f"TensorCoreConfig: group_m must be at most 65535, got "
                             f"{self.group_m}")
        if not 2 <= self.stages <= 6:
            raise ValueError(f"TensorCoreConfig: stages must be in 2..6, got {self.stages}")
        d = self.delay_release
        if not (_is_int(d) and 0 <= d <= self.stages - 2):
            raise ValueError(f"TensorCoreConfig: delay_release must be an int in 0..stages-2 "
                             f"(stages={self.stages}: a copy must be in flight), got {d!r}")
        eb = self.element_bytes
        if self.bK * eb not in (64, 128):
            raise ValueError(f"TensorCoreConfig: bK must be {64 // eb} or {128 // eb} for "
                             f"{self.dtype} (64- or 128-byte K rows: an even number of k-blocks "
                             f"and whole 16-byte swizzle chunks), got {self.bK}")
        wm, wn = w
        if self.bM % (16 * wm) or self.bN % (16 * wn):
            raise ValueError(f"TensorCoreConfig: bM={self.bM} must be a multiple of 16*wm="
                             f"{16 * wm} and bN={self.bN} of 16*wn={16 * wn} (m16n8 atoms, "
                             "ldmatrix x4 covering two n8 blocks)")
        if self.threads > 1024:
            raise ValueError(f"TensorCoreConfig: {self.threads} threads exceed 1024")
        if self.shared_bytes > DYNAMIC_SHARED_LIMIT:
            raise ValueError(f"TensorCoreConfig: {self.shared_bytes} bytes of shared memory "
                             f"(stages x (bM + bN) x bK x {eb} bytes) exceed the "
                             f"{DYNAMIC_SHARED_LIMIT} a block can have on any GPU (sm_90)")
        for run in (4, 8):                      # float32 and 16-bit outs' runs of C
            runs = self.bN // run
            if self.threads % runs or self.bM % (self.threads // runs):
                raise ValueError(f"TensorCoreConfig: the {self.threads} threads cannot store "
                                 f"C's {runs} runs of {run} values a row of bN={self.bN} in "
                                 f"whole rows of bM={self.bM} (the epilogue)")
        for bmn in (self.bM, self.bN):
            for major in MAJORS:
                for vec in [v for v in (1, 2, 4, 8) if v * eb <= 16]:   # every copy width
                    copy_grid(self, bmn, major, vec)        # must fit (ValueError)

    @property
    def threads(self):
        return 32 * self.warps[0] * self.warps[1]

    @property
    def element_bytes(self):
        return _ELEMENT_BYTES[self.dtype]

    @property
    def ring_bytes(self):
        return self.element_bytes * self.stages * (self.bM + self.bN) * self.bK

    @property
    def shared_bytes(self):
        """Dynamic shared memory: the ring, reused by the epilogue's staged C tile, and
        room to align the ring to its swizzle's period."""
        return max(self.ring_bytes, 4 * self.bM * (self.bN + _PAD_C)) + SWIZZLE_ALIGN


@dataclass(frozen=True)
class Variant:
    """Everything one compiled kernel depends on: the config, the majors of the kernel's
    operands X (MM, K) and Y (NN, K), the output type, the elements per global -> shared copy
    of X and Y (``16 / element bytes`` at most; 1: plain copies of 16-bit data) and whether C
    takes 16-byte stores."""

    config: TensorCoreConfig = TensorCoreConfig()
    a_major: str = "K"
    b_major: str = "K"
    out_dtype: str = "float32"
    vec_a: int = 8
    vec_b: int = 8
    vec_c: bool = True

    def __post_init__(self):
        check_variant(self, "Variant", TensorCoreConfig)
        top = 16 // self.config.element_bytes
        if self.vec_a == 8 and top == 4:        # the default, for a tf32 config
            object.__setattr__(self, "vec_a", 4)
        if self.vec_b == 8 and top == 4:
            object.__setattr__(self, "vec_b", 4)
        for name in ("vec_a", "vec_b"):
            v = getattr(self, name)
            if v not in (1, 2, 4, 8) or v > top:
                raise ValueError(f"Variant: {name} must be 1, 2, 4 or 8 and at most {top} for "
                                 f"{self.config.dtype}, got {v!r}")

    @property
    def signature(self):
        ab = "float32" if self.config.dtype == "tfloat32" else "uint16"
        c = "float32" if self.out_dtype == "float32" else "uint16"
        return (f"void({ab}[::1], {ab}[::1], {c}[::1], " + ", ".join(["uint32"] * 9)
                + ", float32, float32)")


def variant_of(v):
    """``v`` as a Variant (a TensorCoreConfig means ``Variant(config)``)."""
    if isinstance(v, TensorCoreConfig):
        return Variant(v)
    if not isinstance(v, Variant):
        raise TypeError(f"expected a Variant or a TensorCoreConfig, got {v!r}")
    return v
