"""gemm.torch: gemm.matmul as torch.ops.layoutalg.matmul (torch.library): its fake
implementation (shapes and types for torch.compile), its checks, and on a GPU its values,
gradients and a torch.compile without graph breaks against torch.mm; gemm.torch.linear's
values and gradients for each activation against torch in float64 (one compiled), and
torch.library.opcheck of both operators; gemm.torch.fp8_linear's checks, values against
float64 of the dequantized operands, torch.compile and opcheck. Skipped, with the reason,
where torch is not installed."""

import re

import pytest

torch = pytest.importorskip("torch", reason="gemm.torch needs torch (not installed here)")
import gemm.torch as gt  # noqa: E402


def _meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, device="meta", dtype=dtype)


@pytest.mark.parametrize("dtype, out_dtype, want", [
    (torch.bfloat16, None, torch.bfloat16), (torch.float16, torch.float32, torch.float32),
    (torch.float32, None, torch.float32)])
def test_fake_implementation_gives_shape_and_type(dtype, out_dtype, want):
    y = gt.matmul(_meta(70, 33, dtype=dtype), _meta(33, 20, dtype=dtype), out_dtype)
    assert tuple(y.shape) == (70, 20) and y.dtype == want and y.device.type == "meta"


@pytest.mark.parametrize("a, b, want", [
    (_meta(5, 70, 33), _meta(5, 33, 20), (5, 70, 20)), (_meta(5, 70, 33), _meta(33, 20),
                                                        (5, 70, 20)),
    (_meta(70, 33), _meta(1, 33, 20), (1, 70, 20)), (_meta(1, 70, 33), _meta(4, 33, 20),
                                                     (4, 70, 20))])
def test_fake_implementation_of_batches(a, b, want):
    assert tuple(gt.matmul(a, b).shape) == want


@pytest.mark.parametrize("a, b, kw, error, match", [
    (_meta(4, 3), _meta(4, 3), {}, ValueError, "inner dimensions"),
    (_meta(1, 2, 4, 3), _meta(3, 2), {}, ValueError, "3-D batches"),
    (_meta(2, 4, 3), _meta(3, 3, 2), {}, ValueError, "must agree"),
    (_meta(4, 3), _meta(3, 2), dict(out_dtype=torch.int32), TypeError, "out_dtype"),
])
def test_fake_implementation_checks(a, b, kw, error, match):
    with pytest.raises(error, match=match):
        gt.matmul(a, b, **kw)


gpu = pytest.mark.gpu


def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_values_gradients_and_compile_against_torch_mm(dtype):
    _cuda()
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(__import__("os").urandom(3),
                                                                   "little"))
    a = torch.randn(77, 130, device="cuda", generator=g).to(dtype).requires_grad_()
    b = torch.randn(130, 65, device="cuda", generator=g).to(dtype).requires_grad_()
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    y = gt.matmul(a, b)
    ref = a.detach().double() @ b.detach().double()
    bound = a.detach().double().abs() @ b.detach().double().abs()
    assert y.dtype == dtype and ((y.double() - ref).abs() <= tol * bound).all()
    w = torch.randn(77, 65, device="cuda", generator=g)
    (y.float() * w).sum().backward()
    ga = w.double() @ b.detach().double().T           # d(sum(w * (a @ b)))/da
    gb = a.detach().double().T @ w.double()
    assert ((a.grad.double() - ga).abs() <= tol * (w.abs().double()
                                                   @ b.detach().double().abs().T)).all()
    assert ((b.grad.double() - gb).abs() <= tol * (a.detach().double().abs().T
                                                   @ w.abs().double())).all()
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, z: gt.matmul(x, z) * 2, fullgraph=True)
    got = compiled(a.detach(), b.detach())
    assert torch.equal(got, gt.matmul(a.detach(), b.detach()) * 2)


@gpu
@pytest.mark.parametrize("a_shape, b_shape", [((3, 40, 24), (3, 24, 16)), ((3, 40, 24), (24, 16)),
                                              ((40, 24), (1, 24, 16))])
def test_batched_values_and_gradients(a_shape, b_shape):
    """Batches and shared operands: values, and the gradients (a shared operand's summed over
    the batch) against float64 autograd of torch.matmul."""
    _cuda()
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(__import__("os").urandom(3),
                                                                   "little"))
    a = torch.randn(a_shape, device="cuda", generator=g).requires_grad_()
    b = torch.randn(b_shape, device="cuda", generator=g).requires_grad_()
    a64, b64 = (x.detach().double().requires_grad_() for x in (a, b))
    y, ref = gt.matmul(a, b), torch.matmul(a64, b64)
    assert y.shape == ref.shape and torch.allclose(y.double(), ref, rtol=1e-4, atol=1e-4)
    w = torch.randn(ref.shape, device="cuda", generator=g)
    (y * w).sum().backward()
    (ref * w.double()).sum().backward()
    assert a.grad.shape == a.shape and b.grad.shape == b.shape
    assert torch.allclose(a.grad.double(), a64.grad, rtol=1e-4, atol=1e-3)
    assert torch.allclose(b.grad.double(), b64.grad, rtol=1e-4, atol=1e-3)


@gpu
def test_opcheck():
    _cuda()
    a = torch.randn(40, 24, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(24, 16, device="cuda", dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.layoutalg.matmul.default, (a, b, None))


def _fresh(*shapes, dtype=torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(__import__("os").urandom(3),
                                                                   "little"))
    return [torch.randn(s, device="cuda", generator=g).to(dtype).requires_grad_()
            for s in shapes]


def _check_step(step, a, b, w):
    """``step(a, b, w)`` returns y = a @ b and back-propagates sum(w * y): y and the
    gradients against float64 (bf16 tolerance, relative to |a| |b|)."""
    y = step(a, b, w)
    a64, b64, w64 = (x.detach().double() for x in (a, b, w))
    assert ((y.double() - a64 @ b64).abs() <= 2e-2 * (a64.abs() @ b64.abs())).all()
    assert ((a.grad.double() - w64 @ b64.T).abs() <= 2e-2 * (w64.abs() @ b64.abs().T)).all()
    assert ((b.grad.double() - a64.T @ w64).abs() <= 2e-2 * (a64.abs().T @ w64.abs())).all()


@gpu
def test_the_operator_called_through_the_dispatcher():
    """torch.ops.layoutalg.matmul itself (its Autograd kernel runs eager calls): values and
    gradients, and without a gradient."""
    _cuda()
    a, b, w = _fresh((70, 48), (48, 40), (70, 40))

    def step(a, b, w):
        y = torch.ops.layoutalg.matmul(a, b)
        assert y.grad_fn is not None
        (y.float() * w.float()).sum().backward()
        return y.detach()
    _check_step(step, a, b, w)
    with torch.no_grad():
        y = torch.ops.layoutalg.matmul(a, b, torch.float32)
    assert y.dtype == torch.float32 and y.grad_fn is None
    assert torch.allclose(y.double(), a.detach().double() @ b.detach().double(), rtol=2e-2,
                          atol=2e-2)


@gpu
def test_compiled_forward_and_backward():
    """torch.compile (fullgraph) of a step with a backward through the operator: the traced
    path below the Autograd key, and the gradients' products."""
    _cuda()
    torch._dynamo.reset()
    a, b, w = _fresh((70, 48), (48, 40), (70, 40))

    @torch.compile(fullgraph=True)
    def loss(a, b, w):
        y = gt.matmul(a, b)
        return (y.float() * w.float()).sum(), y

    def step(a, b, w):
        total, y = loss(a, b, w)
        total.backward()
        return y.detach()
    _check_step(step, a, b, w)


@gpu
def test_a_dispatch_mode_sees_the_operator():
    """Under a torch dispatch mode the eager shortcut is not taken: the mode sees the call."""
    _cuda()
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    a, b, _ = _fresh((16, 32), (32, 8), (1,))
    with torch.no_grad(), Seen() as seen:
        y = gt.matmul(a, b)
        torch.ops.layoutalg.matmul(a, b)
    assert seen.ops == ["layoutalg.matmul.default"] * 2
    assert torch.allclose(y.double(), a.double() @ b.double(), rtol=2e-2, atol=2e-2)


@gpu
@pytest.mark.parametrize("lead", [(), (3,)])
def test_a_weights_gradient_keeps_its_layout(lead):
    """y = x @ w.T with w (N, K) row-major (a linear layer): w.grad comes out row-major, as
    torch.mm's backward gives it (and right: against float64), for a matrix and a batch of
    x sharing w."""
    _cuda()
    x, w, g = _fresh(lead + (70, 48), (40, 48), lead + (70, 40))
    y = gt.matmul(x, w.T)
    (y.float() * g.float()).sum().backward()
    x64, w64, g64 = (t.detach().double() for t in (x, w, g))
    assert w.grad.shape == w.shape and w.grad.is_contiguous()
    want = (g64.transpose(-1, -2) @ x64).reshape(-1, 40, 48).sum(0)
    bound = (g64.abs().transpose(-1, -2) @ x64.abs()).reshape(-1, 40, 48).sum(0)
    assert ((w.grad.double() - want).abs() <= 2e-2 * bound).all()
    assert ((x.grad.double() - g64 @ w64).abs() <= 2e-2 * (g64.abs() @ w64.abs())).all()


@gpu
@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "silu"])
def test_linear_values_and_gradients_against_torch(activation, monkeypatch):
    """gemm.torch.linear against torch's F.linear and activation in float64: the output and
    the gradients of x, weight and bias, eager and (one case) compiled; an eager backward
    runs two products (dX, dW), the pre-activation kept from the forward."""
    _cuda()
    F = torch.nn.functional
    x, w, b = _fresh((3, 50, 64), (72, 64), (72,))
    g = torch.randn(3, 50, 72, device="cuda", dtype=torch.float64)
    act = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu,
           "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[activation]
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    ref = act(F.linear(x64, w64, b64))
    (ref * g).sum().backward()
    run = gt.linear if activation != "gelu" else torch.compile(gt.linear, fullgraph=True)
    y = run(x, w, b, activation)
    products = []
    real = gt.gemm.matmul

    def counted(*args, **kw):
        products.append(args[0].shape)
        return real(*args, **kw)
    monkeypatch.setattr(gt.gemm, "matmul", counted)
    (y.double() * g).sum().backward()
    if activation != "gelu":        # eager: Z was kept, only dX and dW are products
        assert len(products) == 2, products
    assert y.dtype == torch.bfloat16 and y.shape == (3, 50, 72)
    scale = x64.detach().abs().reshape(-1, 64) @ w64.detach().abs().T + 1
    assert ((y.double() - ref.detach()).abs().reshape(-1, 72) <= 3e-2 * scale).all()
    for got, want in ((x.grad, x64.grad), (w.grad, w64.grad), (b.grad, b64.grad)):
        err = (got.double() - want).abs().max() / (want.abs().max() + 1e-6)
        assert err < 3e-2, (activation, err)


@gpu
def test_linear_opcheck():
    _cuda()
    x, w, b = (t.detach() for t in _fresh((40, 64), (24, 64), (24,)))
    torch.library.opcheck(torch.ops.layoutalg.linear.default, (x, w, b, "gelu"))


# --- fp8_linear ----------------------------------------------------------------------------

E4M3 = torch.float8_e4m3fn


def test_fp8_linear_fake_implementation_and_checks():
    w = _meta(20, 33, dtype=E4M3)
    s = torch.ones((), device="meta")
    y = gt.fp8_linear(_meta(2, 7, 33), w, s, _meta(20), "gelu")
    assert tuple(y.shape) == (2, 7, 20) and y.dtype == torch.bfloat16
    assert gt.fp8_linear(_meta(7, 33, dtype=E4M3), w, s, x_scale=s).dtype == torch.bfloat16
    cases = [((_meta(7, 33), _meta(20, 33), s), {}, TypeError, "weight must be float8"),
             ((_meta(7, 33, dtype=E4M3), w, s), {}, ValueError, "needs its x_scale"),
             ((_meta(7, 32), w, s), {}, ValueError, "x (..., K) and weight (N, K)"),
             ((_meta(7, 33), w, s, _meta(19)), {}, ValueError, "bias must be of shape (20,)"),
             ((_meta(7, 33), w, s, None, "tanh"), {}, ValueError, "unknown activation"),
             ((_meta(7, 33), w, torch.ones(3, device="meta")), {}, ValueError,
              "weight_scale must hold one value or one per row of weight (20)"),
             ((_meta(7, 33), w, s.double()), {}, TypeError, "must be a float32 tensor"),
             ((_meta(7, 33, dtype=E4M3), w, s), dict(x_scale=torch.ones(6, device="meta")),
              ValueError, "x_scale must hold one value or one per row of x (7)")]
    for args, kw, error, words in cases:        # (the messages' words, not regexes)
        with pytest.raises(error, match=re.escape(words)):
            gt.fp8_linear(*args, **kw)


def _fp8_reference(x, w8, sw, b, activation, xq=None, sx=None):
    """float64 of the layer, x quantized per row here (torch's own float8 rounding)."""
    x2 = x.reshape(-1, x.shape[-1]) if xq is None else None
    if xq is None:
        amax = x2.abs().amax(dim=1, keepdim=True).float()
        sx = torch.where(amax == 0, 1.0, amax / 448.0)
        xq = (x2.float() / sx).to(E4M3)
    xd = xq.double().reshape(-1, xq.shape[-1]) * sx.double().reshape(-1, 1)
    wd = w8.double() * sw.double().reshape(-1, 1)
    pre = xd @ wd.T + (0 if b is None else b.double())
    ref = pre if activation is None else {
        "relu": torch.relu, "silu": torch.nn.functional.silu,
        "gelu": torch.nn.functional.gelu}[activation](pre)
    k = xq.shape[-1]
    tol = 1.2 * (k / 32 * 2.0 ** -14 + k * 2.0 ** -24) * (xd.abs() @ wd.abs().T) + \
        2.0 ** -8 * ref.abs() + 1e-30
    return ref, tol


@gpu
@pytest.mark.parametrize("lead, x_dtype, per_channel, bias, activation", [
    ((2, 70), torch.bfloat16, True, True, "gelu"),
    ((130,), torch.float16, False, False, "silu"),
    ((64,), E4M3, True, True, "relu"),
])
def test_fp8_linear_against_float64(lead, x_dtype, per_channel, bias, activation):
    """Fresh random layers against float64 of the dequantized operands (x quantized per row
    by the test with torch's rounding, or given in float8 with per-row scales)."""
    _cuda()
    dev = "cuda"
    from gpucase import require_hopper
    require_hopper()
    n, k = 200, 384
    g = torch.Generator(device=dev).manual_seed(len(lead) + n)
    w8 = torch.randn(n, k, device=dev, generator=g).to(E4M3)
    sw = (torch.rand(n, device=dev, generator=g) + 0.5) if per_channel else \
        torch.tensor(0.75, device=dev)
    b = torch.randn(n, device=dev, generator=g).to(torch.bfloat16) if bias else None
    with torch.no_grad():
        if x_dtype == E4M3:
            xq = torch.randn(*lead, k, device=dev, generator=g).to(E4M3)
            sx = torch.rand(*lead, 1, device=dev, generator=g) + 0.5
            got = gt.fp8_linear(xq, w8, sw, b, activation, x_scale=sx)
            ref, tol = _fp8_reference(None, w8, sw, b, activation, xq, sx)
        else:
            x = torch.randn(*lead, k, device=dev, generator=g).to(x_dtype)
            got = gt.fp8_linear(x, w8, sw, b, activation)
            ref, tol = _fp8_reference(x, w8, sw, b, activation)
    want_dtype = torch.bfloat16 if x_dtype == E4M3 else x_dtype
    assert got.shape == (*lead, n) and got.dtype == want_dtype
    diff = (got.double().reshape(-1, n) - ref).abs()
    assert (diff <= tol).all(), float((diff / tol).max())


@gpu
def test_fp8_linear_compiled_opcheck_and_no_gradient():
    _cuda()
    dev = "cuda"
    from gpucase import require_hopper
    require_hopper()
    x = torch.randn(48, 128, device=dev, dtype=torch.bfloat16)
    w8 = torch.randn(64, 128, device=dev).to(E4M3)
    sw, b = torch.rand(64, device=dev) + 0.5, torch.randn(64, device=dev, dtype=torch.bfloat16)
    with torch.no_grad():
        eager = gt.fp8_linear(x, w8, sw, b, "gelu_tanh")
        compiled = torch.compile(lambda *a: gt.fp8_linear(*a, "gelu_tanh"), fullgraph=True)
        assert torch.equal(compiled(x, w8, sw, b), eager)
        # (opcheck's test_schema multiplies the inputs: torch has no mul for float8)
        torch.library.opcheck(torch.ops.layoutalg.fp8_linear.default, (x, w8, sw, b, "relu"),
                              test_utils=("test_faketensor", "test_aot_dispatch_dynamic"))
    with pytest.raises(ValueError, match="for inference"):
        gt.fp8_linear(x.requires_grad_(), w8, sw, b)
