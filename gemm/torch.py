"""``gemm.matmul`` as a torch operator: ``torch.ops.layoutalg.matmul``, registered with
``torch.library`` so that ``torch.compile`` traces it without a graph break (its fake
implementation gives the result's shape and type), and differentiable (the backward runs the
same kernels). On a GPU::

    import torch
    from gemm import torch as gt
    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(256, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = gt.matmul(a, w)                          # bfloat16, as torch.mm
    y.float().sum().backward()                   # a.grad = dy @ w.T, w.grad = a.T @ dy
    f = torch.compile(lambda x, z: gt.matmul(x, z).relu(), fullgraph=True)

The operator takes CUDA tensors ``a`` (M, K) and ``b`` (K, N), or batches of them ((B, M, K),
(B, K, N), a 2-D or batch-of-1 operand shared by every product, as ``torch.matmul``), of
float32 (``gemm.matmul``'s float32 default: 3xTF32 where the Hopper kernel runs it, else the
exact SIMT kernels), bfloat16 or float16 (tensor cores), and an optional
``out_dtype`` (``torch.float32`` for the f32 result of 16-bit inputs); it returns a new
tensor. The gradient of a shared operand is summed over the batch (in float32).

``linear(x, weight, bias=None, activation=None)`` (``torch.ops.layoutalg.linear``) is
``F.linear`` with a fused activation, differentiable and traced the same way (see its
docstring); ``fp8_linear`` (``torch.ops.layoutalg.fp8_linear``) is its FP8 form for
inference, a float8 weight with its scales. Importing this module needs torch (``import
gemm`` does not).
"""

import contextlib
from types import SimpleNamespace

import torch
from torch._library.autograd import make_autograd_impl

import gemm
from gemm.api import _device_guard
from gemm.call.operands import torch_dtype_name, torch_stream
from gemm.epilogue import check_activation, in_torch
from gemm.hopper import hopper_supported
from layoutalg.atom.float8 import float8_max

__all__ = ["matmul", "linear", "fp8_linear"]

_OUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _dtype_name(dtype):
    if dtype is None:
        return None
    if dtype not in _OUT_DTYPES:
        raise TypeError(f"layoutalg::matmul: out_dtype must be one of "
                        f"{', '.join(map(str, _OUT_DTYPES))}, got {dtype}")
    return torch_dtype_name(dtype)


def _fake(a, b, out_dtype=None):
    if a.dim() not in (2, 3) or b.dim() not in (2, 3):
        raise ValueError(f"layoutalg::matmul: a and b must be 2-D matrices or 3-D batches, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"layoutalg::matmul: inner dimensions differ: {tuple(a.shape)} @ "
                         f"{tuple(b.shape)}")
    batch = ()
    if a.dim() == 3 or b.dim() == 3:
        na, nb = (x.shape[0] if x.dim() == 3 else 1 for x in (a, b))
        if na != nb and 1 not in (na, nb):
            raise ValueError(f"layoutalg::matmul: batches of {na} and {nb} matrices: they "
                             "must agree, or one be a single matrix")
        batch = (max(na, nb),)
    _dtype_name(out_dtype)
    return a.new_empty(batch + (a.shape[-2], b.shape[-1]), dtype=out_dtype or a.dtype)


def _unit_stride(x):
    """``x``, or a contiguous copy when neither of its matrices' strides is 1 (e.g. a
    broadcast gradient): the kernels read row- or column-major matrices."""
    return x if 1 in x.stride()[-2:] or x.numel() <= 1 else x.contiguous()


def _grad(x, y, like):
    """``x @ y`` in ``like``'s type and shape: summed over the batch (in float32) where
    ``like`` was shared by every product of a batch."""
    if x.dim() == 3 or y.dim() == 3:
        products = x.shape[0] if x.dim() == 3 else y.shape[0]
        if like.dim() == 2 or (like.shape[0] == 1 and products > 1):
            g = matmul(x, y, out_dtype=torch.float32).sum(0, keepdim=like.dim() == 3)
            return g.to(like.dtype)
    return matmul(x, y, out_dtype=like.dtype)


def _like(x, y, like):
    """:func:`_grad` in ``like``'s orientation too: where ``like``'s matrices are column-major
    (a transposed view, as ``w.T`` of an (N, K) weight), computed as ``(y^T @ x^T)^T``, so the
    gradient has ``like``'s strides and the weight gets a row-major one (as torch.mm's
    backward gives; otherwise autograd's accumulation copies it into the weight's layout)."""
    s = like.stride()
    if s[-2] == 1 and s[-1] != 1:
        t = _grad(y.transpose(-1, -2), x.transpose(-1, -2), like.transpose(-1, -2))
        return t.transpose(-1, -2)
    return _grad(x, y, like)


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    ga = gb = None
    if ctx.needs_input_grad[0]:         # dA = dC @ B^T, in A's type and orientation
        ga = _like(grad.to(b.dtype), b.transpose(-1, -2), a)
    if ctx.needs_input_grad[1]:         # dB = A^T @ dC, in B's type and orientation
        gb = _like(a.transpose(-1, -2), grad.to(a.dtype), b)
    return ga, gb, None


def _direct(a, b, out_dtype=None):
    return gemm.matmul(_unit_stride(a), _unit_stride(b), out_dtype=_dtype_name(out_dtype))


class _Eager(torch.autograd.Function):
    """The operator's autograd for eager calls, without the dispatcher's round trips: the
    same forward and backward (the backward's products through :func:`matmul`). The
    forward takes ``ctx`` itself: a separate ``setup_context`` makes ``apply`` bind the
    arguments through ``inspect`` on every call."""

    @staticmethod
    def forward(ctx, a, b, out_dtype):
        ctx.save_for_backward(a, b)
        return _direct(a, b, out_dtype)

    backward = staticmethod(_backward)


_PLAIN = (torch.Tensor, torch.nn.Parameter)
_function_modes = getattr(torch._C, "_is_torch_function_mode_enabled", lambda: True)
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 1)
_transforms = getattr(torch._C, "_are_functorch_transforms_active", lambda: True)


def _eager(a, b):
    """Whether a call may skip the dispatcher: plain CUDA tensors, outside torch.compile's
    tracing, with no torch function or dispatch mode and no functorch transform active
    (they all see the operator itself)."""
    return (type(a) in _PLAIN and type(b) in _PLAIN and a.is_cuda and b.is_cuda
            and not torch.compiler.is_compiling() and not _function_modes()
            and not _dispatch_modes() and not _transforms())


def _run_eager(a, b, out_dtype=None):
    """An eager call: the kernels, with the operator's autograd when a gradient is needed."""
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return _Eager.apply(a, b, out_dtype)
    return _direct(a, b, out_dtype)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:2])


# The operator, registered with the low-level torch.library.Library rather than
# torch.library.custom_op: custom_op's Autograd kernel always redispatches to a second Python
# kernel (two trips from C++ into Python a call); this one runs eager calls in one. Calls that
# are not eager (torch.compile's tracing, tensor subclasses, modes, transforms) take torch's
# own Autograd kernel of custom ops, the one custom_op registers (torch._library.autograd).
_lib = torch.library.Library("layoutalg", "DEF")
_lib.define("matmul(Tensor a, Tensor b, ScalarType? out_dtype=None) -> Tensor")
_lib.impl("matmul", _direct, "CUDA")
torch.library.register_fake("layoutalg::matmul", _fake, lib=_lib)
_op = torch.ops.layoutalg.matmul.default
_traced = make_autograd_impl(_op, SimpleNamespace(_backward_fn=_backward,
                                                  _setup_context_fn=_setup_context))


def _autograd(keyset, *args):
    """The operator's Autograd kernel (the dispatcher leaves out arguments equal to their
    defaults): an eager call (:func:`_eager`) runs here; any other takes torch's kernel."""
    if _eager(args[0], args[1]):
        return _run_eager(*args)
    return _traced(keyset, *args)


_lib.impl("matmul", _autograd, "Autograd", with_keyset=True)


def matmul(a, b, out_dtype=None):
    """``a @ b`` as ``torch.ops.layoutalg.matmul`` computes it (see the module). An eager
    call on plain CUDA tensors runs the kernels directly (with the operator's autograd when
    a gradient is needed); under ``torch.compile``, torch modes and functorch transforms,
    and for other tensors, the call goes through the operator."""
    if _eager(a, b):
        return _run_eager(a, b, out_dtype)
    return _op(a, b, out_dtype)


# --- linear: F.linear with a fused activation ---------------------------------------------

def _check_linear(x, weight, bias, activation):
    check_activation(activation, "layoutalg::linear")
    if x.dim() < 1 or weight.dim() != 2 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"layoutalg::linear: x (..., K) and weight (N, K) expected, got "
                         f"{tuple(x.shape)} and {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"layoutalg::linear: bias must be of shape ({weight.shape[0]},), got "
                         f"{tuple(bias.shape)}")


def _linear_fake(x, weight, bias=None, activation=None):
    _check_linear(x, weight, bias, activation)
    return x.new_empty(tuple(x.shape[:-1]) + (weight.shape[0],))


def _linear_direct(x, weight, bias=None, activation=None):
    """The forward: ``gemm.matmul`` of the rows of x by weight^T with the bias and the
    activation fused where the Hopper kernel takes them (16-bit operands on a GPU of
    compute capability 9.x), else the product, then the bias and activation in torch."""
    _check_linear(x, weight, bias, activation)
    rows = x.dim() == 2             # (a 2-D x is its own rows: no reshapes, each a torch call)
    x2 = _unit_stride(x if rows else x.reshape(-1, x.shape[-1]))
    fused = (x.dtype in (torch.bfloat16, torch.float16) and x2.shape[0] > 0
             and hopper_supported(x.get_device()))
    if fused:
        y = gemm.matmul(x2, weight.T, bias=bias, activation=activation)
    else:
        y = in_torch(_direct(x2, weight.T) + (0 if bias is None else bias), activation)
    return y if rows else y.reshape(tuple(x.shape[:-1]) + (weight.shape[0],))


def _linear_backward(ctx, grad):
    """dX = dZ W, dW = dZ^T X, db = the sum of dZ's rows, dZ = grad times the activation's
    derivative at the pre-activation Z = x W^T + b: the one the eager forward kept, else
    (a traced call) recomputed."""
    x, weight, bias, *kept = ctx.saved_tensors
    activation = ctx.activation
    k, n = x.shape[-1], weight.shape[0]
    x2 = x.reshape(-1, k)
    dz = grad.reshape(-1, n)
    if activation is not None:
        pre = (kept[0] if kept else linear(x, weight, bias)).reshape(-1, n)
        if activation == "relu":
            dz = torch.ops.aten.threshold_backward(dz, pre, 0)
        elif activation == "silu":
            dz = torch.ops.aten.silu_backward(dz, pre)
        else:
            dz = torch.ops.aten.gelu_backward(dz, pre, approximate="tanh" if
                                              activation == "gelu_tanh" else "none")
    dz = dz.to(x.dtype)
    gx = gw = gb = None
    if ctx.needs_input_grad[0]:
        gx = matmul(dz, weight).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        gw = matmul(dz.T, x2, out_dtype=weight.dtype)
    if bias is not None and ctx.needs_input_grad[2]:
        gb = dz.float().sum(0).to(bias.dtype)
    return gx, gw, gb, None


def _linear_setup_context(ctx, inputs, output, pre=None):
    x, weight, bias, activation = (tuple(inputs) + (None, None))[:4]
    ctx.activation = activation
    ctx.save_for_backward(x, weight, bias, *(() if pre is None else (pre,)))


class _EagerLinear(torch.autograd.Function):
    """linear's autograd for eager calls (as :class:`_Eager` for matmul). With an activation
    the forward keeps the pre-activation Z = x W^T + b for the backward (the product with
    the bias fused, then the activation in torch, as F.linear and an activation do), instead
    of fusing the activation and computing Z again in the backward: one elementwise pass
    in place of a product."""

    @staticmethod
    def forward(ctx, x, weight, bias, activation):
        if activation is None:
            _linear_setup_context(ctx, (x, weight, bias, activation), None)
            return _linear_direct(x, weight, bias, None)
        pre = _linear_direct(x, weight, bias, None)
        _linear_setup_context(ctx, (x, weight, bias, activation), None, pre)
        return in_torch(pre, activation)

    backward = staticmethod(_linear_backward)


_lib.define("linear(Tensor x, Tensor weight, Tensor? bias=None, str? activation=None) -> "
            "Tensor")
_lib.impl("linear", _linear_direct, "CUDA")
torch.library.register_fake("layoutalg::linear", _linear_fake, lib=_lib)
_linear_op = torch.ops.layoutalg.linear.default
_linear_traced = make_autograd_impl(_linear_op, SimpleNamespace(
    _backward_fn=_linear_backward, _setup_context_fn=_linear_setup_context))


def _run_linear(x, weight, bias=None, activation=None):
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                       for t in (x, weight, bias)):
        return _EagerLinear.apply(x, weight, bias, activation)
    return _linear_direct(x, weight, bias, activation)


def _linear_autograd(keyset, *args):
    if _eager(args[0], args[1]) and (len(args) < 3 or args[2] is None
                                     or type(args[2]) in _PLAIN):
        return _run_linear(*args)
    return _linear_traced(keyset, *args)


_lib.impl("linear", _linear_autograd, "Autograd", with_keyset=True)


def linear(x, weight, bias=None, activation=None):
    """``activation(F.linear(x, weight, bias))`` as ``torch.ops.layoutalg.linear``: x (...,
    K), weight (N, K), bias (N,) or None, activation None, "relu", "gelu", "gelu_tanh" or
    "silu" (torch's). The forward fuses the bias and the activation into the Hopper kernel's
    epilogue (16-bit operands, compute capability 9.x; elsewhere they run after the
    product). Where a gradient is needed, an eager call fuses the bias only, applies the
    activation after it (as ``F.gelu(F.linear(...))`` rounds: the pre-activation to the
    output type first) and keeps the pre-activation for the backward; a traced call computes
    it again there (one more product). The backward: the activation's derivative at the
    pre-activation, then dX = dZ W and dW = dZ^T X. Differentiable and traced by
    ``torch.compile`` as :func:`matmul` is."""
    if _eager(x, weight) and (bias is None or type(bias) in _PLAIN):
        return _run_linear(x, weight, bias, activation)
    return _linear_op(x, weight, bias, activation)


# --- fp8_linear: F.linear of a float8 weight with its scales, for inference -----------------

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
E4M3_MAX = float8_max("e4m3")      # float8_e4m3fn's largest finite value, 448


def _scales(scale, rows, name, shape):
    """A float32 scale as scaled_matmul takes it: one value (0-d), or one per row of x or of
    the weight as ``shape`` ((rows, 1) or (1, rows)); TypeError or ValueError naming
    ``name`` otherwise."""
    if not isinstance(scale, torch.Tensor) or scale.dtype != torch.float32:
        raise TypeError(f"layoutalg::fp8_linear: {name} must be a float32 tensor, got "
                        f"{scale.dtype if isinstance(scale, torch.Tensor) else type(scale)}")
    if scale.numel() == 1:
        return scale.reshape(())
    if scale.numel() == rows and scale.dim() >= 1 and scale.shape[-1] in (1, rows):
        return scale if tuple(scale.shape) == shape else scale.reshape(shape)
    raise ValueError(f"layoutalg::fp8_linear: {name} must hold one value or one per "
                     f"{'row of x' if name == 'x_scale' else 'row of weight'} ({rows}), got "
                     f"shape {tuple(scale.shape)}")


def _check_fp8_linear(x, weight, weight_scale, bias, activation, x_scale):
    """The checked call's (weight's scales, x's or None) as scaled_matmul takes them (per
    row: (1, N) and (M, 1))."""
    check_activation(activation, "layoutalg::fp8_linear")
    if weight.dtype not in _FP8:
        raise TypeError(f"layoutalg::fp8_linear: weight must be float8_e4m3fn or "
                        f"float8_e5m2, got {weight.dtype}")
    if x.dim() < 1 or weight.dim() != 2 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"layoutalg::fp8_linear: x (..., K) and weight (N, K) expected, got "
                         f"{tuple(x.shape)} and {tuple(weight.shape)}")
    if x.dtype in _FP8 and x_scale is None:
        raise ValueError("layoutalg::fp8_linear: a float8 x needs its x_scale")
    if x.dtype not in _FP8 + (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(f"layoutalg::fp8_linear: x must be float8, bfloat16, float16 or "
                        f"float32, got {x.dtype}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"layoutalg::fp8_linear: bias must be of shape ({weight.shape[0]},), "
                         f"got {tuple(bias.shape)}")
    n, m = weight.shape[0], x.numel() // max(x.shape[-1], 1)
    sw = _scales(weight_scale, n, "weight_scale", (1, n))
    return sw, None if x_scale is None else _scales(x_scale, m, "x_scale", (m, 1))


def _fp8_out(x):
    return x.dtype if x.dtype in (torch.bfloat16, torch.float16, torch.float32) else \
        torch.bfloat16


def _fp8_linear_fake(x, weight, weight_scale, bias=None, activation=None, x_scale=None,
                     use_fast_accum=True):
    _check_fp8_linear(x, weight, weight_scale, bias, activation, x_scale)
    return x.new_empty(tuple(x.shape[:-1]) + (weight.shape[0],), dtype=_fp8_out(x))


def _to_e4m3(x, scale):
    """x (bfloat16, float16 or float32) divided by ``scale`` and rounded to e4m3, in torch."""
    return (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def quantize_rows(x):
    """(float8_e4m3fn x, float32 scales (M, 1)) of a matrix x: each row scaled so that its
    largest magnitude is e4m3's largest value (``scale = amax / 448.0``; an all-zero row by
    1; NaN where a row holds one), then ``(x.float() / scale).clamp(-448, 448)`` cast to
    e4m3. One kernel (:mod:`gemm.quantize`) for bfloat16 and float16 rows of a multiple of 8
    elements on a GPU, torch's operations otherwise (the same bits)."""
    m, k = x.shape
    if (x.is_cuda and x.dtype in (torch.bfloat16, torch.float16) and k % 8 == 0
            and m * k < 2 ** 32):
        if not (x.is_contiguous() and x.data_ptr() % 16 == 0):
            x = x.clone(memory_format=torch.contiguous_format)      # (a new, aligned one)
        from gemm import quantize               # (numba: imported on the first call)
        q = torch.empty((m, k), device=x.device, dtype=torch.uint8)
        scale = torch.empty((m, 1), device=x.device, dtype=torch.float32)
        device, guard = _device_guard(x)
        with guard or contextlib.nullcontext():
            quantize.quantize_rows(x.data_ptr(), q.data_ptr(), scale.data_ptr(), m, k,
                                   torch_dtype_name(x.dtype), "e4m3", torch_stream(device))
        return q.view(torch.float8_e4m3fn), scale
    amax = x.abs().amax(dim=1, keepdim=True).float()
    scale = torch.where(amax == 0, 1.0, amax / E4M3_MAX)
    return _to_e4m3(x, scale), scale


def _fp8_linear_direct(x, weight, weight_scale, bias=None, activation=None, x_scale=None,
                       use_fast_accum=True):
    """The product on the Hopper kernel (gemm.scaled_matmul) with the bias and the
    activation in its epilogue."""
    sw, sx = _check_fp8_linear(x, weight, weight_scale, bias, activation, x_scale)
    n, k = weight.shape
    x2 = x if x.dim() == 2 else x.reshape(-1, k)
    m = x2.shape[0]
    if x.dtype in _FP8:
        xq = x2.contiguous()
    elif sx is None:                        # dynamic: one scale per row
        xq, sx = quantize_rows(x2)
    else:                                   # static: a given scale per tensor or row
        xq = _to_e4m3(x2, sx)
    if sx.dim() != sw.dim():                # both per tensor, or both per row / column
        sx = sx.reshape(1, 1).expand(m, 1).contiguous() if sx.dim() == 0 else sx
        sw = sw.reshape(1, 1).expand(1, n).contiguous() if sw.dim() == 0 else sw
    out = _fp8_out(x)
    if m == 0:
        return x.new_empty(tuple(x.shape[:-1]) + (n,), dtype=out)
    y = gemm.scaled_matmul(xq, weight.t(), sx, sw, out_dtype=torch_dtype_name(out), bias=bias,
                           activation=activation, use_fast_accum=use_fast_accum)
    return y if x.dim() == 2 else y.reshape(tuple(x.shape[:-1]) + (n,))


_lib.define("fp8_linear(Tensor x, Tensor weight, Tensor weight_scale, Tensor? bias=None, "
            "str? activation=None, Tensor? x_scale=None, bool use_fast_accum=True) -> Tensor")
_lib.impl("fp8_linear", _fp8_linear_direct, "CUDA")
torch.library.register_fake("layoutalg::fp8_linear", _fp8_linear_fake, lib=_lib)
_fp8_linear_op = torch.ops.layoutalg.fp8_linear.default


def fp8_linear(x, weight, weight_scale, bias=None, activation=None, *, x_scale=None,
               use_fast_accum=True):
    """``activation(F.linear(x, weight_scale * weight, bias))`` for inference with a float8
    weight, as ``torch.ops.layoutalg.fp8_linear``: weight (N, K) float8_e4m3fn or
    float8_e5m2 (row-major), ``weight_scale`` float32, one value or one per row of the
    weight ((N,) or (N, 1): per output channel); x (..., K) of bfloat16, float16 or float32,
    quantized to e4m3 here (each row by its largest magnitude, or by ``x_scale``, one value
    or one per row, where given), or already float8 with its ``x_scale``; bias (N,);
    activation None, "relu", "gelu", "gelu_tanh" or "silu". The product runs in FP8 on
    the Hopper kernel (:func:`gemm.scaled_matmul`, compute capability 9.x) with the scales,
    the bias and the activation in its epilogue; ``use_fast_accum`` as there (True: the
    tensor cores accumulate the whole of K, as inference commonly runs). The result has x's
    type (bfloat16 for a float8 x). Not differentiable (a ValueError where a gradient is
    asked for); traced by ``torch.compile``."""
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                       for t in (x, weight, weight_scale, bias, x_scale)):
        raise ValueError("layoutalg::fp8_linear is for inference: it has no gradient; call it "
                         "under torch.no_grad() or with tensors that do not require one")
    if _eager(x, weight) and all(t is None or type(t) in _PLAIN
                                 for t in (weight_scale, bias, x_scale)):
        return _fp8_linear_direct(x, weight, weight_scale, bias, activation, x_scale,
                                  use_fast_accum)
    return _fp8_linear_op(x, weight, weight_scale, bias, activation, x_scale, use_fast_accum)
