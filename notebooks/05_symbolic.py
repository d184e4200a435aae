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
# # 5. Symbolic layouts
#
# The layout algebra does not need numbers for its strides: a stride may be a sympy
# symbol, and an extent a sympy symbol declared positive and integer. The results are then
# formulas, which is how CuTe's documentation explains composition. `layoutalg.symbolic`
# builds such layouts, gives a layout's index as a sympy expression of its coordinates
# (`layout_expr`), renders it in LaTeX (`latex`, which a notebook shows typeset), and puts
# numbers back in (`substitute`, `same_function`).
#
# It runs on any machine: no GPU is involved.

# %%
import random

from layoutalg import (
    Layout, LayoutError, blocked_product, complement, composition, left_inverse,
    logical_divide, right_inverse,
)
from layoutalg.symbolic import (
    coord_symbols, extent_symbols, latex, layout_expr, same_function, stride_symbols,
    substitute, symbolic_layout,
)

# %% [markdown]
# ## A layout is a formula
# `layout_expr(L)` is the index of `L` as a function of one coordinate symbol per mode
# (`i0`, `i1`, ...; a hierarchical mode has one per leaf, `i0_0`, `i0_1`). `latex(L)` is
# the same formula for display.

# %%
L = symbolic_layout((3, 6, 2, 8), "w x y z")
print(L, "   coordinates:", coord_symbols(L))
print(layout_expr(L))
latex(L)

# %%
H = Layout(((2, 4), 3), ((1, stride_symbols("x")[0]), 8))
latex(H)

# %% [markdown]
# Given a single index instead of a coordinate, the layout splits it colexicographically
# (the first mode fastest), as CuTe does:

# %%
latex(L, "i")

# %% [markdown]
# ## CuTe's composition example
# CuTe's documentation composes `(3,6,2,8):(w,x,y,z)` with `16:9` (every ninth of 16
# elements) and finds `(1,2,2,4):(9w,3x,y,z)`. The algebra gives the same function without
# the size-1 mode (its only coordinate is 0, so its stride never counts); `same_function`
# compares layouts as functions, index by index.

# %%
w, x, y, z = L.stride
R = composition(L, Layout(16, 9))
print(R)
assert same_function(R, Layout((1, 2, 2, 4), (9 * w, 3 * x, y, z)))
latex(R)

# %% [markdown]
# The symbolic result is the numeric one for every choice of strides: put random numbers in
# and compare with the composition computed from numbers.

# %%
rng = random.Random(0)
for _ in range(5):
    vals = {s: rng.randint(1, 100) for s in (w, x, y, z)}
    numeric = composition(substitute(L, vals), Layout(16, 9))
    assert same_function(substitute(R, vals), numeric)
    print(vals, "->", numeric)

# %% [markdown]
# ## Dividing a symbolic layout
# `logical_divide` by a 2x4 tiler: the tile mode and the rest mode, each a formula.

# %%
a, b = stride_symbols("a b")
D = logical_divide(Layout((8, 8), (a, b)), (Layout(2), Layout(4)))
print(D)
latex(D)

# %% [markdown]
# ## Symbolic extents, and the facts the algebra needs
# An extent can be a symbol too, when the algebra can decide what it needs about it. A
# block of `n` columns of 4-element vectors, complemented in `16 n`:

# %%
(n,) = extent_symbols("n")
V = Layout((4, n), (1, 8))
C = complement(V, 16 * n)
print(C)
for v in (1, 2, 5):
    assert same_function(substitute(C, {n: v}), complement(substitute(V, {n: v}), 16 * v))
print(blocked_product(Layout((2, n)), Layout((3, 4))))

# %% [markdown]
# When the algebra needs a fact that the symbols do not give (here: does 2 divide `n`?
# composition of `4:2` into a layout of `n` rows is only a layout if it does), it raises a
# `LayoutError` that names the missing assumption:

# %%
try:
    composition(Layout((n, 8), (1, 2 * n)), Layout(4, 2))
except LayoutError as e:
    message = str(e)
print(message)
assert "cannot decide whether 2 divides n" in message

# %% [markdown]
# State it by writing the extent as a multiple: `8 m` rows (with `m >= 1`, so also at least
# the 8 rows the 4 elements of stride 2 need).

# %%
(m,) = extent_symbols("m")
R2 = composition(Layout((8 * m, 8), (1, 16 * m)), Layout(4, 2))
print(R2)
for v in range(1, 4):
    assert same_function(substitute(R2, {m: v}),
                         composition(Layout((8 * v, 8), (1, 16 * v)), Layout(4, 2)))
latex(R2)

# %% [markdown]
# Strides built from symbols work too: `complement` (and so the products, and the inverses)
# order the strides and check their divisibility through the same decided facts. The
# complement of `(n,4):(1,2n)`, column-major `(n,4)` (strides `(1,n)`) in products, and the
# inverses of the row-major `(4,n)`:

# %%
S = Layout((n, 4), (1, 2 * n))
C2 = complement(S, 16 * n)
print(C2)
for v in (1, 2, 5):
    assert same_function(substitute(C2, {n: v}), complement(substitute(S, {n: v}), 16 * v))
print(blocked_product(Layout((n, 4)), Layout((2, 3))))
print(right_inverse(Layout((4, n), (n, 1))), left_inverse(Layout((4, n), (n, 1))))

# %% [markdown]
# A stride order or a divisibility the assumptions do not give is named, as before: with
# `8` in place of `2n`, does `n` divide 8?

# %%
try:
    complement(Layout((n, 4), (1, 8)))
except LayoutError as e:
    message = str(e)
print(message)
assert "cannot decide whether n divides 8" in message
