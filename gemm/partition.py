"""What a kernel generator reads off layoutalg's partitions: offsets as sympy expressions.

The kernel builders (:mod:`gemm.simt`, :mod:`gemm.tensorcore`) partition tensors whose engines
are sympy expressions of the thread index ``t``, the block indices ``bx``, ``by`` and run-time
strides. Every element a thread touches then has an offset ``base(t, bx, by) + loop terms +
a constant``: :func:`split_offsets` separates the three, so the generated code computes the
base once, the loop terms once per iteration, and adds a constant per element.
"""

import sympy

from layoutalg import Layout, idx2crd, product
from layoutalg.tensor import make_tensor

from .codegen import sym

__all__ = ["T", "BX", "BY", "THREAD", "NOMINAL_TILES", "element_offsets", "element_coords",
           "split_offsets", "global_tensor"]

T, BX, BY = sym("t"), sym("bx"), sym("by")
THREAD = {T, BX, BY}
NOMINAL_TILES = 1 << 12     # extent of a global mode in tiles: any value works (global_tensor)


def _free_coords(layout, n_fixed):
    """The coordinates of the modes before the last ``n_fixed``, in colexicographic order."""
    shape = tuple(layout[i].size for i in range(layout.rank - n_fixed))
    return [idx2crd(i, shape) for i in range(product(shape))]


def element_offsets(tensor, *fixed):
    """{coordinate: sympy offset} of every element of a partition; ``fixed`` pins the trailing
    modes (e.g. the k-tile) to symbols."""
    return {crd: sympy.sympify(tensor[crd + fixed])
            for crd in _free_coords(tensor.layout, len(fixed))}


def element_coords(identity, *fixed):
    """{coordinate: (mn, k)} of a partitioned identity tensor, as sympy expressions."""
    return {crd: tuple(sympy.sympify(x) for x in identity[crd + fixed])
            for crd in _free_coords(identity.layout, len(fixed))}


def split_offsets(offsets, loop_symbols=()):
    """Split offsets into one thread base (the terms with t, bx, by), the loop terms and
    per-element remainders; every element must share the base and loop terms."""
    base = loop = None
    rest = {}
    loop_symbols = set(loop_symbols)
    for crd, off in offsets.items():
        off = sympy.expand(off)
        terms = sympy.Add.make_args(off)
        b = sympy.Add(*[a for a in terms if a.free_symbols & THREAD])
        lp = sympy.Add(*[a for a in terms if a.free_symbols & loop_symbols
                         and not a.free_symbols & THREAD])
        r = off - b - lp
        if base is None:
            base, loop = b, lp
        elif sympy.expand(b - base) != 0 or sympy.expand(lp - loop) != 0:
            raise AssertionError(f"partition offsets do not share a thread base: {off}")
        rest[crd] = r
    return base, loop, rest


def global_tensor(stride_mn, stride_k, extent_mn, extent_k):
    """A global operand as a tensor: engine 0 (offsets are relative to the kernel's 1-D
    buffer), layout (MN, K) with the run-time strides. Only tiles at block coordinates are
    ever taken, whose offsets do not depend on the extents, so nominal extents serve."""
    shape = (extent_mn * NOMINAL_TILES, extent_k * NOMINAL_TILES)
    return make_tensor(sympy.Integer(0), Layout(shape, (stride_mn, stride_k)))
