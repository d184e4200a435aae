"""numba typing and lowering of :mod:`gemm.cute`: LayoutType, TensorType and their operations.

A LayoutType carries its layout; its data model is an empty struct, so a layout costs nothing
at run time, as an argument or a constant. The offset of a coordinate is emitted as uint32
LLVM IR from the static shape and stride (CuTe's crd2idx); LLVM folds the constants.
A TensorType is (the array, a uint32 offset) with a static layout.
"""

import operator

from llvmlite import ir
from numba.cuda import types
from numba.cuda.core.errors import TypingError
from numba.cuda.core.imputils import lower_constant
from numba.cuda.extending import (lower_builtin, models, register_model, type_callable,
                                  typeof_impl)
from numba.cuda.typing import signature
from numba.cuda import cgutils

from layoutalg import Layout
from layoutalg.int_tuple import is_tuple, product
from layoutalg.gemm import cute
from layoutalg.gemm.arch._lowering import I32, item_pointer

__all__ = ["LayoutType", "TensorType", "StaticType"]


class LayoutType(types.Callable):
    """The numba type of one static layout; calling it with an index or a coordinate gives
    the offset (uint32)."""

    def __init__(self, layout):
        self.layout = cute._static(layout)
        super().__init__(name=f"Layout[{layout}]")

    @property
    def key(self):
        return self.layout

    def get_call_type(self, context, args, kws):
        if kws:
            raise TypingError(f"{self.layout}: a layout is called without keywords")
        crd = args[0] if len(args) == 1 else types.Tuple(args)
        _check_coordinate(crd, self.layout.shape, self.layout)
        return signature(types.uint32, *args, recvr=self)

    def get_call_signatures(self):
        return [], True

    def get_impl_key(self, sig):
        return type(self)


def _check_coordinate(ty, shape, layout):
    """TypingError unless ``ty`` (an integer, or a tuple congruent to ``shape`` down to
    integers) is a coordinate of ``shape``."""
    if isinstance(ty, types.Integer):
        return
    if isinstance(ty, types.BaseTuple) and is_tuple(shape) and len(ty) == len(shape):
        for t, s in zip(ty.types, shape):
            _check_coordinate(t, s, layout)
        return
    raise TypingError(f"{ty} is not a coordinate of the layout {layout}: an integer, or a "
                      f"tuple of them congruent to its shape")


@typeof_impl.register(Layout)
def _typeof_layout(value, context):
    try:
        return LayoutType(value)
    except TypeError:
        return None             # a symbolic layout is not a kernel constant


@register_model(LayoutType)
class _LayoutModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [])


@lower_constant(LayoutType)
def _layout_constant(context, builder, ty, value):
    return ir.Constant(ir.LiteralStructType([]), [])


def _to_u32(context, builder, ty, value):
    return context.cast(builder, value, ty, types.uint32)


def _crd2idx(context, builder, ty, value, shape, stride):
    """uint32 IR of the offset of coordinate ``value`` (numba type ``ty``) in (shape,
    stride): an integer is an index into the mode, colexicographic over its sub-modes (the
    last takes the rest), a tuple one coordinate per sub-mode."""
    if isinstance(ty, types.Integer):
        index = _to_u32(context, builder, ty, value)
        if not is_tuple(shape):
            return builder.mul(index, ir.Constant(I32, stride))
        total = ir.Constant(I32, 0)
        for k, (s, d) in enumerate(zip(shape, stride)):
            if k == len(shape) - 1:
                part = index
            else:
                n = ir.Constant(I32, int(product(s)))
                part = builder.urem(index, n)
                index = builder.udiv(index, n)
            total = builder.add(total, _crd2idx(context, builder, types.uint32, part, s, d))
        return total
    total = ir.Constant(I32, 0)
    for k, (t, s, d) in enumerate(zip(ty.types, shape, stride)):
        part = builder.extract_value(value, k)
        total = builder.add(total, _crd2idx(context, builder, t, part, s, d))
    return total


def _offset(context, builder, layout, crd_ty, crd):
    return _crd2idx(context, builder, crd_ty, crd, layout.shape, layout.stride)


@lower_builtin(LayoutType, types.Any, types.VarArg(types.Any))
def _call_layout(context, builder, sig, args):
    layout = sig.args[0].layout
    if len(args) == 2:
        return _offset(context, builder, layout, sig.args[1], args[1])
    tup = types.Tuple(sig.args[1:])
    value = context.make_tuple(builder, tup, args[1:])
    return _offset(context, builder, layout, tup, value)


def _register_constant(fn):
    """``fn(layout or tensor)`` (size, cosize) in kernels: a constant of the static layout."""
    @type_callable(fn)
    def _type(context):
        def typer(x):
            if isinstance(x, (LayoutType, TensorType)):
                return types.uint32
        return typer

    @lower_builtin(fn, types.Any)
    def _lower(context, builder, sig, args):
        return ir.Constant(I32, fn(sig.args[0].layout))


# --- tensors ----------------------------------------------------------------------------

class TensorType(types.Type):
    """A tensor: an array (1-D), a uint32 element offset and a static layout."""

    def __init__(self, array, layout):
        self.array, self.layout = array, layout
        super().__init__(name=f"Tensor[{array}, {layout}]")

    @property
    def dtype(self):
        return self.array.dtype


@register_model(TensorType)
class _TensorModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("array", fe_type.array), ("offset", types.uint32)])


def _check_array(array):
    if not (isinstance(array, types.Array) and (array.ndim == 1 or array.layout == "C")):
        raise TypingError(f"make_tensor: the engine must be a 1-D or C-contiguous array, got "
                          f"{array}")


@type_callable(cute.make_tensor)
def _type_make_tensor(context):
    def typer(array, layout, offset=None):
        _check_array(array)
        if isinstance(layout, LayoutType):
            return TensorType(array, layout.layout)
    return typer


@lower_builtin(cute.make_tensor, types.Array, LayoutType)
def _make_tensor_at_zero(context, builder, sig, args):
    return _tensor_value(context, builder, sig.return_type, args[0], ir.Constant(I32, 0))


@lower_builtin(cute.make_tensor, types.Array, LayoutType, types.Integer)
def _make_tensor_at(context, builder, sig, args):
    return _tensor_value(context, builder, sig.return_type, args[0],
                         _to_u32(context, builder, sig.args[2], args[2]))


def _tensor_value(context, builder, tensor, array, offset):
    t = cgutils.create_struct_proxy(tensor)(context, builder)
    t.array, t.offset = array, offset
    return t._getvalue()


def _element(context, builder, tensor_ty, tensor, crd_ty, crd):
    t = cgutils.create_struct_proxy(tensor_ty)(context, builder, value=tensor)
    index = builder.add(t.offset, _offset(context, builder, tensor_ty.layout, crd_ty, crd))
    return item_pointer(context, builder, tensor_ty.array, t.array, types.uint32, index)


@type_callable(operator.getitem)
def _type_getitem(context):
    def typer(tensor, crd):
        if isinstance(tensor, TensorType):
            if _has_none(crd):
                return _derive(_slice, tensor, (crd,))[0]
            _check_coordinate(crd, tensor.layout.shape, tensor.layout)
            return tensor.dtype
    return typer


@type_callable(operator.setitem)
def _type_setitem(context):
    def typer(tensor, crd, value):
        if isinstance(tensor, TensorType):
            _check_coordinate(crd, tensor.layout.shape, tensor.layout)
            return types.none
    return typer


@lower_builtin(operator.getitem, TensorType, types.Any)
def _getitem(context, builder, sig, args):
    if _has_none(sig.args[1]):
        return _lower_derived(_slice, context, builder, sig, args)
    ptr = _element(context, builder, sig.args[0], args[0], sig.args[1], args[1])
    return builder.load(ptr)


@lower_builtin(operator.setitem, TensorType, types.Any, types.Any)
def _setitem(context, builder, sig, args):
    ptr = _element(context, builder, sig.args[0], args[0], sig.args[1], args[1])
    value = context.cast(builder, args[2], sig.args[2], sig.args[0].dtype)
    builder.store(value, ptr)
    return context.get_dummy_value()


# --- tensors derived by the algebra: slices, tiles, partitions ------------------------
#
# A derived tensor's layout is static and its offset an expression of run-time integers
# (the parent's offset, block and thread indices). Both come from layoutalg's own
# functions, run at typing time on a tensor whose engine is a sympy symbol and with a
# symbol for every run-time integer argument; the offset expression is then lowered to
# uint32 IR with those symbols bound to the argument values.

_OFFSET = None          # the parent tensor's offset symbol, made on first use


def _symbol(name):
    import sympy
    return sympy.Symbol(name, integer=True, nonnegative=True)


def _has_none(ty):
    if isinstance(ty, (types.NoneType, types.Omitted)) or ty is types.none:
        return True
    return isinstance(ty, types.BaseTuple) and any(_has_none(t) for t in ty.types)


def _symbolic(ty, path, leaves):
    """The Python value standing for an argument of numba type ``ty`` at typing time:
    a symbol per run-time integer (recorded in ``leaves`` with its tuple path), None for
    None, the constant of a static layout or shape."""
    if isinstance(ty, types.Integer):
        sym = _symbol(f"a{len(leaves)}")
        leaves.append((sym, path, ty))
        return sym
    if ty is types.none or isinstance(ty, types.NoneType):
        return None
    if isinstance(ty, LayoutType):
        return ty.layout
    if isinstance(ty, StaticType):
        return ty.value
    if isinstance(ty, types.BaseTuple):
        return tuple(_symbolic(t, path + (k,), leaves) for k, t in enumerate(ty.types))
    raise TypingError(f"{ty} cannot be an argument of a tensor operation in a kernel: use "
                      f"integers, None, tuples of them, static layouts or cute.static shapes")


def _slice(tensor, crd):
    return tensor[crd]


def _derive(op, tensor_ty, arg_types):
    """(TensorType of ``op(tensor, *args)``, its offset expression, the argument leaves)."""
    from layoutalg.errors import LayoutError
    offset = _symbol("offset")
    leaves = []
    args = [_symbolic(t, (k,), leaves) for k, t in enumerate(arg_types)]
    try:
        result = op(cute.Tensor(offset, tensor_ty.layout), *args)
    except (LayoutError, TypeError, ValueError) as e:
        raise TypingError(f"{getattr(op, '__name__', op)} of a tensor of layout "
                          f"{tensor_ty.layout}: {e}") from None
    try:
        layout = cute._static(result.layout)
    except TypeError as e:
        raise TypingError(f"{getattr(op, '__name__', op)}: the result's layout depends on "
                          f"run-time values: {e}") from None
    return TensorType(tensor_ty.array, layout), result.engine, leaves, offset


def _lower_sympy(builder, expr, values):
    """uint32 IR of a non-negative integer sympy expression (sums, products with constants,
    floor of a quotient by a constant, Mod by a constant) with symbols bound in ``values``."""
    import sympy
    if expr.is_Integer:
        return ir.Constant(I32, int(expr))
    if expr.is_Symbol:
        return values[expr]
    if expr.is_Add or expr.is_Mul:
        parts = [_lower_sympy(builder, a, values) for a in expr.args]
        out = parts[0]
        for p in parts[1:]:
            out = builder.add(out, p) if expr.is_Add else builder.mul(out, p)
        return out
    if isinstance(expr, sympy.floor):
        num, den = expr.args[0].as_numer_denom()
        if den.is_Integer:
            return builder.udiv(_lower_sympy(builder, num, values), ir.Constant(I32, int(den)))
    if isinstance(expr, sympy.Mod):
        return builder.urem(_lower_sympy(builder, expr.args[0], values),
                            _lower_sympy(builder, expr.args[1], values))
    raise NotImplementedError(f"cannot lower the offset {expr} to integer arithmetic")


def _lower_derived(op, context, builder, sig, args):
    tensor_ty = sig.args[0]
    result_ty, expr, leaves, offset = _derive(op, tensor_ty, sig.args[1:])
    parent = cgutils.create_struct_proxy(tensor_ty)(context, builder, value=args[0])
    values = {offset: parent.offset}
    for sym, path, ty in leaves:
        v = args[1 + path[0]]
        for k in path[1:]:
            v = builder.extract_value(v, k)
        values[sym] = _to_u32(context, builder, ty, v)
    return _tensor_value(context, builder, result_ty, parent.array,
                         _lower_sympy(builder, expr, values))


def _register(fn):
    """Type and lower ``fn(tensor, a, b)`` (local_tile, local_partition) in kernels."""
    @type_callable(fn)
    def _type(context):
        def typer(tensor, a, b):
            if isinstance(tensor, TensorType):
                return _derive(fn, tensor, (a, b))[0]
        return typer

    @lower_builtin(fn, TensorType, types.Any, types.Any)
    def _lower(context, builder, sig, args):
        return _lower_derived(fn, context, builder, sig, args)


_register(cute.local_tile)
_register(cute.local_partition)
_register_constant(cute.size)
_register_constant(cute.cosize)


class StaticType(types.Type):
    """The numba type of a cute.static shape: the value is in the type."""

    def __init__(self, value):
        self.value = value
        super().__init__(name=f"Static{tuple(value)}")

    @property
    def key(self):
        return tuple(self.value)


@typeof_impl.register(cute.Static)
def _typeof_static(value, context):
    return StaticType(value)


@register_model(StaticType)
class _StaticModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [])


@lower_constant(StaticType)
def _static_constant(context, builder, ty, value):
    return ir.Constant(ir.LiteralStructType([]), [])
