"""numba typing and lowering of :mod:`gemm.cute`'s Hopper wgmma: ``gemm(tiled_mma, acc, A, B[,
accumulate])`` for an SM90 GMMA atom, one ``wgmma.mma_async`` per (k, m, n) block of
:func:`gemm.cute._gmma.wgmma_plan`, each descriptor its static bits plus the block's shared
address >> 4."""

from llvmlite import ir
from numba.cuda import types
from numba.cuda.core.errors import TypingError
from numba.cuda.extending import lower_builtin

from gemm.cute import _python as cute    # the objects gemm.cute re-exports
from gemm.cute._gmma import START_MASK, is_gmma, wgmma_plan
from gemm.cute._numba import I32, StaticType, TensorType, _fields, _pointer, _to_u32
from gemm.arch import sm90
from gemm.arch._lowering import I64, shared_base

__all__ = ["is_wgmma_call", "type_wgmma"]


def is_wgmma_call(args):
    """Whether ``gemm(*args)`` (numba types) names a tiled MMA of a GMMA atom."""
    return (len(args) in (4, 5) and isinstance(args[0], StaticType)
            and hasattr(args[0].value, "atom") and is_gmma(args[0].value.atom))


def _plan(tiled_ty, C, A, B):
    atom = tiled_ty.value.atom
    return wgmma_plan(atom, C.layout, A.layout, A.swizzle, A.dtype.bitwidth, B.layout,
                      B.swizzle, B.dtype.bitwidth)


def type_wgmma(tiled, C, A, B, accumulate=None):
    """The type of ``gemm(tiled_mma, acc, A, B[, accumulate])`` for a GMMA atom, or a
    TypingError naming what is wrong."""
    name = tiled.value.atom.name
    for what, t in (("acc", C), ("A", A), ("B", B)):
        if not (isinstance(t, TensorType) and not t.coords):
            raise TypingError(f"gemm: {name}'s {what} must be a data tensor, got {t}")
        if t.dyn:
            raise TypingError(f"gemm: {name}'s {what} needs a static layout, got {t.layout}")
    if C.dtype != types.float32 or C.space is not None or C.swizzle is not None:
        raise TypingError(f"gemm: {name} accumulates into a float32 register fragment, got {C}")
    for what, t in (("A", A), ("B", B)):
        want = types.Float if tiled.value.atom.a_type == "tf32" else types.Integer
        if not isinstance(t.dtype, want):
            raise TypingError(f"gemm: {name} reads {what} from shared memory as "
                              f"{'float32' if want is types.Float else '16-bit integers'} "
                              f"(bf16 / f16 bits), got {t.dtype}")
    if accumulate is not None and not isinstance(accumulate, (types.Integer, types.Boolean)):
        raise TypingError(f"gemm: accumulate must be an integer or a bool, got {accumulate}")
    try:
        _plan(tiled, C, A, B)
    except ValueError as e:
        raise TypingError(str(e)) from None
    return types.none


def _start(context, builder, ty, value):
    """i64: a descriptor's start field (shared address >> 4) of the tensor's own offset."""
    fields = _fields(context, builder, ty, value)
    base, _ = shared_base(context, builder, ty.array, fields["array"])
    at = builder.add(base, builder.mul(fields["offset"],
                                       ir.Constant(I32, ty.dtype.bitwidth // 8)))
    field = builder.and_(builder.lshr(at, ir.Constant(I32, 4)), ir.Constant(I32, START_MASK))
    return builder.zext(field, I64)


@lower_builtin(cute.gemm, StaticType, TensorType, TensorType, TensorType, types.Any)
def lower_wgmma(context, builder, sig, args):
    """One wgmma per (k, m, n): descriptors as the plan's bits plus the block's start."""
    C, A, B = sig.args[1:4]
    p = _plan(sig.args[0], C, A, B)
    start_a, start_b = (_start(context, builder, t, v) for t, v in ((A, args[2]),
                                                                    (B, args[3])))
    one = ir.Constant(I32, 1)
    first_scale = one
    if len(args) == 5:
        flag = context.cast(builder, args[4], sig.args[4], types.boolean)
        first_scale = builder.zext(flag, I32)
    m_blocks, n_blocks, k_blocks = p.blocks
    for kk in range(k_blocks):
        for i in range(m_blocks):
            for j in range(n_blocks):
                da = builder.add(start_a, ir.Constant(I64, p.desc_a + (p.a_start[i][kk] >> 4)))
                db = builder.add(start_b, ir.Constant(I64, p.desc_b + (p.b_start[j][kk] >> 4)))
                acc = [_pointer(context, builder, C, args[1],
                                ir.Constant(I32, p.c_first[i][j] + v)) for v in range(p.n // 2)]
                sm90.emit_wgmma(builder, p.op, p.n, p.trans_a, p.trans_b, acc, da, db,
                                first_scale if kk == 0 else one)
    return context.get_dummy_value()
