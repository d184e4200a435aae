"""TMA tensor maps on the host: a :class:`layoutalg.atom.tma.TmaCopy` turned into the 128-byte
``CUtensorMap`` that ``cp.async.bulk.tensor`` reads, through ``cuda.bindings``'
``cuTensorMapEncodeTiled`` (the driver binding numba-cuda installs).

numba has no ``__grid_constant__`` parameters; a kernel reads the map from global memory
instead (``gemm.arch.sm90.tma_load_2d`` takes a device array holding it): copy the 16 words
this returns to the device (any cudaMalloc'd array is 64-byte aligned, as the map must be).
Elements past the global extents are loaded as zeros (``OOB_FILL_NONE``).
"""

import numpy as np

__all__ = ["tensor_map"]

_SWIZZLE = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
_DATA = {"bf16": "BFLOAT16", "f16": "FLOAT16", "f32": "FLOAT32", "tf32": "TFLOAT32"}


def tensor_map(address, copy, value_type):
    """The tensor map of ``copy`` for a global matrix at device ``address`` of
    ``value_type`` ("bf16", "f16", "f32" or "tf32") as 16 uint64 words (host numpy array).
    ``copy.dims`` may add a third, outer dimension (a batch of matrices, ``copy.strides``
    its byte stride too): its boxes hold one matrix's tile.
    ValueError for a misaligned address or an unknown type; RuntimeError with the driver's
    error when the driver refuses the parameters."""
    from cuda.bindings import driver as drv
    if value_type not in _DATA:
        raise ValueError(f"tensor_map: value_type must be one of {sorted(_DATA)}, "
                         f"got {value_type!r}")
    if address % 16:
        raise ValueError(f"tensor_map: the global address {address:#x} is not 16-byte aligned")
    u64, u32 = drv.cuuint64_t, drv.cuuint32_t
    rank = len(copy.dims)
    box = tuple(copy.box) + (1,) * (rank - len(copy.box))
    err, tmap = drv.cuTensorMapEncodeTiled(
        getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_DATA[value_type]}"), rank,
        address, [u64(d) for d in copy.dims], [u64(s) for s in copy.strides],
        [u32(b) for b in box], [u32(1)] * rank,
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLE[copy.swizzle]}"),
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if int(err) != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled refused {copy}: {err!r}")
    return np.array([int(w) for w in tmap.opaque], np.uint64)
