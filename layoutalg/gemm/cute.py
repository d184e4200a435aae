"""CuTe's vocabulary inside numba-cuda kernels: layouts as compile-time types (first step).

Importing this module teaches numba two things:

- a :class:`layoutalg.Layout` (integer shapes and strides) used in a ``@cuda.jit`` kernel, as
  a global, a closure variable or an argument, is a compile-time constant carried by its
  numba type (:class:`LayoutType`, no run-time data: MoYe's static layouts). ``L(i)``,
  ``L(i, j)`` and ``L((i, (j, k)))`` give the offset of an index or a coordinate as uint32
  arithmetic on constants: a power-of-two extent becomes a mask and a shift, any other a
  multiply by its reciprocal; ``size(L)`` and ``cosize(L)`` are constants.
- ``make_tensor(array, layout, offset=0)`` is a tensor: a 1-D array (global, shared or a
  register fragment of ``cuda.local.array``) viewed through a static layout from a run-time
  element ``offset``. ``T[crd]`` reads and ``T[crd] = x`` writes element ``offset + L(crd)``.

- a tensor's slice ``T[None, k]`` (None is CuTe's ``_``), ``local_tile(T, tiler, coord)``
  (the tiler a :func:`static` shape or a static layout) and ``local_partition(T,
  thr_layout, idx)`` are tensors too: their layouts are computed by layoutalg while numba
  types the kernel, their offsets are expressions of the run-time block and thread indices
  (:mod:`gemm._cute_numba` lowers them).

In numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the same kernel runs as Python:
layouts are the objects they are and ``make_tensor`` gives a :class:`layoutalg.Tensor` over
the array, so slicing, tiles and partitions are layoutalg's own functions and a kernel
written this way is checked on a CPU as the generated ones are.

>>> from layoutalg import Layout
>>> import numpy as np
>>> T = make_tensor(np.arange(16), Layout((4, 4), (4, 1)))       # row-major 4 x 4
>>> int(T[1, 2]), int(T[(3, 0)]), str(T[None, 1].layout)
(6, 12, '(4):(4)')
>>> str(local_tile(T, static((2, 2)), (1, None)).layout)
'(2,2,2):(4,1,2)'
>>> size(Layout((4, (2, 3)), (1, (4, 8)))), cosize(Layout((4, 2), (2, 1)))
(24, 8)

Also in kernels: ``get_slice(tiled, t)`` and ``partition_S/D/A/B/C(thr, T)`` of a static
TiledCopy / TiledMMA, ``make_fragment_like(T, dtype)`` (a register tensor), ``fill``,
``copy(src, dst)``, ``copy(tiled_copy, src, dst)`` (cp.async for a cp.async atom) and
``gemm(C, A, B)`` (UniversalFMA fragments), all unrolled at compile time. Global tensors
with run-time shapes are the next step (issue 17); so far a kernel is compiled for static
sizes.
"""

from __future__ import annotations

from typing import Any

from layoutalg import Layout
from layoutalg.gemm._env import simulator_active
from layoutalg.int_tuple import flatten, is_int, is_tuple, product
import numpy as np

from layoutalg import tensor as _tensor
from layoutalg.tensor import ArrayEngine, Tensor, local_partition, local_tile

__all__ = ["make_tensor", "size", "cosize", "static", "Static", "local_tile",
           "local_partition", "get_slice", "partition_S", "partition_D", "partition_A",
           "partition_B", "partition_C", "make_fragment_like", "fill", "copy", "gemm",
           "LayoutType", "TensorType"]


def _static(layout):
    """``layout`` if its shapes and strides are all non-negative ints, else a TypeError."""
    leaves = flatten(layout.shape) + flatten(layout.stride)
    if not all(is_int(x) and x >= 0 for x in leaves):
        raise TypeError(f"a layout in a kernel needs non-negative integer shapes and strides, "
                        f"got {layout}")
    return layout


def size(x: Any) -> int:
    """The number of coordinates of a layout or a tensor (a constant in a kernel)."""
    return int(product(x.shape))


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


def static(value: Any) -> Static:
    """``value`` (an int tuple, nested or not) as a :class:`Static` kernel constant."""
    if not is_tuple(value) or not all(is_int(x) and x >= 0 for x in flatten(value)):
        raise TypeError(f"static: expected a tuple of non-negative ints, got {value!r}")
    return Static(value)


def make_tensor(array: Any, layout: Layout, offset: int = 0) -> Tensor:
    """A tensor: ``array`` (1-D) through the static ``layout`` from element ``offset``. In a
    kernel compiled by numba this is typed and lowered by :mod:`gemm._cute_numba`; called
    from Python (the simulator runs kernels as Python) it is a :class:`layoutalg.Tensor`
    over the array, so slicing, :func:`local_tile` and :func:`local_partition` are
    layoutalg's own."""
    host = getattr(array, "_ary", array)            # the simulator's device arrays wrap numpy
    return Tensor(ArrayEngine(host, int(offset)), _static(layout))


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


def make_fragment_like(tensor: Tensor, dtype: Any) -> Tensor:
    """A register tensor of ``dtype`` (numpy's or numba's float32, ...) with ``tensor``'s
    shape and a compact column-major layout (MoYe's ``make_fragment_A/B/C``): in a kernel,
    a local array that numba keeps in registers when every index is a constant."""
    return _tensor.make_fragment_like(tensor, np.dtype(str(dtype)))


def fill(tensor: Tensor, value: Any) -> None:
    """Every element of ``tensor`` set to ``value`` (MoYe's ``zeros!`` for 0), unrolled."""
    for i in range(size(tensor)):
        tensor[i] = value


def copy(*args: Any) -> None:
    """``copy(src, dst)``: ``dst[i] = src[i]`` for every index of two tensors of one size
    (CuTe's ``copy`` with the universal atom). ``copy(tiled_copy, src, dst)``: the tiled
    copy's instruction for each of the thread's ``(CPY, ...)`` groups of a partition_S /
    partition_D pair: ``cp.async.ca`` / ``.cg`` (global -> shared, completed by
    ``gemm.arch.cp_async_wait_all``) or the universal copy. Unrolled in a kernel."""
    tiled, (src, dst) = (args[0], args[1:]) if len(args) == 3 else (None, args)
    if len(args) not in (2, 3):
        raise TypeError("copy(src, dst) or copy(tiled_copy, src, dst)")
    if size(src) != size(dst):
        raise ValueError(f"copy: the tensors have {size(src)} and {size(dst)} elements")
    kind = "universal" if tiled is None else tiled.atom.kind
    if kind == "universal":
        for i in range(size(src)):
            dst[i] = src[i]
        return
    from layoutalg.gemm import arch
    per, nbytes, op = copy_instructions(tiled, src)
    issue = {"cp.async.ca": arch.cp_async_ca, "cp.async.cg": arch.cp_async_cg}[op]
    for r in range(size(src) // per):
        issue(dst.engine.array, dst.engine.offset + int(dst.layout(r * per)),
              src.engine.array, src.engine.offset + int(src.layout(r * per)), nbytes)


def copy_instructions(tiled: Any, src: Any) -> Any:
    """(values per instruction, bytes per instruction, the instruction's kind) of a tiled
    copy over a partitioned tensor (or layout) whose mode 0 is one instruction's values;
    TypeError for an instruction that copy does not issue (yet)."""
    atom = tiled.atom
    if atom.kind not in ("cp.async.ca", "cp.async.cg", "universal"):
        raise TypeError(f"copy: the {atom.name} instruction is not supported in kernels yet")
    per = int(product(src.shape[0]))
    if per * atom.value_bits != atom.bits:
        raise ValueError(f"copy: mode 0 of {src.shape} is not one {atom.name} instruction "
                         f"({atom.bits // atom.value_bits} values)")
    return per, atom.bits // 8, atom.kind


def gemm(C: Tensor, A: Tensor, B: Tensor) -> None:
    """``C += A B`` on one thread's UniversalFMA fragments: C ``(1, M, N)``, A ``(1, M, K)``,
    B ``(1, N, K)`` (CuTe's ``gemm(mma, D, A, B, C)`` with D = C), unrolled."""
    (_, m, n), k = _fma_shapes(C, A, B), int(product(A.shape[2]))
    for kk in range(k):
        for i in range(m):
            for j in range(n):
                C[0, i, j] = C[0, i, j] + A[0, i, kk] * B[0, j, kk]


def _fma_shapes(C, A, B):
    """The (1, M, N) of UniversalFMA fragments C, A (1, M, K), B (1, N, K); ValueError
    otherwise."""
    shapes = [tuple(int(product(s)) for s in x.shape) if len(x.shape) == 3 else None
              for x in (C, A, B)]
    c, a, b = shapes
    if None in shapes or c[0] != 1 or a[0] != 1 or b[0] != 1 or a[1] != c[1] \
            or b[1] != c[2] or a[2] != b[2]:
        raise ValueError(f"gemm: UniversalFMA fragments C (1, M, N), A (1, M, K), B (1, N, K) "
                         f"expected, got {C.shape}, {A.shape}, {B.shape}")
    return c


if simulator_active():
    LayoutType = TensorType = None      # the simulator runs kernels as Python: no numba types
else:
    # importing it registers the types, their typing and lowering with numba
    from layoutalg.gemm._cute_numba import LayoutType, TensorType  # noqa: E402
