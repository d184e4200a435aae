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
# # 1. Layouts: build, compose, divide, multiply
#
# A *layout* `shape:stride` is a function from coordinates to offsets. Everything a GEMM
# kernel does with its tiles (which block reads which tile, which thread holds which value,
# where a value lives in shared memory) is one of a handful of operations on layouts. This
# notebook builds layouts and draws every step.
#
# A cell whose last line is a layout shows its picture (`Layout._repr_svg_`): a grid whose
# rows are mode 0 and columns mode 1, each cell holding its offset; `print_layout` gives the
# same grid as text. Thick lines separate the blocks of a hierarchical mode. Each claim the
# text makes is also checked with an `assert`, so running the notebook proves it.
#
# It runs on any machine: `layoutalg` is pure Python.

# %%
from layoutalg import (
    Layout, blocked_product, coalesce, complement, composition, logical_divide,
    logical_product, make_row_major, print_layout, raked_product, tile_to_shape,
    tiled_divide, zipped_divide,
)
from layoutalg.viz import side_by_side, svg_layout

# %% [markdown]
# ## Building layouts
# `Layout(shape)` is column-major (the first mode is fastest); `make_row_major` the other
# way round. Calling a layout maps a coordinate, or a single index (colexicographic), to an
# offset.

# %%
col = Layout((4, 8))
row = make_row_major((4, 8))
print(col, row)
print_layout(row)
assert col(1, 2) == 1 + 2 * 4 and row(1, 2) == 1 * 8 + 2
assert [col(i) for i in range(col.size)] == list(range(32))
side_by_side(svg_layout(col), svg_layout(row))

# %% [markdown]
# Modes can be hierarchical: `((2,2),(2,4)):((1,4),(2,8))` has a row mode of two
# sub-modes. A coordinate of a mode is either a nested tuple or a single index into it.

# %%
H = Layout(((2, 2), (2, 4)), ((1, 4), (2, 8)))
assert H((1, 1), (0, 2)) == H(3, 4) == 1 + 4 + 2 * 8
H

# %% [markdown]
# `coalesce` merges modes where one continues the other, keeping the function:

# %%
C = coalesce(Layout((2, (1, 6)), (1, (6, 2))))
assert C == Layout(12, 1)
C

# %% [markdown]
# ## Composition
# `composition(A, B)` is the layout `i -> A(B(i))`, with `B`'s shape. This is the example of
# CuTe's documentation: `(6,2):(8,2) o (4,3):(3,1) = ((2,2),3):((24,2),8)`.

# %%
A = Layout((6, 2), (8, 2))
B = Layout((4, 3), (3, 1))
R = composition(A, B)
assert R == Layout(((2, 2), 3), ((24, 2), 8))
assert all(R(i) == A(B(i)) for i in range(B.size))
side_by_side(svg_layout(A, title=f"A = {A}"), svg_layout(B, title=f"B = {B}"),
             svg_layout(R, title=f"A o B = {R}"))

# %% [markdown]
# ## Complement
# `complement(L, M)` is the layout of the offsets below `M` that `L` does not reach, ordered:
# together `(L, complement)` covers `[0, M)` exactly once.

# %%
L = Layout((2, 2), (1, 6))
Lc = complement(L, 24)
assert Lc == Layout((3, 2), (2, 12))
offsets = sorted(L(i) + Lc(j) for i in range(L.size) for j in range(Lc.size))
assert offsets == list(range(24))
side_by_side(svg_layout(L, title=f"L = {L}"), svg_layout(Lc, title=f"complement = {Lc}"))

# %% [markdown]
# ## Divide: tiles of a layout
# `logical_divide(A, tiler)` splits each mode of `A` into (tile, rest). Dividing an 8x8
# matrix by 2x4 tiles gives `((2,4),(4,2))`: in each mode the first sub-mode walks inside a
# tile, the second over the tiles. The thick lines are the tile boundaries.

# %%
M = Layout((8, 8))
D = logical_divide(M, (Layout(2), Layout(4)))
assert D == Layout(((2, 4), (4, 2)), ((1, 2), (8, 32)))
D

# %% [markdown]
# `zipped_divide` gathers the tile modes into mode 0 and the rest into mode 1: a column of
# the picture is one tile (8 elements), a row is one element's position in every tile.
# `zipped_divide(A, B)[0]` is the first tile, i.e. `composition(A, B)`, and `tiled_divide`
# flattens the rest modes (the `(TILE, REST_M, REST_N)` shape kernels index with a block
# coordinate).

# %%
Z = zipped_divide(M, (2, 4))
assert Z[0] == Layout((2, 4), (1, 8))
assert tiled_divide(M, (2, 4)) == Layout(((2, 4), 4, 2), ((1, 8), 2, 32))
tile_3 = [Z(i, 3) for i in range(8)]          # the 8 offsets of tile 3 = (row 3, col 0)
assert tile_3 == [M(6 + r, c) for c in range(4) for r in range(2)]
side_by_side(svg_layout(Z), svg_layout(Z[0], title="tile 0 = Z[0]"))

# %% [markdown]
# ## Multiply: repeat a tile
# `logical_product(A, B)` repeats the layout `A` in the pattern of `B`; `blocked_product`
# keeps each copy of `A` together (blocks), `raked_product` interleaves the copies (the
# usual way of dealing threads over a tile). Both cover the same offsets. Here a colour is
# one copy of the tile.

# %%
T = Layout((2, 2), (1, 2))            # a 2x2 tile
G = Layout((3, 4))                    # repeated 3x4 times
P = logical_product(T, G)
Bp = blocked_product(T, G)
Rp = raked_product(T, G)
assert P[0] == T
assert sorted(Bp(i) for i in range(Bp.size)) == sorted(Rp(i) for i in range(Rp.size)) \
    == list(range(48))
copy = lambda offset: offset // T.cosize      # colour: which copy of T an offset is in
side_by_side(*(svg_layout(X, title=f"{name} {X}", color=copy)
               for name, X in (("logical", P), ("blocked", Bp), ("raked", Rp))))

# %% [markdown]
# `tile_to_shape` repeats a block until it fills a shape, the way shared-memory layouts are
# built from an atom:

# %%
S = tile_to_shape(T, (4, 6))
assert S.size == 24 and S(1, 1) == T(1, 1)
S
