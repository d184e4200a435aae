"""The fast path of every call form on a real GPU (marked ``gpu``; skipped without one): the
first call of a signature runs every check and keeps a plan, later calls with fresh data,
fresh outs and other streams take the plan (the checked path is not entered again) and give
the product of their own data, compared with float64 on fresh random data, given outs
poisoned with NaN first.
"""

import os
import threading

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

from gpucase import require_gpu  # noqa: E402

require_gpu()

torch = pytest.importorskip("torch")
import gemm  # noqa: E402
from gemm import api  # noqa: E402
from gemm.call import plan as callplan  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")
BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
# error bound per unit of |A| @ |B|: one rounding of the out's type (and tf32's operands)
TOL = {"bfloat16": 2 ** -7, "float16": 2 ** -10, "float32": 2e-5, "tf32": 2 ** -9}


def _pair(g, m, n, k, dtype, a_major="row", b_major="col", batch=()):
    a = torch.randn(batch + (m, k), device="cuda", generator=g).to(dtype)
    b = torch.randn(batch + (k, n), device="cuda", generator=g).to(dtype)
    if a_major == "col":
        a = a.transpose(-1, -2).contiguous().transpose(-1, -2)
    if b_major == "col":
        b = b.transpose(-1, -2).contiguous().transpose(-1, -2)
    return a, b


def _err(c, a, b, tol, alpha=1.0, beta=0.0, c0=None):
    ref = alpha * torch.matmul(a.double(), b.double())
    bound = abs(alpha) * torch.matmul(a.double().abs(), b.double().abs())
    if c0 is not None:
        ref, bound = ref + beta * c0.double(), bound + abs(beta) * c0.double().abs()
    err = (c.double() - ref).abs() / (tol * bound + 1e-30)
    return float(torch.nan_to_num(err, nan=float("inf")).max())


@pytest.fixture(autouse=True)
def _settled_plans():
    """Kept plans are forgotten when the autotune cache's file changes
    (``gemm.call.plan.watch``), which is also what an earlier test's monkeypatched
    ``GEMM_AUTOTUNE_CACHE`` looks like once it is undone; the watch is asked at most once a
    second, so that could fall in the middle of a test here. Ask it now."""
    callplan._look()


class _Counted:
    """api._matmul with a count of the calls that entered it."""

    def __init__(self, monkeypatch):
        self.calls, real = 0, api._matmul

        def counted(*args):
            self.calls += 1
            return real(*args)
        monkeypatch.setattr(api, "_matmul", counted)


# (name, m, n, k, dtype, majors, batch, matmul keywords, out dtype or None for no out, tol)
FORMS = [
    ("bf16 no out, Hopper", 300, 200, 136, BF16, ("row", "col"), (), {}, None, "bfloat16"),
    ("bf16 out_dtype f32", 300, 200, 136, BF16, ("row", "col"), (), {"out_dtype": "float32"},
     None, "bfloat16"),
    ("f16 into a float32 out", 129, 70, 64, F16, ("row", "row"), (), {}, F32, "float16"),
    ("bf16 named sm80", 96, 80, 48, BF16, ("col", "row"), (), {"kernel": "sm80"}, None,
     "bfloat16"),
    ("bf16 named hopper, TMA store", 256, 256, 128, BF16, ("row", "col"), (),
     {"kernel": "hopper"}, None, "bfloat16"),
    ("bf16 split-K", 128, 128, 16384, BF16, ("row", "col"), (), {}, None, "bfloat16"),
    ("bf16 decode step (small-M)", 1, 512, 1024, BF16, ("row", "col"), (), {}, None,
     "bfloat16"),
    ("bf16 batched", 64, 48, 80, BF16, ("row", "col"), (3,), {}, None, "bfloat16"),
    ("fp32 default (3xTF32)", 200, 136, 96, F32, ("row", "col"), (), {}, None, "float32"),
    ("fp32 3xTF32 on a copy of B", 512, 64, 64, F32, ("row", "row"), (), {}, None,
     "float32"),
    ("fp32 ieee, SIMT small-M", 40, 100, 70, F32, ("row", "row"), (),
     {"precision": "ieee"}, None, "float32"),
    ("fp32 ieee, SIMT", 300, 100, 70, F32, ("col", "row"), (), {"precision": "ieee"}, F32,
     "float32"),
    ("fp32 allow_tf32", 200, 136, 96, F32, ("row", "col"), (), {"allow_tf32": True}, F32,
     "tf32"),
]


@pytest.mark.parametrize("form", FORMS, ids=[f[0] for f in FORMS])
def test_every_form_keeps_one_plan_and_takes_it(form, monkeypatch):
    name, m, n, k, dtype, (am, bm), batch, kw, out_dtype, tol = form
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    counted = _Counted(monkeypatch)
    side = torch.cuda.Stream()
    for i in range(4):
        a, b = _pair(g, m, n, k, dtype, am, bm, batch)
        out = None
        if out_dtype is not None:
            out = torch.full(batch + (m, n), float("nan"), device="cuda", dtype=out_dtype)
        with torch.cuda.stream(side if i % 2 else torch.cuda.current_stream()):
            torch.cuda.current_stream().wait_stream(torch.cuda.default_stream())
            c = gemm.matmul(a, b, out, **kw)
        torch.cuda.synchronize()
        assert out is None or c is out
        assert c.shape == batch + (m, n)
        err = _err(c, a, b, TOL[tol] * (2 if tol == "tf32" else 1))
        assert err <= 1, (name, i, SEED, err)
    assert counted.calls == 1, (name, "the checked path ran again")


def test_alpha_beta_and_refusals_after_a_plan():
    """Planned calls take new alpha and beta; a call the plan cannot take is refused with
    the checked path's error, its out untouched."""
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    a, b = _pair(g, 200, 130, 70, BF16)
    gemm.matmul(a, b)
    c0 = torch.randn(200, 130, device="cuda", generator=g)
    for alpha, beta in ((2.0, 0.5), (-1, 1)):
        gemm.matmul(a, b, c0.clone(), alpha=alpha, beta=beta)     # keeps the out= plan
        c = c0.clone()
        gemm.matmul(a, b, c, alpha=alpha, beta=beta)              # taken from the plan
        torch.cuda.synchronize()
        assert _err(c, a, b, TOL["bfloat16"], alpha, beta, c0) <= 1
    with pytest.raises(ValueError, match="beta != 0 needs an `out`"):
        gemm.matmul(a, b, beta=1.0)
    kept = c0.clone()
    with pytest.raises(TypeError, match="alpha must be a real number"):
        gemm.matmul(a, b, kept, alpha="2")
    with pytest.raises(ValueError, match="inner dimensions"):
        gemm.matmul(a, b[:-1])
    assert torch.equal(kept, c0)


def test_addresses_reused_by_other_shapes():
    """A plan keyed by one shape never runs for another shape at the same address."""
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    for m, n, k in ((256, 192, 64), (192, 256, 64), (64, 256, 192), (256, 192, 64)):
        a, b = _pair(g, m, n, k, BF16)
        c = gemm.matmul(a, b)
        torch.cuda.synchronize()
        assert c.shape == (m, n) and _err(c, a, b, TOL["bfloat16"]) <= 1
        del a, b, c                         # the caching allocator hands the memory on


def test_new_outs_on_streams_read_their_own_tensor_maps():
    """A Hopper call with a TMA-store epilogue gets a new out (a new tensor map) every call,
    written on the launching stream without a host wait; other streams wait for it."""
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    a, b = _pair(g, 256, 256, 128, BF16)
    streams = [torch.cuda.Stream() for _ in range(3)]
    outs = []
    for i in range(24):
        s = streams[i % 3]
        s.wait_stream(torch.cuda.default_stream())
        with torch.cuda.stream(s):
            outs.append((gemm.matmul(a, b, kernel="hopper"), s))
    torch.cuda.synchronize()
    for c, _ in outs:
        assert _err(c, a, b, TOL["bfloat16"]) <= 1


def test_threads_share_plans():
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    pairs = [_pair(g, 192, 160, 96, BF16) for _ in range(4)]
    gemm.matmul(*pairs[0])
    results, errors = {}, []

    def work(i):
        try:
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                results[i] = [gemm.matmul(*pairs[i]) for _ in range(50)]
            s.synchronize()
        except Exception as e:      # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    torch.cuda.synchronize()
    for i, cs in results.items():
        ref = cs[0]
        assert _err(ref, *pairs[i], TOL["bfloat16"]) <= 1
        assert all(torch.equal(c, ref) for c in cs)


def test_precision_change_forgets_plans():
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    a, b = _pair(g, 200, 136, 96, F32)
    gemm.matmul(a, b)
    assert len(callplan.PLANS) > 0
    old = gemm.set_float32_precision("ieee")
    try:
        assert len(callplan.PLANS) == 0
        c = gemm.matmul(a, b)
        torch.cuda.synchronize()
        assert _err(c, a, b, TOL["float32"]) <= 1
    finally:
        gemm.set_float32_precision(old)


def test_numba_and_cupy_arrays_take_plans(monkeypatch):
    from numba import cuda
    rng = np.random.default_rng(SEED)
    counted = _Counted(monkeypatch)
    kinds = [("numba", cuda.to_device, lambda x: x.copy_to_host())]
    try:
        import cupy
        kinds.append(("cupy", cupy.asarray, cupy.asnumpy))
    except ImportError:
        pass
    for name, to_device, to_host in kinds:
        before = counted.calls
        for _ in range(3):
            a = rng.standard_normal((65, 33), dtype=np.float32)
            b = rng.standard_normal((33, 17), dtype=np.float32)
            c = to_host(gemm.matmul(to_device(a), to_device(b), precision="ieee"))
            ref = a.astype(np.float64) @ b
            np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)
        assert counted.calls == before + 1, name


def test_split_k_keeps_one_workspace_per_stream_and_none_in_a_capture():
    """Split-K calls on torch tensors: eager calls reuse one kept workspace per stream
    (gemm.splitk.workspace), a call captured in a CUDA graph (on torch's capture stream) gets
    memory of the graph's pool and keeps none; every result (outs poisoned first, the graph
    replayed on fresh data) against float64."""
    from gemm import splitk
    g = torch.Generator(device="cuda").manual_seed(SEED)
    a, b = _pair(g, 128, 128, 16384, BF16)
    out = torch.full((128, 128), float("nan"), device="cuda", dtype=BF16)
    stream = torch.cuda.current_stream().cuda_stream
    splitk._torch_spaces.clear()
    for _ in range(3):
        out.fill_(float("nan"))
        gemm.matmul(a, b, out)
    kept = [key for key in splitk._torch_spaces if key[1] == stream]
    assert kept == [(torch.cuda.current_device(), stream, "partials")], splitk._torch_spaces
    assert _err(out, a, b, TOL["bfloat16"]) <= 1.0
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a2, b2 = _pair(g, 128, 128, 16384, BF16)
        out2 = torch.full((128, 128), float("nan"), device="cuda", dtype=BF16)
        gemm.matmul(a2, b2, out2)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm.matmul(a, b, out)
    assert {key[1] for key in splitk._torch_spaces} == {stream, side.cuda_stream}, \
        splitk._torch_spaces            # none kept for the capture's stream
    a.copy_(torch.randn(a.shape, device="cuda", generator=g))    # fresh data for the replay
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert _err(out, a, b, TOL["bfloat16"]) <= 1.0
    assert _err(out2, a2, b2, TOL["bfloat16"]) <= 1.0
