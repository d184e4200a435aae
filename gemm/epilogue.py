"""Fused epilogues: what a GEMM adds to ``alpha * A @ B + beta * C`` before it stores the
result, ``out = activation(alpha * A @ B + beta * C + bias)``: a bias vector broadcast along
the rows (one value per column) or along the columns (one per row), and an activation.

:data:`ACTIVATIONS` names the activations as torch does: ``"relu"``, ``"gelu"`` (the erf
form, ``torch.nn.functional.gelu``), ``"gelu_tanh"`` (``gelu(x, approximate="tanh")``) and
``"silu"``. :func:`activation_function` gives the float32 device function of one, for
kernels to call on each value they store (numba is imported then: the names alone do
without it). Where the product's kernel has no epilogue of its own,
:mod:`gemm.epilogue_kernel` runs it as a second kernel.
"""

from functools import lru_cache

__all__ = ["ACTIVATIONS", "BIASES", "activation_function", "check_activation", "in_torch"]

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
BIASES = ("rows", "columns")        # a kernel's bias: one value per row, or per column


def check_activation(activation, caller):
    """``activation`` if it is None or one of :data:`ACTIVATIONS`; ValueError (TypeError for
    a non-string) naming ``caller`` otherwise."""
    if activation is None:
        return None
    if not isinstance(activation, str):
        raise TypeError(f"{caller}: activation must be None or one of {ACTIVATIONS}, got "
                        f"{activation!r}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"{caller}: unknown activation {activation!r}; one of {ACTIVATIONS}")
    return activation


def in_torch(x, activation):
    """``activation`` (None or one of :data:`ACTIVATIONS`) of the torch tensor ``x``, by
    torch's own functions (for calls whose product has no epilogue on the GPU)."""
    if activation is None:
        return x
    import torch.nn.functional as F     # (a torch caller's: torch is optional here)
    if activation == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    return getattr(F, activation)(x)


@lru_cache(maxsize=None)
def activation_function(activation, fast=False):
    """The float32 device function ``f(x)`` of ``activation`` (None or "none": the
    identity); float32 constants throughout, so nothing is computed in float64. ``fast``:
    gelu_tanh's tanh by ``tanh.approx.f32`` (a relative error of about 2**-11, below a
    16-bit out's rounding; libdevice's otherwise)."""
    import math
    from numba import cuda, float32 as F     # to compile: the names above do without numba
    from gemm import arch
    tanh = arch.tanh_approx_f32 if fast else math.tanh

    name = None if activation == "none" else check_activation(activation,
                                                              "activation_function")

    def identity(x):
        return x

    def relu(x):
        return F(0) if x < F(0) else x          # NaN stays NaN, as torch.relu

    def gelu(x):
        return F(0.5) * x * (F(1) + math.erf(x * F(0.7071067811865476)))

    def gelu_tanh(x):
        inner = F(0.7978845608028654) * (x + F(0.044715) * x * x * x)
        return F(0.5) * x * (F(1) + tanh(inner))

    def silu(x):
        return x / (F(1) + math.exp(-x))

    fn = {None: identity, "relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh, "silu": silu}
    return cuda.jit(device=True, inline="always")(fn[name])
