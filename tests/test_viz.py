"""Pictures: the SVG is well-formed XML with one labelled cell per element, and what each
label says is computed here independently through the layout (or the partition)."""

import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings, strategies as st

from layoutalg import ComposedLayout, Layout, LayoutError, Swizzle, logical_divide
from layoutalg.viz import smem_banks, svg_layout, svg_swizzle_banks

NS = "{http://www.w3.org/2000/svg}"


def parse(svg):
    """{panel: {(i, j): cell}} of a picture, a cell being (label lines, (fill, class), rect)."""
    root = ET.fromstring(svg)
    assert root.tag == NS + "svg"
    panels = {}
    for grid in root.iter(NS + "g"):
        if grid.get("class") != "grid":
            continue
        cells = {}
        for g in grid.iter(NS + "g"):
            if g.get("data-crd") is None:
                continue
            i, j = map(int, g.get("data-crd").split(","))
            assert (i, j) not in cells, f"cell {(i, j)} drawn twice"
            rects, texts = g.findall(NS + "rect"), g.findall(NS + "text")
            assert len(rects) == 1 and len(texts) == 1, f"cell {(i, j)}: one rect, one label"
            spans = texts[0].findall(NS + "tspan")
            lines = [s.text for s in spans] if spans else [texts[0].text]
            r = rects[0]
            rect = tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
            cells[i, j] = (lines, (r.get("fill"), g.get("class")), rect)
        panels[grid.get("data-panel")] = cells
    return panels


def grid_values(L):
    """The picture's expected grid, computed straight from the layout."""
    if L.rank == 1:
        return {(0, j): L(j) for j in range(L.size)}
    m, n = L[0].size, L[1].size
    return {(i, j): L(i, j) for i in range(m) for j in range(n)}


def check_geometry(cells, transposed=False):
    """Cell (i, j) sits at row i, column j (or j, i) of a regular grid."""
    x0 = min(r[0] for _, _, r in cells.values())
    y0 = min(r[1] for _, _, r in cells.values())
    for (i, j), (_, _, (x, y, w, h)) in cells.items():
        row, col = (j, i) if transposed else (i, j)
        assert (x, y) == (x0 + col * w, y0 + row * h)


# --- strategies: small rank-1/2 layouts, hierarchical, with gaps, zeros and permutations ---
def modes(max_leaves=3):
    leaf = st.tuples(st.integers(1, 4), st.integers(0, 9))
    return st.one_of(leaf, st.lists(leaf, min_size=2, max_size=max_leaves))


@st.composite
def layouts(draw):
    rank = draw(st.sampled_from([1, 2]))
    shp, std = [], []
    for _ in range(rank):
        m = draw(modes())
        if isinstance(m, list):
            shp.append(tuple(s for s, _ in m))
            std.append(tuple(d for _, d in m))
        else:
            shp.append(m[0])
            std.append(m[1])
    if rank == 1 and draw(st.booleans()):
        return Layout(shp[0], std[0]) if isinstance(shp[0], int) else Layout((shp[0],), (std[0],))
    return Layout(tuple(shp), tuple(std))


# --- svg_layout --------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(layouts())
def test_layout_labels_equal_values(L):
    (cells,) = parse(svg_layout(L)).values()
    expected = grid_values(L)
    assert set(cells) == set(expected)
    assert len(cells) == L.size
    for crd, (lines, _, _) in cells.items():
        assert lines == [str(expected[crd])]
    check_geometry(cells)


def test_equal_values_share_a_colour_and_neighbours_differ():
    L = Layout((4, 3), (1, 0))                      # each column repeats 0..3
    (cells,) = parse(svg_layout(L)).values()
    colour = {crd: cls[0] for crd, (_, cls, _) in cells.items()}
    for i in range(4):
        assert len({colour[i, j] for j in range(3)}) == 1
    assert len({colour[i, 0] for i in range(4)}) == 4


def test_swizzled_layout_labels():
    sw = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1)))
    (cells,) = parse(svg_layout(sw)).values()
    assert len(cells) == 512
    for (i, j), (lines, _, _) in cells.items():
        crd_offset = i * 64 + j
        swizzled = crd_offset ^ (((crd_offset >> 6) & 7) << 3)   # Sw<3,3,3> by hand
        assert lines == [str(swizzled)]


def test_divide_draws_tile_boundaries():
    L = logical_divide(Layout((8, 8)), (Layout(2), Layout(4)))   # ((2,4),(4,2))
    root = ET.fromstring(svg_layout(L))
    blocks = [p for p in root.iter(NS + "path") if p.get("class") == "block"]
    assert len(blocks) == 1
    d = blocks[0].get("d")
    assert d.count("h") == 3 and d.count("v") == 1      # rows every 2, columns every 4


def test_title_is_escaped_text_form():
    sw = ComposedLayout(Swizzle(2, 0, 3), 0, Layout((4, 8), (8, 1)))
    svg = svg_layout(sw)
    assert "Sw&lt;2,0,3&gt;" in svg
    root = ET.fromstring(svg)
    titles = [t.text for t in root.iter(NS + "text") if t.get("class") == "title"]
    assert titles == [str(sw)]


def test_symbolic_strides_are_labelled():
    sympy = pytest.importorskip("sympy")
    x, y = sympy.symbols("x y", integer=True, positive=True)
    L = Layout((2, 2), (x, y))
    (cells,) = parse(svg_layout(L)).values()
    assert {crd: lines[0] for crd, (lines, _, _) in cells.items()} == {
        (0, 0): "0", (1, 0): "x", (0, 1): "y", (1, 1): "x + y"}


@pytest.mark.parametrize("bad, error", [
    (Layout((2, 2, 2)), LayoutError),
    ((4, 8), TypeError),
    ("(4,8):(1,4)", TypeError),
])
def test_bad_input_is_refused(bad, error):
    with pytest.raises(error, match="rank-1 or rank-2|layout is needed"):
        svg_layout(bad)


# --- banks -------------------------------------------------------------------------------
SMEM = [
    (ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1))), 2),   # fp16, 128 B rows
    (ComposedLayout(Swizzle(2, 3, 3), 0, Layout((8, 32), (32, 1))), 2),   # fp16, 64 B rows
    (ComposedLayout(Swizzle(3, 2, 3), 0, Layout((8, 32), (32, 1))), 4),   # fp32, 128 B rows
    (Layout((8, 32), (32, 1)), 4),                                       # unswizzled fp32
    (Layout((16, 8), (1, 17)), 8),                                       # padded fp64
    (Layout(64, 3), 4),                                                  # rank 1
]


@pytest.mark.parametrize("L, element_bytes", SMEM)
def test_bank_labels(L, element_bytes):
    (cells,) = parse(svg_swizzle_banks(L, element_bytes)).values()
    expected = {crd: (off * element_bytes // 4) % 32 for crd, off in grid_values(L).items()}
    assert set(cells) == set(expected)
    for crd, (lines, _, _) in cells.items():
        assert lines == [str(expected[crd])]
    by_bank = {}
    for crd, (_, classes, _) in cells.items():
        by_bank.setdefault(expected[crd], set()).add(classes[0])
    assert all(len(c) == 1 for c in by_bank.values())                 # one colour a bank
    assert len(set.union(*by_bank.values())) == len(by_bank)          # banks differ
    rows = smem_banks(L, element_bytes)
    assert {(i, j): b for i, row in enumerate(rows) for j, b in enumerate(row)} == expected
    check_geometry(cells)


def test_highlight_marks_the_phase():
    sw = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1)))
    phase = [(i, 0) for i in range(8)]                  # ldmatrix: 8 rows of 16 bytes
    (cells,) = parse(svg_swizzle_banks(sw, 2, highlight=phase)).values()
    marked = {crd for crd, (_, classes, _) in cells.items() if classes[1] == "hi"}
    assert marked == set(phase)
    # the swizzle spreads those 8 rows over 8 distinct groups of 4 banks
    assert sorted(int(cells[c][0][0]) for c in phase) == list(range(0, 32, 4))


@pytest.mark.parametrize("kwargs, match", [
    (dict(element_bytes=0), "element_bytes"),
    (dict(element_bytes=2, banks=-1), "banks"),
    (dict(element_bytes=2, highlight=[(9, 0)]), "outside"),
    (dict(element_bytes=2, highlight=[(1, 2, 3)]), "not a"),
])
def test_bank_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        svg_swizzle_banks(Layout((8, 8)), **kwargs)


def test_large_tile_stays_compact():
    big = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((128, 64), (64, 1)))
    svg = svg_layout(big)
    assert len(svg) < 130 * big.size
    assert len(re.findall(r"data-crd=", svg)) == big.size


# --- notebook hooks ----------------------------------------------------------------------
def test_repr_svg_of_layouts():
    L = Layout((4, 8), (8, 1))
    sw = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1)))
    for x in (L, sw):
        (cells,) = parse(x._repr_svg_()).values()
        assert {crd: int(lines[0]) for crd, (lines, _, _) in cells.items()} == grid_values(x)
    assert Layout((2, 2, 2))._repr_svg_() is None                  # rank 3: text only
    assert Layout((128, 128))._repr_svg_() is None                 # too large: text only


# --- thread-value pictures ---------------------------------------------------------------
def partition_owners(tiled, which, shape):
    """{coordinate: sorted [(thread, value)]} from each thread's partition of an identity
    tensor: what get_slice(t).partition_* says, independently of the drawing code."""
    from layoutalg.tensor import make_identity_tensor
    ident = make_identity_tensor(shape)
    owners = {}
    for t in range(tiled.size):
        part = getattr(tiled.get_slice(t), f"partition_{which}")(ident)
        for v, crd in enumerate(part.values()):
            owners.setdefault(tuple(int(x) for x in crd), []).append((t, v))
    return {crd: sorted(o) for crd, o in owners.items()}


def check_tv_panel(cells, owners, shape):
    """Every element of the tile is one cell, labelled with its first (thread, value)."""
    M, N = shape
    assert set(cells) == {(m, n) for m in range(M) for n in range(N)} == set(owners)
    for crd, (lines, (fill, _), _) in cells.items():
        t, v = owners[crd][0]
        assert lines == [f"T{t}", f"V{v}"], (crd, lines, owners[crd])
    by_thread = {}
    for crd, (lines, (fill, _), _) in cells.items():
        by_thread.setdefault(int(lines[0][1:]) % 8, set()).add(fill)
    assert all(len(f) == 1 for f in by_thread.values())          # coloured by thread


def tiled_copies():
    import numpy as np
    from layoutalg.atom import (
        SM75_U16x4_LDSM_T, SM75_U32x2_LDSM_N, SM75_U32x4_LDSM_N, SM80_CP_ASYNC_CACHEALWAYS,
        SM80_16x8x16_F32F16F16F32_TN, UniversalCopy,
    )
    from layoutalg.tiled import (
        make_tiled_copy, make_tiled_copy_A, make_tiled_copy_B, make_tiled_mma,
    )
    mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN(), (2, 2))
    return {
        "universal (4,8)x(2,1)": make_tiled_copy(UniversalCopy(32), (4, 8), (2, 1)),
        "cp.async 16B fp16": make_tiled_copy(SM80_CP_ASYNC_CACHEALWAYS(16, np.float16),
                                             Layout((8, 4), (4, 1)), (1, 8)),
        "ldmatrix x4 A": make_tiled_copy_A(SM75_U32x4_LDSM_N(np.float16), mma),
        "ldmatrix x2 B": make_tiled_copy_B(SM75_U32x2_LDSM_N(np.float16), mma),
        "ldmatrix x4 trans B": make_tiled_copy_B(SM75_U16x4_LDSM_T(np.float16), mma),
    }


@pytest.mark.parametrize("name", list(tiled_copies()))
def test_tiled_copy_picture_labels_equal_partitions(name):
    from layoutalg.viz import svg_tv_layout
    tc = tiled_copies()[name]
    panels = parse(svg_tv_layout(tc))
    assert set(panels) == {"S", "D"}
    shape = tuple(tc.tile_size)
    check_tv_panel(panels["S"], partition_owners(tc, "S", shape), shape)
    check_tv_panel(panels["D"], partition_owners(tc, "D", shape), shape)
    check_geometry(panels["S"])


def tiled_mmas():
    from layoutalg.atom import (
        SM80_16x8x8_F16F16F16F16_TN, SM80_16x8x8_F32TF32TF32F32_TN,
        SM80_16x8x16_F32BF16BF16F32_TN, SM90_64xNx16_F32BF16BF16_SS, UniversalFMA,
    )
    from layoutalg.tiled import make_tiled_mma
    return {
        "wgmma m64n16k16 bf16": make_tiled_mma(SM90_64xNx16_F32BF16BF16_SS(16)),
        "fma (4,2)": make_tiled_mma(UniversalFMA(), (4, 2)),
        "m16n8k16 bf16 (2,2)": make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN(), (2, 2)),
        "m16n8k8 f16": make_tiled_mma(SM80_16x8x8_F16F16F16F16_TN()),
        "m16n8k8 tf32 permuted": make_tiled_mma(SM80_16x8x8_F32TF32TF32F32_TN(), (1, 1),
                                                (None, 16, None)),
    }


@pytest.mark.parametrize("name", list(tiled_mmas()))
def test_tiled_mma_picture_labels_equal_partitions(name):
    from layoutalg.viz import svg_tv_layout
    mma = tiled_mmas()[name]
    M, N, K = mma.tile_size
    panels = parse(svg_tv_layout(mma))
    assert set(panels) == {"A", "B", "C"}
    check_tv_panel(panels["A"], partition_owners(mma, "A", (M, K)), (M, K))
    check_tv_panel(panels["B"], partition_owners(mma, "B", (N, K)), (N, K))
    check_tv_panel(panels["C"], partition_owners(mma, "C", (M, N)), (M, N))
    check_geometry(panels["A"])
    check_geometry(panels["B"], transposed=True)          # B (N, K) is drawn K x N
    check_geometry(panels["C"])


def test_mma_atom_fragment_picture_matches_the_ptx_table():
    """mma.m16n8k16 A fragment (PTX ISA, "Matrix Fragments for mma.m16n8k16"): lane l,
    register a_i holds row (l // 4) + 8 * ((i // 2) % 2), column 2 * (l % 4) + i % 2 + 8 * (i // 4)."""
    from layoutalg.atom import SM80_16x8x16_F32F16F16F32_TN
    from layoutalg.tiled import make_tiled_mma
    from layoutalg.viz import svg_tv_layout
    (a,) = [c for p, c in parse(svg_tv_layout(make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN())))
            .items() if p == "A"]
    for lane in range(32):
        for i in range(8):
            crd = (lane // 4 + 8 * ((i // 2) % 2), 2 * (lane % 4) + i % 2 + 8 * (i // 4))
            assert a[crd][0] == [f"T{lane}", f"V{i}"]


def test_tv_picture_of_a_plain_tv_layout_and_bad_input():
    from layoutalg.viz import svg_tv, svg_tv_layout, tv_owners
    tv = Layout((4, 2), (2, 1))                 # 4 threads, 2 consecutive elements each
    (cells,) = parse(svg_tv(tv, (2, 4))).values()
    for (m, n), (lines, _, _) in cells.items():
        idx = m + 2 * n
        assert lines == [f"T{idx // 2}", f"V{idx % 2}"]
    with pytest.raises(LayoutError, match="outside"):
        tv_owners(Layout((4, 2), (2, 1)), (2, 2))
    with pytest.raises(TypeError, match="TiledCopy or a TiledMMA"):
        svg_tv_layout(Layout(4))


def test_repr_svg_of_tiled_copies_and_mmas():
    tc = tiled_copies()["ldmatrix x4 A"]
    mma = tiled_mmas()["m16n8k16 bf16 (2,2)"]
    assert set(parse(tc._repr_svg_())) == {"S", "D"}
    assert set(parse(mma._repr_svg_())) == {"A", "B", "C"}
    from layoutalg.atom import UniversalFMA
    from layoutalg.tiled import make_tiled_mma
    assert make_tiled_mma(UniversalFMA(), (96, 96))._repr_svg_() is None   # too large


# --- timelines ---------------------------------------------------------------------------
def test_timeline_boxes_span_their_intervals():
    from layoutalg.viz import svg_timeline
    lanes = [("copy slot 0", [(0, 3, "k0"), (4, 7, "k2")]),
             ("copy slot 1", [(1, 4, "k1")]),
             ("compute", [(3, 4, "k0"), (4.5, 5.5, "k1", 3)])]
    unit = 10
    root = ET.fromstring(svg_timeline(lanes, title="t", unit=unit))
    boxes = [g for g in root.iter(NS + "g") if g.get("data-lane") is not None]
    drawn = [(g.get("data-lane"), float(g.get("data-start")), float(g.get("data-end")),
              g.find(NS + "text").text, float(g.find(NS + "rect").get("x")),
              float(g.find(NS + "rect").get("width")), float(g.find(NS + "rect").get("y")))
             for g in boxes]
    expected = [(name, iv[0], iv[1], iv[2]) for name, ivs in lanes for iv in ivs]
    assert [d[:4] for d in drawn] == expected
    x0 = drawn[0][4]
    for _, start, end, _, x, w, _ in drawn:
        assert (x, w) == (x0 + start * unit, (end - start) * unit)
    ys = {}
    for name, *_, y in drawn:
        ys.setdefault(name, set()).add(y)
    assert all(len(v) == 1 for v in ys.values()) and len(set.union(*ys.values())) == 3


def test_timeline_bad_input():
    from layoutalg.viz import svg_timeline
    with pytest.raises(ValueError, match="start <= end"):
        svg_timeline([("x", [(3, 1, "a")])])
    with pytest.raises(ValueError, match="not"):
        svg_timeline([("x", [(0, 1)])])
