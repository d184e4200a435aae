"""Pictures of layouts: SVG grids of offsets, shared-memory banks and thread-value layouts.

Every picture is plain SVG text that this module writes with the standard library alone:
no matplotlib, no LaTeX, no external service. SVG is vector graphics, so a 128x64 shared
memory tile stays sharp at any zoom (CuTe's print_latex runs LaTeX out of memory on tiles
that large); it needs no dependency, so ``layoutalg`` stays pure Python; and it is text,
so a changed picture shows up as a readable diff.

The grid follows :func:`~layoutalg.layout.print_layout`: rows are mode 0, columns mode 1
(a rank-1 layout is one row). Each cell is an SVG group ``<g data-crd="i,j">`` holding its
rectangle and its label, so a picture can be checked by parsing it. Styles are
presentation attributes (no CSS, no ids, which would leak between pictures inlined in one
page) and grid lines are one path, so a cell costs about 120 bytes (a 128x64 tile: 1 MB).

>>> from layoutalg import Layout
>>> import xml.etree.ElementTree as ET
>>> svg = svg_layout(Layout((2, 3), (3, 1)))          # (2,3):(3,1)
>>> root = ET.fromstring(svg)
>>> [(g.get("data-crd"), g.find("{*}text").text) for g in root.findall(".//{*}g")
...  if g.get("data-crd")]
[('0,0', '0'), ('0,1', '1'), ('0,2', '2'), ('1,0', '3'), ('1,1', '4'), ('1,2', '5')]
"""

from __future__ import annotations

import colorsys
from html import escape
from math import gcd
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from .errors import LayoutError
from .int_tuple import is_int, product

if TYPE_CHECKING:       # this module draws any layout-like object: it imports no layout class
    from .layout import Layout
    from .types import AnyLayout

__all__ = [
    "Svg", "svg_layout", "svg_swizzle_banks", "svg_tv", "svg_tv_layout", "smem_banks",
    "tv_owners", "side_by_side", "color_of", "svg_timeline",
]

_CELL_H = 16            # cell height; cell width grows with the longest label
_CHAR_W = 6.2           # width of one character of the 10px monospace font
_TITLE_CHAR_W = 6.8     # the same for the 11px bold titles
_PAD = 6                # space between a cell's label and its border
_MARGIN = 4             # space around the whole picture


class Svg(str):
    """SVG text that a notebook shows as a picture (it is a ``str`` in every other way)."""

    def _repr_svg_(self):
        return str(self)

    def __repr__(self):
        return f"<Svg picture, {len(self)} characters>"


# --- colours -------------------------------------------------------------------------
def _make_palette(n, lightness=0.82, saturation=0.6):
    """``n`` colours with hues evenly spaced, visited in a scattered order so that keys
    next to each other get far-apart hues."""
    step = next(s for s in (5, 7, 11, 13, 1) if gcd(s, n) == 1)
    out = []
    for k in range(n):
        hue = ((k * step) % n) / n
        light = lightness if k % 2 == 0 else lightness - 0.1
        r, g, b = colorsys.hls_to_rgb(hue, light, saturation)
        out.append("#%02x%02x%02x" % (round(r * 255), round(g * 255), round(b * 255)))
    return tuple(out)


PALETTE_8 = _make_palette(8)      # values and threads, cycling like CuTe's pictures
PALETTE_32 = _make_palette(32)    # one colour per shared-memory bank


def color_of(key: Any, palette: Sequence[str] = PALETTE_8) -> str:
    """The palette's colour of an integer key (the palette cycles).

    >>> color_of(0) == color_of(8) != color_of(1)
    True
    """
    return palette[key % len(palette)]


# --- the grid of a layout ------------------------------------------------------------
def _grid(L):
    """(rows, cols, at, row_period, col_period) of a rank-1 or rank-2 layout: ``at(i, j)``
    is the value of the cell in row i and column j, the periods the sizes of the first
    sub-mode of a hierarchical mode (drawn as thicker lines)."""
    if not hasattr(L, "rank") or not hasattr(L, "shape") or not callable(L):
        raise TypeError(f"a layout is needed, not {type(L).__name__}: {L!r}")
    if L.rank == 1:
        mode = L.shape[0] if isinstance(L.shape, tuple) else L.shape
        _check_static(L)
        _check_cells(1, product(mode), "a picture of a layout")
        return 1, product(mode), lambda i, j: L(j), 0, _period(mode)
    if L.rank == 2:
        _check_static(L)
        m, n = L.shape
        _check_cells(product(m), product(n), "a picture of a layout")
        return product(m), product(n), lambda i, j: L(i, j), _period(m), _period(n)
    raise LayoutError(f"a picture needs a rank-1 or rank-2 layout, not rank {L.rank}: {L}")


def _check_static(L):
    if not is_int(L.size):
        raise LayoutError(f"a picture needs integer shapes: {L}")


MAX_CELLS = 65536           # a 256 x 256 grid: pictures beyond are megabytes of SVG


def _check_cells(rows, cols, what):
    if rows * cols > MAX_CELLS:
        raise LayoutError(f"{what} of {rows} x {cols} cells is more than {MAX_CELLS}: draw a "
                          "slice or a tile of it (e.g. layout[...] or logical_divide)")


def _period(mode):
    if isinstance(mode, tuple) and len(mode) > 1:
        return product(mode[0])
    return 0


def _value_key(v, seen):
    """An integer colour key of a cell value: the value itself, or, for a value that is not
    an integer (a sympy expression, a coordinate), the order of its first appearance."""
    if is_int(v):
        return int(v)
    return seen.setdefault(str(v), len(seen))


# --- the canvas ----------------------------------------------------------------------
class _Canvas:
    """Collects SVG elements; cells are drawn on grids placed at (x0, y0).

    Styles are presentation attributes, not CSS: a page that inlines several pictures
    would apply every picture's <style> to all of them."""

    def __init__(self):
        self.parts = []
        self.width = 0
        self.height = 0

    def grow(self, x, y):
        self.width = max(self.width, x)
        self.height = max(self.height, y)

    def text(self, x, y, s, attrs=""):
        self.parts.append(f'<text x="{_num(x)}" y="{_num(y)}"{attrs}>{escape(str(s))}</text>')

    def grid(self, x0, y0, rows, cols, cell, *, title=None, axis_labels=True, panel=None,
             row_period=0, col_period=0, flip=False, cell_w=None, label_w=None):
        """Draw a rows x cols grid whose cell (i, j) is ``cell(i, j) -> (lines, fill,
        highlight)``; returns (width, height) of what was drawn. With ``flip`` the grid is
        drawn transposed (cell (i, j) at row j, column i), for B of an MMA drawn as KxN.
        ``cell_w`` and ``label_w`` (the row labels' width) fix sizes that grids placed next
        to each other share."""
        labels = [[cell(i, j) for j in range(cols)] for i in range(rows)]
        nlines = max(len(c[0]) for row in labels for c in row)
        longest = max(len(s) for row in labels for c in row for s in c[0])
        cw = cell_w or _cell_width(longest)
        ch = _CELL_H if nlines == 1 else 12 * nlines + 4
        draw_rows, draw_cols = (cols, rows) if flip else (rows, cols)
        lw = (label_w or _label_width(draw_rows)) if axis_labels else 0
        top = y0 + (18 if title else 0) + (14 if axis_labels else 0)
        left = x0 + lw
        g_attrs = f' data-panel="{escape(panel)}"' if panel else ""
        self.parts.append(f'<g class="grid"{g_attrs}>')
        if title:
            self.text(x0, y0 + 12, title, ' class="title" font-size="11" font-weight="bold"')
        if axis_labels:
            self.parts.append('<g class="axis" fill="#555" text-anchor="middle">')
            for j in range(draw_cols):
                self.text(left + j * cw + cw / 2, top - 4, j)
            self.parts.append('</g><g class="axis" fill="#555" text-anchor="end">')
            for i in range(draw_rows):
                self.text(left - _PAD / 2, top + i * ch + ch / 2 + 4, i)
            self.parts.append("</g>")
        self.parts.append('<g text-anchor="middle">')
        boxes = []
        for i in range(rows):
            for j in range(cols):
                lines, fill, hi = labels[i][j]
                r, c = (j, i) if flip else (i, j)
                x, y = left + c * cw, top + r * ch
                if hi:
                    boxes.append(f"M{_num(x)} {_num(y)}h{cw}v{ch}h-{cw}z")
                mark = ' class="hi" font-weight="bold"' if hi else ""
                self.parts.append(
                    f'<g data-crd="{i},{j}"{mark}><rect x="{_num(x)}" y="{_num(y)}" '
                    f'width="{cw}" height="{ch}" fill="{fill}"/>'
                    f'{_label(x + cw / 2, y, ch, lines)}</g>')
        self.parts.append("</g>")
        self._lines(left, top, draw_rows, draw_cols, cw, ch,
                    col_period if flip else row_period, row_period if flip else col_period)
        if boxes:           # drawn last, so that no neighbouring cell covers the outline
            self.parts.append(f'<path class="hi-box" stroke="#d00" stroke-width="2.5" '
                              f'fill="none" d="{"".join(boxes)}"/>')
        self.parts.append("</g>")
        w, h = lw + draw_cols * cw, top - y0 + draw_rows * ch
        if title:
            w = max(w, round(len(title) * _TITLE_CHAR_W))
        self.grow(x0 + w, y0 + h)
        return w, h

    def place(self, other, x, y):
        """Draw canvas ``other`` with its origin at (x, y)."""
        self.parts.append(f'<g transform="translate({_num(x)},{_num(y)})">')
        self.parts.extend(other.parts)
        self.parts.append("</g>")
        self.grow(x + other.width, y + other.height)

    def _lines(self, left, top, rows, cols, cw, ch, row_period, col_period):
        """The grid lines, and thicker ones between the blocks of a hierarchical mode."""
        thin = [f"M{_num(left)} {_num(top + i * ch)}h{cols * cw}" for i in range(rows + 1)]
        thin += [f"M{_num(left + j * cw)} {_num(top)}v{rows * ch}" for j in range(cols + 1)]
        self.parts.append(f'<path stroke="#333" stroke-width="0.5" fill="none" '
                          f'd="{"".join(thin)}"/>')
        thick = []
        if row_period and row_period < rows:
            thick += [f"M{_num(left)} {_num(top + i * ch)}h{cols * cw}"
                      for i in range(row_period, rows, row_period)]
        if col_period and col_period < cols:
            thick += [f"M{_num(left + j * cw)} {_num(top)}v{rows * ch}"
                      for j in range(col_period, cols, col_period)]
        if thick:
            self.parts.append(f'<path class="block" stroke="#000" stroke-width="2" '
                              f'fill="none" d="{"".join(thick)}"/>')

    def svg(self):
        w, h = self.width + 2 * _MARGIN, self.height + 2 * _MARGIN
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(w)}" height="{_num(h)}" '
                f'viewBox="{-_MARGIN} {-_MARGIN} {_num(w)} {_num(h)}" '
                f'font-family="monospace" font-size="10">'
                f'<rect x="{-_MARGIN}" y="{-_MARGIN}" width="{_num(w)}" height="{_num(h)}" '
                f'fill="#fff"/>')
        return Svg("\n".join([head, *self.parts, "</svg>"]))


def _cell_width(longest_label):
    return max(20, round(longest_label * _CHAR_W + 2 * _PAD))


def _label_width(rows):
    return round(len(str(rows - 1)) * _CHAR_W + _PAD)


def _label(cx, y, ch, lines):
    """The text of a cell whose top is at ``y``: one line, or one tspan per line."""
    if len(lines) == 1:
        return f'<text x="{_num(cx)}" y="{_num(y + ch / 2 + 4)}">{escape(lines[0])}</text>'
    spans = "".join(f'<tspan x="{_num(cx)}" y="{_num(y + 14 + 12 * k)}">{escape(s)}</tspan>'
                    for k, s in enumerate(lines))
    return f"<text>{spans}</text>"


def _num(x):
    """A coordinate as short text: integers without a decimal point."""
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


# --- pictures of layouts -------------------------------------------------------------
def svg_layout(L: AnyLayout, *, color: Optional[Callable[[int], Any]] = None,
               palette: Sequence[str] = PALETTE_8, title: Optional[str] = None,
               axis_labels: bool = True) -> Svg:
    """SVG of a rank-1 or rank-2 layout (or ComposedLayout): each cell labelled with its
    offset and coloured by it.

    ``color(value) -> int`` picks the colour key of a value (default: the value itself, so
    the 8 colours of ``palette`` cycle through consecutive offsets; equal offsets always
    share a colour). ``title`` defaults to the layout's text form. Thick lines separate
    the blocks of a hierarchical mode, e.g. the tiles of a ``logical_divide``.

    >>> from layoutalg import Layout
    >>> svg = svg_layout(Layout((2, 2), (1, 2)))          # (2,2):(1,2)
    >>> svg.startswith("<svg") and svg.count('data-crd=')
    4
    """
    rows, cols, at, rp, cp = _grid(L)
    seen = {}

    def cell(i, j):
        v = at(i, j)
        key = color(v) if color else _value_key(v, seen)
        return [str(v)], color_of(key, palette), False

    c = _Canvas()
    c.grid(0, 0, rows, cols, cell, title=str(L) if title is None else title,
           axis_labels=axis_labels, row_period=rp, col_period=cp)
    return c.svg()


def smem_banks(L: AnyLayout, element_bytes: int, *, banks: int = 32,
               bank_bytes: int = 4) -> List[List[int]]:
    """The shared-memory bank of each element of a rank-1 or rank-2 layout of offsets (in
    elements), as a list of rows: ``(offset * element_bytes // bank_bytes) % banks``.

    >>> from layoutalg import Layout
    >>> smem_banks(Layout((2, 4), (4, 1)), 4, banks=4)
    [[0, 1, 2, 3], [0, 1, 2, 3]]
    """
    _check_bank_args(element_bytes, banks, bank_bytes)
    rows, cols, at, _, _ = _grid(L)
    return [[_bank(at(i, j), element_bytes, banks, bank_bytes) for j in range(cols)]
            for i in range(rows)]


def _check_bank_args(element_bytes, banks, bank_bytes):
    for name, v in (("element_bytes", element_bytes), ("banks", banks),
                    ("bank_bytes", bank_bytes)):
        if not is_int(v) or v <= 0:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")


def _bank(offset, element_bytes, banks, bank_bytes):
    if not is_int(offset):
        raise LayoutError(f"bank of a non-integer offset {offset!r}")
    return (offset * element_bytes // bank_bytes) % banks


def svg_swizzle_banks(L: AnyLayout, element_bytes: int, *, highlight: Sequence[Any] = (),
                      banks: int = 32, bank_bytes: int = 4, title: Optional[str] = None,
                      axis_labels: bool = True) -> Svg:
    """SVG of the shared-memory bank each element of a (possibly swizzled) layout lands in:
    each cell labelled with its bank ``(offset * element_bytes // bank_bytes) % banks`` and
    coloured by it.

    ``highlight`` is a collection of cells ``(row, col)`` (for a rank-1 layout ``(0, i)``
    or ``i``) drawn with a thick red border, e.g. the elements one access phase touches:
    if two of them share a bank in different words, that phase has a bank conflict.

    >>> from layoutalg import Layout, ComposedLayout, Swizzle
    >>> sw = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1)))  # fp16 128B rows
    >>> svg = svg_swizzle_banks(sw, element_bytes=2, highlight=[(i, 0) for i in range(8)])
    >>> svg.count('class="hi"')
    8
    """
    _check_bank_args(element_bytes, banks, bank_bytes)
    rows, cols, at, rp, cp = _grid(L)
    marked = set()
    for h in highlight:
        crd = (0, h) if is_int(h) else tuple(h)
        if len(crd) != 2 or not all(is_int(x) for x in crd):
            raise ValueError(f"highlight: {h!r} is not a (row, col) cell")
        if not (0 <= crd[0] < rows and 0 <= crd[1] < cols):
            raise ValueError(f"highlight: cell {crd} is outside the {rows}x{cols} grid")
        marked.add(crd)
    palette = _make_palette(banks) if banks != 32 else PALETTE_32

    def cell(i, j):
        b = _bank(at(i, j), element_bytes, banks, bank_bytes)
        return [str(b)], palette[b], (i, j) in marked

    if title is None:
        title = f"{L}  banks of {element_bytes}-byte elements"
    c = _Canvas()
    c.grid(0, 0, rows, cols, cell, title=title, axis_labels=axis_labels,
           row_period=rp, col_period=cp)
    return c.svg()


# --- thread-value layouts --------------------------------------------------------------
def _tile_dims(tile, what):
    tile = tuple(tile) if isinstance(tile, (tuple, list)) else (tile,)
    if not all(is_int(x) and x > 0 for x in tile):
        raise ValueError(f"{what}: tile {tile!r} is not a shape of positive integers")
    if len(tile) not in (1, 2):
        raise LayoutError(f"{what}: a picture needs a rank-1 or rank-2 tile, not {tile!r}")
    rows, cols = (1, tile[0]) if len(tile) == 1 else tile
    _check_cells(rows, cols, what)
    return rows, cols


def tv_owners(layout_tv: Layout, tile: Tuple[int, ...]) -> Dict[Tuple[int, int], list]:
    """{(row, col): [(thread, value), ...]} of a TV layout ``(thread, value) -> column-major
    index`` in a ``tile`` (M, N) (or (N,) for a rank-1 tile, one row): who holds each
    element, in increasing (thread, value) order.

    >>> from layoutalg import Layout
    >>> tv_owners(Layout((2, 2), (2, 1)), (2, 2))        # 2 threads, 2 values each
    {(0, 0): [(0, 0)], (1, 0): [(0, 1)], (0, 1): [(1, 0)], (1, 1): [(1, 1)]}
    """
    M, N = _tile_dims(tile, "tv_owners")
    rank1 = not isinstance(tile, (tuple, list)) or len(tile) == 1
    if layout_tv.rank != 2:
        raise LayoutError(f"a TV layout has 2 modes (thread, value), not {layout_tv}")
    owners = {}
    for t in range(layout_tv[0].size):
        for v in range(layout_tv[1].size):
            idx = layout_tv(t, v)
            if not is_int(idx) or not 0 <= idx < M * N:
                raise LayoutError(f"TV layout {layout_tv} maps (T{t}, V{v}) to {idx!r}, "
                                  f"outside the {M * N}-element tile")
            crd = (0, idx) if rank1 else (idx % M, idx // M)
            owners.setdefault(crd, []).append((t, v))
    return owners


def _tv_canvas(layout_tv, tile, title, palette, flip=False, cell_w=None, label_w=None,
               panel=None):
    M, N = _tile_dims(tile, "svg_tv")
    owners = tv_owners(layout_tv, tile)
    counts = {len(o) for o in owners.values()}
    if len(owners) < M * N:
        title += f"  ({M * N - len(owners)} elements held by no thread)"
    elif counts != {1}:
        title += (f"  (each element held by {counts.pop()} threads)" if len(counts) == 1
                  else "  (some elements held by several threads)")

    def cell(i, j):
        if (i, j) not in owners:
            return [".", ""], "#ffffff", False
        t, v = owners[i, j][0]
        return [f"T{t}", f"V{v}"], color_of(t, palette), False

    c = _Canvas()
    c.grid(0, 0, M, N, cell, title=title, flip=flip, cell_w=cell_w, label_w=label_w,
           panel=panel)
    return c


def _tv_label_sizes(tv_layouts):
    """A cell width that fits the labels of every panel, so that panels line up."""
    threads = max(L[0].size for L in tv_layouts)
    values = max(L[1].size for L in tv_layouts)
    return _cell_width(1 + max(len(str(threads - 1)), len(str(values - 1))))


def svg_tv(layout_tv: Layout, tile: Tuple[int, ...], *, title: Optional[str] = None,
           palette: Sequence[str] = PALETTE_8) -> Svg:
    """SVG of a TV layout ``(thread, value) -> column-major index`` in ``tile`` (M, N):
    each element labelled with the thread and value that hold it (``T12``, ``V3``; the
    first of them, by thread then value, when several threads hold it) and coloured by
    thread, like CuTe's print_latex.

    >>> from layoutalg import Layout
    >>> svg = svg_tv(Layout((2, 2), (2, 1)), (2, 2))
    >>> svg.count("<tspan"), "T1" in svg
    (8, True)
    """
    title = f"{layout_tv}  (thread, value) -> tile {tile}" if title is None else title
    return _tv_canvas(layout_tv, tile, title, palette).svg()


def svg_tv_layout(tiled: Any, *, palette: Sequence[str] = PALETTE_8,
                  title: Optional[str] = None) -> Svg:
    """SVG of a TiledCopy or TiledMMA: each element of the tile labelled with the thread and
    value that hold it and coloured by thread, like CuTe's print_svg / print_latex.

    A TiledCopy shows its source and destination TV layouts side by side (they differ
    for ldmatrix: a thread gives a row address, and receives fragments). A TiledMMA shows
    A (MxK) on the left, B (given as NxK, drawn KxN as in CuTe) on top, C (MxN) below B,
    so that rows and columns line up with the product. Cells carry ``data-crd`` with their
    coordinate in the operand's tensor ((n, k) for B) and panels ``data-panel``.

    >>> from layoutalg.atom import UniversalFMA
    >>> from layoutalg.tiled import make_tiled_mma
    >>> svg = svg_tv_layout(make_tiled_mma(UniversalFMA(), (2, 2)))
    >>> [svg.count(f'data-panel="{p}"') for p in "ABC"]
    [1, 1, 1]
    """
    if hasattr(tiled, "get_layoutA_TV") and hasattr(tiled, "tile_size"):
        return _svg_tiled_mma(tiled, palette, title)
    if hasattr(tiled, "get_layoutS_TV") and hasattr(tiled, "tile_size"):
        return _svg_tiled_copy(tiled, palette, title)
    raise TypeError(f"svg_tv_layout needs a TiledCopy or a TiledMMA, not {type(tiled).__name__}")


def _svg_tiled_copy(tiled, palette, title):
    tile = tuple(tiled.tile_size)
    src, dst = tiled.get_layoutS_TV(), tiled.get_layoutD_TV()
    cw = _tv_label_sizes([src, dst])
    if title is None:
        atom = getattr(tiled, "atom", None)
        title = f"{getattr(atom, 'name', 'copy')}: {tiled.size} threads, tile {_shape(tile)}"
    s = _tv_canvas(src, tile, "source", palette, cell_w=cw, panel="S")
    d = _tv_canvas(dst, tile, "destination", palette, cell_w=cw, panel="D")
    c = _Canvas()
    c.text(0, 12, title, ' class="title" font-size="12" font-weight="bold"')
    c.place(s, 0, 22)
    c.place(d, s.width + 24, 22)
    return c.svg()


def _shape(t):
    return "x".join(str(x) for x in t)


def _svg_tiled_mma(tiled, palette, title):
    M, N, K = tiled.tile_size
    A, B, C = tiled.get_layoutA_TV(), tiled.get_layoutB_TV(), tiled.get_layoutC_TV()
    cw = _tv_label_sizes([A, B, C])
    lw = _label_width(max(M, K))
    if title is None:
        atom = getattr(tiled, "atom", None)
        title = f"{getattr(atom, 'name', 'MMA')}: {tiled.size} threads, tile {M}x{N}x{K}"
    a = _tv_canvas(A, (M, K), f"A ({M}x{K})", palette, cell_w=cw, label_w=lw, panel="A")
    b = _tv_canvas(B, (N, K), f"B ({N}x{K}, drawn KxN)", palette, flip=True, cell_w=cw,
                   label_w=lw, panel="B")
    cc = _tv_canvas(C, (M, N), f"C ({M}x{N})", palette, cell_w=cw, label_w=lw, panel="C")
    gap, top = 24, 22
    c = _Canvas()
    c.text(0, 12, title, ' class="title" font-size="12" font-weight="bold"')
    c.place(b, a.width + gap, top)
    c.place(a, 0, top + b.height + gap)
    c.place(cc, a.width + gap, top + b.height + gap)
    return c.svg()


def side_by_side(*pictures: Any, gap: int = 16) -> Svg:
    """One picture of several SVG pictures placed left to right (each a nested ``<svg>``).

    >>> from layoutalg import Layout
    >>> both = side_by_side(svg_layout(Layout(4)), svg_layout(Layout(2)))
    >>> both.count("data-crd=")
    6
    """
    x, height, parts = 0, 0, []
    for p in pictures:
        head, _, rest = str(p).partition(">")
        w = float(_attr(head, "width"))
        h = float(_attr(head, "height"))
        parts.append(f'{head} x="{_num(x)}" y="0">{rest}')
        x += w + gap
        height = max(height, h)
    width = max(0, x - gap)
    return Svg(f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(width)}" '
               f'height="{_num(height)}" viewBox="0 0 {_num(width)} {_num(height)}">\n'
               + "\n".join(parts) + "\n</svg>")


def _attr(tag, name):
    """The value of attribute ``name`` in an opening tag written by this module."""
    key = f' {name}="'
    start = tag.index(key) + len(key)
    return tag[start:tag.index('"', start)]


# --- timelines ------------------------------------------------------------------------
def svg_timeline(lanes: Any, *, title: Optional[str] = None, unit: int = 24,
                 time_label: str = "time") -> Svg:
    """SVG of a timeline: one row per lane, each interval a box from its start to its end.

    ``lanes``: a sequence of ``(name, intervals)``, an interval ``(start, end, label)`` or
    ``(start, end, label, key)`` in time units (``key``, an int, picks the colour; default
    the interval's index in its lane). ``unit``: pixels per time unit. Each box is a group
    ``<g data-lane=... data-start=... data-end=...>`` holding its rectangle and its label,
    so a picture can be checked by parsing it (as the grids' ``data-crd``).

    >>> svg = svg_timeline([("copy", [(0, 2, "A0"), (1, 3, "A1")]), ("mma", [(2, 3, "0")])])
    >>> svg.count("data-lane="), 'data-start="1" data-end="3"' in svg
    (3, True)
    """
    rows = []
    for lane in lanes:
        name, intervals = lane
        boxes = []
        for k, iv in enumerate(intervals):
            if len(iv) not in (3, 4):
                raise ValueError(f"svg_timeline: lane {name!r}: interval {iv!r} is not "
                                 f"(start, end, label[, key])")
            start, end, label = iv[:3]
            key = iv[3] if len(iv) == 4 else k
            if not (isinstance(start, (int, float)) and isinstance(end, (int, float))
                    and 0 <= start <= end):
                raise ValueError(f"svg_timeline: lane {name!r}: interval {iv!r} needs "
                                 f"0 <= start <= end")
            boxes.append((start, end, str(label), key))
        rows.append((str(name), boxes))
    end = max([b[1] for _, boxes in rows for b in boxes] + [1])
    lw = round(max([len(n) for n, _ in rows] + [1]) * _CHAR_W + _PAD)
    top = 18 if title else 0
    c = _Canvas()
    if title:
        c.text(0, 12, title, ' class="title" font-size="11" font-weight="bold"')
    ticks = max(1, round(end / 20))                  # about 20 tick labels at most
    axis = ['<g class="axis" fill="#555" text-anchor="middle">']
    for t in range(0, int(end) + 1, ticks):
        axis.append(f'<text x="{_num(lw + t * unit)}" y="{top + 10}">{t}</text>')
    axis.append("</g>")
    c.parts.extend(axis)
    y0 = top + 14
    grid = "".join(f"M{_num(lw + t * unit)} {y0}v{len(rows) * (_CELL_H + 4)}"
                   for t in range(0, int(end) + 1, ticks))
    c.parts.append(f'<path stroke="#ddd" stroke-width="0.5" fill="none" d="{grid}"/>')
    for r, (name, boxes) in enumerate(rows):
        y = y0 + r * (_CELL_H + 4)
        c.text(lw - _PAD / 2, y + _CELL_H / 2 + 4, name, ' text-anchor="end" fill="#333"')
        c.parts.append('<g text-anchor="middle">')
        for start, stop, label, key in boxes:
            x, w = lw + start * unit, (stop - start) * unit
            c.parts.append(
                f'<g data-lane="{escape(name)}" data-start="{_num(start)}" '
                f'data-end="{_num(stop)}"><rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" '
                f'height="{_CELL_H}" fill="{color_of(key)}" stroke="#333" stroke-width="0.5"/>'
                f'<text x="{_num(x + w / 2)}" y="{_num(y + _CELL_H / 2 + 4)}">'
                f'{escape(label)}</text></g>')
        c.parts.append("</g>")
    width = lw + end * unit
    c.grow(max(width, round(len(title or "") * _TITLE_CHAR_W)),
           y0 + len(rows) * (_CELL_H + 4) + 10)
    c.text(width, y0 + len(rows) * (_CELL_H + 4) + 8, time_label,
           ' text-anchor="end" fill="#555"')
    return c.svg()


# --- notebook hooks ------------------------------------------------------------------
REPR_MAX_CELLS = 8192   # a notebook shows larger layouts as text only


def repr_svg(obj):
    """The SVG a notebook shows for ``obj`` (the ``_repr_svg_`` of Layout, ComposedLayout,
    TiledCopy and TiledMMA), or None, which makes the notebook fall back to the text form:
    for a layout of rank above 2, non-integer shapes, or more than ``REPR_MAX_CELLS`` cells.

    >>> from layoutalg import Layout
    >>> repr_svg(Layout((2, 2, 2))) is None, repr_svg(Layout(4))[:4]
    (True, '<svg')
    """
    try:
        if hasattr(obj, "get_layoutA_TV"):                       # a TiledMMA
            M, N, K = obj.tile_size
            cells = M * K + N * K + M * N
        elif hasattr(obj, "tidfrg"):                             # a TiledCopy
            cells = 2 * product(tuple(obj.tile_size))
        elif obj.rank > 2 or not is_int(obj.size):
            return None
        else:
            cells = obj.size
        if cells > REPR_MAX_CELLS:
            return None
        if hasattr(obj, "tile_size"):
            return svg_tv_layout(obj)
        return svg_layout(obj)
    except LayoutError:
        return None
