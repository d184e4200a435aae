"""``gemm.matmul`` as a torch operator: ``torch.ops.layoutalg.matmul``, registered with
``torch.library`` so that ``torch.compile`` traces it without a graph break (its fake
implementation gives the result's shape and type), and differentiable (the backward runs the
same kernels). On a GPU::

    import torch, gemm.torch
    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(256, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = gemm.torch.matmul(a, w)                  # bfloat16, as torch.mm
    y.float().sum().backward()                   # a.grad = dy @ w.T, w.grad = a.T @ dy
    f = torch.compile(lambda x, z: gemm.torch.matmul(x, z).relu(), fullgraph=True)

The operator takes 2-D CUDA tensors ``a`` (M, K) and ``b`` (K, N) of float32 (SIMT kernels,
exact fp32), bfloat16 or float16 (tensor cores), each with one unit stride, and an optional
``out_dtype`` (``torch.float32`` for the f32 result of 16-bit inputs); it returns a new
tensor. Importing this module needs torch (``import gemm`` does not).
"""

from typing import Optional

import torch

import gemm

__all__ = ["matmul"]

_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def _dtype_name(dtype):
    if dtype is None:
        return None
    if dtype not in _NAMES:
        raise TypeError(f"layoutalg::matmul: out_dtype must be one of "
                        f"{', '.join(map(str, _NAMES))}, got {dtype}")
    return _NAMES[dtype]


@torch.library.custom_op("layoutalg::matmul", mutates_args=(), device_types="cuda")
def _matmul(a: torch.Tensor, b: torch.Tensor, out_dtype: Optional[torch.dtype] = None
            ) -> torch.Tensor:
    return gemm.matmul(_unit_stride(a), _unit_stride(b), out_dtype=_dtype_name(out_dtype))


@_matmul.register_fake
def _(a, b, out_dtype=None):
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"layoutalg::matmul: a and b must be 2-D, got {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"layoutalg::matmul: inner dimensions differ: {tuple(a.shape)} @ "
                         f"{tuple(b.shape)}")
    _dtype_name(out_dtype)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or a.dtype)


def _unit_stride(x):
    """``x``, or a contiguous copy when neither of its strides is 1 (e.g. a broadcast
    gradient): the kernels read row- or column-major matrices."""
    return x if x.dim() != 2 or 1 in x.stride() or x.numel() <= 1 else x.contiguous()


def _setup_context(ctx, inputs, output):
    a, b, _ = inputs
    ctx.save_for_backward(a, b)


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    ga = gb = None
    if ctx.needs_input_grad[0]:         # dA = dC @ B^T, in A's type
        ga = _matmul(grad.to(b.dtype), b.T, out_dtype=a.dtype)
    if ctx.needs_input_grad[1]:         # dB = A^T @ dC, in B's type
        gb = _matmul(a.T, grad.to(a.dtype), out_dtype=b.dtype)
    return ga, gb, None


_matmul.register_autograd(_backward, setup_context=_setup_context)


def matmul(a, b, out_dtype=None):
    """``a @ b`` through ``torch.ops.layoutalg.matmul`` (see the module)."""
    return torch.ops.layoutalg.matmul(a, b, out_dtype)
