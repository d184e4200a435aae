"""layoutalg: CuTe's layout algebra in pure Python.

>>> from layoutalg import Layout, composition
>>> print(composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))))
((2,2),3):((24,2),8)
"""

__version__ = "0.1.0"

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

# --- tensors, atoms, tiled copies and MMAs, the CPU executor (issue 3) ---------------------
from .tensor import (
    ArithTuple, ArrayEngine, E, ScaledBasis, SwizzledEngine, Tensor, dice, elem_less,
    layout_offsets, local_partition, local_tile, make_fragment_like, make_identity_layout,
    make_identity_tensor, make_tensor,
)
from .atom import (
    CopyAtom, MMAAtom, SM75_U16x2_LDSM_T, SM75_U16x4_LDSM_T, SM75_U16x8_LDSM_T,
    SM75_U32x1_LDSM_N, SM75_U32x2_LDSM_N, SM75_U32x4_LDSM_N, SM80_16x8x8_F16F16F16F16_TN,
    SM80_16x8x8_F32TF32TF32F32_TN, SM80_16x8x16_F16F16F16F16_TN, SM80_16x8x16_F32BF16BF16F32_TN,
    SM80_16x8x16_F32F16F16F32_TN, SM80_CP_ASYNC_CACHEALWAYS, SM80_CP_ASYNC_CACHEGLOBAL,
    SM90_64xNx8_F32TF32TF32_SS, SM90_64xNx16_F32BF16BF16_SS, SM90_64xNx16_F32F16F16_SS,
    UniversalCopy, UniversalFMA,
)
from .atom.gmma import (
    GmmaDescriptor, Layout_K_INTER_Atom, Layout_K_SW32_Atom, Layout_K_SW64_Atom,
    Layout_K_SW128_Atom, Layout_MN_INTER_Atom, Layout_MN_SW32_Atom, Layout_MN_SW64_Atom,
    Layout_MN_SW128_Atom, gmma_descriptor, gmma_layout_atom,
)
from .tiled import (
    ThrCopy, ThrMMA, TiledCopy, TiledMMA, make_tiled_copy, make_tiled_copy_A,
    make_tiled_copy_B, make_tiled_copy_C, make_tiled_mma, max_vector_bits, tile_size,
)
from .cpu import (
    GemmConfig, RegisterFile, cpu_gemm, moye_config, run_copy, run_mma, sm80_config,
)

__all__ = [name for name in dir() if not name.startswith("_")]

# --- symbolic layouts (sympy is imported only when one of these is called) -------------------
from .symbolic import layout_expr, same_function, symbolic_layout

__all__ = [name for name in dir() if not name.startswith("_")]
