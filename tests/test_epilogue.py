"""gemm.epilogue: the activations' names are checked; their device functions compute in
float32 (no float64 instruction in the PTX), the tanh form takes ``tanh.approx.f32`` and the
erf form its fast erfc only when asked (16-bit outs; the latter within 3e-5 of float64), and
as Python functions they match the float64 definitions of tests/activations64.py on values
across their range. The epilogue as a second kernel (``gemm.epilogue_kernel``, after kernels
without one of their own) in numba's simulator (this file as a script in a subprocess):
``gemm.matmul(..., bias=, activation=)`` on the SIMT kernel (float32), the SM80 tensor-core
kernel (bf16 bits) and a batch, row- and column-major outs, a bias per column and per row,
beta, K = 0, the out poisoned where beta is 0, against float64; its PTX without float64 or
local memory."""

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:      # run as a script by the simulator test
        sys.path.insert(0, str(p))

from activations64 import ACTIVATIONS64  # noqa: E402
from gemm.epilogue import ACTIVATIONS, activation_function, check_activation  # noqa: E402


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations_match_their_float64_definitions(name):
    fn = activation_function(name).py_func
    for x in np.linspace(-8, 8, 161, dtype=np.float32):
        got, want = float(fn(np.float32(x))), float(ACTIVATIONS64[name](float(x)))
        assert abs(got - want) <= 1e-6 * max(1.0, abs(want)), (name, x, got, want)
    assert math.isnan(float(activation_function("relu").py_func(np.float32("nan"))))


def test_fast_gelu_is_within_3e_5_of_erfc(monkeypatch):
    """gelu's fast form (16-bit outs: ``erfc`` by a fitted polynomial, ``ex2`` and ``rcp``)
    in float32 against x Phi(x) by float64's erfc, relative to the value, over the range
    where it is a normal float32 (beyond, both underflow); inf, NaN and 0 as torch's."""
    from gemm import arch
    from gemm.arch import sim
    for name in ("ex2_approx_f32", "rcp_approx_f32"):      # their exact float32 twins
        monkeypatch.setattr(arch, name, getattr(sim, name))
    fn = activation_function("gelu", fast=True).py_func
    worst = 0.0
    for x in np.linspace(-13, 13, 5201, dtype=np.float32):
        want = float(x) * 0.5 * math.erfc(-float(x) / math.sqrt(2))
        got = float(fn(np.float32(x)))
        worst = max(worst, abs(got - want) / max(abs(want), 1e-300))
    assert 1e-7 < worst <= 3e-5, worst
    with np.errstate(invalid="ignore"):     # (-inf times 0)
        assert float(fn(np.float32("inf"))) == math.inf and float(fn(np.float32(0))) == 0
        assert math.isnan(fn(np.float32("nan"))) and math.isnan(fn(np.float32("-inf")))


@pytest.mark.parametrize("name, fast", [(n, False) for n in ACTIVATIONS] +
                         [("gelu_tanh", True), ("gelu", True)])
def test_activations_compile_to_float32(name, fast):
    act = activation_function(name, fast)

    def kernel(x):
        x[0] = act(x[0])

    ptx = cuda.compile_ptx(kernel, "void(float32[::1])", cc=(9, 0))[0]
    assert ".f64" not in ptx
    assert ("tanh.approx.f32" in ptx) == (fast and name == "gelu_tanh")
    if name == "gelu":      # libdevice's erff, or the fast form's rcp
        assert ("rcp.approx.ftz.f32" in ptx) == fast


def test_bad_activations_are_refused():
    assert check_activation(None, "f") is None and check_activation("silu", "f") == "silu"
    with pytest.raises(ValueError, match="f: unknown activation 'swish'"):
        check_activation("swish", "f")
    with pytest.raises(TypeError, match="f: activation must be None or one of"):
        check_activation(len, "f")


# --- the epilogue as a second kernel --------------------------------------------------------

# (kernel, m, n, k, batch, out_dtype, bias: None / "columns" / "rows", activation, column-major
# out, beta)
UNFUSED = [
    ("tuned", 20, 24, 16, None, "float32", "columns", "gelu", False, 0.0),
    ("tuned", 20, 24, 16, 2, "float32", "rows", "relu", False, 0.5),
    ("sm80", 24, 20, 32, None, "bfloat16", "rows", "silu", True, 0.0),
    ("tuned", 12, 8, 0, None, "float32", "columns", "gelu_tanh", False, 1.0),
]


def _bf16(x):
    """(bf16 bits, their float64 values) of float32 ``x``, rounded to nearest even."""
    u = x.astype(np.float32).view(np.uint32)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def unfused_case(kernel, m, n, k, batch, out_dtype, bias, activation, col_out, beta, seed):
    """Error ratio (<= 1 passes) of ``gemm.matmul`` with a bias and an activation on a kernel
    without an epilogue of its own, against float64."""
    import gemm
    from gemm.tensorcore import TensorCoreConfig
    rng = np.random.default_rng(seed)
    lead = (batch,) if batch else ()
    a, b = rng.standard_normal(lead + (m, k)), rng.standard_normal((k, n))
    c0 = rng.standard_normal(lead + (m, n))
    vec = rng.standard_normal(n if bias == "columns" else (m, 1)).astype(np.float32)
    if kernel == "sm80":            # bf16 bits through a config; the bias in bf16 bits too
        (a, a64), (b, b64), (vec, v64) = _bf16(a), _bf16(b), _bf16(vec)
        kernel = TensorCoreConfig(64, 64, 32, (2, 2), stages=2)
    else:
        a, b = a.astype(np.float32), b.astype(np.float32)
        a64, b64, v64 = a.astype(np.float64), b.astype(np.float64), vec.astype(np.float64)
    out = (c0 if beta else np.full(c0.shape, np.nan)).astype(np.float32)
    if out_dtype == "bfloat16":
        out = _bf16(out)[0]
    d = cuda.to_device
    dout = d(np.asfortranarray(out) if col_out else out)    # (2-D where column-major)
    got = gemm.matmul(d(a), d(b), out=dout, beta=beta, kernel=kernel, bias=d(vec),
                      activation=activation, out_dtype=out_dtype).copy_to_host()
    if out_dtype == "bfloat16":
        got = (got.astype(np.uint32) << 16).view(np.float32)
    got = got.astype(np.float64)
    pre = a64 @ b64 + beta * c0 + v64
    ref = ACTIVATIONS64[activation](pre)
    # the product rounded to the out's type, then the epilogue's result (slopes below 1.2)
    size = np.abs(a64) @ np.abs(b64) + abs(beta) * np.abs(c0)
    rounding = 2.0 ** -8 if out_dtype == "bfloat16" else 2.0 ** -23
    tol = 1.2 * (1e-5 * (size + np.abs(v64)) + rounding * size) + rounding * np.abs(ref) + 1e-30
    return float(np.nan_to_num(np.abs(got - ref) / tol, nan=np.inf).max())


def test_epilogue_after_kernels_without_one_matches_float64_in_the_simulator():
    from simcase import simulator_report
    seed = int.from_bytes(os.urandom(3), "little")
    ratios = simulator_report(__file__, seed)
    assert len(ratios) == len(UNFUSED) and all(r <= 1 for r in ratios), (seed, ratios)


def test_epilogue_kernel_compiles_to_float32_without_local_memory():
    from gemm.epilogue_kernel import _apply_function
    ptx = cuda.compile_ptx(_apply_function("bfloat16", "float32", False, "gelu"),
                           "void(uint16[::1], float32[::1], uint32, uint32, uint32, uint32)",
                           cc=(9, 0))[0]
    assert ".f64" not in ptx and ".local" not in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, dtype, col_out", [("sm80", "bfloat16", False),
                                                   ("tuned", "float32", True)])
def test_epilogue_after_kernels_without_one_on_a_gpu(kernel, dtype, col_out):
    """As in the simulator, on a GPU with torch tensors: the call's values against float64,
    then a second call with new operands through the kept plan."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    import gemm
    dt = getattr(torch, dtype)
    for seed in range(2):
        g = torch.Generator(device="cuda").manual_seed(seed)
        x = torch.randn(300, 200, device="cuda", generator=g).to(dt)
        w = torch.randn(130, 200, device="cuda", generator=g).to(dt)
        b = torch.randn(130, device="cuda", generator=g).to(dt)
        out = torch.full((130, 300), float("nan"), device="cuda", dtype=dt).T if col_out \
            else None
        got = gemm.matmul(x, w.T, out=out, kernel=kernel, bias=b, activation="silu")
        size = x.double().abs() @ w.double().abs().T
        ref = torch.nn.functional.silu(x.double() @ w.double().T + b.double())
        rounding = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -23
        tol = 1.2 * (1e-5 * (size + b.double().abs()) + rounding * size) + rounding * ref.abs()
        assert ((got.double() - ref).abs() <= tol).all()


if __name__ == "__main__":
    from simcase import switch_threads_often
    switch_threads_often()
    base = int(sys.argv[1])
    print(json.dumps([unfused_case(*c, base + i) for i, c in enumerate(UNFUSED)]))
