"""The tensor-core GEMM on a real GPU (marked ``gpu``; skipped without one).

Run it without xdist workers: a module fixture first compiles every kernel variant the
selected tests need, in parallel processes (a few minutes when numba's cache is cold):

    python3 -m pytest -n 0 -rfEs -m gpu tests/test_tensorcore_gpu.py

Fresh random shapes and data every run; ``TC_SEED=<seed>`` repeats a run (every failure
message gives the seed). The cases, the operands (outputs NaN-poisoned inside a NaN guard),
the error bounds and the parallel compile come from benchmarks/tensorcore_check.py, which
runs the same cases before timing the kernels.
"""

import os

import pytest

pytestmark = pytest.mark.gpu

from gpucase import require_gpu  # noqa: E402

require_gpu()

torch = pytest.importorskip("torch")
from benchmarks import tensorcore_check as tc  # noqa: E402

# cuBLAS as an honest second reference: no TF32, f32 reductions.
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False

SEED = int(os.environ.get("TC_SEED") or int.from_bytes(os.urandom(4), "little"))
GROUPS = tc.all_cases(SEED)
SEED_MSG = f"TC_SEED={SEED}"


@pytest.fixture(scope="module", autouse=True)
def compiled(request):
    """Compile the variants of this module's selected tests in parallel, before the first."""
    cases = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if item.module is request.module and callspec and "case" in callspec.params:
            cases.append(callspec.params["case"])
    cases = [c for c in cases if tc.kind_available(c.kind)]
    tc.compile_all(tc.plan_all(cases))
    torch.cuda.empty_cache()


def _check(case, cublas=False):
    if not tc.kind_available(case.kind):
        pytest.skip(f"{case.kind} is not installed")
    r = tc.check_case(case, SEED, cublas)
    msg = f"{SEED_MSG}: {r}"
    assert r.get("same_out", True), "the call did not return out; " + msg
    assert r.get("guard", True), "the kernel wrote outside out; " + msg
    assert r.get("result", True), "the new result has the wrong kind, dtype or shape; " + msg
    assert r["err"] <= 1, msg
    if cublas:
        assert r["cublas_err"] <= 1, "cuBLAS misses the bound: is the bound honest? " + msg
    assert r["ok"], msg


@pytest.mark.parametrize("case", GROUPS["seed"], ids=lambda c: f"{c.m}x{c.n}x{c.k}")
def test_seed_matrix_against_cublas_and_float64(case):
    """A (M, K) bf16, B_T (N, K) bf16, D (M, N) f32, as in the seed."""
    _check(case, cublas=True)


@pytest.mark.parametrize("case", GROUPS["matrix"], ids=tc.Case.key)
def test_every_dtype_major_and_out_dtype(case):
    _check(case)


@pytest.mark.parametrize("case", GROUPS["alpha_beta"], ids=tc.Case.key)
def test_alpha_beta_column_major_out(case):
    _check(case)


@pytest.mark.parametrize("case", GROUPS["kinds"], ids=tc.Case.key)
def test_torch_cupy_and_numba_operands(case):
    _check(case)


@pytest.mark.parametrize("case", GROUPS["stages"], ids=tc.Case.key)
def test_ring_depths_and_delay_release(case):
    try:
        tc.make_config(case.config)
    except ValueError as e:
        if dict(case.config).get("delay_release"):
            pytest.skip(f"the kernel refuses this combination: {e}")
        raise
    _check(case)


def test_the_bounds_catch_a_missing_k_block_and_tf32_rounding():
    """The checker is not vacuous: a product that skips one 16-deep k-block fails, and inputs
    cut to tf32 fail the bf16/f16 bound while passing the tf32 one."""
    g = torch.Generator(device="cuda").manual_seed(SEED)
    a = torch.randn(200, 64, device="cuda", generator=g, dtype=torch.float64)
    b = torch.randn(64, 300, device="cuda", generator=g, dtype=torch.float64)
    exact = a @ b
    assert tc.error_ratio(exact, a, b, "bfloat16", "float32") <= 1e-3
    skipped = a[:, 16:] @ b[16:]
    assert tc.error_ratio(skipped, a, b, "bfloat16", "float32") > 1, SEED_MSG

    def tf32(x):    # keep 10 mantissa bits (truncate)
        bits = x.float().view(torch.int32) & ~0x1FFF
        return bits.view(torch.float32).double()

    cut = tf32(a) @ tf32(b)
    assert tc.error_ratio(cut, a, b, "bfloat16", "float32") > 1, SEED_MSG
    assert tc.error_ratio(cut, a, b, "tfloat32", "float32") <= 1, SEED_MSG


@pytest.mark.parametrize("out_major", ["row", "col"])
def test_repeated_matmul_calls_reuse_one_plan(out_major):
    """gemm.matmul keeps the tensor-core launch of a torch call (the column-major out runs
    C^T = B^T A^T, so the plan swaps A and B): later calls of the same kind take it with new
    data, alpha, beta and the caller's current stream."""
    import gemm
    from gemm import api
    g = torch.Generator(device="cuda").manual_seed(SEED)
    m, n, k = 300, 200, 136

    def bf16(rows, cols):
        return torch.randn(rows, cols, device="cuda", generator=g).to(torch.bfloat16)

    # (the keys, not their count: a tuning test in another xdist worker that writes the
    # autotune cache makes this process forget its plans, gemm.call.plan.watch)
    before = set(api._plans)
    side = torch.cuda.Stream()
    for i, (alpha, beta) in enumerate(((1.0, 0.0), (2.0, 0.5), (-1.0, 1.0), (0.5, -0.25))):
        A, B = bf16(m, k), bf16(n, k).T
        C0 = torch.randn(m, n, device="cuda", generator=g)
        C = C0.clone() if out_major == "row" else C0.T.contiguous().T
        with torch.cuda.stream(side if i % 2 else torch.cuda.current_stream()):
            torch.cuda.current_stream().wait_stream(torch.cuda.default_stream())
            gemm.matmul(A, B, C, alpha=alpha, beta=beta)
        torch.cuda.synchronize()
        err = tc.error_ratio(C.double(), A.double(), B.double(), "bfloat16", "float32",
                             alpha, beta, C0.double())
        assert err <= 1, (SEED_MSG, alpha, beta, err)
    assert len(set(api._plans) - before) == 1
