"""The tensor-core kernel in numba's CUDA simulator (bf16 and f16, partial tiles, odd K,
alpha/beta, 1 and 4 warps, 2..5 stages) against numpy float64 (see sim_tensorcore_cases.py),
plus pure-Python checks of the generator: bank conflicts of the swizzled shared tiles and
the cp.async ring's wait_group bookkeeping."""

import json
import os
import subprocess
import sys

import pytest

from gemm.tensorcore import (TensorCoreConfig, bank_conflicts, check_ring, ring_schedule,
                             tensorcore_source)

HERE = os.path.dirname(__file__)


def simulate(which):
    root = os.path.dirname(HERE)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, os.path.join(HERE, "sim_tensorcore_cases.py"), which],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("which", ["bfloat16-11", "float16-22"])
def test_kernel_matches_numpy_in_simulator(which):
    results = simulate(which)
    assert len(results) >= 2, results
    bad = {name: err for name, err in results.items() if not err <= 1.0}
    assert not bad, f"error / tolerance above 1: {bad}"


EXPECTED_ERRORS = {
    "inner dims": ("ValueError", "inner dimensions"),
    "float32 A": ("TypeError", "float32"),
    "int32 B": ("TypeError", "int32"),
    "B row-major": ("ValueError", "contiguous along K"),
    "beta without out": ("ValueError", "beta"),
    "out float16": ("TypeError", "out has dtype"),
    "bad stages": ("ValueError", "stages"),
    "bad bK": ("ValueError", "bK"),
    "bad config type": ("TypeError", "TensorCoreConfig"),
}


def test_bad_input_gets_a_clear_error():
    got = simulate("errors")
    for name, (etype, words) in EXPECTED_ERRORS.items():
        assert got[name][0] == etype, (name, got[name])
        assert words in got[name][1], (name, got[name])


@pytest.mark.parametrize("cfg", [TensorCoreConfig(), TensorCoreConfig(bK=64, stages=4),
                                 TensorCoreConfig(bM=64, bN=128, warps=(1, 4), stages=2),
                                 TensorCoreConfig(bM=32, bN=32, warps=(1, 1))])
def test_swizzled_tiles_are_conflict_free(cfg):
    """One wavefront per 8-thread phase for every 16-byte cp.async store and ldmatrix row
    read of the kernel; the plain K-major tile makes ldmatrix conflict (so the count can
    tell the difference)."""
    counts = bank_conflicts(cfg)
    assert set(counts) == {"cp.async A", "cp.async B", "ldmatrix A", "ldmatrix B"}
    assert all(v == 1 for v in counts.values()), counts
    plain = bank_conflicts(cfg, swizzle=False)
    assert plain["ldmatrix A"] > 1 and plain["ldmatrix B"] > 1, plain


@pytest.mark.parametrize("stages", range(2, 7))
def test_ring_bookkeeping(stages):
    for k_tiles in range(1, 3 * stages):
        for k_blocks in (2, 4):
            events = ring_schedule(stages, k_tiles, k_blocks)
            assert not check_ring(events, k_tiles), (stages, k_tiles, check_ring(events, k_tiles))
            reads = [e for e in events if e[0] == "read" and e[1] < k_tiles]
            assert len(reads) == k_tiles * k_blocks
    # The checker catches the drain trap (no empty groups at the end) and a lax wait.
    k_tiles = stages + 2
    events = ring_schedule(stages, k_tiles)
    no_empty = []
    for i, e in enumerate(events):
        if e == ("commit",) and (i == 0 or events[i - 1][0] != "issue"):
            continue
        no_empty.append(e)
    if stages > 2:      # with wait_group 0 everywhere there is no drain trap to fall into
        assert check_ring(no_empty, k_tiles)
    lax = [("wait", stages - 1) if e[0] == "wait" else e for e in events]
    assert check_ring(lax, k_tiles)


def test_source_follows_the_ring():
    for stages in (2, 5):
        cfg = TensorCoreConfig(bM=32, bN=32, warps=(1, 1), stages=stages)
        text = tensorcore_source(cfg, simulator=True)
        # before the loop, at the last k-block of each k-tile (and wait(0) before the epilogue)
        assert text.count(f"cp_async_wait({stages - 2})") == 2 + (stages == 2)
        assert text.count("cp_async_commit()") == stages
        # k-block 0 before the loop, then each of the bK/16 k-blocks: one ldmatrix x4 per
        # 16 rows of the warp's A and per 16 columns of its B
        per_kb = cfg.bM // (16 * cfg.warps[0]) + cfg.bN // (16 * cfg.warps[1])
        assert text.count("ldmatrix_x4(") == (1 + cfg.bK // 16) * per_kb
        assert text.count("mma_m16n8k16_f32_bf16(") == (cfg.bK // 16) * 2 * 4
