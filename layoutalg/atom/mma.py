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

import numpy as np

from ..layout import Layout

__all__ = [
    "MMAAtom", "UniversalFMA", "SM80_16x8x16_F32BF16BF16F32_TN", "SM80_16x8x16_F32F16F16F32_TN",
    "SM80_16x8x16_F16F16F16F16_TN", "SM80_16x8x8_F16F16F16F16_TN",
    "SM80_16x8x8_F32TF32TF32F32_TN", "round_to_type", "storage_dtype", "encode", "decode",
]


def storage_dtype(type_name):
    """The numpy dtype that holds values of a type on the CPU: ``f16`` in float16, ``bf16``
    as its raw 16 bits in uint16 (numpy has no bfloat16; GPU kernels move the same bits),
    ``tf32``/``f32`` in float32, else the numpy dtype of that name."""
    return {"f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16),
            "tf32": np.dtype(np.float32), "f32": np.dtype(np.float32),
            "f64": np.dtype(np.float64)}.get(type_name) or np.dtype(type_name)


def encode(x, type_name):
    """Numbers -> the storage of ``type_name`` (see storage_dtype), rounding as a conversion
    instruction does: ``f16`` and ``bf16`` round to nearest even; ``tf32`` rounds to nearest
    with ties away from zero (``cvt.rna.tf32.f32``) and stays in float32. Data already in the
    storage dtype is returned as is.

    >>> encode(np.array([1.0, -2.0]), "bf16").tolist()
    [16256, 49152]
    """
    x = np.asarray(x)
    st = storage_dtype(type_name)
    if x.dtype == st:
        return x
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


def decode(x, type_name):
    """The storage of ``type_name`` -> its numbers (float64 for floating types)."""
    x = np.asarray(x)
    if type_name == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if x.dtype.kind == "f":
        return x.astype(np.float64)
    return x


def round_to_type(x, type_name):
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
            image = {lay(i) for i in range(lay.size)}
            if image != set(range(extent)):
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


def UniversalFMA(a_type=np.float32, b_type=None, c_type=None):
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


def SM80_16x8x16_F32BF16BF16F32_TN():
    """``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`` (PTX ISA 9.7.14.5.8): a warp
    multiplies a 16x16 bf16 A (row-major, "T") by a 16x8 bf16 B (column-major, "N"; given as
    8x16 (N, K)) into a 16x8 f32 C. A: 8 values per thread, B: 4, C: 4."""
    return _sm80("SM80_16x8x16_F32BF16BF16F32_TN", 16, _A_16x16, _B_8x16,
                 "bf16", "bf16", "f32", "f32")


def SM80_16x8x16_F32F16F16F32_TN():
    """``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` (PTX ISA 9.7.14.5.8): f16 inputs,
    f32 accumulators; layouts as SM80_16x8x16_F32BF16BF16F32_TN."""
    return _sm80("SM80_16x8x16_F32F16F16F32_TN", 16, _A_16x16, _B_8x16,
                 "f16", "f16", "f32", "f32")


def SM80_16x8x16_F16F16F16F16_TN():
    """``mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16`` (PTX ISA 9.7.14.5.8): f16 inputs
    and f16 accumulators (C in two .f16x2 registers, same element layout as f32)."""
    return _sm80("SM80_16x8x16_F16F16F16F16_TN", 16, _A_16x16, _B_8x16,
                 "f16", "f16", "f16", "f16")


def SM80_16x8x8_F16F16F16F16_TN():
    """``mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16`` (PTX ISA 9.7.14.5.7): a 16x8 f16 A
    (4 values per thread), an 8x8 f16 B (2 values), a 16x8 f16 C (4 values).

    >>> print(SM80_16x8x8_F16F16F16F16_TN().layout_B)
    ((4,8),2):((16,1),8)
    """
    return _sm80("SM80_16x8x8_F16F16F16F16_TN", 8, _C_16x8, _B_8x8_F16,
                 "f16", "f16", "f16", "f16")


def SM80_16x8x8_F32TF32TF32F32_TN():
    """``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`` (PTX ISA 9.7.14.5.7): tf32 A
    (four .b32 registers, rows g and g+8 alternate first), tf32 B (two registers), f32 C.

    >>> print(SM80_16x8x8_F32TF32TF32F32_TN().layout_A)
    ((4,8),(2,2)):((16,1),(8,64))
    """
    return _sm80("SM80_16x8x8_F32TF32TF32F32_TN", 8, _A_16x8_TF32, _B_8x8_TF32,
                 "tf32", "tf32", "f32", "f32")
