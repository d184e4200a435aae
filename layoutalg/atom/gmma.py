"""The shared-memory side of SM90 warpgroup MMA (wgmma): GMMA's canonical layouts, and the
64-bit matrix descriptor derived from a layout.

wgmma reads A and B from shared memory as *core matrices* of 8 rows x 16 bytes. A descriptor
says where they are: a start address, two byte offsets and a swizzle mode (PTX ISA, "Matrix
Descriptor Format": bits 0-13 start address >> 4, 16-29 leading byte offset (LBO) >> 4, 32-45
stride byte offset (SBO) >> 4, 62-63 the mode: 0 none ("interleave"), 1 128-byte, 2 64-byte,
3 32-byte swizzle). In units of 16 bytes (one core-matrix row, ``T = 128 / bits`` elements),
the layouts a descriptor can express are, for the (MN, K) slice of one instruction (CuTe's
canonical forms, W = swizzle bytes / 16, 1 without swizzle):

- K-major: ``((8, n), 2) : ((W, SBO), LBO)``: rows of W units, 8-row groups SBO apart, the
  instruction's two 16-byte K chunks LBO apart (contiguous, LBO unused, when swizzled);
- MN-major, swizzled: ``((W, n), (8, k)) : ((1, LBO), (W, SBO))``: W contiguous units along
  MN, groups of them LBO apart; 8 K-rows W apart, groups of 8 rows SBO apart;
- MN-major, no swizzle: ``((1, n), (8, k)) : ((-, SBO), (1, LBO))``.

The swizzle is ``Swizzle<log2 W, 4, 3>`` on byte addresses, ``Swizzle(log2 W, log2 T, 3)`` on
element offsets. :func:`gmma_descriptor` reads LBO and SBO off a layout (or raises LayoutError
naming what no descriptor can express); :func:`gmma_layout_atom` builds CuTe's
``Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom``, which ``tile_to_shape`` repeats into a stage.

>>> atom = Layout_K_SW128_Atom(16)                     # bf16 / f16
>>> print(atom)
Sw<3,3,3> o 0 o (8,64):(64,1)
>>> from layoutalg import tile_to_shape
>>> stage = tile_to_shape(atom, (64, 64))              # a 64x64 K-major stage
>>> d = gmma_descriptor(stage, 16, "K", k_block=1)      # its second 64x16 k-block
>>> d.start, d.swizzle, d.lbo, d.sbo
(32, 128, 16, 1024)
"""

import math
from dataclasses import dataclass

from ..casts import upcast
from ..core import coalesce, composition
from ..errors import LayoutError
from ..int_tuple import is_int
from ..layout import Layout, _flat
from ..products import logical_divide
from ..swizzle import ComposedLayout, Swizzle

__all__ = ["gmma_layout_atom", "gmma_descriptor", "GmmaDescriptor", "GMMA_SWIZZLES",
           "Layout_K_INTER_Atom", "Layout_K_SW32_Atom", "Layout_K_SW64_Atom",
           "Layout_K_SW128_Atom", "Layout_MN_INTER_Atom", "Layout_MN_SW32_Atom",
           "Layout_MN_SW64_Atom", "Layout_MN_SW128_Atom"]

GMMA_SWIZZLES = (0, 32, 64, 128)            # swizzle bytes; 0: none ("interleave")
_MODE = {0: 0, 128: 1, 64: 2, 32: 3}        # the descriptor's bits 62-63
_FIELD = (1 << 14) - 1                      # 14-bit fields, in units of 16 bytes


def _units(bits):
    if bits not in (8, 16, 32):
        raise LayoutError(f"GMMA operands have 8-, 16- or 32-bit elements, not {bits!r}-bit")
    return 128 // bits                      # elements per 16 bytes


def gmma_layout_atom(major, swizzle, bits):
    """CuTe's ``Layout_{major}_{swizzle}_Atom`` for ``bits``-bit elements: the smallest (MN, K)
    shared tile of a GMMA operand, ``major`` "K" or "MN", ``swizzle`` 0 (none), 32, 64 or 128
    bytes.

    >>> print(gmma_layout_atom("MN", 64, 16))
    Sw<2,3,3> o 0 o (32,8):(1,32)
    """
    t = _units(bits)
    if swizzle not in GMMA_SWIZZLES:
        raise LayoutError(f"GMMA swizzles are {GMMA_SWIZZLES} bytes, not {swizzle!r}")
    w = max(1, swizzle // 16)
    row = w * t                             # elements of one swizzle-wide row
    sw = Swizzle(int(math.log2(w)), int(math.log2(t)), 3)
    if major == "K":
        return ComposedLayout(sw, 0, Layout((8, row), (row, 1)))
    if major == "MN":
        return ComposedLayout(sw, 0, Layout((row, 8), (1, row)))
    raise LayoutError(f"GMMA major must be 'K' or 'MN', not {major!r}")


def _atom(major, swizzle, name):
    def atom(bits):
        return gmma_layout_atom(major, swizzle, bits)
    atom.__name__ = atom.__qualname__ = name
    atom.__doc__ = (f"CuTe's {name}: ``gmma_layout_atom({major!r}, {swizzle}, bits)``.")
    return atom


Layout_K_INTER_Atom = _atom("K", 0, "Layout_K_INTER_Atom")
Layout_K_SW32_Atom = _atom("K", 32, "Layout_K_SW32_Atom")
Layout_K_SW64_Atom = _atom("K", 64, "Layout_K_SW64_Atom")
Layout_K_SW128_Atom = _atom("K", 128, "Layout_K_SW128_Atom")
Layout_MN_INTER_Atom = _atom("MN", 0, "Layout_MN_INTER_Atom")
Layout_MN_SW32_Atom = _atom("MN", 32, "Layout_MN_SW32_Atom")
Layout_MN_SW64_Atom = _atom("MN", 64, "Layout_MN_SW64_Atom")
Layout_MN_SW128_Atom = _atom("MN", 128, "Layout_MN_SW128_Atom")


@dataclass(frozen=True)
class GmmaDescriptor:
    """What a wgmma matrix descriptor holds, in bytes: ``start`` (of the slice, relative to
    the layout's base), ``lbo``, ``sbo``, and the ``swizzle`` in bytes (0: none). Fields the
    layout leaves unused are 16 bytes (the smallest encodable value)."""

    start: int
    lbo: int
    sbo: int
    swizzle: int

    def __post_init__(self):
        for name in ("start", "lbo", "sbo", "swizzle"):
            v = getattr(self, name)
            if not is_int(v):
                raise TypeError(f"GmmaDescriptor: {name} must be an int (bytes), not {v!r}")
            if v < 0:
                raise LayoutError(f"GmmaDescriptor: {name} = {v} is negative")
        if self.swizzle not in _MODE:
            raise LayoutError(f"GmmaDescriptor: swizzle must be one of {sorted(_MODE)} bytes, "
                              f"not {self.swizzle}")

    def encode(self, base_address=0):
        """The 64-bit descriptor for a stage whose shared-memory address is
        ``base_address`` (aligned to the swizzle pattern: 8 rows x the swizzle width).

        >>> hex(GmmaDescriptor(0, 16, 1024, 128).encode(0x400))
        '0x4000004000010040'
        """
        addr = base_address + self.start
        if addr % 16 or not 0 <= addr >> 4 <= _FIELD:
            raise LayoutError(f"GMMA descriptor: start address {addr} is not a 16-byte aligned "
                              "shared-memory address below 256 KiB")
        return ((addr >> 4) | (self.lbo >> 4) << 16 | (self.sbo >> 4) << 32
                | _MODE[self.swizzle] << 62)


def _single(L, what):
    """The stride of a layout that coalesces to one mode (None when its size is 1)."""
    flat = [(s, d) for s, d in _flat(coalesce(L)) if s != 1]
    if not flat:
        return None
    if len(flat) != 1:
        raise LayoutError(f"GMMA descriptor: {what} is {L}, not a single stride")
    return flat[0][1]


def _split(L, n_inner, what):
    """Strides of mode ``L`` viewed as (n_inner, rest): (inner stride, rest stride)."""
    size = L.size
    if size % n_inner:
        raise LayoutError(f"GMMA descriptor: {what} of {size} is not a multiple of {n_inner}")
    parts = composition(L, Layout((n_inner, size // n_inner)))
    return (_single(parts[0], f"{what} (first {n_inner})"),
            _single(parts[1], f"{what} (groups of {n_inner})"))


def _bytes(units, what):
    if units is None:
        return 16
    if not 0 < units <= _FIELD:
        raise LayoutError(f"GMMA descriptor: {what} of {16 * units} bytes does not fit the "
                          "descriptor (positive, below 256 KiB)")
    return 16 * units


def gmma_descriptor(layout, bits, major, k_block=None, mn_block=None, shape=None):
    """The :class:`GmmaDescriptor` of a GMMA operand in shared memory.

    ``layout``: (MN, K) -> element offset, a Layout (no swizzle) or a ComposedLayout with a
    GMMA swizzle (see the module). With ``shape`` = (MN, K) of one instruction (default
    (MN of the layout, 256 / bits)), ``mn_block`` and ``k_block`` (default 0) pick the
    instruction's slice; its offsets must have one of the canonical forms, else LayoutError
    says what differs. ``major``: "K" or "MN" (the instruction's transpose bit).
    """
    t = _units(bits)
    if major not in ("K", "MN"):
        raise LayoutError(f"GMMA major must be 'K' or 'MN', not {major!r}")
    if major == "MN" and bits != 16:
        raise LayoutError(f"GMMA reads MN-major operands of 16-bit elements only, not {bits}-bit")
    if isinstance(layout, ComposedLayout):
        sw, offset, inner = layout.outer, layout.offset, layout.inner
        if not isinstance(sw, Swizzle) or isinstance(inner, ComposedLayout):
            raise LayoutError(f"GMMA descriptor: {layout} is not a swizzle over a layout")
    elif isinstance(layout, Layout):
        sw, offset, inner = Swizzle(0, int(math.log2(t)), 3), 0, layout
    else:
        raise LayoutError(f"GMMA descriptor: expected a layout, not {layout!r}")
    if inner.rank != 2:
        raise LayoutError(f"GMMA descriptor: {layout} is not an (MN, K) layout")
    if sw.bits and (sw.base != int(math.log2(t)) or sw.shift != 3 or sw.bits > 3):
        raise LayoutError(f"GMMA descriptor: {sw} is not a GMMA swizzle for {bits}-bit "
                          f"elements (Sw<b,{int(math.log2(t))},3>, b in 1..3)")
    swizzle = 0 if sw.bits == 0 else 16 << sw.bits
    w = max(1, swizzle // 16)
    mn_size, k_size = (inner[0].size, inner[1].size)
    smn, sk = shape or (mn_size, 256 // bits)
    if mn_size % smn or k_size % sk or smn % 8 or sk * bits != 256:
        raise LayoutError(f"GMMA descriptor: an instruction slice ({smn}, {sk}) of "
                          f"{bits}-bit elements does not tile {inner.shape} (K slices hold 256 "
                          "bits, MN slices multiples of 8)")
    # the slice (a whole number of instruction tiles), its start and its offsets
    start = offset + inner((mn_block or 0) * smn, (k_block or 0) * sk)
    sl = _slice(inner, smn, sk)
    if (start * bits) % 128:
        raise LayoutError(f"GMMA descriptor: the slice starts at element {start}, not on a "
                          "16-byte boundary")
    try:
        u = upcast(sl, t)                   # in 16-byte units: T contiguous elements each
        chunks = (u[1] if major == "K" else u[0]).size
        if chunks * t != (sk if major == "K" else smn):
            raise LayoutError(f"GMMA descriptor: the {'K' if major == 'K' else 'MN'} "
                              f"elements of {sl} are not contiguous in 16-byte runs, as a "
                              f"{major}-major operand's must be")
        if major == "K":                    # ((MN), 2 chunks)
            row, sbo = _split(u[0], 8, "the MN mode")
            lbo = _single(u[1], "the K mode")
            if row != w:
                raise LayoutError(f"GMMA descriptor: K-major rows are {16 * (row or 0)} bytes "
                                  f"apart; the {swizzle or 'unswizzled'}-byte form needs "
                                  f"{16 * w}")
            if swizzle and lbo != 1:
                raise LayoutError("GMMA descriptor: a swizzled K-major slice keeps its two "
                                  "16-byte K chunks contiguous")
            return GmmaDescriptor(start * bits // 8, _bytes(None if swizzle else lbo, "LBO"),
                                  _bytes(sbo, "SBO"), swizzle)
        inner_mn, groups_mn = _split(u[0], w, "the MN mode")
        rows, groups_k = _split(u[1], 8, "the K mode")
        if swizzle:
            if (inner_mn or 1) != 1 or rows != w:
                raise LayoutError(f"GMMA descriptor: an MN-major {swizzle}-byte slice needs "
                                  f"{w} contiguous 16-byte units along MN and K rows "
                                  f"{16 * w} bytes apart, got {u}")
            return GmmaDescriptor(start * bits // 8, _bytes(groups_mn, "LBO"),
                                  _bytes(groups_k, "SBO"), swizzle)
        if rows != 1:
            raise LayoutError(f"GMMA descriptor: an unswizzled MN-major slice needs K rows 16 "
                              f"bytes apart, got {u}")
        return GmmaDescriptor(start * bits // 8, _bytes(groups_k, "LBO"),
                              _bytes(groups_mn, "SBO"), 0)
    except LayoutError as e:
        if str(e).startswith("GMMA descriptor"):
            raise
        raise LayoutError(f"GMMA descriptor: {sl} is not made of 16-byte units ({e})") from None


def _slice(inner, smn, sk):
    """The (smn, sk) tile of ``inner`` (every tile has the same offsets from its first
    element: ``logical_divide``'s tile mode)."""
    tiled = logical_divide(inner, (Layout(smn), Layout(sk)))     # ((smn, rest), (sk, rest))
    mn, k = tiled[0][0], tiled[1][0]
    return Layout((mn.shape, k.shape), (mn.stride, k.stride))
