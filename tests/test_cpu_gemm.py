"""The CPU GEMM built from local_tile, tiled copies and tiled MMAs equals A @ B^T.

Sizes are small but never multiples of the tiles, so every configuration runs partial
tiles in M, N and K through the identity-tensor predicates.
"""

import numpy as np
import pytest

from layoutalg import (
    SM80_16x8x8_F32TF32TF32F32_TN, SM80_16x8x16_F16F16F16F16_TN, SM80_16x8x16_F32BF16BF16F32_TN,
    SM80_16x8x16_F32F16F16F32_TN, cpu_gemm, local_tile, make_tensor, moye_config, sm80_config,
)
from layoutalg.atom import decode, encode

RNG = np.random.default_rng(2024)


def ints(shape, dtype, order="C"):
    a = RNG.integers(-4, 5, shape).astype(dtype)
    return np.asfortranarray(a) if order == "F" else a


def reference(A, B, a_type=None, b_type=None):
    """A @ B^T in float64 from the values the atom sees (inputs rounded to its types)."""
    a = decode(encode(A, a_type), a_type) if a_type else A
    b = decode(encode(B, b_type), b_type) if b_type else B
    return a.astype(np.float64) @ b.astype(np.float64).T


# --- MoYe's SIMT configurations (128x128x8 tiles, copy threads (32,8)) ----------------------
@pytest.mark.parametrize("pipeline, mma_threads, order", [
    ("prefetch", (16, 16), "F"),
    ("double_buffer", (16, 16), "F"),
    ("double_buffer", (32, 8), "F"),
    ("double_buffer", (32, 8), "C"),
])
def test_moye_configs_exact_for_integers(pipeline, mma_threads, order):
    cfg = moye_config(pipeline, dtype=np.int64, mma_threads=mma_threads)
    assert cfg.tile == (128, 128, 8)
    assert cfg.stages == (2 if pipeline == "double_buffer" else 1)
    assert cfg.sA.stride[1] == 128 + (2 if pipeline == "double_buffer" else 1)
    stages = (2,) if pipeline == "double_buffer" else ()
    assert cfg.sA.shape == (128, 8) + stages and cfg.sB.shape == (128, 8) + stages
    assert cfg.mma.size == 256 and cfg.mma.tile_size == mma_threads + (1,)
    A, B = ints((131, 21), np.int64, order), ints((70, 21), np.int64, order)
    mA = make_tensor(A)
    gA = local_tile(mA, (128, 8), (0, None))
    sA = make_tensor(np.zeros(cfg.sA.cosize, np.int64), cfg.sA)
    copy = cfg.copy_A(gA[(None, None, 0)], sA[(None, None, 0)] if stages else sA)
    assert copy.size == 32 * 8 and copy.tile_size == (32, 8)     # copy threads (32, 8)
    C = cpu_gemm(A, B, cfg)
    assert C.dtype == np.int64 and np.array_equal(C, A @ B.T)


def test_moye_float32_to_rounding():
    cfg = moye_config("double_buffer", dtype=np.float32, mma_threads=(32, 8))
    A = np.asfortranarray(RNG.standard_normal((130, 20)).astype(np.float32))
    B = np.asfortranarray(RNG.standard_normal((129, 20)).astype(np.float32))
    C = cpu_gemm(A, B, cfg)
    ref = reference(A, B)
    assert C.dtype == np.float32
    np.testing.assert_allclose(C, ref, rtol=1e-5, atol=1e-5)
    assert np.array_equal(cpu_gemm(ints((130, 20), np.float32, "F"), ints((9, 20), np.float32, "F"),
                                   cfg) % 1, np.zeros((130, 9), np.float32))


def test_moye_copies_vectorized_where_alignment_allows():
    cfg = moye_config("double_buffer", dtype=np.float32)
    s = make_tensor(np.zeros(cfg.sA.cosize, np.float32), cfg.sA)[(None, None, 0)]
    atoms = []
    for M in (130, 131):
        g = local_tile(make_tensor(np.zeros((M, 20), np.float32, order="F")), (128, 8), (0, None))
        atoms.append(cfg.copy_A(g[(None, None, 0)], s).atom)
    assert [(a.kind, a.bits) for a in atoms] == [("cp.async.ca", 64), ("cp.async.ca", 32)]
    pre = moye_config("prefetch", dtype=np.float32)            # bM + 1 padding: 4 bytes
    s1 = make_tensor(np.zeros(pre.sA.cosize, np.float32), pre.sA)
    g = local_tile(make_tensor(np.zeros((130, 20), np.float32, order="F")), (128, 8), (0, None))
    assert pre.copy_A(g[(None, None, 0)], s1).atom.bits == 32


# --- SM80 tensor-core atoms with a 2x2 warp layout ------------------------------------------
SM80 = [
    (SM80_16x8x16_F32F16F16F32_TN, "K", "K", np.float16),
    (SM80_16x8x16_F32F16F16F32_TN, "M", "N", np.float16),
    (SM80_16x8x16_F32BF16BF16F32_TN, "K", "K", np.float32),
    (SM80_16x8x16_F32BF16BF16F32_TN, "M", "K", np.float32),
    (SM80_16x8x16_F16F16F16F16_TN, "K", "N", np.float16),
]


@pytest.mark.parametrize("atom, a_major, b_major, dtype", SM80)
def test_sm80_16x8x16_exact_for_integers(atom, a_major, b_major, dtype):
    cfg = sm80_config(atom(), warps=(2, 2), a_major=a_major, b_major=b_major)
    assert cfg.mma.size == 128 and cfg.mma.tile_size == (32, 16, 16)
    oa = "F" if a_major == "M" else "C"
    ob = "F" if b_major == "N" else "C"
    A, B = ints((70, 40), dtype, oa), ints((50, 40), dtype, ob)
    C = cpu_gemm(A, B, cfg)
    assert np.array_equal(C.astype(np.float64), A.astype(np.float64) @ B.astype(np.float64).T)


@pytest.mark.parametrize("atom, a_major, b_major, dtype", SM80[:3])
def test_sm80_floats_to_rounding(atom, a_major, b_major, dtype):
    a = atom()
    cfg = sm80_config(a, a_major=a_major, b_major=b_major)
    oa = "F" if a_major == "M" else "C"
    ob = "F" if b_major == "N" else "C"
    A = np.asarray(RNG.standard_normal((65, 36)), dtype=dtype, order=oa)
    B = np.asarray(RNG.standard_normal((33, 36)), dtype=dtype, order=ob)
    C = cpu_gemm(A, B, cfg)
    np.testing.assert_allclose(C, reference(A, B, a.a_type, a.b_type), rtol=1e-5, atol=1e-5)


def test_sm80_tf32_and_permuted_tile():
    cfg = sm80_config(SM80_16x8x8_F32TF32TF32F32_TN(), warps=(2, 2), tile=(64, 64, 16))
    A, B = ints((70, 37), np.float32), ints((45, 37), np.float32)
    assert np.array_equal(cpu_gemm(A, B, cfg), A @ B.T)
    perm = sm80_config(SM80_16x8x16_F32F16F16F32_TN(), warps=(2, 2),
                       permutation_mnk=(32, 32, 16))
    assert perm.mma.tile_size == (32, 32, 16)
    A, B = ints((66, 40), np.float16), ints((70, 40), np.float16)
    assert np.array_equal(cpu_gemm(A, B, perm), A.astype(np.float32) @ B.astype(np.float32).T)


def test_sm80_copies_vectorized_where_alignment_allows():
    cfg = sm80_config(SM80_16x8x16_F32F16F16F32_TN())
    s = make_tensor(np.zeros(cfg.sA.cosize, np.float16), cfg.sA)
    got = []
    for K in (40, 44, 42):
        g = local_tile(make_tensor(np.zeros((70, K), np.float16)), (64, 32), (0, None))
        got.append(cfg.copy_A(g[(None, None, 0)], s).atom)
    assert [(a.kind, a.bits) for a in got] == [("cp.async.cg", 128), ("cp.async.ca", 64),
                                              ("cp.async.ca", 32)]
    A, B = ints((70, 42), np.float16), ints((33, 42), np.float16)
    C = cpu_gemm(A, B, cfg)
    assert np.array_equal(C, A.astype(np.float32) @ B.astype(np.float32).T)


def test_cpu_gemm_input_errors():
    cfg = moye_config("prefetch", dtype=np.int64, tile=(16, 16, 8), copy_threads=(8, 8),
                      mma_threads=(8, 8))
    with pytest.raises(ValueError, match="B is given as"):
        cpu_gemm(np.zeros((4, 3), np.int64), np.zeros((5, 4), np.int64), cfg)
    with pytest.raises(ValueError, match="2-D"):
        cpu_gemm(np.zeros(4, np.int64), np.zeros((5, 4), np.int64), cfg)
    with pytest.raises(ValueError, match="shape"):
        cpu_gemm(np.zeros((4, 3), np.int64), np.zeros((5, 3), np.int64), cfg,
                 C=np.zeros((5, 4), np.int64))
