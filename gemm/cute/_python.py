"""The objects of :mod:`gemm.cute`'s vocabulary, as Python: what numba types and lowers in a
kernel, and what runs when a kernel runs as Python.

:mod:`gemm.cute` is the public face (its docstring tells the vocabulary): it re-exports these
names and imports :mod:`gemm.cute._numba`, :mod:`gemm.cute._numba_derive`,
:mod:`gemm.cute._numba_ops` and :mod:`gemm.cute._numba_sm90`, which register numba's typing
and lowering of these very objects. They are defined here, below all of them, so that the
numba side names what it registers without importing gemm.cute back. Called from
Python (numba's CUDA simulator runs kernels as Python) each is layoutalg's own operation on a
:class:`layoutalg.Tensor`; the numba side calls some of them at typing time too (the shapes
of a copy or an MMA).
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any

import numpy as np

from layoutalg import Layout
from layoutalg import tensor as _tensor
from layoutalg.errors import LayoutError
from gemm import arch
from gemm._env import simulator_active
from gemm.cute._gmma import array_at, is_gmma, wgmma_gemm
from layoutalg.int_tuple import flatten, is_int, is_tuple, product
from layoutalg.swizzle import ComposedLayout, Swizzle
from layoutalg.tensor import ArrayEngine, SwizzledEngine, Tensor, local_partition, local_tile

__all__ = ["make_tensor", "make_layout", "make_identity_tensor", "make_shared_tensor", "size",
           "cosize", "static", "Static", "StaticInt", "local_tile", "local_partition",
           "get_slice", "partition_S", "partition_D", "partition_A", "partition_B",
           "partition_C", "retile_S", "retile_D", "make_fragment_like", "fill", "copy",
           "copy_if", "axpby", "elem_less", "gemm", "MMA_OPS", "mma_shapes", "ldmatrix_shape",
           "copy_instructions", "mma_crd"]


def _static(layout):
    """``layout`` if its shapes and strides are all non-negative ints, else a TypeError."""
    leaves = flatten((layout.shape, layout.stride))
    if not all(is_int(x) and x >= 0 for x in leaves):
        raise TypeError(f"a layout in a kernel needs non-negative integer shapes and strides, "
                        f"got {layout}")
    return layout


def swizzled(layout: Any) -> ComposedLayout:
    """``layout`` if it is a swizzle over a static layout from a non-negative offset (CuTe's
    swizzled shared-memory layouts, e.g. ``tile_to_shape(Layout_K_SW128_Atom(16), (64,
    64))``), else a TypeError naming what it is."""
    ok = (isinstance(layout, ComposedLayout) and isinstance(layout.outer, Swizzle)
          and isinstance(layout.inner, Layout) and is_int(layout.offset) and layout.offset >= 0)
    if ok:
        _static(layout.inner)
        return layout
    raise TypeError(f"a composed layout in a kernel is a swizzle over a static layout, got "
                    f"{layout}")


def swizzle_period(sw: Swizzle) -> int:
    """Elements after which Swizzle ``sw`` repeats. A swizzled tensor applies it to offsets
    from its array's start, TMA and wgmma to shared addresses: the two agree when the start
    is aligned to the period (:func:`make_shared_tensor` aligns its arrays so)."""
    return 1 << (sw.base + abs(sw.shift) + sw.bits)


def size(x: Any) -> int:
    """The number of coordinates of a layout or a tensor (a constant in a kernel)."""
    return _size_of(x.shape)


@functools.lru_cache(maxsize=4096)
def _size_of(shape):
    return int(product(shape))


def cosize(x: Any) -> int:
    """One past the largest offset of a layout or a tensor's layout (a constant in a
    kernel): the elements a tensor of it spans."""
    layout = _static(x.layout if isinstance(x, Tensor) else x)
    return int(layout(size(layout) - 1)) + 1


class Static(tuple):
    """A tuple of ints that a kernel sees as a compile-time constant (CuTe's static
    ``Shape<_128, _8>``, MoYe's ``(@Int(128), @Int(8))``): a tiler for :func:`local_tile`.
    Make one with :func:`static`."""

    __slots__ = ()


class StaticInt(int):
    """An int that a kernel sees as a compile-time constant inside a tuple (CuTe's
    ``Int<1>{}``): a static extent or stride of :func:`make_layout`. Make one with
    :func:`static`."""

    __slots__ = ()


def static(value: Any) -> Any:
    """``value`` (an int tuple, nested or not, or an int) as a :class:`Static` or
    :class:`StaticInt` kernel constant. numba types the ints of a tuple built in a kernel as
    run-time values, so a static leaf of a tuple is marked this way (as C++ CuTe's ``_1``)."""
    if is_int(value) and not isinstance(value, bool) and value >= 0:
        return StaticInt(value)
    if not is_tuple(value) or not all(is_int(x) and x >= 0 for x in flatten(value)):
        raise TypeError(f"static: expected a non-negative int or a tuple of them, got "
                        f"{value!r}")
    return Static(value)


def dynamic_range(start: Any, stop: Any = None, step: Any = 1) -> range:
    """A loop kept a loop, over run-time counts (CuTe DSL's ``cutlass.range``; its compile-time
    twin is ``static_range``): ``range(start, stop, step)`` of ints ``0 <= start, stop <
    2**32`` and ``0 < step < 2**32``. In a kernel the loop variable is a uint32 and the loop
    one counter compared with ``stop`` (numba's ``range`` keeps 64-bit signed counters: a
    remaining count and the value, and selects between them each step). Called from Python
    (the simulator), the ``range`` itself, its arguments checked (a ValueError names the one
    out of bounds)."""
    if stop is None:
        start, stop = 0, start
    for name, v, low in (("start", start, 0), ("stop", stop, 0), ("step", step, 1)):
        if not is_int(v) or isinstance(v, bool) or not low <= v < 2 ** 32:
            raise ValueError(f"dynamic_range: {name} must be an int in [{low}, 2**32), got "
                             f"{v!r}")
    return range(int(start), int(stop), int(step))


def make_layout(shape: Any, stride: Any = None) -> Layout:
    """A layout in a kernel (CuTe's ``make_layout(make_shape(M, K), make_stride(_1{}, M))``):
    run-time integers in ``shape`` and ``stride`` stay run-time values (the layout holds them
    and its offsets compute with them), :func:`static` ints and shapes are constants; the
    stride defaults to column-major. A global tensor of a size known only at run time is
    ``make_tensor(A, make_layout((M, K), (static(1), lda)))``. Its extents and strides must
    be positive. Called from Python (the simulator), the :class:`layoutalg.Layout` of those
    ints."""
    return Layout(_ints(shape), None if stride is None else _ints(stride))


def _ints(x):
    """A nested tuple of integers (numpy, sympy or static ones) as Python ints."""
    return tuple(_ints(e) for e in x) if isinstance(x, tuple) else int(x)


def make_identity_tensor(shape: Any) -> Tensor:
    """A tensor whose element at each coordinate is that coordinate (CuTe's
    ``make_identity_tensor``): partitioned as the data it shadows, it tells each thread the
    global coordinates of its values, for :func:`elem_less` predicates. ``shape`` as
    :func:`make_layout`'s. In a kernel an element is a tuple of uint32."""
    return _tensor.make_identity_tensor(make_layout(shape).shape)


def elem_less(crd: Any, bound: Any) -> bool:
    """``crd[i] < bound[i]`` for every i (CuTe's ``elem_less``): is a coordinate inside an
    extent."""
    return _tensor.elem_less(tuple(int(c) for c in crd), tuple(int(b) for b in bound))


def make_shared_tensor(dtype: Any, layout: Any, offset: Any = None) -> Tensor:
    """A tensor over a new shared array of ``dtype`` (a numba type such as ``float32``) and
    ``cosize(layout)`` elements (MoYe's ``MoYeSharedArray(T, layout)``, CuTe's shared-memory
    tensor). Its loads and stores, and those of every tensor derived from it, address shared
    memory explicitly. ``layout`` may be swizzled (a ``ComposedLayout`` of a Swizzle, see
    :func:`make_tensor`): the array is then aligned to the swizzle's period, as TMA and
    wgmma need. ``make_shared_tensor(array, layout, offset=0)``: a shared tensor over the
    block's shared ``array`` (the dynamic one, ``cuda.shared.array(0, dtype)``) from element
    ``offset`` (CuTe's ``make_tensor(make_smem_ptr(p), layout)``); a swizzled one's offset a
    multiple of the swizzle's period from a period-aligned address. Only in a kernel
    (compiled, or run by the simulator)."""
    if not simulator_active():
        raise RuntimeError("make_shared_tensor: only inside a kernel")
    if hasattr(dtype, "shape"):                 # a view of the block's shared array
        return make_tensor(dtype, layout, 0 if offset is None else offset)
    # The simulator gives device functions the block's fake cuda module this way, and keys a
    # block's shared arrays by the file and line that asks for one: the caller's call site
    # here (its bytecode offset too: two shared tensors made on one line are two arrays).
    from numba.cuda.simulator.kernel import _get_kernel_context   # numba: only in the simulator
    caller = sys._getframe(1)
    ask = _shared_request(f"{caller.f_code.co_filename}:{caller.f_lineno}:{caller.f_lasti}")
    if not isinstance(layout, ComposedLayout):
        array = eval(ask, {"shared": _get_kernel_context().shared, "n": cosize(layout),
                           "dtype": dtype})
        return make_tensor(array, layout)
    period = swizzle_period(swizzled(layout).outer)
    n = -(-(layout.offset + cosize(layout.inner)) // period) * period
    array = eval(ask, {"shared": _get_kernel_context().shared, "n": n + period,
                       "dtype": dtype})
    host = getattr(array, "_ary", array)
    skip = (-host.__array_interface__["data"][0] % (period * host.itemsize)) // host.itemsize
    return make_tensor(array, layout, skip)


@functools.lru_cache(maxsize=None)
def _shared_request(where):
    """``shared.array(n, dtype)`` compiled as if written at ``where`` (see
    :func:`make_shared_tensor`)."""
    return compile("shared.array(n, dtype)", where, "eval")


def make_tensor(array: Any, layout: Any, offset: int = 0) -> Tensor:
    """A tensor: ``array`` (1-D) through ``layout`` (static, or from :func:`make_layout` with
    run-time leaves) from element ``offset``. A swizzled ``layout``, ``ComposedLayout(sw, o,
    L)`` of a Swizzle ``sw`` (:func:`swizzled`), gives element ``c`` at ``offset + sw(o +
    L(c))``: slices and partitions of the tensor move ``o``, before the swizzle, as CuTe's
    swizzled shared-memory pointers do (its array's start aligned to the swizzle's period
    is what TMA and wgmma see, which swizzle shared addresses). In a
    kernel compiled by numba this is typed and lowered by :mod:`gemm.cute._numba`; called
    from Python (the simulator runs kernels as Python) it is a :class:`layoutalg.Tensor`
    over the array, so slicing, :func:`local_tile` and :func:`local_partition` are
    layoutalg's own."""
    host = getattr(array, "_ary", array)            # the simulator's device arrays wrap numpy
    layout = swizzled(layout) if isinstance(layout, ComposedLayout) else _static(layout)
    return Tensor(ArrayEngine(host, int(offset)), layout)


def get_slice(tiled: Any, idx: int) -> Any:
    """Thread ``idx``'s view of a TiledCopy or TiledMMA (a static kernel argument or
    global), as MoYe's ``get_slice(copy_A, threadIdx().x)``."""
    return tiled.get_slice(idx)


def partition_S(thr: Any, tensor: Tensor) -> Tensor:
    """The thread's share of a copy's source tile: ``(CPY, CPY_M, CPY_K, ...)``."""
    return thr.partition_S(tensor)


def partition_D(thr: Any, tensor: Tensor) -> Tensor:
    """The thread's share of a copy's destination tile: ``(CPY, CPY_M, CPY_K, ...)``."""
    return thr.partition_D(tensor)


def partition_A(thr: Any, tensor: Tensor) -> Tensor:
    """The thread's A values of an MMA: ``(MMA, MMA_M, MMA_K, ...)``."""
    return thr.partition_A(tensor)


def partition_B(thr: Any, tensor: Tensor) -> Tensor:
    """The thread's B values of an MMA: ``(MMA, MMA_N, MMA_K, ...)``."""
    return thr.partition_B(tensor)


def partition_C(thr: Any, tensor: Tensor) -> Tensor:
    """The thread's C values of an MMA: ``(MMA, MMA_M, MMA_N, ...)``."""
    return thr.partition_C(tensor)


def retile_S(thr: Any, tensor: Tensor) -> Tensor:
    """A thread's register tensor (e.g. an MMA fragment) seen as the source of a tiled copy
    (CuTe's ``retile_S``): ``(CPY, CPY_M, CPY_N, ...)`` in the copy's value order."""
    return thr.retile_S(tensor)


def retile_D(thr: Any, tensor: Tensor) -> Tensor:
    """A thread's register tensor seen as the destination of a tiled copy (CuTe's
    ``retile_D``): an MMA fragment as the target of ``make_tiled_copy_A``'s ldmatrix."""
    return thr.retile_D(tensor)


def make_fragment_like(tensor: Any, dtype: Any) -> Tensor:
    """A register tensor of ``dtype`` (numpy's or numba's float32, ...) with the shape of
    ``tensor`` (a tensor, or a static layout) and a compact column-major layout (MoYe's
    ``make_fragment_A/B/C``): in a kernel, a local array that numba keeps in registers when
    every index is a constant."""
    return _tensor.make_fragment_like(tensor, np.dtype(str(dtype)))


def fill(tensor: Tensor, value: Any) -> None:
    """Every element of ``tensor`` set to ``value`` (MoYe's ``zeros!`` for 0), unrolled."""
    for i in range(size(tensor)):
        tensor[i] = value


def transform(tensor: Tensor, fn: Any) -> None:
    """``tensor[i] = fn(tensor[i])`` for every element, in place (CuTe's ``transform`` with
    one tensor), ``fn`` a device function of one value. In a kernel one call does all of
    them with constant indices (a register fragment stays in registers) and ``fn`` is
    compiled once, not inlined into the kernel's IR at each element."""
    for i in range(size(tensor)):
        tensor[i] = fn(tensor[i])


def copy(*args: Any) -> None:
    """``copy(src, dst)``: ``dst[i] = src[i]`` for every index of two tensors of one size
    (CuTe's ``copy`` with the universal atom). ``copy(tiled_copy, src, dst)``: the tiled
    copy's instruction for each of the thread's ``(CPY, ...)`` groups of a partition_S /
    partition_D pair: ``cp.async.ca`` / ``.cg`` (global -> shared, completed by
    ``gemm.arch.cp_async_wait_all``), ``ldmatrix`` (shared -> a retile_D'd register fragment
    of 16-bit integers, e.g. ``make_tiled_copy_A(SM75_U32x4_LDSM_N(), mma)``) or the
    universal copy. Unrolled in a kernel.

    ``copy(tma, tensor_map, (mn, k), dst, bars, bar)`` (Hopper): one tile of a TMA copy
    (:class:`layoutalg.atom.tma.TmaCopy`, from ``make_tma_copy``), the tile whose first
    element is element ``(mn, k)`` of the global (MN, K) matrix that ``tensor_map`` (a
    device array of its 16 words, ``gemm.tma.tensor_map``) describes (``(mn, k, matrix)``
    in a 3-D map of a batch of matrices): each of the copy's boxes lands at its offset in the
    copy's shared layout from ``dst``'s first element (``dst`` in shared memory, aligned as
    the swizzle needs: 1024 bytes for 128), zeros past the matrix's edges, and the bytes
    complete on mbarrier ``bars[bar]`` (expect them first: ``gemm.cute.pipeline.
    producer_expect_tx`` with ``tma.bytes``, read on the host into a global constant of the
    kernel). One thread issues it. ``copy(tma, tensor_map, (mn, k),
    src)`` is the TMA store, the other way: from shared ``src`` to the tile (the parts past
    the matrix's edges not written), in the thread's bulk group: write ``src`` and
    ``fence_view_async_shared()`` before it, ``tma_store_arrive()`` after, and
    ``tma_store_wait(n)`` before writing ``src`` again."""
    if len(args) == 6:
        return _tma_copy(*args)
    if len(args) == 4:
        return _tma_store(*args)
    tiled, (src, dst) = (args[0], args[1:]) if len(args) == 3 else (None, args)
    if len(args) not in (2, 3):
        raise TypeError("copy(src, dst), copy(tiled_copy, src, dst) or "
                        "copy(tma, tensor_map, (mn, k), dst, bars, bar)")
    kind = "universal" if tiled is None else tiled.atom.kind
    if kind == "ldmatrix":              # a row of 8 values in, 2 per register out
        n, per_src, per_dst, op = ldmatrix_shape(tiled, src, dst)
        for r in range(n):
            regs = getattr(arch, op)(*_element_at(src, r * per_src))
            for j, reg in enumerate(regs):
                dst[r * per_dst + 2 * j] = int(reg) & 0xFFFF
                dst[r * per_dst + 2 * j + 1] = int(reg) >> 16
        return
    if size(src) != size(dst):
        raise ValueError(f"copy: the tensors have {size(src)} and {size(dst)} elements")
    if tiled is None:
        _copy_values(src, dst)
        return
    if kind == "universal":
        copy_if(tiled, None, src, dst)
        return
    per, nbytes, op = copy_instructions(tiled, src)
    issue = {"cp.async.ca": arch.cp_async_ca, "cp.async.cg": arch.cp_async_cg}[op]
    for r in range(size(src) // per):
        issue(*_element_at(dst, r * per), *_element_at(src, r * per), nbytes)


def _tma_boxes(tma: Any, origin: Any, smem: Tensor, what: str) -> Any:
    """(array, element, map coordinates) of each box of a TMA tile at ``origin`` in the
    simulator: the element where the box starts in shared ``smem``'s array."""
    array, start = array_at(smem)
    if tma.bits != 8 * array.itemsize:
        raise TypeError(f"copy: the TMA copy moves {tma.bits}-bit elements, {what} holds "
                        f"{8 * array.itemsize}-bit ones")
    mn, k, *matrix = origin
    c0, c1 = (k, mn) if tma.major == "K" else (mn, k)
    for box in tma.boxes:
        yield array, start + box.smem_offset, (c0 + box.coords[0], c1 + box.coords[1], *matrix)


def _tma_copy(tma: Any, tensor_map: Any, origin: Any, dst: Tensor, bars: Any, bar: int) -> None:
    """:func:`copy` of a TMA tile, in the simulator (the twins of ``tma_load_2d/3d``)."""
    load = arch.tma_load_3d if len(origin) == 3 else arch.tma_load_2d
    for array, at, crd in _tma_boxes(tma, origin, dst, "dst"):
        load(array, at, tensor_map, *crd, bars, bar)


def _tma_store(tma: Any, tensor_map: Any, origin: Any, src: Tensor) -> None:
    """:func:`copy`'s TMA store, in the simulator (the twins of ``tma_store_2d/3d``)."""
    store = arch.tma_store_3d if len(origin) == 3 else arch.tma_store_2d
    for array, at, crd in _tma_boxes(tma, origin, src, "src"):
        store(array, at, tensor_map, *crd)


def copy_if(tiled: Any, pred: Any, src: Any, dst: Any) -> None:
    """``copy(tiled, src, dst)`` for the groups (one instruction's values) whose
    predicate holds: ``pred`` has one element per group, in the order of the source's
    elements (CuTe's ``copy_if``). A cp.async copy writes zeros where the predicate is false
    (CUTLASS's ZFILL atoms): a partial tile's missing values read as 0. A universal copy
    leaves those values of ``dst`` as they are; a group of a universal atom of several
    values (e.g. ``UniversalCopy(64, np.float32)``: pairs) is one vector store in a kernel
    (partition_D checks that each group is contiguous and, where its offsets are ints,
    aligned)."""
    per, nbytes, op = copy_instructions(tiled, src)
    groups = size(src) // per
    if pred is not None and size(pred) != groups:
        raise ValueError(f"copy_if: the predicate has {size(pred)} elements, the source "
                         f"{groups} groups of {per} values")
    if tiled.atom.kind == "universal":
        keep = None if pred is None else np.repeat([bool(pred[r]) for r in range(groups)], per)
        _copy_values(src, dst, keep)
        return
    issue = {"cp.async.ca": arch.cp_async_ca_zfill, "cp.async.cg": arch.cp_async_cg_zfill}[op]
    for r in range(groups):
        ok = bool(pred[r])
        array, at = _element_at(src, r * per)
        issue(*_element_at(dst, r * per), array, at if ok else 0, nbytes, nbytes if ok else 0)


def _element_at(tensor: Any, i: int) -> tuple:
    """(numpy array, element index) of element ``i`` of a simulator tensor over an array,
    through its swizzle where it has one (where an instruction's twin finds the element)."""
    e = tensor.engine
    if isinstance(e, SwizzledEngine):
        return e.base.array, e.base.offset + int(e.outer(e.offset + int(tensor.layout(i))))
    return e.array, e.offset + int(tensor.layout(i))


def _copy_values(src: Any, dst: Any, keep: Any = None) -> None:
    """``dst[i] = src[i]`` for every index ``i`` (where ``keep``, a bool array, holds): all
    at once where both tensors hold numpy data and every element lies inside its array, else
    one by one (which raises at an element outside)."""
    if src.is_numeric and dst.is_numeric:
        (sa, si), (da, di) = src.offsets(), dst.offsets()
        if keep is not None:
            si, di = si[keep], di[keep]
        if all(len(i) == 0 or 0 <= i.min() and i.max() < len(a)
               for a, i in ((sa, si), (da, di))):
            da[di] = sa[si]
            return
    for i in range(size(src)):
        if keep is None or keep[i]:
            dst[i] = src[i]


def ldmatrix_shape(tiled: Any, src: Any, dst: Any) -> tuple:
    """(instructions, source values per instruction (a 16-byte row), destination values per
    instruction (2 per register), gemm.arch's op) of an ldmatrix tiled copy over a thread's
    partition_S of shared memory and retile_D of its registers (tensors or layouts);
    ValueError where they do not match the atom."""
    atom = tiled.atom
    per_src, per_dst = 128 // atom.value_bits, 32 * atom.num // atom.value_bits
    if atom.value_bits != 16 or [int(product(src.shape[0])), int(product(dst.shape[0]))] != [
            per_src, per_dst] or size(src) // per_src != size(dst) // per_dst:
        raise ValueError(f"copy: {atom.name} moves 16-bit values, {per_src} from a thread's "
                         f"row to {per_dst} in its registers per instruction; got a source "
                         f"{src.shape} and a destination {dst.shape}")
    op = f"ldmatrix_x{atom.num}{'_trans' if atom.trans else ''}"
    return size(src) // per_src, per_src, per_dst, op


def copy_instructions(tiled: Any, src: Any) -> Any:
    """(values per instruction, bytes per instruction, the instruction's kind) of a tiled
    copy over a partitioned tensor (or layout) whose mode 0 is one instruction's values (a
    universal atom's: groups of its values in the source's order, as many as divide the
    source); TypeError for an instruction that copy does not issue (yet)."""
    atom = tiled.atom
    if atom.kind not in ("cp.async.ca", "cp.async.cg", "universal"):
        raise TypeError(f"copy: the {atom.name} instruction is not supported in kernels yet")
    if atom.kind == "universal":
        per = atom.bits // atom.value_bits
        if size(src) % per:
            raise ValueError(f"copy: {size(src)} values are not groups of {per}, the "
                             f"{atom.name}'s")
        return per, atom.bits // 8, atom.kind
    per = int(product(src.shape[0]))
    if per * atom.value_bits != atom.bits:
        raise ValueError(f"copy: mode 0 of {src.shape} is not one {atom.name} instruction "
                         f"({atom.bits // atom.value_bits} values)")
    return per, atom.bits // 8, atom.kind


def axpby(alpha: Any, x: Tensor, beta: Any, y: Tensor, coords: Any = None,
          bound: Any = None) -> None:
    """``y = alpha * x + beta * y`` element by element (CuTe's ``axpby``), ``y`` not read
    where ``beta`` is 0 (as BLAS: a NaN there does not spread). With ``coords`` (a partition
    of an identity tensor shaped as ``y``) and ``bound`` (the extents), only the elements
    whose coordinate is inside ``bound`` are written: a partial tile's epilogue. Unrolled."""
    if size(x) != size(y) or (coords is not None and size(coords) != size(y)):
        raise ValueError(f"axpby: x, y (and coords) have {size(x)}, {size(y)}"
                         f"{'' if coords is None else f' and {size(coords)}'} elements")
    for i in range(size(y)):
        if coords is None or elem_less(coords[i], bound):
            y[i] = alpha * x[i] + (beta * y[i] if beta != 0 else 0)


def gemm(*args: Any) -> None:
    """``gemm(C, A, B)``: ``C += A B`` on one thread's UniversalFMA fragments: C ``(1, M,
    N)``, A ``(1, M, K)``, B ``(1, N, K)``, or A ``(1, M)`` and B ``(1, N)`` for one k-block.
    ``gemm(tiled_mma, C, A, B)``: ``C += A B`` on the fragments of a tiled MMA's
    partition_C/A/B (CuTe's ``gemm(mma, D, A, B, C)`` with D = C): C ``(V_C, M, N)``, A
    ``(V_A, M, K)``, B ``(V_B, N, K)``, V the atom's values per thread; one instruction of
    the atom per (m, n, k): ``mma.sync`` for the atoms of :data:`MMA_OPS` (A and B rounded
    to tf32, to nearest, for the tf32 atom; for bf16 and f16, A and B are uint16 fragments
    holding the bits, as numba has no 16-bit float), the FMAs for UniversalFMA. Unrolled.

    ``gemm(tiled_mma, acc, A, B[, accumulate])`` for an SM90 GMMA atom (Hopper): one
    ``wgmma.mma_async`` per (k, m, n) of the warpgroup's ``partition_A/B`` of shared tensors
    (16-bit integers holding bf16 / f16 bits, or float32 for tf32; swizzled or not, as the
    atom's majors say), its descriptors derived from their layouts at compile time; ``acc``
    a float32 register fragment of ``partition_C``. Asynchronous: fence with
    ``warpgroup_arrive()`` before, then ``warpgroup_commit_batch()`` and
    ``warpgroup_wait(0)`` before reading ``acc``. ``accumulate`` (default true; a run-time
    value) false makes the first k-block overwrite ``acc`` instead of adding to it."""
    if len(args) in (4, 5) and is_gmma(args[0].atom):
        return wgmma_gemm(*args)
    if len(args) == 4:
        tiled, C, A, B = args
        if tiled.atom.name.startswith("UniversalFMA"):
            return gemm(C, A, B)
        return _mma_gemm(tiled, C, A, B)
    C, A, B = args
    m, n, k = _fma_shapes(C, A, B)
    if _fma_arrays(C, A, B, m, n, k):
        return
    for kk in range(k):
        for i in range(m):
            for j in range(n):
                C[0, i, j] = C[0, i, j] + A[_fma_crd(A, i, kk)] * B[_fma_crd(B, j, kk)]


def _fma_arrays(C, A, B, m, n, k):
    """``gemm(C, A, B)`` on the fragments' numpy storage, one outer product a k-block (each
    product and sum rounded to the elements' type, as element by element): False where a
    fragment has no numpy storage, an element lies outside it, or C's elements alias (the
    element-by-element loop then runs, and says which)."""
    got = _fma_indices(C, A, B, m, n, k)
    if got is None:
        return False
    (ca, ci), (aa, ai), (ba, bi) = got
    a, b, c = aa[ai], ba[bi], ca[ci]
    for kk in range(k):
        c = c + np.multiply.outer(a[:, kk], b[:, kk])
    ca[ci] = c
    return True


def _fma_indices(C, A, B, m, n, k):
    """((array, indices) of C as (M, N), of A as (M, K), of B as (N, K)), or None (see
    :func:`_fma_arrays`). Fragments over plain arrays take their indices from
    :func:`_planned`, remembered per layouts; others work them out."""
    planned = _planned(C, A, B, ((m, n), (m, k), (n, k)))
    if planned is not None:
        return list(zip(*planned))
    got = []
    for x, rows, cols in ((C, m, n), (A, m, k), (B, n, k)):
        try:
            arr, idx = x.offsets()
        except (TypeError, AttributeError):
            return None
        if idx.size != rows * cols or idx.min() < 0 or idx.max() >= arr.size:
            return None
        got.append((arr, idx.reshape(cols, rows).T))      # colexicographic: (rows, cols)
    if not _distinct(C):                    # C's elements aliased: sums in order, one by one
        return None
    return got


def _planned(C, A, B, shapes):
    """((C's, A's, B's arrays from their offsets), (their index arrays, of ``shapes``)) for
    fragments over plain arrays whose elements lie inside them (:func:`_fragment_plan`),
    else None."""
    if not type(C.engine) is type(A.engine) is type(B.engine) is ArrayEngine:
        return None
    plan = _fragment_plan(C.layout, A.layout, B.layout, shapes)
    if plan is None or not all(x.engine.offset >= 0 and x.engine.offset + top
                               < x.engine.array.size for x, top in zip((C, A, B), plan[3])):
        return None
    return [x.engine.array[x.engine.offset:] for x in (C, A, B)], plan[:3]


@functools.lru_cache(maxsize=1024)
def _fragment_plan(c, a, b, shapes):
    """For fragments of layouts ``c``, ``a``, ``b`` over plain arrays: their elements'
    offsets as index arrays of ``shapes`` (a gemm's C, A and B: (M, N), (M, K), (N, K), or
    with a mode of values first, (V, M, N) ...) and each one's largest offset; None where an
    offset is negative or C's elements alias (remembered per layouts: a kernel's fragments
    keep theirs)."""
    idx = []
    for lay, shape in zip((c, a, b), shapes):
        try:
            off = _tensor.layout_offsets(lay)
        except (LayoutError, TypeError, ValueError):    # the general path says why
            return None
        if off.ndim != 1 or off.size != math.prod(shape) or off.size and off.min() < 0:
            return None
        idx.append(off.reshape(shape[::-1]).T)              # colexicographic
    if not _distinct_offsets(c):
        return None
    return (*idx, tuple(int(x.max()) if x.size else -1 for x in idx))


def _distinct(t):
    """Whether the elements of numpy-backed tensor ``t`` are distinct (for a plain array
    engine, a property of the layout: remembered)."""
    if type(t.engine) is ArrayEngine:
        return _distinct_offsets(t.layout)
    idx = t.offsets()[1]
    return np.unique(idx).size == idx.size


@functools.lru_cache(maxsize=1024)
def _distinct_offsets(layout):
    offsets = _tensor.layout_offsets(layout)
    return np.unique(offsets).size == offsets.size


# The mma.sync atoms gemm(tiled_mma, ...) issues in kernels: atom name -> gemm.arch's op.
# tf32: float fragments, rounded to tf32 (nearest) at the instruction; bf16 and f16: 16-bit
# integer fragments holding the bits, packed in pairs (value 2r in the low half of register
# r, as the atom's value order and the PTX fragments agree).
MMA_OPS = {"SM80_16x8x8_F32TF32TF32F32_TN": "mma_m16n8k8_f32_tf32",
           "SM80_16x8x16_F32BF16BF16F32_TN": "mma_m16n8k16_f32_bf16",
           "SM80_16x8x16_F32F16F16F32_TN": "mma_m16n8k16_f32_f16"}


def mma_shapes(atom: Any, C: Any, A: Any, B: Any) -> tuple:
    """(op, values per thread of C, A, B, (M, N, K)) of ``gemm(tiled_mma, C, A, B)`` on
    fragments (or layouts) of an :data:`MMA_OPS` atom; TypeError for another atom, ValueError
    for fragments that are not C (V_C, M, N), A (V_A, M, K), B (V_B, N, K), or A (V_A, M)
    and B (V_B, N) for one k-block."""
    if atom.name not in MMA_OPS:
        raise TypeError(f"gemm: the {atom.name} atom is not supported in kernels yet (have: "
                        f"UniversalFMA, {', '.join(MMA_OPS)})")
    values = [size(getattr(atom, f"layout_{x}")) // atom.num_threads for x in "CAB"]
    c, a, b = ([int(product(s)) for s in x.shape] for x in (C, A, B))
    if len(a) == len(b) == 2:           # one k-block: A (V_A, M), B (V_B, N)
        a, b = a + [1], b + [1]
    if not (len(c) == len(a) == len(b) == 3 and [c[0], a[0], b[0]] == values
            and a[1] == c[1] and b[1] == c[2] and a[2] == b[2]):
        raise ValueError(f"gemm: {atom.name} fragments C ({values[0]}, M, N), A ({values[1]}, "
                         f"M, K), B ({values[2]}, N, K) expected, got {C.shape}, {A.shape}, "
                         f"{B.shape}")
    return MMA_OPS[atom.name], values, (c[1], c[2], a[2])


def _mma_gemm(tiled, C, A, B):
    """gemm(tiled_mma, C, A, B) of an mma.sync atom, in the simulator (gemm.arch's twins)."""
    op, (vc, va, vb), (m, n, k) = mma_shapes(tiled.atom, C, A, B)
    issue = getattr(arch, op)
    planned = _planned(C, A, B, ((vc, m, n), (va, m, k), (vb, n, k)))
    if planned is not None:
        _mma_gemm_planned(op, op.endswith("tf32"), *planned, m, n, k)
        return

    def registers(X, per, j, kk):
        def value(v):
            return X[mma_crd(X, v, j, kk)]
        if op.endswith("tf32"):
            return [arch.cvt_rna_tf32_f32(value(v)) for v in range(per)]
        return [np.uint32(int(value(v)) & 0xFFFF | (int(value(v + 1)) & 0xFFFF) << 16)
                for v in range(0, per, 2)]
    for i in range(m):
        for j in range(n):
            acc = [C[v, i, j] for v in range(vc)]
            for kk in range(k):
                acc = issue(*registers(A, va, i, kk), *registers(B, vb, j, kk), *acc)
            for v in range(vc):
                C[v, i, j] = acc[v]


def _mma_gemm_planned(op, tf32, arrays, indices, m, n, k):
    """:func:`_mma_gemm` on the fragments' arrays through their index arrays (see
    :func:`_planned`): every MMA of the call in one warp rendezvous (gemm.arch's
    ``mma_tile``), in the same order."""
    (c, a, b), (ci, ai, bi) = arrays, indices

    def registers(x, idx):              # (regs, M or N, K) -> the registers, flat
        if tf32:
            return [arch.cvt_rna_tf32_f32(v) for v in x[idx.T.reshape(-1)]]
        bits = x[idx.T.reshape(-1)].astype(np.uint32) & 0xFFFF
        return [np.uint32(lo | hi << 16) for lo, hi in zip(bits[0::2], bits[1::2])]
    c_flat = ci.T.reshape(-1)
    acc = list(c[c_flat])
    tile = _mma_tile(op, ci.shape[0], ai.shape[0] // (1 if tf32 else 2),
                     bi.shape[0] // (1 if tf32 else 2), m, n, k)
    tile(acc, registers(a, ai), registers(b, bi))
    c[c_flat] = acc


@functools.lru_cache(maxsize=256)
def _mma_tile(op, vc, ra, rb, m, n, k):
    """gemm.arch's ``mma_tile`` of the MMAs of one gemm call: for each (i, j, kk) in order,
    C's values (i, j), A's registers (i, kk) and B's (j, kk), positions in the flat lists
    :func:`_mma_gemm_planned` makes (colexicographic: v fastest)."""
    plan = tuple((tuple(v + vc * (i + m * j) for v in range(vc)),
                  tuple(r + ra * (i + m * kk) for r in range(ra)),
                  tuple(r + rb * (j + n * kk) for r in range(rb)))
                 for i in range(m) for j in range(n) for kk in range(k))
    return arch.mma_tile(op, plan)


def mma_crd(x: Any, v: int, j: int, kk: int) -> tuple:
    """The coordinate of value v of row (or column) j and k-block kk of an MMA's A or B
    fragment (or layout) of rank 3, or of row j of one of rank 2 (one k-block)."""
    return (v, j, kk) if len(x.shape) == 3 else (v, j)


def _fma_shapes(C, A, B):
    """(M, N, K) of UniversalFMA fragments C (1, M, N), A (1, M, K), B (1, N, K), or A (1, M)
    and B (1, N) (K = 1); ValueError otherwise."""
    return _fma_shapes_of(C.shape, A.shape, B.shape)


@functools.lru_cache(maxsize=1024)
def _fma_shapes_of(C, A, B):
    c, a, b = ([int(product(s)) for s in x] for x in (C, A, B))
    if len(a) == len(b) == 2:
        a, b = a + [1], b + [1]
    if len(c) != 3 or len(a) != 3 or len(b) != 3 or c[0] != 1 or a[0] != 1 or b[0] != 1 \
            or a[1] != c[1] or b[1] != c[2] or a[2] != b[2]:
        raise ValueError(f"gemm: UniversalFMA fragments C (1, M, N), A (1, M, K), B (1, N, K) "
                         f"(or A (1, M), B (1, N)) expected, got {C}, {A}, {B}")
    return c[1], c[2], a[2]


def _fma_crd(x, i, kk):
    """The coordinate of value (i, kk) of an A or B fragment of rank 3, or (i) of rank 2."""
    return (0, i, kk) if len(x.shape) == 3 else (0, i)
