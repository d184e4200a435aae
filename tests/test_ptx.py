"""The PTX layer compiled on a CPU: each intrinsic's instruction in the PTX for sm_80 and sm_90,
its operands in the right registers, compile-time errors for bad input, and ptxas reporting no
spills and no local memory for a kernel that uses them all."""

import functools
import re

import numpy as np
import pytest

from gemm._env import simulator_active

if simulator_active():
    pytest.skip("compiles PTX: needs the real numba.cuda, not the simulator",
                allow_module_level=True)

from numba import cuda  # noqa: E402
from numba.cuda import types  # noqa: E402
from numba.core.errors import TypingError as CoreTypingError  # noqa: E402
from numba.cuda.core.errors import TypingError as CudaTypingError  # noqa: E402

from gemm.arch import inspect as arch_inspect  # noqa: E402
from gemm.arch import ptx as P  # noqa: E402

CCS = [(8, 0), (9, 0)]
U16, U32, F32 = types.uint16[::1], types.uint32[::1], types.float32[::1]
R32 = r"%r\d+"       # a 32-bit register
RD64 = r"%rd\d+"     # a 64-bit register
F = r"%f\d+"


def _regs(n, reg=R32):
    return r"\{" + ", ".join([reg] * n) + r"\}"


# --- kernels, one per family of instructions ----------------------------------------------------

def k_cp_async(src, out):
    buf = cuda.shared.array(1024, np.uint16)
    t = np.uint32(cuda.threadIdx.x)
    i = t * np.uint32(8)
    P.cp_async_ca(buf, i, src, i, 4)
    P.cp_async_ca(buf, i, src, i, 8)
    P.cp_async_ca(buf, i, src, i, 16)
    P.cp_async_cg(buf, i, src, i, 16)
    P.cp_async_commit()
    P.cp_async_ca_zfill(buf, i, src, i, 8, t & np.uint32(7))
    P.cp_async_cg_zfill(buf, i, src, i, 16, t & np.uint32(15))
    P.cp_async_commit()
    P.cp_async_wait(1)
    P.cp_async_wait(0)
    P.cp_async_wait_all()
    cuda.syncthreads()
    out[t] = buf[t]


def k_ldmatrix(src, out):
    buf = cuda.shared.array(1024, np.uint16)
    t = np.uint32(cuda.threadIdx.x)
    buf[t] = src[t]
    cuda.syncthreads()
    i = t * np.uint32(8)
    a = P.ldmatrix_x1(buf, i)
    b = P.ldmatrix_x2(buf, i)
    c = P.ldmatrix_x4(buf, i)
    d = P.ldmatrix_x1_trans(buf, i)
    e = P.ldmatrix_x2_trans(buf, i)
    f = P.ldmatrix_x4_trans(buf, i)
    out[t] = a[0] ^ b[1] ^ c[3] ^ d[0] ^ e[1] ^ f[3]


def k_mma(regs, acc, out):
    t = np.uint32(cuda.threadIdx.x) * np.uint32(8)
    a0, a1, a2, a3 = regs[t], regs[t + np.uint32(1)], regs[t + np.uint32(2)], regs[t + np.uint32(3)]
    b0, b1 = regs[t + np.uint32(4)], regs[t + np.uint32(5)]
    c = P.mma_m16n8k16_f32_bf16(a0, a1, a2, a3, b0, b1, acc[0], acc[1], acc[2], acc[3])
    c = P.mma_m16n8k16_f32_f16(a0, a1, a2, a3, b0, b1, c[0], c[1], c[2], c[3])
    c = P.mma_m16n8k8_f32_tf32(a0, a1, a2, a3, b0, b1, c[0], c[1], c[2], c[3])
    c0, c1 = regs[t + np.uint32(6)], regs[t + np.uint32(7)]
    h = P.mma_m16n8k16_f16_f16(a0, a1, a2, a3, b0, b1, c0, c1)
    h = P.mma_m16n8k8_f16_f16(a0, a1, b0, h[0], h[1])
    out[t] = c[0] + c[1] + c[2] + c[3] + P.uint32_as_float(h[0] ^ h[1])


def k_vector(g32, f32, out32, outf):
    s32 = cuda.shared.array(512, np.uint32)
    sf = cuda.shared.array(512, np.float32)
    t = np.uint32(cuda.threadIdx.x)
    i = t * np.uint32(4)
    v = P.ld_v4_b32(g32, i)
    P.st_v4_b32(s32, i, v[3], v[2], v[1], v[0])
    w = P.ld_v4_f32(f32, i)
    P.st_v4_f32(sf, i, w[0], w[1], w[2], w[3])
    cuda.syncthreads()
    x = P.ld_v4_b32(s32, i)
    y = P.ld_v4_f32(sf, i)
    P.st_v4_b32(out32, i, x[0], x[1], x[2], x[3])
    P.st_v4_f32(outf, i, y[0], y[1], y[2], y[3])
    j = t * np.uint32(2)
    p = P.ld_v2_b32(g32, j)
    q = P.ld_v2_f32(f32, j)
    P.st_v2_b32(out32, j, p[1], p[0])
    P.st_v2_f32(outf, j, q[1], q[0])


def k_convert(xs, out):
    t = np.uint32(cuda.threadIdx.x)
    x, y = xs[t], xs[t + np.uint32(1)]
    lo, hi = P.unpack_b16x2(P.float_as_uint32(x))
    r = P.cvt_rn_bf16x2_f32(np.float32(1.0), np.float32(-2.0))
    r ^= P.cvt_rn_f16x2_f32(x, y) ^ P.cvt_rna_tf32_f32(y) ^ P.pack_bf16x2(lo, hi)
    r ^= np.uint32(P.cvt_rn_bf16_f32(x)) ^ np.uint32(P.cvt_rn_f16_f32(y))
    f = P.bf16_to_f32(lo) + P.f16_to_f32(hi)
    u, v = P.bf16x2_to_f32(r)
    w, z = P.f16x2_to_f32(r)
    out[t] = f + u + v + w + z + P.uint32_as_float(r)


def k_shuffle(xs, out):
    t = np.uint32(cuda.threadIdx.x)
    out[t] = P.shfl_xor_f32(xs[t], 1) + np.float32(P.warp_uniform(t // np.uint32(128)))


SIGS = {
    k_cp_async: (U16, U16),
    k_ldmatrix: (U16, U32),
    k_mma: (U32, F32, F32),
    k_vector: (U32, F32, U32, F32),
    k_convert: (F32, F32),
    k_shuffle: (F32, F32),
}


@functools.lru_cache(maxsize=None)
def ptx_of(kernel, cc):
    return arch_inspect.compile_ptx(kernel, SIGS[kernel], cc)


def body(ptx):
    """The instructions of the PTX (comments dropped)."""
    return "\n".join(line.split("//")[0] for line in ptx.splitlines())


def assert_has(ptx, pattern, count=None):
    found = re.findall(pattern, body(ptx))
    assert found, f"{pattern!r} not in the PTX"
    if count is not None:
        assert len(found) == count, f"{pattern!r} found {len(found)} times, expected {count}"


# --- each instruction in the PTX -----------------------------------------------------------------

@pytest.mark.parametrize("cc", CCS)
def test_cp_async(cc):
    ptx = ptx_of(k_cp_async, cc)
    for size in (4, 8, 16):   # 32-bit .shared address, 64-bit .global address
        assert_has(ptx, rf"cp\.async\.ca\.shared\.global \[{R32}\], \[{RD64}\], {size};")
    assert_has(ptx, rf"cp\.async\.cg\.shared\.global \[{R32}\], \[{RD64}\], 16;")
    assert_has(ptx, rf"cp\.async\.ca\.shared\.global \[{R32}\], \[{RD64}\], 8, {R32};")
    assert_has(ptx, rf"cp\.async\.cg\.shared\.global \[{R32}\], \[{RD64}\], 16, {R32};")
    assert_has(ptx, r"cp\.async\.commit_group;", count=2)
    assert_has(ptx, r"cp\.async\.wait_group 1;")
    assert_has(ptx, r"cp\.async\.wait_group 0;")
    assert_has(ptx, r"cp\.async\.wait_all;")
    assert_has(ptx, r"cvta\.to\.global\.u64")


@pytest.mark.parametrize("cc", CCS)
def test_ldmatrix(cc):
    ptx = ptx_of(k_ldmatrix, cc)
    for num in (1, 2, 4):
        for trans in ("", r"\.trans"):
            assert_has(ptx, rf"ldmatrix\.sync\.aligned\.m8n8\.x{num}{trans}\.shared\.b16 "
                            rf"{_regs(num)}, \[{R32}\];", count=1)


@pytest.mark.parametrize("cc", CCS)
def test_mma(cc):
    ptx = ptx_of(k_mma, cc)
    f32_acc = rf"{_regs(4, F)}, {_regs(4)}, {_regs(2)}, {_regs(4, F)};"
    assert_has(ptx, r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32 " + f32_acc)
    assert_has(ptx, r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32 " + f32_acc)
    assert_has(ptx, r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32 " + f32_acc)
    assert_has(ptx, r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f16\.f16\.f16\.f16 "
                    rf"{_regs(2)}, {_regs(4)}, {_regs(2)}, {_regs(2)};")
    assert_has(ptx, r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f16\.f16\.f16\.f16 "
                    rf"{_regs(2)}, {_regs(2)}, {_regs(1)}, {_regs(2)};")


@pytest.mark.parametrize("cc", CCS)
def test_warp_shuffles(cc):
    ptx = ptx_of(k_shuffle, cc)
    assert_has(ptx, r"shfl\.sync\.bfly\.b32 %f\d+, %f\d+, 1, 0x1f, 0xffffffff;", 1)
    assert_has(ptx, r"shfl\.sync\.idx\.b32 %r\d+, %r\d+, 0, 0x1f, 0xffffffff;", 1)


@pytest.mark.parametrize("cc", CCS)
def test_vector_access(cc):
    ptx = ptx_of(k_vector, cc)
    assert_has(ptx, rf"ld\.global\.v4\.u32 \t{_regs(4)}")
    assert_has(ptx, rf"ld\.global\.v4\.f32 \t{_regs(4, F)}")
    assert_has(ptx, r"st\.shared\.v4\.u32")
    assert_has(ptx, r"st\.shared\.v4\.f32")
    assert_has(ptx, r"ld\.shared\.v4\.u32")
    assert_has(ptx, r"ld\.shared\.v4\.f32")
    assert_has(ptx, r"st\.global\.v4\.u32")
    assert_has(ptx, r"st\.global\.v4\.f32")
    assert_has(ptx, r"ld\.global\.v2\.u32")
    assert_has(ptx, r"ld\.global\.v2\.f32")
    assert_has(ptx, r"st\.global\.v2\.u32")
    assert_has(ptx, r"st\.global\.v2\.f32")


@pytest.mark.parametrize("cc", CCS)
def test_conversions(cc):
    ptx = body(ptx_of(k_convert, cc))
    assert_has(ptx, rf"cvt\.rn\.f16x2\.f32 {R32}, {F}, {F};")
    assert_has(ptx, rf"cvt\.rna\.tf32\.f32 {R32}, {F};")
    assert_has(ptx, r"cvt\.rn\.bf16\.f32 %rs\d+, %f\d+;")
    assert_has(ptx, r"cvt\.rn\.f16\.f32 %rs\d+, %f\d+;")
    assert_has(ptx, r"cvt\.f32\.f16 %f\d+, %rs\d+;")
    # cvt.rn.bf16x2.f32 d, a, b puts a in the upper half: the hi argument (-2.0) comes first.
    m = re.search(rf"cvt\.rn\.bf16x2\.f32 {R32}, (%f\d+), (%f\d+);", ptx)
    assert m, "cvt.rn.bf16x2.f32 not in the PTX"
    consts = dict(re.findall(r"mov\.f32 \t(%f\d+), (0f[0-9A-F]{8});", ptx))
    assert consts.get(m.group(1)) == "0fC0000000" and consts.get(m.group(2)) == "0f3F800000"


@pytest.mark.parametrize("kernel", list(SIGS), ids=lambda k: k.__name__)
def test_32bit_unsigned_index_math(kernel):
    """uint32 indices: no 64-bit signed division or remainder, and no local memory."""
    ptx = body(ptx_of(kernel, (8, 0)))
    assert not re.search(r"\b(div|rem)\.s64\b", ptx)
    assert not arch_inspect.local_memory_ops(ptx)


# --- compile-time errors -------------------------------------------------------------------------

def _typing_error(fn, sig):
    with pytest.raises((CoreTypingError, CudaTypingError)) as info:
        cuda.compile_ptx(fn, sig, cc=(8, 0))
    return str(info.value)


def test_cp_async_cg_needs_16_bytes():
    def k(src, dst):
        buf = cuda.shared.array(64, np.uint16)
        P.cp_async_cg(buf, 0, src, 0, 8)
    assert "cp.async.cg copies 16 bytes only" in _typing_error(k, (U16, U16))


def test_cp_async_size_must_be_literal_and_allowed():
    def k_size(src, dst):
        buf = cuda.shared.array(64, np.uint16)
        P.cp_async_ca(buf, 0, src, 0, 12)
    assert "nbytes must be one of (4, 8, 16)" in _typing_error(k_size, (U16, U16))

    def k_runtime(src, n):
        buf = cuda.shared.array(64, np.uint16)
        P.cp_async_ca(buf, 0, src, 0, n)
    assert "compile-time integer literal" in _typing_error(k_runtime, (U16, types.int32))

    def k_wait(n):
        P.cp_async_wait(n)
    assert "compile-time integer literal" in _typing_error(k_wait, (types.int32,))


def test_bad_operands_are_named():
    def k_ld(x):
        P.ldmatrix_x4(x, 0)
    assert "smem must have 16-bit elements" in _typing_error(k_ld, (F32,))

    def k_vec(x):
        P.ld_v4_f32(x, 0)       # (b32 vectors also take 16-bit arrays)
    assert "array must have 32-bit elements" in _typing_error(k_vec, (U16,))

    def k_mma(x):
        P.mma_m16n8k8_f16_f16(x[0], x[1], 1.5, x[2], x[3])
    assert "b0 must be an integer" in _typing_error(k_mma, (U32,))

    def k_elem(x):
        buf = cuda.shared.array(64, np.uint16)
        P.cp_async_ca(buf, 0, x, 0, 4)
    message = _typing_error(k_elem, (types.float64[::1],))
    assert "not a multiple of the 8-byte elements of src" in message


# --- ptxas: no spills, no local memory -----------------------------------------------------------

def k_all(src, regs, acc, g32, out):
    buf = cuda.shared.array(2048, np.uint16)
    sf = cuda.shared.array(512, np.float32)
    t = np.uint32(cuda.threadIdx.x)
    i = t * np.uint32(8)
    P.cp_async_cg(buf, i, src, i, 16)
    P.cp_async_ca_zfill(buf, i + np.uint32(1024), src, i, 16, t & np.uint32(15))
    P.cp_async_commit()
    P.cp_async_wait(0)
    cuda.syncthreads()
    a = P.ldmatrix_x4(buf, i)
    b = P.ldmatrix_x2_trans(buf, i + np.uint32(1024))
    c = P.mma_m16n8k16_f32_bf16(a[0], a[1], a[2], a[3], b[0], b[1], acc[0], acc[1], acc[2], acc[3])
    c = P.mma_m16n8k8_f32_tf32(a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], c[2], c[3])
    h = P.mma_m16n8k16_f16_f16(a[0], a[1], a[2], a[3], b[0], b[1], regs[t], regs[t])
    j = t * np.uint32(4)
    P.st_v4_f32(sf, j, c[0], c[1], c[2], c[3])
    cuda.syncthreads()
    v = P.ld_v4_f32(sf, j)
    P.st_v4_b32(g32, j, P.cvt_rn_bf16x2_f32(v[0], v[1]), P.cvt_rn_f16x2_f32(v[2], v[3]), h[0], h[1])
    out[t] = P.bf16_to_f32(P.cvt_rn_bf16_f32(v[0]))


@pytest.mark.parametrize("cc", CCS)
def test_ptxas_reports_no_spills_and_no_local_memory(cc):
    ptx = arch_inspect.compile_ptx(k_all, (U16, U32, F32, U32, F32), cc)
    assert not arch_inspect.local_memory_ops(ptx)
    (use,) = arch_inspect.ptxas_usage(ptx, cc)
    assert use.arch == arch_inspect.arch_name(cc)
    assert (use.spill_stores, use.spill_loads, use.stack_frame, use.local) == (0, 0, 0, 0)
    assert use.shared == 2048 * 2 + 512 * 4
    assert 0 < use.registers <= 64


# --- the inspect module itself -------------------------------------------------------------------

PTXAS_SAMPLE = """\
ptxas info    : 8 bytes gmem, 8 bytes cmem[4]
ptxas info    : Compiling entry function '_Z1kPf' for 'sm_80'
ptxas info    : Function properties for _Z1kPf
    96 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 16 bytes lmem, 49152 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function '_Z1gv' for 'sm_90a'
ptxas info    : Function properties for _Z1gv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers
"""


def test_ptxas_output_is_parsed():
    k, g = arch_inspect._parse(PTXAS_SAMPLE)
    assert k == arch_inspect.ResourceUsage("_Z1kPf", "sm_80", 255, 40, 36, 96, 49152, 16, 380)
    assert k.spills == 76
    assert (g.function, g.arch, g.registers, g.spills, g.shared) == ("_Z1gv", "sm_90a", 12, 0, 0)


def test_local_memory_is_detected():
    def k(x):
        a = cuda.local.array(64, np.float32)
        for j in range(64):
            a[j] = x[j * cuda.threadIdx.x]
        x[cuda.threadIdx.x] = a[x.size % 64]
    ptx = arch_inspect.compile_ptx(k, (F32,), (8, 0))
    assert any(op.startswith(("st.local", "ld.local")) for op in arch_inspect.local_memory_ops(ptx))
    (use,) = arch_inspect.ptxas_usage(ptx, (8, 0))
    assert use.stack_frame >= 256


def test_arch_names_and_errors():
    assert arch_inspect.arch_name((8, 0)) == "sm_80"
    assert arch_inspect.arch_name((9, 0, "a")) == "sm_90a"
    with pytest.raises(ValueError, match="cc must be a tuple"):
        arch_inspect.arch_name("sm_80")
    with pytest.raises(RuntimeError, match="ptxas failed"):
        arch_inspect.ptxas_usage(".version 8.0\n.target sm_80\nbogus;\n", (8, 0))
    with pytest.raises(TypeError, match="kernel must be"):
        arch_inspect.compile_ptx(42, (F32,), (8, 0))


def test_jit_kernel_options_are_kept():
    @cuda.jit(fastmath=True)
    def k(x):
        x[0] = x[1] / x[2]
    assert "div.approx.ftz.f32" in arch_inspect.compile_ptx(k, (F32,), (8, 0))
    assert "div.rn.f32" in arch_inspect.compile_ptx(k.py_func, (F32,), (8, 0))


STAGES_IN_FLIGHT = 2   # a module global: typed as a literal, as kernels' constants are


def test_literals_from_closures_and_globals():
    def make(nbytes):
        def k(src, dst):
            buf = cuda.shared.array(256, np.uint16)
            t = np.uint32(cuda.threadIdx.x)
            P.cp_async_ca_zfill(buf, t * np.uint32(8), src, 0, nbytes, t)
            P.cp_async_commit()
            P.cp_async_wait(STAGES_IN_FLIGHT)
            dst[t] = buf[t]
        return k
    for nbytes in (4, 8, 16):
        ptx = body(arch_inspect.compile_ptx(make(nbytes), (U16, U16), (8, 0)))
        assert_has(ptx, rf"cp\.async\.ca\.shared\.global \[{R32}\], \[{RD64}\], {nbytes}, {R32};")
        assert_has(ptx, r"cp\.async\.wait_group 2;")
