# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. Tensor cores and swizzles: shared-memory bank conflicts
#
# Shared memory is 32 banks of 4 bytes: byte address `a` lives in bank `(a // 4) % 32`. A
# warp's request is served in *wavefronts*; one wavefront reads or writes at most one 4-byte
# word per bank. When the threads of one access phase touch two different words of the same
# bank, the phase needs more than one wavefront: a bank conflict.
#
# Tensor-core kernels read shared memory with `ldmatrix`: per phase, 8 threads each give the
# address of one 16-byte row of an 8x8 matrix of 16-bit values. In a row-major tile with
# 128-byte rows those 8 rows all start in banks 0-3: an 8-way conflict. CuTe's answer is a
# swizzle, `Sw<3,3,3>`, which XORs the row number (offset bits 6-8) into the 16-byte chunk
# number (bits 3-5). This notebook draws the banks and counts the wavefronts, with and
# without the swizzle. Pure Python: it runs on any machine.

# %%
import numpy as np

from layoutalg import ComposedLayout, Layout, Swizzle, composition, tile_to_shape
from layoutalg.atom import SM75_U32x4_LDSM_N, SM80_16x8x16_F32F16F16F32_TN
from layoutalg.tensor import make_identity_tensor
from layoutalg.tiled import make_tiled_copy_A, make_tiled_mma
from layoutalg.viz import side_by_side, smem_banks, svg_swizzle_banks

# %% [markdown]
# ## Counting wavefronts
# A phase is a set of cells (row, column) of the tile, each one element. The wavefronts it
# needs are the largest number of distinct 4-byte words that fall in one bank.

# %%
def wavefronts(L, cells, element_bytes):
    """Wavefronts one access phase of ``cells`` of the smem layout ``L`` needs."""
    words_in_bank = {}
    for r, c in cells:
        first = L(r, c) * element_bytes
        for byte in range(first, first + element_bytes, 4):      # words of this element
            word = byte // 4
            words_in_bank.setdefault(word % 32, set()).add(word)
    return max(len(w) for w in words_in_bank.values())


def ldmatrix_phase(chunk, rows=range(8)):
    """One ldmatrix phase on fp16 data: rows 0-7, columns chunk*8 .. chunk*8+7."""
    return [(r, chunk * 8 + k) for r in rows for k in range(8)]


# %% [markdown]
# ## An fp16 tile with 128-byte rows
# `(8,64):(64,1)` is a row-major 8x64 fp16 tile. The picture shows each element's bank;
# the red boxes are the first `ldmatrix` phase (column chunk 0 of rows 0-7).

# %%
plain = Layout((8, 64), (64, 1))
swizzled = ComposedLayout(Swizzle(3, 3, 3), 0, plain)
phase0 = ldmatrix_phase(0)
svg_swizzle_banks(plain, element_bytes=2, highlight=phase0)

# %% [markdown]
# Without the swizzle every row's chunk 0 is in banks 0-3: the phase needs 8 wavefronts.
# With `Sw<3,3,3>`, row r's chunk 0 moves to chunk r, banks 4r..4r+3: one wavefront.

# %%
svg_swizzle_banks(swizzled, element_bytes=2, highlight=phase0)

# %%
per_phase = {name: [wavefronts(L, ldmatrix_phase(c), 2) for c in range(8)]
             for name, L in (("plain", plain), ("swizzled", swizzled))}
print("wavefronts of the 8 ldmatrix phases (one per column chunk):")
for name, counts in per_phase.items():
    print(f"  {name:9s}", counts)
assert per_phase["plain"] == [8] * 8
assert per_phase["swizzled"] == [1] * 8

# %% [markdown]
# The swizzle must not break the *writes* either. A `cp.async` of 16 bytes per thread
# fills a row with 8 threads: one phase is one 128-byte row, conflict-free both ways,
# because the swizzle only permutes the chunks within a row.

# %%
row_phases = [[(r, c) for c in range(64)] for r in range(8)]
assert [wavefronts(plain, p, 2) for p in row_phases] == [1] * 8
assert [wavefronts(swizzled, p, 2) for p in row_phases] == [1] * 8

# %% [markdown]
# ## The phases of a real ldmatrix, from the atom
# The phases above were written by hand. Here they come from the atom: the tiled copy that
# feeds the `m16n8k16` tensor core from shared memory (`make_tiled_copy_A` with
# `ldmatrix.x4`). Each thread's source partition of a 16x64 K-major A tile is the rows it
# points at; threads `8p .. 8p+7` form phase p. Counting the wavefronts of every phase of
# every k-block gives the same answer: 8 without the swizzle, 1 with it.

# %%
mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN())
ldsm = make_tiled_copy_A(SM75_U32x4_LDSM_N(np.float16), mma)
a_plain = Layout((16, 64), (64, 1))                        # (M, K), K contiguous
a_swizzled = ComposedLayout(Swizzle(3, 3, 3), 0, a_plain)
ident = make_identity_tensor((16, 64))
parts = [ldsm.get_slice(t).partition_S(ident) for t in range(32)]   # (CPY, CPY_M, CPY_K)
k_blocks = parts[0].shape[2]


def phase_cells(p, k):
    """The (m, k) elements threads 8p .. 8p+7 read in k-block k."""
    return [tuple(c) for t in range(8 * p, 8 * p + 8) for c in parts[t][None, 0, k].values()]


for name, L in (("plain", a_plain), ("swizzled", a_swizzled)):
    counts = [wavefronts(L, phase_cells(p, k), 2) for k in range(k_blocks) for p in range(4)]
    print(f"{name:9s} wavefronts per (k-block, phase):", counts)
    assert counts == [8 if name == "plain" else 1] * (4 * k_blocks)
svg_swizzle_banks(a_swizzled, element_bytes=2, highlight=phase_cells(1, 0),
                  title="swizzled A tile: banks, ldmatrix phase 1 of k-block 0")

# %% [markdown]
# ## The shared-memory tile of a GEMM
# A 128x64 fp16 tile is the swizzled 8x64 atom repeated down the rows (`tile_to_shape`).
# Here are its first 16 rows; every 8-row block repeats the atom's pattern, so every
# ldmatrix phase of the tile is conflict-free.

# %%
smem = tile_to_shape(composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1))), (128, 64))
print(smem)
all_phases = [[(r0 + r, c) for r, c in ldmatrix_phase(chunk)]
              for r0 in range(0, 128, 8) for chunk in range(8)]
assert max(wavefronts(smem, p, 2) for p in all_phases) == 1
svg_swizzle_banks(composition(smem, (Layout(16), Layout(64))), element_bytes=2)

# %% [markdown]
# ## Reading a column of an fp32 tile: padding or swizzle
# A warp reading one column of a row-major 32x32 fp32 tile (a transpose) hits one bank 32
# times. Two cures: pad each row by one element (`(32,32):(33,1)`, costs 128 bytes), or
# swizzle the low 5 bits with the row number (`Sw<5,0,5>`, costs nothing).

# %%
tiles = {
    "row-major": Layout((32, 32), (32, 1)),
    "padded": Layout((32, 32), (33, 1)),
    "swizzled": ComposedLayout(Swizzle(5, 0, 5), 0, Layout((32, 32), (32, 1))),
}
column = [(r, 0) for r in range(32)]
counts = {name: max(wavefronts(L, [(r, c) for r in range(32)], 4) for c in range(32))
          for name, L in tiles.items()}
print("worst column read:", counts)
assert counts == {"row-major": 32, "padded": 1, "swizzled": 1}
banks = {name: [row[0] for row in smem_banks(L, 4)] for name, L in tiles.items()}
assert len(set(banks["row-major"])) == 1 and len(set(banks["swizzled"])) == 32
side_by_side(*(svg_swizzle_banks(composition(L, (Layout(8), Layout(8))), element_bytes=4,
                                 highlight=column[:8], title=f"{name}: rows 0-7, cols 0-7")
               for name, L in tiles.items()))
