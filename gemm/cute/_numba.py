"""numba typing and lowering of :mod:`gemm.cute`: LayoutType, TensorType and their operations.

A LayoutType carries its layout. A static layout's data model is an empty struct, so it costs
nothing at run time, as an argument or a constant. A layout made in a kernel by
``make_layout`` from run-time integers has symbols ``d0, d1, ..`` for them in its type (its
shape and stride are sympy expressions of them) and their uint32 values in its data; sympy
is imported only then (offsets over static layouts are :mod:`layoutalg.index_expr`
expressions).
The offset of a coordinate is emitted as uint32 LLVM IR from the shape and stride (CuTe's
crd2idx); LLVM folds the constants.
A TensorType is (the array, a uint64 offset, the values of its layout's symbols) with the
layout in the type (a view's offset is its parent's plus its own uint32 one, added in 64
bits: its constants then fold into the addresses), and a swizzle where its layout was a
``ComposedLayout(Swizzle, offset, layout)``: element ``c`` is then
``array[swizzle(offset + layout(c))]``, the swizzle on the offset from the array's first
element (CuTe's swizzled shared-memory pointers: slices and partitions move the offset
before the swizzle; a constant ``layout(c)``'s whole periods are added after it, which is
the same); an identity tensor (``make_identity_tensor``)
has no array and a tuple of uint32 coordinates for its offset.
Element access, slices, tiles and partitions are in :mod:`gemm.cute._numba_derive`; the
constructors and algorithms (make_layout, identity, shared and register tensors, copy,
copy_if, fill, axpby, gemm, elem_less) in :mod:`gemm.cute._numba_ops`.
"""

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
from layoutalg.index_expr import IndexExpr
from layoutalg.int_tuple import flatten, is_int, is_tuple, product
from layoutalg.swizzle import ComposedLayout
from layoutalg.tensor import ScaledBasis
from layoutalg.atom.tma import TmaCopy
from layoutalg.tiled import TiledCopy, TiledMMA
from gemm.cute import _python as cute    # the objects gemm.cute re-exports
from gemm.arch._lowering import I32, I64, SHARED, item_pointer

__all__ = ["LayoutType", "TensorType", "StaticType", "ThrSliceType", "data_tensors"]


class LayoutType(types.Callable):
    """The numba type of one layout: static, or with run-time leaves (symbols ``d<i>``,
    ``dyn`` their names, whose values the layout's data holds); calling it with an index or
    a coordinate gives the offset (uint32)."""

    def __init__(self, layout):
        self.layout = _kernel_layout(layout)
        self.dyn = _dyn_names(self.layout)
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


# --- run-time leaves: symbols d0, d1, .. in a layout ---------------------------------------

def _symbol(name, positive=False):
    import sympy    # once a kernel types a run-time layout: importing gemm.cute does without
    return sympy.Symbol(name, integer=True, **({"positive": True} if positive else
                                                {"nonnegative": True}))


def _dyn(i):
    """The symbol of a layout's i-th run-time leaf (an extent or a stride: positive)."""
    return _symbol(f"d{i}", positive=True)


def _leaf_symbols(x):
    if isinstance(x, ScaledBasis):
        return set().union(*(_leaf_symbols(c) for _, c in x.terms))
    return set() if is_int(x) else set(x.free_symbols)


def _dyn_names(layout):
    """The names of the run-time symbols in a layout's shape and stride, in order."""
    syms = set()
    for x in flatten((layout.shape, layout.stride)):
        syms |= _leaf_symbols(x)
    return tuple(sorted((s.name for s in syms), key=lambda n: int(n[1:])))


def _kernel_layout(layout):
    """``layout`` if every leaf is a non-negative int, a basis stride of an identity layout,
    or an expression of run-time symbols ``d<i>``; else a TypingError."""
    for x in flatten((layout.shape, layout.stride)):
        bad = [s for s in _leaf_symbols(x) if not (s.name[:1] == "d" and s.name[1:].isdigit())]
        if bad or (is_int(x) and x < 0):
            raise TypingError(f"a layout in a kernel needs static integers or run-time "
                              f"integers (make_layout) for its shape and stride, got {layout}")
    return layout


def _fields(context, builder, ty, value):
    """{field name: IR value} of a struct-model value."""
    dm = context.data_model_manager[ty]
    return {name: builder.extract_value(value, dm.get_field_position(name))
            for name in dm._fields}


def _dyn_values(context, builder, ty, value):
    """{symbol: uint32 IR} of the run-time leaves of a LayoutType or TensorType value."""
    if not ty.dyn:
        return {}
    fields = _fields(context, builder, ty, value)
    return {_dyn(int(n[1:])): fields[n] for n in ty.dyn}


def _struct(context, builder, ty, values):
    """A struct-model value of ``ty`` from {field name: IR value}."""
    dm = context.data_model_manager[ty]
    out = ir.Constant(dm.get_value_type(), ir.Undefined)
    for name, v in values.items():
        out = builder.insert_value(out, v, dm.get_field_position(name))
    return out


def _value(builder, x, values):
    """uint32 IR of a layout leaf or offset: an int, or an expression of run-time symbols
    (an IndexExpr, or a sympy expression where a layout has run-time leaves)."""
    if is_int(x):
        return ir.Constant(I32, int(x))
    if isinstance(x, IndexExpr):
        return _lower_index(builder, x, values)
    return _lower_sympy(builder, x, values)


def _lower_index(builder, x, values):
    """uint32 IR of a non-negative IndexExpr or int, its symbols bound in ``values``."""
    if is_int(x):
        if x < 0:           # uint32 sums marked no-wrap: a negative term would be poison
            raise NotImplementedError(f"cannot lower the offset term {x}: negative")
        return ir.Constant(I32, int(x))
    if x.op == "symbol":
        return values[x]
    if x.op != "sum":
        arg, c = _lower_index(builder, x.args[0], values), ir.Constant(I32, x.args[1])
        return builder.udiv(arg, c) if x.op == "floordiv" else builder.urem(arg, c)
    terms, const = x.args
    out = None
    for monomial, k in terms:
        part = _lower_index(builder, k, values) if k != 1 else None
        for atom in monomial:
            a = _lower_index(builder, atom, values)
            part = a if part is None else builder.mul(part, a, flags=NUW)
        out = part if out is None else builder.add(out, part, flags=NUW)
    if const:
        out = builder.add(out, _lower_index(builder, const, values), flags=NUW)
    return out


def _ceil_quotient(expr):
    """(x, c) where ``expr`` is ``-floor(-x / c)`` (ceil(x / c), as layoutalg writes it for
    a run-time extent divided by a constant), else None."""
    import sympy    # (see _symbol)
    if not (expr.is_Mul and len(expr.args) == 2 and expr.args[0] == -1
            and isinstance(expr.args[1], sympy.floor)):
        return None
    num, den = expr.args[1].args[0].as_numer_denom()
    return (-num, den) if den.is_Integer else None


def _lower_sympy(builder, expr, values):
    """uint32 IR of a non-negative integer sympy expression (sums, products, floor of a
    quotient by a constant, its ceil, Mod) with symbols bound in ``values``."""
    import sympy    # (see _symbol)
    if expr.is_Integer:
        if expr < 0:        # uint32 sums marked no-wrap: a negative term would be poison
            raise NotImplementedError(f"cannot lower the offset term {expr}: negative")
        return ir.Constant(I32, int(expr))
    if expr.is_Symbol:
        return values[expr]
    ceil = _ceil_quotient(expr)
    if ceil is not None:
        x, c = ceil
        up = builder.add(_lower_sympy(builder, x, values), ir.Constant(I32, int(c) - 1),
                         flags=NUW)
        return builder.udiv(up, ir.Constant(I32, int(c)))
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
        return LayoutType(cute._static(value))
    except TypeError:
        return None             # a symbolic layout is not a kernel constant


class _NoData(models.StructModel):
    """The model of a type whose value is all in the type (a static shape, a TiledCopy or
    TiledMMA): no run-time data."""

    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [])


def _no_data_constant(context, builder, ty, value):
    return ir.Constant(ir.LiteralStructType([]), [])


@register_model(LayoutType)
class _LayoutModel(models.StructModel):
    """A layout's run-time leaves, one uint32 each (none for a static layout)."""

    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [(n, types.uint32) for n in fe_type.dyn])


lower_constant(LayoutType)(_no_data_constant)       # a global: static


def _to_u32(context, builder, ty, value):
    return context.cast(builder, value, ty, types.uint32)


# Offsets are sums and products of non-negative values below an array's size: they do not
# wrap, and saying so lets LLVM move constant terms into the addresses.
NUW = ("nuw",)


def _crd2idx(context, builder, ty, value, shape, stride, values):
    """uint32 IR of the offset of coordinate ``value`` (numba type ``ty``) in (shape,
    stride), run-time leaves bound in ``values``: an integer is an index into the mode,
    colexicographic over its sub-modes (the last takes the rest), a tuple one coordinate per
    sub-mode."""
    if isinstance(ty, types.Integer):
        index = _to_u32(context, builder, ty, value)
        if not is_tuple(shape):
            return builder.mul(index, _value(builder, stride, values), flags=NUW)
        total = ir.Constant(I32, 0)
        for k, (s, d) in enumerate(zip(shape, stride)):
            if k == len(shape) - 1:
                part = index
            else:
                n = _value(builder, product(s), values)
                part = builder.urem(index, n)
                index = builder.udiv(index, n)
            total = builder.add(total, _crd2idx(context, builder, types.uint32, part, s, d,
                                                values), flags=NUW)
        return total
    total = ir.Constant(I32, 0)
    for k, (t, s, d) in enumerate(zip(ty.types, shape, stride)):
        part = builder.extract_value(value, k)
        total = builder.add(total, _crd2idx(context, builder, t, part, s, d, values),
                            flags=NUW)
    return total


def _offset(context, builder, layout, crd_ty, crd, values=None):
    return _crd2idx(context, builder, crd_ty, crd, layout.shape, layout.stride, values or {})


@lower_builtin(LayoutType, types.Any, types.VarArg(types.Any))
def _call_layout(context, builder, sig, args):
    ty = sig.args[0]
    values = _dyn_values(context, builder, ty, args[0])
    if len(args) == 2:
        return _offset(context, builder, ty.layout, sig.args[1], args[1], values)
    tup = types.Tuple(sig.args[1:])
    value = context.make_tuple(builder, tup, args[1:])
    return _offset(context, builder, ty.layout, tup, value, values)


def _register_constant(fn, dynamic):
    """``fn(layout or tensor)`` (size, cosize) in kernels: a constant of a static layout;
    of a layout with run-time leaves, their expression (``dynamic``) or a TypingError."""
    @type_callable(fn)
    def _type(context):
        def typer(x):
            if isinstance(x, (LayoutType, TensorType)):
                if x.dyn and not dynamic:
                    raise TypingError(f"{fn.__name__} of {x.layout}: it needs a static layout")
                return types.uint32
        return typer

    @lower_builtin(fn, types.Any)
    def _lower(context, builder, sig, args):
        ty = sig.args[0]
        if not ty.dyn:
            return ir.Constant(I32, fn(ty.layout))
        return _value(builder, product(ty.layout.shape), _dyn_values(context, builder, ty,
                                                                      args[0]))


# --- tensors ----------------------------------------------------------------------------

class TensorType(types.Type):
    """A tensor: an array (1-D), an element offset (uint64: a view's constants then fold into
    the addresses of its elements, which a zero-extended uint32 sum keeps from NVVM) and a
    layout (static, or with run-time leaves whose values the tensor holds: ``dyn``);
    ``space`` "shared" for a tensor of :func:`cute.make_shared_tensor` and those derived
    from it (its loads and stores address shared memory explicitly), else None; ``swizzle``
    a layoutalg Swizzle applied to the offset of every element from the array's first, or
    None, ``bits`` (a swizzled tensor's) the bits its offset can have where they are
    known (see :func:`_swizzled_index`), else None, and ``const`` (a swizzled tensor's) a
    constant added to the offset before the swizzle: a swizzled view keeps its offset's
    constant here and its offset's whole periods of the swizzle in its array's start (see
    ``_numba_derive``), so that its elements are its offset's one swizzle XOR constants
    where the offset's bits allow. An identity
    tensor (``coords`` > 0) has no array: its offset is a tuple of ``coords`` uint32
    coordinates and its elements are coordinates."""

    def __init__(self, array, layout, space=None, coords=0, swizzle=None, bits=None, const=0):
        self.array, self.layout, self.space, self.coords = array, layout, space, coords
        self.swizzle = swizzle if swizzle is not None and swizzle.bits else None
        self.bits = bits if self.swizzle is not None else None
        self.const = const if self.swizzle is not None else 0
        self.dyn = _dyn_names(_kernel_layout(layout))
        what = f"Coords{coords}" if coords else f"{array}"
        where = f", {space}" if space else ""
        sw = f"{self.swizzle} o " if self.swizzle else ""
        known = f", bits {self.bits:#x}" if self.bits is not None else ""
        plus = f", + {self.const}" if self.const else ""
        super().__init__(name=f"Tensor[{what}, {sw}{layout}{where}{known}{plus}]")

    @property
    def dtype(self):
        return types.UniTuple(types.uint32, self.coords) if self.coords else self.array.dtype

    @property
    def offset_type(self):
        return types.UniTuple(types.uint32, self.coords) if self.coords else types.uint64


@register_model(TensorType)
class _TensorModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        array = [] if fe_type.coords else [("array", fe_type.array)]
        super().__init__(dmm, fe_type, array + [("offset", fe_type.offset_type)]
                         + [(n, types.uint32) for n in fe_type.dyn])


def data_tensors(*tys):
    """Whether every type is a TensorType with data (not an identity tensor)."""
    return all(isinstance(t, TensorType) and not t.coords for t in tys)


def _check_array(array):
    if not (isinstance(array, types.Array) and (array.ndim == 1 or array.layout == "C")):
        raise TypingError(f"make_tensor: the engine must be a 1-D or C-contiguous array, got "
                          f"{array}")


def swizzled_layout(ty, what):
    """(Swizzle, offset, layout) of a kernel constant ``ComposedLayout(Swizzle, offset,
    layout)`` (a StaticType) with a static layout; TypingError for any other composition."""
    try:
        cute.swizzled(ty.value)
    except TypeError as e:
        raise TypingError(f"{what}: {e}") from None
    return ty.value.outer, ty.value.offset, ty.value.inner


def _is_composed(ty):
    return isinstance(ty, StaticType) and isinstance(ty.value, ComposedLayout)


@type_callable(cute.make_tensor)
def _type_make_tensor(context):
    def typer(array, layout, offset=None):
        _check_array(array)
        if isinstance(layout, LayoutType):
            return TensorType(array, layout.layout)
        if _is_composed(layout):
            sw, offset, inner = swizzled_layout(layout, "make_tensor")
            if array.layout not in "CF":
                raise TypingError(f"make_tensor: a swizzled tensor needs a contiguous array, "
                                  f"got {array}")
            return TensorType(array, inner, swizzle=sw, bits=offset)
    return typer


@lower_builtin(cute.make_tensor, types.Array, LayoutType)
def _make_tensor_at_zero(context, builder, sig, args):
    return _tensor_value(context, builder, sig.return_type, args[0], ir.Constant(I32, 0),
                         _fields(context, builder, sig.args[1], args[1]))


@lower_builtin(cute.make_tensor, types.Array, LayoutType, types.Integer)
def _make_tensor_at(context, builder, sig, args):
    return _tensor_value(context, builder, sig.return_type, args[0],
                         _to_u32(context, builder, sig.args[2], args[2]),
                         _fields(context, builder, sig.args[1], args[1]))


def swizzle_ir(builder, sw, x):
    """uint32 IR of layoutalg Swizzle ``sw`` applied to ``x``."""
    bits = builder.and_(x, ir.Constant(I32, sw.yyy_mask))
    moved = (builder.lshr(bits, ir.Constant(I32, sw.shift)) if sw.shift >= 0
             else builder.shl(bits, ir.Constant(I32, -sw.shift)))
    return builder.xor(x, moved)


def _swizzled_bits(sw, bits):
    """The bits ``sw(x)`` can have where ``x`` can have ``bits``."""
    moved = bits & sw.yyy_mask
    return bits | (moved >> sw.shift if sw.shift >= 0 else moved << -sw.shift)


def _swizzled_index(builder, sw, offset, at, bits):
    """(uint32 IR, int) whose sum is ``sw(offset + at)``, ``bits`` the bits ``offset`` can
    have (None: any). A constant ``at``'s whole periods (the swizzle reads and moves only
    the bits below its period) are the int, added after the swizzle (to the element's
    address, where they fold into the instruction's immediate offset); where the
    rest shares no bit with ``offset``, the sum is their XOR, and a swizzle, bits XORed
    into bits, is linear: ``sw(offset ^ rest) = sw(offset) ^ sw(rest)``, so that each
    element is the offset's one swizzle XOR a constant (an add where their bits are
    disjoint)."""
    if not isinstance(at, ir.Constant):
        return swizzle_ir(builder, sw, builder.add(offset, at, flags=NUW)), 0
    period = 1 << (sw.yyy_mask | sw.zzz_mask).bit_length()
    whole, rest = divmod(at.constant, period)
    after = whole * period
    if bits is not None and bits & rest == 0:
        index = swizzle_ir(builder, sw, offset)
        if _swizzled_bits(sw, bits) & sw(rest) == 0:
            after += sw(rest)       # XOR with bits the swizzled offset never has: an add
        elif rest:
            index = builder.xor(index, ir.Constant(I32, sw(rest)))
    else:
        index = swizzle_ir(builder, sw, builder.add(offset, ir.Constant(I32, rest), flags=NUW))
    return index, after


def _tensor_value(context, builder, tensor, array, offset, dyn=None):
    """A TensorType value: ``array`` (None for an identity tensor), ``offset`` and the
    run-time leaves {name: uint32 IR} (``dyn``, a superset of the tensor's own)."""
    if array is not None and offset.type == I32:
        offset = builder.zext(offset, I64)
    fields = {"offset": offset}
    if array is not None:
        fields["array"] = array
    fields.update({n: dyn[n] for n in tensor.dyn})
    return _struct(context, builder, tensor, fields)


def _element(context, builder, tensor_ty, tensor, crd_ty, crd):
    """Pointer to the element at coordinate ``crd`` (a numba value of type ``crd_ty``)."""
    values = _dyn_values(context, builder, tensor_ty, tensor)
    at = _offset(context, builder, tensor_ty.layout, crd_ty, crd, values)
    return _pointer(context, builder, tensor_ty, tensor, at)


def _at(context, builder, tensor_ty, tensor, crd):
    """Pointer to the element at ``crd`` (Python ints: an index or a coordinate), its offset
    computed here: a constant, or an expression of the tensor's run-time leaves."""
    at = tensor_ty.layout(crd)
    values = _dyn_values(context, builder, tensor_ty, tensor) if not is_int(at) else {}
    return _pointer(context, builder, tensor_ty, tensor, _value(builder, at, values))


def _once(builder, tensor, key, make):
    """``make()``, emitted once per tensor value and ``key`` while the builder appends to one
    block: the elements a lowering reads or writes share their tensor's fields and base
    address (LLVM would merge the copies, but building, printing and parsing tens of
    thousands of them was much of a kernel's compile time)."""
    block = builder.block
    if builder._anchor != len(block.instructions):      # inserting before: make anew
        return make()
    memo = getattr(builder, "_cute_once", None)
    if memo is None or memo[0] is not block:
        memo = builder._cute_once = (block, {})
    hit = memo[1].get((id(tensor), key))
    if hit is None or hit[0] is not tensor:
        hit = memo[1][(id(tensor), key)] = (tensor, make())
    return hit[1]


def _pointer(context, builder, tensor_ty, tensor, at):
    """Pointer to the element ``at`` (uint32 IR) past the tensor's offset: in the shared
    address space for a shared tensor (NVVM cannot always infer it, e.g. through a view
    reassigned in a loop, and a generic load or store is slower), else generic. The fields
    are read with extract_value (numba's struct proxies cost milliseconds per element: most
    of a kernel's compile), once per tensor value (:func:`_once`)."""
    fields = context.data_model_manager[tensor_ty]

    def read_fields():
        return (builder.extract_value(tensor, fields.get_field_position("array")),
                builder.extract_value(tensor, fields.get_field_position("offset")))
    array, offset = _once(builder, tensor, "fields", read_fields)
    if tensor_ty.swizzle is not None:   # the swizzle sees the whole offset
        if tensor_ty.const:
            at = (ir.Constant(I32, at.constant + tensor_ty.const) if isinstance(at, ir.Constant)
                  else builder.add(at, ir.Constant(I32, tensor_ty.const), flags=NUW))
        index, after = _swizzled_index(builder, tensor_ty.swizzle, builder.trunc(offset, I32),
                                       at, tensor_ty.bits)
        ptr = item_pointer(context, builder, tensor_ty.array, array, types.uint32, index)
        if after:
            ptr = builder.gep(ptr, [ir.Constant(I64, after)], inbounds=True)
    elif tensor_ty.array.layout in "CF":
        # two steps: the tensor's element, then the offset from it, so that a tensor's
        # elements share one base address and a constant offset folds into the load
        def base_address():
            data = builder.extract_value(
                array, context.data_model_manager[tensor_ty.array].get_field_position("data"))
            base = builder.gep(data, [offset], inbounds=True)
            return _in_space(builder, base, SHARED) if tensor_ty.space == "shared" else base
        base = _once(builder, tensor, "base", base_address)
        at = ir.Constant(I64, at.constant) if isinstance(at, ir.Constant) else builder.zext(at, I64)
        return builder.gep(base, [at], inbounds=True)
    else:
        index = builder.add(builder.trunc(offset, I32), at, flags=NUW)
        ptr = item_pointer(context, builder, tensor_ty.array, array, types.uint32, index)
    return _in_space(builder, ptr, SHARED) if tensor_ty.space == "shared" else ptr


def _in_space(builder, ptr, space):
    """``ptr`` as a pointer of address space ``space`` (cast only where it is another)."""
    if ptr.type.addrspace == space:
        return ptr
    return builder.addrspacecast(ptr, ptr.type.pointee.as_pointer(space))


# --- identity tensors: coordinates for predicates ----------------------------------------

@lru_cache(maxsize=None)
def _component(layout, j):
    """The layout of coordinate j of an identity layout: its strides' E(j) coefficients."""
    def coefficient(d):
        return d.coefficient(j) if isinstance(d, ScaledBasis) else 0

    def strides(d):
        return tuple(strides(x) for x in d) if is_tuple(d) else coefficient(d)
    return Layout(layout.shape, strides(layout.stride))


def _coordinate(context, builder, tensor_ty, tensor, crd_ty, crd):
    """The coordinate (UniTuple of uint32) at ``crd`` of an identity tensor."""
    values = _dyn_values(context, builder, tensor_ty, tensor)
    origin = _fields(context, builder, tensor_ty, tensor)["offset"]
    out = []
    for j in range(tensor_ty.coords):
        at = _offset(context, builder, _component(tensor_ty.layout, j), crd_ty, crd, values)
        out.append(builder.add(builder.extract_value(origin, j), at, flags=NUW))
    return context.make_tuple(builder, tensor_ty.dtype, out)


def _identity_constant(context, builder, tensor_ty, tensor, crd):
    """The coordinate at ``crd`` (Python ints) of an identity tensor: uint32 IR values."""
    values = _dyn_values(context, builder, tensor_ty, tensor)
    origin = _fields(context, builder, tensor_ty, tensor)["offset"]
    return [builder.add(builder.extract_value(origin, j),
                        _value(builder, _component(tensor_ty.layout, j)(crd), values),
                        flags=NUW) for j in range(tensor_ty.coords)]


class StaticType(types.Type):
    """The numba type of a kernel constant held in the type: a cute.static shape or int, a
    TiledCopy, a TiledMMA, a TmaCopy or a swizzled ComposedLayout."""

    def __init__(self, value):
        self.value = value
        if isinstance(value, (tuple, int)):
            text = f"Static({value!r})"
        else:
            text = f"{type(value).__name__}#{id(value)}"
        super().__init__(name=text)

    @property
    def key(self):
        if isinstance(self.value, (tuple, int)):
            return type(self.value), self.value
        return id(self.value)


@typeof_impl.register(cute.Static)
@typeof_impl.register(cute.StaticInt)
@typeof_impl.register(TmaCopy)
@typeof_impl.register(ComposedLayout)
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


_register_constant(cute.size, dynamic=True)
_register_constant(cute.cosize, dynamic=False)
register_model(StaticType)(_NoData)
lower_constant(StaticType)(_no_data_constant)


@lower_builtin(cute.make_tensor, types.Array, StaticType)
@lower_builtin(cute.make_tensor, types.Array, StaticType, types.Integer)
def _make_swizzled_tensor(context, builder, sig, args):
    """A swizzled tensor: the array viewed from element ``offset`` (after the swizzle, as a
    layoutalg Tensor's engine), the composed layout's own offset before it."""
    array_ty = sig.args[0]
    array = args[0]
    if len(args) == 3:
        ary = context.make_array(array_ty)(context, builder, array)
        at = builder.zext(_to_u32(context, builder, sig.args[2], args[2]), ir.IntType(64))
        ary.data = builder.gep(ary.data, [at], inbounds=True)
        array = ary._getvalue()
    _, offset, _ = swizzled_layout(sig.args[1], "make_tensor")
    return _tensor_value(context, builder, sig.return_type, array, ir.Constant(I32, offset))
