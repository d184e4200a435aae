"""Pipelined elementwise addition: the Pallas tutorial's ``add_matrices`` with numba-cuda.

``out = x + y`` for float32 matrices, block by block through shared memory with the cp.async
pipeline of :mod:`gemm.pipeline`. Each thread block walks its own sequence of blocks (tile
``bx``, ``bx + gridDim``, ... of the row-major order of (rows of blocks, columns of blocks)) as
its pipeline grid: three BlockSpecs of ``block`` = (bm, bn) with the index map

    step s -> (q // blocks_per_row, q % blocks_per_row),   q = bx + s * gridDim.x

The body adds the two shared input tiles into the shared out tile (16-byte shared loads and
stores), which the pipeline writes to global memory. Partial blocks are predicated: copies of
elements past the edge read nothing and fill zeros, stores past the edge are masked.

Up to 48 KiB of shared memory the tiles are static shared arrays; above (``shared="auto"``,
or always with ``shared="dynamic"``) they are slices of the block's dynamic shared memory
(up to 227 KiB), which the launch passes and opts into with
:func:`gemm.arch.smem.allow_dynamic_shared`.

>>> cfg = AddConfig(block=(8, 128), stages=3)
>>> cfg.shared_bytes, cfg.dynamic     # 3 slots of x and y, one out tile, 4 KiB each
(28672, False)
>>> AddConfig(block=(32, 128), stages=4, threads=256).dynamic    # 144 KiB
True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional, Tuple

import sympy

from gemm._env import simulator_active
from gemm.arch.smem import DYNAMIC_SHARED_LIMIT, STATIC_SHARED_LIMIT, allow_dynamic_shared
from gemm.codegen import Source, load_module, sym
from gemm.call.launch import Launcher
from gemm.call.operands import (check_same_device, check_spans, current_stream, kernel_buffer,
                           operand, output_operand)
from gemm.pipeline import ARCH_IMPORTS, BlockSpec, GlobalMatrix, emit_pipeline

__all__ = ["AddConfig", "add_matrices", "prepare_add", "add_source", "add_kernel",
           "ADD_SIGNATURE"]

ADD_SIGNATURE = ("void(float32[::1], float32[::1], float32[::1], uint32, uint32, uint32, "
                 "uint32, uint32)")
_SCALARS = ("uint32",) * 5
BX, NB, NBC = sym("bx"), sym("nb"), sym("NBC")


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
        # stages and delay_release are checked by emit_pipeline, with its messages
        emit_pipeline(_body(self), ("steps",), [self._spec()], [], self.stages,
                      self.delay_release)
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

    def _spec(self):
        def index_map(s):
            q = BX + s * NB
            return sympy.floor(q / NBC), sympy.Mod(q, NBC)
        return BlockSpec(self.block, index_map)

    @property
    def shared_bytes(self):
        tile = 4 * self.block[0] * self.block[1]
        tile = -(-tile // 16) * 16
        return tile * (2 * self.stages + 1)


def _body(cfg):
    """The step's code: out tile = x tile + y tile, each thread on runs of 4 (or 2, or 1)
    consecutive elements of a row."""
    bm, bn = cfg.block
    vec = 4 if bn % 4 == 0 else 2 if bn % 2 == 0 else 1
    t, T = sym("t"), cfg.threads
    runs, per_row = bm * bn // vec, bn // vec

    def body(src, step, x, y, o):
        for k in range(-(-runs // T)):
            q = t + T * k
            r, c = sympy.floor(q / per_row), vec * sympy.Mod(q, per_row)
            live = runs - T * k
            if live < T:
                src(f"if t < U({live}):")
                src.depth += 1
            if vec == 1:
                src(f"{o.array}[{o.offset(r, c)}] = {x.array}[{x.offset(r, c)}] + "
                    f"{y.array}[{y.offset(r, c)}]")
            else:
                xs = ", ".join(f"_x{e}" for e in range(vec))
                ys = ", ".join(f"_y{e}" for e in range(vec))
                src(f"{xs} = ld_v{vec}_f32({x.array}, {x.offset(r, c)})",
                    f"{ys} = ld_v{vec}_f32({y.array}, {y.offset(r, c)})",
                    f"st_v{vec}_f32({o.array}, {o.offset(r, c)}, "
                    + ", ".join(f"_x{e} + _y{e}" for e in range(vec)) + ")")
            if live < T:
                src.depth -= 1
    return body


def add_source(cfg, units=(1, 1), vectors=(4, 4, 4), simulator=False, jit=True):
    """The kernel module's source. ``units``: the unit-stride mode of x and y (the out matrix
    is row-major: add_matrices transposes the problem otherwise); ``vectors``: elements each
    of x, y, out is aligned to (see GlobalMatrix); ``jit=False`` leaves ``kernel`` a plain
    function (for ``numba.cuda.compile_ptx``)."""
    bm, bn = cfg.block
    spec = cfg._spec()
    pipe = emit_pipeline(_body(cfg), ("steps",), [spec, spec], [spec], cfg.stages,
                         cfg.delay_release)
    src = Source()
    src("import numpy as np",
        "from numba import cuda",
        f"from gemm.arch import {', '.join(ARCH_IMPORTS)}",
        "U = np.uint32",
        f"# add_matrices: {cfg}, x unit mode {units[0]}, y unit mode {units[1]}, "
        f"vectors {vectors}",
        "")
    if jit:
        src(f'@cuda.jit("{ADD_SIGNATURE}", cache={not simulator})')
    with src.block("def kernel(X, Y, O, M, N, ldx, ldy, ldo):"):
        src("t = U(cuda.threadIdx.x)", "bx = U(cuda.blockIdx.x)", "nb = U(cuda.gridDim.x)",
            f"NBC = (N + U({bn - 1})) // U({bn})",
            f"tiles = ((M + U({bm - 1})) // U({bm})) * NBC",
            "steps = ((tiles - bx + nb - U(1)) // nb) if bx < tiles else U(0)")
        ins = [GlobalMatrix(a, "M", "N", ld, u, "float32", v)
               for a, ld, u, v in zip("XY", ("ldx", "ldy"), units, vectors)]
        out = GlobalMatrix("O", "M", "N", "ldo", 1, "float32", vectors[2])
        pipe.emit(src, ins, [out], threads=cfg.threads, tid="t", simulator=simulator,
                  shared="dynamic" if cfg.dynamic else "static")
    return src.text()


def add_kernel(cfg, units=(1, 1), vectors=(4, 4, 4)):
    """The compiled kernel (a numba dispatcher with one signature)."""
    sim = simulator_active()
    return load_module(add_source(cfg, units, vectors, sim), "add").kernel


@lru_cache(maxsize=None)
def _launcher(cfg, units, vectors):
    """The Launcher of a kernel and the dynamic shared bytes its launches pass (the kernel
    opted into them on the current device)."""
    kernel = add_kernel(cfg, units, vectors)
    nbytes = cfg.shared_bytes if cfg.dynamic else 0
    if nbytes > STATIC_SHARED_LIMIT and not simulator_active():
        kernel.compile(ADD_SIGNATURE)
        allow_dynamic_shared(kernel, nbytes, ADD_SIGNATURE)
    return Launcher(kernel, 3, 4, _SCALARS), nbytes


def _vector(op, strides):
    """Elements the operand's accesses may span: its address and leading dimension aligned."""
    ld = strides[0] if strides[1] == 1 else strides[1]
    if op.shape[0] == 1 or op.shape[1] == 1:
        ld = 4 * ld      # one row or column: the leading dimension never moves an access
    for v in (4, 2):
        if op.ptr % (4 * v) == 0 and ld % v == 0:
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
    :func:`gemm.pipeline.emit_pipeline`; ``shared``: see :class:`AddConfig`; ``num_blocks``:
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
    vectors = tuple(_vector(op, s) for op, s in zip((a, b, c), strides))
    lds = [s[0] if u == 1 else s[1] for s, u in zip(strides, units + (1,))]
    tiles = -(-m // cfg.block[0]) * -(-n // cfg.block[1])
    blocks = min(tiles, num_blocks) if num_blocks is not None else _default_blocks(cfg, tiles)
    launcher, nbytes = _launcher(cfg, units, vectors)
    stream = 0 if simulator_active() else current_stream(a)
    arrays = (kernel_buffer(a), kernel_buffer(b), kernel_buffer(c))
    scalars = (m, n, *lds)

    def launch():
        launcher((blocks, 1, 1), (cfg.threads, 1, 1), stream, arrays, scalars, nbytes)
    return out, launch
