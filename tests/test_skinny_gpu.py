"""The small-M kernel (gemm.skinny) on a GPU (marked ``gpu``): fresh random operands of odd
shapes in both B majors, bf16 / f16 / f32, the out poisoned with NaN, against float64; the
default route of gemm.matmul for few rows, explicit splits, alpha/beta, a column-major out."""

import os

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

from gpucase import require_gpu  # noqa: E402

require_gpu()

torch = pytest.importorskip("torch")
import gemm  # noqa: E402
from gemm import skinny  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")
TYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def _error(out, a, b, alpha=1.0, beta=0.0, c0=None):
    a64, b64 = a.double(), b.double()
    ref, bound = alpha * (a64 @ b64), abs(alpha) * (a64.abs() @ b64.abs())
    if c0 is not None:
        ref, bound = ref + beta * c0.double(), bound + abs(beta) * c0.double().abs()
    rounding = {torch.float32: 0.0, torch.bfloat16: 2 ** -8, torch.float16: 2 ** -11}[out.dtype]
    tol = 1e-5 * bound + rounding * ref.abs() + 1e-30
    return float(((out.double() - ref).abs() / tol).nan_to_num(nan=float("inf")).max())


def _operands(rng, m, n, k, dtype, b_unit):
    t = TYPES[dtype]
    a = torch.from_numpy(rng.standard_normal((m, k), dtype=np.float32)).cuda().to(t)
    w = torch.from_numpy(rng.standard_normal((n, k), dtype=np.float32)).cuda().to(t)
    return a, (w.T if b_unit == "k" else w.T.contiguous())


@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("b_unit", ["n", "k"])
def test_against_float64(dtype, b_unit):
    """float32 through gemm.matmul's default route, bf16 / f16 with the default config."""
    rng = np.random.default_rng(SEED)
    top = 32 if dtype == "float32" else 16
    shapes = [(1, 4096, 4096), (top, 1000, 3000)]
    shapes += [(int(rng.integers(1, top + 1)), int(rng.integers(600, 3000)),
                int(rng.integers(500, 5000))) for _ in range(4)]
    for m, n, k in shapes:
        a, b = _operands(rng, m, n, k, dtype, b_unit)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=TYPES[dtype])
        if skinny.fits(dtype, m, n, k, 1, b_unit):
            gemm.matmul(a, b, out)
        else:
            skinny.launch_matmul(a, b, out, 1.0, 0.0, None, None)
        err = _error(out, a, b)
        assert err <= 1.0, f"seed {SEED} {m}x{n}x{k} {dtype} B {b_unit}-major: {err}"


@pytest.mark.parametrize("split", [1, 3, 7])
def test_explicit_splits_alpha_beta_column_out(split):
    rng = np.random.default_rng(SEED + split)
    for dtype, b_unit, m, n, k in (("bfloat16", "k", 5, 777, 2049),
                                   ("float32", "n", 33, 515, 1999)):
        a, b = _operands(rng, m, n, k, dtype, b_unit)
        c0 = torch.from_numpy(rng.standard_normal((n, m), dtype=np.float32)).cuda().T
        out = c0.clone()
        cfg = skinny.default_config(dtype, "float32", m, b_unit)
        cfg = skinny.SkinnyConfig(**{**cfg.__dict__, "split_k": split})
        skinny.launch_matmul(a, b, out, 0.5, -2.0, cfg, "float32")
        err = _error(out, a, b, 0.5, -2.0, c0)
        assert err <= 1.0, f"seed {SEED} split {split} {dtype}: {err}"
