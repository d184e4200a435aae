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


# gelu's fast form (16-bit outs): x * Phi(x), Phi(x) = erfc(a) / 2 for x <= 0 and
# 1 - erfc(a) / 2 above, a = |x| / sqrt(2); erfc(a) / 2 = t * 2 ** (q(t) - b * b) with
# t = 1 / (1 + a / 2), b = a * sqrt(log2(e)) and q a degree-5 polynomial, its coefficients
# below (c0 first), fitted on a in [0, 10] by weighted least squares in float64 to
# log2(erfc(a) / t) + b * b - 1. Evaluated in float32, gelu's relative error stays within
# 3e-5 over [-13, 13] (tests/test_epilogue.py; 0.5 x (1 + erf(x / sqrt 2)) in float32,
# torch's form, loses its digits below x = -5), far below a 16-bit out's rounding (2**-11 for
# float16), with two MUFU instructions (ex2, rcp) and no branch.
_GELU_Q = (-2.82723428, 1.4686918, 0.367049307, 0.68461176, -1.02319921, 0.330091619)
_SQRT_HALF_LOG2E = 0.8493218002880191      # sqrt(log2(e) / 2): b = |x| times it
_HALF_OVER_SQRT_LOG2E = 0.41627730557884884  # t = 1 / (1 + b times it)


@lru_cache(maxsize=None)
def activation_function(activation, fast=False):
    """The float32 device function ``f(x)`` of ``activation`` (None or "none": the
    identity); float32 constants throughout, so nothing is computed in float64. ``fast``
    (for 16-bit outs, whose rounding is far coarser than these forms' errors): gelu_tanh's
    tanh by ``tanh.approx.f32`` (a relative error of about 2**-11; libdevice's otherwise),
    and gelu's erf by ``erfc`` in two MUFU instructions (a relative error within 3e-5, see
    ``_GELU_Q``; libdevice's ``erff`` otherwise)."""
    import math
    from numba import cuda, float32 as F     # to compile: the names above do without numba
    from gemm import arch
    tanh = arch.tanh_approx_f32 if fast else math.tanh
    q0, q1, q2, q3, q4, q5 = (F(c) for c in _GELU_Q)

    name = None if activation == "none" else check_activation(activation,
                                                              "activation_function")

    def identity(x):
        return x

    def relu(x):
        return F(0) if x < F(0) else x          # NaN stays NaN, as torch.relu

    def gelu(x):
        return F(0.5) * x * (F(1) + math.erf(x * F(0.7071067811865476)))

    def gelu_fast(x):
        b = abs(x) * F(_SQRT_HALF_LOG2E)
        t = arch.rcp_approx_f32(F(1) + b * F(_HALF_OVER_SQRT_LOG2E))
        q = ((((q5 * t + q4) * t + q3) * t + q2) * t + q1) * t + q0
        half = t * arch.ex2_approx_f32(q - b * b)           # erfc(|x| / sqrt 2) / 2
        return x * (F(1) - half if x > F(0) else half)

    def gelu_tanh(x):
        inner = F(0.7978845608028654) * (x + F(0.044715) * x * x * x)
        return F(0.5) * x * (F(1) + tanh(inner))

    def silu(x):
        return x / (F(1) + math.exp(-x))

    fn = {None: identity, "relu": relu, "gelu": gelu_fast if fast else gelu,
          "gelu_tanh": gelu_tanh, "silu": silu}
    return cuda.jit(device=True, inline="always")(fn[name])
