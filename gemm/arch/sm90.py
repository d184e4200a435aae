"""Hopper (sm_90a) instructions as numba-cuda intrinsics: warpgroup MMA (wgmma) and the fences
around it, mbarriers and TMA loads: the first pieces of the Hopper instruction layer (issue
12), TMA stores and named barriers. They need ``compute_90a`` (numba-cuda compiles
for it on a 9.x device; ``compile_ptx(..., cc=(9, 0, "a"))`` on a CPU). Simulator twins:
:mod:`gemm.arch.sim_sm90` has them all (the TMA copies over its own stand-in maps), and the
Hopper kernel runs on them in the simulator.

- ``wgmma_fence()``: ``wgmma.fence.sync.aligned``, before the first wgmma that reads
  registers or shared memory written since the last fence;
- ``wgmma_commit()``: ``wgmma.commit_group.sync.aligned``;
- ``wgmma_wait(n)``: ``wgmma.wait_group.sync.aligned n`` (n a literal);
- ``fence_proxy_async()``: ``fence.proxy.async.shared::cta``: ordinary shared-memory stores
  become visible to the async proxy (wgmma, TMA);
- ``smem_desc(smem, bits)``: a wgmma matrix descriptor for shared array ``smem``: ``bits`` is
  a descriptor encoded for address 0 (layoutalg.atom.gmma.GmmaDescriptor.encode(), uint64),
  the array's shared address (>> 4) is added;
- mbarriers (``bars[idx]`` of a shared uint64 array): ``mbarrier_init(bars, idx, count)``,
  ``fence_mbarrier_init()`` (before other threads use it), ``mbarrier_arrive(bars, idx)``,
  ``mbarrier_arrive_expect_tx(bars, idx, nbytes)``, ``mbarrier_wait(bars, idx, parity)``
  (spins on ``try_wait.parity`` until the phase of that parity completes);
- ``tma_load_2d(smem, idx, tensor_map, c0, c1, bars, bar)``: a TMA box load of the tensor map
  (a device array holding the 128-byte ``CUtensorMap``, read through its global address) at
  coordinates (c0, c1), contiguous dimension first, to element ``idx`` of ``smem``, completing
  its bytes on mbarrier ``bars[bar]``; ``tma_load_3d(smem, idx, tensor_map, c0, c1, c2, bars,
  bar)`` the same in a 3-D map (the third coordinate: which matrix of a batch);
- ``tma_store_2d(smem, idx, tensor_map, c0, c1)`` / ``tma_store_3d(..., c2)``: a TMA box
  store from element ``idx`` of ``smem`` to the map at the coordinates (clipped to the
  extents), in the thread's bulk group; ``bulk_commit()`` closes the group,
  ``bulk_wait_read(n)`` waits until at most ``n`` groups still read shared memory,
  ``bulk_wait(n)`` until at most ``n`` are pending. Shared stores before a TMA store need
  ``fence_proxy_async()`` in each writing thread, then a barrier;
- ``named_barrier(idx, count)``: ``bar.sync idx, count`` (a warpgroup's own barrier);
- ``setmaxnreg_inc(n)`` / ``setmaxnreg_dec(n)``: ``setmaxnreg.{inc,dec}.sync.aligned.u32 n``
  (n a literal multiple of 8 in 24..256), executed by a whole warpgroup: the warp-specialized
  kernel gives its producer's registers to the consumers (the kernel needs launch bounds);
- ``elect_one()``: ``elect.sync`` over the full warp: True in exactly one lane;
- ``split_tf32_tile(chunks, step)(smem, src, dst)``: 3xTF32's split of float32 operands
  in shared memory: for each of ``chunks`` 16-byte chunks (``step`` bytes apart) at byte
  ``src`` of uint8 array ``smem``, the four floats' small parts to byte ``dst`` (same step):
  ``x - big`` rounded to tf32 (to nearest, ties away), where ``big`` is ``x`` with its 13
  low bits cleared (what wgmma's tf32 reads of ``x`` itself); 0 where x is inf or NaN (so
  that big alone carries them). Returns 1 where one of the values was inf or NaN;
  ``clear_nonfinite_tile(chunks, step)(smem, at)`` sets those to 0 in place;
  ``named_barrier_or(idx, count, flag)``: ``bar.red.or.pred``, a named barrier that returns
  whether any of its threads passed a nonzero ``flag``;
- ``shared_offset_of(smem, align)``: elements to skip from shared array ``smem`` so that its
  shared address is a multiple of ``align`` bytes (swizzled stages need 1024);
- ``wgmma_tile(op, n, trans_a, trans_b, first=0)(acc, desc_a, desc_b, scale_d)``: one
  ``wgmma.mma_async`` of shape m64n{n}k{16, 8 or 32} (``op`` "bf16", "f16", "tf32", or
  the FP8 ones: "e4m3", "e5m2", "e4m3.e5m2" and "e5m2.e4m3", A's type first), the
  ``n // 2`` f32 accumulators of each thread at ``acc[first:]`` (read and written);
  ``scale_d`` 0 ignores ``acc`` (D = A B), else D = A B + D. ``trans_a`` / ``trans_b``: the
  MN-major (transposed) forms, 16-bit types only. Each descriptor reaches the instruction
  as two 32-bit halves joined inside the asm (``mov.b64 d, {lo, hi}``): with the 64-bit
  sums in the PTX, ptxas 13.0 was seen (H100, 2026-11-25) to drop the constant high word of
  ``descriptor + constant`` in a loop it had unrolled, so that wgmma read a wrong swizzle;
  kernels add run-time offsets to the low word only (:mod:`gemm.cute._numba_sm90`).
"""

from functools import lru_cache

from llvmlite import ir
from numba.cuda import types
from numba.cuda.extending import intrinsic

from gemm.arch._lowering import (F32, I32, I64, VOID, TypingError, array_data, asm,
                                 check_array, check_int, fence_intrinsic, global_address,
                                 literal_int, shared_base, to_int, unpack,
                                 wait_group_intrinsic)
from gemm.arch.tile_plan import (WGMMA_BITS, WGMMA_TYPES, check_wgmma, chunk_offsets,
                                 wgmma_types)

__all__ = ["wgmma_fence", "wgmma_commit", "wgmma_wait", "fence_proxy_async", "smem_desc",
           "wgmma_tile", "WGMMA_TYPES", "fence_mbarrier_init", "mbarrier_init",
           "mbarrier_arrive", "mbarrier_arrive_expect_tx", "mbarrier_wait", "tma_load_2d",
           "tma_load_3d", "tma_store_2d", "tma_store_3d", "bulk_load", "bulk_commit",
           "bulk_wait_read", "bulk_wait", "named_barrier", "setmaxnreg_inc", "setmaxnreg_dec",
           "elect_one", "shared_offset_of", "split_tf32_tile", "clear_nonfinite_tile",
           "named_barrier_or"]



wgmma_fence = fence_intrinsic(
    "wgmma_fence", "wgmma.fence.sync.aligned;",
    "``wgmma.fence.sync.aligned``: order the warpgroup's register and shared-memory accesses "
    "before the next wgmma.")
wgmma_commit = fence_intrinsic(
    "wgmma_commit", "wgmma.commit_group.sync.aligned;",
    "``wgmma.commit_group.sync.aligned``: close the group of wgmma issued since the last "
    "commit.")
fence_proxy_async = fence_intrinsic(
    "fence_proxy_async", "fence.proxy.async.shared::cta;",
    "``fence.proxy.async.shared::cta``: ordinary shared-memory stores become visible to the "
    "async proxy (wgmma, TMA).")
wgmma_wait = wait_group_intrinsic(
    "wgmma_wait", "wgmma.wait_group.sync.aligned",
    "``wgmma.wait_group.sync.aligned n``: wait until at most ``n`` (a literal) wgmma groups "
    "of this warpgroup are pending.")


@intrinsic
def smem_desc(typingctx, smem, bits):
    """A wgmma descriptor for shared array ``smem``: ``bits`` (uint64, the descriptor encoded
    for address 0) plus the array's shared address >> 4 (the 14-bit start-address field: the
    CTA's own window, without the cluster rank bits of a shared::cta address)."""
    check_array("smem_desc", "smem", smem)
    check_int("smem_desc", "bits", bits)

    def codegen(context, builder, sig, args):
        base, _ = shared_base(context, builder, sig.args[0], args[0])
        addr = builder.and_(builder.lshr(base, ir.Constant(I32, 4)), ir.Constant(I32, 0x3FFF))
        return builder.add(to_int(builder, sig.args[1], args[1], 64), builder.zext(addr, I64))
    return types.uint64(smem, bits), codegen


def emit_wgmma(builder, op, n, trans_a, trans_b, acc, desc_a, desc_b, scale_d):
    """Emit one ``wgmma.mma_async`` m64n{n}: ``acc`` the n/2 pointers to the thread's float32
    accumulators (read and written back), ``desc_a`` / ``desc_b`` i64 descriptors,
    ``scale_d`` i32 (0: D = A B, else D = A B + D)."""
    nc = n // 2
    regs = ", ".join(f"${i}" for i in range(nc))
    a, b = wgmma_types(op)
    trans = "" if WGMMA_BITS[a] != 16 else f", {int(bool(trans_a))}, {int(bool(trans_b))}"
    text = ("{ .reg .pred p; .reg .b64 da, db; "
            f"mov.b64 da, {{${nc}, ${nc + 1}}}; mov.b64 db, {{${nc + 2}, ${nc + 3}}}; "
            f"setp.ne.b32 p, ${nc + 4}, 0; "
            f"wgmma.mma_async.sync.aligned.m64n{n}k{WGMMA_TYPES[op]}.f32.{a}.{b} "
            f"{{{regs}}}, da, db, p, 1, 1{trans}; }}")
    constraints = ",".join(["=f"] * nc + ["r"] * 5 + [str(i) for i in range(nc)]
                           + ["~{memory}"])
    halves = []
    for d in (desc_a, desc_b):
        halves += [builder.trunc(d, I32), builder.trunc(builder.lshr(d, ir.Constant(I64, 32)),
                                                         I32)]
    out = asm(builder, ir.LiteralStructType([F32] * nc), text, constraints,
              halves + [scale_d] + [builder.load(p) for p in acc], side_effect=True)
    for p, v in zip(acc, unpack(builder, out, nc)):
        builder.store(v, p)


@lru_cache(maxsize=None)
def wgmma_tile(op, n, trans_a=False, trans_b=False, first=0):
    """The intrinsic ``f(acc, desc_a, desc_b, scale_d)`` issuing one wgmma.mma_async on
    accumulators ``acc[first .. first + n/2)``."""
    check_wgmma(op, n, trans_a, trans_b, first)
    name = f"wgmma_tile_{op}_n{n}_{first}"

    def impl(typingctx, acc, desc_a, desc_b, scale_d):
        check_array(name, "acc", acc, itemsizes=(4,))
        if not isinstance(acc.dtype, types.Float) or acc.ndim != 1:
            raise TypingError(f"{name}: acc must be a 1-D float32 local array, got {acc}")
        for what, ty in (("desc_a", desc_a), ("desc_b", desc_b), ("scale_d", scale_d)):
            check_int(name, what, ty)

        def codegen(context, builder, sig, args):
            data = array_data(context, builder, sig.args[0], args[0])
            ptrs = [builder.gep(data, [ir.Constant(I64, first + i)]) for i in range(n // 2)]
            da, db = (to_int(builder, t, a, 64) for t, a in zip(sig.args[1:3], args[1:3]))
            emit_wgmma(builder, op, n, trans_a, trans_b, ptrs, da, db,
                       to_int(builder, sig.args[3], args[3], 32))
            return context.get_dummy_value()
        return types.none(acc, desc_a, desc_b, scale_d), codegen
    impl.__name__ = impl.__qualname__ = name
    return intrinsic(impl)


# --- mbarriers and TMA --------------------------------------------------------------------

fence_mbarrier_init = fence_intrinsic(
    "fence_mbarrier_init", "fence.mbarrier_init.release.cluster;",
    "``fence.mbarrier_init.release.cluster``: make mbarrier initialisations visible.")


def mbarrier_address(context, builder, bars_ty, bars, idx_ty, idx):
    """32-bit shared address of mbarrier ``bars[idx]`` (8-byte elements)."""
    base, step = shared_base(context, builder, bars_ty, bars)
    return builder.add(base, builder.mul(to_int(builder, idx_ty, idx, 32), step))


def _bar(context, builder, sig, args, k):
    """:func:`mbarrier_address` of ``args[k][args[k + 1]]``."""
    return mbarrier_address(context, builder, sig.args[k], args[k], sig.args[k + 1],
                            args[k + 1])


def _check_bars(op, bars, idx):
    check_array(op, "bars", bars, itemsizes=(8,))
    check_int(op, "idx", idx)


@intrinsic
def mbarrier_init(typingctx, bars, idx, count):
    """``mbarrier.init.shared::cta.b64 [bars + idx], count``."""
    _check_bars("mbarrier_init", bars, idx)
    check_int("mbarrier_init", "count", count)

    def codegen(context, builder, sig, args):
        asm(builder, VOID, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}",
            [_bar(context, builder, sig, args, 0), to_int(builder, sig.args[2], args[2], 32)],
            side_effect=True)
        return context.get_dummy_value()
    return types.none(bars, idx, count), codegen


@intrinsic
def mbarrier_arrive(typingctx, bars, idx):
    """``mbarrier.arrive.shared::cta.b64 _, [bars + idx]``."""
    _check_bars("mbarrier_arrive", bars, idx)

    def codegen(context, builder, sig, args):
        asm(builder, VOID, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}",
            [_bar(context, builder, sig, args, 0)], side_effect=True)
        return context.get_dummy_value()
    return types.none(bars, idx), codegen


@intrinsic
def mbarrier_arrive_expect_tx(typingctx, bars, idx, nbytes):
    """``mbarrier.arrive.expect_tx.shared::cta.b64 _, [bars + idx], nbytes``: arrive and
    expect ``nbytes`` of asynchronous (TMA) writes before the phase completes."""
    _check_bars("mbarrier_arrive_expect_tx", bars, idx)
    check_int("mbarrier_arrive_expect_tx", "nbytes", nbytes)

    def codegen(context, builder, sig, args):
        asm(builder, VOID, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
            "r,r,~{memory}",
            [_bar(context, builder, sig, args, 0), to_int(builder, sig.args[2], args[2], 32)],
            side_effect=True)
        return context.get_dummy_value()
    return types.none(bars, idx, nbytes), codegen


@intrinsic
def mbarrier_wait(typingctx, bars, idx, parity):
    """Wait until the phase of ``parity`` (0 or 1) of mbarrier ``bars[idx]`` completes
    (``mbarrier.try_wait.parity`` in a loop)."""
    _check_bars("mbarrier_wait", bars, idx)
    check_int("mbarrier_wait", "parity", parity)
    text = ("{ .reg .pred p; WAIT: mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1; "
            "@!p bra WAIT; }")

    def codegen(context, builder, sig, args):
        asm(builder, VOID, text, "r,r,~{memory}",
            [_bar(context, builder, sig, args, 0), to_int(builder, sig.args[2], args[2], 32)],
            side_effect=True)
        return context.get_dummy_value()
    return types.none(bars, idx, parity), codegen


def _check_tma(op, smem, idx, tensor_map, coords):
    check_array(op, "smem", smem)
    check_int(op, "idx", idx)
    check_array(op, "tensor_map", tensor_map, itemsizes=(8,))
    for i, ty in enumerate(coords):
        check_int(op, f"c{i}", ty)


def _tma_operands(context, builder, sig, args, rank):
    """[shared address of ``smem[idx]``, the map's global address, the coordinates]."""
    base, step = shared_base(context, builder, sig.args[0], args[0])
    at = builder.add(base, builder.mul(to_int(builder, sig.args[1], args[1], 32), step))
    tmap = builder.ptrtoint(array_data(context, builder, sig.args[2], args[2]), I64)
    return [at, tmap] + [to_int(builder, sig.args[k], args[k], 32) for k in range(3, 3 + rank)]


def _tma_load(smem, idx, tensor_map, coords, bars, bar):
    """Typing and lowering of ``tma_load_{rank}d`` with ``coords`` the coordinates' types:
    ``cp.async.bulk.tensor.{rank}d...mbarrier::complete_tx::bytes``."""
    rank = len(coords)
    op = f"tma_load_{rank}d"
    _check_tma(op, smem, idx, tensor_map, coords)
    _check_bars(op, bars, bar)

    def codegen(context, builder, sig, args):
        at, tmap, *crd = _tma_operands(context, builder, sig, args, rank)
        emit_tma_load(builder, at, tmap, crd, _bar(context, builder, sig, args, 3 + rank))
        return context.get_dummy_value()
    return types.none(smem, idx, tensor_map, *coords, bars, bar), codegen


def emit_tma_load(builder, dst, tensor_map, coords, bar):
    """``cp.async.bulk.tensor.{rank}d...mbarrier::complete_tx::bytes``: the box at ``coords``
    (32-bit IR values, the map's contiguous dimension first) of the map at 64-bit address
    ``tensor_map`` to 32-bit shared address ``dst``, completing on the mbarrier at shared
    address ``bar``."""
    rank = len(coords)
    places = ", ".join(f"${2 + i}" for i in range(rank))
    text = (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx"
            f"::bytes [$0], [$1, {{{places}}}], [${2 + rank}];")
    asm(builder, VOID, text, "r,l," + "r," * rank + "r,~{memory}",
        [dst, tensor_map, *coords, bar], side_effect=True)


@intrinsic
def tma_load_2d(typingctx, smem, idx, tensor_map, c0, c1, bars, bar):
    """The box at (c0, c1) of ``tensor_map`` to element ``idx`` of shared ``smem``, completing
    on mbarrier ``bars[bar]``."""
    return _tma_load(smem, idx, tensor_map, (c0, c1), bars, bar)


@intrinsic
def tma_load_3d(typingctx, smem, idx, tensor_map, c0, c1, c2, bars, bar):
    """:func:`tma_load_2d` in a 3-D map: ``c2`` says which matrix of a batch."""
    return _tma_load(smem, idx, tensor_map, (c0, c1, c2), bars, bar)


@intrinsic
def bulk_load(typingctx, smem, idx, src, start, nbytes, bars, bar):
    """``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes``: ``nbytes`` (a
    multiple of 16) from element ``start`` of global ``src`` to element ``idx`` of shared
    ``smem`` (both addresses 16-byte aligned), completing on mbarrier ``bars[bar]``: a
    contiguous run, no tensor map."""
    op = "bulk_load"
    check_array(op, "smem", smem)
    check_array(op, "src", src)
    for name, ty in (("idx", idx), ("start", start), ("nbytes", nbytes)):
        check_int(op, name, ty)
    _check_bars(op, bars, bar)

    def codegen(context, builder, sig, args):
        base, step = shared_base(context, builder, sig.args[0], args[0])
        dst = builder.add(base, builder.mul(to_int(builder, sig.args[1], args[1], 32), step))
        first = global_address(context, builder, sig.args[2], args[2], sig.args[3], args[3])
        asm(builder, VOID, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
            "[$0], [$1], $2, [$3];", "r,l,r,r,~{memory}",
            [dst, first, to_int(builder, sig.args[4], args[4], 32),
             _bar(context, builder, sig, args, 5)], side_effect=True)
        return context.get_dummy_value()
    return types.none(smem, idx, src, start, nbytes, bars, bar), codegen


def _tma_store(smem, idx, tensor_map, coords):
    """Typing and lowering of ``tma_store_{rank}d``: ``cp.async.bulk.tensor.{rank}d.global.
    shared::cta.bulk_group``."""
    rank = len(coords)
    _check_tma(f"tma_store_{rank}d", smem, idx, tensor_map, coords)

    def codegen(context, builder, sig, args):
        src, tmap, *crd = _tma_operands(context, builder, sig, args, rank)
        emit_tma_store(builder, src, tmap, crd)
        return context.get_dummy_value()
    return types.none(smem, idx, tensor_map, *coords), codegen


def emit_tma_store(builder, src, tensor_map, coords):
    """``cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group``: the box at
    ``coords`` (32-bit IR values, the map's contiguous dimension first) of the map at 64-bit
    address ``tensor_map`` from 32-bit shared address ``src``, in the thread's bulk group."""
    rank = len(coords)
    places = ", ".join(f"${2 + i}" for i in range(rank))
    text = (f"cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group "
            f"[$1, {{{places}}}], [$0];")
    asm(builder, VOID, text, "r,l," + "r," * rank + "~{memory}", [src, tensor_map, *coords],
        side_effect=True)


@intrinsic
def tma_store_2d(typingctx, smem, idx, tensor_map, c0, c1):
    """The box of ``tensor_map`` at (c0, c1) from element ``idx`` of shared ``smem`` (the
    parts outside the map's extents are not written), in this thread's bulk group."""
    return _tma_store(smem, idx, tensor_map, (c0, c1))


@intrinsic
def tma_store_3d(typingctx, smem, idx, tensor_map, c0, c1, c2):
    """:func:`tma_store_2d` in a 3-D map: ``c2`` says which matrix of a batch."""
    return _tma_store(smem, idx, tensor_map, (c0, c1, c2))


bulk_commit = fence_intrinsic(
    "bulk_commit", "cp.async.bulk.commit_group;",
    "``cp.async.bulk.commit_group``: close this thread's group of bulk (TMA store) copies.")
bulk_wait_read = wait_group_intrinsic(
    "bulk_wait_read", "cp.async.bulk.wait_group.read",
    "``cp.async.bulk.wait_group.read n``: wait until at most ``n`` (a literal) of this "
    "thread's bulk groups still read their shared memory (which may then be written).")
bulk_wait = wait_group_intrinsic(
    "bulk_wait", "cp.async.bulk.wait_group",
    "``cp.async.bulk.wait_group n``: wait until at most ``n`` (a literal) of this thread's "
    "bulk groups are pending (their writes done).")


@intrinsic
def named_barrier(typingctx, idx, count):
    """``bar.sync idx, count``: wait until ``count`` (a literal multiple of 32) threads of the
    block have arrived at barrier ``idx`` (1..15; 0 is ``cuda.syncthreads``)."""
    check_int("named_barrier", "idx", idx)
    n = literal_int("named_barrier", "count", count)
    if n <= 0 or n % 32:
        raise TypingError(f"named_barrier: count must be a positive multiple of 32, got {n}")

    def codegen(context, builder, sig, args):
        asm(builder, VOID, f"bar.sync $0, {n};", "r,~{memory}",
            [to_int(builder, sig.args[0], args[0], 32)], side_effect=True)
        return context.get_dummy_value()
    return types.none(idx, count), codegen


# --- warp specialization ------------------------------------------------------------------

def _setmaxnreg(direction):
    name = f"setmaxnreg_{direction}"

    def impl(typingctx, n):
        regs = literal_int(name, "n", n)
        if not (24 <= regs <= 256 and regs % 8 == 0):
            raise TypingError(f"{name}: n must be a multiple of 8 in 24..256, got {regs}")

        def codegen(context, builder, sig, args):
            asm(builder, VOID, f"setmaxnreg.{direction}.sync.aligned.u32 {regs};", "~{memory}",
                [], side_effect=True)
            return context.get_dummy_value()
        return types.none(n), codegen
    impl.__name__ = impl.__qualname__ = name
    fn = intrinsic(impl)
    fn.__doc__ = (f"``setmaxnreg.{direction}.sync.aligned.u32 n``: the warpgroup's registers per "
                  f"thread {'raised' if direction == 'inc' else 'lowered'} to ``n``.")
    return fn


setmaxnreg_inc = _setmaxnreg("inc")
setmaxnreg_dec = _setmaxnreg("dec")


@intrinsic
def elect_one(typingctx):
    """``elect.sync`` over the whole warp: True in one lane (the same lane in every call)."""
    text = "{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 $0, 1, 0, p; }"

    def codegen(context, builder, sig, args):
        r = asm(builder, ir.IntType(32), text, "=r", [], side_effect=True)
        return builder.icmp_unsigned("!=", r, ir.Constant(ir.IntType(32), 0))
    return types.boolean(), codegen


@intrinsic
def shared_offset_of(typingctx, smem, align):
    """Elements to skip from shared array ``smem`` to the next multiple of ``align`` bytes
    (a power of two) in the shared window (uint32)."""
    check_array("shared_offset_of", "smem", smem)
    check_int("shared_offset_of", "align", align)

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        base, step = shared_base(context, builder, sig.args[0], args[0])
        a = to_int(builder, sig.args[1], args[1], 32)
        pad = builder.and_(builder.sub(ir.Constant(i32, 0), base),
                           builder.sub(a, ir.Constant(i32, 1)))
        return builder.udiv(pad, step)
    return types.uint32(smem, align), codegen


# --- 3xTF32 ---------------------------------------------------------------------------------

def _nonfinite(reg, e, p):
    """PTX setting predicate ``p`` where 32-bit ``reg`` is an inf or NaN (``e`` scratch)."""
    return [f"and.b32 {e}, {reg}, 0x7F800000;", f"setp.eq.u32 {p}, {e}, 0x7F800000;"]


def _split_asm():
    """One 16-byte chunk: $1 the source's shared address, $2 the destination's; $0 = 1 where
    a value of the chunk is inf or NaN, else 0."""
    lines = ["{ .reg .b32 x<4>, s<4>, e<4>; .reg .pred p<4>, q;",
             "ld.shared.v4.b32 {x0, x1, x2, x3}, [$1];"]
    for i in range(4):
        lines += [f"and.b32 s{i}, x{i}, 0xFFFFE000;",          # big: 13 low bits cleared
                  f"sub.f32 s{i}, x{i}, s{i};",                 # x - big: exact
                  f"add.u32 s{i}, s{i}, 0x1000;",               # to nearest tf32, ties away
                  f"and.b32 s{i}, s{i}, 0xFFFFE000;"]
        lines += _nonfinite(f"x{i}", f"e{i}", f"p{i}")
        lines += [f"selp.b32 s{i}, 0, s{i}, p{i};"]             # inf / NaN: no small part
    lines += ["st.shared.v4.b32 [$2], {s0, s1, s2, s3};",
              "or.pred q, p0, p1; or.pred q, q, p2; or.pred q, q, p3;",
              "selp.u32 $0, 1, 0, q; }"]
    return " ".join(lines)


def _clear_asm():
    """One 16-byte chunk at shared address $0: its infs and NaNs set to 0."""
    lines = ["{ .reg .b32 x<4>, e<4>; .reg .pred p<4>;",
             "ld.shared.v4.b32 {x0, x1, x2, x3}, [$0];"]
    for i in range(4):
        lines += _nonfinite(f"x{i}", f"e{i}", f"p{i}") + [f"selp.b32 x{i}, 0, x{i}, p{i};"]
    lines += ["st.shared.v4.b32 [$0], {x0, x1, x2, x3}; }"]
    return " ".join(lines)


@lru_cache(maxsize=None)
def split_tf32_tile(chunks, step):
    """The intrinsic ``f(smem, src, dst) -> uint32``: ``chunks`` 16-byte chunks, ``step``
    bytes apart, of float32 at byte ``src`` of uint8 shared array ``smem`` split for 3xTF32:
    their small parts to byte ``dst`` (see the module); 1 where one of the values is inf or
    NaN, else 0."""
    offsets = chunk_offsets("split_tf32_tile", chunks, step)
    text = _split_asm()

    def impl(typingctx, smem, src, dst):
        check_array("split_tf32_tile", "smem", smem, itemsizes=(1,))
        check_int("split_tf32_tile", "src", src)
        check_int("split_tf32_tile", "dst", dst)

        def codegen(context, builder, sig, args):
            base, _ = shared_base(context, builder, sig.args[0], args[0])
            s, d = (builder.add(base, to_int(builder, sig.args[i], args[i], 32))
                    for i in (1, 2))
            flag = ir.Constant(I32, 0)
            for c in offsets:
                off = ir.Constant(I32, c)
                flag = builder.or_(flag, asm(builder, I32, text, "=r,r,r,~{memory}",
                                             [builder.add(s, off), builder.add(d, off)],
                                             side_effect=True))
            return flag
        return types.uint32(smem, src, dst), codegen
    impl.__name__ = impl.__qualname__ = f"split_tf32_tile_{chunks}_{step}"
    return intrinsic(impl)


@lru_cache(maxsize=None)
def clear_nonfinite_tile(chunks, step):
    """The intrinsic ``f(smem, at)``: the infs and NaNs of ``chunks`` 16-byte chunks of
    float32, ``step`` bytes apart, at byte ``at`` of uint8 shared array ``smem``, set to 0."""
    offsets = chunk_offsets("clear_nonfinite_tile", chunks, step)
    text = _clear_asm()

    def impl(typingctx, smem, at):
        check_array("clear_nonfinite_tile", "smem", smem, itemsizes=(1,))
        check_int("clear_nonfinite_tile", "at", at)

        def codegen(context, builder, sig, args):
            base, _ = shared_base(context, builder, sig.args[0], args[0])
            a = builder.add(base, to_int(builder, sig.args[1], args[1], 32))
            for c in offsets:
                asm(builder, VOID, text, "r,~{memory}",
                    [builder.add(a, ir.Constant(I32, c))], side_effect=True)
            return context.get_dummy_value()
        return types.none(smem, at), codegen
    impl.__name__ = impl.__qualname__ = f"clear_nonfinite_tile_{chunks}_{step}"
    return intrinsic(impl)


@intrinsic
def named_barrier_or(typingctx, idx, count, flag):
    """``bar.red.or.pred``: ``named_barrier(idx, count)`` that also returns whether ``flag``
    (an int) was nonzero in any of the ``count`` threads."""
    check_int("named_barrier_or", "idx", idx)
    check_int("named_barrier_or", "flag", flag)
    n = literal_int("named_barrier_or", "count", count)
    if n <= 0 or n % 32:
        raise TypingError(f"named_barrier_or: count must be a positive multiple of 32, got {n}")
    text = ("{ .reg .pred p, q; setp.ne.u32 q, $2, 0; "
            f"bar.red.or.pred p, $1, {n}, q; selp.u32 $0, 1, 0, p; }}")

    def codegen(context, builder, sig, args):
        r = asm(builder, I32, text, "=r,r,r,~{memory}",
                [to_int(builder, sig.args[0], args[0], 32),
                 to_int(builder, sig.args[2], args[2], 32)], side_effect=True)
        return builder.icmp_unsigned("!=", r, ir.Constant(I32, 0))
    return types.boolean(idx, count, flag), codegen
