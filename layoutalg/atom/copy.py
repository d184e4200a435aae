"""Copy atoms: one copy instruction as (thread, bit) layouts (CuTe's Copy_Traits).

``layout_src`` and ``layout_dst`` map ``(thread, bit)`` of the source and destination
operands to a bit of the atom's data; ``layout_ref`` is the one of the two that tiled copies
are built on (the destination for ldmatrix, the source otherwise). A copy atom also carries
the width of the value type it moves (``value_bits``): its layouts in values are the bit
layouts upcast by that width (``layout_src_values`` ...).

Plain attributes for code generators: ``name``, ``kind`` ("universal", "cp.async.ca",
"cp.async.cg", "ldmatrix"), ``bits`` (bits each thread receives per instruction), ``num``
(x1/x2/x4 for ldmatrix, else 1), ``trans``, ``src_chunk_bits`` / ``dst_chunk_bits`` (the
width each thread reads / writes as one contiguous, aligned piece: the vector, the 16-byte
ldmatrix row, the 32-bit register), ``value_bits``.

>>> atom = SM80_CP_ASYNC_CACHEALWAYS(16, value_type=np.float32)
>>> atom.kind, atom.bits, atom.num_values_src, str(atom.layout_src_values)
('cp.async.ca', 128, 4, '(1,4):(0,1)')
>>> print(SM75_U32x4_LDSM_N().layout_dst)
(32,(32,4)):(32,(1,1024))
"""

from __future__ import annotations

from typing import Optional, Union

import numpy as np

from ..algebra import upcast
from ..errors import LayoutError
from ..int_tuple import check_positive_int, is_int, leaves
from ..layout import Layout

# an element type: a numpy dtype or scalar type, or a name such as "bfloat16"
ValueType = Union[str, type, np.dtype]

__all__ = [
    "CopyAtom", "UniversalCopy", "SM80_CP_ASYNC_CACHEALWAYS", "SM80_CP_ASYNC_CACHEGLOBAL",
    "SM75_U32x1_LDSM_N", "SM75_U32x2_LDSM_N", "SM75_U32x4_LDSM_N", "SM75_U16x2_LDSM_T",
    "SM75_U16x4_LDSM_T", "SM75_U16x8_LDSM_T", "type_bits",
]

_TYPE_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "b8": 8, "b16": 16,
              "b32": 32, "b64": 64, "b128": 128}


def type_bits(value_type: ValueType) -> int:
    """Width in bits of a value type: an int (bits), a PTX type name or a numpy dtype.

    >>> type_bits(16), type_bits("bf16"), type_bits(np.float32)
    (16, 16, 32)
    """
    if isinstance(value_type, (int, np.integer)) and not isinstance(value_type, bool):
        bits = int(value_type)
    elif isinstance(value_type, str) and value_type in _TYPE_BITS:
        bits = _TYPE_BITS[value_type]
    else:
        try:
            bits = np.dtype(value_type).itemsize * 8
        except TypeError:
            raise TypeError(f"{value_type!r} is not a value type (bits, PTX name or dtype)") from None
    if bits <= 0:
        raise ValueError(f"value type {value_type!r} has no width")
    return bits


def _check_atom_layouts(name, what, **layouts):
    """The layouts of an atom's constructor ``what``: ``thr_id`` a Layout, the operand
    layouts rank-2 Layouts (thread, value or bit) with integer strides."""
    if not isinstance(name, str):
        raise TypeError(f"{what}: the name must be a string, not {name!r}")
    for arg, L in layouts.items():
        if not isinstance(L, Layout):
            raise TypeError(f"{what} {name!r}: {arg} must be a Layout, not {L!r}")
        if arg != "thr_id" and L.rank != 2:
            raise LayoutError(f"{what} {name!r}: {arg} {L} needs 2 modes (thread, value)")
        if not all(is_int(d) for d in leaves(L.stride)):
            raise LayoutError(f"{what} {name!r}: {arg} {L} needs integer strides")


class CopyAtom:
    """One copy instruction as bit layouts, bound to a value type. See the module docstring."""

    def __init__(self, name, kind, bits, thr_id, layout_src, layout_dst, layout_ref,
                 src_chunk_bits, dst_chunk_bits, value_bits, num=1, trans=False, args=()):
        _check_atom_layouts(name, "CopyAtom", thr_id=thr_id, layout_src=layout_src,
                            layout_dst=layout_dst, layout_ref=layout_ref)
        for what, v in (("bits", bits), ("src_chunk_bits", src_chunk_bits),
                        ("dst_chunk_bits", dst_chunk_bits), ("value_bits", value_bits),
                        ("num", num)):
            check_positive_int(v, f"CopyAtom {name!r}", what)
        self.name, self.kind, self.bits = name, kind, bits
        self.thr_id = thr_id
        self.layout_src, self.layout_dst, self.layout_ref = layout_src, layout_dst, layout_ref
        self.src_chunk_bits, self.dst_chunk_bits = src_chunk_bits, dst_chunk_bits
        self.num, self.trans = num, trans
        self._args = args
        self.value_bits = value_bits
        for what, L, chunk in (("src", layout_src, src_chunk_bits),
                               ("dst", layout_dst, dst_chunk_bits)):
            if L[1].size % value_bits or chunk % value_bits:
                raise LayoutError(f"{name}: {L[1].size}-bit {what} operand per thread is not a "
                                  f"whole number of {value_bits}-bit values")
        self.layout_src_values = upcast(layout_src, value_bits)
        self.layout_dst_values = upcast(layout_dst, value_bits)
        self.layout_ref_values = upcast(layout_ref, value_bits)

    def with_value_type(self, value_type):
        """The same instruction moving values of ``value_type`` (bits, PTX name or dtype)."""
        return _MAKERS[self.name](*self._args, value_type=value_type)

    @property
    def num_threads(self):
        return self.thr_id.size

    @property
    def num_values_src(self):
        """Values each thread supplies per instruction."""
        return self.layout_src[1].size // self.value_bits

    @property
    def num_values_dst(self):
        return self.layout_dst[1].size // self.value_bits

    @property
    def num_values_ref(self):
        return self.layout_ref[1].size // self.value_bits

    def __str__(self):
        return (f"{self.name} ({self.kind}, {self.num_threads} thr, {self.bits} bits/thr, "
                f"{self.value_bits}-bit values)")

    __repr__ = __str__


_MAKERS = {}


def _register(f):
    _MAKERS[f.__name__] = f
    return f


def _vector(name, kind, bits, value_type, args):
    vb = bits if value_type is None else type_bits(value_type)
    one = Layout((1, bits), (0, 1))
    return CopyAtom(name, kind, bits, Layout(1, 0), one, one, one, bits, bits, vb, args=args)


def _size(fn, nbytes, bits, default=None):
    """The copy's size in bytes from exactly one of ``nbytes`` and ``bits`` (CuTe sizes its
    copy atoms by their value type's bits, the PTX ISA its cp.async by bytes: both are
    taken, by name)."""
    if nbytes is None and bits is None:
        if default is None:
            raise TypeError(f"{fn}: give the copy's size as nbytes= or bits=")
        return default
    if nbytes is not None and bits is not None:
        raise TypeError(f"{fn}: give nbytes={nbytes!r} or bits={bits!r}, not both")
    if bits is not None:
        if not (is_int(bits) and bits > 0 and bits % 8 == 0):
            raise ValueError(f"{fn}: bits={bits!r} is not a positive multiple of 8")
        return bits // 8
    if not (is_int(nbytes) and nbytes > 0):
        raise ValueError(f"{fn}: nbytes={nbytes!r} is not a positive int")
    return nbytes


@_register
def UniversalCopy(bits: Optional[int] = None, value_type: Optional[ValueType] = None, *,
                  nbytes: Optional[int] = None) -> CopyAtom:
    """One thread moves ``bits`` bits (8, 16, 32, 64 or 128; or ``nbytes=`` 1 to 16) with a
    plain load and store.

    ``value_type`` (default: one value of ``bits`` bits) is the element type moved, so a
    128-bit copy of float32 moves 4 values per thread.

    >>> UniversalCopy(64, value_type=np.float32).num_values_src
    2
    >>> UniversalCopy(nbytes=16).bits
    128
    """
    bits = 8 * _size("UniversalCopy", nbytes, bits)
    if bits not in (8, 16, 32, 64, 128):
        raise ValueError(f"UniversalCopy: {bits} bits; a thread copies 8, 16, 32, 64 or 128 "
                         "bits (1, 2, 4, 8 or 16 bytes)")
    return _vector("UniversalCopy", "universal", bits, value_type, (bits,))


@_register
def SM80_CP_ASYNC_CACHEALWAYS(nbytes: Optional[int] = None,
                              value_type: Optional[ValueType] = None, *,
                              bits: Optional[int] = None) -> CopyAtom:
    """``cp.async.ca.shared.global [dst], [src], nbytes`` for 4, 8 or 16 bytes (PTX ISA
    9.7.9.25.3 "cp.async"; or ``bits=`` 32, 64, 128): one thread copies global to shared
    memory asynchronously, caching at all levels. The source and destination must be
    ``nbytes``-aligned.

    >>> SM80_CP_ASYNC_CACHEALWAYS(bits=64).bits == SM80_CP_ASYNC_CACHEALWAYS(8).bits == 64
    True
    """
    nbytes = _size("SM80_CP_ASYNC_CACHEALWAYS", nbytes, bits)
    if nbytes not in (4, 8, 16):
        hint = f" (bits={nbytes}?)" if nbytes in (32, 64, 128) else ""
        raise ValueError(f"SM80_CP_ASYNC_CACHEALWAYS: {nbytes} bytes{hint}; cp.async.ca copies "
                         "4, 8 or 16 bytes")
    return _vector("SM80_CP_ASYNC_CACHEALWAYS", "cp.async.ca", 8 * nbytes, value_type, (nbytes,))


@_register
def SM80_CP_ASYNC_CACHEGLOBAL(nbytes: Optional[int] = None,
                              value_type: Optional[ValueType] = None, *,
                              bits: Optional[int] = None) -> CopyAtom:
    """``cp.async.cg.shared.global [dst], [src], 16`` (PTX ISA 9.7.9.25.3 "cp.async"): caches
    in L2 only. The PTX ISA allows only 16 bytes (128 bits) with ``.cg``; other sizes raise
    ValueError. (MoYe.jl's CACHEGLOBAL atom silently issues ``.ca``; this one is
    ``kind="cp.async.cg"``.)"""
    nbytes = _size("SM80_CP_ASYNC_CACHEGLOBAL", nbytes, bits, default=16)
    if nbytes != 16:
        raise ValueError(f"SM80_CP_ASYNC_CACHEGLOBAL: {nbytes} bytes; cp.async.cg copies 16 "
                         "bytes only")
    return _vector("SM80_CP_ASYNC_CACHEGLOBAL", "cp.async.cg", 128, value_type, (nbytes,))


# ldmatrix (PTX ISA 9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix"): a warp
# loads num 8x8 matrices of 16-bit elements from shared memory. The rows of matrix j are at
# the addresses given by threads 8j .. 8j+7 (x1: threads 0-7, x2: 0-15, x4: 0-31), each row
# 16 contiguous bytes (128 bits). In the destination, thread l holds in register j the
# elements (row l // 4, columns 2*(l % 4) and 2*(l % 4) + 1) of matrix j; with .trans the
# elements (rows 2*(l % 4) and 2*(l % 4) + 1, column l // 4).
#
# The atom's data is num matrices of 8 rows x 128 bits: element (r, c) of matrix j is at bit
# 1024*j + 128*r + 16*c. Hence, with l = t + 4*g (t = l % 4, g = l // 4):
#   src:      thread i (< 8*num), bit b       -> 128*i + b
#   dst (N):  thread l, bit b of register j   -> 1024*j + 128*g + 32*t + b = 32*l + b + 1024*j
#   dst (T):  thread l, bit b of half h of j  -> 1024*j + 128*(2t + h) + 16*g + b
def _ldsm_src(num):
    rows = 8 * num
    if rows == 32:
        return Layout((32, 128), (128, 1))
    return Layout(((rows, 32 // rows), 128), ((128, 0), 1))


def _ldsm(name, num, trans, value_type, args):
    if trans:
        dst = Layout(((4, 8), (16, 2, num)), ((256, 16), (1, 128, 1024)))
    elif num == 1:
        dst = Layout((32, 32), (32, 1))
    else:
        dst = Layout((32, (32, num)), (32, (1, 1024)))
    vb = 16 if value_type is None else type_bits(value_type)
    return CopyAtom(name, "ldmatrix", 32 * num, Layout(32), _ldsm_src(num), dst, dst,
                    128, 32, vb, num=num, trans=trans, args=args)


@_register
def SM75_U32x1_LDSM_N(value_type: Optional[ValueType] = None) -> CopyAtom:
    """``ldmatrix.sync.aligned.m8n8.x1.shared.b16``: one 8x8 matrix, one register per thread.
    Values default to 16 bits (2 per thread)."""
    return _ldsm("SM75_U32x1_LDSM_N", 1, False, value_type, ())


@_register
def SM75_U32x2_LDSM_N(value_type: Optional[ValueType] = None) -> CopyAtom:
    """``ldmatrix.sync.aligned.m8n8.x2.shared.b16``: two matrices, two registers per thread."""
    return _ldsm("SM75_U32x2_LDSM_N", 2, False, value_type, ())


@_register
def SM75_U32x4_LDSM_N(value_type: Optional[ValueType] = None) -> CopyAtom:
    """``ldmatrix.sync.aligned.m8n8.x4.shared.b16``: four matrices, four registers per thread."""
    return _ldsm("SM75_U32x4_LDSM_N", 4, False, value_type, ())


@_register
def SM75_U16x2_LDSM_T(value_type: Optional[ValueType] = None) -> CopyAtom:
    """``ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16``: one matrix, transposed.

    >>> print(SM75_U16x2_LDSM_T().layout_dst)
    ((4,8),(16,2,1)):((256,16),(1,128,1024))
    """
    return _ldsm("SM75_U16x2_LDSM_T", 1, True, value_type, ())


@_register
def SM75_U16x4_LDSM_T(value_type: Optional[ValueType] = None) -> CopyAtom:
    """``ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16``: two matrices, transposed."""
    return _ldsm("SM75_U16x4_LDSM_T", 2, True, value_type, ())


@_register
def SM75_U16x8_LDSM_T(value_type: Optional[ValueType] = None) -> CopyAtom:
    """``ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16``: four matrices, transposed."""
    return _ldsm("SM75_U16x8_LDSM_T", 4, True, value_type, ())
