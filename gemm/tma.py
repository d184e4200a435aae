"""TMA tensor maps on the host: a :class:`layoutalg.atom.tma.TmaCopy` turned into the 128-byte
``CUtensorMap`` that ``cp.async.bulk.tensor`` reads, through ``cuda.bindings``'
``cuTensorMapEncodeTiled`` (the driver binding numba-cuda installs).

numba has no ``__grid_constant__`` parameters; a kernel reads the map from global memory
instead (``gemm.arch.sm90.tma_load_2d`` takes a device array holding it): copy the 16 words
this returns to the device (any cudaMalloc'd array is 64-byte aligned, as the map must be).
Elements past the global extents are loaded as zeros (``OOB_FILL_NONE``).

:func:`check_encodable` states the driver's rules for the maps made here (tiled, not
interleaved, one element per step); ``tensor_map`` and the simulator's twin
(``gemm.arch.sim_sm90.sim_tensor_map``) refuse what it refuses.
"""

import numpy as np

__all__ = ["tensor_map", "check_encodable"]

_SWIZZLE = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
_DATA = {"bf16": "BFLOAT16", "f16": "FLOAT16", "f32": "FLOAT32", "tf32": "TFLOAT32",
         "u8": "UINT8"}
_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "tf32": 4, "u8": 1}
MAX_RANK = 5
MAX_DIM = 2 ** 32           # globalDim entries: 1 .. 2**32
MAX_STRIDE = 2 ** 40        # globalStrides entries: multiples of 16 below 2**40
MAX_BOX = 256               # boxDim entries: 1 .. 256
MAX_ELEMENT_STRIDE = 8      # elementStrides entries: 1 .. 8
# the driver's measure of a box, floor(boxDim[i] / elementStrides[i]) elements along each
# dimension i, times the element size, must not pass an SM's shared memory: not in the
# driver's documentation; found by probing the driver (580, on H200) with 600 random boxes and
# strides, which this floor matched and the ceiling did not
MAX_BOX_BYTES = 228 * 1024


def check_encodable(dims, strides, box, element_bytes, address=0, swizzle=0,
                    element_strides=None, caller="cuTensorMapEncodeTiled"):
    """ValueError naming the broken rule unless ``cuTensorMapEncodeTiled`` takes these
    parameters for a tiled map without interleave (the CUDA driver API's rules for it):
    ``dims`` (globalDim, contiguous first), ``strides`` (globalStrides: byte strides of dims
    1..), ``box`` (boxDim; missing outer entries are 1), ``element_bytes`` (1, 2, 4 or 8),
    ``address`` (globalAddress), ``swizzle`` (bytes: 0 for none, 32, 64 or 128) and
    ``element_strides`` (None: all 1)."""
    def refuse(rule):
        raise ValueError(f"{caller}: {rule} (globalDim {tuple(dims)}, globalStrides "
                         f"{tuple(strides)}, boxDim {tuple(box)}, {element_bytes}-byte "
                         f"elements, swizzle {swizzle}, address {int(address):#x})")

    def whole(name, values):
        for i, x in enumerate(values):
            if isinstance(x, bool) or int(x) != x:
                refuse(f"{name}[{i}] must be an integer, got {x!r}")

    rank = len(dims)
    if not 1 <= rank <= MAX_RANK:
        refuse(f"tensorRank must be in 1..{MAX_RANK}, got {rank}")
    if len(strides) != rank - 1:
        refuse(f"globalStrides must have tensorRank - 1 = {rank - 1} entries")
    if len(box) > rank:
        refuse(f"boxDim must have at most tensorRank = {rank} entries")
    box = tuple(box) + (1,) * (rank - len(box))
    steps = (1,) * rank if element_strides is None else tuple(element_strides)
    if len(steps) != rank:
        refuse(f"elementStrides must have tensorRank = {rank} entries")
    for name, values in (("globalDim", dims), ("globalStrides", strides), ("boxDim", box),
                         ("elementStrides", steps)):
        whole(name, values)
    if element_bytes not in (1, 2, 4, 8):
        refuse(f"the element size must be 1, 2, 4 or 8 bytes, got {element_bytes}")
    if int(address) % 16:
        refuse("globalAddress must be 16-byte aligned")
    for i, d in enumerate(dims):
        if not 1 <= d <= MAX_DIM:
            refuse(f"globalDim[{i}] must be in [1, 2**32], got {d}")
    for i, s in enumerate(strides):
        if s % 16 or s < 0:
            refuse(f"globalStrides[{i}] must be a multiple of 16 bytes, got {s}")
        if s >= MAX_STRIDE:
            refuse(f"globalStrides[{i}] must be less than 2**40, got {s}")
    for i, b in enumerate(box):
        if not 1 <= b <= MAX_BOX:
            refuse(f"boxDim[{i}] must be in [1, {MAX_BOX}], got {b}")
    for i, e in enumerate(steps):
        if not 1 <= e <= MAX_ELEMENT_STRIDE:
            refuse(f"elementStrides[{i}] must be in [1, {MAX_ELEMENT_STRIDE}], got {e}")
    inner = box[0] * element_bytes
    size = element_bytes
    for b, e in zip(box, steps):
        size *= b // e
    if size > MAX_BOX_BYTES:
        refuse(f"the box must load at most {MAX_BOX_BYTES} bytes, got {size}")
    if inner % 16:
        refuse(f"boxDim[0] * element size must be a multiple of 16 bytes, got {inner}")
    if swizzle not in _SWIZZLE:
        refuse(f"swizzle must be one of {sorted(_SWIZZLE)} bytes, got {swizzle!r}")
    if swizzle and inner > swizzle:
        refuse(f"with a {swizzle}-byte swizzle, boxDim[0] * element size must be at most "
               f"{swizzle} bytes, got {inner}")


def tensor_map(address, copy, value_type):
    """The tensor map of ``copy`` for a global matrix at device ``address`` of
    ``value_type`` ("bf16", "f16", "f32", "tf32" or "u8", which FP8 bits take) as 16 uint64
    words (host numpy array). ``copy.dims`` may add a third, outer dimension (a batch of matrices, ``copy.strides``
    its byte stride too): its boxes hold one matrix's tile.
    ValueError for an unknown type or parameters the driver's rules refuse
    (:func:`check_encodable`); RuntimeError with the driver's error when it refuses them."""
    from cuda.bindings import driver as drv     # not at import: the rules need no driver
    if value_type not in _DATA:
        raise ValueError(f"tensor_map: value_type must be one of {sorted(_DATA)}, "
                         f"got {value_type!r}")
    rank = len(copy.dims)
    box = tuple(copy.box) + (1,) * (rank - len(copy.box))
    check_encodable(copy.dims, copy.strides, box, _BYTES[value_type], address, copy.swizzle,
                    caller="tensor_map")
    u64, u32 = drv.cuuint64_t, drv.cuuint32_t
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
