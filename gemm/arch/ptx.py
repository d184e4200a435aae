"""The PTX instructions of the GEMM kernels as numba-cuda intrinsics (inline PTX).

Each function here is a ``numba.cuda.extending.intrinsic``: it is typed and lowered inside a
``@cuda.jit`` kernel and emits one PTX instruction (or a few LLVM operations), so it costs no
call and compiles on a machine without a GPU (``numba.cuda.compile_ptx``). ``gemm.arch``
exports these on a GPU and the pure-Python twins of ``gemm.arch.sim`` in the simulator; both
have the same signatures and semantics, documented on each function.

Conventions:

- Arrays are 1-D (any layout; the stride is honoured) or C-contiguous of any rank (the index is
  then a flat element index). Indices are non-negative element indices; do index arithmetic in
  ``np.uint32`` (a signed index is sign-extended, never wrapped around).
- ``.shared`` operands (the ``dst`` of cp.async, the array of ldmatrix) must be shared arrays:
  their address is taken as a 32-bit shared-window address (``addrspacecast`` to address space 3,
  then ``ptrtoint`` to i32), and offsets are added in 32 bits.
- Compile-time operands (``nbytes`` of cp.async, ``n`` of ``cp_async_wait``) must be integer
  literals: a constant in the source, a closure variable or a module global.
- Register fragments are tuples of ``uint32`` (16-bit elements packed two to a register, the
  element with the lower index in the low half) or of ``float32``.
- cp.async, ldmatrix, mma and cvt to bf16/tf32 need sm_80 or newer.

>>> import numpy as np
>>> from numba import cuda
>>> from numba.cuda import types
>>> def k(src, dst):
...     buf = cuda.shared.array(64, np.float32)
...     t = np.uint32(cuda.threadIdx.x)
...     cp_async_cg(buf, t * np.uint32(4), src, t * np.uint32(4), 16)
...     cp_async_commit()
...     cp_async_wait(0)
...     cuda.syncthreads()
...     dst[t] = buf[t]
>>> ptx, _ = cuda.compile_ptx(k, (types.float32[::1], types.float32[::1]), cc=(8, 0))
>>> "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 0" in ptx
True
"""

from llvmlite import ir
from numba.cuda import types
from numba.cuda.extending import intrinsic

from gemm.arch import ptx_convert
from gemm.arch._lowering import (F32, I32, VOID, TypingError, asm, cast_args, check_array,
                                 check_float, check_int, fence_intrinsic, global_address,
                                 item_pointer, literal_int, reg_list, shared_address,
                                 to_int, unpack, wait_group_intrinsic)
# the conversions are part of this layer
from gemm.arch.ptx_convert import *  # noqa: F401,F403
from gemm.arch.tile_plan import CP_ASYNC_SIZES, MMA_FORMS

__all__ = [
    "cp_async_ca", "cp_async_cg", "cp_async_ca_zfill", "cp_async_cg_zfill",
    "cp_async_commit", "cp_async_wait", "cp_async_wait_all",
    "ldmatrix_x1", "ldmatrix_x2", "ldmatrix_x4",
    "ldmatrix_x1_trans", "ldmatrix_x2_trans", "ldmatrix_x4_trans",
    "mma_m16n8k16_f32_bf16", "mma_m16n8k16_f32_f16", "mma_m16n8k16_f16_f16",
    "mma_m16n8k8_f16_f16", "mma_m16n8k8_f32_tf32",
    "ld_v4_b32", "ld_v4_f32", "st_v4_b32", "st_v4_f32",
    "ld_v2_b32", "ld_v2_f32", "st_v2_b32", "st_v2_f32", "shfl_xor_f32", "warp_uniform",
    "syncwarp", "compiler_fence", "tanh_approx_f32", "ex2_approx_f32", "rcp_approx_f32",
] + ptx_convert.__all__



# --- cp.async ------------------------------------------------------------------------------------

def cp_async_asm(kind, nbytes, zfill):
    """(text, constraints) of one ``cp.async.{kind}`` (``"ca"`` or ``"cg"``) of ``nbytes``
    from global to shared memory: operand ``$0`` the 32-bit shared address, ``$1`` the 64-bit
    global one, and with ``zfill`` ``$2`` the bytes read (the rest of ``nbytes`` zeros)."""
    text = f"cp.async.{kind}.shared.global [$0], [$1], {nbytes}" + (", $2;" if zfill else ";")
    return text, "r,l" + (",r" if zfill else "") + ",~{memory}"


def _make_cp_async(kind, zfill):
    op = f"cp_async_{kind}{'_zfill' if zfill else ''}"
    sizes = CP_ASYNC_SIZES[kind]

    def typer(typingctx, dst, di, src, si, nbytes, *rest):
        size_d = check_array(op, "dst", dst)
        size_s = check_array(op, "src", src)
        check_int(op, "di", di)
        check_int(op, "si", si)
        if kind == "cg" and isinstance(nbytes, types.IntegerLiteral) \
                and nbytes.literal_value != 16:
            raise TypingError(f"{op}: cp.async.cg copies 16 bytes only (cp-size 16), "
                              f"got nbytes={nbytes.literal_value}; use cp_async_ca for 4 or 8")
        n = literal_int(op, "nbytes", nbytes, sizes)
        for name, size in (("dst", size_d), ("src", size_s)):
            if n % size:
                raise TypingError(f"{op}: nbytes={n} is not a multiple of the {size}-byte "
                                  f"elements of {name}")
        if zfill:
            check_int(op, "src_bytes", rest[0])
        text, constraints = cp_async_asm(kind, n, zfill)

        def codegen(context, builder, sig, args):
            dty, dity, sty, sity = sig.args[:4]
            d = shared_address(context, builder, dty, args[0], dity, args[1])
            s = global_address(context, builder, sty, args[2], sity, args[3])
            operands = [d, s]
            if zfill:
                operands.append(to_int(builder, sig.args[5], args[5], 32))
            asm(builder, VOID, text, constraints, operands, side_effect=True)
            return context.get_dummy_value()

        return types.none(dst, di, src, si, nbytes, *rest), codegen

    if zfill:
        def impl(typingctx, dst, di, src, si, nbytes, src_bytes):
            return typer(typingctx, dst, di, src, si, nbytes, src_bytes)
    else:
        def impl(typingctx, dst, di, src, si, nbytes):
            return typer(typingctx, dst, di, src, si, nbytes)
    impl.__name__ = impl.__qualname__ = op
    return intrinsic(impl)


cp_async_ca = _make_cp_async("ca", zfill=False)
cp_async_ca.__doc__ = """Start an asynchronous copy of ``nbytes`` (4, 8 or 16) bytes, cached in L1.

``cp.async.ca.shared.global [dst + di], [src + si], nbytes``: shared ``dst`` from global ``src``,
both addresses ``nbytes``-aligned. Completes at the ``cp_async_wait`` that covers its group.
"""
cp_async_cg = _make_cp_async("cg", zfill=False)
cp_async_cg.__doc__ = """Asynchronous 16-byte copy bypassing L1: ``cp.async.cg.shared.global``.

nbytes must be the literal 16; anything else is a compile-time TypingError.
"""
cp_async_ca_zfill = _make_cp_async("ca", zfill=True)
cp_async_ca_zfill.__doc__ = """``cp_async_ca`` with PTX's src-size operand: only the first
``src_bytes`` (run-time, 0..nbytes) bytes are read from ``src``; the rest of the ``nbytes`` in
``dst`` are written as zeros. ``src_bytes = 0`` reads nothing: predicated-off copies of a
partial tile may point at any aligned element.
"""
cp_async_cg_zfill = _make_cp_async("cg", zfill=True)
cp_async_cg_zfill.__doc__ = """``cp_async_cg`` (16 bytes) with zero-fill past ``src_bytes``."""


cp_async_commit = fence_intrinsic(
    "cp_async_commit", "cp.async.commit_group;",
    "``cp.async.commit_group``: close the group of the cp.async issued since the last commit.")
cp_async_wait = wait_group_intrinsic(
    "cp_async_wait", "cp.async.wait_group",
    "``cp.async.wait_group n``: wait until at most ``n`` (a literal) groups are pending.")
cp_async_wait_all = fence_intrinsic(
    "cp_async_wait_all", "cp.async.wait_all;",
    "``cp.async.wait_all``: commit the open group and wait for every pending cp.async.")


# --- ldmatrix ------------------------------------------------------------------------------------

def ldmatrix_asm(num, trans):
    """(text, constraints, LLVM return type) of ``ldmatrix ... .x{num}[.trans]`` with the
    32-bit shared address as operand ``$num``."""
    text = (f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 "
            f"{{{reg_list(num)}}}, [${num}];")
    constraints = ",".join(["=r"] * num + ["r", "~{memory}"])
    return text, constraints, I32 if num == 1 else ir.LiteralStructType([I32] * num)


def _make_ldmatrix(num, trans):
    op = f"ldmatrix_x{num}{'_trans' if trans else ''}"
    text, constraints, ret = ldmatrix_asm(num, trans)
    restype = types.UniTuple(types.uint32, num)

    def impl(typingctx, smem, idx):
        check_array(op, "smem", smem, itemsizes=(2,))
        check_int(op, "idx", idx)

        def codegen(context, builder, sig, args):
            addr = shared_address(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            out = asm(builder, ret, text, constraints, [addr], side_effect=True,
                      attrs=("convergent",))
            return context.make_tuple(builder, restype, unpack(builder, out, num))
        return restype(smem, idx), codegen

    impl.__name__ = impl.__qualname__ = op
    return intrinsic(impl)


_LDMATRIX_DOC = """``ldmatrix.sync.aligned.m8n8.x{num}{t}.shared.b16``: a warp loads {num} 8x8
matrices of 16-bit elements from shared memory. Lane ``8*j + r`` (j < {num}) passes in ``idx``
the element index of row r of matrix j (16 contiguous, 16-byte aligned bytes); the other lanes'
``idx`` are ignored. Returns {num} uint32 registers, register j holding two elements of matrix
j: over the 8x8 matrix (offset row*8 + col), (lane, half) maps by the CuTe layout {layout}.
All 32 lanes must call it together.
"""
ldmatrix_x1 = _make_ldmatrix(1, False)
ldmatrix_x2 = _make_ldmatrix(2, False)
ldmatrix_x4 = _make_ldmatrix(4, False)
ldmatrix_x1_trans = _make_ldmatrix(1, True)
ldmatrix_x2_trans = _make_ldmatrix(2, True)
ldmatrix_x4_trans = _make_ldmatrix(4, True)
for _num, _f, _ft in ((1, ldmatrix_x1, ldmatrix_x1_trans), (2, ldmatrix_x2, ldmatrix_x2_trans),
                      (4, ldmatrix_x4, ldmatrix_x4_trans)):
    _f.__doc__ = _LDMATRIX_DOC.format(num=_num, t="", layout="((4,8),2):((2,8),1)")
    _ft.__doc__ = _LDMATRIX_DOC.format(num=_num, t=".trans",
                                       layout="((4,8),2):((16,1),8) (transposed)")


# --- mma.sync ------------------------------------------------------------------------------------



def mma_asm(op):
    """(text, constraints, LLVM return type) of the mma.sync of ``op`` (a key of MMA_FORMS):
    operands A, B, then C registers tied to the D outputs."""
    shape, ab, acc, na, nb, nc = MMA_FORMS[op]
    text = (f"mma.sync.aligned.{shape}.row.col.{acc}.{ab}.{ab}.{acc} {{{reg_list(nc)}}}, "
            f"{{{reg_list(na, nc)}}}, {{{reg_list(nb, nc + na)}}}, "
            f"{{{reg_list(nc, nc + na + nb)}}};")
    reg = "f" if acc == "f32" else "r"
    constraints = ",".join([f"={reg}"] * nc + ["r"] * (na + nb) + [str(k) for k in range(nc)])
    return text, constraints, ir.LiteralStructType([F32 if acc == "f32" else I32] * nc)


def _mma(op, args):
    """Signature and codegen of the mma.sync of ``op`` for the operand types ``args``: the A
    and B registers, then the C registers (tied to D), uint32 or (f32 accumulators) float32."""
    _, _, acc, na, nb, nc = MMA_FORMS[op]
    acc_float = acc == "f32"
    names = ([f"a{k}" for k in range(na)] + [f"b{k}" for k in range(nb)]
             + [f"c{k}" for k in range(nc)])
    for k, (name, ty) in enumerate(zip(names, args)):
        (check_float if acc_float and k >= na + nb else check_int)(op, name, ty)
    text, constraints, ret = mma_asm(op)
    acc_type = types.float32 if acc_float else types.uint32
    restype = types.UniTuple(acc_type, nc)

    def codegen(context, builder, sig, args):
        ops = cast_args(context, builder, sig, args, [types.uint32] * (na + nb) + [acc_type] * nc)
        out = asm(builder, ret, text, constraints, ops, attrs=("convergent", "readnone"))
        return context.make_tuple(builder, restype, unpack(builder, out, nc))
    return restype(*args), codegen


@intrinsic
def mma_m16n8k16_f32_bf16(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32``: D = A*B + C for one warp.

    A is 16x16 (M,K), B 16x8 (K,N), C/D 16x8 f32. Registers hold bf16 pairs (low half first).
    Fragments in CuTe TV notation (thread, value) -> column-major offset in the tile:
    A ((4,8),(2,2,2)):((32,1),(16,8,128)) over (16,16); B ((4,8),(2,2)):((16,1),(8,64)) over
    (8,16) as (N,K); C/D ((4,8),(2,2)):((32,1),(16,8)) over (16,8). Products are exact and
    accumulated in at least f32. All 32 lanes must call it together.
    """
    return _mma("mma_m16n8k16_f32_bf16", (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3))


@intrinsic
def mma_m16n8k16_f32_f16(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``: as the bf16 form, f16 inputs."""
    return _mma("mma_m16n8k16_f32_f16", (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3))


@intrinsic
def mma_m16n8k16_f16_f16(typingctx, a0, a1, a2, a3, b0, b1, c0, c1):
    """``mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16``: f16 accumulators.

    C/D are 2 uint32 registers of packed f16 pairs, element (value) v of the C layout
    ((4,8),(2,2)):((32,1),(16,8)) in register v // 2, half v % 2. A and B as the f32 form.
    """
    return _mma("mma_m16n8k16_f16_f16", (a0, a1, a2, a3, b0, b1, c0, c1))


@intrinsic
def mma_m16n8k8_f16_f16(typingctx, a0, a1, b0, c0, c1):
    """``mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16``.

    A 16x8: ((4,8),(2,2)):((32,1),(16,8)); B 8x8 as (N,K): ((4,8),2):((16,1),8); C/D as the
    m16n8k16 f16 form.
    """
    return _mma("mma_m16n8k8_f16_f16", (a0, a1, b0, c0, c1))


@intrinsic
def mma_m16n8k8_f32_tf32(typingctx, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``.

    a*/b* are uint32 holding f32 bit patterns (``float_as_uint32``; round them first with
    ``cvt_rna_tf32_f32`` for round-to-nearest, otherwise the tensor core drops the low 13 bits).
    A 16x8: ((4,8),(2,2)):((16,1),(8,64)); B 8x8 as (N,K): ((4,8),2):((8,1),32); C/D f32 as the
    m16n8k16 form.
    """
    return _mma("mma_m16n8k8_f32_tf32", (a0, a1, a2, a3, b0, b1, c0, c1, c2, c3))


# --- vector loads and stores ---------------------------------------------------------------------

# f32 vectors need a float32 array; b32 vectors also move pairs of 16-bit elements.
_VECTOR_ITEMSIZES = {True: (4,), False: (2, 4)}


def _make_vector_load(n, is_float):
    op = f"ld_v{n}_{'f32' if is_float else 'b32'}"
    elem = types.float32 if is_float else types.uint32
    restype = types.UniTuple(elem, n)

    def impl(typingctx, array, idx):
        check_array(op, "array", array, itemsizes=_VECTOR_ITEMSIZES[is_float])
        check_int(op, "idx", idx)

        def codegen(context, builder, sig, args):
            ptr = item_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            vec = ir.VectorType(F32 if is_float else I32, n)
            value = builder.load(builder.bitcast(ptr, vec.as_pointer()), align=4 * n)
            items = [builder.extract_element(value, ir.Constant(I32, k)) for k in range(n)]
            return context.make_tuple(builder, restype, items)
        return restype(array, idx), codegen

    impl.__name__ = impl.__qualname__ = op
    wrapped = intrinsic(impl)
    wrapped.__doc__ = (
        f"One {4 * n}-byte vector load (``ld.v{n}``) from element idx of a 32-bit "
        f"{'' if is_float else '(or 16-bit) '}"
        f"array as {n} {'float32' if is_float else 'uint32 bit patterns'}. The address must be "
        f"{4 * n}-byte aligned: idx a multiple of {n} on an aligned array.")
    return wrapped


def _make_vector_store(n, is_float):
    op = f"st_v{n}_{'f32' if is_float else 'b32'}"
    elem = types.float32 if is_float else types.uint32
    names = [f"x{k}" for k in range(n)]

    def typer(typingctx, array, idx, *xs):
        check_array(op, "array", array, itemsizes=_VECTOR_ITEMSIZES[is_float])
        check_int(op, "idx", idx)
        for name, ty in zip(names, xs):
            (check_float if is_float else check_int)(op, name, ty)

        def codegen(context, builder, sig, args):
            ptr = item_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1])
            vec_ty = ir.VectorType(F32 if is_float else I32, n)
            vec = ir.Constant(vec_ty, ir.Undefined)
            for k in range(n):
                x = context.cast(builder, args[2 + k], sig.args[2 + k], elem)
                vec = builder.insert_element(vec, x, ir.Constant(I32, k))
            builder.store(vec, builder.bitcast(ptr, vec_ty.as_pointer()), align=4 * n)
            return context.get_dummy_value()
        return types.none(array, idx, *xs), codegen

    if n == 4:
        def impl(typingctx, array, idx, x0, x1, x2, x3):
            return typer(typingctx, array, idx, x0, x1, x2, x3)
    else:
        def impl(typingctx, array, idx, x0, x1):
            return typer(typingctx, array, idx, x0, x1)
    impl.__name__ = impl.__qualname__ = op
    wrapped = intrinsic(impl)
    wrapped.__doc__ = (
        f"One {4 * n}-byte vector store (``st.v{n}``) of x0..x{n - 1} "
        f"({'as float32' if is_float else 'as uint32 bit patterns'}) from element idx "
        f"of a 32-bit{'' if is_float else ' (or 16-bit)'} array; the address must be "
        f"{4 * n}-byte aligned.")
    return wrapped


ld_v4_b32 = _make_vector_load(4, False)
ld_v4_f32 = _make_vector_load(4, True)
ld_v2_b32 = _make_vector_load(2, False)
ld_v2_f32 = _make_vector_load(2, True)
st_v4_b32 = _make_vector_store(4, False)
st_v4_f32 = _make_vector_store(4, True)
st_v2_b32 = _make_vector_store(2, False)
st_v2_f32 = _make_vector_store(2, True)


# --- warp shuffle --------------------------------------------------------------------------------

@intrinsic
def shfl_xor_f32(typingctx, x, lane_mask):
    """``shfl.sync.bfly.b32`` over the full warp: the float32 ``x`` of lane ``lane ^
    lane_mask`` (a literal 1..31); every lane of the warp must call it."""
    check_float("shfl_xor_f32", "x", x)
    mask = literal_int("shfl_xor_f32", "lane_mask", lane_mask, range(1, 32))

    def codegen(context, builder, sig, args):
        x32 = context.cast(builder, args[0], sig.args[0], types.float32)
        return asm(builder, F32, f"shfl.sync.bfly.b32 $0, $1, {mask}, 0x1f, 0xffffffff;",
                   "=f,f", [x32], side_effect=True)
    return types.float32(x, lane_mask), codegen


@intrinsic
def warp_uniform(typingctx, x):
    """``shfl.sync.idx.b32`` from lane 0 over the full warp: lane 0's ``x`` (an integer, as a
    uint32) in every lane. For a value the warp's lanes share anyway (a warpgroup's index,
    ``threadIdx.x // 128``): ptxas then knows it is uniform, keeps what derives from it in
    uniform registers and the loops over it warp-converged (CUTLASS's
    ``canonical_warp_group_idx``); every lane of the warp must call it."""
    check_int("warp_uniform", "x", x)

    def codegen(context, builder, sig, args):
        x32 = context.cast(builder, args[0], sig.args[0], types.uint32)
        return asm(builder, I32, "shfl.sync.idx.b32 $0, $1, 0, 0x1f, 0xffffffff;", "=r,r",
                   [x32], side_effect=True)
    return types.uint32(x), codegen


def _approx_f32(name, instruction, doc):
    """An intrinsic ``name(x)``: the float32 ``instruction`` of one MUFU operation."""
    def typer(typingctx, x):
        check_float(name, "x", x)

        def codegen(context, builder, sig, args):
            x32 = context.cast(builder, args[0], sig.args[0], types.float32)
            return asm(builder, F32, f"{instruction} $0, $1;", "=f,f", [x32],
                       attrs=("readnone",))
        return types.float32(x), codegen
    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = doc
    return intrinsic(typer)


tanh_approx_f32 = _approx_f32(
    "tanh_approx_f32", "tanh.approx.f32",
    "``tanh.approx.f32`` (sm_75+): tanh in one MUFU instruction, with a relative error of "
    "about 2**-11 (libdevice's ``tanhf``: a few ulp in some twenty instructions).")
ex2_approx_f32 = _approx_f32(
    "ex2_approx_f32", "ex2.approx.ftz.f32",
    "``ex2.approx.ftz.f32``: 2**x in one MUFU instruction (a relative error of about 2**-22; "
    "subnormal results flushed to zero).")
rcp_approx_f32 = _approx_f32(
    "rcp_approx_f32", "rcp.approx.ftz.f32",
    "``rcp.approx.ftz.f32``: 1 / x in one MUFU instruction (within 1 ulp; subnormals "
    "flushed to zero).")


syncwarp = fence_intrinsic(
    "syncwarp", "bar.warp.sync -1;",
    "``bar.warp.sync 0xffffffff``: the warp's lanes meet here, their memory accesses before "
    "it ordered before those after it (CUDA's ``__syncwarp()``; the whole warp calls it).")


compiler_fence = fence_intrinsic(
    "compiler_fence", "",
    "No instruction: a point that the compiler moves no memory access across (CUDA's "
    "``asm volatile(\"\" ::: \"memory\")``), e.g. to keep a loop body's shared loads beside "
    "the arithmetic that uses them instead of all at its top.")
