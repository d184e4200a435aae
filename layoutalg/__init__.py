"""layoutalg: CuTe's layout algebra in pure Python.

>>> from layoutalg import Layout, composition
>>> print(composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))))
((2,2),3):((24,2),8)
"""

from .errors import LayoutError
from .int_tuple import (
    ceil_div, compatible, congruent, crd2crd, crd2idx, idx2crd, prefix_product, product,
    shape_div, slice_, suffix_product, weakly_congruent,
)
from .layout import (
    Layout, append, cosize, depth, flatten, format_layout, group_modes, make_layout,
    make_ordered_layout, make_row_major, prepend, print_layout, rank, select, shape, size,
    slice_and_offset, stride, take,
)
from .swizzle import ComposedLayout, Swizzle
from .algebra import (
    blocked_product, coalesce, complement, composition, downcast, filter, flat_divide,
    flat_product, left_inverse, logical_divide, logical_product, max_common_layout,
    max_common_vector, nullspace, raked_product, recast, right_inverse, tile_to_shape,
    tiled_divide, tiled_product, upcast, zipped_divide, zipped_product,
)

__all__ = [name for name in dir() if not name.startswith("_")]
