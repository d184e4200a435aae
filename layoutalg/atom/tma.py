"""The Tensor Memory Accelerator (TMA) as layouts: which boxes of a 2-D global matrix fill a
shared-memory tile, with which ``cuTensorMapEncodeTiled`` parameters.

A TMA load copies a *box* of the global tensor (``box`` elements per dimension, the
contiguous dimension first) into shared memory as a dense row-major block: box row r (along
the outer dimension) at ``r * box[0]`` elements, its elements contiguous, and, with a swizzle
mode, the 16-byte chunks of each address XORed as GMMA's ``Swizzle<log2 W, 4, 3>`` on bytes
(W 32, 64 or 128 bytes, the inner box at most W bytes). Elements past the global extents
are written as zeros: this is how any M, N, K is handled.

:func:`make_tma_copy` reads that off a shared tile's layout, for instance a stage of GMMA's
canonical layouts (``layoutalg.atom.gmma``): it finds the box, checks that the tile is made of
such boxes (else LayoutError: TMA cannot write it), and lists them with their shared offsets
and global coordinates. The tensor map itself is made from these parameters on the host
(``gemm.tma``).

>>> from layoutalg import tile_to_shape
>>> from layoutalg.atom.gmma import Layout_K_SW128_Atom
>>> stage = tile_to_shape(Layout_K_SW128_Atom(16), (128, 128))     # bf16, K-major, bK = 128
>>> tma = make_tma_copy((1000, 4096), (4096, 1), stage, 16)        # A row-major (M, K)
>>> tma.box, tma.swizzle, tma.dims, tma.strides
((64, 128), 128, (4096, 1000), (8192,))
>>> [(b.smem_offset, b.coords) for b in tma.boxes]
[(0, (0, 0)), (8192, (64, 0))]
>>> tma.bytes
32768
"""

from dataclasses import dataclass

import numpy as np

from ..errors import LayoutError
from ..swizzle import ComposedLayout, Swizzle
from ..tensor import layout_offsets

__all__ = ["TmaCopy", "TmaBox", "make_tma_copy", "TMA_DATA_TYPES"]

# element bits -> the names cuTensorMapEncodeTiled's data types take, by value type
TMA_DATA_TYPES = {"bf16": "BFLOAT16", "f16": "FLOAT16", "f32": "FLOAT32", "tf32": "TFLOAT32"}
_MAX_BOX = 256


@dataclass(frozen=True)
class TmaBox:
    """One TMA load of a tile: the element offset in the shared tile (unswizzled) and the
    global coordinates of the box's first element relative to the tile's, contiguous
    dimension first."""

    smem_offset: int
    coords: tuple


@dataclass(frozen=True)
class TmaCopy:
    """The parameters of a 2-D tiled TMA copy, contiguous dimension first: ``dims`` (global
    extents), ``strides`` (bytes between rows of the outer dimension), ``box`` (elements),
    ``swizzle`` (bytes, 0 for none), ``bits`` per element, and the ``boxes`` that fill one
    shared tile. ``major``: the tile's (MN, K) mode that is contiguous, "MN" or "K"."""

    dims: tuple
    strides: tuple
    box: tuple
    swizzle: int
    bits: int
    boxes: tuple
    major: str

    @property
    def bytes(self):
        """Bytes one tile's loads write (what an mbarrier's expect_tx counts)."""
        return len(self.boxes) * self.box[0] * self.box[1] * self.bits // 8


def _smem_parts(layout, bits):
    if isinstance(layout, ComposedLayout):
        sw, inner = layout.outer, layout.inner
        if not isinstance(sw, Swizzle) or isinstance(inner, ComposedLayout) or layout.offset:
            raise LayoutError(f"TMA: {layout} is not a swizzle over a layout")
    else:
        sw, inner = Swizzle(0, 0, 3), layout
    base = {8: 4, 16: 3, 32: 2}.get(bits)
    if base is None:
        raise LayoutError(f"TMA: {bits}-bit elements are not supported here (8, 16 or 32)")
    if sw.bits and (sw.base != base or sw.shift != 3 or sw.bits > 3):
        raise LayoutError(f"TMA: {sw} is not a TMA swizzle for {bits}-bit elements "
                          f"(Sw<b,{base},3>, b in 1..3)")
    if inner.rank != 2:
        raise LayoutError(f"TMA: {layout} is not an (MN, K) tile")
    return (0 if sw.bits == 0 else 16 << sw.bits), inner


def make_tma_copy(global_shape, global_strides, smem_layout, bits):
    """The :class:`TmaCopy` that fills ``smem_layout`` ((MN, K) -> element offset, swizzled
    or not) from a global (MN, K) matrix of ``global_shape`` and ``global_strides`` (in
    elements, one of them 1) of ``bits``-bit elements. LayoutError when TMA cannot: the
    contiguous dimensions of the global matrix and of the tile differ (TMA does not
    transpose), the tile is not made of dense boxes, a box would exceed 256 elements or the
    swizzle, or the strides are not multiples of 16 bytes."""
    swizzle, inner = _smem_parts(smem_layout, bits)
    if len(global_shape) != 2 or len(global_strides) != 2:
        raise LayoutError(f"TMA: the global matrix must be 2-D, got {global_shape} : "
                          f"{global_strides}")
    if 1 not in global_strides:
        raise LayoutError(f"TMA: the global matrix {global_shape}:{global_strides} has no "
                          "contiguous dimension")
    c = global_strides.index(1)                 # the contiguous mode: 0 (MN) or 1 (K)
    o = 1 - c
    outer_bytes = global_strides[o] * bits // 8
    if outer_bytes % 16 or outer_bytes <= 0:
        raise LayoutError(f"TMA: rows of the global matrix are {global_strides[o]} elements "
                          f"apart, not a positive multiple of 16 bytes")
    tile = (inner[0].size, inner[1].size)
    offs = np.asarray(layout_offsets(inner)).reshape(tile[1], tile[0]).T   # [mn, k]
    if c == 0:                                  # [outer, inner]: the global row, then along it
        offs = offs.T
    n_out, n_in = offs.shape
    # the box's inner extent: the run of consecutive offsets along the contiguous mode
    run = 1
    while run < n_in and offs[0, run] == offs[0, 0] + run:
        run += 1
    if run == 1 and n_in > 1:
        raise LayoutError(f"TMA: {smem_layout} is not contiguous along the global matrix's "
                          f"contiguous {'K' if c == 1 else 'MN'} mode (TMA does not transpose)")
    limit = (swizzle or 256 * bits // 8) * 8 // bits
    box_in = min(run, limit, _MAX_BOX)
    if n_in % box_in:
        raise LayoutError(f"TMA: runs of {box_in} elements do not tile the tile's {n_in}")
    if (box_in * bits) % 128:
        raise LayoutError(f"TMA: a box row of {box_in} {bits}-bit elements is not a multiple "
                          "of 16 bytes")
    if swizzle and box_in * bits // 8 != swizzle:
        raise LayoutError(f"TMA: box rows of {box_in * bits // 8} bytes under a {swizzle}-byte "
                          "swizzle: the tile is not the swizzle's canonical layout")
    # the outer extent: rows box_in apart
    box_out = 1
    while (box_out < min(n_out, _MAX_BOX)
           and offs[box_out, 0] == offs[0, 0] + box_out * box_in):
        box_out += 1
    if n_out % box_out:
        raise LayoutError(f"TMA: blocks of {box_out} dense rows do not tile the tile's {n_out}")
    dense = (np.arange(box_out)[:, None] * box_in + np.arange(box_in)[None, :])
    boxes = []
    for r0 in range(0, n_out, box_out):
        for c0 in range(0, n_in, box_in):
            block = offs[r0:r0 + box_out, c0:c0 + box_in]
            start = int(block[0, 0])
            if not np.array_equal(block - start, dense):
                raise LayoutError(f"TMA: the tile's box at {(c0, r0)} is not a dense "
                                  f"{box_out} x {box_in} row-major block of {smem_layout}")
            if swizzle and start % (8 * box_in):
                raise LayoutError(f"TMA: the box at {(c0, r0)} starts at element {start}, not "
                                  f"on a {swizzle}-byte swizzle pattern (8 rows)")
            boxes.append(TmaBox(start, (c0, r0)))
    dims = (global_shape[c], global_shape[o])
    return TmaCopy(dims, (outer_bytes,), (box_in, box_out), swizzle, bits,
                   tuple(sorted(boxes, key=lambda b: b.smem_offset)),
                   "K" if c == 1 else "MN")
