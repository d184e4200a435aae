"""Tiled atoms: copy and MMA atoms repeated over threads and data, and each thread's view.

A *TV layout* maps ``(thread index, value index)`` to the column-major index of an element
in a tile. ``make_tiled_copy(atom, thr_layout, val_layout)`` builds one from a thread layout
and a value layout (CuTe: ``right_inverse(raked_product(thr, val))``); ``make_tiled_mma``
tiles an MMA atom over an atom layout. ``get_slice(thread)`` gives a thread's view, whose
partitions are the tensors that thread reads and writes, with CuTe's shapes:

* ``ThrCopy.partition_S/D(t)``: ``(CPY, CPY_M, CPY_N, ...)``: the CPY mode is
  ``(atom values, repeats)`` (one instruction moves the first mode), the other modes tile the
  rest of ``t`` (extra modes of ``t``, such as a k-tile or pipeline-stage mode, are kept);
* ``ThrMMA.partition_A/B/C(t)``: ``(MMA, MMA_M, MMA_K, ...)``, ``(MMA, MMA_N, MMA_K, ...)``,
  ``(MMA, MMA_M, MMA_N, ...)``; B is given as an ``(N, K)`` tensor (CuTe / MoYe).

A tensor whose extents are not multiples of the tile is partitioned as if padded up to them
(as ``local_tile`` pads): the extra coordinates lie outside the tensor, so a thread must
predicate them, with the same partition of an identity tensor (``elem_less``).

Thread indices may be symbolic (sympy, or :mod:`layoutalg.index_expr` without it):
partitions then have a static layout and an engine that carries the symbolic offset.

>>> import numpy as np
>>> from layoutalg.atom import SM80_CP_ASYNC_CACHEALWAYS
>>> copy = make_tiled_copy(SM80_CP_ASYNC_CACHEALWAYS(8, np.float32), (32, 8), (2, 1))
>>> copy.tile_size, str(copy.layout_tv)
((64, 8), '(256,2):(2,1)')
>>> sA = make_tensor(np.zeros(130 * 8, np.float32), Layout((128, 8), (1, 130)))
>>> copy.get_slice(37).partition_D(sA).shape
((2, 1), 2, 1)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple, Union

import numpy as np

from .algebra import (
    coalesce, composition, logical_divide, logical_product, raked_product, right_inverse,
    tiled_product, upcast, zipped_divide,
)
from .atom.copy import CopyAtom, UniversalCopy
from .atom.mma import MMAAtom
from .errors import LayoutError
from .int_tuple import check_int_tuple, check_positive_int, fmt, is_int, leaves
from .layout import Layout, _as_layout, _flat, _modes, append, make_layout, slice_and_offset
from .swizzle import Swizzle
from .tensor import (
    ArithTuple, ArrayEngine, SwizzledEngine, Tensor, _check_tensor, _thread_index,
    make_fragment_like, make_tensor,
)
from .viz import repr_svg

if TYPE_CHECKING:
    from .types import Int, IntTuple, Tiler

__all__ = [
    "TiledCopy", "ThrCopy", "TiledMMA", "ThrMMA", "make_tiled_copy", "make_tiled_copy_A",
    "make_tiled_copy_B", "make_tiled_copy_C", "make_tiled_mma", "tile_size",
    "max_vector_bits",
]


def _zip2(L):
    """((a, b), (c, d)) -> ((a, c), (b, d))."""
    return make_layout(make_layout(L[0][0], L[1][0]), make_layout(L[0][1], L[1][1]))


# --- copies -------------------------------------------------------------------------------
class TiledCopy:
    """A copy atom tiled over a TV layout (thread, value) -> index in a ``tile_size`` tile.

    Build with :func:`make_tiled_copy` or :func:`make_tiled_copy_A`/``B``/``C``.
    """

    def __init__(self, atom, layout_tv, tiler):
        if not isinstance(atom, CopyAtom):
            raise TypeError(f"TiledCopy: expected a CopyAtom, not {atom!r}")
        layout_tv = _as_layout(layout_tv, "TiledCopy layout_tv", shapes=False)
        if layout_tv.rank != 2:
            raise LayoutError(f"TiledCopy: the TV layout {layout_tv} needs 2 modes (thread, "
                              f"value)")
        if not isinstance(tiler, (tuple, list)):
            raise TypeError(f"TiledCopy: the tiler must be a tuple of extents, not {tiler!r}")
        check_int_tuple(tuple(tiler), "TiledCopy", "tiler", "extent")
        self.atom = atom
        self.layout_tv = layout_tv
        self.tiler = tuple(tiler)
        nthr, nval = layout_tv[0].size, layout_tv[1].size
        if nthr % atom.num_threads:
            raise LayoutError(f"{atom.name} is executed by {atom.num_threads} threads, which "
                              f"do not divide the {nthr} threads of the tiled copy")
        if nval % atom.num_values_ref:
            raise LayoutError(
                f"each thread holds {nval} values of the tile but one {atom.name} instruction "
                f"moves {atom.num_values_ref} {atom.value_bits}-bit values per thread: the "
                f"value layout must give each thread a multiple of that")
        self._cache = {}

    @property
    def size(self):
        """Number of threads."""
        return self.layout_tv[0].size

    @property
    def tile_size(self):
        return self.tiler

    @property
    def values_per_thread(self):
        return self.layout_tv[1].size

    def get_slice(self, thr_idx):
        """Thread ``thr_idx``'s view (an int in ``[0, size)`` or a symbolic integer)."""
        return ThrCopy(self, _thread_index(thr_idx, self.size, "TiledCopy.get_slice"))

    get_thread_slice = get_slice

    # --- the layouts of all threads ------------------------------------------------------
    def _ref2trg(self, side):
        trg = self.atom.layout_src_values if side == "S" else self.atom.layout_dst_values
        return composition(right_inverse(self.atom.layout_ref_values), trg)

    def tidfrg(self, layout, side):
        """``layout`` of a tile-shaped tensor as ``((thr, val), (rest modes...))``, for the
        source (``side="S"``) or destination (``"D"``) of the atom (CuTe's tidfrg_S/D)."""
        key = (layout, side)
        if key not in self._cache:
            self._cache[key] = self._tidfrg(layout, side)
        return self._cache[key]

    def _tidfrg(self, layout, side):
        if layout.rank < len(self.tiler):
            raise LayoutError(f"a tensor of layout {layout} has fewer modes than the tile "
                              f"{fmt(self.tiler)} of the tiled copy")
        Z = zipped_divide(layout, self.tiler)
        atom_tv = zipped_divide(self.layout_tv, (self.atom.num_threads, self.atom.num_values_ref))
        trg_tv = composition(atom_tv, (self._ref2trg(side), None))
        thrval2mn = coalesce(_zip2(trg_tv), (1, (1, 1)))
        return composition(Z, (thrval2mn, None))

    def get_layoutS_TV(self):
        """(thread index, value) -> index of the source's ``tile_size`` tile (CuTe's
        ``get_layoutS_TV``)."""
        return self.tidfrg(Layout(self.tiler), "S")[0]

    def get_layoutD_TV(self):
        """(thread index, value) -> index of the destination's ``tile_size`` tile (CuTe's
        ``get_layoutD_TV``)."""
        return self.tidfrg(Layout(self.tiler), "D")[0]

    def retile(self, layout):
        """A thread's register layout ``(V, rest...)`` (values in this copy's TV value order,
        e.g. an MMA fragment for make_tiled_copy_A) as ``((atom values, repeats), rest...)``
        (CuTe's retile)."""
        key = (layout, "retile")
        if key not in self._cache:
            self._cache[key] = self._retile(layout)
        return self._cache[key]

    def _retile(self, layout):
        R = layout.rank
        V = _modes(layout)[0].size
        nthr = self.size
        tile = Layout(self.tiler)
        inv = right_inverse(self.layout_tv)
        if inv.size < tile.size:
            raise LayoutError(f"retile: the TV layout {self.layout_tv} does not cover its "
                              f"{tile.size}-element tile")
        frg_mn = upcast(composition(inv, tile), nthr * V)       # (m,n) -> v-tile index
        frg_v = zipped_divide(logical_product(Layout(V), right_inverse(frg_mn)),
                              Layout(self.atom.num_values_ref))   # (atom_vals, rest_vals)
        shp = tuple(m.size for m in _modes(frg_mn))
        if R < 1 + len(shp):
            layout = append(layout, n=1 + len(shp))
            R = layout.rank
        t = zipped_divide(layout, (V,) + shp)
        v = composition(t, (frg_v, None))
        sub, _ = slice_and_offset((None, (0,) + (None,) * (R - 1)), v)
        return sub

    def __str__(self):
        return (f"TiledCopy\n  atom:      {self.atom}\n  tile:      {fmt(self.tiler)}\n"
                f"  threads:   {self.size}\n  values:    {self.values_per_thread} per thread\n"
                f"  layout_tv: {self.layout_tv}   (thread, value) -> tile index")

    __repr__ = __str__

    def _repr_svg_(self):
        """The picture a notebook shows (see layoutalg.viz)."""
        return repr_svg(self)

    def tv_grid(self):
        """A text grid of a rank-2 tile: each cell ``T<thread>V<value>`` (first owner)."""
        return _tv_grid(self.layout_tv, self.tiler)


class ThrCopy:
    """One thread's view of a TiledCopy."""

    def __init__(self, tiled_copy, thr_idx):
        if not isinstance(tiled_copy, TiledCopy):
            raise TypeError(f"ThrCopy: expected a TiledCopy, not {tiled_copy!r}")
        self.tiled_copy = tiled_copy
        self.thr_idx = _thread_index(thr_idx, tiled_copy.size, "ThrCopy")

    def _partition(self, tensor, side, check=True):
        if not isinstance(tensor, Tensor):
            raise TypeError(f"partition_{side}: expected a Tensor, not {tensor!r}")
        tc = self.tiled_copy
        tv = tc.tidfrg(tensor.layout, side)
        atom = tc.atom
        chunk_bits = atom.src_chunk_bits if side == "S" else atom.dst_chunk_bits
        if check:
            _check_vectors(tv, tensor.engine, chunk_bits // atom.value_bits, atom,
                           f"partition_{side}")
        R = tv[1].rank
        return Tensor(tensor.engine, tv)[((self.thr_idx, None), (None,) * R)]

    def partition_S(self, tensor):
        """This thread's share of a source tile: ``(CPY, CPY_M, CPY_N, ...)``.

        Raises LayoutError when the values one instruction moves are not contiguous in the
        tensor's layout, or (for integer offsets) not aligned to the instruction's width.
        """
        return self._partition(tensor, "S")

    def partition_D(self, tensor):
        """This thread's share of a destination tile: ``(CPY, CPY_M, CPY_N, ...)``."""
        return self._partition(tensor, "D")

    def retile_S(self, tensor):
        """This thread's register tensor (e.g. an MMA fragment) viewed as the source of the
        copy: ``(CPY, CPY_M, CPY_N, ...)``."""
        return self._retile(tensor, "S")

    def retile_D(self, tensor):
        """This thread's register tensor viewed as the destination of the copy."""
        return self._retile(tensor, "D")

    def _retile(self, tensor, side):
        if not isinstance(tensor, Tensor):
            raise TypeError(f"retile_{side}: expected a Tensor, not {tensor!r}")
        L = self.tiled_copy.retile(tensor.layout)
        atom = self.tiled_copy.atom
        chunk_bits = atom.src_chunk_bits if side == "S" else atom.dst_chunk_bits
        modes = _modes(L)
        rest = make_layout(*modes[1:]) if len(modes) > 1 else Layout(1, 0)
        _check_vectors(make_layout(make_layout(Layout(1, 0), modes[0]), rest), tensor.engine,
                       chunk_bits // atom.value_bits, atom, f"retile_{side}")
        return tensor.with_layout(L)


def _check_vectors(tv, engine, chunk, atom, what):
    """Each instruction's ``chunk`` values must be contiguous, and (where ints) aligned."""
    if chunk <= 1 or isinstance(engine, ArithTuple):
        return                      # coordinates (identity tensors) are not memory
    vals = _modes(tv[0][1])
    problem = _vector_problem(tv[0][0], vals[0], vals[1:], tv[1], engine, chunk)
    if problem:
        raise LayoutError(f"{what}: {atom.name} moves {chunk} values ({chunk * atom.value_bits} "
                          f"bits) per thread as one contiguous, aligned piece, but {problem}; "
                          f"use a narrower atom or another layout")


def _vector_problem(thr, first, more_vals, rest, engine, w):
    """Why pieces of ``w`` consecutive values of ``first`` are not contiguous and aligned
    (None when they are): ``thr``, ``more_vals`` and ``rest`` are the other modes' layouts."""
    if first.size % w:
        return f"the thread's {first.size} values do not split into pieces of {w}"
    head = coalesce(composition(first, Layout(w)))
    if head != Layout(w):
        return f"the thread's values lie at {first} (not contiguous)"
    split = composition(first, Layout((w, first.size // w)))
    steps = list(leaves(split[1].stride)) if split.rank > 1 else []
    steps += [d for m in [thr, rest] + list(more_vals) for d in leaves(m.stride)]
    e = engine
    while isinstance(e, SwizzledEngine):
        if isinstance(e.outer, Swizzle) and w > (1 << e.outer.base):
            return f"the swizzle {e.outer} keeps only {1 << e.outer.base} values contiguous"
        steps.append(e.offset)
        e = e.base
    if isinstance(e, ArrayEngine):
        steps.append(e.offset)
    bad = [d for d in steps if is_int(d) and d % w]
    if bad:
        return (f"an offset step of {bad[0]} values breaks the {w}-value alignment "
                f"(e.g. a padded leading dimension or an unaligned base)")
    return None


def make_tiled_copy(atom: CopyAtom, thr_layout: Union[Layout, IntTuple],
                    val_layout: Union[Layout, IntTuple] = (1,)) -> TiledCopy:
    """Tile ``atom`` over threads arranged by ``thr_layout`` (thread coordinate -> thread
    index), each thread holding the block of values ``val_layout`` (value coordinate ->
    value index): CuTe's make_tiled_copy. The tile is ``shape(thr) * shape(val)`` mode by
    mode; the TV layout is ``right_inverse(raked_product(thr, val))`` shaped (threads, values).

    Raises LayoutError at construction when the value layout gives a thread fewer (or not a
    multiple of the) values the atom moves per instruction (say 2 floats for a 16-byte
    atom). Contiguity and alignment in memory are checked when a tensor is partitioned.

    >>> from layoutalg.atom import UniversalCopy
    >>> t = make_tiled_copy(UniversalCopy(32), Layout((4, 2), (2, 1)), (1, 2))
    >>> t.tile_size, str(t.layout_tv)
    ((4, 4), '((2,4),2):((8,1),4)')
    """
    thr = _as_layout(thr_layout, "make_tiled_copy thr_layout")
    val = _as_layout(val_layout, "make_tiled_copy val_layout")
    mn = raked_product(thr, val)
    inv = right_inverse(mn)
    nthr, nval = thr.size, val.size
    if inv.size < nthr * nval:
        raise LayoutError(f"make_tiled_copy: thread layout {thr} and value layout {val} do not "
                          f"map the tile one-to-one (raked product {mn} is not invertible)")
    layout_tv = composition(inv, Layout((nthr, nval)))
    tiler = tuple(m.size for m in _modes(mn))
    return TiledCopy(atom, layout_tv, tiler)


def _tiled_mma_arg(tiled_mma, what):
    if not isinstance(tiled_mma, TiledMMA):
        raise TypeError(f"{what}: expected a TiledMMA, not {tiled_mma!r}")
    return tiled_mma.tile_size


def make_tiled_copy_A(atom: CopyAtom, tiled_mma: TiledMMA) -> TiledCopy:
    """The copy of A's tile that gives each thread exactly the values its MMA partition of A
    holds (TV layout = ``tiled_mma.layout_A_tv``)."""
    M, N, K = _tiled_mma_arg(tiled_mma, "make_tiled_copy_A")
    return TiledCopy(atom, tiled_mma.get_layoutA_TV(), (M, K))


def make_tiled_copy_B(atom: CopyAtom, tiled_mma: TiledMMA) -> TiledCopy:
    """The copy of B's ``(N, K)`` tile in the values of the MMA's partition of B."""
    M, N, K = _tiled_mma_arg(tiled_mma, "make_tiled_copy_B")
    return TiledCopy(atom, tiled_mma.get_layoutB_TV(), (N, K))


def make_tiled_copy_C(atom: CopyAtom, tiled_mma: TiledMMA) -> TiledCopy:
    """The copy of C's ``(M, N)`` tile in the values of the MMA's partition of C."""
    M, N, K = _tiled_mma_arg(tiled_mma, "make_tiled_copy_C")
    return TiledCopy(atom, tiled_mma.get_layoutC_TV(), (M, N))


# --- MMAs ---------------------------------------------------------------------------------
class TiledMMA:
    """An MMA atom tiled over ``atom_layout`` (M, N, K) of atoms (threads ``(V, M, N, K)``),
    optionally over a permuted / enlarged tile ``permutation_mnk``."""

    def __init__(self, atom, atom_layout, permutation_mnk):
        if not isinstance(atom, MMAAtom):
            raise TypeError(f"make_tiled_mma: expected an MMAAtom, not {atom!r}")
        self.atom = atom
        L = _as_layout(atom_layout, "make_tiled_mma atom_layout")
        if L.rank > 3:
            raise LayoutError(f"make_tiled_mma: atom layout {L} has more than 3 modes (M,N,K)")
        self.atom_layout = append(L, n=3) if L.rank < 3 else L
        if self.atom_layout[2].size != 1:
            raise LayoutError("make_tiled_mma: more than one atom along K needs a reduction of "
                              "C across threads, which is not supported")
        self.thr_layout_vmnk = tiled_product(atom.thr_id, self.atom_layout)
        if not _is_permutation(self.thr_layout_vmnk):
            raise LayoutError(f"make_tiled_mma: the atom layout {L} does not number the "
                              f"{self.atom_layout.size} atoms 0..{self.atom_layout.size - 1} "
                              f"one-to-one (thread layout {self.thr_layout_vmnk} is not a "
                              f"bijection onto 0..{self.thr_layout_vmnk.size - 1})")
        if permutation_mnk is not None and not isinstance(permutation_mnk, (tuple, list)):
            raise TypeError(f"make_tiled_mma: permutation_mnk must be None or 3 entries (M, N, "
                            f"K), not {permutation_mnk!r}")
        perm = (None, None, None) if permutation_mnk is None else tuple(permutation_mnk)
        if len(perm) != 3:
            raise LayoutError(f"permutation_mnk {permutation_mnk!r} needs 3 entries (M, N, K)")
        self.permutation_mnk = tuple(None if p is None else _as_layout(p, "permutation")
                                     for p in perm)
        sizes = []
        for i in range(3):
            base = atom.shape_mnk[i] * self.atom_layout[i].size
            p = self.permutation_mnk[i]
            if p is not None and not _is_permutation(p):
                raise LayoutError(f"permutation {p} of mode {'MNK'[i]} is not a bijection onto "
                                  f"0..{p.size - 1}: it would repeat or skip elements")
            if p is not None and p.size % base:
                raise LayoutError(f"permutation {p} of mode {'MNK'[i]} has size {p.size}, not a "
                                  f"multiple of the atoms' extent {base}")
            sizes.append(base if p is None else p.size)
        self.tile_size = tuple(sizes)
        self._cache = {}

    @property
    def size(self):
        """Number of threads."""
        return self.thr_layout_vmnk.size

    def get_slice(self, thr_idx):
        """Thread ``thr_idx``'s view (an int in ``[0, size)`` or a symbolic integer)."""
        return ThrMMA(self, _thread_index(thr_idx, self.size, "TiledMMA.get_slice"))

    get_thread_slice = get_slice

    def thr_coord(self, thr_idx):
        """(v, m, n, k) coordinate of a thread index (int or symbolic) in ``thr_layout_vmnk``."""
        L = self.thr_layout_vmnk
        return tuple(_hier_coord(thr_idx, L[i].shape, L[i].stride) for i in range(4))

    def _thrfrg(self, layout, which):
        key = (layout, which)
        if key in self._cache:
            return self._cache[key]
        i, j = {"A": (0, 2), "B": (1, 2), "C": (0, 1)}[which]
        atom = self.atom
        if layout.rank < 2:
            raise LayoutError(f"partition_{which}: tensor layout {layout} needs 2 modes")
        t = logical_divide(layout, (self.permutation_mnk[i], self.permutation_mnk[j]))
        a = zipped_divide(t, (atom.shape_mnk[i], atom.shape_mnk[j]))
        lay = {"A": atom.layout_A, "B": atom.layout_B, "C": atom.layout_C}[which]
        tv = composition(a, (lay, None))                 # ((ThrV,FrgV),(RestI,RestJ,...))
        rest = _modes(tv[1])
        ti, tj = self.thr_layout_vmnk[1 + i].size, self.thr_layout_vmnk[1 + j].size
        ri = logical_divide(rest[0], Layout(ti))
        rj = logical_divide(rest[1], Layout(tj))
        res = make_layout(make_layout(tv[0][0], make_layout(ri[0], rj[0])),
                          make_layout(tv[0][1], make_layout(ri[1], rj[1], *rest[2:])))
        self._cache[key] = res                           # ((ThrV,(ThrI,ThrJ)),(FrgV,(RI,RJ,...)))
        return res

    def thrfrg_A(self, layout):
        return self._thrfrg(layout, "A")

    def thrfrg_B(self, layout):
        return self._thrfrg(layout, "B")

    def thrfrg_C(self, layout):
        return self._thrfrg(layout, "C")

    def _layout_tv(self, which):
        key = ("tv", which)
        if key in self._cache:
            return self._cache[key]
        M, N, K = self.tile_size
        ref = Layout({"A": (M, K), "B": (N, K), "C": (M, N)}[which])
        L = self._thrfrg(ref, which)
        V, TM, TN, TK = (self.thr_layout_vmnk[i].size for i in range(4))
        if which == "A":     # (ThrV,(ThrM,ThrK)) -> (ThrV,((ThrM,ThrN),ThrK)), N broadcast
            L = composition(L, ((None, (Layout((TM, TN), (1, 0)), None)), None))
        elif which == "B":   # (ThrV,(ThrN,ThrK)) -> (ThrV,((ThrM,ThrN),ThrK)), M broadcast
            L = composition(L, ((None, (Layout((TM, TN), (0, 1)), None)), None))
        inv = right_inverse(self.thr_layout_vmnk)
        if inv.size != self.size:
            raise LayoutError(f"thread layout {self.thr_layout_vmnk} is not invertible")
        res = make_layout(composition(L[0], inv), L[1])
        self._cache[key] = res
        return res

    def get_layoutA_TV(self):
        """(thread index, value) -> index of A's ``(M, K)`` tile (``tile_size`` M and K)."""
        return self._layout_tv("A")

    def get_layoutB_TV(self):
        return self._layout_tv("B")

    def get_layoutC_TV(self):
        return self._layout_tv("C")

    layout_A_tv = property(get_layoutA_TV)
    layout_B_tv = property(get_layoutB_TV)
    layout_C_tv = property(get_layoutC_TV)

    def __str__(self):
        p = fmt(tuple("_" if q is None else str(q) for q in self.permutation_mnk))
        return (f"TiledMMA\n  atom:         {self.atom}\n"
                f"  atom layout:  {self.atom_layout}   (M, N, K) of atoms\n"
                f"  permutation:  {p}\n  tile (M,N,K): {fmt(self.tile_size)}\n"
                f"  threads:      {self.size}   thr_layout_vmnk {self.thr_layout_vmnk}\n"
                f"  layout_A_tv:  {self.get_layoutA_TV()}\n"
                f"  layout_B_tv:  {self.get_layoutB_TV()}\n"
                f"  layout_C_tv:  {self.get_layoutC_TV()}")

    __repr__ = __str__

    def _repr_svg_(self):
        """The picture a notebook shows (see layoutalg.viz)."""
        return repr_svg(self)


def _is_permutation(L):
    """True when the integer layout ``L`` maps 0..size-1 one-to-one onto 0..size-1: its
    modes of extent > 1, by increasing stride, have the strides 1, s0, s0*s1, ... (decided on
    the modes, not by listing the offsets, so that a huge layout costs nothing)."""
    modes = []
    for s, d in _flat(L):
        if not (is_int(s) and is_int(d)):
            return False
        if s != 1:
            modes.append((d, s))
    expected = 1
    for d, s in sorted(modes):
        if d != expected:
            return False
        expected *= s
    return True


def _hier_coord(idx, shape, stride):
    """``(idx // stride) % shape`` leaf by leaf; 0 for extent-1 leaves (stride 0 allowed)."""
    if isinstance(shape, tuple):
        return tuple(_hier_coord(idx, s, d) for s, d in zip(shape, stride))
    if shape == 1:
        return 0
    if stride == 0:
        raise LayoutError(f"thread layout mode {shape}:0 repeats thread indices")
    return (idx // stride) % shape


class ThrMMA:
    """One thread's view of a TiledMMA."""

    def __init__(self, tiled_mma, thr_idx):
        if not isinstance(tiled_mma, TiledMMA):
            raise TypeError(f"ThrMMA: expected a TiledMMA, not {tiled_mma!r}")
        self.tiled_mma = tiled_mma
        self.thr_idx = _thread_index(thr_idx, tiled_mma.size, "ThrMMA")
        self.thr_vmnk = tiled_mma.thr_coord(thr_idx)

    def _partition(self, tensor, which):
        if not isinstance(tensor, Tensor):
            raise TypeError(f"partition_{which}: expected a Tensor, not {tensor!r}")
        L = self.tiled_mma._thrfrg(tensor.layout, which)
        v, m, n, k = self.thr_vmnk
        thr = {"A": (v, (m, k)), "B": (v, (n, k)), "C": (v, (m, n))}[which]
        nrest = L[1][1].rank
        return Tensor(tensor.engine, L)[(thr, (None, (None,) * nrest))]

    def partition_A(self, tensor):
        """This thread's A values: ``(MMA, MMA_M, MMA_K, ...)`` of an ``(M, K, ...)`` tensor."""
        return self._partition(tensor, "A")

    def partition_B(self, tensor):
        """This thread's B values: ``(MMA, MMA_N, MMA_K, ...)`` of an ``(N, K, ...)`` tensor."""
        return self._partition(tensor, "B")

    def partition_C(self, tensor):
        """This thread's C values: ``(MMA, MMA_M, MMA_N, ...)`` of an ``(M, N, ...)`` tensor."""
        return self._partition(tensor, "C")

    def partition_fragment_A(self, tensor, dtype=None):
        """A compact register tensor (numpy, zeros) shaped like ``partition_A(tensor)``."""
        return self.make_fragment_A(self.partition_A(tensor), dtype)

    def partition_fragment_B(self, tensor, dtype=None):
        return self.make_fragment_B(self.partition_B(tensor), dtype)

    def partition_fragment_C(self, tensor, dtype=None):
        return self.make_fragment_C(self.partition_C(tensor), dtype)

    def make_fragment_A(self, partitioned, dtype=None):
        """A register tensor shaped like an already partitioned A (MoYe's make_fragment_A)."""
        return make_fragment_like(partitioned.layout, dtype or self.tiled_mma.atom.frag_dtype("A"))

    def make_fragment_B(self, partitioned, dtype=None):
        return make_fragment_like(partitioned.layout, dtype or self.tiled_mma.atom.frag_dtype("B"))

    def make_fragment_C(self, partitioned, dtype=None):
        return make_fragment_like(partitioned.layout, dtype or self.tiled_mma.atom.frag_dtype("C"))


def make_tiled_mma(atom: MMAAtom, atom_layout: Union[Layout, IntTuple] = (1, 1, 1),
                   permutation_mnk: Optional[Tuple[Tiler, Tiler, Tiler]] = None) -> TiledMMA:
    """Tile an MMA atom over an ``(M, N, K)`` layout of atoms (a Layout or a shape; missing
    modes are 1), e.g. ``make_tiled_mma(UniversalFMA(), (16, 16))`` for 256 threads or
    ``make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN(), (2, 2))`` for four warps.
    ``permutation_mnk`` (None, or three entries each None, an int extent or a Layout)
    enlarges / permutes the tile per mode, as CuTe's PermutationMNK.

    Raises LayoutError when the atom layout does not number its atoms one-to-one (gaps or
    repeats in the thread indices), when a permutation is not a bijection of its extent or
    not a multiple of the atoms' extent, or for more than one atom along K.

    >>> from layoutalg.atom import SM80_16x8x8_F16F16F16F16_TN
    >>> mma = make_tiled_mma(SM80_16x8x8_F16F16F16F16_TN(), (3, 5))
    >>> mma.tile_size, mma.size
    ((48, 40, 8), 480)
    """
    return TiledMMA(atom, atom_layout, permutation_mnk)


def tile_size(tiled: Union[TiledCopy, TiledMMA]) -> Tuple[Int, ...]:
    """The tile of a TiledCopy (its tiler) or a TiledMMA ((M, N, K))."""
    if not isinstance(tiled, (TiledCopy, TiledMMA)):
        raise TypeError(f"tile_size: expected a TiledCopy or a TiledMMA, not {tiled!r}")
    return tiled.tile_size


# --- vector widths ------------------------------------------------------------------------
def max_vector_bits(tiled_copy: TiledCopy, src: Tensor, dst: Tensor, max_bits: int = 128) -> int:
    """The widest copy, in bits (a power of two, at most ``max_bits``), that every thread of
    ``tiled_copy`` can use between tensors ``src`` and ``dst``: each thread's values must be
    contiguous in both, in the same order (the ``max_common_vector`` of the two thread
    partitions), and every piece aligned (all offset steps and integer base offsets
    multiples of the width).

    The value width is ``tiled_copy.atom.value_bits``. Use it to pick the atom, e.g.
    ``SM80_CP_ASYNC_CACHEALWAYS(bits // 8, value_type)`` when it is 32 or more.

    >>> from layoutalg.atom import UniversalCopy
    >>> tc = make_tiled_copy(UniversalCopy(32), (32, 8), (4, 1))
    >>> g = make_tensor(np.zeros(1000 * 8, np.float32), Layout((128, 8), (1, 1000)))
    >>> s = make_tensor(np.zeros(130 * 8, np.float32), Layout((128, 8), (1, 130)))
    >>> max_vector_bits(tc, g, g), max_vector_bits(tc, g, s)
    (128, 64)
    """
    if not isinstance(tiled_copy, TiledCopy):
        raise TypeError(f"max_vector_bits: expected a TiledCopy, not {tiled_copy!r}")
    _check_tensor(src, "max_vector_bits")
    _check_tensor(dst, "max_vector_bits")
    check_positive_int(max_bits, "max_vector_bits", "max_bits")
    vb = tiled_copy.atom.value_bits
    probe = TiledCopy(UniversalCopy(vb) if vb in (8, 16, 32, 64, 128) else tiled_copy.atom,
                      tiled_copy.layout_tv, tiled_copy.tiler)
    sides = []
    for t, side in ((src, "S"), (dst, "D")):
        tv = probe.tidfrg(t.layout, side)
        sides.append((tv[0][0], tv[0][1], tv[1], t.engine))
    w = 1
    while 2 * w * vb <= max_bits and all(
            _vector_problem(thr, vals, [], rest, eng, 2 * w) is None
            for thr, vals, rest, eng in sides):
        w *= 2
    return w * vb


def _tv_grid(layout_tv, tiler):
    if len(tiler) != 2:
        raise LayoutError("tv_grid needs a rank-2 tile")
    M, N = tiler
    owner = {}
    for t in range(layout_tv[0].size):
        for v in range(layout_tv[1].size):
            owner.setdefault(layout_tv(t, v), f"T{t}V{v}")
    cells = [[owner.get(m + M * n, ".") for n in range(N)] for m in range(M)]
    w = max(len(c) for row in cells for c in row)
    return "\n".join(" ".join(f"{c:>{w}}" for c in row) for row in cells)
