"""numba typing and lowering of :func:`gemm.cute.dynamic_range`: a uint32 range whose
iterator is one counter. ``next`` compares it with the stop, yields it and adds the step
(a step other than 1 stops the loop where the sum would wrap past 2**32)."""

from llvmlite import ir
from numba.cuda import cgutils, types
from numba.cuda.core.errors import TypingError
from numba.cuda.core.imputils import RefType, impl_ret_untracked, iternext_impl
from numba.cuda.extending import lower_builtin, models, register_model, type_callable

from gemm.cute import _python as cute    # the objects gemm.cute re-exports

__all__ = []


class RangeIterType(types.SimpleIteratorType):
    """The iterator: a pointer to the counter, the stop and the step (uint32)."""

    def __init__(self, unit):
        self.unit = unit
        super().__init__(f"dynamic_range_iter(unit={unit})", types.uint32)


class RangeType(types.SimpleIterableType):
    """``dynamic_range(...)``: start, stop and step (uint32); ``unit``: the step is 1."""

    def __init__(self, unit):
        self.unit = unit
        super().__init__(f"dynamic_range(unit={unit})", RangeIterType(unit))


@register_model(RangeType)
class _RangeModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [(n, types.uint32) for n in ("start", "stop", "step")])


@register_model(RangeIterType)
class _RangeIterModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("at", types.EphemeralPointer(types.uint32)),
                                        ("stop", types.uint32), ("step", types.uint32)])


def _unit(step):
    return step is None or (isinstance(step, types.IntegerLiteral) and step.literal_value == 1)


@type_callable(cute.dynamic_range)
def _type_dynamic_range(context):
    def typer(start, stop=None, step=None):
        for name, v in (("start", start), ("stop", stop), ("step", step)):
            if v is not None and not isinstance(v, types.Integer):
                raise TypingError(f"dynamic_range: {name} must be an integer, got {v}")
        return RangeType(_unit(step))
    return typer


@lower_builtin(cute.dynamic_range, types.Integer)
@lower_builtin(cute.dynamic_range, types.Integer, types.Integer)
@lower_builtin(cute.dynamic_range, types.Integer, types.Integer, types.Integer)
def _lower_dynamic_range(context, builder, sig, args):
    u32 = [context.cast(builder, v, t, types.uint32) for v, t in zip(args, sig.args)]
    if len(u32) == 1:
        u32.insert(0, ir.Constant(ir.IntType(32), 0))
    start, stop, step = (u32 + [ir.Constant(ir.IntType(32), 1)])[:3]
    r = cgutils.create_struct_proxy(sig.return_type)(context, builder)
    r.start, r.stop, r.step = start, stop, step
    return impl_ret_untracked(context, builder, sig.return_type, r._getvalue())


@lower_builtin("getiter", RangeType)
def _getiter(context, builder, sig, args):
    r = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=args[0])
    it = cgutils.create_struct_proxy(sig.return_type)(context, builder)
    it.at = cgutils.alloca_once_value(builder, r.start)
    it.stop, it.step = r.stop, r.step
    return impl_ret_untracked(context, builder, sig.return_type, it._getvalue())


@lower_builtin("iternext", RangeIterType)
@iternext_impl(RefType.UNTRACKED)
def _iternext(context, builder, sig, args, result):
    it = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=args[0])
    at = builder.load(it.at)
    valid = builder.icmp_unsigned("<", at, it.stop)
    result.set_valid(valid)
    result.yield_(at)           # (read only where valid: both stored unconditionally, so
    after = builder.add(at, it.step)    # that LLVM keeps one counter)
    if not sig.args[0].unit:
        after = builder.select(builder.icmp_unsigned("<", after, at), it.stop, after)
    builder.store(after, it.at)
