"""The small-M kernel (gemm.skinny): in numba's CUDA simulator against numpy float64 (both
B majors, every dtype, alpha/beta, split-K, column-major out, partial vectors and blocks),
its PTX (no local memory, the vector loads and shuffles it is built on), the default configs
and the routing rule, and its errors."""

import os

import pytest

from gemm import skinny
from gemm.skinny import SkinnyConfig
from simcase import check_outcomes, simulator_report

CASES = os.path.join(os.path.dirname(__file__), "sim_skinny_cases.py")


def simulate(which):
    return simulator_report(CASES, which)


@pytest.mark.parametrize("b_unit", ["n", "k"])
def test_kernel_matches_numpy_in_simulator(b_unit):
    results = simulate(b_unit)
    assert len(results) == 3, results
    bad = {name: err for name, err in results.items() if not err <= 1.0}
    assert not bad, f"error / tolerance above 1: {bad}"


EXPECTED_ERRORS = {
    "bad rows": ("ValueError", "rows must be a power of two"),
    "bad vector": ("ValueError", "vector must be"),
    "bad split": ("ValueError", "split_k"),
    "bad dtype": ("ValueError", "dtype must be one of"),
    "mixed types": ("TypeError", "takes two of"),
    "config clash": ("ValueError", "the config is for"),
    "batch": ("ValueError", "not a batch"),
    "inner dims": ("ValueError", "inner dimensions"),
    "bool alpha": ("TypeError", "alpha must be a real number"),
}


def test_bad_input_gets_a_clear_error():
    check_outcomes(simulate("errors"), EXPECTED_ERRORS)


@pytest.mark.parametrize("dtype,m,b_unit", [("bfloat16", 4, "k")])
def test_ptx_has_no_local_memory(dtype, m, b_unit):
    from gemm.arch.inspect import compile_ptx, local_memory_ops
    cfg = skinny.default_config(dtype, dtype, m, b_unit)
    ptx = compile_ptx(skinny.skinny_function(cfg, b_unit), skinny._signature(cfg), cc=(9, 0))
    assert local_memory_ops(ptx) == []
    wide = "ld.global.v4.u32" if dtype != "float32" and b_unit == "k" else "ld.global"
    assert wide in ptx
    assert ("shfl.sync.bfly.b32" in ptx) == (b_unit == "k")
    assert "ld.shared.v4.f32" in ptx or cfg.rows < 4


def test_default_configs():
    # about 32 accumulators a thread (two columns at least along N), 16-byte loads of B
    # where that allows; a register cap for one row only
    for dtype in ("bfloat16", "float32"):
        for m in (1, 3, 16, 64):
            for b_unit in ("n", "k"):
                cfg = skinny.default_config(dtype, dtype, m, b_unit)
                assert cfg.rows == min(32, 1 << (m - 1).bit_length())
                per_thread = cfg.rows * (cfg.vector if b_unit == "n" else cfg.columns)
                assert per_thread <= (64 if b_unit == "n" and cfg.rows == 32 else 32)
                assert skinny._max_registers(cfg) == (64 if m == 1 else None)
    assert skinny.default_config("float32", "float32", 32, "n").vector == 2
    assert skinny.default_config("bfloat16", "bfloat16", 1, "k").vector == 8
    assert skinny.default_config("float32", "float32", 1, "n").vector == 4


def test_split_rule_and_routing():
    # enough blocks for 4 per SM, ranges of 4 chunks at least, none below 2
    assert skinny.choose_split(32, 4096, 32, 528) == 16
    assert skinny.choose_split(32, 4096, 256, 528) == 4
    assert skinny.choose_split(600, 4096, 32, 528) == 1
    assert skinny.fits("float32", 16, 4096, 4096, 1, "n")
    assert not skinny.fits("float32", 16, 4096, 4096, 1, "k")
    assert skinny.fits("float32", 8, 4096, 4096, 1, "k")
    assert not skinny.fits("float32", 17, 4096, 4096, 1, "n")
    assert not skinny.fits("bfloat16", 1, 4096, 4096, 1, "n")   # the tensor cores
    assert not skinny.fits("float32", 8, 4096, 4096, 2, "n")    # batches: the other kernels
    assert not skinny.fits("float32", 8, 64, 64, 1, "n")        # too small to be worth it


def test_kernel_refuses_an_unknown_major():
    with pytest.raises(ValueError, match="b_unit"):
        skinny.skinny_function(SkinnyConfig(), "m")
