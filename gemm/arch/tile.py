"""Tile-level instructions: one call in a kernel issues a whole tile's worth of PTX.

A generated GEMM kernel unrolls its tiles: 128 ``mma.sync`` per k-tile, 1024 FMAs per k-tile of
the SIMT kernel, dozens of ``ldmatrix``. Written as one numba call each, every instruction is a
handful of numba IR statements that numba types, rewrites to SSA and lowers one by one; its
front-end then took 13-25 s per kernel, 95% of the compile (NVVM and ptxas take ~0.4 s each).
Here each tile-level operation is *one* intrinsic made for a static plan (tuples of ints fixed
when the kernel is generated; see :mod:`gemm.arch.tile_plan`), whose codegen unrolls the plan
straight into LLVM IR. Register fragments are ``cuda.local.array``s that the plans index only
with constants, so NVVM keeps them in registers (no local memory: checked on the PTX).

Each factory is cached by its arguments and returns the intrinsic; a generated kernel module
binds them at import (``_T0 = mma_tile("mma_m16n8k16_f32_bf16", plan)``) and calls them in the
kernel (``_T0(acc, fa, fb)``). ``gemm.arch`` exports these factories on a GPU and the twins of
``gemm.arch.sim_tile`` in the simulator. Scalars are taken as uint32 (offsets, indices) or
float32 (scales); offsets are computed in 32 bits like the rest of the generated index code.

- ``mma_tile(op, plan)(acc, fa, fb)``: per entry ``(c, a, b)`` (register index tuples), the
  mma.sync ``op`` (a key of ``gemm.arch.tile_plan.MMA_FORMS``) on ``fa[a], fb[b], acc[c]`` into
  ``acc[c]``.
- ``fma_tile(plan)(acc, fa, fb)``: per entry ``(c, a, b)``, ``acc[c] = fma(fa[a], fb[b],
  acc[c])``.
- ``load_tile(op, plan, swizzle=None)(frag, smem, slot, sw, raw)``: shared -> registers; per
  entry ``(mode, c, regs)`` one ``op`` at element ``slot + offset`` (the offset by mode, see
  tile_plan) into ``frag[regs]``. ``op``: ``ldmatrix_x{1,2,4}[_trans]`` (16-bit smem, uint32
  fragments), ``ld_f32``, ``ld_v2_f32``, ``ld_v4_f32`` (float32 both), ``ld_tf32`` (float32
  smem rounded with ``cvt.rna.tf32.f32`` into uint32 fragments).
- ``cp_async_tile(kind, nbytes, plan, swizzle=None)(smem, slot, sw, raw, src, base, ld)``:
  per entry ``(mode, c, g, gl)`` a ``cp.async.{kind}`` of ``nbytes`` from element
  ``base + g + gl * ld`` of global ``src`` to element ``slot + offset`` of ``smem``.
- ``cp_async_zfill_tile(kind, nbytes, esize, along, plan, swizzle=None)(smem, slot, sw, raw,
  src, base, ld, mn0, k0, ext_mn, ext_k)``: the predicated copies of a tile at a matrix'
  edges; per entry ``(mode, c, g, gl, dmn, dk)``, the vector of ``nbytes / esize`` elements
  at (``mn0 + dmn``, ``k0 + dk``) of an ``ext_mn`` x ``ext_k`` matrix, along mn (``along``
  0) or k (1), reads only its elements inside the matrix (none when the other coordinate is
  out), from element ``base + g + gl * ld`` of ``src``, and zero-fills the rest of
  ``nbytes`` at element ``slot + offset`` of ``smem``.
- ``scaled_store_tile(plan)(smem, base, frag, scale)``: per entry ``(c, regs)`` one vector
  store (1, 2 or 4 floats) of ``scale * frag[regs]`` at element ``base + c`` (8- or 16-byte
  aligned for 2 or 4).
- ``store_c_tile(plan)(C, base, acc, alpha, beta, m0, n0, M, N, ldm, ldn)``: the predicated
  epilogue of a register tile; per entry ``(reg, r, c)``, where ``m0 + r < M`` and
  ``n0 + c < N``: ``C[i] = alpha * acc[reg] (+ beta * C[i] when beta != 0)``,
  ``i = base + r * ldm + c * ldn``.
- ``fill_tile(n)(frag, value)``: ``frag[0..n) = value``.

>>> import numpy as np
>>> from numba import cuda
>>> from numba.cuda import types
>>> F = fma_tile(((0, 0, 0), (1, 0, 1)))          # acc[0] += a[0]*b[0], acc[1] += a[0]*b[1]
>>> ONES = fill_tile(2)                            # bound outside the kernel, as in a module
>>> def k(out):
...     acc = cuda.local.array(2, np.float32)
...     fa = cuda.local.array(1, np.float32)
...     fb = cuda.local.array(2, np.float32)
...     ONES(acc, 1.0)
...     fa[0], fb[0], fb[1] = 2.0, 3.0, 4.0
...     F(acc, fa, fb)
...     out[0], out[1] = acc[0], acc[1]
>>> ptx, _ = cuda.compile_ptx(k, (types.float32[::1],), cc=(8, 0))
>>> ".local" in ptx
False
"""

from functools import lru_cache

from llvmlite import ir
from numba.cuda import cgutils, types
from numba.cuda.extending import intrinsic

from gemm.arch._lowering import (F32, I32, I64, VOID, TypingError, array_data, asm,
                                 check_array, check_float, check_int, shared_base, to_int,
                                 unpack)
from gemm.arch.ptx import ldmatrix_asm, mma_asm
from gemm.arch.ptx_convert import emit_cvt_rna_tf32
from gemm.arch.tile_plan import (ADD, LOAD_OPS, MMA_FORMS, XOR, check_cp_async, check_op,
                                 check_plan, check_store_plan, check_swizzle, check_zfill)

__all__ = ["mma_tile", "fma_tile", "load_tile", "cp_async_tile", "cp_async_zfill_tile",
           "scaled_store_tile", "store_c_tile", "fill_tile"]


# --- helpers ---------------------------------------------------------------------------------

def _const(x):
    return ir.Constant(I32, x)


def _reg(builder, data, i):
    return builder.gep(data, [ir.Constant(I64, i)])


def _load(builder, data, i):
    return builder.load(_reg(builder, data, i))


def _store(builder, data, i, value):
    builder.store(value, _reg(builder, data, i))


def _check_frag(op, name, ty, kind):
    """A register fragment: a 1-D C-contiguous local array of 32-bit ints or floats."""
    check_array(op, name, ty, itemsizes=(4,))
    if ty.ndim != 1 or ty.layout != "C":
        raise TypingError(f"{op}: {name} must be a 1-D C-contiguous array "
                          f"(a cuda.local.array), got {ty}")
    if (kind == "float") != isinstance(ty.dtype, types.Float):
        raise TypingError(f"{op}: {name} must hold {'float32' if kind == 'float' else 'uint32'}"
                          f", got {ty.dtype}")


def _ints(op, names, tys):
    for name, ty in zip(names, tys):
        check_int(op, name, ty)


def _u32(builder, ty, value):
    return to_int(builder, ty, value, 32)


def _split_offset(builder, mode, c, slot, sw, raw, swizzle):
    """A plan entry's shared element index ``slot + offset`` (see gemm.arch.tile_plan) as
    (i32 run-time part, constant part): ADD entries share the run-time part ``slot + sw`` and
    keep ``c`` apart, so the address arithmetic folds it into the instruction's immediate."""
    if mode == ADD:
        return builder.add(slot, sw), c
    if mode == XOR:
        return builder.add(slot, builder.xor(sw, _const(c))), 0
    mask, shift = swizzle
    x = builder.add(raw, _const(c))
    return builder.add(slot, builder.xor(x, builder.lshr(builder.and_(x, _const(mask)),
                                                       _const(shift)))), 0


def _shared_address(builder, base, step, idx, c):
    """32-bit shared address of element ``idx + c`` (``c`` a constant)."""
    addr = builder.add(base, builder.mul(idx, step))
    return builder.add(addr, builder.mul(_const(c), step)) if c else addr


def _element(builder, data, idx, c):
    """Pointer to element ``idx + c`` of an array's data (``idx`` i32, ``c`` a constant)."""
    ptr = builder.gep(data, [builder.zext(idx, I64)])
    return builder.gep(ptr, [ir.Constant(I64, c)]) if c else ptr


def _named(op, impl):
    impl.__name__ = impl.__qualname__ = op
    return intrinsic(impl)


# --- register arithmetic --------------------------------------------------------------------

@lru_cache(maxsize=None)
def mma_tile(op, plan):
    """The intrinsic ``f(acc, fa, fb)`` issuing the plan's mma.sync instructions."""
    _, _, acc_kind, na, nb, nc = MMA_FORMS[check_op("mma_tile", op, MMA_FORMS)]
    check_plan("mma_tile", plan, (("regs", nc), ("regs", na), ("regs", nb)))
    text, constraints, ret = mma_asm(op)
    kind = "float" if acc_kind == "f32" else "int"

    def impl(typingctx, acc, fa, fb):
        _check_frag(op, "acc", acc, kind)
        _check_frag(op, "fa", fa, "int")
        _check_frag(op, "fb", fb, "int")

        def codegen(context, builder, sig, args):
            c, a, b = (array_data(context, builder, t, x) for t, x in zip(sig.args, args))
            for cs, as_, bs in plan:
                ops = ([_load(builder, a, i) for i in as_] + [_load(builder, b, i) for i in bs]
                       + [_load(builder, c, i) for i in cs])
                out = asm(builder, ret, text, constraints, ops, attrs=("convergent", "readnone"))
                for i, v in zip(cs, unpack(builder, out, nc)):
                    _store(builder, c, i, v)
            return context.get_dummy_value()
        return types.none(acc, fa, fb), codegen
    return _named(f"mma_tile_{op}", impl)


@lru_cache(maxsize=None)
def fma_tile(plan):
    """The intrinsic ``f(acc, fa, fb)``: ``acc[c] = fma(fa[a], fb[b], acc[c])`` per entry."""
    check_plan("fma_tile", plan, ("uint", "uint", "uint"))

    def impl(typingctx, acc, fa, fb):
        for name, ty in (("acc", acc), ("fa", fa), ("fb", fb)):
            _check_frag("fma_tile", name, ty, "float")

        def codegen(context, builder, sig, args):
            c, a, b = (array_data(context, builder, t, x) for t, x in zip(sig.args, args))
            for ci, ai, bi in plan:
                v = builder.fma(_load(builder, a, ai), _load(builder, b, bi),
                                _load(builder, c, ci))
                _store(builder, c, ci, v)
            return context.get_dummy_value()
        return types.none(acc, fa, fb), codegen
    return _named("fma_tile", impl)


@lru_cache(maxsize=None)
def fill_tile(n):
    """The intrinsic ``f(frag, value)`` setting ``frag[0..n)`` to ``value``."""
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"fill_tile: n must be a positive int, got {n!r}")

    def impl(typingctx, frag, value):
        check_array("fill_tile", "frag", frag, itemsizes=(4,))
        if not isinstance(value, (types.Integer, types.Float)):
            raise TypingError(f"fill_tile: value must be a number, got {value}")

        def codegen(context, builder, sig, args):
            data = array_data(context, builder, sig.args[0], args[0])
            v = context.cast(builder, args[1], sig.args[1], sig.args[0].dtype)
            for i in range(n):
                _store(builder, data, i, v)
            return context.get_dummy_value()
        return types.none(frag, value), codegen
    return _named("fill_tile", impl)


# --- shared memory -> registers ---------------------------------------------------------------

@lru_cache(maxsize=None)
def load_tile(op, plan, swizzle=None):
    """The intrinsic ``f(frag, smem, slot, sw, raw)`` issuing the plan's shared loads."""
    nregs, elem, frag_kind = LOAD_OPS[check_op("load_tile", op, LOAD_OPS)]
    check_plan("load_tile", plan, ("mode", "uint", ("regs", nregs)))
    swizzle = check_swizzle("load_tile", plan, swizzle)
    if op.startswith("ldmatrix"):
        text, constraints, ret = ldmatrix_asm(nregs, op.endswith("_trans"))

    def impl(typingctx, frag, smem, slot, sw, raw):
        _check_frag(op, "frag", frag, frag_kind)
        check_array(op, "smem", smem, itemsizes=(elem,))
        _ints(op, ("slot", "sw", "raw"), (slot, sw, raw))

        def codegen(context, builder, sig, args):
            tf, ts, t_slot, t_sw, t_raw = sig.args
            f = array_data(context, builder, tf, args[0])
            base_slot = _u32(builder, t_slot, args[2])
            swv, rawv = _u32(builder, t_sw, args[3]), _u32(builder, t_raw, args[4])
            if op.startswith("ldmatrix"):
                base, step = shared_base(context, builder, ts, args[1])
            else:
                data = array_data(context, builder, ts, args[1])
            for mode, c, regs in plan:
                idx, k = _split_offset(builder, mode, c, base_slot, swv, rawv, swizzle)
                if op.startswith("ldmatrix"):
                    addr = _shared_address(builder, base, step, idx, k)
                    out = asm(builder, ret, text, constraints, [addr], side_effect=True,
                              attrs=("convergent",))
                    values = unpack(builder, out, nregs)
                else:
                    ptr = _element(builder, data, idx, k)
                    if nregs == 1:
                        values = [builder.load(ptr)]
                    else:
                        vec = ir.VectorType(F32, nregs)
                        v = builder.load(builder.bitcast(ptr, vec.as_pointer()), align=4 * nregs)
                        values = [builder.extract_element(v, _const(k)) for k in range(nregs)]
                    if op == "ld_tf32":
                        values = [emit_cvt_rna_tf32(builder, values[0])]
                for r, v in zip(regs, values):
                    _store(builder, f, r, v)
            return context.get_dummy_value()
        return types.none(frag, smem, slot, sw, raw), codegen
    return _named(f"load_tile_{op}", impl)


# --- global -> shared ---------------------------------------------------------------------------

@lru_cache(maxsize=None)
def cp_async_tile(kind, nbytes, plan, swizzle=None):
    """The intrinsic ``f(smem, slot, sw, raw, src, base, ld)`` issuing the plan's cp.async."""
    check_cp_async("cp_async_tile", kind, nbytes, plan, ("mode", "uint", "uint", "uint"))
    swizzle = check_swizzle("cp_async_tile", plan, swizzle)
    op = "cp_async_tile"
    text = f"cp.async.{kind}.shared.global [$0], [$1], {nbytes};"

    def impl(typingctx, smem, slot, sw, raw, src, base, ld):
        size_d = check_array(op, "smem", smem)
        size_s = check_array(op, "src", src)
        for name, size in (("smem", size_d), ("src", size_s)):
            if nbytes % size:
                raise TypingError(f"{op}: {nbytes} bytes is not a multiple of the {size}-byte "
                                  f"elements of {name}")
        _ints(op, ("slot", "sw", "raw", "base", "ld"), (slot, sw, raw, base, ld))

        def codegen(context, builder, sig, args):
            t_sm, t_slot, t_sw, t_raw, t_src, t_base, t_ld = sig.args
            sbase, step = shared_base(context, builder, t_sm, args[0])
            slotv, swv, rawv = (_u32(builder, t, a) for t, a in zip(sig.args[1:4], args[1:4]))
            data = array_data(context, builder, t_src, args[4])
            gbase, ldv = _u32(builder, t_base, args[5]), _u32(builder, t_ld, args[6])
            gptr_ty = data.type.pointee.as_pointer(1)
            for mode, c, g, gl in plan:
                idx, k = _split_offset(builder, mode, c, slotv, swv, rawv, swizzle)
                dst = _shared_address(builder, sbase, step, idx, k)
                gi = builder.add(gbase, _const(g))
                if gl:
                    gi = builder.add(gi, builder.mul(ldv, _const(gl)))
                ptr = builder.gep(data, [builder.zext(gi, I64)])
                gaddr = builder.ptrtoint(builder.addrspacecast(ptr, gptr_ty), I64)
                asm(builder, VOID, text, "r,l,~{memory}", [dst, gaddr], side_effect=True)
            return context.get_dummy_value()
        return types.none(smem, slot, sw, raw, src, base, ld), codegen
    return _named(f"cp_async_tile_{kind}{nbytes}", impl)


@lru_cache(maxsize=None)
def cp_async_zfill_tile(kind, nbytes, esize, along, plan, swizzle=None):
    """The intrinsic ``f(smem, slot, sw, raw, src, base, ld, mn0, k0, ext_mn, ext_k)``
    issuing the plan's predicated cp.async (zero-fill past the matrix' edges)."""
    op = "cp_async_zfill_tile"
    vec = check_zfill(op, kind, nbytes, esize, along, plan)
    swizzle = check_swizzle(op, plan, swizzle)
    text = f"cp.async.{kind}.shared.global [$0], [$1], {nbytes}, $2;"
    names = ("slot", "sw", "raw", "base", "ld", "mn0", "k0", "ext_mn", "ext_k")

    def impl(typingctx, smem, slot, sw, raw, src, base, ld, mn0, k0, ext_mn, ext_k):
        for name, ty in (("smem", smem), ("src", src)):
            if check_array(op, name, ty) != esize:
                raise TypingError(f"{op}: {name} must have {esize}-byte elements, got {ty}")
        _ints(op, names, (slot, sw, raw, base, ld, mn0, k0, ext_mn, ext_k))

        def codegen(context, builder, sig, args):
            tys = sig.args
            sbase, step = shared_base(context, builder, tys[0], args[0])
            data = array_data(context, builder, tys[4], args[4])
            slotv, swv, rawv, gbase, ldv, m0, kv0, em, ek = (
                _u32(builder, tys[k], args[k]) for k in (1, 2, 3, 5, 6, 7, 8, 9, 10))
            gptr_ty = data.type.pointee.as_pointer(1)
            zero = _const(0)
            for mode, c, g, gl, dmn, dk in plan:
                mn, kk = builder.add(m0, _const(dmn)), builder.add(kv0, _const(dk))
                # elements in the matrix along the vector's axis, none when the other is out
                at, ext, other, other_ext = ((mn, em, kk, ek) if along == 0 else
                                             (kk, ek, mn, em))
                left = builder.sub(ext, builder.select(builder.icmp_unsigned("<", at, ext),
                                                       at, ext))
                n = builder.select(builder.icmp_unsigned("<", left, _const(vec)), left,
                                   _const(vec))
                n = builder.select(builder.icmp_unsigned("<", other, other_ext), n, zero)
                nb = builder.mul(n, _const(esize))
                gi = builder.add(gbase, _const(g))
                if gl:
                    gi = builder.add(gi, builder.mul(ldv, _const(gl)))
                gi = builder.select(builder.icmp_unsigned("!=", nb, zero), gi, zero)
                ptr = builder.gep(data, [builder.zext(gi, I64)])
                gaddr = builder.ptrtoint(builder.addrspacecast(ptr, gptr_ty), I64)
                idx, k = _split_offset(builder, mode, c, slotv, swv, rawv, swizzle)
                dst_addr = _shared_address(builder, sbase, step, idx, k)
                asm(builder, VOID, text, "r,l,r,~{memory}", [dst_addr, gaddr, nb],
                    side_effect=True)
            return context.get_dummy_value()
        return (types.none(smem, slot, sw, raw, src, base, ld, mn0, k0, ext_mn, ext_k),
                codegen)
    return _named(f"{op}_{kind}{nbytes}", impl)


# --- stores -------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def scaled_store_tile(plan):
    """The intrinsic ``f(smem, base, frag, scale)``: per entry ``(c, regs)`` a vector store of
    ``scale * frag[regs]`` at element ``base + c``."""
    width = check_store_plan("scaled_store_tile", plan)
    op = "scaled_store_tile"

    def impl(typingctx, smem, base, frag, scale):
        check_array(op, "smem", smem, itemsizes=(4,))
        if not isinstance(smem.dtype, types.Float):
            raise TypingError(f"{op}: smem must hold float32, got {smem.dtype}")
        check_int(op, "base", base)
        _check_frag(op, "frag", frag, "float")
        check_float(op, "scale", scale)

        def codegen(context, builder, sig, args):
            t_sm, t_base, t_frag, t_scale = sig.args
            data = array_data(context, builder, t_sm, args[0])
            basev = _u32(builder, t_base, args[1])
            f = array_data(context, builder, t_frag, args[2])
            s = context.cast(builder, args[3], t_scale, types.float32)
            for c, regs in plan:
                ptr = builder.gep(data, [builder.zext(builder.add(basev, _const(c)), I64)])
                values = [builder.fmul(s, _load(builder, f, r)) for r in regs]
                if width == 1:
                    builder.store(values[0], ptr)
                    continue
                vec_ty = ir.VectorType(F32, width)
                vec = ir.Constant(vec_ty, ir.Undefined)
                for k, v in enumerate(values):
                    vec = builder.insert_element(vec, v, _const(k))
                builder.store(vec, builder.bitcast(ptr, vec_ty.as_pointer()), align=4 * width)
            return context.get_dummy_value()
        return types.none(smem, base, frag, scale), codegen
    return _named(op, impl)


@lru_cache(maxsize=None)
def store_c_tile(plan):
    """The intrinsic ``f(C, base, acc, alpha, beta, m0, n0, M, N, ldm, ldn)``: the predicated
    ``alpha * acc + beta * C`` epilogue of a register tile (entries ``(reg, r, c)``)."""
    check_plan("store_c_tile", plan, ("uint", "uint", "uint"))
    op = "store_c_tile"
    rows = sorted({r for _, r, _ in plan})
    cols = sorted({c for _, _, c in plan})

    def impl(typingctx, C, base, acc, alpha, beta, m0, n0, M, N, ldm, ldn):
        check_array(op, "C", C, itemsizes=(4,))
        if not isinstance(C.dtype, types.Float):
            raise TypingError(f"{op}: C must hold float32, got {C.dtype}")
        _check_frag(op, "acc", acc, "float")
        check_float(op, "alpha", alpha)
        check_float(op, "beta", beta)
        _ints(op, ("base", "m0", "n0", "M", "N", "ldm", "ldn"), (base, m0, n0, M, N, ldm, ldn))

        def codegen(context, builder, sig, args):
            tys = sig.args
            data = array_data(context, builder, tys[0], args[0])
            basev = _u32(builder, tys[1], args[1])
            a = array_data(context, builder, tys[2], args[2])
            al, be = (context.cast(builder, args[k], tys[k], types.float32) for k in (3, 4))
            m0v, n0v, Mv, Nv, ldmv, ldnv = (_u32(builder, tys[k], args[k]) for k in range(5, 11))
            row_ok = {r: builder.icmp_unsigned("<", builder.add(m0v, _const(r)), Mv)
                      for r in rows}
            col_ok = {c: builder.icmp_unsigned("<", builder.add(n0v, _const(c)), Nv)
                      for c in cols}
            beta_zero = builder.fcmp_ordered("==", be, ir.Constant(F32, 0.0))
            with builder.if_else(beta_zero) as (then, otherwise):
                for with_beta, branch in ((False, then), (True, otherwise)):
                    with branch:
                        for reg, r, c in plan:
                            ok = builder.and_(row_ok[r], col_ok[c])
                            with cgutils.if_likely(builder, ok):
                                i = builder.add(basev, builder.add(
                                    builder.mul(ldmv, _const(r)), builder.mul(ldnv, _const(c))))
                                ptr = builder.gep(data, [builder.zext(i, I64)])
                                v = builder.fmul(al, _load(builder, a, reg))
                                if with_beta:
                                    v = builder.fadd(v, builder.fmul(be, builder.load(ptr)))
                                builder.store(v, ptr)
            return context.get_dummy_value()
        return types.none(C, base, acc, alpha, beta, m0, n0, M, N, ldm, ldn), codegen
    return _named(op, impl)
