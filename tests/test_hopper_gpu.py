"""The Hopper GEMM (gemm.hopper: TMA, wgmma, a warp-specialized pipeline) on an H100/H200
(marked ``gpu``; skipped without a GPU of compute capability 9.x).

    python3 -m pytest -n 0 -rfEs -m gpu tests/test_hopper_gpu.py

The cases, operands (NaN-poisoned outputs inside a NaN guard, leading dimensions padded to
16 bytes so that any M, N, K is tried), bounds against float64 and the parallel compile come
from benchmarks/hopper_check.py; random shapes and data are fresh every run
(``HOPPER_SEED=<seed>`` repeats one; failures print it).
"""

import math
import os

import pytest

pytestmark = pytest.mark.gpu

from gpucase import require_gpu  # noqa: E402

require_gpu()

torch = pytest.importorskip("torch")
from benchmarks import hopper_check as hc  # noqa: E402
from gemm.hopper import hopper_supported  # noqa: E402

if not hopper_supported(torch.cuda.current_device()):
    pytest.skip("needs a GPU of compute capability 9.x", allow_module_level=True)

# one seed for every pytest-xdist worker of a run (each collects the cases itself)
SEED = int(os.environ.get("HOPPER_SEED")
           or int(os.environ.get("PYTEST_XDIST_TESTRUNUID", "")[:6] or "0", 16)
           or int.from_bytes(os.urandom(3), "little"))
CASES = hc.cases(SEED)


@pytest.fixture(scope="module", autouse=True)
def compiled(tmp_path_factory):
    # One process compiles the cases' variants into the kernel cache on disk, in a pool of
    # up to 16 processes (each holds a CUDA context); pytest-xdist's other workers wait for
    # it under a file lock and then load the cubins. (Each worker compiling them all, one
    # process each, took minutes under 12 workers.) The lock lies in this run's temporary
    # folder (under pytest-xdist, the one above the workers' own), which pytest clears in
    # later runs.
    import fcntl
    run = tmp_path_factory.getbasetemp()
    stem = os.path.join(run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run,
                        "test_hopper_gpu")
    with open(stem + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(stem + ".done"):
            hc.compile_all(hc.variants_of(CASES, seed=SEED), min(16, os.cpu_count() or 1),
                           print)
            open(stem + ".done", "w").close()


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_matches_float64(case):
    ok, err, guard = hc.check(case, SEED)
    msg = f"HOPPER_SEED={SEED}: {case}: error ratio {err:.3g}, guard intact {guard}"
    assert guard, "the kernel wrote outside out; " + msg
    assert err <= 1, msg
    assert ok, msg


@pytest.mark.parametrize("m, n, k, b_kmajor", [(200, 300, 1000, True), (16, 4096, 2048, True),
                                               (1, 3000, 512, True), (150, 96, 520, False),
                                               (600, 200, 520, False)])
def test_tf32x3_through_matmul(m, n, k, b_kmajor, monkeypatch):
    """gemm.matmul(precision="tf32x3") on fresh float32 data (the rules' tiles: split-K and
    swapped among them; a row-major B on a column-major copy from X3_COPY_ROWS rows of A up,
    also replayed from a CUDA graph, and on the exact SIMT kernel below): float32's bound
    against float64, and an inf and a NaN in A and a -inf in B met by whole numbers (small
    parts 0) come out as float64 has them."""
    import gemm
    from gemm import api, hopper, skinny
    real, seen = hopper.launch_matmul, []

    def spy(A, B, *args, **kw):
        seen.append((kw.get("tf32x3"), B.stride()))
        return real(A, B, *args, **kw)
    monkeypatch.setattr(hopper, "launch_matmul", spy)
    gen = torch.Generator(device="cuda").manual_seed(SEED)
    a = torch.randn((m, k), generator=gen, device="cuda")
    b = torch.randn((n, k), generator=gen, device="cuda").T if b_kmajor else \
        torch.randn((k, n), generator=gen, device="cuda")
    b[3] = torch.round(4 * b[3])
    a[:, 5] = torch.round(4 * a[:, 5])
    a[m // 2, 3], a[m - 1, k - 1], b[5, n - 1] = math.inf, math.nan, -math.inf
    out = torch.full((m, n), math.nan, device="cuda")
    assert gemm.matmul(a, b, out, precision="tf32x3") is out
    copied = not b_kmajor and m >= api.X3_COPY_ROWS
    wgmma = (b_kmajor or copied) and not skinny.fits("float32", m, n, k, 1,
                                                     "k" if b_kmajor else "n")
    k_major = [st for x3, st in seen if x3 and st[0] == 1]      # the launches with B K-major
    assert len(k_major) == wgmma, seen
    first = out.clone()
    out.fill_(math.nan)
    gemm.matmul(a, b, out, precision="tf32x3")        # again: through the kept plan
    assert torch.equal(out.nan_to_num(7.0), first.nan_to_num(7.0)), "not deterministic"
    if copied:                                        # the copy's plan in a CUDA graph
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            gemm.matmul(a, b, out, precision="tf32x3")
        out.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out.nan_to_num(7.0), first.nan_to_num(7.0)), "graph differs"
    a64, b64 = a.double(), b.double()
    ref, bound = a64 @ b64, a64.abs() @ b64.abs()
    odd = ~ref.isfinite()
    got = out.double()
    assert torch.equal(got[odd].isnan(), ref[odd].isnan()), f"HOPPER_SEED={SEED}"
    assert torch.equal(got[odd].nan_to_num(0.0), ref[odd].nan_to_num(0.0)), f"HOPPER_SEED={SEED}"
    tol = 2e-5 * math.sqrt(max(1.0, k / 64)) * bound[~odd]
    err = float(((got[~odd] - ref[~odd]).abs() / tol).max()) if tol.numel() else 0.0
    assert err <= 1, f"HOPPER_SEED={SEED}: error ratio {err:.3g}"
