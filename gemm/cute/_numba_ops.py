"""numba typing and lowering of :mod:`gemm.cute`'s constructors and algorithms: make_layout,
make_identity_tensor, shared and register tensors, copy (universal, cp.async, ldmatrix; TMA
in :mod:`gemm.cute._numba_sm90`), copy_if, fill, axpby, gemm (FMAs, mma.sync; wgmma in
:mod:`gemm.cute._numba_sm90`) and elem_less, unrolled at compile time. The types are in
:mod:`gemm.cute._numba`."""

from contextlib import nullcontext

from llvmlite import ir
from numba.cuda import cgutils, nvvm, types
from numba.cuda.cudaimpl import _generic_array, _get_unique_smem_id
from numba.cuda.core.errors import TypingError
from numba.cuda.extending import lower_builtin, type_callable
from numba.cuda.typing import signature

from layoutalg import Layout
from layoutalg.errors import LayoutError
from layoutalg.int_tuple import flatten, is_int
from layoutalg.tiled import TiledCopy, TiledMMA
from layoutalg.tensor import make_identity_layout
from gemm.cute import _python as cute    # the objects gemm.cute re-exports
from gemm.cute._numba import (I32, LayoutType, StaticType, TensorType, _at, _dyn,
                              _fields, _identity_constant, _in_space, _is_composed,
                              _make_swizzled_tensor, _make_tensor_at, _make_tensor_at_zero,
                              _struct, _tensor_value, _to_u32, data_tensors, swizzled_layout)
from gemm.cute._gmma import is_gmma
from gemm.cute._numba_sm90 import (check_tma_copy, check_tma_store, is_tma, is_wgmma_call,
                                   lower_wgmma, type_wgmma)
from gemm.arch import ptx
from gemm.arch._lowering import GLOBAL, SHARED, asm, unpack
from gemm.arch.ptx_convert import emit_cvt_rna_tf32

__all__ = []


# --- layouts and identity tensors with run-time extents and strides ------------------------

def _layout_arg(ty, path, leaves):
    """The shape or stride that a make_layout argument of numba type ``ty`` stands for: a
    symbol ``d<i>`` per run-time integer (recorded in ``leaves`` with its tuple path), the
    value of a cute.static int or shape."""
    if isinstance(ty, types.Integer):
        leaves.append((path, ty))
        return _dyn(len(leaves) - 1)
    if isinstance(ty, StaticType) and isinstance(ty.value, (int, tuple)):
        return ty.value
    if isinstance(ty, types.BaseTuple):
        return tuple(_layout_arg(t, path + (k,), leaves) for k, t in enumerate(ty.types))
    raise TypingError(f"make_layout: {ty} is not a shape or stride: use run-time integers, "
                      f"cute.static ints or shapes, and tuples of them")


def _leaf_values(context, builder, args, leaves):
    """{d<i> name: uint32 IR} of the run-time integers found by :func:`_layout_arg`."""
    out = {}
    for i, (path, ty) in enumerate(leaves):
        v = args[path[0]]
        for k in path[1:]:
            v = builder.extract_value(v, k)
        out[f"d{i}"] = _to_u32(context, builder, ty, v)
    return out


def _layout_from(arg_types):
    """(the layout of make_layout(shape[, stride]) for these argument types, its leaves)."""
    leaves = []
    parts = [_layout_arg(t, (k,), leaves) for k, t in enumerate(arg_types)
             if t is not None and not isinstance(t, (types.NoneType, types.Omitted))]
    try:
        return Layout(*parts), leaves
    except (LayoutError, TypeError, ValueError) as e:
        raise TypingError(f"make_layout: {e}") from None


@type_callable(cute.make_layout)
def _type_make_layout(context):
    def typer(shape, stride=None):
        return LayoutType(_layout_from((shape, stride))[0])
    return typer


@lower_builtin(cute.make_layout, types.Any)
@lower_builtin(cute.make_layout, types.Any, types.Any)
def _make_layout(context, builder, sig, args):
    layout, leaves = _layout_from(sig.args)
    values = _leaf_values(context, builder, args, leaves)
    return _struct(context, builder, sig.return_type,
                   {n: values[n] for n in sig.return_type.dyn})


@type_callable(cute.make_identity_tensor)
def _type_identity(context):
    def typer(shape):
        layout, _ = _layout_from((shape,))
        rank = len(layout.shape) if isinstance(layout.shape, tuple) else 1
        return TensorType(None, make_identity_layout(layout.shape), coords=rank)
    return typer


@lower_builtin(cute.make_identity_tensor, types.Any)
def _make_identity(context, builder, sig, args):
    _, leaves = _layout_from(sig.args)
    ty = sig.return_type
    origin = context.make_tuple(builder, ty.offset_type, [ir.Constant(I32, 0)] * ty.coords)
    return _tensor_value(context, builder, ty, None, origin,
                         _leaf_values(context, builder, args, leaves))


# --- shared and register tensors ---------------------------------------------------------

def _static_shape(tensor, what):
    """The tensor's shape as Python ints, or a TypingError where an extent is run-time."""
    if any(not is_int(x) for x in flatten((tensor.layout.shape,))):
        raise TypingError(f"{what}: the shape {tensor.layout.shape} has run-time extents; "
                          "a register or shared tensor needs a static one")
    return cute._ints(tensor.layout.shape)


@type_callable(cute.make_fragment_like)
def _type_fragment(context):
    def typer(tensor, dtype):
        if isinstance(tensor, (TensorType, LayoutType)) and isinstance(dtype,
                                                                      types.NumberClass):
            shape = _static_shape(tensor, "make_fragment_like")
            return TensorType(types.Array(dtype.dtype, 1, "C"), Layout(shape))
    return typer


@type_callable(cute.make_shared_tensor)
def _type_shared_tensor(context):
    def typer(dtype, layout, offset=None):
        if isinstance(dtype, types.Array):          # a view of the block's shared array
            if offset is not None and not isinstance(offset, types.Integer):
                return None
            if isinstance(layout, LayoutType):
                return TensorType(dtype, layout.layout, "shared")
            if _is_composed(layout):
                sw, bits, inner = swizzled_layout(layout, "make_shared_tensor")
                return TensorType(dtype, inner, "shared", swizzle=sw, bits=bits)
            return None
        if offset is not None or not isinstance(dtype, types.NumberClass):
            return None
        array = types.Array(dtype.dtype, 1, "C")
        if isinstance(layout, LayoutType):
            if layout.dyn:
                raise TypingError(f"make_shared_tensor: {layout.layout} has run-time leaves; "
                                  "a shared tensor needs a static layout")
            return TensorType(array, layout.layout, "shared")
        if _is_composed(layout):
            sw, offset, inner = swizzled_layout(layout, "make_shared_tensor")
            return TensorType(array, inner, "shared", swizzle=sw, bits=offset)
    return typer


@lower_builtin(cute.make_shared_tensor, types.NumberClass, LayoutType)
@lower_builtin(cute.make_shared_tensor, types.NumberClass, StaticType)
def _make_shared_tensor(context, builder, sig, args):
    offset = 0
    if isinstance(sig.args[1], StaticType):
        offset = swizzled_layout(sig.args[1], "make_shared_tensor")[1]
    return _new_tensor(context, builder, sig.return_type, shared=True, offset=offset)


# a view of a shared array: make_tensor's lowering, the tensor's type saying "shared"
lower_builtin(cute.make_shared_tensor, types.Array, LayoutType)(_make_tensor_at_zero)
lower_builtin(cute.make_shared_tensor, types.Array, LayoutType, types.Integer)(_make_tensor_at)
lower_builtin(cute.make_shared_tensor, types.Array, StaticType)(_make_swizzled_tensor)
lower_builtin(cute.make_shared_tensor, types.Array, StaticType, types.Integer)(
    _make_swizzled_tensor)


@lower_builtin(cute.make_fragment_like, TensorType, types.NumberClass)
@lower_builtin(cute.make_fragment_like, LayoutType, types.NumberClass)
def _make_fragment(context, builder, sig, args):
    return _new_tensor(context, builder, sig.return_type, shared=False)


def _new_tensor(context, builder, tensor, shared, offset=0):
    """A new array, as numba allocates ``cuda.shared.array`` (a uniquely named shared
    global, 16-byte aligned for cp.async and ldmatrix, or to its swizzle's period) or
    ``cuda.local.array``, as a tensor at ``offset``: ``cosize(layout)`` elements, a whole
    number of periods of a swizzled tensor (the swizzle moves elements within one)."""
    where = ((_get_unique_smem_id("_cudapy_smem"), nvvm.ADDRSPACE_SHARED) if shared
             else ("_cudapy_lmem", nvvm.ADDRSPACE_LOCAL))
    n, align = offset + cute.cosize(tensor.layout), 16 if shared else None
    if tensor.swizzle is not None:
        period = cute.swizzle_period(tensor.swizzle)
        n = -(-n // period) * period
        align = max(16, period * tensor.array.dtype.bitwidth // 8)
    array = _generic_array(context, builder, shape=(n,), dtype=tensor.array.dtype,
                           symbol_name=where[0], addrspace=where[1], alignment=align)
    return _tensor_value(context, builder, tensor, array, ir.Constant(I32, offset))


# --- the algorithms ------------------------------------------------------------------------

def _is_tiled_copy(ty):
    return isinstance(ty, StaticType) and isinstance(ty.value, TiledCopy)


def _static_size(ty, what):
    if ty.dyn and any(not is_int(x) for x in flatten((ty.layout.shape,))):
        raise TypingError(f"{what}: {ty.layout} has run-time extents; it is unrolled over a "
                          "static shape")
    return cute.size(Layout(ty.layout.shape))


@type_callable(cute.copy)
def _type_copy(context):
    def typer(a, b, c=None, d=None, e=None, f=None):
        if f is not None and is_tma(a):
            check_tma_copy(a, b, c, d, e, f)
            return types.none
        if d is not None and e is None and is_tma(a):
            check_tma_store(a, b, c, d)
            return types.none
        if d is not None or e is not None or f is not None:
            return None                 # no copy of 4 or 5 arguments, nor of 6 without TMA
        tensors = (a, b) if c is None else (b, c)
        if data_tensors(*tensors) and (c is None or _is_tiled_copy(a)):
            for t in tensors:
                _static_size(t, "copy")
            if c is not None and a.value.atom.kind == "ldmatrix":
                _check_ldmatrix(a.value, b, c)
            return types.none
    return typer


def _check_ldmatrix(tiled, src, dst):
    try:
        cute.ldmatrix_shape(tiled, src.layout, dst.layout)
    except ValueError as e:
        raise TypingError(str(e)) from None
    if src.space != "shared":
        raise TypingError(f"copy: {tiled.atom.name} reads shared memory: the source must be "
                          "a shared tensor's partition")
    if not (isinstance(dst.dtype, types.Integer) and dst.dtype.bitwidth == 16):
        raise TypingError(f"copy: {tiled.atom.name} writes 16-bit values: the destination "
                          f"must hold uint16 (bf16 / f16 bits), got {dst.dtype}")


@type_callable(cute.copy_if)
def _type_copy_if(context):
    def typer(tiled, pred, src, dst):
        if _is_tiled_copy(tiled) and data_tensors(pred, src, dst):
            for t in (pred, src, dst):
                _static_size(t, "copy_if")
            return types.none
    return typer


def _instructions(tiled, src):
    try:
        return cute.copy_instructions(tiled, src.layout)
    except (TypeError, ValueError) as e:
        raise TypingError(str(e)) from None


def _array_start(context, builder, ty, tensor):
    """Pointer to element 0 of a tensor's array: an address that is always valid."""
    array = _fields(context, builder, ty, tensor)["array"]
    return context.make_array(ty.array)(context, builder, array).data


def _cp_async(context, builder, kind, nbytes, d, g, src_bytes=None):
    """One ``kind`` ("cp.async.ca" or "cp.async.cg") of ``nbytes`` from global ``g`` to
    shared ``d``; with ``src_bytes``, only those are read (the rest zeros)."""
    g64 = builder.ptrtoint(_in_space(builder, g, GLOBAL), ir.IntType(64))
    d32 = builder.ptrtoint(_in_space(builder, d, SHARED), I32)
    zfill = src_bytes is not None
    text, constraints = ptx.cp_async_asm(kind.split(".")[-1], nbytes, zfill)
    asm(builder, ir.VoidType(), text, constraints, [d32, g64] + ([src_bytes] if zfill else []),
        side_effect=True)


@lower_builtin(cute.copy, StaticType, TensorType, TensorType)
def _tiled_copy(context, builder, sig, args):
    tiled, (src, dst) = sig.args[0].value, sig.args[1:]
    if tiled.atom.kind == "universal":
        return _universal(context, builder, tiled, None, src, dst, None, args[1], args[2])
    if tiled.atom.kind == "ldmatrix":
        return _ldmatrix(context, builder, tiled, src, dst, args[1], args[2])
    per, nbytes, kind = _instructions(tiled, src)
    for r in range(_static_size(src, "copy") // per):
        _cp_async(context, builder, kind, nbytes, _at(context, builder, dst, args[2], r * per),
                  _at(context, builder, src, args[1], r * per))
    return context.get_dummy_value()


def _ldmatrix(context, builder, tiled, src, dst, src_value, dst_value):
    """One ldmatrix per group: the thread's row address in, its registers split into the
    16-bit values of the destination (value 2j + h: register j, half h)."""
    n, per_src, per_dst, _ = cute.ldmatrix_shape(tiled, src.layout, dst.layout)
    num = tiled.atom.num
    text, constraints, ret = ptx.ldmatrix_asm(num, tiled.atom.trans)
    i16 = ir.IntType(16)
    for r in range(n):
        row = _at(context, builder, src, src_value, r * per_src)
        address = builder.ptrtoint(_in_space(builder, row, SHARED), I32)
        regs = unpack(builder, asm(builder, ret, text, constraints, [address],
                                   side_effect=True, attrs=("convergent",)), num)
        for j, reg in enumerate(regs):
            for h in (0, 1):
                half = builder.trunc(builder.lshr(reg, ir.Constant(I32, 16 * h)), i16)
                at = r * per_dst + 2 * j + h
                builder.store(half, _at(context, builder, dst, dst_value, at))
    return context.get_dummy_value()


@lower_builtin(cute.copy_if, StaticType, TensorType, TensorType, TensorType)
def _tiled_copy_if(context, builder, sig, args):
    tiled, (pred, src, dst) = sig.args[0].value, sig.args[1:]
    per, nbytes, kind = _instructions(tiled, src)
    groups = _static_size(src, "copy_if") // per
    if _static_size(pred, "copy_if") != groups:
        raise TypingError(f"copy_if: the predicate has {cute.size(Layout(pred.layout.shape))} "
                          f"elements, the source {groups} groups of {per} values")
    if kind == "universal":
        return _universal(context, builder, tiled, pred, src, dst, *args[1:])
    base = _array_start(context, builder, src, args[2])
    for r in range(groups):
        p = context.cast(builder, builder.load(_at(context, builder, pred, args[1], r)),
                         pred.dtype, types.boolean)
        d = _at(context, builder, dst, args[3], r * per)
        g = _at(context, builder, src, args[2], r * per)
        # zero-fill where the predicate is false (from the array's start)
        _cp_async(context, builder, kind, nbytes, d, builder.select(p, g, base),
                  builder.select(p, ir.Constant(I32, nbytes), ir.Constant(I32, 0)))
    return context.get_dummy_value()


def _consecutive(tensor, first, per):
    """Whether elements ``first .. first + per - 1`` of a tensor are consecutive in its
    array wherever the tensor is (its layout's steps between them static ones; a swizzle
    moving no bit below ``per``'s)."""
    sw = tensor.swizzle
    if sw is not None and (1 << sw.base) < per:
        return False
    at = tensor.layout(first)
    for i in range(1, per):
        step = tensor.layout(first + i) - at
        if not (is_int(step) or getattr(step, "is_Integer", False)) or int(step) != i:
            return False
    return True


def _universal(context, builder, tiled, pred, src, dst, pred_value, src_value, dst_value):
    """A universal atom's copy (``pred`` None: of every group): each group of the atom's
    values, converted to the destination's type, one vector load where they are
    consecutive in ``src`` for every group, one vector store where they are in ``dst``
    (aligned as the atom's bits: partition_S/D check the offsets that are ints; run-time
    ones are the caller's promise), else one load or store each."""
    per, nbytes, _ = _instructions(tiled, src)
    n = _static_size(src, "copy")
    if n != _static_size(dst, "copy"):
        raise TypingError(f"copy: the tensors have {n} and {_static_size(dst, 'copy')} "
                          "elements")
    vector = per > 1 and all(_consecutive(dst, r * per, per) for r in range(n // per))
    loads = per > 1 and all(_consecutive(src, r * per, per) for r in range(n // per))
    for r in range(n // per):
        inside = (None if pred is None else context.cast(
            builder, builder.load(_at(context, builder, pred, pred_value, r)), pred.dtype,
            types.boolean))
        with cgutils.if_likely(builder, inside) if inside is not None else nullcontext():
            first = _at(context, builder, src, src_value, r * per)
            if loads:
                raw = _vector_load(builder, first, per, nbytes)
            else:
                raw = [builder.load(_at(context, builder, src, src_value, r * per + i))
                       for i in range(per)]
            values = [context.cast(builder, x, src.dtype, dst.dtype) for x in raw]
            if not vector:
                for i, value in enumerate(values):
                    builder.store(value, _at(context, builder, dst, dst_value, r * per + i))
                continue
            vec = _vector(builder, _words(builder, values))
            first = _at(context, builder, dst, dst_value, r * per)
            ptr = builder.bitcast(first, vec.type.as_pointer(first.type.addrspace))
            builder.store(vec, ptr, align=nbytes)
    return context.get_dummy_value()


def _vector_load(builder, first, per, nbytes):
    """``per`` consecutive values from ``first`` in one load of ``nbytes``: 16 bytes of
    narrower values as four 32-bit words split into their parts (NVPTX splits a vector of
    eight 16-bit values into two loads of 8 bytes), else a vector of the values."""
    ty = first.type.pointee
    bits = ty.width if isinstance(ty, ir.IntType) else 32
    space = first.type.addrspace
    if bits >= 32 or per * bits != 128:
        vty = ir.VectorType(ty, per)
        got = builder.load(builder.bitcast(first, vty.as_pointer(space)), align=nbytes)
        return [builder.extract_element(got, ir.Constant(I32, i)) for i in range(per)]
    k = 32 // bits
    got = builder.load(builder.bitcast(first, ir.VectorType(I32, 4).as_pointer(space)),
                       align=nbytes)
    words = [builder.extract_element(got, ir.Constant(I32, w)) for w in range(4)]
    return [builder.trunc(builder.lshr(word, ir.Constant(I32, i * bits)), ty)
            for word in words for i in range(k)]


def _words(builder, values):
    """Integers narrower than 32 bits packed into 32-bit words where they fill them (the
    first in the low bits, at the lower address), so that values split from one word (two
    16-bit halves of a packed conversion) are stored as that word; others as they are."""
    bits = values[0].type.width if isinstance(values[0].type, ir.IntType) else 32
    if bits >= 32 or len(values) * bits % 32:
        return values
    k = 32 // bits
    words = []
    for w in range(len(values) // k):
        word = ir.Constant(I32, 0)
        for i in range(k):
            part = builder.zext(values[w * k + i], I32)
            word = builder.or_(word, builder.shl(part, ir.Constant(I32, i * bits)))
        words.append(word)
    return words


def _vector(builder, values):
    """One value of ``values``: itself alone, else a vector of them."""
    if len(values) == 1:
        return values[0]
    vec = ir.Constant(ir.VectorType(values[0].type, len(values)), ir.Undefined)
    for i, value in enumerate(values):
        vec = builder.insert_element(vec, value, ir.Constant(I32, i))
    return vec


@type_callable(cute.gemm)
def _type_gemm(context):
    def typer(a, b, c, d=None, e=None):
        if is_wgmma_call((a, b, c, d) if e is None else (a, b, c, d, e)):
            return type_wgmma(a, b, c, d, e)
        if e is not None:
            return None
        args = (a, b, c) if d is None else (a, b, c, d)
        if len(args) == 4 and isinstance(args[0], StaticType) and isinstance(
                args[0].value, TiledMMA) and data_tensors(*args[1:]):
            atom = args[0].value.atom
            if not atom.name.startswith("UniversalFMA"):
                try:
                    op = cute.mma_shapes(atom, *(t.layout for t in args[1:]))[0]
                except (TypeError, ValueError) as e:
                    raise TypingError(str(e)) from None
                _check_mma_types(atom, op, *args[1:])
            return types.none
        if len(args) == 3 and data_tensors(*args):
            return types.none
    return typer


@type_callable(cute.fill)
def _type_fill(context):
    def typer(tensor, value):
        if data_tensors(tensor) and isinstance(value, types.Number):
            _static_size(tensor, "fill")
            return types.none
    return typer


@lower_builtin(cute.fill, TensorType, types.Number)
def _fill(context, builder, sig, args):
    tensor = sig.args[0]
    value = context.cast(builder, args[1], sig.args[1], tensor.dtype)
    for i in range(_static_size(tensor, "fill")):
        builder.store(value, _at(context, builder, tensor, args[0], i))
    return context.get_dummy_value()


@type_callable(cute.transform)
def _type_transform(context):
    def typer(tensor, fn):
        if not (data_tensors(tensor) and isinstance(fn, types.Dispatcher)):
            return None
        _static_size(tensor, "transform")       # (fn is typed on the element's type when
        return types.none                       # lowered: a dispatcher would need a GPU)
    return typer


@lower_builtin(cute.transform, TensorType, types.Dispatcher)
def _transform(context, builder, sig, args):
    tensor, fn = sig.args
    py_func = fn.dispatcher.py_func
    call = signature(tensor.dtype, tensor.dtype)   # the element's type in and out
    for i in range(_static_size(tensor, "transform")):
        ptr = _at(context, builder, tensor, args[0], i)
        value = context.compile_internal(builder, py_func, call, [builder.load(ptr)])
        builder.store(value, ptr)
    return context.get_dummy_value()


@lower_builtin(cute.copy, TensorType, TensorType)
def _copy(context, builder, sig, args):
    src, dst = sig.args
    n = _static_size(src, "copy")
    if n != _static_size(dst, "copy"):
        raise TypingError(f"copy: the tensors have {n} and {cute.size(Layout(dst.layout.shape))}"
                          " elements")
    for i in range(n):
        value = builder.load(_at(context, builder, src, args[0], i))
        value = context.cast(builder, value, src.dtype, dst.dtype)
        builder.store(value, _at(context, builder, dst, args[1], i))
    return context.get_dummy_value()


def _check_mma_types(atom, op, C, A, B):
    """TypingError unless C holds floats, and A and B floats (tf32) or 16-bit integers
    holding bf16 / f16 bits."""
    sixteen = not op.endswith("tf32")
    for name, ty in (("A", A), ("B", B)):
        ok = (isinstance(ty.dtype, types.Integer) and ty.dtype.bitwidth == 16 if sixteen
              else isinstance(ty.dtype, types.Float))
        if not ok:
            want = "uint16 (the bits of bf16 / f16)" if sixteen else "float32"
            raise TypingError(f"gemm: {atom.name} takes {want} {name} fragments, got "
                              f"{ty.dtype}")
    if not isinstance(C.dtype, types.Float):
        raise TypingError(f"gemm: {atom.name} accumulates into float C fragments, got "
                          f"{C.dtype}")


@lower_builtin(cute.gemm, StaticType, TensorType, TensorType, TensorType)
def _tiled_gemm(context, builder, sig, args):
    """gemm(tiled_mma, C, A, B): one mma.sync per (m, n, k), C kept in registers over k (A's
    and B's registers read once each, tf32's rounded once); UniversalFMA's FMAs."""
    atom = sig.args[0].value.atom
    C, A, B = sig.args[1:]
    if is_gmma(atom):
        return lower_wgmma(context, builder, sig, args)
    if atom.name.startswith("UniversalFMA"):
        return _gemm(context, builder, signature(types.none, C, A, B), args[1:])
    op, (vc, va, vb), (m, n, k) = cute.mma_shapes(atom, C.layout, A.layout, B.layout)
    text, constraints, ret = ptx.mma_asm(op)

    def registers(ty, value, per, j, kk):
        """The instruction's registers of an A or B fragment's values (v, j, kk)."""
        def load(v):
            crd = cute.mma_crd(ty.layout, v, j, kk)
            return builder.load(_at(context, builder, ty, value, crd))
        if op.endswith("tf32"):
            return [emit_cvt_rna_tf32(builder, context.cast(builder, load(v), ty.dtype,
                                                            types.float32))
                    for v in range(per)]
        out = []
        for v in range(0, per, 2):
            lo, hi = (builder.zext(load(v + h), I32) for h in (0, 1))
            out.append(builder.or_(lo, builder.shl(hi, ir.Constant(I32, 16))))
        return out
    a_regs = [[registers(A, args[2], va, i, kk) for kk in range(k)] for i in range(m)]
    b_regs = [[registers(B, args[3], vb, j, kk) for kk in range(k)] for j in range(n)]
    for i in range(m):
        for j in range(n):
            acc = [context.cast(builder, builder.load(_at(context, builder, C, args[1],
                                                          (v, i, j))), C.dtype, types.float32)
                   for v in range(vc)]
            for kk in range(k):
                a, b = a_regs[i][kk], b_regs[j][kk]
                acc = unpack(builder, asm(builder, ret, text, constraints, a + b + acc,
                                          attrs=("convergent", "readnone")), vc)
            for v in range(vc):
                builder.store(context.cast(builder, acc[v], types.float32, C.dtype),
                              _at(context, builder, C, args[1], (v, i, j)))
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


@type_callable(cute.axpby)
def _type_axpby(context):
    def typer(alpha, x, beta, y, coords=None, bound=None):
        if not (isinstance(alpha, types.Number) and isinstance(beta, types.Number)
                and data_tensors(x, y)):
            return None
        if not isinstance(y.dtype, types.Float):
            raise TypingError(f"axpby: y must hold floats, got {y.dtype}")
        n = _static_size(y, "axpby")
        if _static_size(x, "axpby") != n:
            raise TypingError(f"axpby: x and y have {_static_size(x, 'axpby')} and {n} "
                              "elements")
        if coords is not None and not isinstance(coords, (types.NoneType, types.Omitted)):
            if not (isinstance(coords, TensorType) and coords.coords
                    and _static_size(coords, "axpby") == n):
                raise TypingError(f"axpby: coords must be an identity tensor's partition of "
                                  f"{n} elements, got {coords}")
            if _int_leaves(bound) is None or len(_int_leaves(bound)) != coords.coords:
                raise TypingError(f"axpby: bound must be {coords.coords} integers, got {bound}")
        return types.none
    return typer


@lower_builtin(cute.axpby, types.Number, TensorType, types.Number, TensorType)
@lower_builtin(cute.axpby, types.Number, TensorType, types.Number, TensorType, TensorType,
               types.Any)
def _axpby(context, builder, sig, args):
    alpha_ty, x_ty, beta_ty, y_ty = sig.args[:4]
    f = y_ty.dtype
    alpha = context.cast(builder, args[0], alpha_ty, f)
    beta = context.cast(builder, args[2], beta_ty, f)
    bound = (None if len(args) < 6 else
             [context.cast(builder, v, t, types.int64)
              for t, v in _int_values(builder, sig.args[5], args[5])])

    def each(read_y):
        for i in range(_static_size(y_ty, "axpby")):
            inside = ir.Constant(ir.IntType(1), 1)
            if bound is not None:
                for c, b in zip(_identity_constant(context, builder, sig.args[4], args[4], i),
                                bound):
                    c64 = context.cast(builder, c, types.uint32, types.int64)
                    inside = builder.and_(inside, builder.icmp_signed("<", c64, b))
            with cgutils.if_likely(builder, inside):
                x = context.cast(builder, builder.load(_at(context, builder, x_ty, args[1], i)),
                                 x_ty.dtype, f)
                yp = _at(context, builder, y_ty, args[3], i)
                value = builder.fmul(alpha, x)
                if read_y:
                    value = builder.fadd(value, builder.fmul(beta, builder.load(yp)))
                builder.store(value, yp)

    zero = builder.fcmp_ordered("==", beta, ir.Constant(beta.type, 0))
    with builder.if_else(zero) as (then, otherwise):
        with then:
            each(False)
        with otherwise:
            each(True)
    return context.get_dummy_value()


# --- predicates ---------------------------------------------------------------------------

def _int_leaves(ty):
    if isinstance(ty, types.Integer):
        return [ty]
    if isinstance(ty, types.BaseTuple):
        return [x for t in ty.types for x in _int_leaves(t)]
    return None


@type_callable(cute.elem_less)
def _type_elem_less(context):
    def typer(crd, bound):
        a, b = _int_leaves(crd), _int_leaves(bound)
        if a is None or b is None:
            return None
        if len(a) != len(b):
            raise TypingError(f"elem_less: {crd} and {bound} differ in rank")
        return types.boolean
    return typer


def _int_values(builder, ty, value):
    if isinstance(ty, types.Integer):
        return [(ty, value)]
    return [x for k, t in enumerate(ty.types)
            for x in _int_values(builder, t, builder.extract_value(value, k))]


@lower_builtin(cute.elem_less, types.Any, types.Any)
def _elem_less(context, builder, sig, args):
    out = ir.Constant(ir.IntType(1), 1)
    for (ta, a), (tb, b) in zip(_int_values(builder, sig.args[0], args[0]),
                                _int_values(builder, sig.args[1], args[1])):
        a64 = context.cast(builder, a, ta, types.int64)
        b64 = context.cast(builder, b, tb, types.int64)
        out = builder.and_(out, builder.icmp_signed("<", a64, b64))
    return out
