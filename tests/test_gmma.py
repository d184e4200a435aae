"""SM90 GMMA in the algebra: the wgmma MMA atoms against the PTX ISA's register fragments, the
canonical shared-memory layout atoms, and the matrix descriptors read off layouts against
the canonical forms (CuTe's make_gmma_desc documentation) and one descriptor seen right on an
H100 (../shared/notes/numba-cuda.md: no swizzle, K-major, LBO 128, SBO 256)."""

import numpy as np
import pytest

from layoutalg import ComposedLayout, Layout, LayoutError, Swizzle, tile_to_shape
from layoutalg.atom import (SM90_64xNx8_F32TF32TF32_SS, SM90_64xNx16_F32BF16BF16_SS,
                            SM90_64xNx16_F32F16F16_SS, SM90_64xNx32_F32E4M3E5M2_SS_TN,
                            SM90_64xNx32_F32E5M2E5M2_SS_TN, decode, encode)
from layoutalg.atom.gmma import (GmmaDescriptor, Layout_K_INTER_Atom, Layout_K_SW32_Atom,
                                 Layout_K_SW64_Atom, Layout_K_SW128_Atom, Layout_MN_INTER_Atom,
                                 Layout_MN_SW128_Atom, gmma_descriptor, gmma_layout_atom)
from layoutalg.cpu import run_mma
from layoutalg.tensor import make_tensor
from layoutalg.tiled import make_tiled_mma


# --- the MMA atoms ----------------------------------------------------------------------------

def ptx_d_fragment(thread, i):
    """(row, col) of accumulator d[i] of a warpgroup thread, from the PTX ISA's wgmma D
    fragment: warp w owns rows 16w..16w+15; lane l: rows 16w + l//4 (+8), columns
    8j + 2(l%4) (+1) of 8-column block j = i // 4."""
    w, lane = divmod(thread, 32)
    g, t = divmod(lane, 4)
    j, e = divmod(i, 4)
    return 16 * w + g + 8 * (e // 2), 8 * j + 2 * t + e % 2


@pytest.mark.parametrize("n", [8, 16, 24, 64, 128, 256])
def test_accumulator_layout_is_the_ptx_fragment(n):
    atom = SM90_64xNx16_F32BF16BF16_SS(n)
    C = atom.layout_C
    assert C[1].size == n // 2 and atom.num_threads == 128
    for thread in range(128):
        for i in range(n // 2):
            m, col = ptx_d_fragment(thread, i)
            assert C(thread, i) == m + 64 * col, (thread, i)


def test_shared_operands_belong_to_no_thread():
    atom = SM90_64xNx8_F32TF32TF32_SS(32)
    assert atom.shape_mnk == (64, 32, 8)
    assert atom.instruction == "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32"
    for lay, extent in ((atom.layout_A, 64 * 8), (atom.layout_B, 32 * 8)):
        assert all(lay(t, v) == v for t in (0, 77, 127) for v in range(extent))


@pytest.mark.parametrize("make,k_tiles", [(SM90_64xNx16_F32BF16BF16_SS, 3),
                                          (SM90_64xNx16_F32F16F16_SS, 2),
                                          (SM90_64xNx8_F32TF32TF32_SS, 3),
                                          (SM90_64xNx32_F32E4M3E5M2_SS_TN, 2),
                                          (SM90_64xNx32_F32E5M2E5M2_SS_TN, 1)])
def test_two_warpgroups_multiply_like_numpy(make, k_tiles):
    rng = np.random.default_rng(7)
    atom = make(40)
    mma = make_tiled_mma(atom, (2, 1, 1))
    assert mma.tile_size == (128, 40, atom.shape_mnk[2]) and mma.size == 256
    M, N, K = 128, 40, atom.shape_mnk[2] * k_tiles
    A = encode(rng.uniform(-2, 2, (M, K)), atom.a_type)
    B = encode(rng.uniform(-2, 2, (N, K)), atom.b_type)
    C = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    ref = decode(A, atom.a_type) @ decode(B, atom.b_type).T + C
    run_mma(mma, make_tensor(A.ravel(), Layout((M, K), (K, 1))),
            make_tensor(B.ravel(), Layout((N, K), (K, 1))),
            make_tensor(C.ravel(), Layout((M, N), (N, 1))))
    np.testing.assert_allclose(C, ref, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("make,args,message", [
    (SM90_64xNx16_F32BF16BF16_SS, (12,), "multiple of 8 in 8..256"),
    (SM90_64xNx16_F32BF16BF16_SS, (264,), "multiple of 8 in 8..256"),
    (SM90_64xNx16_F32F16F16_SS, (64, "M"), "major of A"),
    (SM90_64xNx8_F32TF32TF32_SS, (64, "K", "MN"), "must be K-major"),
    (SM90_64xNx32_F32E4M3E5M2_SS_TN, (20,), "multiple of 8 in 8..256"),
])
def test_atom_errors(make, args, message):
    with pytest.raises(LayoutError, match=message):
        make(*args)


# --- layout atoms --------------------------------------------------------------------------------

@pytest.mark.parametrize("make,bits,text", [
    (Layout_K_INTER_Atom, 16, "Sw<0,3,3> o 0 o (8,8):(8,1)"),
    (Layout_K_SW32_Atom, 16, "Sw<1,3,3> o 0 o (8,16):(16,1)"),
    (Layout_K_SW64_Atom, 16, "Sw<2,3,3> o 0 o (8,32):(32,1)"),
    (Layout_K_SW128_Atom, 16, "Sw<3,3,3> o 0 o (8,64):(64,1)"),
    (Layout_K_SW128_Atom, 32, "Sw<3,2,3> o 0 o (8,32):(32,1)"),
    (Layout_MN_INTER_Atom, 16, "Sw<0,3,3> o 0 o (8,8):(1,8)"),
    (Layout_MN_SW128_Atom, 16, "Sw<3,3,3> o 0 o (64,8):(1,64)"),
])
def test_layout_atoms(make, bits, text):
    assert str(make(bits)) == text


def test_layout_atom_errors():
    with pytest.raises(LayoutError, match="swizzles are"):
        gmma_layout_atom("K", 16, 16)
    with pytest.raises(LayoutError, match="'K' or 'MN'"):
        gmma_layout_atom("M", 128, 16)


# --- descriptors -----------------------------------------------------------------------------------

def test_descriptor_seen_right_on_an_h100():
    # bf16 A 64x16 without swizzle: core matrices of 8 rows x 16 bytes, rows 16 bytes apart,
    # K-adjacent core matrices 128 bytes apart, 8-row groups 256 bytes apart
    a = Layout(((8, 8), (8, 2)), ((8, 128), (1, 64)))
    assert gmma_descriptor(a, 16, "K") == GmmaDescriptor(0, 128, 256, 0)


# (atom, stage (MN, K), instruction shape, block) -> (start, LBO, SBO, swizzle), in bytes,
# from the canonical forms: K-major ((8,n),2):((W,SBO),LBO), MN-major swizzled
# ((W,n),(8,k)):((1,LBO),(W,SBO)), MN-major plain ((1,n),(8,k)):((-,SBO),(1,LBO)); the stage is
# tile_to_shape of the atom (copies along MN first), so each offset is counted by hand.
CASES = [
    (Layout_K_SW128_Atom, (64, 64), None, (0, 0), (0, 16, 1024, 128)),
    (Layout_K_SW128_Atom, (64, 64), None, (0, 3), (96, 16, 1024, 128)),
    (Layout_K_SW128_Atom, (128, 64), (64, 16), (1, 2), (8192 + 64, 16, 1024, 128)),
    (Layout_K_SW64_Atom, (64, 64), None, (0, 1), (32, 16, 512, 64)),
    (Layout_K_SW64_Atom, (64, 64), None, (0, 2), (4096, 16, 512, 64)),
    (Layout_K_SW32_Atom, (64, 64), None, (0, 1), (2048, 16, 256, 32)),
    (Layout_K_INTER_Atom, (64, 64), None, (0, 1), (2048, 1024, 128, 0)),
    (Layout_MN_SW128_Atom, (64, 64), None, (0, 1), (2048, 16, 1024, 128)),
    (Layout_MN_SW128_Atom, (128, 64), (128, 16), (0, 1), (4096, 1024, 2048, 128)),
    (Layout_MN_INTER_Atom, (64, 16), None, (0, 0), (0, 1024, 128, 0)),
]


@pytest.mark.parametrize("atom,stage,shape,block,expected", CASES)
def test_descriptors_follow_the_canonical_forms(atom, stage, shape, block, expected):
    major = "K" if "K_" in atom.__name__ else "MN"
    layout = tile_to_shape(atom(16), stage)
    d = gmma_descriptor(layout, 16, major, mn_block=block[0], k_block=block[1], shape=shape)
    assert (d.start, d.lbo, d.sbo, d.swizzle) == expected
    # the start is the layout's own (unswizzled) offset of the slice's first element
    smn, sk = shape or (stage[0], 16)
    assert d.start == 2 * layout.inner(block[0] * smn, block[1] * sk)


def test_tf32_k_major_descriptor():
    layout = tile_to_shape(Layout_K_SW128_Atom(32), (64, 32))
    d = gmma_descriptor(layout, 32, "K", k_block=2)
    assert (d.start, d.lbo, d.sbo, d.swizzle) == (64, 16, 1024, 128)


def test_encoding():
    d = GmmaDescriptor(start=64, lbo=128, sbo=256, swizzle=0)
    word = d.encode(0x1000)
    assert word & 0x3FFF == (0x1000 + 64) >> 4
    assert (word >> 16) & 0x3FFF == 128 >> 4 and (word >> 32) & 0x3FFF == 256 >> 4
    assert word >> 62 == 0
    assert GmmaDescriptor(0, 16, 1024, 32).encode() >> 62 == 3
    assert GmmaDescriptor(0, 16, 1024, 64).encode() >> 62 == 2
    with pytest.raises(LayoutError, match="16-byte aligned"):
        d.encode(8)


@pytest.mark.parametrize("layout,bits,major,message", [
    # rows padded to 72 elements: 144-byte rows fit no form
    (Layout((64, 16), (72, 1)), 16, "K", "rows are 144 bytes apart"),
    # a 128-byte swizzle on the wrong base (bytes instead of 16-bit elements)
    (ComposedLayout(Swizzle(3, 4, 3), 0, Layout((64, 64), (64, 1))), 16, "K",
     "not a GMMA swizzle"),
    (Layout((64, 8), (8, 1)), 32, "MN", "16-bit elements only"),
    (Layout((64, 16), (1, 64)), 16, "K", "not contiguous in 16-byte runs"),
    (Layout((64, 16), (16, 1)), 16, "MN", "not contiguous in 16-byte runs"),
    (Layout((64, 16), (1, 68)), 16, "MN", "not made of 16-byte units"),
    (Layout((60, 16), (16, 1)), 16, "K", "does not tile"),
])
def test_layouts_no_descriptor_expresses(layout, bits, major, message):
    with pytest.raises(LayoutError, match=message):
        gmma_descriptor(layout, bits, major)


# --- TMA boxes ---------------------------------------------------------------------------------

def test_tma_boxes_of_k_and_mn_major_stages():
    from layoutalg.atom.tma import make_tma_copy
    # A row-major (M, K), a 128x128 bf16 K-major stage of 128-byte swizzle atoms: two boxes
    # of 64 K x 128 rows, the second after all 128 rows of the first
    t = make_tma_copy((300, 1000), (1000, 1), tile_to_shape(Layout_K_SW128_Atom(16), (128, 128)),
                      16)
    assert (t.box, t.swizzle, t.major, t.dims, t.strides) == ((64, 128), 128, "K", (1000, 300),
                                                             (2000,))
    assert [(b.smem_offset, b.coords) for b in t.boxes] == [(0, (0, 0)), (8192, (64, 0))]
    assert t.bytes == 128 * 128 * 2
    # B row-major (K, N) seen as (N, K) with N contiguous: an MN-major stage whose atoms
    # (64 N x 8 K) are laid out N first, so each atom is a box of 8 rows of 64
    t = make_tma_copy((256, 64), (1, 256), tile_to_shape(Layout_MN_SW128_Atom(16), (128, 64)),
                      16)
    assert (t.box, t.major, t.dims, len(t.boxes)) == ((64, 8), "MN", (256, 64), 16)
    assert [(b.smem_offset, b.coords) for b in t.boxes[:3]] == [(0, (0, 0)), (512, (64, 0)),
                                                                (1024, (0, 8))]
    # no swizzle: 16-byte core-matrix rows, one box per K chunk
    t = make_tma_copy((64, 64), (64, 1), tile_to_shape(Layout_K_INTER_Atom(16), (64, 64)), 16)
    assert (t.box, t.swizzle, len(t.boxes)) == ((8, 64), 0, 8)


@pytest.mark.parametrize("args,message", [
    # the global matrix is K-contiguous, the stage MN-contiguous: TMA does not transpose
    (((64, 64), (64, 1), "MN128"), "does not transpose"),
    # global rows 20 bf16 = 40 bytes apart
    (((64, 64), (20, 1), "K128"), "not a positive multiple of 16 bytes"),
    (((64, 64), (64, 64), "K128"), "no contiguous dimension"),
    # runs of 4 elements (8 bytes) along K: no TMA box row is that short
    (((64, 64), (64, 1), "short runs"), "not a multiple of 16 bytes"),
    (((64, 64), (64, 1), "badswizzle"), "not a TMA swizzle"),
])
def test_tma_refuses_what_it_cannot_copy(args, message):
    from layoutalg.atom.tma import make_tma_copy
    shape, strides, which = args
    smem = {"MN128": tile_to_shape(Layout_MN_SW128_Atom(16), (64, 64)),
            "K128": tile_to_shape(Layout_K_SW128_Atom(16), (64, 64)),
            "short runs": Layout((64, (4, 16)), (4, (1, 256))),
            "badswizzle": ComposedLayout(Swizzle(3, 4, 3), 0, Layout((64, 64), (64, 1)))}[which]
    with pytest.raises(LayoutError, match=message):
        make_tma_copy(shape, strides, smem, 16)
