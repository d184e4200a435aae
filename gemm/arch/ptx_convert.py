"""Conversions and packing of bf16, f16, tf32 and FP8 values as numba-cuda intrinsics.

16-bit values travel as uint16 bit patterns (numba has no bf16 arrays), two to a uint32
register with the element of lower index in the low half. ``cvt.rn.bf16x2.f32 d, a, b`` puts
``a`` in the *upper* half; the functions here take ``(lo, hi)`` and pass them in PTX's order.
FP8 pairs travel as uint16, the element of lower index in the low byte. Part of gemm.arch.ptx
(re-exported there); cvt to bf16 and tf32 needs sm_80, to FP8 sm_89.
"""

from llvmlite import ir
from numba.cuda import types
from numba.cuda.extending import intrinsic

from gemm.arch._lowering import (F32, I16, I32, asm, cast_args, check_float,
                                 check_int, to_int)

__all__ = [
    "pack_b16x2", "pack_bf16x2", "pack_f16x2", "unpack_b16x2",
    "cvt_rn_bf16x2_f32", "cvt_rn_f16x2_f32", "cvt_rn_bf16_f32", "cvt_rn_f16_f32",
    "cvt_rna_tf32_f32", "bf16_to_f32", "f16_to_f32", "bf16x2_to_f32", "f16x2_to_f32",
    "float_as_uint32", "uint32_as_float",
    "cvt_rn_satfinite_e4m3x2_f32", "cvt_rn_satfinite_e5m2x2_f32",
]


@intrinsic
def pack_b16x2(typingctx, lo, hi):
    """Two 16-bit patterns in one uint32: ``lo | hi << 16`` (inputs truncated to 16 bits)."""
    check_int("pack_b16x2", "lo", lo)
    check_int("pack_b16x2", "hi", hi)

    def codegen(context, builder, sig, args):
        lo16, hi16 = (builder.zext(to_int(builder, t, a, 16), I32)
                      for t, a in zip(sig.args, args))
        return builder.or_(lo16, builder.shl(hi16, ir.Constant(I32, 16)))
    return types.uint32(lo, hi), codegen


pack_bf16x2 = pack_b16x2
pack_f16x2 = pack_b16x2


@intrinsic
def unpack_b16x2(typingctx, x):
    """The two 16-bit halves of a uint32, low first: ``(x & 0xffff, x >> 16)`` as uint16."""
    check_int("unpack_b16x2", "x", x)
    restype = types.UniTuple(types.uint16, 2)

    def codegen(context, builder, sig, args):
        v = to_int(builder, sig.args[0], args[0], 32)
        lo = builder.trunc(v, I16)
        hi = builder.trunc(builder.lshr(v, ir.Constant(I32, 16)), I16)
        return context.make_tuple(builder, restype, [lo, hi])
    return restype(x), codegen


def _make_cvt_pair(ptx_type, satfinite=False):
    """``cvt.rn.{ptx_type}x2.f32`` (bf16, f16: a uint32) or, ``satfinite``,
    ``cvt.rn.satfinite.{ptx_type}x2.f32`` (e4m3, e5m2: a uint16)."""
    rounding = "rn.satfinite" if satfinite else "rn"
    op = f"cvt_{rounding.replace('.', '_')}_{ptx_type}x2_f32"
    restype, llvm_type, register = (types.uint16, I16, "h") if satfinite else (types.uint32,
                                                                                I32, "r")

    def impl(typingctx, lo, hi):
        check_float(op, "lo", lo)
        check_float(op, "hi", hi)

        def codegen(context, builder, sig, args):
            lo32, hi32 = cast_args(context, builder, sig, args, (types.float32,) * 2)
            # cvt.rn.X2.f32 d, a, b puts a in the upper half: pass hi first.
            return asm(builder, llvm_type, f"cvt.{rounding}.{ptx_type}x2.f32 $0, $1, $2;",
                       f"={register},f,f", [hi32, lo32], attrs=("readnone",))
        return restype(lo, hi), codegen

    impl.__name__ = impl.__qualname__ = op
    wrapped = intrinsic(impl)
    wrapped.__doc__ = (f"``cvt.{rounding}.{ptx_type}x2.f32``: two f32 rounded to nearest-even "
                       f"{ptx_type}, packed with ``lo`` in the low half, ``hi`` in the high half"
                       + (" of a uint16; a magnitude past the largest finite value is clamped "
                          "to it, NaN stays NaN." if satfinite else "."))
    return wrapped


cvt_rn_bf16x2_f32 = _make_cvt_pair("bf16")
cvt_rn_f16x2_f32 = _make_cvt_pair("f16")
cvt_rn_satfinite_e4m3x2_f32 = _make_cvt_pair("e4m3", satfinite=True)
cvt_rn_satfinite_e5m2x2_f32 = _make_cvt_pair("e5m2", satfinite=True)


def _make_cvt_one(ptx_type):
    op = f"cvt_rn_{ptx_type}_f32"

    def impl(typingctx, x):
        check_float(op, "x", x)

        def codegen(context, builder, sig, args):
            (x32,) = cast_args(context, builder, sig, args, (types.float32,))
            return asm(builder, I16, f"cvt.rn.{ptx_type}.f32 $0, $1;", "=h,f", [x32],
                       attrs=("readnone",))
        return types.uint16(x), codegen

    impl.__name__ = impl.__qualname__ = op
    wrapped = intrinsic(impl)
    wrapped.__doc__ = f"``cvt.rn.{ptx_type}.f32``: f32 rounded to nearest-even, as uint16 bits."
    return wrapped


cvt_rn_bf16_f32 = _make_cvt_one("bf16")
cvt_rn_f16_f32 = _make_cvt_one("f16")


@intrinsic
def cvt_rna_tf32_f32(typingctx, x):
    """``cvt.rna.tf32.f32``: f32 rounded to tf32 (nearest, ties away), as uint32 f32 bits."""
    check_float("cvt_rna_tf32_f32", "x", x)

    def codegen(context, builder, sig, args):
        (x32,) = cast_args(context, builder, sig, args, (types.float32,))
        return emit_cvt_rna_tf32(builder, x32)
    return types.uint32(x), codegen


def emit_cvt_rna_tf32(builder, x32):
    """The i32 result of ``cvt.rna.tf32.f32`` on an LLVM float (for other intrinsics)."""
    return asm(builder, I32, "cvt.rna.tf32.f32 $0, $1;", "=r,f", [x32], attrs=("readnone",))


def _bf16_bits_to_f32(builder, bits32):
    return builder.bitcast(bits32, F32)


def _f16_to_f32(builder, bits16):
    return asm(builder, F32, "cvt.f32.f16 $0, $1;", "=f,h", [bits16], attrs=("readnone",))


@intrinsic
def bf16_to_f32(typingctx, x):
    """A bf16 bit pattern (uint16) as float32: exact, ``bits << 16``."""
    check_int("bf16_to_f32", "x", x)

    def codegen(context, builder, sig, args):
        v = builder.zext(to_int(builder, sig.args[0], args[0], 16), I32)
        return _bf16_bits_to_f32(builder, builder.shl(v, ir.Constant(I32, 16)))
    return types.float32(x), codegen


@intrinsic
def f16_to_f32(typingctx, x):
    """An f16 bit pattern (uint16) as float32 (``cvt.f32.f16``, exact)."""
    check_int("f16_to_f32", "x", x)

    def codegen(context, builder, sig, args):
        return _f16_to_f32(builder, to_int(builder, sig.args[0], args[0], 16))
    return types.float32(x), codegen


@intrinsic
def bf16x2_to_f32(typingctx, x):
    """A register of two packed bf16 as two float32, low half first."""
    check_int("bf16x2_to_f32", "x", x)
    restype = types.UniTuple(types.float32, 2)

    def codegen(context, builder, sig, args):
        v = to_int(builder, sig.args[0], args[0], 32)
        lo = _bf16_bits_to_f32(builder, builder.shl(v, ir.Constant(I32, 16)))
        hi = _bf16_bits_to_f32(builder, builder.and_(v, ir.Constant(I32, 0xFFFF0000)))
        return context.make_tuple(builder, restype, [lo, hi])
    return restype(x), codegen


@intrinsic
def f16x2_to_f32(typingctx, x):
    """A register of two packed f16 as two float32, low half first."""
    check_int("f16x2_to_f32", "x", x)
    restype = types.UniTuple(types.float32, 2)

    def codegen(context, builder, sig, args):
        v = to_int(builder, sig.args[0], args[0], 32)
        lo = _f16_to_f32(builder, builder.trunc(v, I16))
        hi = _f16_to_f32(builder, builder.trunc(builder.lshr(v, ir.Constant(I32, 16)), I16))
        return context.make_tuple(builder, restype, [lo, hi])
    return restype(x), codegen


@intrinsic
def float_as_uint32(typingctx, x):
    """The bit pattern of a float32 as uint32 (no conversion)."""
    check_float("float_as_uint32", "x", x)

    def codegen(context, builder, sig, args):
        (x32,) = cast_args(context, builder, sig, args, (types.float32,))
        return builder.bitcast(x32, I32)
    return types.uint32(x), codegen


@intrinsic
def uint32_as_float(typingctx, x):
    """A uint32 bit pattern as float32 (no conversion)."""
    check_int("uint32_as_float", "x", x)

    def codegen(context, builder, sig, args):
        return builder.bitcast(to_int(builder, sig.args[0], args[0], 32), F32)
    return types.float32(x), codegen
