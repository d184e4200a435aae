"""The Hopper GEMM (gemm.hopper: TMA, wgmma, a warp-specialized pipeline) on an H100/H200
(marked ``gpu``; skipped without a GPU of compute capability 9.x).

    python3 -m pytest -n 0 -rfEs -m gpu tests/test_hopper_gpu.py

The cases, operands (NaN-poisoned outputs inside a NaN guard, leading dimensions padded to
16 bytes so that any M, N, K is tried), bounds against float64 and the parallel compile come
from benchmarks/hopper_check.py; random shapes and data are fresh every run
(``HOPPER_SEED=<seed>`` repeats one; failures print it).
"""

import os

import pytest

pytestmark = pytest.mark.gpu

from gpucase import require_gpu  # noqa: E402

require_gpu()

torch = pytest.importorskip("torch")
from benchmarks import hopper_check as hc  # noqa: E402
from layoutalg.gemm.hopper import hopper_supported  # noqa: E402

if not hopper_supported(torch.cuda.current_device()):
    pytest.skip("needs a GPU of compute capability 9.x", allow_module_level=True)

SEED = int(os.environ.get("HOPPER_SEED") or int.from_bytes(os.urandom(3), "little"))
CASES = hc.cases(SEED)


@pytest.fixture(scope="module", autouse=True)
def compiled():
    hc.compile_all(hc.variants_of(CASES, seed=SEED), min(16, os.cpu_count() or 1), print)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_matches_float64(case):
    ok, err, guard = hc.check(case, SEED)
    msg = f"HOPPER_SEED={SEED}: {case}: error ratio {err:.3g}, guard intact {guard}"
    assert guard, "the kernel wrote outside out; " + msg
    assert err <= 1, msg
    assert ok, msg
