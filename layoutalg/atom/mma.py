"""MMA atoms: one multiply-accumulate instruction as thread-value layouts (CuTe's MMA_Traits).

An atom computes ``D = A @ B^T + C`` on an ``M x K`` tile A, an ``N x K`` tile B (B is given
as ``(N, K)``, the CuTe / MoYe convention) and an ``M x N`` tile C. Its layouts map
``(thread, value)`` to the column-major index in those tiles:

* ``layout_A``: (thr, val) -> ``m + M*k``, ``layout_B``: (thr, val) -> ``n + N*k``,
  ``layout_C``: (thr, val) -> ``m + M*n``;
* ``thr_id``: the atom's logical thread -> thread index (``32:1`` for a warp, ``1:0`` for
  one thread).

The SM80 layouts below are derived from the fragment tables of the PTX ISA, section 9.7.14.5
"Matrix Fragments for mma.m16n8k16 with floating point type" and "Matrix Fragments for
mma.m16n8k8" (PTX ISA 8.x; the section is 9.7.13.x in 7.x and 9.7.15.x in 9.x). Every table
there uses ``groupID = laneid >> 2`` and ``threadID_in_group = laneid % 4``; writing the lane
as ``t + 4*g`` (t = threadID_in_group, g = groupID) gives the thread mode ``(4,8)``.

>>> atom = SM80_16x8x16_F32F16F16F32_TN()
>>> print(atom.layout_A)
((4,8),(2,2,2)):((32,1),(16,8,128))
>>> atom.shape_mnk, atom.ptx, atom.a_type, atom.c_type
((16, 8, 16), 'm16n8k16', 'f16', 'f32')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import LayoutError
from ..int_tuple import check_int_tuple
from ..layout import Layout
from ..tensor import layout_offsets
from .copy import _check_atom_layouts
from .float8 import FLOAT8, float8_encode, float8_values

__all__ = [
    "MMAAtom", "UniversalFMA", "SM80_16x8x16_F32BF16BF16F32_TN", "SM80_16x8x16_F32F16F16F32_TN",
    "SM80_16x8x16_F16F16F16F16_TN", "SM80_16x8x8_F16F16F16F16_TN",
    "SM80_16x8x8_F32TF32TF32F32_TN", "SM90_64xNx16_F32BF16BF16_SS", "SM90_64xNx16_F32F16F16_SS",
    "SM90_64xNx8_F32TF32TF32_SS", "SM90_64xNx32_F32E4M3E4M3_SS_TN",
    "SM90_64xNx32_F32E4M3E5M2_SS_TN", "SM90_64xNx32_F32E5M2E4M3_SS_TN",
    "SM90_64xNx32_F32E5M2E5M2_SS_TN", "SM90_FP8_ATOMS", "GMMA_MAJORS", "round_to_type",
    "storage_dtype", "encode", "decode",
]


def storage_dtype(type_name: str) -> np.dtype:
    """The numpy dtype that holds values of a type on the CPU: ``f16`` in float16, ``bf16``
    as its raw 16 bits in uint16 (numpy has no bfloat16; GPU kernels move the same bits),
    ``e4m3`` and ``e5m2`` as their bits in uint8, ``tf32``/``f32`` in float32, else the numpy
    dtype of that name."""
    if type_name in FLOAT8:
        return np.dtype(np.uint8)
    return {"f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16),
            "tf32": np.dtype(np.float32), "f32": np.dtype(np.float32),
            "f64": np.dtype(np.float64)}.get(type_name) or np.dtype(type_name)


def encode(x: Any, type_name: str) -> np.ndarray:
    """Numbers -> the storage of ``type_name`` (see storage_dtype), rounding as a conversion
    instruction does: ``f16`` and ``bf16`` round to nearest even; ``tf32`` rounds to nearest
    with ties away from zero (``cvt.rna.tf32.f32``) and stays in float32; ``e4m3`` and
    ``e5m2`` round to nearest even (:func:`layoutalg.atom.float8.float8_encode`). Data
    already in the storage dtype is returned as is.

    >>> encode(np.array([1.0, -2.0]), "bf16").tolist()
    [16256, 49152]
    """
    x = np.asarray(x)
    st = storage_dtype(type_name)
    if x.dtype == st:
        return x
    if type_name in FLOAT8:
        return float8_encode(x, type_name)
    if type_name in ("bf16", "tf32"):
        f = x.astype(np.float32)
        bits = f.view(np.uint32).astype(np.uint64)
        if type_name == "bf16":
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            out = bits.astype(np.uint16)
            return np.where(np.isfinite(f), out, (f.view(np.uint32) >> 16).astype(np.uint16))
        bits = (bits + 0x1000) & 0xFFFFE000
        return np.where(np.isfinite(f), bits.astype(np.uint32).view(np.float32), f)
    return x.astype(st)


def decode(x: Any, type_name: str) -> np.ndarray:
    """The storage of ``type_name`` -> its numbers (float64 for floating types)."""
    x = np.asarray(x)
    if type_name in FLOAT8:
        return float8_values(type_name)[x]
    if type_name == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if x.dtype.kind == "f":
        return x.astype(np.float64)
    return x


def round_to_type(x: Any, type_name: str) -> np.ndarray:
    """``x`` rounded to the values of ``type_name`` (as numbers).

    >>> round_to_type(np.array([1 + 2**-8, 1 + 3 * 2**-9]), "bf16").tolist()
    [1.0, 1.0078125]
    """
    return decode(encode(x, type_name), type_name)


class MMAAtom:
    """One MMA instruction: its shape, thread layout, operand layouts and types.

    Attributes (plain, for code generators): ``name``, ``ptx`` (shape string such as
    ``"m16n8k16"``, None for UniversalFMA), ``instruction`` (the full PTX mnemonic),
    ``shape_mnk``, ``thr_id``, ``layout_A``, ``layout_B``, ``layout_C``, and ``a_type``,
    ``b_type``, ``c_type``, ``d_type`` (PTX type names, or numpy dtype names for
    UniversalFMA).
    """

    def __init__(self, name, ptx, instruction, shape_mnk, thr_id, layout_A, layout_B,
                 layout_C, a_type, b_type, c_type, d_type):
        _check_atom_layouts(name, "MMAAtom", thr_id=thr_id, layout_A=layout_A,
                            layout_B=layout_B, layout_C=layout_C)
        if not isinstance(shape_mnk, (tuple, list)) or len(shape_mnk) != 3:
            raise TypeError(f"MMAAtom {name!r}: shape_mnk must be (M, N, K), not {shape_mnk!r}")
        check_int_tuple(tuple(shape_mnk), "MMAAtom", "shape_mnk", "extent")
        for what, t in (("a_type", a_type), ("b_type", b_type), ("c_type", c_type),
                        ("d_type", d_type)):
            if not isinstance(t, str):
                raise TypeError(f"MMAAtom {name!r}: {what} must be a type name, not {t!r}")
            try:
                storage_dtype(t)
            except TypeError:
                raise LayoutError(f"MMAAtom {name!r}: {what} {t!r} is not a type name") from None
        self.name, self.ptx, self.instruction = name, ptx, instruction
        self.shape_mnk = tuple(shape_mnk)
        self.thr_id = thr_id
        self.layout_A, self.layout_B, self.layout_C = layout_A, layout_B, layout_C
        self.a_type, self.b_type, self.c_type, self.d_type = a_type, b_type, c_type, d_type
        M, N, K = self.shape_mnk
        for lay, extent, what in ((layout_A, M * K, "A"), (layout_B, N * K, "B"),
                                  (layout_C, M * N, "C")):
            if lay[0].size != thr_id.size:
                raise ValueError(f"{name}: layout_{what} has {lay[0].size} threads, "
                                 f"thr_id {thr_id.size}")
            image = np.unique(layout_offsets(lay))
            if not np.array_equal(image, np.arange(extent)):
                raise ValueError(f"{name}: layout_{what} {lay} does not cover its "
                                 f"{extent}-element tile")

    @property
    def num_threads(self):
        return self.thr_id.size

    def frag_dtype(self, operand):
        """The numpy dtype of this atom's register fragments of ``operand`` ("A", "B", "C")."""
        return storage_dtype({"A": self.a_type, "B": self.b_type, "C": self.c_type,
                              "D": self.d_type}[operand])

    def compute(self, a, b, c):
        """``D = A @ B^T + C`` with the instruction's types, batched over leading axes.

        ``a`` is ``(..., M, K)``, ``b`` is ``(..., N, K)``, ``c`` is ``(..., M, N)``, in the
        types' storage (see storage_dtype) or as numbers, which are first rounded to the
        types. The products are summed in float64 (exact for the SM80 input types and short
        K) or the integer dtype, and the result is rounded once to ``d_type``'s storage.
        """
        a, b, c = (round_to_type(x, t) for x, t in ((a, self.a_type), (b, self.b_type),
                                                     (c, self.c_type)))
        acc = np.result_type(a, b, c)
        if acc.kind == "f":
            acc = np.float64
        prod = np.matmul(a.astype(acc), np.swapaxes(b.astype(acc), -1, -2))
        return encode(prod + c.astype(acc), self.d_type)

    def __str__(self):
        M, N, K = self.shape_mnk
        return (f"{self.name} ({self.num_threads} thr, {M}x{N}x{K}, "
                f"{self.a_type}*{self.b_type}+{self.c_type}->{self.d_type})")

    __repr__ = __str__


def UniversalFMA(a_type: Any = np.float32, b_type: Any = None, c_type: Any = None) -> MMAAtom:
    """One thread computes ``d = a * b + c`` on scalars of any numpy dtype (1x1x1).

    >>> atom = UniversalFMA(np.float32)
    >>> atom.shape_mnk, str(atom.thr_id), str(atom.layout_C)
    ((1, 1, 1), '1:0', '(1,1):(0,0)')
    """
    a = np.dtype(a_type).name
    b = np.dtype(b_type if b_type is not None else a_type).name
    c = np.dtype(c_type if c_type is not None else a_type).name
    one = Layout((1, 1), (0, 0))
    return MMAAtom("UniversalFMA", None, "fma", (1, 1, 1), Layout(1, 0), one, one, one,
                   a, b, c, c)


# The layouts of the SM80 atoms, derived from the PTX tables (lane = t + 4g).
#
# m16n8k16, A (.f16/.bf16), a0..a7, i = v0 + 2*v1 + 4*v2:
#   row = g + 8*v1  (groupID for i in {0,1,4,5}, groupID + 8 otherwise)
#   col = 2t + v0 + 8*v2
#   m + 16k = g + 32t + 16v0 + 8v1 + 128v2       -> ((4,8),(2,2,2)):((32,1),(16,8,128))
# m16n8k16, B (.f16/.bf16), b0..b3, i = v0 + 2*v1:
#   row (k) = 2t + v0 + 8*v1, col (n) = g
#   n + 8k = g + 16t + 8v0 + 64v1                 -> ((4,8),(2,2)):((16,1),(8,64))
# C/D (.f32 and .f16), c0..c3, i = v0 + 2*v1:
#   row = g + 8*v1, col = 2t + v0
#   m + 16n = g + 32t + 16v0 + 8v1                -> ((4,8),(2,2)):((32,1),(16,8))
# m16n8k8, A (.f16), a0..a3: row = g + 8*v1, col = 2t + v0     -> same as C
# m16n8k8, B (.f16), b0..b1: row (k) = 2t + v0, col (n) = g
#   n + 8k = g + 16t + 8v0                        -> ((4,8),2):((16,1),8)
# m16n8k8, A (.tf32), a0..a3, i = v0 + 2*v1: row = g + 8*v0, col = t + 4*v1
#   m + 16k = g + 16t + 8v0 + 64v1                -> ((4,8),(2,2)):((16,1),(8,64))
# m16n8k8, B (.tf32), b0..b1: row (k) = t + 4*v0, col (n) = g
#   n + 8k = g + 8t + 32v0                        -> ((4,8),2):((8,1),32)
_WARP = Layout(32)
_A_16x16 = Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))
_B_8x16 = Layout(((4, 8), (2, 2)), ((16, 1), (8, 64)))
_C_16x8 = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))
_B_8x8_F16 = Layout(((4, 8), 2), ((16, 1), 8))
_A_16x8_TF32 = Layout(((4, 8), (2, 2)), ((16, 1), (8, 64)))
_B_8x8_TF32 = Layout(((4, 8), 2), ((8, 1), 32))


def _sm80(name, k, layout_A, layout_B, a, b, c, d):
    ptx = f"m16n8k{k}"
    return MMAAtom(name, ptx, f"mma.sync.aligned.{ptx}.row.col.{d}.{a}.{b}.{c}", (16, 8, k),
                   _WARP, layout_A, layout_B, _C_16x8, a, b, c, d)


def SM80_16x8x16_F32BF16BF16F32_TN() -> MMAAtom:
    """``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`` (PTX ISA 9.7.14.5.8): a warp
    multiplies a 16x16 bf16 A (row-major, "T") by a 16x8 bf16 B (column-major, "N"; given as
    8x16 (N, K)) into a 16x8 f32 C. A: 8 values per thread, B: 4, C: 4."""
    return _sm80("SM80_16x8x16_F32BF16BF16F32_TN", 16, _A_16x16, _B_8x16,
                 "bf16", "bf16", "f32", "f32")


def SM80_16x8x16_F32F16F16F32_TN() -> MMAAtom:
    """``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` (PTX ISA 9.7.14.5.8): f16 inputs,
    f32 accumulators; layouts as SM80_16x8x16_F32BF16BF16F32_TN."""
    return _sm80("SM80_16x8x16_F32F16F16F32_TN", 16, _A_16x16, _B_8x16,
                 "f16", "f16", "f32", "f32")


def SM80_16x8x16_F16F16F16F16_TN() -> MMAAtom:
    """``mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16`` (PTX ISA 9.7.14.5.8): f16 inputs
    and f16 accumulators (C in two .f16x2 registers, same element layout as f32)."""
    return _sm80("SM80_16x8x16_F16F16F16F16_TN", 16, _A_16x16, _B_8x16,
                 "f16", "f16", "f16", "f16")


def SM80_16x8x8_F16F16F16F16_TN() -> MMAAtom:
    """``mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16`` (PTX ISA 9.7.14.5.7): a 16x8 f16 A
    (4 values per thread), an 8x8 f16 B (2 values), a 16x8 f16 C (4 values).

    >>> print(SM80_16x8x8_F16F16F16F16_TN().layout_B)
    ((4,8),2):((16,1),8)
    """
    return _sm80("SM80_16x8x8_F16F16F16F16_TN", 8, _C_16x8, _B_8x8_F16,
                 "f16", "f16", "f16", "f16")


def SM80_16x8x8_F32TF32TF32F32_TN() -> MMAAtom:
    """``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`` (PTX ISA 9.7.14.5.7): tf32 A
    (four .b32 registers, rows g and g+8 alternate first), tf32 B (two registers), f32 C.

    >>> print(SM80_16x8x8_F32TF32TF32F32_TN().layout_A)
    ((4,8),(2,2)):((16,1),(8,64))
    """
    return _sm80("SM80_16x8x8_F32TF32TF32F32_TN", 8, _A_16x8_TF32, _B_8x8_TF32,
                 "tf32", "tf32", "f32", "f32")


# --- SM90 warpgroup MMA (wgmma) ---------------------------------------------------------------
#
# A warpgroup (128 threads, 4 warps) computes D (64 x N) = A (64 x K) B + D with both operands in
# shared memory (the "SS" forms): no thread owns an element of A or B, so their layouts give
# every thread the whole tile (thread stride 0), as CuTe's GMMA::ABLayout. The accumulator
# fragment, from the PTX ISA's wgmma register fragments ("Register Fragments: Matrix D",
# 9.7.15.5.1 in PTX ISA 8.x): warp w of the warpgroup owns rows 16w..16w+15; lane
# l = t + 4g (t = l % 4, g = l // 4) holds, of every 8-column block j, the elements
#   d[4j + 0] = (16w + g,     8j + 2t),  d[4j + 1] = (16w + g,     8j + 2t + 1),
#   d[4j + 2] = (16w + g + 8, 8j + 2t),  d[4j + 3] = (16w + g + 8, 8j + 2t + 1).
# As (thr, val) -> m + 64 n with thr = (t, g, w), val = (column pair, row half, block):
#   m + 64n = 128t + g + 16w + 64v0 + 8v1 + 512v2  -> ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))
_WARPGROUP = Layout(128)
GMMA_MAJORS = ("K", "MN")


def _gmma_ab(mn, k):
    return Layout((128, (mn, k)), (0, (1, mn)))


def _gmma_c(n):
    return Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))


def _sm90(name, k, n, a, b, a_major, b_major):
    if not (isinstance(n, int) and 8 <= n <= 256 and n % 8 == 0):
        raise LayoutError(f"{name}: N must be a multiple of 8 in 8..256, got {n!r}")
    for what, major in (("A", a_major), ("B", b_major)):
        if major not in GMMA_MAJORS:
            raise LayoutError(f"{name}: the major of {what} must be one of {GMMA_MAJORS}, "
                              f"got {major!r}")
        if major == "MN" and a not in ("bf16", "f16"):
            raise LayoutError(f"{name}: wgmma transposes only 16-bit operands; a {a} {what} "
                              "must be K-major in shared memory")
    shape = f"m64n{n}k{k}"
    atom = MMAAtom(name.replace("xN", f"x{n}"), shape,
                   f"wgmma.mma_async.sync.aligned.{shape}.f32.{a}.{b}", (64, n, k),
                   _WARPGROUP, _gmma_ab(64, k), _gmma_ab(n, k), _gmma_c(n), a, b, "f32", "f32")
    atom.a_major, atom.b_major = a_major, b_major
    return atom


def _sm90_fp8(a, b):
    name = f"SM90_64xNx32_F32{a.upper()}{b.upper()}_SS_TN"

    def atom(n: int) -> MMAAtom:
        return _sm90(name, 32, n, a, b, "K", "K")
    atom.__name__ = atom.__qualname__ = name
    atom.__doc__ = (f"``wgmma.mma_async.sync.aligned.m64n{{n}}k32.f32.{a}.{b}``: a 64x32 {a} A "
                    f"and a 32xN {b} B (given as (N, K)), both K-major in shared memory (the "
                    f"TN form: wgmma transposes no 8-bit operand), into a 64xN f32 "
                    f"accumulator.")
    return atom


SM90_64xNx32_F32E4M3E4M3_SS_TN = _sm90_fp8("e4m3", "e4m3")
SM90_64xNx32_F32E4M3E5M2_SS_TN = _sm90_fp8("e4m3", "e5m2")
SM90_64xNx32_F32E5M2E4M3_SS_TN = _sm90_fp8("e5m2", "e4m3")
SM90_64xNx32_F32E5M2E5M2_SS_TN = _sm90_fp8("e5m2", "e5m2")
# (A's type, B's type) -> the FP8 atom
SM90_FP8_ATOMS = {("e4m3", "e4m3"): SM90_64xNx32_F32E4M3E4M3_SS_TN,
                  ("e4m3", "e5m2"): SM90_64xNx32_F32E4M3E5M2_SS_TN,
                  ("e5m2", "e4m3"): SM90_64xNx32_F32E5M2E4M3_SS_TN,
                  ("e5m2", "e5m2"): SM90_64xNx32_F32E5M2E5M2_SS_TN}


def SM90_64xNx16_F32BF16BF16_SS(n: int, a_major: str = "K", b_major: str = "K") -> MMAAtom:
    """``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16`` with A and B in shared memory:
    a warpgroup (128 threads) multiplies a 64x16 bf16 A by a 16xN bf16 B (given as (N, K))
    into a 64xN f32 accumulator, N a multiple of 8 in 8..256. ``a_major`` / ``b_major``: "K"
    (K contiguous in shared memory) or "MN" (the instruction's transpose bit). Each thread
    holds N/2 accumulators; A and B belong to no thread (thread stride 0).

    >>> atom = SM90_64xNx16_F32BF16BF16_SS(64)
    >>> atom.name, atom.num_threads, str(atom.layout_A)
    ('SM90_64x64x16_F32BF16BF16_SS', 128, '(128,(64,16)):(0,(1,64))')
    >>> print(atom.layout_C)
    ((4,8,4),(2,2,8)):((128,1,16),(64,8,512))
    """
    return _sm90("SM90_64xNx16_F32BF16BF16_SS", 16, n, "bf16", "bf16", a_major, b_major)


def SM90_64xNx16_F32F16F16_SS(n: int, a_major: str = "K", b_major: str = "K") -> MMAAtom:
    """``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16``: as the bf16 form, f16 inputs."""
    return _sm90("SM90_64xNx16_F32F16F16_SS", 16, n, "f16", "f16", a_major, b_major)


def SM90_64xNx8_F32TF32TF32_SS(n: int, a_major: str = "K", b_major: str = "K") -> MMAAtom:
    """``wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32``: a 64x8 tf32 A and an 8xN tf32
    B, both K-major in shared memory (wgmma transposes only 16-bit types: an MN-major tf32
    operand raises LayoutError)."""
    return _sm90("SM90_64xNx8_F32TF32TF32_SS", 8, n, "tf32", "tf32", a_major, b_major)
