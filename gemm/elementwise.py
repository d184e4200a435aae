"""Pipelined elementwise addition: the Pallas tutorial's ``add_matrices`` with numba-cuda.

``out = x + y`` for float32 matrices, block by block through shared memory with a cp.async
ring, written with :mod:`gemm.cute` (:func:`kernel_function`). Each thread block walks its
own sequence of blocks (tile ``bx``, ``bx + gridDim``, ... of the row-major order of (rows
of blocks, columns of blocks)) as its pipeline's steps, Pallas' index map

    step s -> (q // blocks_per_row, q % blocks_per_row),   q = bx + s * gridDim.x

The ring is :func:`gemm.pipeline.ring_schedule`'s, event for event: ``stages`` shared slots
per input, ``stages - 1 - delay_release`` steps in flight, one commit group per issue point
(empty past the last step), every wait ``cp_async_wait(stages - 2 - delay_release)``. A
step's body adds the two shared tiles into registers and stores them to the out (16-byte
shared loads and global stores where the layouts allow). Each tile is cut into runs of
``vector`` elements along its unit stride, and thread ``t`` takes runs ``t, t + threads,
..``: any block shape and thread count. Partial blocks are predicated: copies of runs past
the edge read nothing and fill zeros, stores past the edge are left out (a run lies inside
or outside the matrix whole: its vector divides the matrix's extent along it).

Up to 48 KiB of shared memory the tiles are static shared arrays; above (``shared="auto"``,
or always with ``shared="dynamic"``) they are slices of the block's dynamic shared memory
(up to 227 KiB), which the launch passes and the compiled kernel is allowed
(:meth:`gemm.call.binary.Binary.allow_dynamic_shared`).

>>> cfg = AddConfig(block=(8, 128), stages=3)
>>> cfg.shared_bytes, cfg.dynamic     # 3 slots of x and y, 4 KiB each
(24576, False)
>>> AddConfig(block=(32, 128), stages=4, threads=256).dynamic    # 128 KiB
True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional, Tuple

from gemm._env import simulator_active
from gemm.arch.smem import DYNAMIC_SHARED_LIMIT, STATIC_SHARED_LIMIT
from gemm.call.launch import compiled_launcher
from gemm.call.operands import (check_same_device, check_spans, current_stream, kernel_buffer,
                                operand, output_operand)
from gemm.pipeline import check_ring_parameters

__all__ = ["AddConfig", "add_matrices", "prepare_add", "kernel_function", "launcher",
           "ADD_SIGNATURE"]

ADD_SIGNATURE = ("void(float32[::1], float32[::1], float32[::1], uint32, uint32, uint32, "
                 "uint32, uint32)")
_SCALARS = ("uint32",) * 5


@dataclass(frozen=True)
class AddConfig:
    """Block shape (bm, bn), pipeline stages and delay_release, threads per block, and where
    the tiles live: ``shared`` "static", "dynamic" or "auto" (dynamic above 48 KiB)."""

    block: tuple = (8, 128)
    stages: int = 3
    delay_release: int = 0
    threads: int = 128
    shared: str = "auto"

    def __post_init__(self):
        b = self.block
        if not (isinstance(b, tuple) and len(b) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in b)):
            raise ValueError(f"add_matrices: block must be a pair of positive ints, got {b!r}")
        if not (isinstance(self.threads, int) and 1 <= self.threads <= 1024):
            raise ValueError(f"add_matrices: threads must be an int in 1..1024, "
                             f"got {self.threads!r}")
        if self.shared not in ("auto", "static", "dynamic"):
            raise ValueError(f"add_matrices: shared must be 'auto', 'static' or 'dynamic', "
                             f"got {self.shared!r}")
        check_ring_parameters(self.stages, self.delay_release, "add_matrices")
        limit = DYNAMIC_SHARED_LIMIT if self.dynamic else STATIC_SHARED_LIMIT
        if self.shared_bytes > limit:
            kind = "dynamic" if self.dynamic else "static"
            raise ValueError(f"add_matrices: block {b} with {self.stages} stages needs "
                             f"{self.shared_bytes} bytes of shared memory, more than the "
                             f"{limit // 1024} KiB of {kind} shared memory of a block; use a "
                             "smaller block or fewer stages")

    @property
    def dynamic(self):
        """Whether the tiles live in dynamic shared memory."""
        return self.shared == "dynamic" or (self.shared == "auto"
                                            and self.shared_bytes > STATIC_SHARED_LIMIT)

    @property
    def slot(self):
        """Elements of one ring slot: a block, rounded up to 16 bytes."""
        return -(-self.block[0] * self.block[1] // 4) * 4

    @property
    def shared_bytes(self):
        """The ring's bytes: ``stages`` slots of x and of y."""
        return 4 * self.slot * 2 * self.stages


def kernel_function(cfg, units=(1, 1), vectors=(4, 4, 4)):
    """The kernel (a Python function for ``cuda.jit(ADD_SIGNATURE)``: ``kernel(X, Y, O, M,
    N, ldx, ldy, ldo)``, out row-major). ``units``: the unit-stride mode of x and y (1: along
    N; add_matrices transposes the problem for a column-major out); ``vectors``: the
    elements of each run of x, y and out (each divides the block's and the matrix's extent
    along its unit stride, and the operand's alignment)."""
    from gemm.elementwise_kernel import add_kernel_function   # numba: only to compile
    return add_kernel_function(cfg, units, vectors)


@lru_cache(maxsize=None)
def launcher(cfg: AddConfig, units: Tuple[int, int] = (1, 1),
             vectors: Tuple[int, int, int] = (4, 4, 4)) -> Tuple[Any, int]:
    """The Launcher of a variant (``units`` and ``vectors`` as :func:`kernel_function`'s;
    :func:`gemm.call.launch.compiled_launcher`: its cubin on a GPU, kept on disk) and the
    dynamic shared bytes its launches pass, which the compiled kernel is allowed."""
    nbytes = cfg.shared_bytes if cfg.dynamic else 0
    made = compiled_launcher("add", (cfg, units, vectors), kernel_function(cfg, units, vectors),
                             ADD_SIGNATURE, (4, 4, 4), _SCALARS)
    if nbytes > STATIC_SHARED_LIMIT and not simulator_active():
        made.kernel.allow_dynamic_shared(nbytes)
    return made, nbytes


def _vector(op, strides, extent, block):
    """Elements of the operand's runs: its address and leading dimension aligned to them,
    and the matrix's and the block's ``extent`` and ``block`` along the unit stride
    multiples of them (a run is inside the matrix or outside it whole)."""
    ld = strides[0] if strides[1] == 1 else strides[1]
    if op.shape[0] == 1 or op.shape[1] == 1:
        ld = 4 * ld      # one row or column: the leading dimension never moves an access
    for v in (4, 2):
        if op.ptr % (4 * v) == 0 and ld % v == 0 and extent % v == 0 and block % v == 0:
            return v
    return 1


def _default_blocks(cfg, tiles):
    """Blocks that fill the GPU: the resident blocks per SM (by threads and shared memory,
    with the 1 KiB the hardware reserves per block) times the SMs; each walks its share."""
    if simulator_active():
        return min(tiles, 2)
    from numba import cuda      # on a GPU only: importing this module does without numba
    dev = cuda.get_current_device()
    per_sm = min(dev.MAX_THREADS_PER_MULTIPROCESSOR // cfg.threads,
                 dev.MAX_BLOCKS_PER_MULTIPROCESSOR,
                 dev.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR // (cfg.shared_bytes + 1024))
    return min(tiles, dev.MULTIPROCESSOR_COUNT * max(1, per_sm))


def add_matrices(x: Any, y: Any, out: Any = None, *, block: Tuple[int, int] = (8, 128),
                 stages: int = 3, delay_release: int = 0, threads: int = 128,
                 shared: Any = "auto", num_blocks: Optional[int] = None) -> Any:
    """``out = x + y`` for two float32 CUDA matrices of one shape (numba device arrays, CuPy
    arrays, torch tensors; row- or column-major or transposed views). ``out``: same shape,
    float32, on the same device (it may be ``x`` or ``y`` itself); None makes a row-major
    one. ``block``: the (rows, cols) of a pipeline block; ``stages``, ``delay_release``: see
    :func:`gemm.pipeline.ring_schedule`; ``shared``: see :class:`AddConfig`; ``num_blocks``:
    CUDA blocks (default: enough to fill the GPU; each walks its share of the blocks).
    Returns ``out``.
    """
    out, launch = prepare_add(x, y, out, block=block, stages=stages,
                              delay_release=delay_release, threads=threads, shared=shared,
                              num_blocks=num_blocks)
    launch()
    return out


def prepare_add(x, y, out=None, *, block=(8, 128), stages=3, delay_release=0, threads=128,
                shared="auto", num_blocks=None):
    """Check and plan ``add_matrices(x, y, out, ...)`` (same arguments) without running it:
    returns ``(out, launch)``, where ``launch()`` runs the add on the arrays' current stream,
    as often as wanted, with no more argument checks (for timing loops)."""
    cfg = AddConfig(tuple(block) if isinstance(block, list) else block, stages, delay_release,
                    threads, shared)
    a, b = operand(x, "x", caller="add_matrices"), operand(y, "y", caller="add_matrices")
    if a.shape != b.shape:
        raise ValueError(f"add_matrices: x has shape {a.shape} and y {b.shape}; they must match")
    for op, name in ((a, "x"), (b, "y")):
        if op.dtype != "float32":
            raise TypeError(f"add_matrices: {name} has dtype {op.dtype}; supported: float32")
    out, c = output_operand("add_matrices", out, a, a.shape, simulator_active())
    named = (("x", a), ("y", b), ("out", c))
    check_same_device("add_matrices", named)
    check_spans("add_matrices", named)
    m, n = a.shape
    if num_blocks is not None and not (isinstance(num_blocks, int) and num_blocks >= 1):
        raise ValueError(f"add_matrices: num_blocks must be an int >= 1, got {num_blocks!r}")
    # The kernel writes a row-major out: for a column-major out, add the transposes.
    strides = [op.strides for op in (a, b, c)]
    if c.unit_mode == 0:
        m, n = n, m
        strides = [(s1, s0) for s0, s1 in strides]
    units = tuple(1 if s[1] == 1 else 0 for s in strides[:2])
    bm, bn = cfg.block
    vectors = tuple(_vector(op, s, n if u else m, bn if u else bm)
                    for op, s, u in zip((a, b, c), strides, units + (1,)))
    lds = [s[0] if u == 1 else s[1] for s, u in zip(strides, units + (1,))]
    tiles = -(-m // cfg.block[0]) * -(-n // cfg.block[1])
    blocks = min(tiles, num_blocks) if num_blocks is not None else _default_blocks(cfg, tiles)
    kernel, nbytes = launcher(cfg, units, vectors)
    stream = 0 if simulator_active() else current_stream(a)
    arrays = (kernel_buffer(a), kernel_buffer(b), kernel_buffer(c))
    scalars = (m, n, *lds)

    def launch():
        kernel((blocks, 1, 1), (cfg.threads, 1, 1), stream, arrays, scalars, nbytes)
    return out, launch
