"""Swizzles and composed layouts.

A ``Swizzle(bits, base, shift)`` XORs ``bits`` bits taken ``shift`` places above bit
``base + ...`` into the bits starting at ``base`` (CuTe's Swizzle<B, M, S>):

    offset ^ ((offset & yyy_mask) >> shift),   yyy_mask = (2**bits - 1) << (base + max(0, shift))

It is its own inverse. ``ComposedLayout(outer, offset, inner)`` is the function
``c -> outer(offset + inner(c))``; CuTe's shared-memory layouts are
``ComposedLayout(Swizzle(3, 3, 3), 0, Layout(...))``.

>>> sw = Swizzle(2, 0, 3)
>>> [sw(i) for i in (0, 8, 9, 16, 24)]
[0, 9, 8, 18, 27]
"""

from .errors import LayoutError
from .int_tuple import has_none, is_int
from .layout import Layout, _Composed, slice_and_offset
from .viz import repr_svg

__all__ = ["Swizzle", "ComposedLayout"]


class Swizzle:
    """CuTe's Swizzle<bits, base, shift> on integer offsets."""

    __slots__ = ("bits", "base", "shift", "yyy_mask", "zzz_mask")

    def __init__(self, bits, base, shift):
        if not all(is_int(v) for v in (bits, base, shift)):
            raise LayoutError(f"Swizzle({bits!r}, {base!r}, {shift!r}): arguments must be integers")
        if bits < 0 or base < 0:
            raise LayoutError(f"Swizzle({bits}, {base}, {shift}): bits and base must be >= 0")
        if abs(shift) < bits:
            raise LayoutError(f"Swizzle({bits}, {base}, {shift}): |shift| must be >= bits "
                              "(the XOR source and target bits would overlap)")
        if bits + base + abs(shift) > 64:
            raise LayoutError(f"Swizzle({bits}, {base}, {shift}): bits + base + |shift| must be "
                              "at most 64 (the swizzle acts on the bits of an offset)")
        mask = (1 << bits) - 1
        object.__setattr__(self, "bits", int(bits))
        object.__setattr__(self, "base", int(base))
        object.__setattr__(self, "shift", int(shift))
        object.__setattr__(self, "yyy_mask", mask << (base + max(0, shift)))
        object.__setattr__(self, "zzz_mask", mask << (base - min(0, shift)))

    def __setattr__(self, name, value):
        raise AttributeError("Swizzle is immutable")

    def __call__(self, offset):
        if not is_int(offset):
            raise LayoutError(f"{self} applies to integer offsets, not {offset!r}")
        if self.shift >= 0:
            return offset ^ ((offset & self.yyy_mask) >> self.shift)
        return offset ^ ((offset & self.yyy_mask) << -self.shift)

    @property
    def domain_size(self):
        """The swizzle permutes each aligned block of this many offsets."""
        return 1 << (self.bits + self.base + abs(self.shift))

    def __eq__(self, other):
        if not isinstance(other, Swizzle):
            return NotImplemented
        return (self.bits, self.base, self.shift) == (other.bits, other.base, other.shift)

    def __hash__(self):
        return hash(("Swizzle", self.bits, self.base, self.shift))

    def __str__(self):
        return f"Sw<{self.bits},{self.base},{self.shift}>"

    def __repr__(self):
        return f"Swizzle({self.bits}, {self.base}, {self.shift})"


class ComposedLayout(_Composed):
    """``outer o offset o inner``: a layout (or swizzle) applied after an offset and a layout.

    Has the shape, size and modes of ``inner``; the algebra's operations that act on the
    domain (composition with a tiler, the divides, the products, tile_to_shape, slicing)
    act on ``inner`` and keep ``outer`` and ``offset``.
    """

    __slots__ = ("outer", "offset", "inner")

    def __init__(self, outer, offset, inner):
        if not isinstance(outer, (Swizzle, Layout)):
            raise LayoutError(f"ComposedLayout: outer must be a Swizzle or a Layout, not {outer!r}")
        if not isinstance(inner, (Layout, ComposedLayout)):
            raise LayoutError(f"ComposedLayout: inner must be a layout, not {inner!r}")
        if not is_int(offset):
            raise LayoutError(f"ComposedLayout: offset must be an integer, not {offset!r}")
        object.__setattr__(self, "outer", outer)
        object.__setattr__(self, "offset", int(offset))
        object.__setattr__(self, "inner", inner)

    def __setattr__(self, name, value):
        raise AttributeError("ComposedLayout is immutable")

    def with_inner(self, inner):
        return ComposedLayout(self.outer, self.offset, inner)

    shape = property(lambda self: self.inner.shape)
    size = property(lambda self: self.inner.size)
    rank = property(lambda self: self.inner.rank)
    depth = property(lambda self: self.inner.depth)

    @property
    def cosize(self):
        """One past the largest offset; for a swizzle an upper bound, exact when the inner
        layout's codomain is a whole number of swizzle blocks."""
        top = self.offset + self.inner.cosize - 1
        if isinstance(self.outer, Swizzle):
            return (top | ((1 << self.outer.zzz_mask.bit_length()) - 1)) + 1
        return max(self.outer(x) for x in range(top + 1)) + 1

    def __call__(self, *crd):
        c = crd[0] if len(crd) == 1 else crd
        if has_none(c):
            sub, off = slice_and_offset(c, self.inner)
            return ComposedLayout(self.outer, self.offset + off, sub)
        return self.outer(self.offset + self.inner(*crd))

    def __getitem__(self, i):
        return self.with_inner(self.inner[i])

    def __iter__(self):
        return (self[i] for i in range(self.rank))

    def __eq__(self, other):
        if not isinstance(other, ComposedLayout):
            return NotImplemented
        return (self.outer, self.offset, self.inner) == (other.outer, other.offset, other.inner)

    def __hash__(self):
        return hash(("Composed", self.outer, self.offset, self.inner))

    def __str__(self):
        return f"{self.outer} o {self.offset} o {self.inner}"

    def __repr__(self):
        return f"ComposedLayout({self.outer!r}, {self.offset!r}, {self.inner!r})"

    def _repr_svg_(self):
        """The picture a notebook shows (see layoutalg.viz)."""
        return repr_svg(self)
