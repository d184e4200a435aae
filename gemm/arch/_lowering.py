"""Typing and lowering helpers shared by the intrinsics of gemm.arch (LLVM IR through llvmlite).

Typing checks raise numba TypingErrors that name the operation and the operand; the codegen
helpers compute element pointers, 32-bit ``.shared`` and 64-bit ``.global`` addresses, and emit
inline PTX (``llvmlite.ir.InlineAsm``). Internal to gemm.arch.
"""

from llvmlite import ir
from numba.cuda import types
from numba.cuda.core.errors import TypingError
from numba.cuda.extending import intrinsic

I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
VOID = ir.VoidType()
SHARED, GLOBAL = 3, 1     # NVVM address spaces


# --- typing ------------------------------------------------------------------------------

def itemsize(dtype):
    bits = getattr(dtype, "bitwidth", None)
    if not isinstance(dtype, (types.Integer, types.Float)) or bits is None:
        return None
    return bits // 8


def check_array(op, name, ty, itemsizes=None):
    if not isinstance(ty, types.Array):
        raise TypingError(f"{op}: {name} must be an array, got {ty}")
    if ty.ndim != 1 and ty.layout != "C":
        raise TypingError(
            f"{op}: {name} must be 1-D or C-contiguous (the index is a flat element index), "
            f"got {ty}")
    size = itemsize(ty.dtype)
    if size is None:
        raise TypingError(f"{op}: {name} must hold integers or floats, got {ty.dtype}")
    if itemsizes is not None and size not in itemsizes:
        want = " or ".join(f"{8 * s}-bit" for s in itemsizes)
        raise TypingError(f"{op}: {name} must have {want} elements, got {ty.dtype}")
    return size


def check_int(op, name, ty):
    if not isinstance(ty, types.Integer):
        raise TypingError(f"{op}: {name} must be an integer, got {ty}")


def check_float(op, name, ty):
    if not isinstance(ty, types.Float):
        raise TypingError(f"{op}: {name} must be a float, got {ty}")


def literal_int(op, name, ty, allowed=None):
    if not isinstance(ty, types.IntegerLiteral):
        raise TypingError(
            f"{op}: {name} must be a compile-time integer literal (a constant, closure variable "
            f"or global), got {ty}")
    value = ty.literal_value
    if allowed is not None and value not in allowed:
        raise TypingError(f"{op}: {name} must be one of {allowed}, got {value}")
    return value


# --- codegen -----------------------------------------------------------------------------

def to_int(builder, ty, value, bits):
    """An integer of type ``ty`` as an LLVM integer of ``bits`` bits (sign- or zero-extended)."""
    width = value.type.width
    if width > bits:
        return builder.trunc(value, ir.IntType(bits))
    if width < bits:
        extend = builder.sext if ty.signed else builder.zext
        return extend(value, ir.IntType(bits))
    return value


def item_pointer(context, builder, aryty, ary, idxty, idx):
    """Generic pointer to element ``idx`` (flat index; a 1-D array's stride is honoured)."""
    arr = context.make_array(aryty)(context, builder, ary)
    i = to_int(builder, idxty, idx, 64)
    if aryty.ndim == 1 and aryty.layout not in "CF":
        stride = builder.extract_value(arr.strides, 0)
        raw = builder.gep(builder.bitcast(arr.data, ir.IntType(8).as_pointer()),
                          [builder.mul(i, stride)])
        return builder.bitcast(raw, arr.data.type)
    return builder.gep(arr.data, [i])


def shared_base(context, builder, aryty, ary):
    """(32-bit .shared address of element 0, bytes per element step) of a shared array: the
    base cast to the shared window; element i is at ``base + i * step``."""
    arr = context.make_array(aryty)(context, builder, ary)
    pointee = arr.data.type.pointee
    base = builder.ptrtoint(builder.addrspacecast(arr.data, pointee.as_pointer(SHARED)), I32)
    if aryty.ndim == 1 and aryty.layout not in "CF":
        step = builder.trunc(builder.extract_value(arr.strides, 0), I32)
    else:
        step = ir.Constant(I32, itemsize(aryty.dtype))
    return base, step


def shared_address(context, builder, aryty, ary, idxty, idx):
    """32-bit .shared address of element ``idx``: base cast to the shared window + idx*stride."""
    base, step = shared_base(context, builder, aryty, ary)
    return builder.add(base, builder.mul(to_int(builder, idxty, idx, 32), step))


def array_data(context, builder, aryty, ary):
    """The data pointer of a C-contiguous array (element i is ``gep(data, [i])``)."""
    return context.make_array(aryty)(context, builder, ary).data


def global_address(context, builder, aryty, ary, idxty, idx):
    """64-bit .global address of element ``idx`` (cvta.to.global of the generic pointer)."""
    ptr = item_pointer(context, builder, aryty, ary, idxty, idx)
    return builder.ptrtoint(builder.addrspacecast(ptr, ptr.type.pointee.as_pointer(GLOBAL)), I64)


def asm(builder, ret, text, constraints, args, side_effect=False, attrs=()):
    fnty = ir.FunctionType(ret, [a.type for a in args])
    return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=side_effect), args,
                        attrs=attrs)


def unpack(builder, value, n):
    if n == 1:
        return [value]
    return [builder.extract_value(value, k) for k in range(n)]


def reg_list(n, first=0):
    """``$first, ..., $(first + n - 1)``: inline-asm operand references."""
    return ", ".join(f"${first + k}" for k in range(n))


def cast_args(context, builder, sig, args, targets):
    return [context.cast(builder, a, t, u) for a, t, u in zip(args, sig.args, targets)]


# --- whole instructions -----------------------------------------------------------------

def fence_intrinsic(name, text, doc):
    """An intrinsic ``name()`` emitting the argument-less instruction ``text`` (ordered with
    memory: a ``~{memory}`` clobber)."""
    def impl(typingctx):
        def codegen(context, builder, sig, args):
            asm(builder, VOID, text, "~{memory}", [], side_effect=True)
            return context.get_dummy_value()
        return types.none(), codegen
    impl.__name__ = impl.__qualname__ = name
    fn = intrinsic(impl)
    fn.__doc__ = doc
    return fn


def wait_group_intrinsic(name, mnemonic, doc):
    """An intrinsic ``name(n)`` emitting ``{mnemonic} n;`` for a literal ``n >= 0``."""
    def impl(typingctx, n):
        pending = literal_int(name, "n", n)
        if pending < 0:
            raise TypingError(f"{name}: n must be >= 0, got {pending}")

        def codegen(context, builder, sig, args):
            asm(builder, VOID, f"{mnemonic} {pending};", "~{memory}", [], side_effect=True)
            return context.get_dummy_value()
        return types.none(n), codegen
    impl.__name__ = impl.__qualname__ = name
    fn = intrinsic(impl)
    fn.__doc__ = doc
    return fn
