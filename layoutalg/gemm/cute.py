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

Partitions of a TiledCopy / TiledMMA, ``copy`` and ``gemm`` are the next steps (issue 17).
"""

from __future__ import annotations

from typing import Any

from layoutalg import Layout
from layoutalg.gemm._env import simulator_active
from layoutalg.int_tuple import flatten, is_int, is_tuple, product
from layoutalg.tensor import ArrayEngine, Tensor, local_partition, local_tile

__all__ = ["make_tensor", "size", "cosize", "static", "Static", "local_tile",
           "local_partition", "LayoutType", "TensorType"]


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


if simulator_active():
    LayoutType = TensorType = None      # the simulator runs kernels as Python: no numba types
else:
    from layoutalg.gemm._cute_numba import (LayoutType, StaticType,  # noqa: E402,F401
                                            TensorType)                 # registers them
