"""``matmul``: ``out = alpha * A @ B + beta * out`` on CUDA arrays with the generated kernels.

>>> import numpy as np, gemm                                  # doctest: +SKIP
>>> from numba import cuda                                    # doctest: +SKIP
>>> A = cuda.to_device(np.ones((3, 5), np.float32))           # doctest: +SKIP
>>> gemm.matmul(A, A.T).copy_to_host()[0, 0]                  # doctest: +SKIP
5.0
"""

from gemm import simt
from gemm._env import simulator_active
from gemm.launch import Launcher
from gemm.operands import (check_same_device, check_spans, current_stream, kernel_buffer,
                           operand, output_operand)

__all__ = ["matmul", "KERNELS", "kernel_config"]

# Named kernels: MoYe's two pipelines in the seed's 128x128x8 configuration, and a tuned
# double-buffered variant (benchmarks/simt_variants.py): 128x128x16 tiles, threads owning runs
# of 4 M and 4 N values (128-bit shared loads), 2 blocks per SM.
KERNELS = {
    "prefetch": simt.SimtConfig(pipeline="prefetch"),
    "double_buffer": simt.SimtConfig(pipeline="double_buffer"),
    "tuned": simt.SimtConfig(pipeline="double_buffer", bK=16, pad=4, vector_mn=4, min_blocks=2),
}
DEFAULT_KERNEL = "tuned"


def kernel_config(kernel):
    """The SimtConfig named or given by ``kernel`` (None: the default)."""
    if kernel is None:
        kernel = DEFAULT_KERNEL
    if isinstance(kernel, simt.SimtConfig):
        return kernel
    if isinstance(kernel, str) and kernel in KERNELS:
        return KERNELS[kernel]
    raise ValueError(f"matmul: unknown kernel {kernel!r}; use one of {sorted(KERNELS)} or a "
                     "gemm.simt.SimtConfig")


_launchers = {}
_SCALARS = ("uint32",) * 9 + ("float32",) * 2


def _launcher(kernel, a_unit, b_unit, vec_a, vec_b):
    """(config, Launcher) for a kernel name or config and the operands' majors and vectors."""
    key = (kernel, a_unit, b_unit, vec_a, vec_b)
    entry = _launchers.get(key)
    if entry is None:
        cfg = kernel_config(kernel)
        va = simt.copy_vector(cfg, a_unit, cfg.bM, vec_a)
        vb = simt.copy_vector(cfg, b_unit, cfg.bN, vec_b)
        dispatcher = simt.simt_kernel(cfg, a_unit, b_unit, va, vb)
        entry = _launchers[key] = (cfg, Launcher(dispatcher, 3, 4, _SCALARS, free_scalars=2))
    return entry


def _vector(op):
    """Elements per cp.async the global operand allows: its address and leading dimension
    must be aligned to the vector (16, 8 or 4 bytes)."""
    ld = op.strides[1 - op.unit_mode]
    for v in (4, 2):
        if op.ptr % (4 * v) == 0 and ld % v == 0:
            return v
    return 1


# The torch fast path: a plan (a bound launch) per kind of call, keyed by what decides every
# check and every launch parameter: each tensor's shape, strides, dtype, device and address
# modulo 16 (the copy widths). A call that matches a plan skips the checks it already passed.
_plans = {}
_torch_tensor = None      # torch.Tensor, once a first call has brought torch tensors
_torch_stream = None      # torch's current raw stream of a device, then too


def _torch_key(x, ptr):
    return x.shape, x.stride(), x.dtype, x.get_device(), ptr & 15


def matmul(A, B, out=None, *, alpha=1.0, beta=0.0, kernel=None):
    """``out = alpha * A @ B + beta * out`` for an (M, K) ``A`` and a (K, N) ``B``.

    A and B are CUDA arrays (numba device arrays, CuPy arrays, torch tensors) of float32, each
    row- or column-major (a transposed view is fine). ``out`` (M, N) float32 on the same
    device, any strides with one unit stride; when None a new row-major array of A's kind is
    made and ``beta`` must be 0. Returns ``out``. ``kernel``: a name from ``KERNELS`` or a
    ``SimtConfig``.
    """
    if type(A) is _torch_tensor and type(B) is _torch_tensor and type(out) is _torch_tensor:
        ptrs = A.data_ptr(), B.data_ptr(), out.data_ptr()
        key = (kernel, _torch_key(A, ptrs[0]), _torch_key(B, ptrs[1]), _torch_key(out, ptrs[2]))
        try:
            plan = _plans.get(key)
        except TypeError:           # an unhashable kernel: _matmul says what is wrong
            plan = None
        if plan is not None:
            plan(ptrs, _torch_stream(key[1][3]), alpha, beta)
            return out
    return _matmul(A, B, out, alpha, beta, kernel)


def _matmul(A, B, out, alpha, beta, kernel):
    """matmul with every check. On a GPU, for torch tensors, the launch it made is kept under
    the fast path's key."""
    global _torch_tensor, _torch_stream
    kernel_config(kernel)
    sim = simulator_active()
    a, b = operand(A, "A", sim), operand(B, "B", sim)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"matmul: inner dimensions differ: A is {a.shape}, B is {b.shape}")
    if a.dtype != "float32" or b.dtype != "float32":
        name, op = ("A", a) if a.dtype != "float32" else ("B", b)
        raise TypeError(f"matmul: {name} has dtype {op.dtype}; supported: float32")
    out, c = output_operand("matmul", out, a, (m, n), sim, beta=beta)
    named = (("A", a), ("B", b), ("out", c))
    check_same_device("matmul", named)
    check_spans("matmul", named)
    # The kernels see MoYe's operands: A as (M, K), B as (N, K), C as (M, N).
    b_unit = 1 - b.unit_mode
    cfg, launch = _launcher(kernel, a.unit_mode, b_unit, _vector(a), _vector(b))
    (sam, sak), (sbk, sbn), (scm, scn) = a.strides, b.strides, c.strides
    grid = ((m + cfg.bM - 1) // cfg.bM, (n + cfg.bN - 1) // cfg.bN, 1)
    buffers = (kernel_buffer(a), kernel_buffer(b), kernel_buffer(c))
    scalars = (m, n, k, sam, sak, sbn, sbk, scm, scn, alpha, beta)
    plan = launch(grid, (cfg.threads, 1, 1), 0 if sim else current_stream(a), buffers, scalars)
    if sim or not (a.kind == b.kind == c.kind == "torch" and type(a.obj).__module__ == "torch"):
        return out
    import torch
    stream_of = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if stream_of is not None:       # the fast path needs torch's raw stream handle
        _torch_tensor, _torch_stream = type(a.obj), stream_of
        key = (kernel,) + tuple(_torch_key(op.obj, op.ptr) for op in (a, b, c))
        if len(_plans) >= Launcher.MAX_BOUND:
            _plans.clear()
        _plans[key] = plan
    return out
