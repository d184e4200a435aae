"""The Hopper GEMM's configuration: :class:`HopperConfig` (one kernel's tiles, ring, consumers
and schedule, split-K, swap, epilogue, 3xTF32) and :class:`HopperVariant` (everything one
compiled kernel depends on). :mod:`gemm.hopper` runs them; :mod:`gemm.hopper.rules` picks one
from a call's shape."""

from __future__ import annotations

from dataclasses import dataclass

from .. import splitk
from ..arch.registers import consumer_registers
from ..arch.smem import DYNAMIC_SHARED_LIMIT, SWIZZLE_ALIGN
from ..dtypes import DTYPES, FP8_DTYPES, STORAGE, check_variant
from ..epilogue import ACTIVATIONS, BIASES

__all__ = ["HopperConfig", "HopperVariant", "SCHEDULES", "EPILOGUES", "STAGING_BYTES",
           "X3_ACCUMULATORS", "SM_SHARED", "MAX_SPLIT_K", "MIN_SPLIT_TILES", "FP8_DTYPES",
           "FP8_TYPES", "SCALES", "BLOCK", "PROMOTE_ACCUMULATORS"]

# the FP8 operand types (torch's names) and the PTX names of their wgmma
FP8_TYPES = dict(zip(FP8_DTYPES, ("e4m3", "e5m2")))
# an FP8 product's scales: one per operand, per row of A and column of B, or per block (1 x
# BLOCK of A, BLOCK x BLOCK of B; DeepSeek-V3's), each k-tile's products scaled as promoted
SCALES = ("tensor", "rows", "blocks")
BLOCK = 128
PROMOTE_ACCUMULATORS = 64       # per thread where k-tiles are promoted: two such sets by turns,
#                                 and as many for the sum
_ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "tfloat32": 4, "float8_e4m3fn": 1,
                  "float8_e5m2": 1}
SCHEDULES = ("cooperative", "pingpong", "plain")
EPILOGUES = ("registers", "tma")
STAGING_BYTES = 16384       # per consumer with the TMA epilogue: two 64 x 128-byte pieces
MAX_SPLIT_K, MIN_SPLIT_TILES = splitk.MAX_SPLIT_K, splitk.MIN_RANGE_TILES
X3_ACCUMULATORS = 64        # tf32x3's accumulators per thread (and as many for the sum)
SM_SHARED = 233472          # bytes of shared memory per SM (sm_90: 228 KiB)
_SIGNATURE_TYPE = _BIAS_TYPES = STORAGE     # an out's or bias's elements: f32, or 16-bit bits


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class HopperConfig:
    """One Hopper kernel: ``bM`` rows per consumer warpgroup (64 or 128: one or two wgmma
    atoms of 64 rows), ``bN`` columns (the wgmma's N: a multiple of 64 up to 256, or a
    multiple of 8 below 64 where the kernel's Y is K-major (the 128-byte swizzle atom of an
    MN-major Y is 64 columns wide), e.g. a swapped decode step's few rows of A), ``bK``
    (None: 128-byte K rows, 64 bf16/f16, 32 tf32 or 128 FP8 elements), ``stages`` ring slots,
    ``consumers`` warpgroups, ``schedule`` how they share the block's tiles ("cooperative":
    a tile of consumers * bM x bN rows, each consumer bM of them; "pingpong": each consumer
    its own bM x bN tiles in turn, one storing while the other multiplies; "plain": no
    producer, one warpgroup (consumers=1) loads and multiplies, Pallas' ``emit_pipeline``,
    two blocks per SM where shared memory allows), ``delay_release``
    (1: a slot is released one step late, keeping one wgmma group in flight), ``group_m`` (tile
    rows a sweep covers before the next tile column), ``dtype``, ``memory_registers`` (the
    producer's registers after ``setmaxnreg``, the consumers taking the rest; None: no
    register split; with one consumer there is none, a block's 256 threads have enough),
    ``split_k`` (K cut in that many ranges of whole k-tiles, each a work unit of the
    persistent grid writing its f32 partial tile to a workspace; a second kernel adds the
    partials in order (deterministic) with alpha, beta and the out's type: more work units
    where the output tiles are too few to fill the GPU), ``swap_ab`` (the kernel's X and Y
    the other way round from the out's major, its C then stored column by column: for a
    row-major out C^T = B^T A^T, so that B's columns fill the tile's rows and A's few rows
    its narrowest N; see :func:`swaps`), ``epilogue`` ("tma": each consumer stages 64-row x
    128-byte pieces of ``alpha * acc`` in shared memory, swizzled, and one thread writes each
    with a TMA store while the next is staged; taken where TMA can write C (16-byte aligned
    address, leading dimension and matrix step), beta is 0, and not with split-K, swap_ab or
    the plain schedule; else, and for "registers", each thread stores its accumulators to C
    with alpha and beta (the two timed: benchmarks/RESULTS.md, "The TMA epilogue"). ``tf32x3``
    (dtype "tfloat32" only): 3xTF32, float32 products to about float32's accuracy on the
    tensor cores. Each step the consumers write the small parts of the slot's operands (x
    minus x's tf32 part, rounded to tf32) to a buffer of their own, and three wgmma add
    big(X) big(Y), small(X) big(Y) and big(X) small(Y), each step's products added to the
    tile's sum on the CUDA cores; delay_release must be 0 (the buffer is rewritten each step),
    and bM x bN / 128 at most ``X3_ACCUMULATORS`` (registers for the sum). The FP8 dtypes
    ("float8_e4m3fn", "float8_e5m2": X's; Y's is the variant's ``b_dtype``) take scales
    (:class:`HopperVariant`).

    The default, 2 x 64 x 256 tiles (128 x 256 per block), 3 slots and delay_release 0, is
    the tuned choice (benchmarks/RESULTS.md, "How the default tiles and warp specialization
    were chosen").
    """

    bM: int = 64
    bN: int = 256
    bK: int = None
    stages: int = 3
    consumers: int = 2
    delay_release: int = 0
    group_m: int = 8
    dtype: str = "bfloat16"
    memory_registers: int = 40
    schedule: str = "cooperative"
    split_k: int = 1
    swap_ab: bool = False
    epilogue: str = "tma"
    tf32x3: bool = False

    def __post_init__(self):
        if self.dtype not in DTYPES + FP8_DTYPES:
            raise ValueError(f"HopperConfig: dtype must be one of {DTYPES + FP8_DTYPES}, got "
                             f"{self.dtype!r}")
        if self.bK is None:
            object.__setattr__(self, "bK", 128 // self.element_bytes)
        for name in ("bM", "bN", "bK", "stages", "consumers", "group_m", "split_k"):
            v = getattr(self, name)
            if not (_is_int(v) and v >= 1):
                raise ValueError(f"HopperConfig: {name} must be a positive int, got {v!r}")
        if self.bM not in (64, 128):
            raise ValueError(f"HopperConfig: bM must be 64 or 128 (wgmma atoms of 64 rows), "
                             f"got {self.bM}")
        if not (self.bN % 64 == 0 and self.bN <= 256 or self.bN < 64 and self.bN % 8 == 0):
            raise ValueError(f"HopperConfig: bN must be a multiple of 64 up to 256 or of 8 "
                             f"below 64, got {self.bN}")
        if self.bK * self.element_bytes != 128:
            raise ValueError(f"HopperConfig: bK must be {128 // self.element_bytes} for "
                             f"{self.dtype} (128-byte K rows, the 128-byte swizzle), got "
                             f"{self.bK}")
        if self.consumers not in (1, 2):
            raise ValueError(f"HopperConfig: consumers must be 1 or 2, got {self.consumers}")
        if not 2 <= self.stages <= 8:
            raise ValueError(f"HopperConfig: stages must be in 2..8, got {self.stages}")
        if self.delay_release not in (0, 1):
            raise ValueError(f"HopperConfig: delay_release must be 0 or 1, got "
                             f"{self.delay_release!r}")
        if self.split_k > MAX_SPLIT_K:
            raise ValueError(f"HopperConfig: split_k must be at most {MAX_SPLIT_K}, got "
                             f"{self.split_k}")
        if self.epilogue not in EPILOGUES:
            raise ValueError(f"HopperConfig: epilogue must be one of {EPILOGUES}, got "
                             f"{self.epilogue!r}")
        if not isinstance(self.tf32x3, bool):
            raise ValueError(f"HopperConfig: tf32x3 must be a bool, got {self.tf32x3!r}")
        if self.tf32x3 and (self.dtype != "tfloat32" or self.delay_release
                            or self.bM * self.bN // 128 > X3_ACCUMULATORS):
            raise ValueError(f"HopperConfig: tf32x3 takes dtype 'tfloat32', delay_release 0 "
                             f"and at most {X3_ACCUMULATORS} accumulators (bM x bN / 128), "
                             f"got {self.dtype!r}, {self.delay_release} and {self.bM} x "
                             f"{self.bN}")
        if not isinstance(self.swap_ab, bool):
            raise ValueError(f"HopperConfig: swap_ab must be a bool, got {self.swap_ab!r}")
        if self.group_m > 65535:
            raise ValueError(f"HopperConfig: group_m must be at most 65535, got {self.group_m}")
        if self.bM * self.bN // 128 > 128:
            raise ValueError(f"HopperConfig: bM x bN = {self.bM} x {self.bN} needs "
                             f"{self.bM * self.bN // 128} accumulators per thread; at most 128")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"HopperConfig: schedule must be one of {SCHEDULES}, got "
                             f"{self.schedule!r}")
        if self.schedule == "plain" and self.consumers != 1:
            raise ValueError("HopperConfig: the plain schedule has one warpgroup that loads "
                             f"and multiplies: consumers must be 1, got {self.consumers}")
        if self.consumers == 1:
            object.__setattr__(self, "memory_registers", None)
        if self.memory_registers is not None and self.memory_registers not in range(24, 257, 8):
            raise ValueError("HopperConfig: memory_registers must be None or a multiple of 8 "
                             f"in 24..256, got {self.memory_registers!r}")
        if self.shared_bytes > DYNAMIC_SHARED_LIMIT:
            raise ValueError(f"HopperConfig: {self.shared_bytes} bytes of shared memory (stages "
                             f"x (tile rows + bN) x 128 bytes + 1 KiB) exceed the "
                             f"{DYNAMIC_SHARED_LIMIT} a block can have")

    @property
    def element_bytes(self):
        return _ELEMENT_BYTES[self.dtype]

    @property
    def threads(self):
        return 128 * (self.consumers + (self.schedule != "plain"))

    @property
    def blocks_per_sm(self):
        """Blocks the persistent grid places on each SM: 1, or for the plain schedule 2
        where two rings (and each block's 2 KiB of reserved and static shared memory) fit."""
        if self.schedule != "plain":
            return 1
        return 2 if 2 * (self.shared_bytes + 2048) <= SM_SHARED else 1

    @property
    def registers(self):
        """``(producer's, each consumer's)`` registers per thread after ``setmaxnreg``
        (:mod:`gemm.arch.registers`), or ``(None, None)`` where the kernel sets none (one
        consumer warpgroup: memory_registers None)."""
        if self.memory_registers is None:
            return None, None
        return (self.memory_registers,
                consumer_registers(self.memory_registers, self.consumers))

    @property
    def tile_m(self):
        """Rows of C a block's tile covers."""
        return self.bM * self.consumers if self.schedule == "cooperative" else self.bM

    @property
    def slot_bytes(self):
        """Bytes of one ring slot: the tile's rows of X and Y, 128 bytes each."""
        return (self.tile_m + self.bN) * 128

    @property
    def mbarriers(self):
        """The block's mbarriers: full and empty a slot, and pingpong's turn a consumer."""
        return 2 * self.stages + (self.consumers if self.schedule == "pingpong" else 0)

    @property
    def split_buffers(self):
        """tf32x3's buffers of small parts, a slot each: one per block, or one per consumer
        where they take tiles in turn."""
        if not self.tf32x3:
            return 0
        return self.consumers if self.schedule == "pingpong" else 1

    @property
    def shared_bytes(self):
        """Dynamic shared memory: the ring, tf32x3's buffers, and 1 KiB to align them for
        the swizzle."""
        return (self.stages + self.split_buffers) * self.slot_bytes + SWIZZLE_ALIGN


@dataclass(frozen=True)
class HopperVariant:
    """Everything one compiled Hopper kernel depends on: the config, the majors of X (MM, K)
    and Y (NN, K), the output type and whether C takes paired stores, the fused epilogue
    and FP8's fields."""

    config: HopperConfig = HopperConfig()
    a_major: str = "K"
    b_major: str = "K"
    out_dtype: str = "float32"
    vec_c: bool = True
    split_k: bool = False           # K ranges (their number a run-time argument)
    c_columns: bool = False         # C stored column by column: a row-major out of C^T
    tma_store: bool = False         # the TMA epilogue (HopperConfig.epilogue "tma")
    bias: str = "none"              # a vector added, one value per C "rows" or "columns"
    bias_dtype: str = "float32"     # its elements' type (bfloat16, float16 or float32)
    activation: str = "none"        # applied last (gemm.epilogue.ACTIVATIONS)
    b_dtype: str = None             # FP8: Y's type (None: the config's dtype, X's)
    scale: str = "none"             # FP8: its scales (SCALES)
    promote: bool = False           # FP8: each k-tile's products added to a float32 sum
    scale_a_mn: bool = False        # FP8 blocks: X's scales (MM, K blocks) MN-major
    stage_scales: bool = False      # FP8 blocks: a k-tile's scales copied into shared memory

    def __post_init__(self):
        if self.b_dtype is None:
            object.__setattr__(self, "b_dtype", self.config.dtype)
        check_variant(self, "HopperVariant", HopperConfig)
        if self.c_columns and self.vec_c:
            raise ValueError("HopperVariant: a C stored column by column takes no paired stores")
        if self.tma_store and (self.split_k or self.c_columns
                               or self.config.schedule == "plain"):
            raise ValueError("HopperVariant: the TMA epilogue takes no split-K, no C stored by "
                             "columns and not the plain schedule")
        if self.config.bN < 64 and self.b_major != "K":
            raise ValueError(f"HopperVariant: tiles of {self.config.bN} columns need a K-major "
                             f"Y (the 128-byte swizzle of an MN-major Y spans 64 columns)")
        if self.bias not in ("none",) + BIASES or self.bias_dtype not in _BIAS_TYPES:
            raise ValueError(f"HopperVariant: bias must be 'none' or one of {BIASES} and "
                             f"bias_dtype one of {tuple(_BIAS_TYPES)}")
        if self.activation not in ("none",) + ACTIVATIONS:
            raise ValueError(f"HopperVariant: activation must be 'none' or one of "
                             f"{ACTIVATIONS}")
        if self.config.dtype == "tfloat32" and "MN" in (self.a_major, self.b_major):
            raise ValueError("HopperVariant: tf32 operands must be K-major (wgmma transposes "
                             "only 16-bit types); transpose the operand or use the SM80 kernel")
        self._fp8_checked()

    def _fp8_checked(self):
        """ValueError unless the FP8 fields agree: FP8 operands (both K-major) with scales;
        promotion with room for the sum's registers."""
        cfg = self.config
        fp8 = cfg.dtype in FP8_DTYPES
        if not fp8:
            if self.b_dtype != cfg.dtype or self.scale != "none" or self.promote:
                raise ValueError("HopperVariant: b_dtype, scale and promote are FP8's")
            return
        if self.b_dtype not in FP8_DTYPES or self.scale not in SCALES:
            raise ValueError(f"HopperVariant: an FP8 product takes b_dtype one of {FP8_DTYPES} "
                             f"and scale one of {SCALES}, got {self.b_dtype!r}, {self.scale!r}")
        if (self.a_major, self.b_major) != ("K", "K"):
            raise ValueError("HopperVariant: FP8 operands must both be K-major (wgmma "
                             "transposes no 8-bit operand)")
        if not isinstance(self.promote, bool):
            raise ValueError(f"HopperVariant: promote must be a bool, got {self.promote!r}")
        if self.scale == "blocks" and not (self.promote and BLOCK % cfg.bN == 0
                                           and cfg.bK == BLOCK):
            raise ValueError(f"HopperVariant: block scales are applied as each k-tile is "
                             f"promoted (promote=True), k-tiles of {BLOCK} and tiles inside "
                             f"one {BLOCK}-column block of Y (bN dividing {BLOCK})")
        if self.scale_a_mn and self.scale != "blocks":
            raise ValueError("HopperVariant: scale_a_mn is of block scales")
        if self.stage_scales and not self.scale_a_mn:
            raise ValueError("HopperVariant: stage_scales copies MN-major block scales "
                             "(scale_a_mn)")
        if self.promote and cfg.bM * cfg.bN // 128 > PROMOTE_ACCUMULATORS:
            raise ValueError(f"HopperVariant: promote keeps a float32 sum beside the "
                             f"accumulators: at most {PROMOTE_ACCUMULATORS} of each per thread "
                             f"(bM x bN / 128), got {cfg.bM} x {cfg.bN}")

    @property
    def vector_floats(self):
        """Floats per consumer of the vectors the TMA epilogue reads from shared memory (the
        kernel stages them there per tile): FP8's row and column
        scales (``scale`` "rows"), and the bias."""
        if not self.tma_store:
            return 0
        cfg = self.config
        return ((cfg.bM + cfg.bN if self.scale == "rows" else 0)
                + {"none": 0, "rows": cfg.bM, "columns": cfg.bN}[self.bias])

    @property
    def scale_floats(self):
        """Floats of one slot's block scales in shared memory where the producer stages them
        (``stage_scales``): X's, one a row of the tile, then Y's, padded to 16 bytes."""
        return self.config.tile_m + 4 if self.stage_scales else 0

    @property
    def scales_at(self):
        """Where the staged block scales start, in bytes past the ring's aligned start: past
        the ring and the TMA epilogue's staging and vectors."""
        cfg = self.config
        return self.shared_bytes - SWIZZLE_ALIGN - 4 * cfg.stages * self.scale_floats

    @property
    def shared_bytes(self):
        """Dynamic shared memory: the config's, the TMA epilogue's staging and vectors, and
        the staged block scales."""
        cfg = self.config
        staged = 4 * cfg.stages * self.scale_floats
        if not self.tma_store:
            return cfg.shared_bytes + staged
        return (cfg.shared_bytes + cfg.consumers * (STAGING_BYTES + 4 * self.vector_floats)
                + staged)

    @property
    def block_shared_bytes(self):
        """Shared memory of a block: the dynamic bytes and the static mbarriers (8 bytes
        each, :attr:`HopperConfig.mbarriers`), which together must fit
        DYNAMIC_SHARED_LIMIT. The kernel declares its dynamic arrays SWIZZLE_ALIGN-aligned
        (:func:`gemm.arch.smem.shared_alignment`), so its static bytes are padded to a
        multiple of SWIZZLE_ALIGN before them (the same count in the simulator, whose calls
        then take the GPU's variants)."""
        static = -(-8 * self.config.mbarriers // SWIZZLE_ALIGN) * SWIZZLE_ALIGN
        return self.shared_bytes + static

    @property
    def signature(self):
        """The kernel's parameters: the maps of X, Y and C, C, the split-K workspace, the
        bias and FP8's scales of X and Y, then the sizes, strides, alpha and beta."""
        c = _SIGNATURE_TYPE[self.out_dtype]
        bias = f"{_BIAS_TYPES[self.bias_dtype]}[::1], float32[::1], float32[::1], "
        return (f"void(uint64[::1], uint64[::1], uint64[::1], {c}[::1], float32[::1], {bias}"
                + ", ".join(["uint32"] * 10) + ", float32, float32)")
