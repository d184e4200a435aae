"""The simulator twins of gemm.arch against independent references.

Warp-collective twins (ldmatrix, mma) run in kernels in numba's CUDA simulator, which needs
``NUMBA_ENABLE_CUDASIM=1`` before numba is imported: ``test_kernels_in_simulator`` runs this file
as a script in one subprocess with it set, and the script runs every check and prints a JSON
report. The fragment layouts of the references are written here as data, as CuTe TV layouts
(thread, value) -> offset derived from the PTX ISA's fragment tables, and evaluated with
layoutalg; nothing is taken from gemm.arch.sim. The per-thread twins (cp.async, vector access,
conversions) are also tested in this process directly, since gemm.arch.sim is plain Python.
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

from numba import cuda  # noqa: E402  (module level: the simulator swaps the global `cuda`)

from gemm import arch  # noqa: E402  (the twins in the simulator run, the intrinsics otherwise)
from gemm._env import simulator_active  # noqa: E402
from gemm.arch import sim  # noqa: E402
from layoutalg import Layout  # noqa: E402

# --- fragment layouts, from the PTX ISA tables ("Matrix Fragments for mma.m16n8k16/m16n8k8",
# "ldmatrix"): (lane, value) -> column-major offset in the operand tile, lane = (t, g) with
# t = lane % 4, g = lane // 4; value v is element v (register v // 2, half v % 2) of 16-bit
# operands, register v of tf32 and f32 operands.
MMA = {
    # name: (M, N, K, input kind, accumulator, A over (M,K), B over (N,K), C over (M,N))
    "mma_m16n8k16_f32_bf16": (16, 8, 16, "bf16", "f32",
                              Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))),
                              Layout(((4, 8), (2, 2)), ((16, 1), (8, 64))),
                              Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))),
    "mma_m16n8k16_f32_f16": (16, 8, 16, "f16", "f32",
                             Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))),
                             Layout(((4, 8), (2, 2)), ((16, 1), (8, 64))),
                             Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))),
    "mma_m16n8k16_f16_f16": (16, 8, 16, "f16", "f16",
                             Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))),
                             Layout(((4, 8), (2, 2)), ((16, 1), (8, 64))),
                             Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))),
    "mma_m16n8k8_f16_f16": (16, 8, 8, "f16", "f16",
                            Layout(((4, 8), (2, 2)), ((32, 1), (16, 8))),
                            Layout(((4, 8), 2), ((16, 1), 8)),
                            Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))),
    "mma_m16n8k8_f32_tf32": (16, 8, 8, "tf32", "f32",
                             Layout(((4, 8), (2, 2)), ((16, 1), (8, 64))),
                             Layout(((4, 8), 2), ((8, 1), 32)),
                             Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))),
}
# ldmatrix: register j of a lane holds two elements of matrix j; offset row * 8 + col.
LDSM = {False: Layout(((4, 8), 2), ((2, 8), 1)), True: Layout(((4, 8), 2), ((16, 1), 8))}


# --- independent rounding references (float64 arithmetic, normal numbers) --------------------

def round_significant(x, bits, ties_even=True):
    """x (float64 array of normal numbers) rounded to ``bits`` significant bits."""
    m, e = np.frexp(x)
    scaled = np.ldexp(m, bits)
    r = np.rint(scaled) if ties_even else np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    return np.ldexp(r, e - bits)


def bf16_value(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32).astype(np.float64)


def f16_value(bits):
    return np.asarray(bits, np.uint16).view(np.float16).astype(np.float64)


def random_normals(rng, n, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, n).astype(np.float32)


# --- cases: inputs and expected results (shared with the GPU tests, test_arch_gpu.py) ---------

def ldmatrix_case(num, warps=1, seed=0):
    """A shared tile holding ``warps * num`` random 8x8 matrices, rows scrambled at a 48-byte
    pitch, and the row offset each lane passes; ``expected(trans)`` gives the (lanes, num)
    registers ldmatrix must return."""
    pitch = 24                      # row pitch in elements: 48 bytes, rows stay 16-byte aligned
    rng = np.random.default_rng(seed)
    mats = rng.integers(0, 1 << 16, (warps, num, 8, 8), dtype=np.uint16)
    order = rng.permutation(warps * num * 8)
    tile = np.zeros(warps * num * 8 * pitch, np.uint16)
    row_at = np.zeros((warps, 32), np.uint32)   # lanes past 8*num keep 0: ignored by ldmatrix
    for w in range(warps):
        for j in range(num):
            for r in range(8):
                slot = order[(w * num + j) * 8 + r]
                tile[slot * pitch:slot * pitch + 8] = mats[w, j, r]
                row_at[w, 8 * j + r] = slot * pitch

    def expected(trans):
        layout = LDSM[trans]
        out = np.zeros((warps * 32, num), np.uint32)
        for w in range(warps):
            for lane in range(32):
                for j in range(num):
                    flat = mats[w, j].reshape(-1)
                    out[w * 32 + lane, j] = (int(flat[layout(lane, 0)])
                                             | int(flat[layout(lane, 1)]) << 16)
        return out
    return tile, row_at.reshape(-1), expected


def _pack_fragments(bits, layout, per_lane, kind):
    """Registers of every lane from element bit patterns ``bits`` (flat, column-major)."""
    values = [[int(bits[layout(lane, v)]) for v in range(per_lane)] for lane in range(32)]
    if kind in ("bf16", "f16"):
        return np.array([[row[2 * r] | row[2 * r + 1] << 16 for r in range(per_lane // 2)]
                         for row in values], np.uint32)
    return np.array(values, np.uint32)


def mma_case(name, seed=None):
    """Random operands of one mma as each lane's registers (a_regs, b_regs, c_regs), and
    ``verify(out, ulps)``: D read back from the lanes' output registers ``out`` agrees with
    float64 A @ B + C of the rounded inputs to ``ulps`` units of the accumulator's precision,
    relative to |A| @ |B| + |C|."""
    M, N, K, kind, acc, la, lb, lc = MMA[name]
    rng = np.random.default_rng(sum(map(ord, name)) if seed is None else seed)
    a32 = random_normals(rng, M * K)
    b32 = random_normals(rng, K * N)
    c32 = random_normals(rng, M * N)
    if kind == "bf16":   # random bf16 patterns, decoded independently of the twin
        abits = (a32.view(np.uint32) >> 16).astype(np.uint16)
        bbits = (b32.view(np.uint32) >> 16).astype(np.uint16)
        a64, b64 = bf16_value(abits), bf16_value(bbits)
    elif kind == "f16":
        abits = a32.astype(np.float16).view(np.uint16)
        bbits = b32.astype(np.float16).view(np.uint16)
        a64, b64 = f16_value(abits), f16_value(bbits)
    else:                # tf32: full f32 patterns; the tensor core uses the top 19 bits
        abits, bbits = a32.view(np.uint32), b32.view(np.uint32)
        a64 = (abits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
        b64 = (bbits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    # A is (M,K) column-major; B is stored (N,K) column-major, i.e. B[k, n] at n + N*k.
    A = a64.reshape(K, M).T
    B = b64.reshape(K, N)
    per_c = M * N // 32
    a_regs = _pack_fragments(abits, la, M * K // 32, kind)
    b_regs = _pack_fragments(bbits, lb, N * K // 32, kind)
    if acc == "f32":
        C = c32.astype(np.float64).reshape(N, M).T
        c_regs = np.array([[c32[lc(lane, v)] for v in range(per_c)] for lane in range(32)],
                          np.float32)
    else:
        cbits = c32.astype(np.float16).view(np.uint16)
        C = f16_value(cbits).reshape(N, M).T
        c_regs = _pack_fragments(cbits, lc, per_c, "f16")

    def verify(out, ulps=1.0):
        if acc == "f32":
            d_vals = np.asarray(out).astype(np.float64)
        else:
            out = np.asarray(out, np.uint32)
            d_vals = np.stack([out & 0xFFFF, out >> 16], axis=-1).reshape(32, per_c)
            d_vals = f16_value(d_vals.astype(np.uint16))
        D = np.zeros(M * N)
        for lane in range(32):
            for v in range(per_c):
                D[lc(lane, v)] = d_vals[lane, v]
        D = D.reshape(N, M).T
        ref = A @ B + C
        scale = np.abs(A) @ np.abs(B) + np.abs(C)
        eps = ulps * (2.0 ** -23 if acc == "f32" else 2.0 ** -10)
        err = np.abs(D - ref)
        assert np.all(err <= eps * scale), \
            f"{name}: max error {err.max()} (scale {scale.max()}, {ulps} ulps allowed)"
    return a_regs, b_regs, c_regs, verify


# --- checks run in the simulator -----------------------------------------------------------------

def check_ldmatrix(num, trans, warps=1):
    fn = getattr(arch, f"ldmatrix_x{num}{'_trans' if trans else ''}")
    tile, row_at, expected = ldmatrix_case(num, warps, seed=num * 10 + trans)

    @cuda.jit
    def kernel(tile, row_at, out):
        smem = cuda.shared.array(tile.size, np.uint16)
        t = cuda.threadIdx.x
        for i in range(t, tile.size, cuda.blockDim.x):
            smem[i] = tile[i]
        cuda.syncthreads()
        regs = fn(smem, row_at[t])
        for j in range(num):
            out[t, j] = regs[j]

    out = np.zeros((warps * 32, num), np.uint32)
    kernel[1, warps * 32](tile, row_at, out)
    want = expected(trans)
    bad = np.argwhere(out != want)
    assert not len(bad), f"lane/reg {bad[0]}: {out[tuple(bad[0])]:#x} != {want[tuple(bad[0])]:#x}"


def check_mma(name):
    fn = getattr(arch, name)
    a_regs, b_regs, c_regs, verify = mma_case(name)

    @cuda.jit
    def kernel(a_regs, b_regs, c_regs, out):
        t = cuda.threadIdx.x
        args = [a_regs[t, r] for r in range(a_regs.shape[1])]
        args += [b_regs[t, r] for r in range(b_regs.shape[1])]
        args += [c_regs[t, r] for r in range(c_regs.shape[1])]
        d = fn(*args)
        for r in range(len(d)):
            out[t, r] = d[r]

    out = np.zeros((32, c_regs.shape[1]), c_regs.dtype)
    kernel[1, 32](a_regs, b_regs, c_regs, out)
    verify(out)


CP_ASYNC = [("cp_async_ca", 4, None), ("cp_async_ca", 8, None), ("cp_async_ca", 16, None),
            ("cp_async_cg", 16, None), ("cp_async_ca_zfill", 8, 8), ("cp_async_cg_zfill", 16, 16)]
"""(operation, nbytes, zmax): the cp.async cases, here and on the GPU (see cp_async_expected)."""


def cp_async_expected(src, nbytes, zmax):
    """256 uint32 of shared memory, first 0xDEADBEEF, after lane t (of 32) copied ``nbytes`` from
    element (3t mod 32) * nbytes/4 of ``src`` to element t * nbytes/4, keeping only the first
    t mod (zmax + 1) bytes and zero-filling the rest when ``zmax`` is given."""
    want = np.full(256, 0xDEADBEEF, np.uint32)
    wb, sb = want.view(np.uint8), src.view(np.uint8)
    for t in range(32):
        d, s = t * nbytes, (t * 3 % 32) * nbytes
        keep = nbytes if zmax is None else t % (zmax + 1)
        wb[d:d + keep] = sb[s:s + keep]
        wb[d + keep:d + nbytes] = 0
    return want


def check_cp_async():
    src = np.random.default_rng(7).integers(0, 1 << 32, 256, dtype=np.uint32)
    for op, nbytes, zmax in CP_ASYNC:
        fn = getattr(arch, op)
        words = nbytes // 4

        @cuda.jit
        def kernel(src, out):
            buf = cuda.shared.array(256, np.uint32)
            t = cuda.threadIdx.x
            for i in range(t, 256, 32):
                buf[i] = 0xDEADBEEF
            cuda.syncthreads()
            si = (t * 3 % 32) * words     # a permuted source
            if zmax is None:
                fn(buf, t * words, src, si, nbytes)
            else:
                fn(buf, t * words, src, si, nbytes, t % (zmax + 1))
            arch.cp_async_commit()
            arch.cp_async_wait(0)
            cuda.syncthreads()
            for i in range(t, 256, 32):
                out[i] = buf[i]

        out = np.zeros(256, np.uint32)
        kernel[1, 32](src, out)
        assert np.array_equal(out, cp_async_expected(src, nbytes, zmax)), f"{op} {nbytes} bytes"


def check_warp_shuffles():
    """``warp_uniform``: lane 0's value in each lane of its warp; ``shfl_xor_f32``: lane
    ``lane ^ mask``'s (two warps, so that each warp's own lane 0 is meant)."""
    xs = np.random.default_rng(4).standard_normal(64).astype(np.float32)

    @cuda.jit
    def kernel(xs, lane0, swapped):
        t = cuda.threadIdx.x
        lane0[t] = arch.warp_uniform(3 * t + 1)
        swapped[t] = arch.shfl_xor_f32(xs[t], 5)

    lane0, swapped = np.zeros(64, np.uint32), np.zeros(64, np.float32)
    kernel[1, 64](xs, lane0, swapped)
    t = np.arange(64)
    assert np.array_equal(lane0, 3 * (t // 32 * 32) + 1), lane0
    assert np.array_equal(swapped, xs[t ^ 5]), swapped


def check_vector_access():
    xf = np.random.default_rng(3).standard_normal(128).astype(np.float32)

    @cuda.jit
    def kernel(xf, out_bits, out_f, out_v2):
        s = cuda.shared.array(128, np.float32)
        t = cuda.threadIdx.x
        v = arch.ld_v4_b32(xf, 4 * t)                  # bits of a float32 array
        arch.st_v4_b32(out_bits, 4 * t, v[3], v[2], v[1], v[0])
        w = arch.ld_v4_f32(xf, 4 * t)
        arch.st_v4_f32(s, 4 * t, w[0] * 2, w[1] * 2, w[2] * 2, w[3] * 2)
        cuda.syncthreads()
        y = arch.ld_v4_f32(s, 4 * ((t + 1) % 32))
        arch.st_v4_f32(out_f, 4 * t, y[0], y[1], y[2], y[3])
        p = arch.ld_v2_b32(out_bits, 2 * t)
        arch.st_v2_b32(out_v2, 2 * t, p[1], p[0])
        q = arch.ld_v2_f32(xf, 2 * t + 64)
        arch.st_v2_f32(out_f, 2 * t + 128, q[0], q[1])

    bits = np.zeros(128, np.uint32)
    outf = np.zeros(192, np.float32)
    v2 = np.zeros(64, np.uint32)
    kernel[1, 32](xf, bits, outf, v2)
    vector_access_verify(xf, bits, outf, v2)


def vector_access_verify(xf, bits, outf, v2):
    """What the vector-access kernel (here and on the GPU) writes for input ``xf``."""
    np.testing.assert_array_equal(bits, xf.view(np.uint32).reshape(32, 4)[:, ::-1].reshape(-1))
    np.testing.assert_array_equal(outf[:128], np.roll(xf * 2, -4))
    np.testing.assert_array_equal(outf[128:], xf[64:128])
    np.testing.assert_array_equal(v2, bits[:64].reshape(32, 2)[:, ::-1].reshape(-1))


def k_convert(x, out):
    """Every conversion on lane t's pair x[2t], x[2t+1] (also run on the GPU)."""
    t = cuda.threadIdx.x
    lo, hi = x[2 * t], x[2 * t + 1]
    out[t, 0] = arch.cvt_rn_bf16x2_f32(lo, hi)
    out[t, 1] = arch.cvt_rn_f16x2_f32(lo, hi)
    out[t, 2] = arch.cvt_rna_tf32_f32(lo)
    out[t, 3] = arch.pack_bf16x2(arch.cvt_rn_bf16_f32(lo), arch.cvt_rn_f16_f32(hi))
    a, b = arch.bf16x2_to_f32(out[t, 0])
    c, d = arch.f16x2_to_f32(out[t, 1])
    out[t, 4] = arch.float_as_uint32(a)
    out[t, 5] = arch.float_as_uint32(b)
    out[t, 6] = arch.float_as_uint32(c)
    out[t, 7] = arch.float_as_uint32(d)
    out[t, 8] = arch.float_as_uint32(arch.bf16_to_f32(arch.unpack_b16x2(out[t, 0])[1]))
    out[t, 9] = arch.float_as_uint32(arch.f16_to_f32(arch.unpack_b16x2(out[t, 1])[0]))
    out[t, 10] = arch.cvt_rn_satfinite_e4m3x2_f32(lo, hi)
    out[t, 11] = arch.cvt_rn_satfinite_e5m2x2_f32(lo * 64, hi * 64)


def fp8_nearest(x, fmt):
    """The FP8 bits of x by brute force: the nearest finite value of ``fmt`` (ties to the even
    code), past the largest the largest (saturation)."""
    from layoutalg.atom.float8 import float8_values
    top = 0x7E if fmt == "e4m3" else 0x7B
    table = float8_values(fmt)[:top + 1]
    out = []
    for v in x:
        d = np.abs(table - abs(v))
        best = np.flatnonzero(d == d.min())
        code = int(best[best % 2 == 0][0] if len(best) > 1 else best[0])
        out.append(code | (0x80 if v < 0 else 0))
    return np.array(out, np.uint32)


def conversions_verify(x, out):
    """``out`` of k_convert for input ``x`` against the rounding references."""
    lo, hi = x[0::2].astype(np.float64), x[1::2].astype(np.float64)
    bf_lo, bf_hi = round_significant(lo, 8), round_significant(hi, 8)
    h_lo, h_hi = round_significant(lo, 11), round_significant(hi, 11)
    np.testing.assert_array_equal(bf16_value(out[:, 0] & 0xFFFF), bf_lo)
    np.testing.assert_array_equal(bf16_value(out[:, 0] >> 16), bf_hi)
    np.testing.assert_array_equal(f16_value(out[:, 1] & 0xFFFF), h_lo)
    np.testing.assert_array_equal(f16_value(out[:, 1] >> 16), h_hi)
    np.testing.assert_array_equal(out[:, 2].view(np.float32),
                                  round_significant(lo, 11, ties_even=False))
    np.testing.assert_array_equal(out[:, 3], (out[:, 0] & 0xFFFF) | (out[:, 1] & 0xFFFF0000))
    for column, want in zip(range(4, 10), (bf_lo, bf_hi, h_lo, h_hi, bf_hi, h_lo)):
        np.testing.assert_array_equal(out[:, column].view(np.float32), want)
    x32 = x.astype(np.float32)
    for column, fmt, xs in ((10, "e4m3", x32), (11, "e5m2", x32 * np.float32(64))):
        np.testing.assert_array_equal(out[:, column] & 0xFF, fp8_nearest(xs[0::2], fmt))
        np.testing.assert_array_equal(out[:, column] >> 8, fp8_nearest(xs[1::2], fmt))


def check_conversions_in_kernel():
    x = random_normals(np.random.default_rng(5), 64, -1e3, 1e3)
    out = np.zeros((32, 12), np.uint32)
    cuda.jit(k_convert)[1, 32](x, out)
    conversions_verify(x, out)


def check_errors():
    """Misuse is reported, not hung: partial warps, lanes skipping a collective."""
    @cuda.jit
    def partial(out):
        smem = cuda.shared.array(64, np.uint16)
        out[cuda.threadIdx.x] = arch.ldmatrix_x1(smem, 0)[0]

    @cuda.jit
    def diverged_sync(out):
        smem = cuda.shared.array(64, np.uint16)
        if cuda.threadIdx.x < 16:
            out[cuda.threadIdx.x] = arch.ldmatrix_x1(smem, 0)[0]
        cuda.syncthreads()

    @cuda.jit
    def diverged_exit(out):
        smem = cuda.shared.array(64, np.uint16)
        if cuda.threadIdx.x >= 16:
            return
        out[cuda.threadIdx.x] = arch.ldmatrix_x1(smem, 0)[0]

    for kernel, threads, message in ((partial, 16, "needs full warps"),
                                     (diverged_sync, 32, "exited or wait at syncthreads"),
                                     (diverged_exit, 32, "exited or wait at syncthreads")):
        try:
            kernel[1, threads](np.zeros(32, np.uint32))
        except Exception as e:   # the simulator re-raises the lane's error with its thread id
            assert message in str(e), f"{kernel}: {e}"
        else:
            raise AssertionError(f"{kernel.__name__} ran without an error")


CHECKS = {
    **{f"ldmatrix_x{n}{'_trans' if t else ''}": (check_ldmatrix, (n, t))
       for n in (1, 2, 4) for t in (False, True)},
    "ldmatrix_x4_two_warps": (check_ldmatrix, (4, False, 2)),
    **{name: (check_mma, (name,)) for name in MMA},
    "cp_async": (check_cp_async, ()),
    "vector_access": (check_vector_access, ()),
    "warp_shuffles": (check_warp_shuffles, ()),
    "conversions": (check_conversions_in_kernel, ()),
    "errors": (check_errors, ()),
}


def run_checks():
    """Run every check (in the simulator); {name: "ok" or the failure}."""
    assert arch.IMPLEMENTATION == "sim", "NUMBA_ENABLE_CUDASIM=1 must be set before import"
    report = {}
    for name, (check, args) in CHECKS.items():
        try:
            check(*args)
            report[name] = "ok"
        except Exception:
            report[name] = traceback.format_exc(limit=4)
    return report


@pytest.fixture(scope="module")
def simulator_report():
    from simcase import simulator_report
    return simulator_report(__file__)


def test_kernels_in_simulator(simulator_report):
    assert set(simulator_report) == set(CHECKS)
    failed = {k: v for k, v in simulator_report.items() if v != "ok"}
    assert not failed, "\n".join(f"{k}:\n{v}" for k, v in failed.items())


# --- per-thread twins, in this process (gemm.arch.sim is plain Python) ----------------------------


def test_cp_async_twins_copy_and_zero_fill():
    src = np.arange(32, dtype=np.uint16)
    dst = np.full(32, 0xFFFF, np.uint16)
    sim.cp_async_ca(dst, 0, src, 8, 4)
    sim.cp_async_cg(dst, 8, src, 16, 16)
    sim.cp_async_cg_zfill(dst, 16, src, 24, 16, 5)   # 5 bytes: 2 elements and a low byte
    sim.cp_async_ca_zfill(dst, 24, src, 10 ** 6, 8, 0)  # src_bytes 0: src is not read
    sim.cp_async_wait_all()
    assert dst[:2].tolist() == [8, 9] and dst[2:8].tolist() == [0xFFFF] * 6
    assert dst[8:16].tolist() == list(range(16, 24))
    assert dst[16:24].tolist() == [24, 25, 26 & 0xFF, 0, 0, 0, 0, 0]
    assert dst[24:28].tolist() == [0] * 4 and dst[28:].tolist() == [0xFFFF] * 4


def test_cp_async_twins_land_when_a_wait_covers_their_group():
    """As on the GPU, shared memory holds a copy's bytes only after a wait covering its commit
    group: a kernel whose wait is one group too lax reads old values in the simulator."""
    src = np.arange(16, dtype=np.uint16)
    dst = np.zeros(16, np.uint16)
    sim.cp_async_ca(dst, 0, src, 0, 8)
    sim.cp_async_commit()
    src[:4] = 99                                # read when issued
    sim.cp_async_ca(dst, 4, src, 4, 8)
    sim.cp_async_commit()
    sim.cp_async_ca(dst, 8, src, 8, 8)          # in the open group
    assert not dst.any()
    sim.cp_async_wait(1)                        # the older group
    assert dst[:4].tolist() == [0, 1, 2, 3] and not dst[4:].any()
    sim.cp_async_wait(0)                        # every committed group, not the open one
    assert dst[4:8].tolist() == [4, 5, 6, 7] and not dst[8:].any()
    sim.cp_async_wait_all()
    assert dst[8:12].tolist() == [8, 9, 10, 11]


@pytest.mark.parametrize("call, message", [
    (lambda d, s: sim.cp_async_cg(d, 0, s, 0, 8), "nbytes must be one of (16,)"),
    (lambda d, s: sim.cp_async_ca(d, 1, s, 0, 8), "not 8-byte aligned"),
    (lambda d, s: sim.cp_async_ca(d, 0, s, 32, 8), "out of bounds"),
    (lambda d, s: sim.cp_async_ca_zfill(d, 0, s, 0, 8, 9), "src_bytes must be in 0..8"),
    (lambda d, s: sim.ld_v4_f32(d, 0), "must have 32-bit elements"),
    (lambda d, s: sim.ldmatrix_x4(d, 0), "call it from a kernel running in numba's CUDA"),
])
def test_twin_errors(call, message):
    with pytest.raises((ValueError, IndexError, TypeError, RuntimeError), match=re.escape(message)):
        call(np.zeros(32, np.uint16), np.zeros(32, np.uint16))


def test_vector_twins_check_alignment():
    x = np.arange(16, dtype=np.float32)
    assert sim.ld_v4_f32(x, 4) == (4.0, 5.0, 6.0, 7.0)
    with pytest.raises(ValueError, match="16-byte aligned"):
        sim.ld_v4_f32(x, 2)
    sim.st_v2_b32(x.view(np.uint32), 2, 1, 2)
    assert x.view(np.uint32)[2:4].tolist() == [1, 2]


def test_conversion_twins_round_like_the_references():
    rng = np.random.default_rng(11)
    x = np.concatenate([random_normals(rng, 2000, -1e4, 1e4), random_normals(rng, 2000, -1, 1)])
    # exact ties: a bf16 tie has bit 15 set and bits 0-14 clear, an f16/tf32 tie bit 12 alone
    ties = (rng.integers(0x3F800000, 0x47000000, 200, dtype=np.uint32) & 0xFFFF0000) | 0x8000
    x = np.concatenate([x, ties.view(np.float32), ((ties & 0xFFFFE000) | 0x1000).view(np.float32)])
    x64 = x.astype(np.float64)
    bf = np.array([sim.cvt_rn_bf16_f32(v) for v in x])
    f16 = np.array([sim.cvt_rn_f16_f32(v) for v in x[np.abs(x) < 6e4]])
    tf = np.array([sim.cvt_rna_tf32_f32(v) for v in x], np.uint32)
    assert np.array_equal(bf16_value(bf), round_significant(x64, 8))
    assert np.array_equal(f16_value(f16), round_significant(x64[np.abs(x) < 6e4], 11))
    assert np.array_equal(tf.view(np.float32), round_significant(x64, 11, ties_even=False))
    assert np.all(tf & 0x1FFF == 0)


def test_conversion_twins_special_values():
    inf, nan = np.float32(np.inf), np.float32(np.nan)
    assert sim.cvt_rn_bf16_f32(-inf) == 0xFF80 and sim.cvt_rn_bf16_f32(nan) == 0x7FFF
    assert sim.cvt_rn_bf16_f32(np.float32(3.4e38)) == 0x7F80       # rounds up to +inf
    assert sim.cvt_rn_f16_f32(np.float32(65520.0)) == 0x7C00        # half-way to 2^16: inf
    assert sim.cvt_rn_f16_f32(np.float32(-0.0)) == 0x8000
    assert sim.cvt_rna_tf32_f32(inf) == 0x7F800000 and sim.cvt_rna_tf32_f32(nan) == 0x7FFFFFFF
    assert int(sim.cvt_rn_bf16x2_f32(1.0, -2.0)) == 0xC0003F80      # lo in the low half
    assert int(sim.cvt_rn_f16x2_f32(1.0, -2.0)) == 0xC0003C00


def test_packing_twins():
    assert int(sim.pack_b16x2(0x1234, 0xABCD)) == 0xABCD1234
    assert tuple(map(int, sim.unpack_b16x2(0xABCD1234))) == (0x1234, 0xABCD)
    assert sim.bf16x2_to_f32(0xC0003F80) == (1.0, -2.0)
    assert sim.f16x2_to_f32(0xC0003C00) == (1.0, -2.0)
    assert int(sim.float_as_uint32(np.float32(1.0))) == 0x3F800000
    assert sim.uint32_as_float(0x40490FDB) == np.float32(np.pi)


@pytest.mark.skipif(simulator_active(), reason="gemm.arch.ptx needs the real numba.cuda")
def test_sim_and_ptx_export_the_same_names():
    from gemm.arch import ptx
    assert sim.__all__ == ptx.__all__
    for name in sim.__all__:
        assert hasattr(sim, name) and hasattr(ptx, name), name
    from gemm.arch import SM90_NAMES, sim_sm90, sm90
    assert set(SM90_NAMES) == set(sm90.__all__)
    for name in SM90_NAMES:
        assert hasattr(sim_sm90, name), name


if __name__ == "__main__":
    print(json.dumps(run_checks()))
