"""Tensors: an engine (where the data is) composed with a layout (where each element is).

``Tensor(engine, layout)``: ``tensor[crd]`` is the element at offset ``layout(crd)`` from the
engine. An engine is

* a numpy array: host data. Its flat storage is indexed by the layout's offsets (wrapped in
  an :class:`ArrayEngine`, which remembers a base offset so that slices stay views);
* any other object that supports ``engine + offset``: a symbolic base such as a sympy
  expression or a code generator's pointer. ``tensor[crd]`` is then ``engine + layout(crd)``
  and slices and partitions carry ``engine + offset``; offsets are never converted to int nor
  branched on, so thread and block indices may be sympy symbols;
* an :class:`ArithTuple` (the origin of an identity tensor, whose strides are the basis
  vectors ``E(i)``): the elements are then coordinates, used to predicate partial tiles.

A layout whose outer function is a swizzle (``ComposedLayout(Swizzle, offset, inner)``) is
applied to the *total* offset from the engine, as CuTe's swizzled shared-memory pointers:
the tensor keeps ``inner`` as its layout and a :class:`SwizzledEngine` applies the swizzle.

>>> import numpy as np
>>> A = make_tensor(np.arange(24), Layout((4, 6)))         # (4,6):(1,4)
>>> int(A[1, 2]), A[None, 2].values().tolist()
(9, [8, 9, 10, 11])
>>> gA = local_tile(A, (2, 3), (1, None))                    # (2,3,2) tiles of row block 1
>>> gA.shape, gA[0, 0, 1].item()
((2, 3, 2), 14)
>>> C = make_identity_tensor((4, 6))
>>> C[1, 2], local_tile(C, (2, 3), (1, 1))[1, 2]
((1, 2), (3, 5))
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from .algebra import (
    coalesce, composition, flat_divide, logical_divide, tiled_divide, zipped_divide,
)
from .core import check_tiler
from .errors import LayoutError, LayoutIndexError
from .int_tuple import (
    _ceil_div, _crd2idx, _idx2crd, _is_symbolic, _prefix_product, _product, check_int_tuple, fmt,
    has_none, is_int, leaves,
)
from .layout import Layout, _as_layout, _make, _modes, make_layout, slice_and_offset
from .swizzle import ComposedLayout, Swizzle

if TYPE_CHECKING:
    from .types import AnyLayout, Coord, Int, IntTuple, Tiler

__all__ = [
    "Tensor", "make_tensor", "make_identity_layout", "make_identity_tensor",
    "make_fragment_like", "local_tile", "local_partition", "dice", "elem_less",
    "ScaledBasis", "E", "ArithTuple", "ArrayEngine", "SwizzledEngine", "layout_offsets",
]


# --- basis vectors and coordinate tuples (CuTe's ScaledBasis / ArithmeticTuple) -------------
class ScaledBasis:
    """A linear combination ``sum c_i * E(i)`` of basis vectors; a stride of identity layouts.

    ``E(i)`` is the i-th unit vector; scaling by an int or a sympy expression and adding give
    more ScaledBasis values, and adding one to an :class:`ArithTuple` adds its coefficients to
    the tuple's entries. Printed as CuTe does: ``2@1`` is 2 * E(1).

    >>> str(E(1) * 2 + E(0)), (E(0) * 3 + E(1)) == E(1) + 3 * E(0)
    ('1@0+2@1', True)
    """

    __slots__ = ("terms",)
    is_layout_stride = True

    def __init__(self, terms=()):
        merged = {}
        for mode, c in terms:
            merged[mode] = merged.get(mode, 0) + c
        object.__setattr__(self, "terms", tuple(sorted((m, c) for m, c in merged.items()
                                                        if not _is_zero(c))))

    def __setattr__(self, name, value):
        raise AttributeError("ScaledBasis is immutable")

    def coefficient(self, mode):
        return dict(self.terms).get(mode, 0)

    def __mul__(self, k):
        if isinstance(k, (ScaledBasis, tuple)) or k is None:
            return NotImplemented
        return ScaledBasis((m, c * k) for m, c in self.terms)

    __rmul__ = __mul__

    def __add__(self, other):
        if isinstance(other, ScaledBasis):
            return ScaledBasis(self.terms + other.terms)
        if _is_zero(other):
            return self
        return NotImplemented

    __radd__ = __add__

    def __neg__(self):
        return self * -1

    def __eq__(self, other):
        if isinstance(other, ScaledBasis):
            return self.terms == other.terms
        if is_int(other) and other == 0:
            return not self.terms
        return NotImplemented

    def __hash__(self):
        return hash(self.terms) if self.terms else 0

    def __str__(self):
        if not self.terms:
            return "0"
        return "+".join(f"{c}@{m}" for m, c in self.terms)

    __repr__ = __str__


def _is_zero(c):
    return (is_int(c) and c == 0) or (_is_symbolic(c) and c == 0)


def E(i):
    """The i-th basis vector (CuTe's ``E<i>``)."""
    if not is_int(i) or i < 0:
        raise ValueError(f"E({i!r}): the mode of a basis vector is a non-negative int")
    return ScaledBasis(((int(i), 1),))


class ArithTuple(tuple):
    """A coordinate tuple that adds elementwise (CuTe's ArithmeticTuple): the values of
    identity tensors. Adding a :class:`ScaledBasis` adds its coefficients mode by mode.

    >>> ArithTuple((1, 2)) + E(1) * 3
    (1, 5)
    """

    def __add__(self, other):
        if isinstance(other, ScaledBasis):
            vals = list(self)
            for m, c in other.terms:
                if m >= len(vals):
                    raise LayoutError(f"basis vector E({m}) added to the rank-{len(vals)} "
                                      f"coordinate {tuple(self)}")
                vals[m] = vals[m] + c
            return ArithTuple(vals)
        if isinstance(other, tuple):
            if len(other) != len(self):
                raise LayoutError(f"adding coordinates of ranks {len(self)} and {len(other)}")
            return ArithTuple(a + b for a, b in zip(self, other))
        if _is_zero(other):
            return self
        return NotImplemented

    __radd__ = __add__


def elem_less(crd: IntTuple, bound: IntTuple) -> bool:
    """``crd[i] < bound[i]`` for every i: the predicate of a partial tile.

    For integer coordinates a bool; where an entry is symbolic, the tuple of the comparisons
    (to be joined by the caller's code generator).

    >>> elem_less((3, 5), (4, 6)), elem_less((3, 6), (4, 6))
    (True, False)
    """
    cs, bs = leaves(tuple(crd)), leaves(tuple(bound))
    if len(cs) != len(bs):
        raise ValueError(f"elem_less: {fmt(tuple(crd))} and {fmt(tuple(bound))} differ in rank")
    rel = tuple(c < b for c, b in zip(cs, bs))
    if all(isinstance(r, (bool, np.bool_)) for r in rel):
        return bool(all(rel))
    return rel


def make_identity_layout(shape: IntTuple) -> Layout:
    """The layout of coordinates: mode i has strides ``E(i)`` times its compact col-major
    strides, so every top-level mode yields its (flattened) coordinate.

    >>> print(make_identity_layout((4, (2, 3))))
    (4,(2,3)):(1@0,(1@1,2@1))
    """
    if is_int(shape):
        return Layout(shape, E(0))
    if not isinstance(shape, tuple):
        raise ValueError(f"make_identity_layout: {shape!r} is not a shape")
    stride = tuple(_scale(_prefix_product(s), E(i)) for i, s in enumerate(shape))
    return Layout(shape, stride)


def _scale(t, e):
    if isinstance(t, tuple):
        return tuple(_scale(x, e) for x in t)
    return e * t


def make_identity_tensor(shape: IntTuple) -> Tensor:
    """A tensor whose element at each coordinate is that coordinate (as a flat tuple of the
    top-level modes). It flows through local_tile and the partitions like a data tensor, so
    its partitions tell each thread which global coordinates its values have.

    >>> C = make_identity_tensor((3, 4))
    >>> C[2, 1], C[7], C.values()[:4]
    ((2, 1), (1, 2), [(0, 0), (1, 0), (2, 0), (0, 1)])
    """
    L = make_identity_layout(shape)
    return Tensor(ArithTuple((0,) * (L.rank if isinstance(L.shape, tuple) else 1)), L)


# --- engines ----------------------------------------------------------------------------
class ArrayEngine:
    """A 1-D numpy array and a base offset: ``engine + k`` moves the base; element ``k`` is
    ``array[offset + k]``."""

    __slots__ = ("array", "offset")

    def __init__(self, array, offset=0):
        if not isinstance(array, np.ndarray) or array.ndim != 1:
            raise ValueError("ArrayEngine needs a 1-D numpy array")
        if not is_int(offset):
            raise TypeError(f"a numpy engine needs integer offsets, not {offset!r}")
        self.array = array
        self.offset = int(offset)

    def __add__(self, k):
        if not is_int(k):
            raise TypeError(f"a numpy engine needs integer offsets, not {k!r} "
                            "(symbolic indices need a symbolic engine)")
        return ArrayEngine(self.array, self.offset + int(k))

    @property
    def dtype(self):
        return self.array.dtype

    def __repr__(self):
        return f"{self.array.dtype}[{self.array.size}]" + (f"+{self.offset}" if self.offset else "")


class SwizzledEngine:
    """An engine whose offsets pass through ``outer`` (a Swizzle or a Layout) after an offset:
    element k is ``base[outer(offset + k)]``; ``engine + k`` adds k before the swizzle.

    With a symbolic offset, the element is a :class:`SwizzledAddress` record, for a code
    generator that emits the swizzle itself.
    """

    __slots__ = ("base", "outer", "offset")

    def __init__(self, base, outer, offset=0):
        if not isinstance(outer, (Swizzle, Layout)):
            raise TypeError(f"SwizzledEngine: outer must be a Swizzle or a Layout, not {outer!r}")
        self.base, self.outer, self.offset = base, outer, offset

    def __add__(self, k):
        return SwizzledEngine(self.base, self.outer, self.offset + k)

    @property
    def dtype(self):
        return self.base.dtype

    def __repr__(self):
        return f"{self.outer} o ({self.base!r} + {self.offset})"


class SwizzledAddress:
    """``base + outer(offset)`` where ``offset`` is symbolic: a record for code generators."""

    __slots__ = ("base", "outer", "offset")

    def __init__(self, base, outer, offset):
        self.base, self.outer, self.offset = base, outer, offset

    def __repr__(self):
        return f"{self.base!r} + {self.outer}({self.offset})"


def _element(engine, k):
    """The element (or for symbolic engines the address) at offset ``k`` from ``engine``."""
    if isinstance(engine, ArrayEngine):
        return engine.array[_array_index(engine, k)]
    if isinstance(engine, SwizzledEngine):
        pos = engine.offset + k
        if is_int(pos):
            return _element(engine.base, engine.outer(pos))
        return SwizzledAddress(engine.base, engine.outer, pos)
    return engine + k


def _array_index(engine, k):
    """The index into ``engine.array`` of offset ``k``: LayoutIndexError outside the array
    (numpy would wrap a negative index around silently)."""
    i = engine.offset + k
    if not is_int(i):
        raise TypeError(f"a numpy tensor needs integer offsets, not {k!r} (symbolic indices "
                        "need a symbolic engine)")
    if not 0 <= i < engine.array.size:
        raise LayoutIndexError(f"tensor element at offset {i} is outside its array of "
                               f"{engine.array.size} elements")
    return i


def _flat_index(engine, offsets):
    """(array, indices) of the elements at numpy ``offsets`` from a numpy-backed engine."""
    if isinstance(engine, ArrayEngine):
        return engine.array, engine.offset + offsets
    if isinstance(engine, SwizzledEngine) and is_int(engine.offset):
        return _flat_index(engine.base, _apply_outer(engine.outer, engine.offset + offsets))
    raise TypeError(f"the engine {engine!r} holds no numpy data")


def _apply_outer(outer, x):
    if isinstance(outer, Swizzle):
        if outer.shift >= 0:
            return x ^ ((x & outer.yyy_mask) >> outer.shift)
        return x ^ ((x & outer.yyy_mask) << -outer.shift)
    return layout_offsets(outer)[x] if isinstance(outer, Layout) else np.vectorize(outer)(x)


# --- vectorized layout evaluation ---------------------------------------------------------
def layout_offsets(L: AnyLayout) -> np.ndarray:
    """``[L(i) for i in range(size(L))]`` as an int64 numpy array (read-only, cached).

    Works for integer strides, swizzled composed layouts and, for identity layouts, gives an
    array of shape ``(size, rank)`` of coordinates.

    >>> layout_offsets(Layout((2, 3), (3, 1))).tolist()
    [0, 3, 1, 4, 2, 5]
    """
    if type(L) is not Layout:
        L = _as_layout(L, "layout_offsets", shapes=False, composed=True)
    return _layout_offsets(L)


@lru_cache(maxsize=4096)
def _layout_offsets(L):
    if isinstance(L, ComposedLayout):
        out = _apply_outer(L.outer, L.offset + layout_offsets(L.inner))
    else:
        strides = leaves(L.stride)
        if any(isinstance(d, ScaledBasis) for d in strides):
            out = _basis_offsets(L)
        else:
            if not all(is_int(d) for d in strides):
                raise LayoutError(f"numeric offsets of {L} need integer strides")
            out = _int_offsets(leaves(L.shape), strides)
    out.setflags(write=False)
    return out


def _int_offsets(shapes, strides):
    n = _product(shapes)
    idx = np.arange(n, dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    for k, (s, d) in enumerate(zip(shapes, strides)):
        c = idx if k == len(shapes) - 1 else idx % s
        out += c * int(d)
        idx = idx // s
    return out


def _basis_offsets(L):
    strides = [d if isinstance(d, ScaledBasis) else ScaledBasis() if d == 0 else None
               for d in leaves(L.stride)]
    if any(d is None for d in strides):
        raise LayoutError(f"{L} mixes integer and basis strides")
    rank = 1 + max((m for d in strides for m, _ in d.terms), default=0)
    cols = []
    for m in range(rank):
        coefs = tuple(d.coefficient(m) for d in strides)
        if not all(is_int(c) for c in coefs):
            raise LayoutError(f"numeric coordinates of {L} need integer coefficients")
        cols.append(_int_offsets(leaves(L.shape), coefs))
    return np.stack(cols, axis=1)


# --- the tensor ---------------------------------------------------------------------------
_TABLE_MAX = 4096       # elements: an identity tensor's coordinates from a cached table


class Tensor:
    """An engine composed with a layout. See the module docstring.

    ``t[crd]``: an element (coordinate or colexicographic index) or, when ``crd`` holds None
    (CuTe's ``_``), the sub-tensor of those modes. ``t[crd] = v`` writes (numpy engines).
    ``t.values()``: the elements in the layout's colexicographic order.
    """

    __slots__ = ("engine", "layout")

    def __init__(self, engine, layout):
        if isinstance(engine, np.ndarray):
            if engine.ndim != 1:
                raise ValueError("Tensor(array, layout) needs a 1-D array; use make_tensor "
                                 "for n-D arrays")
            engine = ArrayEngine(engine)
        if isinstance(layout, ComposedLayout):
            engine = SwizzledEngine(engine, layout.outer, layout.offset)
            layout = layout.inner
            if isinstance(layout, ComposedLayout):
                raise LayoutError("nested composed layouts are not supported in tensors")
        if not isinstance(layout, Layout):
            raise TypeError(f"Tensor: expected a layout, not {layout!r}")
        if not hasattr(type(engine), "__add__") or isinstance(engine, (bool, str, bytes)):
            raise TypeError(f"Tensor: the engine must be a numpy array or support engine + "
                            f"offset, not {engine!r}")
        self.engine = engine
        self.layout = layout

    # --- structure -----------------------------------------------------------------------
    shape = property(lambda self: self.layout.shape)
    stride = property(lambda self: self.layout.stride)
    size = property(lambda self: self.layout.size)
    rank = property(lambda self: self.layout.rank)

    @property
    def is_numeric(self):
        """True when the elements are numpy data (the CPU executor's tensors)."""
        e = self.engine
        while isinstance(e, SwizzledEngine):
            e = e.base
        return isinstance(e, ArrayEngine)

    @property
    def dtype(self):
        return self.engine.dtype if self.is_numeric else None

    def with_layout(self, layout):
        return Tensor(self.engine, layout)

    def mode(self, i):
        """The sub-tensor of mode ``i`` (other modes at coordinate 0)."""
        return self.with_layout(self.layout[i])

    # --- access --------------------------------------------------------------------------
    def __getitem__(self, crd):
        if type(crd) is int:
            if type(self.engine) is ArithTuple and 0 <= crd < self.layout.size <= _TABLE_MAX:
                return self._coordinate(crd)
        elif has_none(crd):
            sub, off = slice_and_offset(crd, self.layout)
            return Tensor(self.engine + off, sub)
        return _element(self.engine, self.layout(crd))

    def _coordinate(self, i):
        """Element ``i`` of a small identity tensor (a thread's partition), from its layout's
        cached table of coordinates (evaluated per call, a coordinate built of basis vectors
        took most of the simulator's time in an epilogue's predicates)."""
        try:
            row = layout_offsets(self.layout)[i]
        except LayoutError:             # basis strides with symbolic coefficients
            return _element(self.engine, self.layout(i))
        if row.ndim == 0:               # no basis strides (every stride 0): the origin's
            return _element(self.engine, self.layout(i))
        vals = list(self.engine)
        if len(row) > len(vals):
            raise LayoutError(f"basis vector E({len(row) - 1}) added to the rank-{len(vals)} "
                              f"coordinate {tuple(self.engine)}")
        for m, c in enumerate(row.tolist()):
            vals[m] = vals[m] + c
        return ArithTuple(vals)

    def __call__(self, *crd):
        if not crd:
            raise LayoutError("a tensor is called with an index or a coordinate")
        return self[crd[0] if len(crd) == 1 else crd]

    def __iter__(self):
        raise TypeError("a Tensor is not iterable: use t.values() for its elements, or "
                        "t[crd] and t.mode(i)")

    def __setitem__(self, crd, value):
        if type(crd) is not int and has_none(crd):
            self[crd].assign(value)
            return
        k = self.layout(crd)
        if not is_int(k):
            raise TypeError(f"a numpy tensor needs integer offsets, not {k!r}")
        engine = self.engine
        while isinstance(engine, SwizzledEngine) and is_int(engine.offset):
            k, engine = _apply_outer(engine.outer, engine.offset + k), engine.base
        if not isinstance(engine, ArrayEngine):
            raise TypeError(f"the engine {self.engine!r} holds no numpy data")
        engine.array[_array_index(engine, k)] = value

    def offsets(self):
        """The numpy storage array and the flat indices of all elements, colexicographic."""
        return _flat_index(self.engine, layout_offsets(self.layout))

    def values(self):
        """The elements in colexicographic order: a numpy array for numpy engines, else a list.

        >>> Tensor(np.arange(6), Layout((2, 3), (3, 1))).values().tolist()
        [0, 3, 1, 4, 2, 5]
        """
        if self.is_numeric:
            arr, idx = self.offsets()
            return arr[idx]
        if isinstance(self.engine, ArithTuple) and all(is_int(c) for c in self.engine):
            try:
                coords = layout_offsets(self.layout)
            except LayoutError:
                coords = None
            if coords is not None:
                if coords.ndim == 1:
                    coords = coords[:, None]
                base = np.asarray(self.engine, dtype=np.int64)
                pad = np.zeros((coords.shape[0], len(base)), dtype=np.int64)
                pad[:, :coords.shape[1]] = coords
                return [ArithTuple(int(v) for v in row) for row in pad + base]
        return [self[i] for i in range(self.size)]

    def assign(self, values):
        """Write ``values`` (a scalar, an array of ``size`` elements in colexicographic order,
        or a tensor of the same size) into this numpy-backed tensor."""
        if isinstance(values, Tensor):
            if values.size != self.size:
                raise ValueError(f"assign: sizes differ ({values.size} vs {self.size})")
            values = values.values()
        arr, idx = self.offsets()
        arr[idx] = values

    def fill(self, value):
        self.assign(value)

    # --- the algebra on the layout -------------------------------------------------------
    def compose(self, *tilers):
        """``Tensor(engine, composition(layout, tiler))``; several arguments form a by-mode tiler."""
        t = tilers[0] if len(tilers) == 1 else tuple(tilers)
        return self.with_layout(composition(self.layout, t))

    def logical_divide(self, tiler):
        return self.with_layout(logical_divide(self.layout, tiler))

    def zipped_divide(self, tiler):
        return self.with_layout(zipped_divide(self.layout, tiler))

    def tiled_divide(self, tiler):
        return self.with_layout(tiled_divide(self.layout, tiler))

    def flat_divide(self, tiler):
        return self.with_layout(flat_divide(self.layout, tiler))

    def __str__(self):
        return f"{self.engine!r} o {self.layout}"

    __repr__ = __str__


def make_tensor(engine: Any, layout: Any = None, stride: Optional[IntTuple] = None) -> Tensor:
    """A Tensor from an engine and a layout (or a shape and stride).

    ``engine`` may be a numpy array: without a layout its own shape and strides are used;
    with one, the layout indexes the array's flat storage, which must then be contiguous
    (C or Fortran order: ``reshape(-1)`` of the memory order), else ValueError.

    >>> a = np.arange(6).reshape(2, 3)                       # row-major
    >>> t = make_tensor(a)
    >>> str(t.layout), int(t[1, 2])
    ('(2,3):(3,1)', 5)
    """
    if isinstance(engine, np.ndarray):
        flat, strides = _flat_storage(engine)
        if layout is None:
            if engine.ndim == 0:
                raise ValueError("make_tensor needs an array of rank >= 1")
            shp = tuple(engine.shape) if engine.ndim > 1 else engine.shape[0]
            std = strides if engine.ndim > 1 else strides[0]
            if any(s == 0 for s in engine.shape):
                raise ValueError(f"make_tensor: the array has an empty extent {engine.shape}")
            layout = Layout(shp, std)
        elif not isinstance(layout, (Layout, ComposedLayout)):
            layout = Layout(layout, stride)
        inner = layout.inner if isinstance(layout, ComposedLayout) else layout
        if all(is_int(d) and d >= 0 for d in leaves(inner.stride)) and inner.cosize > flat.size \
                and not isinstance(layout, ComposedLayout):
            raise ValueError(f"make_tensor: layout {layout} reaches offset {inner.cosize - 1}, "
                             f"past the array's {flat.size} elements")
        return Tensor(flat, layout)
    if layout is None:
        raise ValueError("make_tensor of a non-numpy engine needs a layout")
    if not isinstance(layout, (Layout, ComposedLayout)):
        layout = Layout(layout, stride)
    return Tensor(engine, layout)


def _flat_storage(a):
    """The 1-D view of ``a``'s memory and ``a``'s strides in elements."""
    if a.flags.c_contiguous:
        flat = a.reshape(-1)
    elif a.flags.f_contiguous:
        flat = a.reshape(-1, order="F")
    else:
        raise ValueError("make_tensor needs a C- or Fortran-contiguous array (use "
                         "np.ascontiguousarray, or pass a 1-D base array and a layout)")
    if a.itemsize == 0 or any(s % a.itemsize for s in a.strides):
        raise ValueError("make_tensor: array strides are not multiples of the item size")
    return flat, tuple(s // a.itemsize for s in a.strides)


# --- fragments ----------------------------------------------------------------------------
def make_fragment_like(x: Union[Tensor, AnyLayout], dtype: Any = None) -> Tensor:
    """A compact register tensor (numpy engine, zeros) with the shape of ``x``.

    The layout is column-major whatever ``x``'s strides: mode 0 (the MMA or copy atom's
    values) stays in atom order, so the registers of one instruction are contiguous, as
    CuTe's make_fragment_like. ``dtype`` defaults to ``x``'s numpy dtype.

    >>> f = make_fragment_like(Layout(((2, 2), 3, 2), ((8, 1), 64, 16)), np.float32)
    >>> print(f.layout)
    ((2,2),3,2):((1,2),4,12)
    """
    if isinstance(x, Tensor):
        L = x.layout
        if dtype is None:
            if not x.is_numeric:
                raise ValueError("make_fragment_like of a symbolic tensor needs a dtype")
            dtype = x.dtype
    elif isinstance(x, Layout):
        L = x
    else:
        raise TypeError(f"make_fragment_like: expected a Tensor or a Layout, not {x!r}")
    F = Layout(L.shape)
    return Tensor(np.zeros(F.cosize, dtype=dtype if dtype is not None else np.float32), F)


# --- tiling and partitioning --------------------------------------------------------------
def dice(proj: Coord, x: Any) -> Any:
    """Keep the elements of ``x`` where ``proj`` is not None (CuTe's ``dice`` with ``X`` as
    None). ``x`` may be a tuple or a Layout.

    >>> dice((1, None, 1), (128, 64, 8))
    (128, 8)
    """
    if proj is None:
        return x
    if not isinstance(proj, (tuple, list)):
        raise TypeError(f"dice: the projection must be a tuple, not {proj!r}")
    proj = tuple(proj)
    if isinstance(x, Layout):
        if len(proj) != x.rank:
            raise ValueError(f"dice: projection {proj} does not match the rank of {x}")
        keep = [x[i] for i, p in enumerate(proj) if p is not None]
        if not keep:
            raise ValueError(f"dice: projection {proj} keeps no mode of {x}")
        return make_layout(*keep) if len(keep) > 1 else keep[0]
    if not isinstance(x, (tuple, list)):
        raise TypeError(f"dice: expected a tuple or a Layout, not {x!r}")
    x = tuple(x)
    if len(proj) != len(x):
        raise ValueError(f"dice: projection {proj} and {x} differ in length")
    return tuple(v for v, p in zip(x, proj) if p is not None)


def _tiler_extent(t):
    if t is None:
        return None
    if is_int(t):
        return int(t)
    if isinstance(t, Layout) and all(is_int(d) for d in leaves(t.stride)):
        return t.size if coalesce(t) == Layout(t.size) else None
    return None


@lru_cache(maxsize=4096)
def _tiled(layout, tiler):
    """``layout`` padded to the tiler (:func:`_pad_layout`) and zipped-divided by it: what
    :func:`local_tile` indexes (remembered: a kernel's threads tile the same layouts)."""
    return zipped_divide(_pad_layout(layout, tiler), tiler)


def _pad_layout(L, tiler):
    """``L`` with the extents of its top-level modes padded up to multiples of the tiler's
    (ceil_div): the extra coordinates are out of bounds and must be predicated (identity
    tensors)."""
    modes = _modes(L)
    if len(tiler) > len(modes):
        raise LayoutError(f"tiler {fmt(tuple(tiler))} has more modes than {L}")
    changed = False
    for i, t in enumerate(tiler):
        n = _tiler_extent(t)
        if n is None or modes[i].size % n == 0:
            continue
        if isinstance(modes[i].shape, tuple):
            raise LayoutError(f"mode {i} of {L} (extent {modes[i].size}) is nested and not "
                              f"a multiple of the tile extent {n}: cannot pad it")
        modes[i] = _make(_ceil_div(modes[i].size, n) * n, modes[i].stride)
        changed = True
    if not changed:
        return L
    if not isinstance(L.shape, tuple):
        return modes[0]
    return make_layout(*modes)


def _as_tiler(tiler):
    if isinstance(tiler, (Layout, int)) or is_int(tiler):
        return (tiler,)
    return tuple(tiler)


def _check_tensor(tensor, what):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what}: expected a Tensor, not {tensor!r}")


def _thread_index(thr_idx, size, what):
    """``thr_idx`` if it names one of ``size`` threads (a symbolic one is taken as is);
    LayoutError otherwise (an out-of-range index would alias another thread's partition)."""
    if _is_symbolic(thr_idx):
        return thr_idx
    if not is_int(thr_idx):
        raise LayoutError(f"{what}: the thread index must be an int or a symbolic integer, "
                          f"got {thr_idx!r}")
    if not 0 <= thr_idx < size:
        raise LayoutError(f"{what}: thread index {thr_idx} is outside [0, {size}): the tiled "
                          f"operation has {size} threads")
    return thr_idx


def local_tile(tensor: Tensor, tiler: Tiler, coord: Coord, proj: Optional[Coord] = None) -> Tensor:
    """The tile at ``coord`` of ``tensor`` divided by ``tiler`` (CuTe's local_tile, MoYe's
    ``@tile``): ``zipped_divide`` then index the rest mode. None in ``coord`` keeps that rest
    mode, and rest modes past the tiler's rank are kept, so
    ``local_tile(mA, (bM, bK), (bx, None))`` has shape ``(bM, bK, k)``.

    ``proj`` (e.g. ``(1, None, 1)``) first drops the tiler and coord entries where it is None.

    Shapes not divisible by the tiler are padded up to a multiple (ceil_div) before the
    divide: the extra coordinates are out of bounds and must be masked by predication
    through an identity tensor tiled the same way (CuTe requires divisibility instead).

    >>> t = local_tile(make_identity_tensor((5, 7)), (4, 4), (1, None))
    >>> t.shape, t[0, 3, 1]
    ((4, 4, 2), (4, 7))
    """
    _check_tensor(tensor, "local_tile")
    if not isinstance(tiler, (Layout, tuple, list)) and not is_int(tiler):
        raise TypeError(f"local_tile: expected a tiler (a Layout, an int or a tuple of them), "
                        f"not {tiler!r}")
    tiler = _as_tiler(tiler)
    check_tiler(tiler, "local_tile")
    if coord is not None and not isinstance(coord, (tuple, list)) and not is_int(coord) \
            and not _is_symbolic(coord):
        raise TypeError(f"local_tile: expected a tile coordinate, not {coord!r}")
    coord = _as_tiler(coord) if coord is not None else (None,) * len(tiler)
    check_int_tuple(coord, "local_tile", "coord", "coord")
    if proj is not None:
        tiler, coord = dice(proj, tiler), dice(proj, coord)
    if len(coord) > tensor.rank:
        raise LayoutError(f"local_tile: coordinate {coord} has more modes than {tensor.layout}")
    Z = tensor.with_layout(_tiled(tensor.layout, tiler))
    for k, c in enumerate(coord):
        if is_int(c) and k < len(tiler):
            n = Z.layout[1][k].size
            if is_int(n) and c >= n:
                raise LayoutIndexError(f"local_tile: tile coordinate {c} of mode {k} is outside "
                                       f"the {n} tiles of {tensor.layout} along it")
    rest = tuple(coord) + (None,) * (tensor.rank - len(coord))
    return Z[(tuple(None for _ in tiler), rest)]


def local_partition(tensor: Tensor, thr_layout: Layout, idx: Int,
                    proj: Optional[Coord] = None) -> Tensor:
    """Thread ``idx``'s share of ``tensor`` when ``thr_layout`` (thread coordinate -> thread
    index) is tiled over it (CuTe's local_partition, MoYe's ``@parallelize``): the thread
    takes one element per tile of ``shape(thr_layout)``, at its coordinate in that tile.

    ``idx`` may be a sympy symbol. ``proj`` drops modes of ``thr_layout`` where it is None.

    >>> t = local_partition(make_identity_tensor((4, 6)), Layout((2, 3)), 3)
    >>> t.shape, t.values()
    ((2, 2), [(1, 1), (3, 1), (1, 4), (3, 4)])
    """
    _check_tensor(tensor, "local_partition")
    thr_layout = _as_layout(thr_layout, "local_partition")
    if proj is not None:
        thr_layout = dice(proj, thr_layout)
    for s, d in zip(leaves(thr_layout.shape), leaves(thr_layout.stride)):
        if not is_int(d):
            raise LayoutError(f"local_partition: the thread layout {thr_layout} needs integer "
                              f"strides")
        if d == 0 and s != 1:
            raise LayoutError(f"local_partition: the thread layout {thr_layout} repeats thread "
                              f"indices (its mode {s}:0)")
    idx = _thread_index(idx, thr_layout.size, "local_partition")
    modes = _modes(thr_layout)
    hier = _idx2crd(idx, thr_layout.shape, thr_layout.stride)
    hier = hier if isinstance(thr_layout.shape, tuple) else (hier,)
    coord = tuple(_crd2idx(c, m.shape) for c, m in zip(hier, modes))
    tiler = tuple(m.size for m in modes)
    Z = tensor.with_layout(_tiled(tensor.layout, tiler))
    return Z[(coord, (None,) * tensor.rank)]
