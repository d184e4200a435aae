"""gemm.arch on a real GPU (marked ``gpu``; skipped without one): every intrinsic against the
same independent references as its simulator twin (tests/test_sim_twins.py), and the dynamic
shared memory opt-in. Without a GPU, ``test_gpu_kernels_compile`` still compiles every kernel
here to PTX, so this file cannot rot unnoticed."""

import numpy as np
import pytest

from gemm._env import simulator_active

if simulator_active():
    pytest.skip("needs the real numba.cuda", allow_module_level=True)

from numba import cuda  # noqa: E402
from numba.cuda import types  # noqa: E402

from gemm.arch import ptx as P  # noqa: E402
from gemm.arch.smem import allow_dynamic_shared  # noqa: E402
from test_sim_twins import (  # noqa: E402
    CP_ASYNC, MMA, conversions_verify, cp_async_expected, k_convert, ldmatrix_case, mma_case,
    random_normals, vector_access_verify,
)


def _has_gpu():
    try:
        return cuda.is_available() and cuda.get_current_device().compute_capability >= (8, 0)
    except Exception:  # noqa: BLE001 - no driver at all
        return False


gpu = pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU of compute capability >= 8.0")
U16, U32, F32 = types.uint16, types.uint32, types.float32


# --- kernels -------------------------------------------------------------------------------------

def make_ldmatrix_kernel(num, trans, tile_size):
    fn = getattr(P, f"ldmatrix_x{num}{'_trans' if trans else ''}")

    def kernel(tile, row_at, out):
        smem = cuda.shared.array(tile_size, np.uint16, alignment=16)
        t = cuda.threadIdx.x
        for i in range(t, tile_size, cuda.blockDim.x):
            smem[i] = tile[i]
        cuda.syncthreads()
        regs = fn(smem, row_at[t])
        for j in range(num):
            out[t, j] = regs[j]
    return kernel, (U16[::1], U32[::1], U32[:, ::1])


def make_mma_f32_kernel(fn):
    """Kernel of an mma with 4 A, 2 B and 4 f32 C registers per lane."""
    def kernel(a, b, c, out):
        t = cuda.threadIdx.x
        d = fn(a[t, 0], a[t, 1], a[t, 2], a[t, 3], b[t, 0], b[t, 1],
               c[t, 0], c[t, 1], c[t, 2], c[t, 3])
        for r in range(4):
            out[t, r] = d[r]
    return kernel


def k_mma_m16n8k16_f16_f16(a, b, c, out):
    t = cuda.threadIdx.x
    d = P.mma_m16n8k16_f16_f16(a[t, 0], a[t, 1], a[t, 2], a[t, 3], b[t, 0], b[t, 1],
                               c[t, 0], c[t, 1])
    out[t, 0] = d[0]
    out[t, 1] = d[1]


def k_mma_m16n8k8_f16_f16(a, b, c, out):
    t = cuda.threadIdx.x
    d = P.mma_m16n8k8_f16_f16(a[t, 0], a[t, 1], b[t, 0], c[t, 0], c[t, 1])
    out[t, 0] = d[0]
    out[t, 1] = d[1]


MMA_KERNELS = {
    **{name: (make_mma_f32_kernel(getattr(P, name)), F32)
       for name in ("mma_m16n8k16_f32_bf16", "mma_m16n8k16_f32_f16", "mma_m16n8k8_f32_tf32")},
    "mma_m16n8k16_f16_f16": (k_mma_m16n8k16_f16_f16, U32),
    "mma_m16n8k8_f16_f16": (k_mma_m16n8k8_f16_f16, U32),
}

def make_cp_async_kernel(op, nbytes, zmax):
    fn = getattr(P, op)
    words = nbytes // 4
    modulus = 1 if zmax is None else zmax + 1

    def kernel(src, out):
        buf = cuda.shared.array(256, np.uint32, alignment=16)
        t = np.uint32(cuda.threadIdx.x)
        for i in range(t, 256, 32):
            buf[i] = np.uint32(0xDEADBEEF)
        cuda.syncthreads()
        si = (t * np.uint32(3) % np.uint32(32)) * np.uint32(words)
        if zmax is None:
            fn(buf, t * np.uint32(words), src, si, nbytes)
        else:
            fn(buf, t * np.uint32(words), src, si, nbytes, t % np.uint32(modulus))
        P.cp_async_commit()
        P.cp_async_wait(0)
        cuda.syncthreads()
        for i in range(t, 256, 32):
            out[i] = buf[i]
    return kernel, (U32[::1], U32[::1])


def k_vector(xf, out_bits, out_f, out_v2):
    s = cuda.shared.array(128, np.float32, alignment=16)
    t = np.uint32(cuda.threadIdx.x)
    i = t * np.uint32(4)
    v = P.ld_v4_b32(xf, i)
    P.st_v4_b32(out_bits, i, v[3], v[2], v[1], v[0])
    w = P.ld_v4_f32(xf, i)
    two = np.float32(2)
    P.st_v4_f32(s, i, w[0] * two, w[1] * two, w[2] * two, w[3] * two)
    cuda.syncthreads()
    y = P.ld_v4_f32(s, ((t + np.uint32(1)) % np.uint32(32)) * np.uint32(4))
    P.st_v4_f32(out_f, i, y[0], y[1], y[2], y[3])
    j = t * np.uint32(2)
    p = P.ld_v2_b32(out_bits, j)
    P.st_v2_b32(out_v2, j, p[1], p[0])
    q = P.ld_v2_f32(xf, j + np.uint32(64))
    P.st_v2_f32(out_f, j + np.uint32(128), q[0], q[1])


def k_dynamic_shared(out):
    buf = cuda.shared.array(0, np.float32)
    t = cuda.threadIdx.x
    n = out.size
    for i in range(t, n, cuda.blockDim.x):
        buf[i] = i
    cuda.syncthreads()
    for i in range(t, n, cuda.blockDim.x):
        out[i] = buf[n - 1 - i]


def all_kernels():
    """Every kernel of this file with its signature."""
    out = [make_ldmatrix_kernel(n, tr, 4 * 8 * 24) for n in (1, 2, 4) for tr in (False, True)]
    out += [(k, (U32[:, ::1], U32[:, ::1], acc[:, ::1], acc[:, ::1]))
            for k, acc in MMA_KERNELS.values()]
    out += [make_cp_async_kernel(op, nbytes, zmax) for op, nbytes, zmax in CP_ASYNC]
    out += [(k_vector, (F32[::1], U32[::1], F32[::1], U32[::1])),
            (k_convert, (F32[::1], U32[:, ::1])), (k_dynamic_shared, (F32[::1],))]
    return out


def test_gpu_kernels_compile():
    """Without a GPU: each GPU kernel of this file compiles for sm_80."""
    for kernel, sig in all_kernels():
        ptx, _ = cuda.compile_ptx(kernel, sig, cc=(8, 0))
        assert ".entry" in ptx


# --- on the GPU ----------------------------------------------------------------------------------

@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_on_gpu(num, trans):
    tile, row_at, expected = ldmatrix_case(num, warps=1, seed=100 + num)
    kernel, _ = make_ldmatrix_kernel(num, trans, tile.size)
    out = np.zeros((32, num), np.uint32)
    cuda.jit(kernel)[1, 32](tile, row_at, out)
    np.testing.assert_array_equal(out, expected(trans))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("name", list(MMA))
def test_mma_on_gpu(name):
    """Against float64 of the rounded inputs; for tf32 the inputs keep their low 13 bits, so this
    also checks that the tensor core truncates them (as the twin assumes). 16 ulps of slack for
    the hardware's summation order (f16 accumulators: of f16)."""
    kernel, acc = MMA_KERNELS[name]
    a_regs, b_regs, c_regs, verify = mma_case(name, seed=7)
    out = np.zeros((32, c_regs.shape[1]), c_regs.dtype)
    cuda.jit(kernel)[1, 32](a_regs, b_regs, c_regs, out)
    verify(out, ulps=16)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(CP_ASYNC)))
def test_cp_async_on_gpu(case):
    op, nbytes, zmax = CP_ASYNC[case]
    kernel, _ = make_cp_async_kernel(op, nbytes, zmax)
    src = np.random.default_rng(case).integers(0, 1 << 32, 256, dtype=np.uint32)
    out = np.zeros(256, np.uint32)
    cuda.jit(kernel)[1, 32](src, out)
    np.testing.assert_array_equal(out, cp_async_expected(src, nbytes, zmax))


@gpu
@pytest.mark.gpu
def test_vector_access_on_gpu():
    xf = np.random.default_rng(3).standard_normal(128).astype(np.float32)
    bits, outf, v2 = np.zeros(128, np.uint32), np.zeros(192, np.float32), np.zeros(64, np.uint32)
    cuda.jit(k_vector)[1, 32](xf, bits, outf, v2)
    vector_access_verify(xf, bits, outf, v2)


@gpu
@pytest.mark.gpu
def test_conversions_on_gpu():
    x = random_normals(np.random.default_rng(5), 64, -1e3, 1e3)
    out = np.zeros((32, 12), np.uint32)
    cuda.jit(k_convert)[1, 32](x, out)
    conversions_verify(x, out)


@gpu
@pytest.mark.gpu
def test_dynamic_shared_memory_beyond_48k():
    nbytes = 96 * 1024
    out = cuda.device_array(nbytes // 4, np.float32)
    kernel = cuda.jit(k_dynamic_shared)
    kernel.compile((F32[::1],))
    # Not opted in: the driver refuses the launch. numba-cuda raises its CudaAPIError or, where
    # it launches through cuda.core, cuda.core's CUDAError; both name the driver's error.
    with pytest.raises(Exception, match="CUDA_ERROR_INVALID_VALUE"):
        kernel[1, 256, 0, nbytes](out)
        cuda.synchronize()
    allow_dynamic_shared(kernel, nbytes)
    kernel[1, 256, 0, nbytes](out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(nbytes // 4)[::-1])
