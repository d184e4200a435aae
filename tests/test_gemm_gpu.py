"""The kernels on a real GPU (marked ``gpu``; skipped without one).

Fresh random data every run (the seed is printed on failure), outputs poisoned with NaN,
every element compared with cuBLAS fp32 (torch, TF32 off) or numpy float64.
"""

import dataclasses
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

from gpucase import require_gpu  # noqa: E402

require_gpu()

torch = pytest.importorskip("torch")
import gemm  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
KERNELS = list(gemm.KERNELS)
SEED = int.from_bytes(os.urandom(4), "little")


def _matrix(rng, rows, cols, major):
    x = torch.from_numpy(rng.standard_normal((rows, cols), dtype=np.float32)).cuda()
    return x if major == "row" else x.T.contiguous().T


def _check(C, A, B, alpha=1.0, beta=0.0, C0=None):
    ref = alpha * (A.double() @ B.double())
    bound = abs(alpha) * (A.double().abs() @ B.double().abs())
    if C0 is not None:
        ref, bound = ref + beta * C0.double(), bound + abs(beta) * C0.double().abs()
    err = ((C.double() - ref).abs() / (2e-6 * A.shape[1] ** 0.5 * bound + 1e-30))
    return float(torch.nan_to_num(err, nan=float("inf")).max())


@pytest.mark.parametrize("kernel", KERNELS)
def test_random_shapes_against_float64(kernel):
    rng = np.random.default_rng(SEED)
    shapes = [(1, 1, 1), (4096, 4096, 4096)]
    shapes += [tuple(int(x) for x in rng.integers(1, 1100, 3)) for _ in range(10)]
    for m, n, k in shapes:
        for am in ("row", "col"):
            for bm in ("row", "col"):
                if max(m, n, k) > 2048 and (am, bm) != ("row", "row"):
                    continue
                A, B = _matrix(rng, m, k, am), _matrix(rng, k, n, bm)
                C = torch.full((m, n), float("nan"), device="cuda")
                out = gemm.matmul(A, B, C, kernel=kernel)
                assert out is C
                err = _check(C, A, B)
                assert err <= 1.0, (SEED, kernel, m, n, k, am, bm, err)


@pytest.mark.parametrize("kernel", KERNELS)
def test_alpha_beta_and_column_major_out(kernel):
    rng = np.random.default_rng(SEED + 1)
    m, n, k = 300, 257, 129
    A, B = _matrix(rng, m, k, "row"), _matrix(rng, k, n, "col")
    C0 = _matrix(rng, m, n, "col")
    C = C0.clone()
    gemm.matmul(A, B, C, alpha=-1.5, beta=0.25, kernel=kernel)
    assert _check(C, A, B, -1.5, 0.25, C0) <= 1.0


def test_repeated_calls_reuse_one_plan_with_new_data_and_streams():
    """After the first call, calls with tensors of the same kind take the planned launch:
    new addresses, alpha and beta, and the caller's current stream must all reach it."""
    from gemm import api
    rng = np.random.default_rng(SEED + 3)
    m, n, k = 200, 130, 70
    before = set(api._plans)     # (keys: another xdist worker's tuning may clear the plans)
    side = torch.cuda.Stream()
    for i, (alpha, beta) in enumerate(((1.0, 0.0), (2.0, 0.5), (-1.0, 1.0), (0.5, -0.25))):
        A, B = _matrix(rng, m, k, "row"), _matrix(rng, k, n, "col")
        C0 = _matrix(rng, m, n, "row")
        C = C0.clone()
        with torch.cuda.stream(side if i % 2 else torch.cuda.current_stream()):
            torch.cuda.current_stream().wait_stream(torch.cuda.default_stream())
            gemm.matmul(A, B, C, alpha=alpha, beta=beta)
        torch.cuda.synchronize()
        assert _check(C, A, B, alpha, beta, C0) <= 1.0, (SEED, alpha, beta)
    assert len(set(api._plans) - before) == 1


def test_caller_kinds_come_back():
    from numba import cuda
    rng = np.random.default_rng(SEED + 2)
    a = rng.standard_normal((65, 33), dtype=np.float32)
    b = rng.standard_normal((33, 17), dtype=np.float32)
    out = gemm.matmul(cuda.to_device(a), cuda.to_device(b))
    assert type(out).__module__.startswith("numba")
    np.testing.assert_allclose(out.copy_to_host(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    t = gemm.matmul(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda())
    assert isinstance(t, torch.Tensor) and t.is_cuda
    np.testing.assert_allclose(t.cpu().numpy(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    cupy = pytest.importorskip("cupy")
    c = gemm.matmul(cupy.asarray(a), cupy.asarray(b))
    assert isinstance(c, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(c), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_host_tensor_is_refused():
    with pytest.raises(TypeError, match="not on the GPU"):
        gemm.matmul(torch.ones(4, 4), torch.ones(4, 4).cuda())


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer_clean(tool):
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        pytest.skip("compute-sanitizer not installed")
    script = ("import numpy as np, gemm\nfrom numba import cuda\n"
              "a = cuda.to_device(np.ones((70, 21), np.float32))\n"
              "b = cuda.to_device(np.ones((21, 50), np.float32))\n"
              "for k in gemm.KERNELS:\n"
              "    c = gemm.matmul(a, b, kernel=k).copy_to_host()\n"
              "    assert (c == 21).all(), k\n")
    proc = subprocess.run([sanitizer, "--tool", tool, "--error-exitcode", "3", sys.executable,
                           "-c", script], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ERROR SUMMARY: 0 errors" in proc.stdout or "RACECHECK SUMMARY: 0 hazards" in proc.stdout


def test_torch_mm_semantics_out_type_empty_and_streams():
    """The result's type follows torch.mm, empty extents give empty results or beta * out,
    and a stream of each array kind is honoured (the work is on it, then synchronised)."""
    from numba import cuda
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    a = torch.randn(300, 136, device="cuda", generator=g).bfloat16()
    b = torch.randn(136, 200, device="cuda", generator=g).bfloat16()
    ref = a.double() @ b.double()
    c = gemm.matmul(a, b)
    assert c.dtype == torch.bfloat16 and c.shape == (300, 200)
    assert ((c.double() - ref).abs() <= 2e-2 * (a.double().abs() @ b.double().abs())).all()
    c32 = gemm.matmul(a, b, out_dtype="float32")
    assert c32.dtype == torch.float32
    assert ((c32.double() - ref).abs() <= 1e-3 * (a.double().abs() @ b.double().abs())).all()
    assert gemm.matmul(a[:0], b).shape == (0, 200) and gemm.matmul(a, b[:, :0]).shape == (300, 0)
    out = torch.full((300, 200), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm.matmul(a[:, :0], b[:0], out)
    assert (out == 0).all()
    out = torch.randn(300, 200, device="cuda", generator=g)
    before = out.clone()
    gemm.matmul(a[:, :0].float(), b[:0].float(), out, beta=0.5)
    assert torch.equal(out, before * 0.5)
    s = torch.cuda.Stream()
    poisoned = torch.full((300, 200), float("nan"), device="cuda")
    torch.cuda.synchronize()
    gemm.matmul(a, b, poisoned, stream=s)
    s.synchronize()
    assert torch.allclose(poisoned, c32)
    cupy = pytest.importorskip("cupy")
    x = cupy.asarray(np.ones((40, 24), np.float32))
    cs = cupy.cuda.Stream()
    got = gemm.matmul(x, x.T, stream=cs)
    cs.synchronize()
    assert (cupy.asnumpy(got) == 24).all()
    ns = cuda.stream()
    y = cuda.to_device(np.ones((40, 24), np.float32))
    got = gemm.matmul(y, cuda.to_device(np.ones((24, 8), np.float32)), stream=ns)
    ns.synchronize()
    assert (got.copy_to_host() == 24).all()


def _batch(g, shape, dtype, col=False):
    """A random CUDA tensor of ``shape``; column-major in its last two modes if ``col``."""
    x = torch.randn(shape, device="cuda", generator=g).to(dtype)
    return x.transpose(-1, -2).contiguous().transpose(-1, -2) if col else x


@pytest.mark.parametrize("dtype,kernel", [(torch.float32, None), (torch.bfloat16, None),
                                          (torch.bfloat16, "sm80"), (torch.float16, "hopper"),
                                          (torch.float32, "tf32")])
def test_batched_and_broadcast_products(dtype, kernel):
    """torch.matmul's batches in one launch: (B, M, K) @ (B, K, N), a 2-D or batch-of-1
    operand shared by every product, column-major operands, a given out (beta) and an
    interleaved one, K not a multiple of any k-tile; against float64, outs NaN-poisoned."""
    if kernel == "hopper" and not gemm.hopper.hopper_supported(torch.cuda.current_device()):
        pytest.skip("the Hopper kernel needs compute capability 9.x")
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    tf32 = kernel == "tf32"
    kw = dict(kernel=None if tf32 else kernel, allow_tf32=tf32)
    rel = 2e-6 * 136 ** 0.5 if dtype == torch.float32 and not tf32 else 2e-3
    cases = [((4, 300, 136), (4, 136, 200), False, False),
             ((3, 256, 136), (136, 72), True, False),
             ((300, 136), (5, 136, 200), False, True),
             ((1, 64, 136), (3, 136, 136), False, False)]
    for a_shape, b_shape, a_col, b_col in cases:
        A, B = _batch(g, a_shape, dtype, a_col), _batch(g, b_shape, dtype, b_col)
        ref = torch.matmul(A.double(), B.double())
        bound = torch.matmul(A.double().abs(), B.double().abs())
        out = torch.full(ref.shape, float("nan"), device="cuda")
        got = gemm.matmul(A, B, out, **kw)
        assert got is out
        err = ((out.double() - ref).abs() / (rel * bound + 1e-30)).nan_to_num(nan=float("inf"))
        assert float(err.max()) <= 1.0, (SEED, a_shape, b_shape, float(err.max()))
    # beta into an interleaved out: (M, B, N) memory seen as (B, M, N)
    A, B = _batch(g, (3, 100, 136), dtype), _batch(g, (3, 136, 60), dtype, True)
    c0 = torch.randn(100, 3, 60, device="cuda", generator=g).transpose(0, 1)
    out = c0.clone()                    # keeps the strides
    assert out.stride() == (60, 180, 1)
    gemm.matmul(A, B, out, alpha=0.5, beta=-2.0, **kw)
    ref = 0.5 * torch.matmul(A.double(), B.double()) - 2.0 * c0.double()
    bound = 0.5 * torch.matmul(A.double().abs(), B.double().abs()) + 2.0 * c0.double().abs()
    assert float(((out.double() - ref).abs() / (rel * bound)).max()) <= 1.0, SEED
    if dtype != torch.float32:          # the default out follows torch.matmul's type
        assert gemm.matmul(A, B, **kw).dtype == dtype


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_k_by_shape_first_and_repeated_calls(dtype):
    """Shapes whose default splits K (few output tiles, long K), row- and column-major outs
    with beta, a first call and a repeated one (the fast path's plan, new data): against
    float64, outs NaN-poisoned; a named kernel with split_k too."""
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    rel = 2e-6 if dtype == torch.float32 else 1e-3
    kernels = [None] + ([gemm.simt.SimtConfig(bK=16, pad=4, vector_mn=4, min_blocks=2,
                                              split_k=7)] if dtype == torch.float32 else [])
    for kernel in kernels:
        for m, n, k, col in ((16, 1024, 8192, False), (200, 136, 20000, True)):
            for _ in range(2):
                A = torch.randn(m, k, device="cuda", generator=g).to(dtype)
                B = torch.randn(k, n, device="cuda", generator=g).to(dtype)
                c0 = torch.randn(m, n, device="cuda", generator=g)
                out = c0.T.contiguous().T if col else c0.clone()
                gemm.matmul(A, B, out, alpha=0.5, beta=-1.0, kernel=kernel)
                ref = 0.5 * (A.double() @ B.double()) - c0.double()
                bound = 0.5 * (A.double().abs() @ B.double().abs()) + c0.double().abs()
                err = float(((out.double() - ref).abs() / (rel * k ** 0.5 * bound)).max())
                assert err <= 1.0, (SEED, kernel, m, n, k, col, err)
                poisoned = torch.full((m, n), float("nan"), device="cuda")
                gemm.matmul(A, B, poisoned, kernel=kernel)          # beta 0: out not read
                err = (poisoned.double() - A.double() @ B.double()).abs() / (
                    rel * k ** 0.5 * (A.double().abs() @ B.double().abs()))
                assert float(err.nan_to_num(nan=float("inf")).max()) <= 1.0, (SEED, kernel)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_k_call_captured_in_a_cuda_graph(dtype):
    """A call whose default splits K, warmed up on the default stream, then captured by
    torch.cuda.graph (its own stream: the workspace comes from the graph's pool) and replayed
    on new data: against float64."""
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    m, n, k = 16, 1024, 8192
    A = torch.randn(m, k, device="cuda", generator=g).to(dtype)
    B = torch.randn(k, n, device="cuda", generator=g).to(dtype)
    out = torch.empty(m, n, device="cuda")
    gemm.matmul(A, B, out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm.matmul(A, B, out)
    A.copy_(torch.randn(m, k, device="cuda", generator=g).to(dtype))
    B.copy_(torch.randn(k, n, device="cuda", generator=g).to(dtype))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    rel = 2e-6 if dtype == torch.float32 else 1e-3
    err = (out.double() - A.double() @ B.double()).abs() / (
        rel * k ** 0.5 * (A.double().abs() @ B.double().abs()))
    assert float(err.nan_to_num(nan=float("inf")).max()) <= 1.0, SEED


def test_hopper_call_meeting_new_addresses_in_a_cuda_graph():
    """A Hopper call captured in a CUDA graph with an input and the out made inside the
    capture (their TMA tensor maps are new: the graph's copy nodes write them), replayed on
    new data; then the same call made eagerly on the capture's tensors (the maps written
    outside the graph too): against float64."""
    from gemm import hopper
    if not hopper.hopper_supported():
        pytest.skip("the Hopper kernel needs compute capability 9.x")
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    a = torch.randn(512, 512, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(512, 512, device="cuda", generator=g).to(torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                   # warm-up: compiled and bound
        gemm.matmul(a, w.T)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        x = a * 2
        y = gemm.matmul(x, w.T)
    a.copy_(torch.randn(512, 512, device="cuda", generator=g))
    graph.replay()
    torch.cuda.synchronize()
    for got in (y, gemm.matmul(x, w.T, torch.full_like(y, float("nan")))):
        ref = x.double() @ w.double().T
        err = (got.double() - ref).abs() / (2 ** -7 * (x.double().abs() @ w.double().abs().T))
        assert float(err.nan_to_num(nan=float("inf")).max()) <= 1.0, SEED


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_few_rows_take_two_narrow_tiles_of_the_rows(dtype):
    """33-96 rows of a row-major 16-bit A against a weight whose 64-row tiles leave half the
    SMs idle, at short K (``gemm.hopper.pairs``): A and B swapped, A's rows in two narrow
    tiles; odd shapes, beta, 16-bit and f32 outs, against float64, outs NaN-poisoned where
    beta is 0."""
    from gemm import hopper
    if not hopper.hopper_supported():
        pytest.skip("the Hopper kernel needs compute capability 9.x")
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    sms = hopper.sm_count(torch.cuda.current_device())
    for m, n, k, beta in ((80, 4096, 4096, 0.0), (33, 1030, 1000, 0.5), (96, 2100, 712, -1.0),
                          (61, 32 * sms, 3000, 0.0)):
        out_dtype = torch.float32 if m % 2 else dtype
        A = torch.randn(m, k, device="cuda", generator=g).to(dtype)
        B = torch.randn(n, k, device="cuda", generator=g).to(dtype).T          # K-major
        c0 = torch.randn(m, n, device="cuda", generator=g).to(out_dtype)
        out = c0.clone() if beta else torch.full_like(c0, float("nan"))
        v = hopper.plan_call(A, B, out)
        assert v.c_columns and v.config.bN == -(-m // 16) * 8, (m, n, k, v.config)
        gemm.matmul(A, B, out, alpha=0.5, beta=beta)
        _check_close(out, A, B, 0.5, beta, c0, dtype, (m, n, k))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_few_rows_with_a_fused_bias_swap_a_and_b(dtype):
    """A decode step with a fused bias (of the out's columns, or of its rows) and activation
    takes the rules' swap as the call without them does (narrow tiles, two of the rows),
    split-K off; odd shapes; against float64 (tests/activations64.py), outs NaN-poisoned."""
    from activations64 import ACTIVATIONS64
    from gemm import hopper
    if not hopper.hopper_supported():
        pytest.skip("the Hopper kernel needs compute capability 9.x")
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    for m, n, k, of_rows, act in ((1, 4096, 4096, False, "gelu"), (16, 2050, 1000, True, "silu"),
                                  (80, 4096, 4096, False, None), (37, 1030, 712, False, "relu"),
                                  (8, 1024, 14336, False, "gelu_tanh")):
        A = torch.randn(m, k, device="cuda", generator=g).to(dtype)
        B = torch.randn(n, k, device="cuda", generator=g).to(dtype).T          # K-major
        bias = torch.randn((m, 1) if of_rows else (n,), device="cuda", generator=g).to(dtype)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        v = hopper.plan_call(A, B, out, bias=bias, activation=act)
        assert v.c_columns and v.bias == ("columns" if of_rows else "rows"), (m, n, k, v)
        gemm.matmul(A, B, out, bias=bias, activation=act)
        pre = A.double() @ B.double() + bias.double()
        ref = pre.cpu().numpy() if act is None else ACTIVATIONS64[act](pre.cpu().numpy())
        bound = (A.double().abs() @ B.double().abs() + bias.double().abs()).cpu().numpy()
        err = np.abs(out.double().cpu().numpy() - ref) / (1.2 * 2 ** -7 * bound + 1e-30)
        assert float(np.nan_to_num(err, nan=np.inf).max()) <= 1.0, (SEED, m, n, k, act)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_few_rows_swap_a_and_b(dtype):
    """Calls of at most 64 rows against a wide B take the Hopper rules with A and B swapped
    (C^T = B^T A^T, stored column by column into the row-major out), with and without
    split-K, alpha/beta, odd shapes, 16-bit and f32 outs, a repeated call on new data; an
    explicit swap_ab config into a column-major out (the other way round): against float64,
    outs NaN-poisoned where beta is 0."""
    from gemm import hopper
    if not hopper.hopper_supported():
        pytest.skip("the Hopper kernel needs compute capability 9.x")
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    tf32 = dtype == torch.float32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        for m, n, k, beta in ((1, 4096, 4096, 0.0), (5, 1030, 3000, 0.5), (16, 2048, 8200, 0.0),
                              (37, 1024, 1000, -1.0), (64, 4100, 4096, 0.0),
                              (24, 9000, 704, 0.0), (40, 9000, 520, 0.5)):  # two consumers
            out_dtype = torch.float32 if (tf32 or m % 2) else dtype
            for _ in range(2):
                A = torch.randn(m, k, device="cuda", generator=g).to(dtype)
                B = torch.randn(n, k, device="cuda", generator=g).to(dtype).T   # K-major
                c0 = torch.randn(m, n, device="cuda", generator=g).to(out_dtype)
                out = c0.clone() if beta else torch.full_like(c0, float("nan"))
                v = hopper.plan_call(A, B, out)
                assert v.c_columns and not v.vec_c, (m, n, k)
                gemm.matmul(A, B, out, alpha=0.5, beta=beta, kernel="hopper",
                            allow_tf32=tf32)
                _check_close(out, A, B, 0.5, beta, c0, dtype, (m, n, k))
        A = torch.randn(100, 640, device="cuda", generator=g).to(dtype)
        B = torch.randn(640, 72, device="cuda", generator=g).to(dtype).T.contiguous().T
        for bn, stages, split in ((64, 4, 1), (16, 8, 2)):    # and tiles of 16 columns
            out = torch.full((72, 100), float("nan"), device="cuda").T      # column-major
            cfg = hopper.HopperConfig(bM=64, bN=bn, consumers=1, stages=stages, swap_ab=True,
                                      split_k=split, dtype="tfloat32" if tf32 else "bfloat16")
            v = hopper.plan_call(A, B, out, config=cfg)
            assert v.c_columns and v.config.stages == stages    # the config, not the rules
            gemm.matmul(A, B, out, kernel=cfg, allow_tf32=tf32)
            _check_close(out, A, B, 1.0, 0.0, None, dtype, f"column-major out, bN {bn}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def _check_close(out, A, B, alpha, beta, c0, dtype, where):
    ref = alpha * (A.double() @ B.double())
    bound = abs(alpha) * (A.double().abs() @ B.double().abs())
    if beta:
        ref, bound = ref + beta * c0.double(), bound + abs(beta) * c0.double().abs()
    rel = 2 ** -7 if out.dtype != torch.float32 else (
        2 ** -9 if dtype == torch.float32 else 2e-6 * A.shape[1] ** 0.5)
    err = (out.double() - ref).abs() / (rel * bound + 1e-30)
    assert float(err.nan_to_num(nan=float("inf")).max()) <= 1.0, (SEED, where)


def _but_split(cfg):
    return {f: v for f, v in dataclasses.asdict(cfg).items() if f != "split_k"}


def test_shipped_table_configs_route_and_are_right():
    """Every config of gemm.tuning.shape_table (bf16 and f16 in turn, a row-major out, shapes
    nudged off the recorded ones): the unnamed call takes the table's tiles (split-K may be
    re-derived) and matches float64, outs NaN-poisoned. Where a row-major A would be
    swapped onto narrow tiles (at most 32 rows), it gets no entry, and A is column-major
    (the table's route; a one-row A has none)."""
    from dataclasses import replace
    from gemm import api, hopper
    from gemm.tuning import shape_table
    from gemm.call.operands import operand
    g = torch.Generator(device="cuda").manual_seed(SEED % 2 ** 31)
    _, rows = shape_table.entries()
    sms = api.sm_count(torch.cuda.current_device())
    for i, (m, n, k, cfg) in enumerate(rows):
        dtype = (torch.bfloat16, torch.float16)[i % 2]
        if (m, n, k) in shape_table.swap_faster():       # left to the swapped rules
            continue
        m, n, k = max(1, m - i % 3), n - 8 * (i % 2), k + 8 * (i % 3)   # near the shape
        narrow = hopper.swaps_narrow(m, n, k, sms, True)
        A = torch.randn(m, k, device="cuda", generator=g).to(dtype)
        if narrow:
            assert api._shipped_config(operand(A, "A", False), operand(
                torch.empty(k, n, device="cuda", dtype=dtype), "B", False), None) is None
            if m == 1:                                  # one row is always row-major
                continue
            A = A.T.contiguous().T
        B = torch.randn(n, k, device="cuda", generator=g).to(dtype).T
        ops = [operand(x, name, False) for x, name in ((A, "A"), (B, "B"))]
        got = api._shipped_config(*ops, None)           # split-K may be re-derived
        assert got is not None and _but_split(got) == _but_split(
            replace(cfg, dtype=shape_table.DTYPES[i % 2])), (m, n, k)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        gemm.matmul(A, B, out)
        ref, bound = A.double() @ B.double(), A.double().abs() @ B.double().abs()
        err = (out.double() - ref).abs() / (2 ** -7 * ref.abs() + 1e-3 * bound)
        assert float(err.nan_to_num(nan=float("inf")).max()) <= 1.0, (SEED, m, n, k, cfg)


def test_tune_times_copies_of_small_operands_and_leaves_them_and_out_alone(tmp_path,
                                                                          monkeypatch):
    """The tuner's timed calls take A and B and two copies of them in turn (L2 would hold a
    single small set); the copies are of the operands' bytes, so every candidate still
    computes A @ B; the caller's A, B and out are not written."""
    from gemm import hopper
    from gemm.tuning import autotune
    monkeypatch.setenv("GEMM_AUTOTUNE_CACHE", str(tmp_path / "cache.json"))
    rng = np.random.default_rng(SEED)
    A = torch.from_numpy(rng.standard_normal((64, 512), dtype=np.float32)).cuda().bfloat16()
    B = torch.from_numpy(rng.standard_normal((512, 384), dtype=np.float32)).cuda().bfloat16()
    out = torch.full((64, 384), float("nan"), device="cuda")
    a0, b0 = A.clone(), B.clone()
    seen = []
    real = autotune._input_sets

    def spy(ops):
        sets, copies = real(ops)
        seen.append(sets)
        for copy, x in zip(copies, [A, B] * (len(copies) // 2)):
            got = torch.as_tensor(copy, device="cuda")
            assert torch.equal(got, x.contiguous().view(torch.uint8).flatten()), SEED
        return sets, copies
    monkeypatch.setattr(autotune, "_input_sets", spy)
    configs = [hopper.HopperConfig(bM=64, bN=128, consumers=1, stages=4),
               hopper.HopperConfig(bM=64, bN=128, consumers=1, stages=4, epilogue="registers")]
    if not hopper.hopper_supported(torch.cuda.current_device()):
        pytest.skip("the Hopper configs need compute capability 9.x")
    cfg = autotune.tune(A, B, out, configs=configs, progress=False)
    assert cfg in configs
    assert seen and all(len(s) == autotune.INPUT_SETS for s in seen)
    assert all(len(set(s)) == autotune.INPUT_SETS for s in seen)     # distinct addresses
    assert torch.equal(A, a0) and torch.equal(B, b0) and torch.isnan(out).all()
    _check_close(gemm.matmul(A, B, out, kernel=cfg), A, B, 1.0, 0.0, None, torch.bfloat16,
                 "the tuned config")
