"""numba typing and lowering of :mod:`gemm.cute`'s Hopper operations: wgmma, ``gemm(tiled_mma,
acc, A, B[, accumulate])`` for an SM90 GMMA atom, one ``wgmma.mma_async`` per (k, m, n) block
of :func:`gemm.cute._gmma.wgmma_plan`, each descriptor its static bits plus the block's shared
address >> 4; and TMA tiles, ``copy(tma, tensor_map, origin, dst, bars, bar)`` (loads) and
``copy(tma, tensor_map, origin, src)`` (stores), one bulk tensor copy per box."""

from llvmlite import ir
from numba.cuda import types
from numba.cuda.core.errors import TypingError
from numba.cuda.extending import lower_builtin

from gemm.cute import _python as cute    # the objects gemm.cute re-exports
from gemm.cute._gmma import START_MASK, is_gmma, wgmma_plan
from gemm.cute._numba import (I32, StaticType, TensorType, _fields, _in_space, _pointer,
                              data_tensors)
from layoutalg.atom.tma import TmaCopy
from gemm.arch import sm90
from gemm.arch.tile_plan import WGMMA_BITS
from gemm.arch._lowering import (I64, SHARED, check_array, check_int, shared_base,
                                  to_int)

__all__ = ["is_wgmma_call", "type_wgmma", "lower_wgmma", "is_tma", "check_tma_copy",
           "check_tma_store"]


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
    atom = tiled.value.atom
    for what, t, elem in (("A", A, atom.a_type), ("B", B, atom.b_type)):
        want = types.Float if elem == "tf32" else types.Integer
        if not isinstance(t.dtype, want):
            raise TypingError(f"gemm: {name} reads {what} from shared memory as "
                              + ("float32" if want is types.Float else
                                 f"{WGMMA_BITS[elem]}-bit integers ({elem} bits)")
                              + f", got {t.dtype}")
    if accumulate is not None and not isinstance(accumulate, (types.Integer, types.Boolean)):
        raise TypingError(f"gemm: accumulate must be an integer or a bool, got {accumulate}")
    try:
        _plan(tiled, C, A, B)
    except ValueError as e:
        raise TypingError(str(e)) from None
    return types.none


def _start(context, builder, ty, value):
    """i64: a descriptor's start field, (shared address >> 4) & START_MASK, of the tensor's
    own offset. The address is the array's base plus the offset's bytes, and the shift is
    taken of each alone, the carry of their low 4 bits added (exact for any base): where the
    base's alignment is known (an array declared ``alignment=`` 16 or more), the carry and
    the pads to that alignment fold away, as CuTe's descriptor iterators add a stage's
    offset to one descriptor."""
    fields = _fields(context, builder, ty, value)
    base, step = shared_base(context, builder, ty.array, fields["array"])
    off = builder.mul(builder.add(builder.trunc(fields["offset"], I32), ir.Constant(I32, ty.const)),
                      step)
    four, low = ir.Constant(I32, 4), ir.Constant(I32, 15)
    carry = builder.lshr(builder.add(builder.and_(base, low), builder.and_(off, low)), four)
    field = builder.add(builder.add(builder.lshr(base, four), builder.lshr(off, four)), carry)
    return builder.zext(builder.and_(field, ir.Constant(I32, START_MASK)), I64)


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


# --- TMA tiles: loads (six arguments) and stores (four) -------------------------------------

def is_tma(ty):
    """Whether a numba type is a kernel constant TmaCopy."""
    return isinstance(ty, StaticType) and isinstance(ty.value, TmaCopy)


def check_tma_store(tma, tensor_map, origin, src):
    """TypingError unless ``copy(tma, tensor_map, origin, src)`` (a TMA store) can run."""
    check_array("copy", "the tensor map", tensor_map, itemsizes=(8,))
    _check_tma_tile(tma, origin, src, "src")


def _check_tma_tile(tma, origin, smem, what):
    """TypingError unless ``origin`` is 2 or 3 integers and ``smem`` a data tensor of the
    copy's element size holding its tile."""
    copy = tma.value
    if not (isinstance(origin, types.BaseTuple) and len(origin) in (2, 3)
            and all(isinstance(t, types.Integer) for t in origin)):
        raise TypingError(f"copy: the tile's origin must be integers (mn, k) or, in a 3-D map "
                          f"(a batch of matrices), (mn, k, matrix), got {origin}")
    if not data_tensors(smem):
        raise TypingError(f"copy: {what} must be a data tensor in shared memory, got {smem}")
    if smem.dtype.bitwidth != copy.bits:
        raise TypingError(f"copy: the TMA copy moves {copy.bits}-bit elements, {what} holds "
                          f"{smem.dtype}")
    span = max(b.smem_offset for b in copy.boxes) + copy.box[0] * copy.box[1]
    if not smem.dyn and cute.cosize(smem.layout) < span:
        raise TypingError(f"copy: {what} ({smem.layout}) holds {cute.cosize(smem.layout)} "
                          f"elements, the TMA tile spans {span}")


def check_tma_copy(tma, tensor_map, origin, dst, bars, bar):
    """TypingError unless ``copy(tma, tensor_map, (mn, k), dst, bars, bar)`` can run: the
    map an array of 8-byte words, two integer coordinates, ``dst`` a data tensor of the
    copy's element size holding the tile, ``bars`` 8-byte mbarriers and ``bar`` an
    integer (the arrays checked as gemm.arch checks its own)."""
    check_array("copy", "the tensor map", tensor_map, itemsizes=(8,))
    check_array("copy", "bars", bars, itemsizes=(8,))
    check_int("copy", "bar", bar)
    _check_tma_tile(tma, origin, dst, "dst")


@lower_builtin(cute.copy, StaticType, types.Array, types.BaseTuple, TensorType, types.Array,
               types.Integer)
def _tma_copy(context, builder, sig, args):
    """One ``cp.async.bulk.tensor`` (2d, or 3d for an origin naming a matrix) per box of the
    TMA copy, to ``dst``'s element at the box's offset, at the tile's origin plus the box's
    coordinates (the map's order: its contiguous dimension first), completing on
    ``bars[bar]``."""
    copy, (map_ty, origin_ty, dst_ty, bars_ty, bar_ty) = sig.args[0].value, sig.args[1:]
    _, tensor_map, origin, dst, bars, bar = args
    tmap = builder.ptrtoint(context.make_array(map_ty)(context, builder, tensor_map).data,
                            ir.IntType(64))
    at_bar = sm90.mbarrier_address(context, builder, bars_ty, bars, bar_ty, bar)
    for d32, at in _tma_boxes(context, builder, copy, origin_ty, origin, dst_ty, dst):
        sm90.emit_tma_load(builder, d32, tmap, at, at_bar)
    return context.get_dummy_value()


def _tma_boxes(context, builder, copy, origin_ty, origin, smem_ty, smem):
    """(32-bit shared address, map coordinates) of each box of a TMA tile at ``origin``."""
    mn, k, *matrix = (to_int(builder, origin_ty[i], builder.extract_value(origin, i), 32)
                      for i in range(len(origin_ty)))
    c0, c1 = (k, mn) if copy.major == "K" else (mn, k)
    for box in copy.boxes:
        ptr = _pointer(context, builder, smem_ty, smem, ir.Constant(I32, box.smem_offset))
        at = [builder.add(c, ir.Constant(I32, x)) for c, x in zip((c0, c1), box.coords)]
        yield builder.ptrtoint(_in_space(builder, ptr, SHARED), I32), at + matrix


@lower_builtin(cute.copy, StaticType, types.Array, types.BaseTuple, TensorType)
def _tma_store(context, builder, sig, args):
    """One ``cp.async.bulk.tensor`` store (2d, or 3d for an origin naming a matrix) per box
    of the TMA copy, from ``src``'s element at the box's offset, in the thread's bulk group."""
    copy, (map_ty, origin_ty, src_ty) = sig.args[0].value, sig.args[1:]
    _, tensor_map, origin, src = args
    tmap = builder.ptrtoint(context.make_array(map_ty)(context, builder, tensor_map).data,
                            ir.IntType(64))
    for s32, at in _tma_boxes(context, builder, copy, origin_ty, origin, src_ty, src):
        sm90.emit_tma_store(builder, s32, tmap, at)
    return context.get_dummy_value()
