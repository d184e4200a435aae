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
# # 2. Tiled copies and MMAs: who holds what
#
# An *atom* is one instruction described as layouts: which thread holds which element.
# A *TV layout* maps (thread, value) to an element of a tile. Tiling an atom over threads
# and data gives a `TiledCopy` or a `TiledMMA`; `get_slice(t)` is thread t's view, and its
# `partition_*` are the tensors that thread reads and writes.
#
# A cell whose last line is a TiledCopy or TiledMMA shows its picture: every element of the
# tile labelled `T<thread>` / `V<value>` and coloured by thread, as CuTe's `print_latex`.
# Pure Python, no GPU: every claim below is checked by an `assert`.

# %%
import numpy as np

from layoutalg import Layout
from layoutalg.atom import (
    SM75_U16x4_LDSM_T, SM75_U32x4_LDSM_N, SM80_16x8x8_F16F16F16F16_TN,
    SM80_16x8x8_F32TF32TF32F32_TN, SM80_16x8x16_F16F16F16F16_TN,
    SM80_16x8x16_F32BF16BF16F32_TN, SM80_16x8x16_F32F16F16F32_TN, SM80_CP_ASYNC_CACHEALWAYS,
    UniversalCopy, UniversalFMA,
)
from layoutalg.tensor import make_identity_tensor, make_tensor
from layoutalg.tiled import make_tiled_copy, make_tiled_copy_A, make_tiled_copy_B, make_tiled_mma
from layoutalg.viz import svg_tv_layout


def owners(tiled, which, shape):
    """{coordinate: [(thread, value), ...]} from every thread's partition of an identity
    tensor (a tensor whose elements are their own coordinates)."""
    ident = make_identity_tensor(shape)
    out = {}
    for t in range(tiled.size):
        part = getattr(tiled.get_slice(t), f"partition_{which}")(ident)
        for v, crd in enumerate(part.values()):
            out.setdefault(tuple(crd), []).append((t, v))
    return out


# %% [markdown]
# ## The SM80 tensor-core atoms
# `mma.sync.m16n8k16` with f16 or bf16 inputs: one warp multiplies a 16x16 A by a 16x8 B
# (B is given as NxK, drawn KxN as in CuTe). Thread `4g + t` holds A's rows `g` and `g+8`,
# columns `2t, 2t+1` and `2t+8, 2t+9` (PTX ISA, "Matrix Fragments for mma.m16n8k16").

# %%
m16n8k16 = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN())
A_tv = m16n8k16.atom.layout_A
for lane in range(32):
    g, t = divmod(lane, 4)
    rows_cols = [(A_tv(lane, v) % 16, A_tv(lane, v) // 16) for v in range(8)]
    assert rows_cols == [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1),
                         (g, 2 * t + 8), (g, 2 * t + 9), (g + 8, 2 * t + 8), (g + 8, 2 * t + 9)]
m16n8k16

# %% [markdown]
# The bf16 and the f16-accumulator atoms have the same fragments; `m16n8k8` is half of it
# along K, and the tf32 `m16n8k8` (32-bit inputs) has its own A and B layouts.

# %%
same = [SM80_16x8x16_F32BF16BF16F32_TN(), SM80_16x8x16_F16F16F16F16_TN()]
assert all((a.layout_A, a.layout_B, a.layout_C) == (A_tv, m16n8k16.atom.layout_B,
                                                   m16n8k16.atom.layout_C) for a in same)
for atom in (SM80_16x8x8_F16F16F16F16_TN(), SM80_16x8x8_F32TF32TF32F32_TN()):
    print(f"{atom.name}: A {atom.layout_A}  B {atom.layout_B}  C {atom.layout_C}")
make_tiled_mma(SM80_16x8x8_F32TF32TF32F32_TN())

# %% [markdown]
# ## Tiling the atom over warps
# Four warps in a 2x2 arrangement cover a 32x16x16 tile. An element of A is now held by two
# threads (one in each warp column), an element of B by two (one in each warp row).

# %%
mma4 = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN(), (2, 2))
M, N, K = mma4.tile_size
assert (M, N, K) == (32, 16, 16) and mma4.size == 128
assert {len(o) for o in owners(mma4, "A", (M, K)).values()} == {2}
assert {len(o) for o in owners(mma4, "C", (M, N)).values()} == {1}
mma4

# %% [markdown]
# ## Partitions of a 128x128x8 tile (the SIMT GEMM of the MoYe material)
# 256 threads: a (32,8) thread layout copies the 128x8 tiles of A and B (4 values each),
# a (16,16) layout of `UniversalFMA` atoms computes the 128x128 tile of C (8x8 each).
# Shapes follow CuTe: `(CPY, CPY_M, CPY_K)` and `(MMA, MMA_M, MMA_N)`.

# %%
bM, bN, bK = 128, 128, 8
copy = make_tiled_copy(UniversalCopy(32), Layout((32, 8)), (1, 1))
fma = make_tiled_mma(UniversalFMA(), (16, 16))
gA = make_identity_tensor((bM, bK))          # coordinates stand in for data
gC = make_identity_tensor((bM, bN))
tAgA = copy.get_slice(37).partition_S(gA)    # (CPY, CPY_M, CPY_K)
tCgC = fma.get_slice(37).partition_C(gC)     # (MMA, MMA_M, MMA_N)
print("thread 37 copies", tAgA.shape, list(tAgA.values()))
print("thread 37 computes", tCgC.shape, "first 8 values:", list(tCgC.values())[:8])
assert tAgA.shape == ((1, 1), 4, 1) and tCgC.shape == (1, 8, 8)
# every element of the tile is copied, and computed, by exactly one thread
copied = owners(copy, "S", (bM, bK))
assert sorted(copied) == sorted((m, k) for m in range(bM) for k in range(bK))
assert all(len(o) == 1 for o in copied.values())
held = [crd for t in range(fma.size) for crd in fma.get_slice(t).partition_C(gC).values()]
assert sorted(held) == sorted((m, n) for m in range(bM) for n in range(bN))
copy

# %% [markdown]
# With 16-byte `cp.async` each thread moves 4 consecutive floats of a column in one
# instruction, so the same 256 threads copy the whole 128x8 tile at once. The atom refuses
# a shared-memory tile padded to `bM+1` (rows no longer 16-byte aligned) when it is
# partitioned, naming the broken condition.

# %%
cp16 = make_tiled_copy(SM80_CP_ASYNC_CACHEALWAYS(16, np.float32), Layout((32, 8)), (4, 1))
assert cp16.tile_size == (128, 8)
sA = make_tensor(np.zeros(bM * bK, np.float32), Layout((bM, bK)))
print(cp16.get_slice(1).partition_D(sA).shape)
padded = make_tensor(np.zeros((bM + 1) * bK, np.float32), Layout((bM, bK), (1, bM + 1)))
try:
    cp16.get_slice(1).partition_D(padded)
    raise AssertionError("a 16-byte copy into a padded tile must be refused")
except ValueError as e:
    print("refused:", e)

# %% [markdown]
# ## ldmatrix
# `ldmatrix.x4` loads four 8x8 matrices of 16-bit values: as *source*, each of the 32
# threads gives the address of one 16-byte row; as *destination*, each receives the values
# of the MMA's A fragment. `make_tiled_copy_A` builds the copy whose destination is exactly
# the tiled MMA's A partition.

# %%
ldsm = make_tiled_copy_A(SM75_U32x4_LDSM_N(np.float16), m16n8k16)
assert ldsm.layout_tv == m16n8k16.get_layoutA_TV()
src = owners(ldsm, "S", (16, 16))
assert all(src[r, c] == [(r + 16 * (c // 8), c % 8)] for r in range(16) for c in range(16))
ldsm

# %% [markdown]
# The transposed form loads B from a tile stored N-major (`ldmatrix.trans`): as source,
# a thread's row address now points along N.

# %%
ldsm_t = make_tiled_copy_B(SM75_U16x4_LDSM_T(np.float16), m16n8k16)
assert owners(ldsm_t, "D", (8, 16)) == owners(m16n8k16, "B", (8, 16))
ldsm_t
