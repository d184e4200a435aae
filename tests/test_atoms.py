"""Atoms against the PTX ISA: fragment tables of mma.m16n8k16 / m16n8k8 and ldmatrix.

The tables below are transcribed by hand from the PTX ISA (8.x), section 9.7.14.5.7
"Matrix Fragments for mma.m16n8k8", 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with
floating point type" and 9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix", in the
ISA's own terms (groupID, threadID_in_group, a_i / b_i / c_i). Each gives (row, col) of the
i-th element held by a lane; the atom's layout must map (lane, i) to the column-major index
of that element (``row + rows * col``; B is stored (N, K), so B's "col" (n) comes first).
"""

import numpy as np
import pytest

from layoutalg import (
    Layout, LayoutError, SM75_U16x2_LDSM_T, SM75_U16x4_LDSM_T, SM75_U16x8_LDSM_T,
    SM75_U32x1_LDSM_N, SM75_U32x2_LDSM_N, SM75_U32x4_LDSM_N, SM80_16x8x8_F16F16F16F16_TN,
    SM80_16x8x8_F32TF32TF32F32_TN, SM80_16x8x16_F16F16F16F16_TN, SM80_16x8x16_F32BF16BF16F32_TN,
    SM80_16x8x16_F32F16F16F32_TN, SM80_CP_ASYNC_CACHEALWAYS, SM80_CP_ASYNC_CACHEGLOBAL,
    UniversalCopy, UniversalFMA,
)
from layoutalg.atom import decode, encode, round_to_type, storage_dtype, type_bits


def gid(lane):
    return lane >> 2            # groupID


def tig(lane):
    return lane % 4             # threadID_in_group


# --- mma.m16n8k16, .f16/.bf16 A and B, .f16/.f32 C (9.7.14.5.8) -----------------------------
def k16_A(lane, i):
    row = gid(lane) if (0 <= i < 2 or 4 <= i < 6) else gid(lane) + 8
    col = (tig(lane) * 2) + (i & 0x1) if i < 4 else (tig(lane) * 2) + (i & 0x1) + 8
    return row, col


def k16_B(lane, i):
    row = (tig(lane) * 2) + (i & 0x1) if i < 2 else (tig(lane) * 2) + (i & 0x1) + 8
    col = gid(lane)
    return row, col             # row = k, col = n


def C_16x8(lane, i):            # shared by m16n8k16 and m16n8k8 (.f16 and .f32)
    row = gid(lane) if i < 2 else gid(lane) + 8
    col = (tig(lane) * 2) + (i & 0x1)
    return row, col


# --- mma.m16n8k8 (9.7.14.5.7) ---------------------------------------------------------------
def k8_A_f16(lane, i):
    row = gid(lane) if i in (0, 1) else gid(lane) + 8
    col = tig(lane) * 2 + (i & 0x1)
    return row, col


def k8_B_f16(lane, i):
    row = (tig(lane) * 2) + i   # i in {0, 1}
    col = gid(lane)
    return row, col


def k8_A_tf32(lane, i):
    row = gid(lane) if i in (0, 2) else gid(lane) + 8
    col = tig(lane) if i in (0, 1) else tig(lane) + 4
    return row, col


def k8_B_tf32(lane, i):
    row = tig(lane) if i == 0 else tig(lane) + 4
    col = gid(lane)
    return row, col


MMA_CASES = [
    (SM80_16x8x16_F32F16F16F32_TN, k16_A, 8, k16_B, 4),
    (SM80_16x8x16_F32BF16BF16F32_TN, k16_A, 8, k16_B, 4),
    (SM80_16x8x16_F16F16F16F16_TN, k16_A, 8, k16_B, 4),
    (SM80_16x8x8_F16F16F16F16_TN, k8_A_f16, 4, k8_B_f16, 2),
    (SM80_16x8x8_F32TF32TF32F32_TN, k8_A_tf32, 4, k8_B_tf32, 2),
]


@pytest.mark.parametrize("make, a_table, na, b_table, nb", MMA_CASES)
def test_mma_layouts_equal_ptx_tables(make, a_table, na, b_table, nb):
    atom = make()
    M, N, K = atom.shape_mnk
    assert atom.thr_id == Layout(32) and atom.num_threads == 32
    assert atom.layout_A[1].size == na and atom.layout_B[1].size == nb
    assert atom.layout_C[1].size == 4
    for lane in range(32):
        for i in range(na):
            row, col = a_table(lane, i)
            assert atom.layout_A(lane, i) == row + M * col, (lane, i)
        for i in range(nb):
            k, n = b_table(lane, i)
            assert atom.layout_B(lane, i) == n + N * k, (lane, i)
        for i in range(4):
            row, col = C_16x8(lane, i)
            assert atom.layout_C(lane, i) == row + M * col, (lane, i)


def test_mma_attributes():
    a = SM80_16x8x16_F32BF16BF16F32_TN()
    assert (a.name, a.ptx, a.shape_mnk) == ("SM80_16x8x16_F32BF16BF16F32_TN", "m16n8k16", (16, 8, 16))
    assert (a.a_type, a.b_type, a.c_type, a.d_type) == ("bf16", "bf16", "f32", "f32")
    assert a.instruction == "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
    t = SM80_16x8x8_F32TF32TF32F32_TN()
    assert (t.ptx, t.a_type, t.frag_dtype("A")) == ("m16n8k8", "tf32", np.float32)
    h = SM80_16x8x8_F16F16F16F16_TN()
    assert (h.c_type, h.frag_dtype("C")) == ("f16", np.float16)
    f = UniversalFMA(np.int32)
    assert f.shape_mnk == (1, 1, 1) and f.thr_id == Layout(1, 0) and f.a_type == "int32"
    assert "16x8x16" in str(a)


def _ptx_fragments(table, n, lanes=32):
    return [[table(lane, i) for i in range(n)] for lane in range(lanes)]


@pytest.mark.parametrize("make, a_table, na, b_table, nb", MMA_CASES)
def test_mma_compute_from_ptx_fragments(make, a_table, na, b_table, nb):
    """D = A B^T + C assembled from per-lane fragments placed by the PTX tables."""
    atom = make()
    M, N, K = atom.shape_mnk
    rng = np.random.default_rng(1)
    A = rng.integers(-4, 5, (M, K)).astype(np.float64)
    B = rng.integers(-4, 5, (N, K)).astype(np.float64)
    C = rng.integers(-4, 5, (M, N)).astype(np.float64)
    tile_A, tile_B, tile_C = np.zeros(M * K), np.zeros(N * K), np.zeros(M * N)
    for lane in range(32):
        for i in range(na):
            r, c = a_table(lane, i)
            tile_A[atom.layout_A(lane, i)] = A[r, c]
        for i in range(nb):
            k, n = b_table(lane, i)
            tile_B[atom.layout_B(lane, i)] = B[n, k]
    tile_C[:] = C.reshape(-1, order="F")
    D = atom.compute(tile_A.reshape(K, M).T, tile_B.reshape(K, N).T, tile_C.reshape(N, M).T)
    assert np.array_equal(decode(D, atom.d_type), A @ B.T + C)


def test_mma_compute_rounds_to_the_types():
    f = SM80_16x8x16_F32F16F16F32_TN()
    a, b = np.zeros((16, 16)), np.zeros((8, 16))
    a[0, 0], b[0, 0] = 1 + 2 ** -12, 1.0          # not an f16: the input rounds to 1
    d = f.compute(a, b, np.zeros((16, 8)))
    assert d.dtype == np.float32 and d[0, 0] == 1.0
    h = SM80_16x8x8_F16F16F16F16_TN()
    a, b = np.zeros((16, 8)), np.zeros((8, 8))
    a[0, 0], b[0, 0] = 1.0, 1.0
    d = h.compute(a, b, np.full((16, 8), 2048.0))  # 2049 is no f16: the output rounds
    assert d.dtype == np.float16 and d[0, 0] == 2048 and d[1, 1] == 2048
    bf = SM80_16x8x16_F32BF16BF16F32_TN()
    ab = np.zeros((16, 16))
    ab[0, 0] = 1 + 2 ** -9                         # not a bf16: rounds to 1
    bb = np.zeros((8, 16))
    bb[0, 0] = 1.0
    assert bf.compute(ab, bb, np.zeros((16, 8)))[0, 0] == 1.0
    assert encode(np.array([1 + 2 ** -9, 1 + 3 * 2 ** -9]), "bf16").tolist() == [0x3F80, 0x3F81]
    assert round_to_type(np.array([1 + 2 ** -11 + 2 ** -13]), "tf32")[0] == 1 + 2 ** -10
    assert storage_dtype("bf16") == np.uint16


def test_mma_compute_integers_exact():
    fma = UniversalFMA(np.int64)
    a = np.array([[[3]]])
    assert fma.compute(a, np.array([[[-7]]]), np.array([[[5]]])).tolist() == [[[-16]]]


# --- ldmatrix (9.7.14.5.15) -----------------------------------------------------------------
# The rows of matrix j are addressed by threads 8j .. 8j+7 (x1: threads 0-7, x2: 0-15, x4:
# 0-31); a row is 16 contiguous bytes (eight 16-bit elements). Without .trans, lane l holds in
# its register j the elements (row l/4, columns 2*(l%4) and 2*(l%4)+1) of matrix j; with .trans
# it holds (rows 2*(l%4) and 2*(l%4)+1, column l/4). Bits of the atom's data: element (r, c)
# of matrix j starts at bit 1024*j + 128*r + 16*c.
def ldsm_row_address(thread):
    """(matrix, row) whose address ``thread`` supplies."""
    return thread // 8, thread % 8


def ldsm_dst_element(lane, j, h, trans):
    """(matrix, row, col) of half h of register j of ``lane``."""
    if not trans:
        return j, lane // 4, 2 * (lane % 4) + h
    return j, 2 * (lane % 4) + h, lane // 4


LDSM_CASES = [
    (SM75_U32x1_LDSM_N, 1, False), (SM75_U32x2_LDSM_N, 2, False), (SM75_U32x4_LDSM_N, 4, False),
    (SM75_U16x2_LDSM_T, 1, True), (SM75_U16x4_LDSM_T, 2, True), (SM75_U16x8_LDSM_T, 4, True),
]


@pytest.mark.parametrize("make, num, trans", LDSM_CASES)
def test_ldmatrix_layouts_equal_ptx(make, num, trans):
    atom = make()
    assert (atom.kind, atom.num, atom.trans, atom.num_threads) == ("ldmatrix", num, trans, 32)
    assert atom.bits == 32 * num and atom.src_chunk_bits == 128 and atom.dst_chunk_bits == 32
    for thread in range(32):
        owner = thread % (8 * num)                 # threads past 8*num repeat an address
        mat, row = ldsm_row_address(owner)
        for b in range(128):
            assert atom.layout_src(thread, b) == 1024 * mat + 128 * row + b
    for lane in range(32):
        for j in range(num):
            for h in range(2):
                mat, r, c = ldsm_dst_element(lane, j, h, trans)
                for b in range(16):
                    assert atom.layout_dst(lane, 32 * j + 16 * h + b) == \
                        1024 * mat + 128 * r + 16 * c + b
    assert atom.layout_ref == atom.layout_dst
    assert atom.num_values_dst == 2 * num and atom.num_values_src == 8


@pytest.mark.parametrize("make, num, trans", LDSM_CASES)
def test_ldmatrix_moves_every_element_once(make, num, trans):
    atom = make()
    dst = {atom.layout_dst(l, b) for l in range(32) for b in range(32 * num)}
    src = {atom.layout_src(t, b) for t in range(32) for b in range(128)}
    assert dst == src == set(range(1024 * num))


# --- vector copies --------------------------------------------------------------------------
def test_copy_atoms_attributes():
    ca = SM80_CP_ASYNC_CACHEALWAYS(8, value_type=np.float32)
    assert (ca.kind, ca.bits, ca.num_values_src, ca.value_bits) == ("cp.async.ca", 64, 2, 32)
    assert ca.layout_src == Layout((1, 64), (0, 1)) and ca.thr_id == Layout(1, 0)
    assert ca.layout_src_values == Layout((1, 2), (0, 1))
    cg = SM80_CP_ASYNC_CACHEGLOBAL(16, value_type="f16")
    assert (cg.kind, cg.bits, cg.num_values_src) == ("cp.async.cg", 128, 8)
    assert cg.kind != SM80_CP_ASYNC_CACHEALWAYS(16).kind     # not MoYe's silent .ca
    u = UniversalCopy(128)
    assert (u.kind, u.num_values_src) == ("universal", 1)
    assert u.with_value_type(np.float16).num_values_src == 8
    assert SM75_U32x4_LDSM_N(32).num_values_dst == 4
    assert type_bits("tf32") == 32 and type_bits(np.float64) == 64


def test_cache_global_is_a_cg_atom_of_16_bytes_only():
    """PTX ISA 9.7.9.25.3 (cp.async): ``.cg`` takes cp-size 16 only, ``.ca`` 4, 8 or 16. Our
    CACHEGLOBAL is a ``.cg`` atom (MoYe.jl's silently issues ``.ca``) and stays one when it is
    rebound to another value type."""
    cg, ca = SM80_CP_ASYNC_CACHEGLOBAL(16), SM80_CP_ASYNC_CACHEALWAYS(16)
    assert (cg.kind, ca.kind) == ("cp.async.cg", "cp.async.ca")
    assert cg.name == "SM80_CP_ASYNC_CACHEGLOBAL" and ca.name == "SM80_CP_ASYNC_CACHEALWAYS"
    assert SM80_CP_ASYNC_CACHEGLOBAL().kind == "cp.async.cg"            # 16 is the default
    f16 = cg.with_value_type(np.float16)
    assert (f16.kind, f16.name) == ("cp.async.cg", "SM80_CP_ASYNC_CACHEGLOBAL")
    assert (f16.bits, f16.num_values_src) == (128, 8)
    bits = Layout((1, 128), (0, 1))                 # one thread, 128 bits in order
    assert cg.layout_src == cg.layout_dst == bits and cg.thr_id == Layout(1, 0)
    assert cg.src_chunk_bits == cg.dst_chunk_bits == 128
    for nbytes in (1, 2, 4, 8, 32):
        with pytest.raises(ValueError, match="16 bytes only"):
            SM80_CP_ASYNC_CACHEGLOBAL(nbytes)
    assert [SM80_CP_ASYNC_CACHEALWAYS(n).bits for n in (4, 8, 16)] == [32, 64, 128]


@pytest.mark.parametrize("call, err", [
    (lambda: UniversalCopy(24), ValueError),
    (lambda: SM80_CP_ASYNC_CACHEALWAYS(2), ValueError),
    (lambda: SM80_CP_ASYNC_CACHEGLOBAL(8), ValueError),
    (lambda: UniversalCopy(32, value_type=np.float64), LayoutError),
    (lambda: type_bits("nonsense"), TypeError),
])
def test_copy_atom_errors(call, err):
    with pytest.raises(err):
        call()
