"""FP8 quantization of a matrix's rows in one kernel: each row scaled so that its largest
magnitude becomes the format's largest finite value (448 for e4m3, 57344 for e5m2), then
rounded to nearest even, as an FP8 linear layer quantizes its activations
(:func:`gemm.torch.fp8_linear`).

``scale = amax * (1 / top)`` (the reciprocal rounded to float32, as torch divides a tensor by a
Python number: ``amax / 448.0``; 1 for an all-zero row; NaN or infinity where the row holds
one, as torch's ``amax`` gives them) and ``q = fp8(x / scale)`` with IEEE float32 division and
``cvt.rn.satfinite``: the same bits as ``(x.float() / scale).clamp(-top, top).to(fp8)`` in
torch. A block of 128 threads takes one row, reading it twice in 16-byte vectors (eight
16-bit values), first for its largest magnitude (a shuffle and a shared-memory reduction),
then to convert it, writing eight FP8 values at a time; rows of a multiple of 8 elements,
16-byte aligned. On a GPU the kernel is kept as a cubin file (:mod:`gemm.call.binary`) and
launched through the driver (:mod:`gemm.call.launch`); in numba's simulator its twin runs.
"""

from functools import lru_cache

import numpy as np
from numba import cuda, float32

from layoutalg.atom.float8 import float8_max
from . import arch
from ._env import simulator_active
from .call.launch import compiled_launcher

__all__ = ["FORMATS", "TOP", "THREADS", "VECTOR", "quantize_rows"]

FORMATS = ("e4m3", "e5m2")
TOP = {fmt: float8_max(fmt) for fmt in FORMATS}     # the largest finite values
THREADS = 128                   # a block, one row
VECTOR = 8                      # 16-bit elements a thread reads at once (16 bytes)
SIGNATURE = "void(uint16[::1], uint32[::1], float32[::1], uint32)"


@cuda.jit(device=True, inline="always")
def _max_nan(a, b):
    """The larger of a and b, NaN once either is NaN (as torch's amax)."""
    return b if (b > a or b != b) else a


def _kernel_function(dtype, fmt):
    """The kernel for ``dtype`` ("bfloat16", "float16") rows into ``fmt``: ``kernel(X, Q, S,
    cols)`` with X the rows' bits (uint16, rows x cols), Q the FP8 values four to a uint32,
    S the scales (one per row)."""
    pair = arch.bf16x2_to_f32 if dtype == "bfloat16" else arch.f16x2_to_f32
    cvt = arch.cvt_rn_satfinite_e4m3x2_f32 if fmt == "e4m3" else arch.cvt_rn_satfinite_e5m2x2_f32
    inverse = np.float32(1) / np.float32(TOP[fmt])     # torch's a / b for a number b
    warps = THREADS // 32

    def kernel(X, Q, S, cols):
        t = cuda.threadIdx.x
        x0 = cuda.blockIdx.x * cols
        chunks = cols // VECTOR
        amax = float32(0)
        for j in range(t, chunks, THREADS):
            words = arch.ld_v4_b32(X, x0 + j * VECTOR)
            for w in range(4):
                a, b = pair(words[w])
                amax = _max_nan(_max_nan(amax, abs(a)), abs(b))
        amax = _max_nan(amax, arch.shfl_xor_f32(amax, 16))     # (literal lane masks)
        amax = _max_nan(amax, arch.shfl_xor_f32(amax, 8))
        amax = _max_nan(amax, arch.shfl_xor_f32(amax, 4))
        amax = _max_nan(amax, arch.shfl_xor_f32(amax, 2))
        amax = _max_nan(amax, arch.shfl_xor_f32(amax, 1))
        part = cuda.shared.array(warps, float32)
        if t % 32 == 0:
            part[t // 32] = amax
        cuda.syncthreads()
        amax = part[0]
        for w in range(1, warps):
            amax = _max_nan(amax, part[w])
        scale = float32(1) if amax == 0 else amax * inverse
        if t == 0:
            S[cuda.blockIdx.x] = scale
        for j in range(t, chunks, THREADS):
            words = arch.ld_v4_b32(X, x0 + j * VECTOR)
            a, b = pair(words[0])
            c, d = pair(words[1])
            lo = cvt(a / scale, b / scale) | np.uint32(cvt(c / scale, d / scale)) << 16
            a, b = pair(words[2])
            c, d = pair(words[3])
            hi = cvt(a / scale, b / scale) | np.uint32(cvt(c / scale, d / scale)) << 16
            arch.st_v2_b32(Q, (x0 + j * VECTOR) // 4, lo, hi)
    return kernel


@lru_cache(maxsize=None)
def _launcher(dtype, fmt):
    return compiled_launcher("quantize", (dtype, fmt), _kernel_function(dtype, fmt), SIGNATURE,
                             (2, 4, 4), ("uint32",))


def quantize_rows(x, q, scales, rows, cols, dtype, fmt="e4m3", stream=0):
    """Launch the quantization of ``rows`` x ``cols`` row-major 16-bit values of ``dtype``
    ("bfloat16" or "float16") at ``x`` into FP8 ``fmt`` at ``q`` (rows x cols bytes) and
    float32 ``scales`` (one per row). On a GPU ``x``, ``q``, ``scales`` are device
    addresses (x and q 16-byte aligned); in the simulator numpy arrays (uint16, uint32 of
    rows x cols / 4 words, float32). ``cols`` a multiple of 8. ValueError otherwise."""
    if dtype not in ("bfloat16", "float16") or fmt not in FORMATS:
        raise ValueError(f"quantize_rows: bfloat16 or float16 rows into {FORMATS}, not "
                         f"{dtype} into {fmt!r}")
    if cols % VECTOR or rows * cols >= 2 ** 32:
        raise ValueError(f"quantize_rows: rows of a multiple of {VECTOR} elements, fewer than "
                         f"2**32 in all, not {rows} x {cols}")
    if rows == 0:
        return
    if simulator_active():
        arrays = (x, q, scales)
    else:
        arrays = ((x, rows * cols), (q, rows * cols // 4), (scales, rows))
    _launcher(dtype, fmt)((rows, 1, 1), (THREADS, 1, 1), stream, arrays, (cols,))
