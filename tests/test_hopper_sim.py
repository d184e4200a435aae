"""Bad calls of the Hopper kernel (gemm.hopper) refused clearly, in numba's CUDA simulator
(tests/sim_hopper_cases.py errors): operands TMA cannot read, a wrong config, inner
dimensions, narrow tiles of an N-major B, bad biases and activations; and a fused call that
runs, a fused decode step that swaps A and B. The kernel's values in the simulator:
tests/test_hopper_cute.py."""

import os

from simcase import check_outcomes, simulator_report

CASES = os.path.join(os.path.dirname(__file__), "sim_hopper_cases.py")


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
    "fused matmul": ("no error", ""),            # (its values: test_hopper_cute)
    # a decode step with a fused bias and activation takes the rules' swap (its values: the
    # swapped fused case of test_hopper_cute, and tests/test_gemm_gpu.py on a GPU)
    "fused decode step, swapped": ("no error", ""),
    "epilogue after the SIMT kernel, bias length": ("ValueError",
                                                    "bias of shape (15,) fits neither"),
}


def test_bad_input_gets_a_clear_error_in_simulator():
    check_outcomes(simulator_report(CASES, "errors"), EXPECTED_ERRORS)
