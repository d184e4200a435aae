"""wgmma in :mod:`gemm.cute`: what ``gemm(tiled_mma, acc, A, B)`` issues for an SM90 GMMA atom
(layoutalg's ``SM90_64xNx16_F32BF16BF16_SS``, its f16 and tf32 forms and the FP8 ones,
``SM90_64xNx32_F32E4M3E4M3_SS_TN`` and its kin), computed once from
the layouts, and its run in numba's CUDA simulator.

A warpgroup's wgmma reads A (64 x k) and B (N x k) from shared memory through descriptors.
For the fragments of ``partition_A/B`` (every thread of the warpgroup sees the whole tile:
``(V, MMA_M, MMA_K)`` with V the atom's (64, k) tile, and ``(V, MMA_N, MMA_K)``), the
descriptor's strides and swizzle are read off the V mode's layout and the tensor's swizzle
by :func:`layoutalg.atom.gmma.gmma_descriptor` (LayoutError there, a ValueError here, where
the layout is not one that wgmma can read); the start of each (m, k) block is the block's
offset from the tensor's own, before the swizzle. The accumulator is a register fragment
``(V_C, MMA_M, MMA_N)`` of the atom's C layout (``make_fragment_like(partition_C(thr,
gC), float32)``) whose N/2 values of each (m, n) are contiguous. :func:`wgmma_plan` checks
all this and returns the static part; the kernel adds the shared address at run time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from layoutalg import Layout
from layoutalg.atom.gmma import GmmaDescriptor, gmma_descriptor
from layoutalg.errors import LayoutError
from layoutalg.int_tuple import product
from layoutalg.swizzle import ComposedLayout
from layoutalg.tensor import ArrayEngine, SwizzledEngine
from gemm import arch
from gemm.arch.tile_plan import WGMMA_BITS, wgmma_op

__all__ = ["is_gmma", "wgmma_plan", "WgmmaPlan", "wgmma_gemm", "array_at", "START_MASK"]

_PLAN_LOCK = threading.Lock()
START_MASK = 0x3FFF                 # the descriptor's start-address field (address >> 4)


def is_gmma(atom: Any) -> bool:
    """Whether an MMA atom is one of layoutalg's SM90 GMMA atoms (A and B in shared memory)."""
    return getattr(atom, "a_major", None) is not None


@dataclass(frozen=True)
class WgmmaPlan:
    """One ``gemm(tiled_mma, acc, A, B)`` of a GMMA atom: the instruction (``op``, ``n``, the
    transpose bits), the two descriptors without their start address (``desc_a``,
    ``desc_b``), the blocks ``(M, N, K)``, and per block the offsets: ``c_first[m][n]``
    (the first accumulator in the fragment), ``a_start[m][k]`` and ``b_start[n][k]`` (bytes
    from the tensor's offset, multiples of 16)."""

    op: str
    n: int
    trans_a: bool
    trans_b: bool
    desc_a: int
    desc_b: int
    blocks: tuple
    c_first: tuple
    a_start: tuple
    b_start: tuple


def _descriptor(what, layout, swizzle, bits, major, rows, k):
    """The 64-bit descriptor (start 0) of an operand's V mode, or a ValueError."""
    if layout.rank != 2 or [int(product(s)) for s in layout.shape] != [rows, k]:
        raise ValueError(f"gemm: the {what} fragment's first mode must be the atom's "
                         f"({rows}, {k}) tile, got {layout}")
    lay = layout if swizzle is None else ComposedLayout(swizzle, 0, layout)
    try:
        d = gmma_descriptor(lay, bits, major, shape=(rows, k))
    except LayoutError as e:
        raise ValueError(f"gemm: wgmma cannot read {what} of layout {lay}: {e}") from None
    return GmmaDescriptor(0, d.lbo, d.sbo, d.swizzle).encode(0)


def _starts(what, layout, bits, blocks, k_blocks):
    starts = []
    for i in range(blocks):
        row = []
        for kk in range(k_blocks):
            nbytes = int(layout((0, i, kk))) * bits // 8
            if nbytes % 16:
                raise ValueError(f"gemm: {what}'s block ({i}, {kk}) starts {nbytes} bytes from "
                                 "the tensor, not a multiple of 16")
            row.append(nbytes)
        starts.append(tuple(row))
    return tuple(starts)


@lru_cache(maxsize=None)
def wgmma_plan(atom: Any, c: Layout, a: Layout, a_swizzle: Any, a_bits: int, b: Layout,
               b_swizzle: Any, b_bits: int) -> WgmmaPlan:
    """The :class:`WgmmaPlan` of ``gemm(tiled_mma, C, A, B)`` for GMMA atom ``atom``, the
    fragments' layouts ``c`` (V_C, M, N), ``a`` (V_A, M, K), ``b`` (V_B, N, K), A's and B's
    swizzles (None: none) and element bits; ValueError naming what does not fit."""
    op, (_, n, k) = wgmma_op(atom.a_type, atom.b_type), atom.shape_mnk
    for what, bits, elem in (("A", a_bits, atom.a_type), ("B", b_bits, atom.b_type)):
        if bits != WGMMA_BITS[elem]:
            raise ValueError(f"gemm: {atom.name} reads {WGMMA_BITS[elem]}-bit {what} elements, "
                             f"the {what} tensor holds {bits}-bit ones")
    if not (c.rank == a.rank == b.rank == 3):
        raise ValueError(f"gemm: {atom.name} fragments C (V_C, M, N), A (V_A, M, K), B (V_B, N, "
                         f"K) expected, got {c}, {a}, {b}")
    m_blocks, n_blocks, k_blocks = (int(product(x.shape)) for x in (c[1], c[2], a[2]))
    if (int(product(a[1].shape)), int(product(b[1].shape)), int(product(b[2].shape))) != (
            m_blocks, n_blocks, k_blocks):
        raise ValueError(f"gemm: the fragments' blocks disagree: C {c}, A {a}, B {b}")
    if [int(c[0](i)) for i in range(c[0].size)] != list(range(n // 2)):
        raise ValueError(f"gemm: the accumulator's first mode must be the atom's {n // 2} "
                         f"values, contiguous (a register fragment of partition_C), got {c}")
    desc_a = _descriptor("A", a[0], a_swizzle, a_bits, atom.a_major, 64, k)
    desc_b = _descriptor("B", b[0], b_swizzle, b_bits, atom.b_major, n, k)
    c_first = tuple(tuple(int(c((0, i, j))) for j in range(n_blocks)) for i in range(m_blocks))
    return WgmmaPlan(op, n, atom.a_major == "MN", atom.b_major == "MN", desc_a, desc_b,
                     (m_blocks, n_blocks, k_blocks), c_first,
                     _starts("A", a, a_bits, m_blocks, k_blocks),
                     _starts("B", b, b_bits, n_blocks, k_blocks))


def _swizzle_of(tensor):
    return tensor.engine.outer if isinstance(tensor.engine, SwizzledEngine) else None


def array_at(tensor: Any) -> tuple:
    """(numpy array, element offset before the swizzle) of a simulator tensor: where TMA
    and wgmma, which swizzle addresses themselves, find its first element."""
    e = tensor.engine
    if isinstance(e, SwizzledEngine):
        return e.base.array, e.base.offset + int(e.offset)
    if isinstance(e, ArrayEngine):
        return e.array, int(e.offset)
    raise TypeError(f"gemm: expected a tensor over an array, got {tensor!r}")


def wgmma_gemm(tiled: Any, C: Any, A: Any, B: Any, accumulate: Any = True) -> None:
    """``gemm(tiled_mma, C, A, B[, accumulate])`` of a GMMA atom in the simulator: the plan's
    wgmma per (k, m, n) through gemm.arch's twin, on descriptors made as the kernel makes
    them (the first k-block adds to C only if ``accumulate``)."""
    arrays = [array_at(x) for x in (C, A, B)]
    bits = [8 * arrays[i][0].itemsize for i in (1, 2)]
    with _PLAN_LOCK:        # one thread makes the plan, the warpgroup's others find it made
        p = wgmma_plan(tiled.atom, C.layout, A.layout, _swizzle_of(A), bits[0], B.layout,
                       _swizzle_of(B), bits[1])
    (acc, c0), (sa, a0), (sb, b0) = arrays
    base = [x.__array_interface__["data"][0] + off * x.itemsize for x, off in ((sa, a0),
                                                                               (sb, b0))]
    m_blocks, n_blocks, k_blocks = p.blocks
    for kk in range(k_blocks):
        for i in range(m_blocks):
            for j in range(n_blocks):
                da = p.desc_a + ((base[0] + p.a_start[i][kk]) >> 4 & START_MASK)
                db = p.desc_b + ((base[1] + p.b_start[j][kk]) >> 4 & START_MASK)
                scale = 1 if kk or accumulate else 0
                tile = arch.wgmma_tile(p.op, p.n, p.trans_a, p.trans_b, c0 + p.c_first[i][j])
                tile(acc, da, db, scale, sa, sb)
