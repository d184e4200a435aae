"""The tile-level instructions (gemm.arch.tile and their twins in gemm.arch.sim_tile).

Each tile is checked against the same work written with the scalar instructions, whose own
tests hold them to independent references (test_sim_twins.py, test_arch_gpu.py): a kernel runs
a tile, a twin kernel runs the scalar calls in plan order on the same random inputs, and the
outputs must be equal bit for bit. The kernels run in numba's CUDA simulator (this file as a
script in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``, like test_sim_twins.py) and, when a GPU
is present, on the GPU; on a CPU they are also compiled to PTX, where each tile must issue one
instruction per plan entry and leave no local memory. Bad plans raise ValueError naming the
entry and the field.
"""

import json
import re
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:   # run as a script by the simulator test
    sys.path.insert(0, str(ROOT))

from numba import cuda  # noqa: E402

from gemm import arch  # noqa: E402
from gemm._env import simulator_active  # noqa: E402
from gemm.arch import sim_tile  # noqa: E402
from gemm.arch.tile_plan import ADD, SWIZZLE, XOR  # noqa: E402

U = np.uint32
SWZ = (448, 3)                   # Swizzle<3,3,3> on element offsets: x ^ ((x & 0x1c0) >> 3)


@cuda.jit(device=True, inline="always")
def swz(x):
    return x ^ ((x & U(448)) >> U(3))


# --- the tiles and their scalar twins ---------------------------------------------------------

# three m16n8k16 bf16 MMAs, the last one chained on the first one's accumulators
MMA_PLAN = (((0, 1, 2, 3), (0, 1, 2, 3), (0, 1)), ((4, 5, 6, 7), (4, 5, 6, 7), (2, 3)),
            ((0, 1, 2, 3), (4, 5, 6, 7), (2, 3)))
MMA = arch.mma_tile("mma_m16n8k16_f32_bf16", MMA_PLAN)


def k_mma_tile(ra, rb, rc, out):
    t = U(cuda.threadIdx.x)
    acc = cuda.local.array(8, np.float32)
    fa = cuda.local.array(8, np.uint32)
    fb = cuda.local.array(4, np.uint32)
    for i in range(8):
        fa[i] = ra[t * U(8) + U(i)]
        acc[i] = rc[t * U(8) + U(i)]
    for i in range(4):
        fb[i] = rb[t * U(4) + U(i)]
    MMA(acc, fa, fb)
    for i in range(8):
        out[t * U(8) + U(i)] = acc[i]


def k_mma_scalar(ra, rb, rc, out):
    t = U(cuda.threadIdx.x)
    a, b, c = t * U(8), t * U(4), t * U(8)
    c0, c1, c2, c3 = arch.mma_m16n8k16_f32_bf16(
        ra[a], ra[a + U(1)], ra[a + U(2)], ra[a + U(3)], rb[b], rb[b + U(1)],
        rc[c], rc[c + U(1)], rc[c + U(2)], rc[c + U(3)])
    c4, c5, c6, c7 = arch.mma_m16n8k16_f32_bf16(
        ra[a + U(4)], ra[a + U(5)], ra[a + U(6)], ra[a + U(7)], rb[b + U(2)], rb[b + U(3)],
        rc[c + U(4)], rc[c + U(5)], rc[c + U(6)], rc[c + U(7)])
    c0, c1, c2, c3 = arch.mma_m16n8k16_f32_bf16(
        ra[a + U(4)], ra[a + U(5)], ra[a + U(6)], ra[a + U(7)], rb[b + U(2)], rb[b + U(3)],
        c0, c1, c2, c3)
    out[c], out[c + U(1)], out[c + U(2)], out[c + U(3)] = c0, c1, c2, c3
    out[c + U(4)], out[c + U(5)], out[c + U(6)], out[c + U(7)] = c4, c5, c6, c7


# ldmatrix x4 and x4.trans at offsets of each mode over a Swizzle<3,3,3> tile of 64-element rows
LDSM_PLAN = ((ADD, 0, (0, 1, 2, 3)), (XOR, 16, (4, 5, 6, 7)), (SWIZZLE, 24, (8, 9, 10, 11)))
LDSM = arch.load_tile("ldmatrix_x4", LDSM_PLAN, SWZ)
LDSM_T = arch.load_tile("ldmatrix_x4_trans", LDSM_PLAN, SWZ)


def _ldsm_kernels(tile, scalar):
    def k_tile(src, out):
        sm = cuda.shared.array(4096, np.uint16)
        t = U(cuda.threadIdx.x)
        for i in range(128):
            sm[t * U(128) + U(i)] = src[t * U(128) + U(i)]
        cuda.syncthreads()
        raw = U(64) * (t % U(32))                 # row t of a 64-element-row tile
        frag = cuda.local.array(12, np.uint32)
        tile(frag, sm, U(512), swz(raw), raw)
        for i in range(12):
            out[t * U(12) + U(i)] = frag[i]

    def k_scalar(src, out):
        sm = cuda.shared.array(4096, np.uint16)
        t = U(cuda.threadIdx.x)
        for i in range(128):
            sm[t * U(128) + U(i)] = src[t * U(128) + U(i)]
        cuda.syncthreads()
        raw = U(64) * (t % U(32))
        o = t * U(12)
        out[o], out[o + U(1)], out[o + U(2)], out[o + U(3)] = scalar(sm, U(512) + swz(raw))
        out[o + U(4)], out[o + U(5)], out[o + U(6)], out[o + U(7)] = scalar(
            sm, U(512) + (swz(raw) ^ U(16)))
        out[o + U(8)], out[o + U(9)], out[o + U(10)], out[o + U(11)] = scalar(
            sm, U(512) + swz(raw + U(24)))
    return k_tile, k_scalar


k_ldsm_tile, k_ldsm_scalar = _ldsm_kernels(LDSM, arch.ldmatrix_x4)
k_ldsm_t_tile, k_ldsm_t_scalar = _ldsm_kernels(LDSM_T, arch.ldmatrix_x4_trans)

# per-thread shared loads: 128-bit, 32-bit, and 32-bit rounded to tf32
LDV4 = arch.load_tile("ld_v4_f32", ((ADD, 0, (0, 1, 2, 3)), (ADD, 8, (4, 5, 6, 7))))
LDF = arch.load_tile("ld_f32", ((ADD, 5, (8,)), (XOR, 3, (9,))))
LDTF = arch.load_tile("ld_tf32", ((ADD, 1, (0,)), (SWIZZLE, 70, (1,))), SWZ)


def k_lds_tile(src, out, bits):
    sm = cuda.shared.array(1024, np.float32)
    t = U(cuda.threadIdx.x)
    for i in range(32):
        sm[t * U(32) + U(i)] = src[t * U(32) + U(i)]
    cuda.syncthreads()
    f = cuda.local.array(10, np.float32)
    g = cuda.local.array(2, np.uint32)
    base = t * U(16)
    LDV4(f, sm, U(0), base, base)
    LDF(f, sm, U(0), base, base)
    LDTF(g, sm, U(0), swz(base), base)
    for i in range(10):
        out[t * U(10) + U(i)] = f[i]
    bits[t * U(2)] = g[0]
    bits[t * U(2) + U(1)] = g[1]


def k_lds_scalar(src, out, bits):
    sm = cuda.shared.array(1024, np.float32)
    t = U(cuda.threadIdx.x)
    for i in range(32):
        sm[t * U(32) + U(i)] = src[t * U(32) + U(i)]
    cuda.syncthreads()
    base, o = t * U(16), t * U(10)
    out[o], out[o + U(1)], out[o + U(2)], out[o + U(3)] = arch.ld_v4_f32(sm, base)
    out[o + U(4)], out[o + U(5)], out[o + U(6)], out[o + U(7)] = arch.ld_v4_f32(sm, base + U(8))
    out[o + U(8)] = sm[base + U(5)]
    out[o + U(9)] = sm[base ^ U(3)]
    bits[t * U(2)] = arch.cvt_rna_tf32_f32(sm[swz(base) + U(1)])
    bits[t * U(2) + U(1)] = arch.cvt_rna_tf32_f32(sm[swz(base + U(70))])


# cp.async of 16 bytes from global rows of a run-time pitch into swizzled shared memory
CPA_PLAN = ((ADD, 0, 0, 0), (XOR, 8, 8, 0), (SWIZZLE, 64, 0, 1), (ADD, 128, 16, 2))
CPA = arch.cp_async_tile("cg", 16, CPA_PLAN, SWZ)


def _cp_async_kernels():
    def k_tile(src, out, ld):
        sm = cuda.shared.array(9216, np.uint16)
        t = U(cuda.threadIdx.x)
        for i in range(288):
            sm[t * U(288) + U(i)] = U(0)
        cuda.syncthreads()
        raw = U(256) * t                      # a window of 256 elements per thread
        CPA(sm, U(1024), swz(raw), raw, src, U(24) * t, ld)
        arch.cp_async_commit()
        arch.cp_async_wait(0)
        cuda.syncthreads()
        for i in range(288):
            out[t * U(288) + U(i)] = sm[t * U(288) + U(i)]

    def k_scalar(src, out, ld):
        sm = cuda.shared.array(9216, np.uint16)
        t = U(cuda.threadIdx.x)
        for i in range(288):
            sm[t * U(288) + U(i)] = U(0)
        cuda.syncthreads()
        raw = U(256) * t
        g = U(24) * t
        arch.cp_async_cg(sm, U(1024) + swz(raw), src, g, 16)
        arch.cp_async_cg(sm, U(1024) + (swz(raw) ^ U(8)), src, g + U(8), 16)
        arch.cp_async_cg(sm, U(1024) + swz(raw + U(64)), src, g + ld, 16)
        arch.cp_async_cg(sm, U(1024) + swz(raw) + U(128), src, g + U(16) + U(2) * ld, 16)
        arch.cp_async_commit()
        arch.cp_async_wait(0)
        cuda.syncthreads()
        for i in range(288):
            out[t * U(288) + U(i)] = sm[t * U(288) + U(i)]
    return k_tile, k_scalar


k_cpa_tile, k_cpa_scalar = _cp_async_kernels()

# predicated copies at a matrix' edges: 16-byte vectors along mn, single floats along k; the
# global matrix is (ext_mn, ext_k) with mn contiguous and a run-time ld (element (m, k) at
# m + k * ld); thread t copies around (mn0, k0) = (4 * (t % 8), t // 8)
ZF_MN = arch.cp_async_zfill_tile("cg", 16, 4, 0, ((ADD, 0, 0, 0, 0, 0), (ADD, 4, 4, 1, 4, 1),
                                                  (XOR, 8, 8, 2, 8, 2)))
ZF_K = arch.cp_async_zfill_tile("ca", 4, 4, 1, ((ADD, 12, 0, 0, 0, 0), (ADD, 13, 1, 3, 1, 3)))


def k_zfill_tile(src, out, ld, ext_mn, ext_k):
    sm = cuda.shared.array(512, np.float32)
    t = U(cuda.threadIdx.x)
    for i in range(16):
        sm[t * U(16) + U(i)] = np.float32(-1)
    cuda.syncthreads()
    mn0, k0 = U(4) * (t % U(8)), t // U(8)
    base = mn0 + k0 * ld
    ZF_MN(sm, U(0), t * U(16), t * U(16), src, base, ld, mn0, k0, ext_mn, ext_k)
    ZF_K(sm, U(0), t * U(16), t * U(16), src, base, ld, mn0, k0, ext_mn, ext_k)
    arch.cp_async_commit()
    arch.cp_async_wait(0)
    cuda.syncthreads()
    for i in range(16):
        out[t * U(16) + U(i)] = sm[t * U(16) + U(i)]


def k_zfill_scalar(src, out, ld, ext_mn, ext_k):
    sm = cuda.shared.array(512, np.float32)
    t = U(cuda.threadIdx.x)
    for i in range(16):
        sm[t * U(16) + U(i)] = np.float32(-1)
    cuda.syncthreads()
    mn0, k0 = U(4) * (t % U(8)), t // U(8)
    base, d = mn0 + k0 * ld, t * U(16)
    for j in range(3):                 # along mn: (dmn, dk) = (4j, j), g = 4j, gl = j
        mn, kk = mn0 + U(4 * j), k0 + U(j)
        n = min(U(4), ext_mn - min(mn, ext_mn)) if kk < ext_k else U(0)
        si = base + U(4 * j) + U(j) * ld if n != U(0) else U(0)
        at = d + U(4 * j) if j < 2 else d ^ U(8)           # the last entry: XOR mode
        arch.cp_async_cg_zfill(sm, at, src, si, 16, n * U(4))
    for j in range(2):                 # along k: (dmn, dk) = (j, 3j), g = j, gl = 3j
        mn, kk = mn0 + U(j), k0 + U(3 * j)
        n = U(1) if mn < ext_mn and kk < ext_k else U(0)
        si = base + U(j) + U(3 * j) * ld if n != U(0) else U(0)
        arch.cp_async_ca_zfill(sm, d + U(12 + j), src, si, 4, n * U(4))
    arch.cp_async_commit()
    arch.cp_async_wait(0)
    cuda.syncthreads()
    for i in range(16):
        out[t * U(16) + U(i)] = sm[t * U(16) + U(i)]


# FMAs, fill, the scaled staging store and the predicated epilogue of a 2x3 register tile
FMA_PLAN = tuple((3 * i + j, i, j) for i in range(2) for j in range(3)) + ((0, 1, 2),)
FMA = arch.fma_tile(FMA_PLAN)
FILL = arch.fill_tile(6)
STAGE = arch.scaled_store_tile(((0, (0, 1)), (4, (2, 3)), (8, (4, 5))))
STORE_C = arch.store_c_tile(tuple((3 * i + j, i, 2 * j) for i in range(2) for j in range(3)))


def k_register_tile(fa_in, fb_in, c, staged, M, N, ldm, alpha, beta):
    t = U(cuda.threadIdx.x)
    acc = cuda.local.array(6, np.float32)
    fa = cuda.local.array(2, np.float32)
    fb = cuda.local.array(3, np.float32)
    FILL(acc, np.float32(0.5))
    for i in range(2):
        fa[i] = fa_in[t * U(2) + U(i)]
    for j in range(3):
        fb[j] = fb_in[t * U(3) + U(j)]
    FMA(acc, fa, fb)
    STAGE(staged, t * U(12), acc, alpha)
    STORE_C(c, U(2) * t * ldm, acc, alpha, beta, U(2) * t, U(0), M, N, ldm, U(1))


def k_register_scalar(fa_in, fb_in, c, staged, M, N, ldm, alpha, beta):
    t = U(cuda.threadIdx.x)
    acc = cuda.local.array(6, np.float32)
    for i in range(2):
        for j in range(3):
            acc[3 * i + j] = cuda.fma(fa_in[t * U(2) + U(i)], fb_in[t * U(3) + U(j)],
                                      np.float32(0.5))
    acc[0] = cuda.fma(fa_in[t * U(2) + U(1)], fb_in[t * U(3) + U(2)], acc[0])
    for k in range(3):
        arch.st_v2_f32(staged, t * U(12) + U(4 * k), alpha * acc[2 * k], alpha * acc[2 * k + 1])
    for i in range(2):
        for j in range(3):
            if U(2) * t + U(i) < M and U(2 * j) < N:
                at = U(2) * t * ldm + U(i) * ldm + U(2 * j)
                v = alpha * acc[3 * i + j]
                c[at] = v + beta * c[at] if beta != np.float32(0) else v


# --- the cases: one input set, the tile kernel and the scalar kernel --------------------------

def _bf16_regs(rng, n):
    """n uint32 registers of two bf16 each (values in [-2, 2), exactly representable)."""
    halves = (rng.integers(-64, 64, 2 * n) / 32).astype(np.float32).view(np.uint32) >> 16
    return (halves[0::2] | (halves[1::2] << 16)).astype(np.uint32)


def cases(seed=0):
    """{name: (tile kernel, scalar kernel, block threads, inputs, output indices)}; inputs
    are host arrays (scalars as numpy scalars), outputs the indices of the arrays written."""
    rng = np.random.default_rng(seed)
    f32 = lambda n: rng.uniform(-2, 2, n).astype(np.float32)    # noqa: E731
    mma = (k_mma_tile, k_mma_scalar, 32,
           [_bf16_regs(rng, 256), _bf16_regs(rng, 128), f32(256), np.full(256, np.nan, np.float32)],
           [3])
    ldsm_src = rng.integers(0, 1 << 16, 4096, dtype=np.uint64).astype(np.uint16)
    out = {"mma_tile": mma}
    for name, kt, ks in (("load_tile ldmatrix_x4", k_ldsm_tile, k_ldsm_scalar),
                         ("load_tile ldmatrix_x4_trans", k_ldsm_t_tile, k_ldsm_t_scalar)):
        out[name] = (kt, ks, 32, [ldsm_src, np.zeros(32 * 12, np.uint32)], [1])
    out["load_tile ld_*"] = (k_lds_tile, k_lds_scalar, 32,
                             [f32(1024), np.full(320, np.nan, np.float32),
                              np.zeros(64, np.uint32)], [1, 2])
    out["cp_async_tile"] = (k_cpa_tile, k_cpa_scalar, 32,
                            [rng.integers(0, 1 << 16, 32 * 24 + 2 * 40 + 16, dtype=np.uint64)
                             .astype(np.uint16), np.zeros(9216, np.uint16), U(40)], [1])
    ld = 32            # 30 x 5 in a 32 x 9 buffer: copies cross the right and bottom edges
    out["cp_async_zfill_tile"] = (k_zfill_tile, k_zfill_scalar, 32,
                                  [f32(32 * 9), np.full(512, np.nan, np.float32), U(ld), U(30),
                                   U(5)], [1])
    for beta in (0.0, 0.75):
        M, N, ldm = 37, 4, 6       # rows 37.. and column 4 fall outside
        out[f"fma/fill/stage/store_c beta={beta}"] = (
            k_register_tile, k_register_scalar, 32,
            [f32(64), f32(96), f32(64 * ldm), np.full(32 * 12, np.nan, np.float32), U(M), U(N),
             U(ldm), np.float32(1.5), np.float32(beta)], [2, 3])
    return out


def run_case(name, to_device=None):
    """Run both kernels of a case; the tile kernel's outputs and the scalar kernel's."""
    kt, ks, threads, inputs, outs = cases()[name]
    results = []
    for kernel in (kt, ks):
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
        dev = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
        cuda.jit(kernel)[1, threads](*dev)
        results.append([dev[i].copy_to_host() for i in outs])
    return results


def same(tile, scalar, atol=0.0):
    """Equal bit for bit (NaN outputs included); float outputs within ``atol`` if given."""
    for x, y in zip(tile, scalar):
        assert x.dtype == y.dtype and x.shape == y.shape
        if atol and x.dtype == np.float32:
            np.testing.assert_allclose(x, y, rtol=0, atol=atol)
        else:
            assert np.array_equal(x.view(np.uint8), y.view(np.uint8)), (x, y)


def run_checks():
    """Every case in this process; {name: "ok" or the failure}. The FMA case may differ in the
    last bits here (values are O(1)): the simulator's ``cuda.fma`` rounds the product and the
    sum apart, the twin of fma_tile (like the GPU) once."""
    report = {}
    for name in cases():
        try:
            same(*run_case(name), atol=1e-6 if name.startswith("fma") else 0.0)
            report[name] = "ok"
        except Exception:
            report[name] = traceback.format_exc(limit=4)
    return report


# --- in the simulator -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def simulator_report():
    from simcase import simulator_report
    return simulator_report(__file__)


def test_tiles_equal_their_scalar_instructions_in_simulator(simulator_report):
    assert set(simulator_report) == set(cases())
    failed = {k: v for k, v in simulator_report.items() if v != "ok"}
    assert not failed, "\n".join(f"{k}:\n{v}" for k, v in failed.items())


def test_a_broken_tile_is_caught():
    """The comparison can fail: a twin with a wrong plan differs from the scalar kernel."""
    rng = np.random.default_rng(1)
    acc, fa, fb = np.zeros(6, np.float32), rng.random(2, np.float32), rng.random(3, np.float32)
    right, wrong = acc.copy(), acc.copy()
    sim_tile.fma_tile(FMA_PLAN)(right, fa, fb)
    sim_tile.fma_tile(FMA_PLAN[:-1] + ((1, 1, 2),))(wrong, fa, fb)
    with pytest.raises(AssertionError):
        same([right], [wrong])


# --- on the GPU -------------------------------------------------------------------------------

def _has_gpu():
    if simulator_active():
        return False
    try:
        return cuda.is_available() and cuda.get_current_device().compute_capability >= (8, 0)
    except Exception:  # noqa: BLE001 - no driver at all
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU of compute capability >= 8.0")
@pytest.mark.parametrize("name", list(cases()))
def test_tiles_equal_their_scalar_instructions_on_gpu(name):
    same(*run_case(name))


# --- PTX on the CPU ---------------------------------------------------------------------------

PTX_SIGS = {
    k_mma_tile: "void(uint32[::1], uint32[::1], float32[::1], float32[::1])",
    k_ldsm_tile: "void(uint16[::1], uint32[::1])",
    k_ldsm_t_tile: "void(uint16[::1], uint32[::1])",
    k_lds_tile: "void(float32[::1], float32[::1], uint32[::1])",
    k_cpa_tile: "void(uint16[::1], uint16[::1], uint32)",
    k_zfill_tile: "void(float32[::1], float32[::1], uint32, uint32, uint32)",
    k_register_tile: ("void(float32[::1], float32[::1], float32[::1], float32[::1], uint32, "
                      "uint32, uint32, float32, float32)"),
}
PTX_COUNTS = {   # instruction pattern: expected count, per kernel
    k_mma_tile: {r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16": 3},
    k_ldsm_tile: {r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16": 3},
    k_ldsm_t_tile: {r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16": 3},
    k_lds_tile: {r"ld\.shared\.v4\.f32": 2, r"cvt\.rna\.tf32\.f32": 2},
    k_cpa_tile: {r"cp\.async\.cg\.shared\.global": 4},
    k_zfill_tile: {r"cp\.async\.cg\.shared\.global": 3, r"cp\.async\.ca\.shared\.global": 2},
    # the tile's 7 FMAs and the epilogue's 6 alpha*acc + beta*C
    k_register_tile: {r"fma\.rn\.f32": 7 + 6, r"st\.global\.v2\.f32": 3},
}


@pytest.mark.skipif(simulator_active(), reason="compiles PTX: needs the real numba.cuda")
@pytest.mark.parametrize("kernel", list(PTX_SIGS), ids=lambda k: k.__name__)
def test_tiles_issue_one_instruction_per_entry_and_no_local_memory(kernel):
    ptx, _ = cuda.compile_ptx(kernel, PTX_SIGS[kernel], cc=(8, 0))
    for pattern, n in PTX_COUNTS[kernel].items():
        assert len(re.findall(pattern, ptx)) == n, (pattern, ptx)
    assert ".local" not in ptx


# --- plans ------------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", ["ptx", "sim"])
@pytest.mark.parametrize("make,message", [
    (lambda m: m.mma_tile("mma_m16n8k16_f32_bf16", (((0, 1, 2), (0, 1, 2, 3), (0, 1)),)),
     "plan entry 0, field 0 must be a tuple of 4 register indices"),
    (lambda m: m.mma_tile("mma_m99", (((0, 1, 2, 3), (0, 1, 2, 3), (0, 1)),)),
     "op must be one of"),
    (lambda m: m.load_tile("ldmatrix_x4", ((SWIZZLE, 8, (0, 1, 2, 3)),)),
     "SWIZZLE mode but no swizzle"),
    (lambda m: m.load_tile("ld_f32", ((7, 8, (0,)),)), "must be an offset mode"),
    (lambda m: m.cp_async_tile("cg", 8, ((ADD, 0, 0, 0),)), "cp.async.cg of 8 bytes"),
    (lambda m: m.cp_async_zfill_tile("ca", 8, 4, 2, ((0,) * 6,)), "along must be 0"),
    (lambda m: m.cp_async_zfill_tile("ca", 8, 3, 0, ((0,) * 6,)), "must divide 8"),
    (lambda m: m.cp_async_zfill_tile("ca", 8, 4, 0, ((SWIZZLE,) + (0,) * 5,)),
     "SWIZZLE mode but no swizzle"),
    (lambda m: m.fma_tile(((0, -1, 2),)), "field 1 must be a non-negative int"),
    (lambda m: m.fma_tile(()), "non-empty tuple"),
    (lambda m: m.scaled_store_tile(((0, (0, 1, 2)),)), "1, 2 or 4 registers"),
    (lambda m: m.fill_tile(0), "positive int"),
])
def test_bad_plans_are_refused(impl, make, message):
    if impl == "ptx":
        if simulator_active():
            pytest.skip("the PTX layer needs the real numba.cuda")
        from gemm.arch import tile as module
    else:
        module = sim_tile
    with pytest.raises(ValueError, match=re.escape(message)):
        make(module)


if __name__ == "__main__":
    print(json.dumps(run_checks()))
