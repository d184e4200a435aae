"""A GEMM's epilogue as a second kernel (:mod:`gemm.epilogue`), for the kernels without one of
their own: ``out = activation(out + bias)`` in place on the stored out, after ``gemm.matmul``'s
product (``alpha * A @ B + beta * out``) wherever the Hopper kernel written with gemm.cute,
which fuses it, does not take the call. A 16-bit out is rounded after the product and again
after the epilogue. Block ``z * outer + o`` of the kernel takes one row of matrix ``z`` along
the out's unit-stride mode (its columns for a row-major out, its rows for a column-major one),
its threads striding along it; the bias is read per element along that mode, or once per
block across it. Kept as a cubin file and launched through the driver (:mod:`gemm.call`), as
the other kernels; in numba's simulator its twin runs.

:func:`conversions` (an out's element to and from float32) serves the Hopper kernel's
epilogues too.
"""

from functools import lru_cache

from numba import cuda, float32

from gemm import arch
from gemm.call.launch import compiled_launcher
from gemm.call.operands import kernel_buffer
from gemm.dtypes import STORAGE
from gemm.epilogue import activation_function

__all__ = ["conversions", "apply", "THREADS"]


def conversions(dtype):
    """(float32 -> an element of ``dtype``, the element -> float32) for "float32",
    "bfloat16" or "float16" (16-bit values as uint16 bits): a numba type or an instruction,
    called in a kernel without a device function of its own (each inlined device function of
    an unrolled loop is compiled again)."""
    if dtype == "float32":
        return float32, float32
    if dtype == "bfloat16":
        return arch.cvt_rn_bf16_f32, arch.bf16_to_f32
    return arch.cvt_rn_f16_f32, arch.f16_to_f32


THREADS = 128       # the epilogue kernel's block: one row of the out's unit-stride mode


def _apply_function(out_dtype, bias_dtype, bias_inner, activation):
    """The epilogue kernel ``kernel(C, BIAS, inner, outer, ld, bs)``: block ``z * outer +
    o`` takes elements ``z * bs + o * ld + j`` (j below ``inner``) of C, adds the bias
    (``BIAS[j]`` where ``bias_inner``, else ``BIAS[o]``; none where ``bias_dtype`` is None)
    and applies ``activation`` in float32."""
    store, load = conversions(out_dtype)
    load_bias = conversions(bias_dtype or "float32")[1]
    act = activation_function(activation or "none", fast=out_dtype != "float32")
    has_bias = bias_dtype is not None

    def kernel(C, BIAS, inner, outer, ld, bs):
        row = cuda.blockIdx.x
        z = row // outer
        o = row - z * outer
        base = z * bs + o * ld
        b = float32(0)
        if has_bias and not bias_inner:
            b = load_bias(BIAS[o])
        for j in range(cuda.threadIdx.x, inner, THREADS):
            v = load(C[base + j])
            if has_bias:
                v += load_bias(BIAS[j]) if bias_inner else b
            C[base + j] = store(act(v))
    return kernel


@lru_cache(maxsize=None)
def _launcher(out_dtype, bias_dtype, bias_inner, activation):
    ctype, btype = STORAGE[out_dtype], STORAGE[bias_dtype or out_dtype]
    signature = f"void({ctype}[::1], {btype}[::1], uint32, uint32, uint32, uint32)"
    return compiled_launcher("epilogue", (out_dtype, bias_dtype, bias_inner, activation),
                             _apply_function(out_dtype, bias_dtype, bias_inner, activation),
                             signature, [4 if t == "float32" else 2 for t in (ctype, btype)],
                             ("uint32",) * 4)


def apply(c, bias, bias_rows, activation, stream=0):
    """Launch ``out = activation(out + bias)`` on the stored out ``c`` (an Operand of
    gemm.call.operands: a matrix or a batch, row- or column-major, float32 or 16-bit) with
    ``bias`` (its Operand, one value per row of the out where ``bias_rows``, else per
    column; None: no bias) on ``stream``. Returns the bound launch (``bound((out address,
    bias address), stream)``; None in the simulator or for an empty out)."""
    m, n = c.shape
    if m == 0 or n == 0:
        return None
    rows_inner = c.unit_mode == 0           # column-major: a row of the kernel is a column
    inner, outer = (m, n) if rows_inner else (n, m)
    ld = c.strides[1] if rows_inner else c.strides[0]
    launcher = _launcher(c.dtype, None if bias is None else bias.dtype,
                         bias is not None and bias_rows == rows_inner, activation)
    arrays = (kernel_buffer(c), kernel_buffer(bias if bias is not None else c))
    return launcher((c.batch * outer, 1, 1), (THREADS, 1, 1), stream, arrays,
                    (inner, outer, ld, c.bstride))
