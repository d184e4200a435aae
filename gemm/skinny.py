"""The small-M kernel: ``out = alpha * A @ B + beta * out`` when A has few rows (decode steps).

With M at most a few dozen, a GEMM is a pass over B: each element of B is used M times, so the
time is B's bytes over the memory bandwidth, and a tile of 64 or 128 rows (the tensor-core and
SIMT kernels) wastes most of its multiplies on rows that are not there. This kernel streams B
once with CUDA-core FMAs (f32 accumulate) and keeps the M rows of A in shared memory:

- a block computes ``rows`` rows of the out (the grid's z walks larger M) by ``BN`` columns,
  over one range of K (the grid's y: split-K when the column blocks are too few to fill the
  GPU; the f32 partials are added in order by :func:`gemm.splitk.reduce_splits`);
- B is read along its unit stride with ``vector``-element loads: where B's N is the unit
  stride (``x @ W`` with W (K, N) row-major) the 32 lanes of a warp hold consecutive column
  vectors and the block's 8 warps take turns over K (their sums added in shared memory, in
  warp order); where K is the unit stride (``x @ W.T``, a torch Linear weight) a warp owns
  ``columns`` columns and its lanes read consecutive K vectors (their sums added with
  butterfly shuffles);
- the block first copies A's rows of its K range to shared memory as f32 (zeros past the
  edges; a range is never longer than :meth:`SkinnyConfig.a_capacity`), then walks the
  range in chunks of B loads and FMAs without further barriers.

``gemm.matmul`` runs float32 calls of at most 8 rows (16 where B's N is the unit stride) here
(:func:`fits`; benchmarks/RESULTS.md, "Few rows"). With more rows a block's few columns make
the blocks read A's rows again and again, and bf16 / f16 are faster on the tensor cores.

Both reductions have a fixed order: the result does not depend on timing (deterministic).
Inputs float32, bfloat16 or float16 (bf16 / f16 as their 16-bit patterns); out float32,
bfloat16 or float16. Any M, N, K and strides with one unit stride per matrix.

>>> SkinnyConfig(rows=16).block_columns("n"), SkinnyConfig(rows=16).block_columns("k")
(64, 16)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, ClassVar, Optional, Tuple

from . import splitk
from ._env import simulator_active
from .call.binary import binary_name, compiled_binary, load_or_compile, sm_count
from .call.launch import Launcher
from .call.operands import (MAX_GRID_YZ, check_same_device, check_spans, kernel_buffer,
                            output_operand, product_operands, stream_handle)
from .dtypes import RAW16, STORAGE, check_scalars, out_dtype_of

__all__ = ["SkinnyConfig", "default_config", "fits", "skinny_function",
           "skinny_kernel", "launch_matmul", "choose_split"]

THREADS = 256
WARPS = THREADS // 32
SHARED_FLOATS = 8192     # a block's shared memory: A's rows and its sums (32 KiB)
_DTYPES = ("float32", "bfloat16", "float16")
_SCALARS = ("uint32",) * 13 + ("float32",) * 2


@dataclass(frozen=True)
class SkinnyConfig:
    """``rows`` of the out per block (1 to 32, a power of two), ``vector`` elements per load
    of B along its unit stride (1, 2, 4 or 8, at most 16 bytes), ``unroll`` K steps per warp
    per chunk (B's N the unit stride: the loads in flight per thread), ``columns`` columns
    per warp (B's K the unit stride), ``split_k`` K ranges at least (None: chosen from the
    shape and the GPU's SMs; more where a range's rows of A would not fit the block's shared
    memory, :meth:`a_capacity`), ``dtype`` of A and B and ``out_dtype``."""

    threads: ClassVar[int] = THREADS        # a block: 8 warps
    rows: int = 16
    vector: int = 2
    unroll: int = 4
    columns: int = 2
    split_k: Optional[int] = None
    dtype: str = "bfloat16"
    out_dtype: str = "bfloat16"

    def __post_init__(self):
        for name in ("dtype", "out_dtype"):
            if getattr(self, name) not in _DTYPES:
                raise ValueError(f"SkinnyConfig: {name} must be one of {_DTYPES}, got "
                                 f"{getattr(self, name)!r}")
        if self.rows not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"SkinnyConfig: rows must be a power of two in 1..32, got "
                             f"{self.rows!r}")
        width = 4 if self.dtype == "float32" else 2
        if self.vector not in (1, 2, 4, 8) or self.vector * width > 16:
            raise ValueError(f"SkinnyConfig: vector must be 1, 2, 4 or 8 elements of at most "
                             f"16 bytes, got {self.vector!r} of {self.dtype}")
        for name, top in (("unroll", 16), ("columns", 16)):
            v = getattr(self, name)
            if not (isinstance(v, int) and 1 <= v <= top):
                raise ValueError(f"SkinnyConfig: {name} must be an int in 1..{top}, got {v!r}")
        if self.split_k is not None and not (isinstance(self.split_k, int)
                                             and 1 <= self.split_k <= splitk.MAX_SPLIT_K):
            raise ValueError(f"SkinnyConfig: split_k must be None or an int in "
                             f"1..{splitk.MAX_SPLIT_K}, got {self.split_k!r}")

    @property
    def a_stride(self) -> int:
        """Floats between the K positions of A's rows in shared memory (:func:`padded_rows`)."""
        return padded_rows(self.rows)

    def block_columns(self, b_unit: str) -> int:
        """Columns of the out a block computes: 32 lanes x ``vector`` (B's N the unit stride,
        ``b_unit`` "n") or 8 warps x ``columns`` (``b_unit`` "k")."""
        return 32 * self.vector if b_unit == "n" else WARPS * self.columns

    def chunk(self, b_unit: str) -> int:
        """K per chunk: 8 warps x ``unroll`` steps ("n") or 32 lanes x ``vector`` ("k")."""
        return WARPS * self.unroll if b_unit == "n" else 32 * self.vector

    def a_capacity(self, b_unit: str) -> int:
        """The most K positions of A's rows a block holds in shared memory (whole chunks, at
        least one): a K range is never longer. With the block's sums, 32 KiB at most."""
        kc = self.chunk(b_unit)
        room = (SHARED_FLOATS - self.rows * self.block_columns(b_unit)) // padded_rows(
            self.rows)
        return max(kc, room // kc * kc)


def default_config(dtype: str, out_dtype: str, m: int, b_unit: str) -> SkinnyConfig:
    """The config of a call without one: rows the next power of two >= M (32 at most), about
    32 accumulators per thread (few registers: many threads, many loads in flight), 16-byte
    loads of B where that allows. Where B's N is the unit stride, a thread holds at least 2
    columns (64 accumulators at 32 rows): a block of 32 columns would read A's rows from L2
    twice as often for each byte of B."""
    rows = 1
    while rows < min(m, 32):
        rows *= 2
    widest = 16 // (4 if dtype == "float32" else 2)
    if b_unit == "n":
        vector = min(widest, max(2, 32 // rows))
        return SkinnyConfig(rows=rows, vector=vector, dtype=dtype, out_dtype=out_dtype)
    columns = max(1, min(4, 32 // rows))
    return SkinnyConfig(rows=rows, vector=widest, columns=columns, dtype=dtype,
                        out_dtype=out_dtype)


def fits(dtype: str, m: int, n: int, k: int, batch: int, b_unit: str) -> bool:
    """Whether ``gemm.matmul`` without a kernel named runs a call on this kernel: one float32
    product of at most 8 rows, or 16 where B's N is the unit stride, and N x K >= 2**18
    (benchmarks/RESULTS.md, "Few rows: the small-M kernel gemm.skinny": there it is faster
    than the SIMT kernel's 128-row tile). bf16 / f16 stay on the tensor cores, which are
    faster there: blocks of few columns read A's rows again and again."""
    top = 16 if b_unit == "n" else 8
    return dtype == "float32" and batch == 1 and m <= top and n * k >= 1 << 18


def padded_rows(rows):
    """Floats between the K positions of A in shared memory: ``rows``, plus 4 when that is a
    multiple of 8, so that 8 lanes reading 16 bytes each at consecutive positions hit 32
    different banks."""
    return rows + 4 if rows % 8 == 0 else rows


# --- compiled kernels and the call --------------------------------------------------------

def _signature(cfg):
    el, out = STORAGE[cfg.dtype], STORAGE[cfg.out_dtype]
    return (f"void({el}[::1], {el}[::1], {out}[::1], float32[::1], "
            + ", ".join(["uint32"] * 13) + ", float32, float32)")


def skinny_function(cfg: SkinnyConfig, b_unit: str) -> Any:
    """The kernel as a plain Python function (for ``compile_ptx``), written with gemm.cute
    (:func:`gemm.skinny_kernel.kernel_function`). Parameters: ``X`` (A's elements), ``Y``
    (B's), ``C`` (the out's), ``W`` (the f32 split-K workspace), then M, N, K, A's strides
    (sam, sak), B's (sbn, sbk), C's (scm, scn), the workspace's (swm, swn, sws: row, column,
    range), ``KR`` (K per range, a multiple of the chunk), alpha, beta. Grid: (column
    blocks, K ranges, row blocks), 256 threads."""
    from .skinny_kernel import kernel_function     # numba and gemm.cute: only to compile
    return kernel_function(cfg, b_unit)


def _max_registers(cfg):
    """A variant's register cap: 64 for one row, so that the four blocks an SM is given
    (:func:`choose_split`) fit its 64K registers (the bf16 kernel takes 65 uncapped); none
    otherwise (more rows need more, and a cap would spill)."""
    return 64 if cfg.rows == 1 else None


@lru_cache(maxsize=None)
def skinny_kernel(cfg: SkinnyConfig, b_unit: str) -> Any:
    """The variant's numba kernel (in the simulator) or its compiled
    :class:`gemm.call.binary.Binary` (read from disk when an earlier process compiled it).
    ``split_k`` is a run-time choice: it does not change what is compiled."""
    cfg = replace(cfg, split_k=None)
    if simulator_active():
        from numba import cuda
        return cuda.jit(_signature(cfg))(skinny_function(cfg, b_unit))

    def compile_binary():
        from numba import cuda      # only to compile: a loaded kernel does without numba
        jit = cuda.jit(_signature(cfg), max_registers=_max_registers(cfg))
        return compiled_binary(jit(skinny_function(cfg, b_unit)), _signature(cfg))
    return load_or_compile(binary_name("skinny", (cfg, b_unit)), compile_binary)


@lru_cache(maxsize=None)
def _launcher(cfg, b_unit):
    size = 4 if cfg.dtype == "float32" else 2
    out = 4 if cfg.out_dtype == "float32" else 2
    return Launcher(skinny_kernel(cfg, b_unit), 4, (size, size, out, 4), _SCALARS,
                    free_scalars=2)


def _vector_fits(op, ld, vector, size):
    """The widest vector <= ``vector`` whose loads the operand's address and leading
    dimension keep aligned."""
    while vector > 1 and (op.ptr % (vector * size) or ld % vector):
        vector //= 2
    return vector


def choose_split(blocks: int, k: int, chunk: int, slots: int) -> int:
    """K ranges for ``blocks`` blocks of a call: enough blocks for the GPU's ``slots`` (SMs x
    4), each range at least 4 chunks; 1 when fewer than 2 ranges would do."""
    split = min(slots // max(blocks, 1), k // (4 * chunk), splitk.MAX_SPLIT_K)
    return split if split >= 2 else 1


def launch_matmul(A: Any, B: Any, out: Any, alpha: float, beta: float,
                  config: Optional[SkinnyConfig], out_dtype: Optional[str],
                  caller: str = "matmul", stream: Any = None) -> Tuple[Any, Any]:
    """``out = alpha * A @ B + beta * out`` on the small-M kernel (one product: 2-D A and B).
    Returns ``(out, plan)`` as the other kernels' ``launch_matmul`` (plan None in the
    simulator). ``out_dtype``: float32, bfloat16 or float16 (default A's type)."""
    sim = simulator_active()
    check_scalars(alpha, beta, caller)
    a, b, shape = product_operands(caller, A, B, sim)
    if len(shape) != 2:
        raise ValueError(f"{caller}: the small-M kernel takes 2-D A and B, not a batch")
    (m, k), n = a.shape, b.shape[1]
    dtype = a.dtype
    if config is not None and dtype in RAW16 and config.dtype != "float32":
        dtype = config.dtype                    # 16-bit integers holding the config's type
    if b.dtype != a.dtype or dtype not in _DTYPES:
        raise TypeError(f"{caller}: A is {a.dtype} and B is {b.dtype}; the small-M kernel "
                        f"takes two of {_DTYPES} (or 16-bit integers with a SkinnyConfig)")
    od, stored = out_dtype_of(out, out_dtype or (None if out is not None else dtype), caller,
                              sim)
    out, c = output_operand(caller, out, a, shape, sim, dtype=stored or od, beta=beta)
    named = (("A", a), ("B", b), ("out", c))
    check_same_device(caller, named)
    check_spans(caller, named)
    b_unit = "n" if b.unit_mode == 1 else "k"
    cfg = config or default_config(dtype, od, m, b_unit)
    if (cfg.dtype, cfg.out_dtype) != (dtype, od):
        raise ValueError(f"{caller}: the config is for {cfg.dtype} -> {cfg.out_dtype}, the "
                         f"call {dtype} -> {od}")
    (sak, sam), (sbk, sbn) = a.strides[::-1], b.strides
    vector = _vector_fits(b, sbk if b_unit == "n" else sbn, cfg.vector, b.itemsize)
    if vector != cfg.vector:
        cfg = replace(cfg, vector=vector)
    chunk, bn = cfg.chunk(b_unit), cfg.block_columns(b_unit)
    grid = [-(-n // bn), 1, -(-m // cfg.rows)]
    split = cfg.split_k or (1 if sim else choose_split(
        grid[0] * grid[2], k, chunk, 4 * sm_count(c.device)))
    split = max(split, -(-k // cfg.a_capacity(b_unit)))
    kr = -(-(-(-k // split)) // chunk) * chunk          # K per range: whole chunks
    grid[1] = -(-k // kr)
    if grid[1] > MAX_GRID_YZ:
        raise ValueError(f"{caller}: K = {k} needs {grid[1]} ranges of the small-M kernel; "
                         f"at most {MAX_GRID_YZ}")
    handle = 0 if sim else stream_handle(stream, a, caller)
    ab = "float32" if dtype == "float32" else "uint16"
    cd = "float32" if od == "float32" else "uint16"
    buffers = [kernel_buffer(a, ab), kernel_buffer(b, ab), kernel_buffer(c, cd)]
    scm, scn = c.strides
    rows, cols, ldw, sw, size, ldc = splitk.partials_layout(c, m, n, grid[1], caller)
    w, owner = splitk.partials_buffer(size if grid[1] > 1 else 1, handle, c)
    buffers.append(w)
    scalars = (m, n, k, sam, sak, sbn, sbk, scm, scn) + sw + (rows * ldw, kr)
    kern = _launcher(cfg, b_unit)(tuple(grid), (THREADS, 1, 1), handle, buffers,
                                  scalars + (alpha, beta))
    if grid[1] == 1:
        return out, kern
    red = splitk.reduce_splits(od, w, buffers[2], rows, cols, ldw, 1, grid[1], ldc, 1, 0,
                               alpha, beta, handle)
    del owner                           # the launches are enqueued
    return out, splitk.partials_plan(kern, red, size, c, 3)
