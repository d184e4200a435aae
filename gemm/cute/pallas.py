"""Pallas' pipelining API inside a numba kernel: :class:`BlockSpec`, :func:`emit_pipeline` and
:func:`emit_pipeline_warp_specialized`, over TMA loads, an mbarrier ring and a body the user
writes over the step's shared tensors (seeds 000 and 002's API).

Outside the kernel, each operand is a :class:`BlockSpec`: the block's shape, its ``index_map``
(the grid indices and the call's ``args`` -> the block's index, as Pallas' index maps but with
what they would close over passed in), and its shared layout (the swizzle and tiling
transforms of Pallas' ``plgpu.BlockSpec`` as one layoutalg layout, e.g.
``tile_to_shape(gmma_layout_atom("K", 128, 16), (128, 64))``). The emitters check everything
and return a numba device function, called by every thread of the block::

    def step(idx, a_smem, b_smem, acc):              # the body: a step's shared tensors
        ...
    pipeline = emit_pipeline(step, grid=(lambda m, n, k_steps: k_steps,),
                             in_specs=[BlockSpec((128, 64), lambda k, m, n, ks: (m, k), SA),
                                       BlockSpec((128, 64), lambda k, m, n, ks: (n, k), SB)],
                             max_concurrent_steps=4, delay_release=1)

    @cuda.jit
    def kernel(a_map, b_map, ...):
        ...
        pipeline((a_map, b_map), (pid_m, pid_n, k_steps), acc)   # refs, args, carry

``grid``: the steps' extents, each an int or a function of the ``args``; steps run in
row-major order of the grid (the last index fastest). The call's ``refs`` are the tensor maps
(device arrays of 16 words, :meth:`BlockSpec.tensor_map` on the host), ``args`` a tuple of
run-time values that the index maps and extents read, ``carry`` whatever the body needs
(register fragments are changed in place). Blocks past a matrix's edge are zero-filled by TMA;
TMA stores leave out what lies past it. One thread runs every step's index maps before it
issues the step's loads, so their cost is paid once a step by one thread: a division by a
run-time value there is tens of dependent instructions, and a few of them a step can make
that thread, not the tensor cores, set the pace; pass :func:`gemm.cute.divide.divisor`
values in the args and divide with ``divmod_by``.

:func:`emit_pipeline` (every thread runs the body): thread 0 loads steps ahead into
``max_concurrent_steps`` slots; after a step's body each warp releases the slot of the step
``delay_release`` steps back (``delay_release=1`` lets the body keep one wgmma group in
flight: the seed's ``wgmma_wait(1)``), and thread 0 refills it. ``out_specs`` blocks are
written by the body into one of two shared buffers and stored by TMA after the step.

:func:`emit_pipeline_warp_specialized`: warpgroup ``memory_thread_idx`` (default the last) only
loads, with ``memory_registers`` registers (``setmaxnreg``; the kernel is compiled with
``launch_bounds=(pipeline.threads, 1)``); the ``num_compute_wgs`` others run
``compute_context(run, ring, ctx)``, which calls ``run(ring, carry)`` where Pallas calls
``pipeline(carry)``: the steps' bodies, ``carry`` passed to each, the epilogue after it.

A pipeline uses the block's dynamic shared memory from its start (launch with at least
``pipeline.shared_bytes``) and a static array of mbarriers; it synchronises the block on
entry and on exit, so calls follow each other. A slot is released by one lane of each
warp after ``syncwarp`` (8 arrivals a step for two compute warpgroups, not 256), so the block
is made of whole warps: for the warp-specialized pipeline 1-D (``wg_axis="x"``: warpgroup
``threadIdx.x // 128``) or ``(128, warpgroups)`` (``wg_axis="y"``). In numba's CUDA
simulator the same kernel runs on the instructions' twins.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

import numpy as np
from numba import cuda, float32, uint16, uint32 as U, uint64

from gemm import arch
from gemm.arch.registers import consumer_registers
from gemm.arch.smem import SWIZZLE_ALIGN
from gemm._env import simulator_active
from gemm.cute import (copy, make_tensor, make_warp_uniform, syncwarp, warpgroup_reg_alloc,
                       warpgroup_reg_dealloc)
from gemm.cute.pipeline import pipeline_init
from layoutalg import Layout, cosize, size
from layoutalg.atom.tma import make_tma_copy
from layoutalg.errors import LayoutError
from layoutalg.swizzle import ComposedLayout

__all__ = ["BlockSpec", "emit_pipeline", "emit_pipeline_warp_specialized"]

MAX_ARITY = 8               # the most parameters of a body, index map or extent
_ELEMENT = {16: uint16, 32: float32}


def _device(fn):
    """``fn`` as an inlined numba device function (a dispatcher is taken as it is)."""
    if hasattr(fn, "py_func") or simulator_active() and hasattr(fn, "fn"):
        return fn
    return cuda.jit(device=True, inline="always")(fn)


def _arity(fn, what, caller):
    """The number of positional parameters of the Python function ``fn``."""
    fn = getattr(fn, "py_func", fn)
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        raise TypeError(f"{caller}: {what} must be a Python function, got {fn!r}") from None
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        raise TypeError(f"{caller}: {what} must take plain positional parameters (no *args, "
                        "keyword-only or **kwargs)")
    n = len(params)
    if n > MAX_ARITY:
        raise ValueError(f"{caller}: {what} takes {n} parameters; at most {MAX_ARITY}")
    return n


def _splat(fn, n):
    """A device function ``call(t)`` = ``fn(*t)`` for tuples ``t`` of ``n`` values (numba
    inlines no call with ``*args``; the branches not taken are pruned before typing)."""
    fn = _device(fn)
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = (n == i for i in range(MAX_ARITY + 1))

    @cuda.jit(device=True, inline="always")
    def call(t):
        if a0:
            return fn()
        elif a1:
            return fn(t[0])
        elif a2:
            return fn(t[0], t[1])
        elif a3:
            return fn(t[0], t[1], t[2])
        elif a4:
            return fn(t[0], t[1], t[2], t[3])
        elif a5:
            return fn(t[0], t[1], t[2], t[3], t[4])
        elif a6:
            return fn(t[0], t[1], t[2], t[3], t[4], t[5])
        elif a7:
            return fn(t[0], t[1], t[2], t[3], t[4], t[5], t[6])
        elif a8:
            return fn(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7])
    return call


def _chain(first, rest):
    """A device function running ``first(*a)`` then ``rest(*a)`` for five arguments."""
    @cuda.jit(device=True, inline="always")
    def both(a, b, c, d, e):
        first(a, b, c, d, e)
        rest(a, b, c, d, e)
    return both


@cuda.jit(device=True, inline="always")
def _nothing(a, b, c, d, e):
    pass


def _concat(first, rest):
    """A device function ``(a, b) -> first(a, b) + rest(a, b)`` (tuples)."""
    @cuda.jit(device=True, inline="always")
    def both(a, b):
        return first(a, b) + rest(a, b)
    return both


@cuda.jit(device=True, inline="always")
def _empty(a, b):
    return ()


class BlockSpec:
    """One operand of a pipeline step: a ``block_shape`` (rows, columns) block of a 2-D global
    matrix, at block index ``index_map(*grid_indices, *args)`` (its first element at index *
    block_shape); with ``block_shape`` (None, rows, columns), of a batch of matrices (a 3-D
    array, the matrix index first, as Pallas' squeezed dimension), the index map giving
    (matrix, row block, column block). The block lives in shared memory as ``layout``
    ((rows, columns) -> element offset, swizzled or not; default row-major) of ``bits``-bit
    elements (16: bf16 / f16 bits as uint16, 32: float32). The TMA copy that fills it
    (:attr:`tma`) is read off the layout; the global matrix must be contiguous along the
    layout's contiguous mode (TMA does not transpose).
    LayoutError when TMA cannot write the layout, ValueError or TypeError for other bad
    arguments."""

    def __init__(self, block_shape: Any, index_map: Any, layout: Any = None,
                 bits: int = 16) -> None:
        batched = isinstance(block_shape, tuple) and len(block_shape) == 3
        if batched and block_shape[0] is None:      # Pallas' squeezed leading dimension
            block_shape = block_shape[1:]
        if (not isinstance(block_shape, tuple) or len(block_shape) != 2
                or not all(isinstance(e, int) and e > 0 for e in block_shape)):
            raise ValueError(f"BlockSpec: block_shape must be (rows, columns) or (None, rows, "
                             f"columns) of positive ints, got {block_shape!r}")
        if bits not in _ELEMENT:
            raise ValueError(f"BlockSpec: bits must be 16 or 32, got {bits!r}")
        if not callable(index_map):
            raise TypeError(f"BlockSpec: index_map must be a function, got {index_map!r}")
        rows, cols = block_shape
        if layout is None:
            layout = Layout((rows, cols), (cols, 1))
        inner = layout.inner if isinstance(layout, ComposedLayout) else layout
        if (not isinstance(inner, Layout) or inner.rank != 2
                or (size(inner.shape[0]), size(inner.shape[1])) != block_shape):
            raise LayoutError(f"BlockSpec: the layout {layout} is not a {rows} x {cols} block")
        self.block_shape, self.layout, self.bits = block_shape, layout, bits
        self.batched = batched
        self.index_arity = _arity(index_map, "index_map", "BlockSpec")
        self.index_map = index_map
        self.tma = self._tma_copy()
        self.elements = cosize(inner)

    def _tma_copy(self):
        rows, cols = self.block_shape
        unit = 128 // self.bits                     # 16 bytes of elements
        errors = []
        for strides in (((cols + unit - 1) // unit * unit, 1),
                        (1, (rows + unit - 1) // unit * unit)):
            try:
                return make_tma_copy(self.block_shape, strides, self.layout, self.bits)
            except LayoutError as e:
                errors.append(str(e))
        raise LayoutError(f"BlockSpec: no TMA copy writes {self.layout}: {errors[0]}")

    @property
    def bytes(self) -> int:
        """Bytes of one block (what a step's TMA loads write)."""
        return self.tma.bytes

    def tensor_map(self, array: Any) -> Any:
        """The tensor map of ``array`` (2-D; 3-D, the matrix index first, for a batched spec)
        for this block's TMA copy: a device array of its 16 words for a CUDA array (numba's,
        CuPy's or torch's), the simulator's twin for a numpy array in the simulator.
        ``array`` is contiguous along the block's contiguous mode (row-major when the
        layout's columns are contiguous), its other strides multiples of 16 bytes, its
        address 16-byte aligned; ValueError otherwise."""
        shape, strides, itemsize = _array_geometry(array, 3 if self.batched else 2)
        if 8 * itemsize != self.bits:
            raise ValueError(f"BlockSpec.tensor_map: the block holds {self.bits}-bit elements, "
                             f"the array {8 * itemsize}-bit ones")
        shape, strides, batch = shape[-2:], strides[-2:], tuple(zip(shape[:-2], strides[:-2]))
        c = 1 if self.tma.major == "K" else 0          # the block mode that is contiguous
        if strides[c] != 1 and shape[c] > 1:
            raise ValueError(f"BlockSpec.tensor_map: the block's {'columns' if c else 'rows'} "
                             f"are contiguous; the array's strides are {strides} elements")
        copy_ = replace(self.tma, dims=(shape[c], shape[1 - c]) + tuple(n for n, _ in batch),
                        strides=tuple(st * itemsize for st in (strides[1 - c],)
                                      + tuple(b for _, b in batch)))
        if simulator_active():
            from gemm.arch.sim_sm90 import sim_tensor_map
            flat = base = np.asarray(array)
            while base.base is not None:            # the buffer the views look into
                base = base.base
            offset = flat.__array_interface__["data"][0] - base.__array_interface__["data"][0]
            return sim_tensor_map(base.reshape(-1).view(np.uint8), offset, copy_, itemsize)
        from gemm.tma import tensor_map
        address = array.__cuda_array_interface__["data"][0]
        return cuda.to_device(tensor_map(address, copy_, "f32" if self.bits == 32 else "bf16"))


def _array_geometry(array, rank):
    """(shape, strides in elements, item size) of a host or device array of ``rank``."""
    if hasattr(array, "__cuda_array_interface__") and not simulator_active():
        cai = array.__cuda_array_interface__
        itemsize = np.dtype(cai["typestr"]).itemsize
        shape = tuple(cai["shape"])
        strides = cai.get("strides")
        strides = (tuple(s // itemsize for s in strides) if strides
                   else tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape))))
    else:
        a = np.asarray(array)
        shape, itemsize = a.shape, a.itemsize
        strides = tuple(s // itemsize for s in a.strides)
    if len(shape) != rank:
        raise ValueError(f"BlockSpec.tensor_map: the array must be {rank}-D, got shape {shape}")
    return shape, strides, itemsize


class _Ring:
    """What both emitters check and lay out: the specs, the slots and the grid."""

    def __init__(self, caller, body, grid, in_specs, out_specs, stages, delay):
        if not callable(body):
            raise TypeError(f"{caller}: body must be a function, got {body!r}")
        for name, specs in (("in_specs", in_specs), ("out_specs", out_specs)):
            if not all(isinstance(s, BlockSpec) for s in specs):
                raise TypeError(f"{caller}: {name} must be BlockSpecs")
        if not in_specs and not out_specs:
            raise ValueError(f"{caller}: no in_specs or out_specs: nothing to pipeline")
        if not (isinstance(stages, int) and stages >= 1):
            raise ValueError(f"{caller}: max_concurrent_steps must be an int >= 1, got "
                             f"{stages!r}")
        if not (isinstance(delay, int) and 0 <= delay < stages):
            raise ValueError(f"{caller}: delay_release must be an int in 0..max_concurrent_"
                             f"steps - 1 ({stages - 1}), got {delay!r}")
        if not isinstance(grid, tuple) or not 1 <= len(grid) <= 3:
            raise ValueError(f"{caller}: grid must be a tuple of 1 to 3 extents, got {grid!r}")
        for e in grid:
            if not (callable(e) or isinstance(e, int) and e >= 0):
                raise ValueError(f"{caller}: each grid extent is an int >= 0 or a function of "
                                 f"the call's args, got {e!r}")
        self.specs = tuple(in_specs) + tuple(out_specs)
        self.n_in, self.rank = len(in_specs), len(grid)
        body_arity = _arity(body, "body", caller)
        if body_arity != 2 + len(self.specs):
            raise TypeError(f"{caller}: body takes (indices, one shared tensor per spec, "
                            f"carry): {2 + len(self.specs)} parameters, not {body_arity}")
        for s in self.specs:
            if s.index_arity < self.rank:
                raise TypeError(f"{caller}: an index_map takes the {self.rank} grid indices "
                                f"first, then the call's args; it has {s.index_arity} "
                                "parameters")
        self.stages, self.delay = stages, delay
        self.body = _splat(body, 2 + len(self.specs))
        self.extents = _extents(grid)
        at, offsets = 0, []
        for s in in_specs:
            offsets.append(at)
            at += -(-s.bytes // SWIZZLE_ALIGN) * SWIZZLE_ALIGN
        self.slot_bytes = at
        ring = stages * at
        for s in out_specs:                         # two buffers each, after the ring
            offsets.append(ring + at - self.slot_bytes)
            at += 2 * -(-s.bytes // SWIZZLE_ALIGN) * SWIZZLE_ALIGN
        self.offsets = tuple(offsets)
        self.step_bytes = sum(s.bytes for s in in_specs)
        self.shared_bytes = ring + at - self.slot_bytes + SWIZZLE_ALIGN
        self.loads = self._loads()
        self.views = self._views()
        self.stores = self._stores()

    def _loads(self):
        """``load(idx, refs, args, (bars, s), slot)``: every in_spec's TMA tile of the step
        of grid indices ``idx`` into the slot at byte ``slot``, completing on ``bars[s]``."""
        fn = _nothing
        for k in reversed(range(self.n_in)):
            fn = _chain(_load_one(self.specs[k], k, self.offsets[k]), fn)
        return fn

    def _views(self):
        """``views((slot, base), buffer) -> tuple``: each spec's shared tensor of a step (in
        blocks in the slot at byte ``slot``, out blocks in out buffer ``buffer`` (0 or 1) of
        the region past the ring, ``base`` the ring's first byte)."""
        fn = _empty
        for k in reversed(range(len(self.specs))):
            fn = _concat(_view_one(self.specs[k], self.offsets[k], k >= self.n_in), fn)
        return fn

    def _stores(self):
        """``store(j_idx, refs, args, base, buffer)``: each out_spec's TMA store."""
        fn = _nothing
        for k in reversed(range(self.n_in, len(self.specs))):
            fn = _chain(_store_one(self.specs[k], k, self.offsets[k]), fn)
        return fn


def _extents(grid):
    """``extents(args) -> tuple``: the grid's extents, its functions called on the args."""
    fns = []
    for e in grid:
        if callable(e):
            fns.append(_splat(e, _arity(e, "a grid extent", "emit_pipeline")))
        else:
            fns.append(_constant(e))
    r1, r2 = len(grid) == 1, len(grid) == 2
    f0, f1, f2 = (fns + [fns[0]] * 2)[:3]

    @cuda.jit(device=True, inline="always")
    def extents(args):
        if r1:
            return (f0(args),)
        elif r2:
            return f0(args), f1(args)
        else:
            return f0(args), f1(args), f2(args)
    return extents


def _constant(value):
    @cuda.jit(device=True, inline="always")
    def extent(args):
        return value
    return extent


def _unravel(rank):
    """``(count(ext), unravel(i, ext), after(idx, ext))``: the steps of extents ``ext``, step
    ``i``'s grid indices (the last fastest), and the indices of the step after ``idx``
    (without a division: the loops keep their indices as they go)."""
    r1, r2 = rank == 1, rank == 2

    @cuda.jit(device=True, inline="always")
    def count(ext):
        if r1:
            return ext[0]
        elif r2:
            return ext[0] * ext[1]
        else:
            return ext[0] * ext[1] * ext[2]

    @cuda.jit(device=True, inline="always")
    def unravel(i, ext):
        if r1:
            return (i,)
        elif r2:
            return i // ext[1], i % ext[1]
        else:
            return i // (ext[1] * ext[2]), i // ext[2] % ext[1], i % ext[2]

    @cuda.jit(device=True, inline="always")
    def after(idx, ext):
        if r1:
            return (idx[0] + 1,)
        elif r2:
            if idx[1] + 1 == ext[1]:
                return idx[0] + 1, idx[1] - idx[1]
            return idx[0], idx[1] + 1
        else:
            if idx[2] + 1 < ext[2]:
                return idx[0], idx[1], idx[2] + 1
            if idx[1] + 1 < ext[1]:
                return idx[0], idx[1] + 1, idx[2] - idx[2]
            return idx[0] + 1, idx[1] - idx[1], idx[2] - idx[2]
    return count, unravel, after


def _origin(spec):
    """``origin(idx, args)``: the first element of the step's block, (row, column) or
    (row, column, matrix)."""
    index = _splat(spec.index_map, spec.index_arity)
    rows, cols = spec.block_shape
    batched = spec.batched

    @cuda.jit(device=True, inline="always")
    def origin(idx, args):
        b = index(idx + args)
        if batched:
            return b[1] * rows, b[2] * cols, b[0]
        return b[0] * rows, b[1] * cols
    return origin


def _load_one(spec, k, offset):
    origin, tma, flat = _origin(spec), spec.tma, Layout(spec.elements)
    elem, scale = _ELEMENT[spec.bits], spec.bits // 8

    @cuda.jit(device=True, inline="always")
    def load(idx, refs, args, barrier, slot):
        raw = cuda.shared.array(0, elem)
        bars, s = barrier                           # completes on bars[s]
        copy(tma, refs[k], origin(idx, args), make_tensor(raw, flat, (slot + offset) // scale),
             bars, s)
    return load


def _view_one(spec, offset, is_out):
    layout, elem = spec.layout, _ELEMENT[spec.bits]
    scale, size = spec.bits // 8, -(-spec.bytes // SWIZZLE_ALIGN) * SWIZZLE_ALIGN

    @cuda.jit(device=True, inline="always")
    def view(slot, out_buffer):
        raw = cuda.shared.array(0, elem)
        if is_out:
            return (make_tensor(raw, layout, (offset + out_buffer * size + slot[1]) // scale),)
        return (make_tensor(raw, layout, (slot[0] + offset) // scale),)
    return view


def _store_one(spec, k, offset):
    origin, tma, flat = _origin(spec), spec.tma, Layout(spec.elements)
    elem, scale = _ELEMENT[spec.bits], spec.bits // 8
    size = -(-spec.bytes // SWIZZLE_ALIGN) * SWIZZLE_ALIGN

    @cuda.jit(device=True, inline="always")
    def store(idx, refs, args, base, buffer):
        raw = cuda.shared.array(0, elem)
        copy(tma, refs[k], origin(idx, args),
             make_tensor(raw, flat, (base + offset + buffer * size) // scale))
    return store


def emit_pipeline(body: Any, *, grid: tuple, in_specs: Any = (), out_specs: Any = (),
                  max_concurrent_steps: int = 2, delay_release: int = 0) -> Any:
    """Pallas' ``emit_pipeline`` in a numba kernel (see the module): a device function
    ``pipeline(refs, args, carry)`` that every thread of the block calls. Step ``i`` waits
    for its in blocks, runs ``body(indices, *shared_tensors, carry)`` in every thread, then
    stores its out blocks; the slot of step ``i - delay_release`` is then released (by each
    warp) and refilled by thread 0 with the step ``max_concurrent_steps`` later. Attributes:
    ``shared_bytes`` (dynamic shared memory to launch with at least)."""
    ring = _Ring("emit_pipeline", body, grid, in_specs, out_specs, max_concurrent_steps,
                 delay_release)
    S, D, n_bars = ring.stages, ring.delay, 2 * ring.stages
    step_bytes, slot_bytes, has_in = ring.step_bytes, ring.slot_bytes, ring.n_in > 0
    has_out = len(ring.specs) > ring.n_in
    body_, extents, (count, unravel, after) = ring.body, ring.extents, _unravel(ring.rank)
    loads, views, stores = ring.loads, ring.views, ring.stores

    @cuda.jit(device=True, inline="always")
    def pipeline(refs, args, carry):
        bars = cuda.shared.array(n_bars, uint64)
        raw = cuda.shared.array(0, uint16)
        t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y
                                                  + cuda.blockDim.y * cuda.threadIdx.z)
        threads = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
        ext = extents(args)
        steps = count(ext)
        base = arch.shared_offset_of(raw, SWIZZLE_ALIGN) * 2       # bytes
        if t == 0:
            pipeline_init(bars, S, 1, threads // 32)    # one release per warp
        cuda.syncthreads()
        if has_in and t == 0:
            for j in range(min(S, steps)):
                arch.mbarrier_arrive_expect_tx(bars, j, step_bytes)
                loads(unravel(j, ext), refs, args, (bars, j), base + j * slot_bytes)
        idx = unravel(0, ext)
        for i in range(steps):
            s = i % S
            if has_in:
                arch.mbarrier_wait(bars, s, (i // S) & 1)
            body_((idx,) + views((base + s * slot_bytes, base), i & 1) + (carry,))
            if has_out:
                arch.fence_proxy_async()                # the body's stores, seen by TMA
                if t == 0:
                    arch.bulk_wait_read(0)              # the store before last has read
                cuda.syncthreads()                      # ... the buffer the next body fills
                if t == 0:
                    stores(idx, refs, args, base, i & 1)
                    arch.bulk_commit()
            r = i - D
            if has_in and r >= 0:
                syncwarp()                         # the warp is done with step r
                if t % 32 == 0:
                    arch.mbarrier_arrive(bars, S + r % S)
                if t == 0 and r + S < steps:
                    q = r % S
                    arch.mbarrier_wait(bars, S + q, (r // S) & 1)
                    arch.mbarrier_arrive_expect_tx(bars, q, step_bytes)
                    loads(unravel(r + S, ext), refs, args, (bars, q), base + q * slot_bytes)
                syncwarp()
            idx = after(idx, ext)
        if has_out and t == 0:
            arch.bulk_wait_read(0)
        cuda.syncthreads()

    pipeline.shared_bytes, pipeline.specs = ring.shared_bytes, ring.specs
    pipeline.ring_bytes = ring.stages * ring.slot_bytes
    return pipeline


def emit_pipeline_warp_specialized(body: Any, *, grid: tuple, in_specs: Any,
                                   max_concurrent_steps: int = 2, delay_release: int = 0,
                                   compute_context: Any = None, num_compute_wgs: int = 1,
                                   memory_registers: Any = 40, wg_axis: str = "x",
                                   memory_thread_idx: Any = None, out_specs: Any = ()) -> Any:
    """Pallas' ``emit_pipeline_warp_specialized`` in a numba kernel (see the module): a
    device function ``pipeline(refs, args, ctx)`` that every thread of a block of
    ``num_compute_wgs + 1`` warpgroups calls. One thread of warpgroup ``memory_thread_idx``
    (default: the last) issues every step's TMA loads as slots free up; each compute
    warpgroup ``c`` (0, 1, .. in order of the others) runs ``compute_context(run, ring,
    (c, ctx))``; its ``run(ring, carry)`` waits for each step's blocks, runs
    ``body(indices, *shared_tensors, carry)`` and releases the slot of the step
    ``delay_release`` back. Without a compute_context, ``run(ring, (c, ctx))``.
    ``memory_registers`` (a multiple of 8 in 24..256, or None: no ``setmaxnreg``) are left to
    the memory warpgroup; the compute warpgroups take the rest of the register file (at most
    240 each). Outputs are written in the compute context (out_specs are refused). Attributes:
    ``shared_bytes`` and ``threads`` (launch with both; compile with
    ``launch_bounds=(threads, 1)`` when memory_registers is set) and ``compute_registers``."""
    fn = "emit_pipeline_warp_specialized"
    if out_specs:
        raise ValueError(f"{fn}: out_specs are not supported; write outputs in the "
                         "compute_context after run(ring, carry)")
    if not in_specs:
        raise ValueError(f"{fn}: in_specs must name at least one BlockSpec")
    ring = _Ring(fn, body, grid, in_specs, (), max_concurrent_steps, delay_release)
    if num_compute_wgs not in (1, 2, 3):
        raise ValueError(f"{fn}: num_compute_wgs must be 1, 2 or 3, got {num_compute_wgs!r}")
    if wg_axis not in ("x", "y"):
        raise ValueError(f"{fn}: wg_axis must be 'x' (warpgroup threadIdx.x // 128, a 1-D "
                         f"block) or 'y' (a block of (128, warpgroups)), got {wg_axis!r}")
    memory = num_compute_wgs if memory_thread_idx is None else memory_thread_idx
    if memory not in range(num_compute_wgs + 1):
        raise ValueError(f"{fn}: memory_thread_idx must be in 0..{num_compute_wgs}, got "
                         f"{memory_thread_idx!r}")
    if memory_registers is not None and (not isinstance(memory_registers, int)
                                         or memory_registers not in range(24, 257, 8)):
        raise ValueError(f"{fn}: memory_registers must be None or a multiple of 8 in "
                         f"24..256, got {memory_registers!r}")
    split = memory_registers is not None
    low = memory_registers or 24
    high = consumer_registers(low, num_compute_wgs)
    context = _device(compute_context if compute_context is not None else _default_context)
    if compute_context is not None and _arity(compute_context, "compute_context", fn) != 3:
        raise TypeError(f"{fn}: compute_context takes (run, ring, ctx)")
    S, D, n_bars = ring.stages, ring.delay, 2 * ring.stages
    step_bytes, slot_bytes = ring.step_bytes, ring.slot_bytes
    body_, extents, (count, unravel, after) = ring.body, ring.extents, _unravel(ring.rank)
    loads, views = ring.loads, ring.views
    by_x = wg_axis == "x"
    consumer_warps = 4 * num_compute_wgs

    @cuda.jit(device=True, inline="always")
    def run(state, carry):
        """The compute warpgroups' steps (``state``: the ring, made by the pipeline)."""
        bars, base, args, ext, steps, lane = state
        idx = unravel(0, ext)
        s, phase, r = U(0), U(0), U((S - D) % S)       # step i's slot and phase; step i - D's
        for i in range(steps):
            arch.mbarrier_wait(bars, s, phase)
            body_((idx,) + views((base + s * slot_bytes, base), 0) + (carry,))
            idx = after(idx, ext)
            if i >= D:
                syncwarp()                         # the warp is done with step i - D
                if lane == 0:
                    arch.mbarrier_arrive(bars, S + r)
            r = r + U(1) if r + U(1) < U(S) else U(0)
            s += U(1)
            if s == U(S):
                s, phase = U(0), phase ^ U(1)

    @cuda.jit(device=True, inline="always")
    def pipeline(refs, args, ctx):
        bars = cuda.shared.array(n_bars, uint64)
        raw = cuda.shared.array(0, uint16)
        # the warpgroup broadcast from lane 0: ptxas then keeps the roles' loops uniform
        if by_x:
            t, wg = cuda.threadIdx.x % 128, make_warp_uniform(cuda.threadIdx.x // 128)
        else:
            t, wg = cuda.threadIdx.x, make_warp_uniform(cuda.threadIdx.y)
        ext = extents(args)
        steps = count(ext)
        base = arch.shared_offset_of(raw, SWIZZLE_ALIGN) * 2       # bytes
        if t == 0 and wg == 0:
            pipeline_init(bars, S, 1, consumer_warps)   # one release per warp
        cuda.syncthreads()
        if wg == memory:
            if split:
                warpgroup_reg_dealloc(low)
            if t == 0:
                idx = unravel(0, ext)
                q, phase = U(0), U(1)               # the slot and the phase its release ends
                for j in range(steps):
                    arch.mbarrier_wait(bars, S + q, phase)
                    arch.mbarrier_arrive_expect_tx(bars, q, step_bytes)
                    loads(idx, refs, args, (bars, q), base + q * slot_bytes)
                    idx = after(idx, ext)
                    q += U(1)
                    if q == U(S):
                        q, phase = U(0), phase ^ U(1)
        else:
            if split:
                warpgroup_reg_alloc(high)
            c = wg if wg < memory else wg - 1
            context(run, (bars, base, args, ext, steps, t % 32), (c, ctx))
        cuda.syncthreads()

    pipeline.shared_bytes, pipeline.specs = ring.shared_bytes, ring.specs
    pipeline.ring_bytes = ring.stages * ring.slot_bytes
    pipeline.threads = 128 * (num_compute_wgs + 1)
    pipeline.compute_registers = high if split else None
    return pipeline


@cuda.jit(device=True, inline="always")
def _default_context(run, ring, ctx):
    run(ring, ctx)
