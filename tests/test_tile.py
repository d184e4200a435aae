"""The tile-level MMA (gemm.arch.tile's ``mma_tile`` and its twin in gemm.arch.sim_tile).

The tile is checked against the same work written with the scalar instructions, whose own
tests hold them to independent references (test_sim_twins.py, test_arch_gpu.py): a kernel runs
the tile, a twin kernel runs the scalar calls in plan order on the same random inputs, and the
outputs must be equal bit for bit. The kernels run in numba's CUDA simulator (this file as a
script in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``, like test_sim_twins.py) and, when a GPU
is present, on the GPU; on a CPU they are also compiled to PTX, where the tile must issue one
instruction per plan entry and leave no local memory. Bad plans raise ValueError naming the
entry and the field.
"""

import json
import re
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:   # run as a script by the simulator test
    sys.path.insert(0, str(ROOT))

from numba import cuda  # noqa: E402

from gemm import arch  # noqa: E402
from gemm._env import simulator_active  # noqa: E402
from gemm.arch import sim_tile  # noqa: E402

U = np.uint32


# --- the tile and its scalar twin -------------------------------------------------------------

# three m16n8k16 bf16 MMAs, the last one chained on the first one's accumulators
MMA_PLAN = (((0, 1, 2, 3), (0, 1, 2, 3), (0, 1)), ((4, 5, 6, 7), (4, 5, 6, 7), (2, 3)),
            ((0, 1, 2, 3), (4, 5, 6, 7), (2, 3)))
def _tile_kernel(tile):
    """A kernel running ``tile`` (an mma_tile over MMA_PLAN's registers) on each thread's
    registers of ra, rb and rc, into out."""
    def kernel(ra, rb, rc, out):
        t = U(cuda.threadIdx.x)
        acc = cuda.local.array(8, np.float32)
        fa = cuda.local.array(8, np.uint32)
        fb = cuda.local.array(4, np.uint32)
        for i in range(8):
            fa[i] = ra[t * U(8) + U(i)]
            acc[i] = rc[t * U(8) + U(i)]
        for i in range(4):
            fb[i] = rb[t * U(4) + U(i)]
        tile(acc, fa, fb)
        for i in range(8):
            out[t * U(8) + U(i)] = acc[i]
    return kernel


k_mma_tile = _tile_kernel(arch.mma_tile("mma_m16n8k16_f32_bf16", MMA_PLAN))
# the same plan with its last entry's A registers swapped for the first one's: must differ
k_mma_broken = _tile_kernel(arch.mma_tile("mma_m16n8k16_f32_bf16", MMA_PLAN[:-1] + (
    ((0, 1, 2, 3), (0, 1, 2, 3), (2, 3)),)))


def k_mma_scalar(ra, rb, rc, out):
    t = U(cuda.threadIdx.x)
    a, b, c = t * U(8), t * U(4), t * U(8)
    c0, c1, c2, c3 = arch.mma_m16n8k16_f32_bf16(
        ra[a], ra[a + U(1)], ra[a + U(2)], ra[a + U(3)], rb[b], rb[b + U(1)],
        rc[c], rc[c + U(1)], rc[c + U(2)], rc[c + U(3)])
    c4, c5, c6, c7 = arch.mma_m16n8k16_f32_bf16(
        ra[a + U(4)], ra[a + U(5)], ra[a + U(6)], ra[a + U(7)], rb[b + U(2)], rb[b + U(3)],
        rc[c + U(4)], rc[c + U(5)], rc[c + U(6)], rc[c + U(7)])
    c0, c1, c2, c3 = arch.mma_m16n8k16_f32_bf16(
        ra[a + U(4)], ra[a + U(5)], ra[a + U(6)], ra[a + U(7)], rb[b + U(2)], rb[b + U(3)],
        c0, c1, c2, c3)
    out[c], out[c + U(1)], out[c + U(2)], out[c + U(3)] = c0, c1, c2, c3
    out[c + U(4)], out[c + U(5)], out[c + U(6)], out[c + U(7)] = c4, c5, c6, c7


# --- the case: one input set, the tile kernel and the scalar kernel ---------------------------

def _bf16_regs(rng, n):
    """n uint32 registers of two bf16 each (values in [-2, 2), exactly representable)."""
    halves = (rng.integers(-64, 64, 2 * n) / 32).astype(np.float32).view(np.uint32) >> 16
    return (halves[0::2] | (halves[1::2] << 16)).astype(np.uint32)


def cases(seed=0):
    """{name: (tile kernel, scalar kernel, block threads, inputs, output indices)}; inputs
    are host arrays, outputs the indices of the arrays written."""
    rng = np.random.default_rng(seed)
    inputs = [_bf16_regs(rng, 256), _bf16_regs(rng, 128),
              rng.uniform(-2, 2, 256).astype(np.float32), np.full(256, np.nan, np.float32)]
    return {"mma_tile": (k_mma_tile, k_mma_scalar, 32, inputs, [3]),
            "mma_tile broken": (k_mma_broken, k_mma_scalar, 32, inputs, [3])}


def run_case(name, to_device=None):
    """Run both kernels of a case; the tile kernel's outputs and the scalar kernel's."""
    kt, ks, threads, inputs, outs = cases()[name]
    results = []
    for kernel in (kt, ks):
        args = [a.copy() for a in inputs]
        dev = [cuda.to_device(a) for a in args]
        cuda.jit(kernel)[1, threads](*dev)
        results.append([dev[i].copy_to_host() for i in outs])
    return results


def same(tile, scalar):
    """Equal bit for bit (NaN outputs included)."""
    for x, y in zip(tile, scalar):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(x.view(np.uint8), y.view(np.uint8)), (x, y)


def run_checks():
    """Both cases in this process; {name: "ok" or the failure}: the tile equal to its scalar
    instructions, and the broken plan caught (the comparison can fail)."""
    report = {}
    for name in cases():
        try:
            if name.endswith("broken"):
                with pytest.raises(AssertionError):
                    same(*run_case(name))
            else:
                same(*run_case(name))
            report[name] = "ok"
        except BaseException:       # pytest.raises' failure is not an Exception
            report[name] = traceback.format_exc(limit=4)
    return report


# --- in the simulator -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def simulator_report():
    from simcase import simulator_report
    return simulator_report(__file__)


def test_tile_equals_its_scalar_instructions_in_simulator(simulator_report):
    assert set(simulator_report) == set(cases())
    failed = {k: v for k, v in simulator_report.items() if v != "ok"}
    assert not failed, "\n".join(f"{k}:\n{v}" for k, v in failed.items())


# --- on the GPU -------------------------------------------------------------------------------

def _has_gpu():
    if simulator_active():
        return False
    try:
        return cuda.is_available() and cuda.get_current_device().compute_capability >= (8, 0)
    except Exception:  # noqa: BLE001 - no driver at all
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU of compute capability >= 8.0")
def test_tile_equals_its_scalar_instructions_on_gpu():
    same(*run_case("mma_tile"))


# --- PTX on the CPU ---------------------------------------------------------------------------

@pytest.mark.skipif(simulator_active(), reason="compiles PTX: needs the real numba.cuda")
def test_tile_issues_one_instruction_per_entry_and_no_local_memory():
    ptx, _ = cuda.compile_ptx(k_mma_tile, "void(uint32[::1], uint32[::1], float32[::1], "
                              "float32[::1])", cc=(8, 0))
    assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16", ptx)) == 3
    assert ".local" not in ptx


# --- plans ------------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", ["ptx", "sim"])
@pytest.mark.parametrize("make,message", [
    (lambda m: m.mma_tile("mma_m16n8k16_f32_bf16", (((0, 1, 2), (0, 1, 2, 3), (0, 1)),)),
     "plan entry 0, field 0 must be a tuple of 4 register indices"),
    (lambda m: m.mma_tile("mma_m99", (((0, 1, 2, 3), (0, 1, 2, 3), (0, 1)),)),
     "op must be one of"),
    (lambda m: m.mma_tile("mma_m16n8k16_f32_bf16", ()), "non-empty tuple"),
    (lambda m: m.mma_tile("mma_m16n8k16_f32_bf16", (((0, 1, 2, 3), (0, 1, 2, 3)),)),
     "must be a tuple of 3 fields"),
])
def test_bad_plans_are_refused(impl, make, message):
    if impl == "ptx":
        if simulator_active():
            pytest.skip("the PTX layer needs the real numba.cuda")
        from gemm.arch import tile as module
    else:
        module = sim_tile
    with pytest.raises(ValueError, match=re.escape(message)):
        make(module)


if __name__ == "__main__":
    print(json.dumps(run_checks()))
