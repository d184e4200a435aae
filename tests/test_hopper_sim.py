"""The Hopper kernel (gemm.hopper) run in numba's CUDA simulator on the twins of its
instructions (gemm.arch.sim_sm90): TMA loads with zero fill past the edges, mbarriers,
wgmma read through the kernel's own descriptors, the epilogue's stores. Small odd shapes,
every major of A, B and the out, bf16 / f16 / tf32 in, f32 / bf16 / f16 out, alpha and
beta, the three schedules, delay_release, both epilogues (stores from registers, and pieces
staged in shared memory and written by TMA), split-K with its reduction, swap_ab, a batch,
3xTF32 (float32 data checked with float32's bound; an inf and a NaN kept as float64 has them);
each against numpy float64 with the out poisoned (tests/sim_hopper_cases.py)."""

import os

import pytest

from simcase import check_outcomes, simulator_report

CASES = os.path.join(os.path.dirname(__file__), "sim_hopper_cases.py")


@pytest.mark.parametrize("which", ["majors", "more"])
def test_kernel_matches_numpy_in_simulator(which):
    results = simulator_report(CASES, which)
    assert len(results) == {"majors": 4, "more": 6}[which], results
    bad = {name: err for name, err in results.items() if not err <= 1.0}
    assert not bad, f"error / tolerance above 1: {bad}"


EXPECTED_ERRORS = {
    "unaligned ld": ("TmaUnfit", "leading dimension (27 elements)"),
    "MN-major tf32": ("TmaUnfit", "must be K-major"),
    "config type": ("TypeError", "config must be a HopperConfig"),
    "inner dims": ("ValueError", "inner dimensions"),
    "narrow tile, B N-major": ("ValueError", "need B, the operand on the tile's columns, "
                                             "contiguous along K"),
    "bias length": ("ValueError", "bias of shape (15,) fits neither out's columns ((16,)"),
    "bias type": ("TypeError", "bias must be float32, bfloat16 or float16, not int32"),
    "bias strided": ("ValueError", "bias must be contiguous (its stride is 2 elements)"),
    "bias matrix": ("ValueError", "bias of shape (16, 16) fits neither"),
    "activation name": ("ValueError", "unknown activation 'gelu_erf'"),
    "activation type": ("TypeError", "activation must be None or one of"),
    "fused matmul": ("no error", ""),            # (its values: test_hopper_cute on a GPU)
    "epilogue after the SIMT kernel, bias length": ("ValueError",
                                                    "bias of shape (15,) fits neither"),
}


def test_bad_input_gets_a_clear_error_in_simulator():
    check_outcomes(simulator_report(CASES, "errors"), EXPECTED_ERRORS)
