"""numba typing and lowering of the tensors :mod:`gemm.cute` derives: ``T[crd]`` (an element, or
a slice where ``crd`` holds None), ``T[crd] = x``, ``local_tile``, ``local_partition`` and the
partitions and retiles of a TiledCopy or TiledMMA slice. The types are in
:mod:`gemm.cute._numba`."""

import operator
from functools import lru_cache

from numba.cuda import types
from numba.cuda.core.errors import TypingError
from numba.cuda.extending import lower_builtin, type_callable
from numba.cuda.typing import signature

from layoutalg.errors import LayoutError
from layoutalg.index_expr import (IndexExpr, constant_term, evaluate, index_symbol,
                                  split_multiples)
from layoutalg.int_tuple import is_int
from layoutalg.tensor import ArithTuple
from gemm.arch._lowering import I64
from gemm.cute import _python as cute    # the objects gemm.cute re-exports
from gemm.cute._numba import (LayoutType, StaticType, TensorType, ThrSliceType, _check_coordinate,
                              _coordinate, _dyn, _dyn_values, _element, _fields,
                              _kernel_layout, _symbol, _tensor_value, _to_u32, _value)

__all__ = []


# --- element access and slices --------------------------------------------------------------

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
            if tensor.coords:
                raise TypingError(f"{tensor} is an identity tensor: its elements are read only")
            _check_coordinate(crd, tensor.layout.shape, tensor.layout)
            return types.none
    return typer


@lower_builtin(operator.getitem, TensorType, types.Any)
def _getitem(context, builder, sig, args):
    if _has_none(sig.args[1]):
        return _lower_derived(_slice, context, builder, sig, args)
    if sig.args[0].coords:
        return _coordinate(context, builder, sig.args[0], args[0], sig.args[1], args[1])
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
# A derived tensor's layout is in its type and its offset an expression of run-time
# integers (the parent's offset and run-time leaves, block and thread indices). Both come
# from layoutalg's own functions, run at typing time on a tensor whose engine is a symbol (a
# tuple of them for an identity tensor) and with a symbol for every run-time integer
# argument; the offset expression is then lowered to uint32 IR with those symbols bound to
# the argument values. The symbols are layoutalg.index_expr's, or sympy's where the tensor's
# layout has run-time leaves (whose algebra needs sympy).

def _has_none(ty):
    if isinstance(ty, types.NoneType):
        return True
    return isinstance(ty, types.BaseTuple) and any(_has_none(t) for t in ty.types)


def _symbolic(ty, path, leaves, symbol):
    """The Python value standing for an argument of numba type ``ty`` at typing time:
    a ``symbol`` per run-time integer (recorded in ``leaves`` with its tuple path), None
    for None, the constant of a static layout or shape."""
    if isinstance(ty, types.Integer):
        sym = symbol(f"a{len(leaves)}")
        leaves.append((sym, path, ty))
        return sym
    if isinstance(ty, types.NoneType):
        return None
    if isinstance(ty, LayoutType):
        if ty.dyn:
            raise TypingError(f"{ty.layout}: a layout with run-time leaves cannot be an "
                              "argument of a tensor operation (only of make_tensor)")
        return ty.layout
    if isinstance(ty, StaticType):
        return ty.value
    if isinstance(ty, ThrSliceType):
        sym = symbol(f"a{len(leaves)}")
        leaves.append((sym, path, ty))
        return ty.tiled.get_slice(sym)
    if isinstance(ty, types.BaseTuple):
        return tuple(_symbolic(t, path + (k,), leaves, symbol)
                     for k, t in enumerate(ty.types))
    raise TypingError(f"{ty} cannot be an argument of a tensor operation in a kernel: use "
                      f"integers, None, tuples of them, static layouts or cute.static shapes")


def _slice(tensor, crd):
    return tensor[crd]


@lru_cache(maxsize=None)
def _derive(op, tensor_ty, arg_types):
    """(TensorType of ``op(tensor, *args)``, its offset expression (a tuple of them for an
    identity tensor), the argument leaves, the parent's offset symbols, and for a swizzled
    view (the part of its own offset added to the parent's, the whole periods of the swizzle
    added to the array's start), else None): computed once per kind of call, for typing and
    for lowering."""
    name = getattr(op, '__name__', op)
    symbol = _symbol if tensor_ty.dyn else index_symbol
    offsets = tuple(symbol(f"offset{j}") for j in range(max(tensor_ty.coords, 1)))
    engine = ArithTuple(offsets) if tensor_ty.coords else offsets[0]
    leaves = []
    args = [_symbolic(t, (k,), leaves, symbol) for k, t in enumerate(arg_types)]
    leaves = tuple(leaves)
    try:
        result = op(cute.Tensor(engine, tensor_ty.layout), *args)
    except (LayoutError, TypeError, ValueError) as e:
        raise TypingError(f"{name} of a tensor of layout {tensor_ty.layout}: {e}") from None
    try:
        layout = _kernel_layout(result.layout)
    except TypingError as e:
        raise TypingError(f"{name}: the result's layout depends on values other than the "
                          f"tensor's run-time extents and strides: {e}") from None
    own = None if tensor_ty.coords else result.engine - offsets[0]
    parts, const = None, 0
    if tensor_ty.swizzle is not None and isinstance(own, (int, IndexExpr)):
        # the offset's whole periods of the swizzle go to the array's start and its constant
        # to the type: the offset left is the thread's, whose bits are known
        rest, whole = split_multiples(own, cute.swizzle_period(tensor_ty.swizzle))
        const = constant_term(rest)
        own = rest - const
        parts = (own, whole)
        const += tensor_ty.const
    bits = None
    if tensor_ty.bits is not None:
        bits = _offset_bits(own, leaves, tensor_ty.bits)
    result_ty = TensorType(tensor_ty.array, layout, tensor_ty.space, tensor_ty.coords,
                           tensor_ty.swizzle, bits, const)
    return result_ty, result.engine, leaves, offsets, parts


def _offset_bits(own, leaves, parent):
    """The bits a view's offset can have (a swizzled tensor's: see
    ``_numba._swizzled_index``): the parent's (``parent``) and the view's own offset
    (``own``) where that is known and shares none of them (the sum is then their OR), else
    None. ``own`` is known where it is a constant or depends on one thread index alone, a
    TiledCopy's or TiledMMA's slice, whose index is in ``[0, size)`` (get_slice's
    contract): the bits of its values for every thread."""
    if is_int(own):
        mask = int(own)
    else:
        threads = [(sym, ty) for sym, _, ty in leaves if isinstance(ty, ThrSliceType)]
        if len(threads) != 1 or own.free_symbols != {threads[0][0]}:
            return None
        sym, ty = threads[0]
        mask = 0
        for t in range(ty.tiled.size):
            value = evaluate(own, {sym: t})
            if value < 0:
                return None
            mask |= value
    return parent | mask if mask >= 0 and parent & mask == 0 else None


def _lower_derived(op, context, builder, sig, args):
    tensor_ty = sig.args[0]
    result_ty, expr, leaves, offsets, parts = _derive(op, tensor_ty, sig.args[1:])
    parent = _fields(context, builder, tensor_ty, args[0])
    array = parent.get("array")
    values = _dyn_values(context, builder, tensor_ty, args[0])
    if tensor_ty.coords:
        values.update((o, builder.extract_value(parent["offset"], j))
                      for j, o in enumerate(offsets))
    for sym, path, ty in leaves:
        v = args[1 + path[0]]
        for k in path[1:]:
            v = builder.extract_value(v, k)
        if isinstance(ty, ThrSliceType):
            values[sym] = _fields(context, builder, ty, v)["idx"]
        else:
            values[sym] = _to_u32(context, builder, ty, v)
    if tensor_ty.coords:
        offset = context.make_tuple(builder, result_ty.offset_type,
                                    [_value(builder, e, values) for e in expr])
    else:       # the parent's (uint64) offset plus the view's, added in 64 bits
        own = expr - offsets[0]
        if offsets[0] in getattr(own, "free_symbols", ()):
            raise NotImplementedError(f"{op}: the view's offset {expr} is not the parent's "
                                      f"plus its own")
        if parts is not None:           # a swizzled view (see _derive)
            own, whole = parts
            if not (is_int(whole) and whole == 0):
                ary = context.make_array(tensor_ty.array)(context, builder, array)
                at = builder.zext(_value(builder, whole, values), I64)
                ary.data = builder.gep(ary.data, [at], inbounds=True)
                array = ary._getvalue()
        offset = builder.add(parent["offset"], builder.zext(_value(builder, own, values), I64),
                             flags=("nuw",))
    dyn = {n: values[_dyn(int(n[1:]))] for n in tensor_ty.dyn}
    return _tensor_value(context, builder, result_ty, array, offset, dyn)


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
for _name in ("S", "D"):
    _register_partition(getattr(cute, f"retile_{_name}"), f"retile_{_name}")
