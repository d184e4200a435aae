"""gemm.quantize: FP8 quantization of rows in one kernel. In numba's CUDA simulator (this file
as a script in a subprocess): fresh random bfloat16 / float16 rows into e4m3 and e5m2 (an
all-zero row, a row with NaN, one with infinity, rows longer than a block's one pass), the
outputs poisoned, bit for bit against a numpy reference (float32 division, layoutalg's exact
FP8 encoder after the clamp; the scale ``amax * (1 / top)``, as torch divides by a number); bad
shapes and types refused; the kernel's PTX without local memory. On a GPU with torch:
``gemm.torch.quantize_rows`` bit for bit against torch's own operations."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:      # run as a script by the simulator test
        sys.path.insert(0, str(p))

# (rows, cols, dtype, fmt)
CASES = [(6, 40, "bfloat16", "e4m3"), (3, 1032, "float16", "e5m2"), (4, 8, "float16", "e4m3")]


def _bits16(x, dtype):
    """(uint16 bits, their float32 values) of float32 ``x`` rounded to ``dtype``."""
    if dtype == "float16":
        h = x.astype(np.float16)
        return h.view(np.uint16), h.astype(np.float32)
    u = x.view(np.uint32)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32)


def reference(values, fmt):
    """(scales, FP8 bits) of float32 rows ``values``, computed in numpy."""
    from gemm.quantize import TOP
    from layoutalg.atom.float8 import float8_encode
    with np.errstate(invalid="ignore"):
        amax = np.max(np.abs(values), axis=1)           # NaN where a row holds one
        inverse = np.float32(1) / np.float32(TOP[fmt])      # as torch's amax / 448.0
        scale = np.where(amax == 0, np.float32(1), amax * inverse)
        scale = scale.astype(np.float32)
        x = values / scale[:, None]
    top = np.float32(TOP[fmt])
    return scale, float8_encode(np.where(np.isnan(x), x, np.clip(x, -top, top)), fmt)


def case(rows, cols, dtype, fmt, seed):
    """True where the kernel's scales and bits equal the reference's."""
    from gemm.quantize import quantize_rows
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * rng.uniform(0.01, 100, (rows, 1))).astype(
        np.float32)
    x[0] = 0
    if rows > 2:
        x[1, cols // 2], x[2, 1] = np.nan, -np.inf
    bits, values = _bits16(x, dtype)
    q = np.full(rows * cols // 4, 0x7F7F7F7F, np.uint32)   # poisoned: NaN codes
    scales = np.full(rows, np.nan, np.float32)
    quantize_rows(bits.ravel(), q, scales, rows, cols, dtype, fmt)
    want_scales, want_bits = reference(values, fmt)
    return bool(np.array_equal(scales, want_scales, equal_nan=True)
                and np.array_equal(q.view(np.uint8).reshape(rows, cols), want_bits))


def errors():
    from gemm.quantize import quantize_rows
    from simcase import outcomes
    x, q, s = np.zeros(16, np.uint16), np.zeros(4, np.uint32), np.zeros(2, np.float32)
    return outcomes({
        "cols": lambda: quantize_rows(x, q, s, 2, 12, "bfloat16"),
        "dtype": lambda: quantize_rows(x, q, s, 2, 8, "float32"),
        "format": lambda: quantize_rows(x, q, s, 2, 8, "bfloat16", "e3m4"),
    })


EXPECTED_ERRORS = {
    "cols": ("ValueError", "rows of a multiple of 8 elements"),
    "dtype": ("ValueError", "bfloat16 or float16 rows"),
    "format": ("ValueError", "bfloat16 or float16 rows into ('e4m3', 'e5m2')"),
}


def run(which, seed):
    if which == "errors":
        return errors()
    return [case(*c, seed + i) for i, c in enumerate(CASES)]


def test_quantize_rows_matches_numpy_in_the_simulator():
    from simcase import simulator_report
    seed = int.from_bytes(os.urandom(3), "little")
    assert simulator_report(__file__, "cases", seed) == [True] * len(CASES), seed


def test_bad_quantize_input_gets_a_clear_error_in_the_simulator():
    from simcase import check_outcomes, simulator_report
    check_outcomes(simulator_report(__file__, "errors", 0), EXPECTED_ERRORS)


def test_quantize_kernel_compiles_without_local_memory():
    from gemm._env import simulator_active
    if simulator_active():
        pytest.skip("compile_ptx needs the real numba.cuda")
    from numba import cuda
    from gemm.quantize import SIGNATURE, _kernel_function
    ptx, _ = cuda.compile_ptx(_kernel_function("bfloat16", "e4m3"), SIGNATURE, cc=(9, 0))
    assert ".local" not in ptx and "cvt.rn.satfinite.e4m3x2.f32" in ptx
    assert "ld.global.v4" in ptx and "div.rn.f32" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("shape, dtype", [((3, 4096), "bfloat16"), ((130, 1032), "float16")])
def test_torch_quantize_rows_matches_torch_on_a_gpu(shape, dtype):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    import gemm.torch as gt
    g = torch.Generator(device="cuda").manual_seed(shape[1])
    x = (torch.randn(shape, device="cuda", generator=g) * 30).to(getattr(torch, dtype))
    x[0] = 0
    x[1, 7] = float("nan")
    q, s = gt.quantize_rows(x)
    amax = x.abs().amax(dim=1, keepdim=True).float()
    want_s = torch.where(amax == 0, 1.0, amax / 448.0)
    want_q = (x.float() / want_s).clamp(-448, 448).to(torch.float8_e4m3fn)
    rest = [0, *range(2, shape[0])]                 # row 1 holds a NaN: NaN throughout
    assert s[1].isnan() and want_s[1].isnan() and q.float()[1].isnan().all()
    assert torch.equal(s[rest], want_s[rest])
    assert torch.equal(q.view(torch.uint8)[rest], want_q.view(torch.uint8)[rest])


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], int(sys.argv[2]))))
