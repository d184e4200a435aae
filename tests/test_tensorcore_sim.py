"""The tensor-core kernel in numba's CUDA simulator (bf16, f16 and tf32, both majors of A and
B, f32/bf16/f16 out, partial tiles, odd K, alpha/beta, 1 and 4 warps, 2..5 stages,
delay_release, a grouped launch order) against numpy float64 (see sim_tensorcore_cases.py);
the simulator's cp.async lands copies only at the wait that covers them, so a ring that waits
too little fails there. Plus pure-Python checks of the kernel's launch order and of the bank
conflicts of its swizzled shared tiles."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gemm.cute.scheduler import grouped_tile
from gemm.tensorcore import TensorCoreConfig, Variant, cute_gemm

HERE = os.path.dirname(__file__)


def simulate(which):
    root = os.path.dirname(HERE)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, os.path.join(HERE, "sim_tensorcore_cases.py"), which],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("which", ["bfloat16-11", "float16-22", "tfloat32"])
def test_kernel_matches_numpy_in_simulator(which):
    results = simulate(which)
    assert len(results) >= 2, results
    bad = {name: err for name, err in results.items() if not err <= 1.0}
    assert not bad, f"error / tolerance above 1: {bad}"


EXPECTED_ERRORS = {
    "inner dims": ("ValueError", "inner dimensions"),
    "float64 A": ("TypeError", "float64"),
    "int32 B": ("TypeError", "int32"),
    "mixed types": ("TypeError", "must match"),
    "beta without out": ("ValueError", "beta"),
    "out float64": ("TypeError", "out has dtype"),
    "out_dtype clash": ("ValueError", "out_dtype"),
    "no unit stride": ("ValueError", "stride must be 1"),
    "bad stages": ("ValueError", "stages"),
    "bad delay": ("ValueError", "delay_release"),
    "bad bK": ("ValueError", "bK"),
    "bad bK tf32": ("ValueError", "bK must be 16 or 32"),
    "bad config type": ("TypeError", "TensorCoreConfig"),
    "too much shared memory": ("ValueError", "exceed the 232448 a block can have"),
    "bad group_m": ("ValueError", "group_m must be a positive int"),
    "epilogue threads": ("ValueError", "cannot store C's 64 runs"),
}


def test_bad_input_gets_a_clear_error():
    got = simulate("errors")
    for name, (etype, words) in EXPECTED_ERRORS.items():
        assert got[name][0] == etype, (name, got[name])
        assert words in got[name][1], (name, got[name])


@pytest.mark.parametrize("tiles_m,tiles_n", [(1, 1), (4, 3), (16, 32), (7, 5), (33, 2)])
@pytest.mark.parametrize("group_m", [1, 3, 8, 1000])
def test_grouped_order_covers_every_tile_once(tiles_m, tiles_n, group_m):
    """The launch order of the SM80 and Hopper kernels (gemm.cute.scheduler.grouped_tile)
    maps the blocks one to one onto the tiles of C; consecutive blocks sweep group_m tile
    rows, then the next column (the device function run as Python, on uint32 as in the
    kernels)."""
    order = grouped_tile.py_func
    U = np.uint32
    tiles = [tuple(int(x) for x in order(U(pid), U(tiles_m), U(tiles_n), U(group_m)))
             for pid in range(tiles_m * tiles_n)]
    assert sorted(tiles) == [(x, y) for x in range(tiles_m) for y in range(tiles_n)]
    g = min(group_m, tiles_m)
    assert tiles[:g] == [(x, 0) for x in range(g)]          # the first group's first column
    if tiles_n > 1:
        assert tiles[g] == (0, 1)


@pytest.mark.parametrize("cfg", [TensorCoreConfig(), TensorCoreConfig(bK=32, stages=4),
                                 TensorCoreConfig(bM=64, bN=128, warps=(1, 4), stages=2),
                                 TensorCoreConfig(bM=32, bN=32, warps=(1, 1))])
@pytest.mark.parametrize("majors", [("K", "K"), ("MN", "MN"), ("K", "MN")])
def test_swizzled_tiles_are_conflict_free(cfg, majors):
    """One wavefront per phase for every 16-byte cp.async store and ldmatrix row read of the
    kernel (its own tiled copies over its shared layouts), K-major or
    MN-major (ldmatrix .trans); the layouts without their swizzle make ldmatrix conflict (so
    the count can tell the difference)."""
    counts = cute_gemm.bank_conflicts(Variant(cfg, *majors))
    assert set(counts) == {"cp.async A", "cp.async B", "ldmatrix A", "ldmatrix B"}
    assert all(v == 1 for v in counts.values()), counts
    plain = cute_gemm.bank_conflicts(Variant(cfg, *majors), swizzle=False)
    assert plain["ldmatrix A"] > 1 and plain["ldmatrix B"] > 1, plain


def test_tf32_fragment_loads():
    """tf32 fragments come by 4-byte shared loads: conflict-free from K-major and MN-major
    tiles (two- and four-way without the swizzle)."""
    v = Variant(TensorCoreConfig(dtype="tfloat32"), "K", "MN")
    counts = cute_gemm.bank_conflicts(v)
    assert counts == {"cp.async A": 1, "cp.async B": 1, "lds A": 1, "lds B": 1}, counts
    plain = cute_gemm.bank_conflicts(v, swizzle=False)
    assert plain["lds A"] >= 2 and plain["lds B"] >= 4, plain
