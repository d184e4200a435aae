"""CuTe's layout algebra: coalesce, composition, complement, inverses, divides, products.

Every function either returns a layout that satisfies its defining post-condition or
raises :class:`LayoutError` naming the condition that fails. Results of pure functions
of hashable layouts are cached (:func:`clear_caches` forgets them).

The functions live in three modules by concept: :mod:`layoutalg.core` (coalesce, filter,
composition, complement, inverses, nullspace), :mod:`layoutalg.products` (the divides, the
products, tile_to_shape) and :mod:`layoutalg.casts` (common vectors, element-size changes);
this module gathers them.

>>> print(composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))))
((2,2),3):((24,2),8)
>>> print(complement(Layout(4, 2), 24))
(2,3):(1,8)
>>> print(logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2)))
((2,2),(2,3)):((4,1),(2,8))
"""

from .casts import downcast, max_common_layout, max_common_vector, recast, upcast
from .core import (
    clear_caches, coalesce, complement, composition, filter, left_inverse, nullspace,
    right_inverse,
)
from .layout import Layout  # noqa: F401  (for the examples above)
from .products import (
    blocked_product, flat_divide, flat_product, logical_divide, logical_product, raked_product,
    tile_to_shape, tiled_divide, tiled_product, zipped_divide, zipped_product,
)

__all__ = [
    "coalesce", "filter", "composition", "complement", "right_inverse", "left_inverse",
    "nullspace", "logical_divide", "zipped_divide", "tiled_divide", "flat_divide",
    "logical_product", "zipped_product", "tiled_product", "flat_product", "blocked_product",
    "raked_product", "tile_to_shape", "max_common_vector", "max_common_layout", "upcast",
    "downcast", "recast", "clear_caches",
]
