"""numba typing and lowering of :mod:`gemm.cute`: LayoutType, TensorType and their operations.

A LayoutType carries its layout; its data model is an empty struct, so a layout costs nothing
at run time, as an argument or a constant. The offset of a coordinate is emitted as uint32
LLVM IR from the static shape and stride (CuTe's crd2idx); LLVM folds the constants.
A TensorType is (the array, a uint32 offset) with a static layout.
"""

import operator
from functools import lru_cache

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
from layoutalg.tiled import TiledCopy, TiledMMA
from layoutalg.gemm import cute
from layoutalg.gemm.arch._lowering import I32, SHARED, item_pointer

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


class _NoData(models.StructModel):
    """The model of a type whose value is all in the type (a layout, a static shape, a
    TiledCopy/TiledMMA): no run-time data."""

    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [])


def _no_data_constant(context, builder, ty, value):
    return ir.Constant(ir.LiteralStructType([]), [])


register_model(LayoutType)(_NoData)
lower_constant(LayoutType)(_no_data_constant)


def _to_u32(context, builder, ty, value):
    return context.cast(builder, value, ty, types.uint32)


# Offsets are sums and products of non-negative values below an array's size: they do not
# wrap, and saying so lets LLVM move constant terms into the addresses.
NUW = ("nuw",)


def _crd2idx(context, builder, ty, value, shape, stride):
    """uint32 IR of the offset of coordinate ``value`` (numba type ``ty``) in (shape,
    stride): an integer is an index into the mode, colexicographic over its sub-modes (the
    last takes the rest), a tuple one coordinate per sub-mode."""
    if isinstance(ty, types.Integer):
        index = _to_u32(context, builder, ty, value)
        if not is_tuple(shape):
            return builder.mul(index, ir.Constant(I32, stride), flags=NUW)
        total = ir.Constant(I32, 0)
        for k, (s, d) in enumerate(zip(shape, stride)):
            if k == len(shape) - 1:
                part = index
            else:
                n = ir.Constant(I32, int(product(s)))
                part = builder.urem(index, n)
                index = builder.udiv(index, n)
            total = builder.add(total, _crd2idx(context, builder, types.uint32, part, s, d),
                                flags=NUW)
        return total
    total = ir.Constant(I32, 0)
    for k, (t, s, d) in enumerate(zip(ty.types, shape, stride)):
        part = builder.extract_value(value, k)
        total = builder.add(total, _crd2idx(context, builder, t, part, s, d), flags=NUW)
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
    """A tensor: an array (1-D), a uint32 element offset and a static layout; ``space``
    "shared" for a tensor of :func:`cute.make_shared_tensor` and those derived from it (its
    loads and stores address shared memory explicitly), else None."""

    def __init__(self, array, layout, space=None):
        self.array, self.layout, self.space = array, layout, space
        where = f", {space}" if space else ""
        super().__init__(name=f"Tensor[{array}, {layout}{where}]")

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
    """Pointer to the element at coordinate ``crd`` (a numba value of type ``crd_ty``)."""
    at = _offset(context, builder, tensor_ty.layout, crd_ty, crd)
    return _pointer(context, builder, tensor_ty, tensor, at)


def _at(context, builder, tensor_ty, tensor, crd):
    """Pointer to the element at ``crd`` (Python ints: an index or a coordinate), its offset
    computed here: a constant."""
    at = ir.Constant(I32, int(tensor_ty.layout(crd)))
    return _pointer(context, builder, tensor_ty, tensor, at)


def _pointer(context, builder, tensor_ty, tensor, at):
    """Pointer to the element ``at`` (uint32 IR) past the tensor's offset: in the shared
    address space for a shared tensor (NVVM cannot always infer it, e.g. through a view
    reassigned in a loop, and a generic load or store is slower), else generic. The fields
    are read with extract_value (numba's struct proxies cost milliseconds per element: most
    of a kernel's compile)."""
    fields = context.data_model_manager[tensor_ty]
    array = builder.extract_value(tensor, fields.get_field_position("array"))
    offset = builder.extract_value(tensor, fields.get_field_position("offset"))
    if tensor_ty.array.layout in "CF":
        # two steps: the tensor's element, then the offset from it, so that a tensor's
        # elements share one base address and a constant offset folds into the load
        i64 = ir.IntType(64)
        data = builder.extract_value(
            array, context.data_model_manager[tensor_ty.array].get_field_position("data"))
        base = builder.gep(data, [builder.zext(offset, i64)], inbounds=True)
        ptr = builder.gep(base, [builder.zext(at, i64)], inbounds=True)
    else:
        index = builder.add(offset, at, flags=NUW)
        ptr = item_pointer(context, builder, tensor_ty.array, array, types.uint32, index)
    return _in_space(builder, ptr, SHARED) if tensor_ty.space == "shared" else ptr


def _in_space(builder, ptr, space):
    """``ptr`` as a pointer of address space ``space`` (cast only where it is another)."""
    if ptr.type.addrspace == space:
        return ptr
    return builder.addrspacecast(ptr, ptr.type.pointee.as_pointer(space))


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

def _symbol(name):
    import sympy
    return sympy.Symbol(name, integer=True, nonnegative=True)


def _has_none(ty):
    if isinstance(ty, types.NoneType):
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
    if isinstance(ty, types.NoneType):
        return None
    if isinstance(ty, LayoutType):
        return ty.layout
    if isinstance(ty, StaticType):
        return ty.value
    if isinstance(ty, ThrSliceType):
        sym = _symbol(f"a{len(leaves)}")
        leaves.append((sym, path, ty))
        return ty.tiled.get_slice(sym)
    if isinstance(ty, types.BaseTuple):
        return tuple(_symbolic(t, path + (k,), leaves) for k, t in enumerate(ty.types))
    raise TypingError(f"{ty} cannot be an argument of a tensor operation in a kernel: use "
                      f"integers, None, tuples of them, static layouts or cute.static shapes")


def _slice(tensor, crd):
    return tensor[crd]


@lru_cache(maxsize=None)
def _derive(op, tensor_ty, arg_types):
    """(TensorType of ``op(tensor, *args)``, its offset expression, the argument leaves, the
    parent's offset symbol): computed once per kind of call, for typing and for lowering."""
    from layoutalg.errors import LayoutError
    offset = _symbol("offset")
    leaves = []
    args = [_symbolic(t, (k,), leaves) for k, t in enumerate(arg_types)]
    leaves = tuple(leaves)
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
    return TensorType(tensor_ty.array, layout, tensor_ty.space), result.engine, leaves, offset


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
            out = (builder.add if expr.is_Add else builder.mul)(out, p, flags=NUW)
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
        if isinstance(ty, ThrSliceType):
            values[sym] = cgutils.create_struct_proxy(ty)(context, builder, value=v).idx
        else:
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
    """The numba type of a kernel constant held in the type: a cute.static shape, a
    TiledCopy or a TiledMMA."""

    def __init__(self, value):
        self.value = value
        text = f"Static{tuple(value)}" if isinstance(value, tuple) else type(value).__name__
        super().__init__(name=f"{text}#{id(value) if not isinstance(value, tuple) else ''}")

    @property
    def key(self):
        return tuple(self.value) if isinstance(self.value, tuple) else id(self.value)


@typeof_impl.register(cute.Static)
@typeof_impl.register(TiledCopy)
@typeof_impl.register(TiledMMA)
def _typeof_static(value, context):
    return StaticType(value)


class ThrSliceType(types.Type):
    """One thread's view of a static TiledCopy / TiledMMA: the thread index at run time."""

    def __init__(self, tiled):
        self.tiled = tiled
        super().__init__(name=f"ThrSlice[{type(tiled).__name__}#{id(tiled)}]")


@register_model(ThrSliceType)
class _ThrSliceModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("idx", types.uint32)])


@type_callable(cute.get_slice)
def _type_get_slice(context):
    def typer(tiled, idx):
        if (isinstance(tiled, StaticType) and isinstance(tiled.value, (TiledCopy, TiledMMA))
                and isinstance(idx, types.Integer)):
            return ThrSliceType(tiled.value)
    return typer


@lower_builtin(cute.get_slice, StaticType, types.Integer)
def _get_slice(context, builder, sig, args):
    thr = cgutils.create_struct_proxy(sig.return_type)(context, builder)
    thr.idx = _to_u32(context, builder, sig.args[1], args[1])
    return thr._getvalue()


def _register_partition(fn, method):
    """``fn(thr, tensor)``: the ThrCopy / ThrMMA ``method`` of layoutalg, in kernels."""
    def op(tensor, thr):
        return getattr(thr, method)(tensor)
    op.__name__ = method

    @type_callable(fn)
    def _type(context):
        def typer(thr, tensor):
            if isinstance(thr, ThrSliceType) and isinstance(tensor, TensorType):
                return _derive(op, tensor, (thr,))[0]
        return typer

    @lower_builtin(fn, ThrSliceType, TensorType)
    def _lower(context, builder, sig, args):
        flipped = signature(sig.return_type, sig.args[1], sig.args[0])
        return _lower_derived(op, context, builder, flipped, (args[1], args[0]))


for _name in ("S", "D", "A", "B", "C"):
    _register_partition(getattr(cute, f"partition_{_name}"), f"partition_{_name}")


# --- fragments and the algorithms: copy, fill, gemm (unrolled) ---------------------------

@type_callable(cute.make_fragment_like)
def _type_fragment(context):
    def typer(tensor, dtype):
        if isinstance(tensor, TensorType) and isinstance(dtype, types.NumberClass):
            return TensorType(types.Array(dtype.dtype, 1, "C"), Layout(tensor.layout.shape))
    return typer


@type_callable(cute.make_shared_tensor)
def _type_shared_tensor(context):
    def typer(dtype, layout):
        if isinstance(dtype, types.NumberClass) and isinstance(layout, LayoutType):
            return TensorType(types.Array(dtype.dtype, 1, "C"), layout.layout, "shared")
    return typer


@lower_builtin(cute.make_shared_tensor, types.NumberClass, LayoutType)
def _make_shared_tensor(context, builder, sig, args):
    return _new_tensor(context, builder, sig.return_type, shared=True)


@lower_builtin(cute.make_fragment_like, TensorType, types.NumberClass)
def _make_fragment(context, builder, sig, args):
    return _new_tensor(context, builder, sig.return_type, shared=False)


def _new_tensor(context, builder, tensor, shared):
    """A new array of ``cosize(layout)`` elements, as numba allocates ``cuda.shared.array``
    (a uniquely named shared global) or ``cuda.local.array``, as a tensor at offset 0."""
    from numba.cuda import nvvm
    from numba.cuda.cudaimpl import _generic_array, _get_unique_smem_id
    where = ((_get_unique_smem_id("_cudapy_smem"), nvvm.ADDRSPACE_SHARED) if shared
             else ("_cudapy_lmem", nvvm.ADDRSPACE_LOCAL))
    array = _generic_array(context, builder, shape=(cute.cosize(tensor.layout),),
                           dtype=tensor.array.dtype, symbol_name=where[0], addrspace=where[1])
    return _tensor_value(context, builder, tensor, array, ir.Constant(I32, 0))


@type_callable(cute.copy)
def _type_copy(context):
    def typer(a, b, c=None):
        tensors = (a, b) if c is None else (b, c)
        if all(isinstance(t, TensorType) for t in tensors) and (
                c is None or isinstance(a, StaticType) and isinstance(a.value, TiledCopy)):
            return types.none
    return typer


@lower_builtin(cute.copy, StaticType, TensorType, TensorType)
def _tiled_copy(context, builder, sig, args):
    from layoutalg.gemm.arch._lowering import GLOBAL, asm
    tiled, (src, dst) = sig.args[0].value, sig.args[1:]
    if tiled.atom.kind == "universal":
        return _copy(context, builder, signature(types.none, src, dst), args[1:])
    try:
        per, nbytes, kind = cute.copy_instructions(tiled, src.layout)
    except (TypeError, ValueError) as e:
        raise TypingError(str(e)) from None
    for r in range(cute.size(src.layout) // per):
        g = _at(context, builder, src, args[1], r * per)
        d = _at(context, builder, dst, args[2], r * per)
        g64 = builder.ptrtoint(_in_space(builder, g, GLOBAL), ir.IntType(64))
        d32 = builder.ptrtoint(_in_space(builder, d, SHARED), I32)
        asm(builder, ir.VoidType(), f"{kind}.shared.global [$0], [$1], {nbytes};",
            "r,l,~{memory}", [d32, g64], side_effect=True)
    return context.get_dummy_value()


@type_callable(cute.gemm)
def _type_gemm(context):
    def typer(C, A, B):
        if all(isinstance(x, TensorType) for x in (C, A, B)):
            return types.none
    return typer


@type_callable(cute.fill)
def _type_fill(context):
    def typer(tensor, value):
        if isinstance(tensor, TensorType) and isinstance(value, types.Number):
            return types.none
    return typer


@lower_builtin(cute.fill, TensorType, types.Number)
def _fill(context, builder, sig, args):
    tensor = sig.args[0]
    value = context.cast(builder, args[1], sig.args[1], tensor.dtype)
    for i in range(cute.size(tensor.layout)):
        builder.store(value, _at(context, builder, tensor, args[0], i))
    return context.get_dummy_value()


@lower_builtin(cute.copy, TensorType, TensorType)
def _copy(context, builder, sig, args):
    src, dst = sig.args
    n = cute.size(src.layout)
    if n != cute.size(dst.layout):
        raise TypingError(f"copy: the tensors have {n} and {cute.size(dst.layout)} elements")
    for i in range(n):
        value = builder.load(_at(context, builder, src, args[0], i))
        value = context.cast(builder, value, src.dtype, dst.dtype)
        builder.store(value, _at(context, builder, dst, args[1], i))
    return context.get_dummy_value()


@lower_builtin(cute.gemm, TensorType, TensorType, TensorType)
def _gemm(context, builder, sig, args):
    C, A, B = sig.args
    try:
        m, n, k = cute._fma_shapes(C.layout, A.layout, B.layout)
    except ValueError as e:
        raise TypingError(str(e)) from None

    def ptr(ty, value, a, b):
        return _at(context, builder, ty, value, cute._fma_crd(ty.layout, a, b))
    acc = {(i, j): builder.load(ptr(C, args[0], i, j)) for i in range(m) for j in range(n)}
    for kk in range(k):
        a = [context.cast(builder, builder.load(ptr(A, args[1], i, kk)), A.dtype, C.dtype)
             for i in range(m)]
        b = [context.cast(builder, builder.load(ptr(B, args[2], j, kk)), B.dtype, C.dtype)
             for j in range(n)]
        for i in range(m):
            for j in range(n):
                acc[i, j] = builder.fadd(acc[i, j], builder.fmul(a[i], b[j]))
    for (i, j), value in acc.items():
        builder.store(value, ptr(C, args[0], i, j))
    return context.get_dummy_value()


register_model(StaticType)(_NoData)
lower_constant(StaticType)(_no_data_constant)
