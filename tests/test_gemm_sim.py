"""The SIMT kernels in numba's CUDA simulator: partial tiles, all four operand majors,
alpha/beta, against numpy float64 (see sim_gemm_cases.py)."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)


def simulate(which):
    root = os.path.dirname(HERE)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, os.path.join(HERE, "sim_gemm_cases.py"), which],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("which", ["prefetch", "double_buffer", "tuned", "default", "cute"])
def test_kernel_matches_numpy_in_simulator(which):
    results = simulate(which)
    assert results, "no case ran"
    bad = {name: err for name, err in results.items() if not err <= 1.0}
    assert not bad, f"error / tolerance above 1: {bad}"


EXPECTED_ERRORS = {
    "inner dims": ("ValueError", "inner dimensions"),
    "4-D": ("ValueError", "2-D matrix or a 3-D batch"),
    "batches differ": ("ValueError", "must agree"),
    "2-D out of a batch": ("ValueError", "expected (2, 4, 4)"),
    "overlapping out": ("ValueError", "overlap"),
    "reversed batch": ("ValueError", "batch stride -12"),
    "float64": ("TypeError", "float64"),
    "int32": ("TypeError", "int32"),
    "host array": ("TypeError", "host"),
    "strided view": ("ValueError", "stride"),
    "beta without out": ("ValueError", "beta"),
    "out shape": ("ValueError", "out has shape"),
    "unknown kernel": ("ValueError", "unknown kernel"),
    "out_dtype on SIMT": ("TypeError", "writes float32"),
    "bad stream": ("TypeError", "stream must be"),
}


def test_batched_and_broadcast_products_match_numpy_in_simulator():
    """torch.matmul's batches: (B, M, K) @ (B, K, N), a 2-D or batch-of-1 operand shared by
    every product, any majors, a given, new or interleaved out, on the SIMT and tensor-core
    kernels in one launch each, and a batch too large for one launch in parts."""
    results = simulate("batches")
    assert len(results) == 7, results
    bad = {name: err for name, err in results.items() if not err <= 1.0}
    assert not bad, f"error / tolerance above 1: {bad}"


def test_split_k_matches_numpy_in_simulator():
    """Split-K's second kernel (the partials, f32 or 16-bit, added in order with alpha and
    beta, converted to each out type, only the out's elements written; element by element,
    and in 16-byte vectors where the rows are aligned), and the SIMT kernels with split-K
    (uneven K ranges, a batch, row- and column-major outs)."""
    results = simulate("splitk")
    assert len(results) == 13, results
    bad = {name: err for name, err in results.items() if not err <= 1.0}
    assert not bad, f"error / tolerance above 1: {bad}"


def test_bad_input_gets_a_clear_error():
    got = simulate("errors")
    for name, (etype, words) in EXPECTED_ERRORS.items():
        assert got[name][0] == etype, (name, got[name])
        assert words in got[name][1], (name, got[name])


def test_empty_extents_and_the_out_type_follow_torch_mm():
    got = simulate("empty")
    assert got["M=0 shape"] == [0, 4] and got["N=0 shape"] == [2, 0]
    assert got["K=0 no out"] == [[0.0] * 3] * 2
    assert got["K=0 beta 0 over NaN"] == [[0.0] * 3] * 2          # BLAS: out is not read
    assert got["K=0 beta -2"] == [[0.0, -2.0, -4.0], [-6.0, -8.0, -10.0]]
    assert got["f16 default out"] == "float16" and got["f16 out_dtype f32"] == "float32"
