"""The tensor-core kernel in numba's CUDA simulator (bf16, f16 and tf32, both majors of A and
B, f32/bf16/f16 out, partial tiles, odd K, alpha/beta, 1 and 4 warps, 2..5 stages,
delay_release, a grouped launch order) against numpy float64 (see sim_tensorcore_cases.py),
plus pure-Python checks of the generator: the launch order, bank conflicts of the swizzled
shared tiles and the cp.async ring's wait_group bookkeeping."""

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from gemm.codegen import Source, issued, module_tiles
from gemm.pipeline import check_ring
from gemm.tensorcore import TensorCoreConfig, Variant, cute_gemm
from gemm.tensorcore.gen import _block_order, bank_conflicts, ring_events, tensorcore_source

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
}


def test_bad_input_gets_a_clear_error():
    got = simulate("errors")
    for name, (etype, words) in EXPECTED_ERRORS.items():
        assert got[name][0] == etype, (name, got[name])
        assert words in got[name][1], (name, got[name])


class _Grid:
    """Stand-in for numba.cuda's gridDim / blockIdx in the emitted block-order lines."""

    def __init__(self, gx, gy, bx, by):
        self.gridDim = types.SimpleNamespace(x=gx, y=gy)
        self.blockIdx = types.SimpleNamespace(x=bx, y=by)


@pytest.mark.parametrize("gx,gy", [(1, 1), (4, 3), (16, 32), (32, 64), (7, 5), (33, 2)])
@pytest.mark.parametrize("group_m", [1, 3, 8, 1000])
def test_block_order_covers_every_tile_once(gx, gy, group_m):
    """The emitted launch order (gemm.tensorcore.gen._block_order) maps the blocks one to one onto
    the tiles of C; consecutive blocks sweep group_m block rows, then the next column."""
    src = Source()
    _block_order(src, group_m)
    lines = compile("\n".join(src.lines), "block order", "exec")
    tiles = []
    for by in range(gy):
        for bx in range(gx):
            env = {"U": np.uint32, "cuda": _Grid(gx, gy, bx, by)}
            exec(lines, env)
            tiles.append((int(env["bx"]), int(env["by"])))
    assert sorted(tiles) == [(x, y) for x in range(gx) for y in range(gy)]
    g = min(group_m, gx)
    assert tiles[:g] == [(x, 0) for x in range(g)]          # the first group's first column
    if gy > 1:
        assert tiles[g] == (0, 1)


@pytest.mark.parametrize("tiles_m,tiles_n", [(1, 1), (4, 3), (16, 32), (7, 5), (33, 2)])
@pytest.mark.parametrize("group_m", [1, 3, 8, 1000])
def test_grouped_order_covers_every_tile_once(tiles_m, tiles_n, group_m):
    """The SM80 kernel written with gemm.cute maps its blocks one to one onto the tiles of C;
    consecutive blocks sweep group_m tile rows, then the next column (its device function
    run as Python, on uint32 as in the kernel)."""
    order = cute_gemm.grouped_tile.py_func
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
def test_cute_kernels_shared_accesses_are_conflict_free(cfg, majors):
    """One wavefront per phase for every 16-byte cp.async store and ldmatrix row read of the
    kernel written with gemm.cute (its own tiled copies over its shared layouts), K-major or
    MN-major (ldmatrix .trans); the layouts without their swizzle make ldmatrix conflict (so
    the count can tell the difference)."""
    counts = cute_gemm.bank_conflicts(Variant(cfg, *majors))
    assert set(counts) == {"cp.async A", "cp.async B", "ldmatrix A", "ldmatrix B"}
    assert all(v == 1 for v in counts.values()), counts
    plain = cute_gemm.bank_conflicts(Variant(cfg, *majors), swizzle=False)
    assert plain["ldmatrix A"] > 1 and plain["ldmatrix B"] > 1, plain


def test_cute_kernels_tf32_fragment_loads():
    """tf32 fragments come by 4-byte shared loads: conflict-free from K-major and MN-major
    tiles (two- and four-way without the swizzle)."""
    v = Variant(TensorCoreConfig(dtype="tfloat32"), "K", "MN")
    counts = cute_gemm.bank_conflicts(v)
    assert counts == {"cp.async A": 1, "cp.async B": 1, "lds A": 1, "lds B": 1}, counts
    plain = cute_gemm.bank_conflicts(v, swizzle=False)
    assert plain["lds A"] >= 2 and plain["lds B"] >= 4, plain


@pytest.mark.parametrize("cfg", [TensorCoreConfig(), TensorCoreConfig(bK=32, stages=4),
                                 TensorCoreConfig(bM=64, bN=128, warps=(1, 4), stages=2),
                                 TensorCoreConfig(bM=32, bN=32, warps=(1, 1))])
@pytest.mark.parametrize("majors", [("K", "K"), ("MN", "MN"), ("K", "MN")])
def test_swizzled_tiles_are_conflict_free(cfg, majors):
    """One wavefront per 8-thread phase for every 16-byte cp.async store and ldmatrix row
    read of the kernel, K-major or MN-major (ldmatrix .trans); the unswizzled tiles make
    ldmatrix conflict (so the count can tell the difference)."""
    counts = bank_conflicts(cfg, majors=majors)
    assert set(counts) == {"cp.async A", "cp.async B", "ldmatrix A", "ldmatrix B"}
    assert all(v == 1 for v in counts.values()), counts
    plain = bank_conflicts(cfg, swizzle=False, majors=majors)
    assert plain["ldmatrix A"] > 1 and plain["ldmatrix B"] > 1, plain


def test_tf32_fragment_loads():
    """tf32 fragments come by 4-byte shared loads: conflict-free from K-major tiles, at most
    two-way from MN-major ones (four- to eight-way without the swizzle)."""
    cfg = TensorCoreConfig(dtype="tfloat32")
    counts = bank_conflicts(cfg, majors=("K", "MN"))
    assert counts == {"cp.async A": 1, "cp.async B": 1, "lds A": 1, "lds B": 2}, counts
    plain = bank_conflicts(cfg, swizzle=False, majors=("K", "MN"))
    assert plain["lds A"] >= 4 and plain["lds B"] >= 4, plain


@pytest.mark.parametrize("stages", range(2, 7))
def test_ring_bookkeeping(stages):
    """The kernel's ring (gemm.pipeline.emit_ring with the GEMM's body) over every
    delay_release and k-tile count, checked with cp.async's semantics; the checker catches
    a lax wait, a missing sync and one k-tile too many in flight."""
    for delay in range(stages - 1):
        for k_tiles in range(0, 3 * stages):
            for k_blocks in (2, 4):
                events = ring_events(stages, k_tiles, k_blocks, delay)
                bad = check_ring(events, k_tiles)
                assert not bad, (stages, delay, k_tiles, bad)
                reads = [e for e in events if e[0] == "read" and e[1] < k_tiles]
                assert len(reads) == k_tiles * k_blocks
    k_tiles = stages + 2
    events = ring_events(stages, k_tiles)
    lax = [("wait", e[1] + 1) if e[0] == "wait" and e[1] < stages - 1 else e for e in events]
    assert check_ring(lax, k_tiles)
    assert check_ring([e for e in events if e != ("sync",)], k_tiles)
    greedy = ring_events(stages + 1, k_tiles)       # stages + 1 slots' schedule ...
    squeezed = [e[:2] + (e[2] % stages,) if e[0] in ("copy_in", "read") else e for e in greedy]
    assert check_ring(squeezed, k_tiles)              # ... run in `stages` slots


def main_loops(text):
    """The two main loops of a kernel's source: for blocks inside the matrix with K a multiple
    of bK (no predicated copy), and for the rest."""
    lines = text.splitlines()
    start = next(i for i, s in enumerate(lines) if s.strip().startswith("if a_in and b_in"))
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    middle = lines.index(indent + "else:", start)
    end = next(i for i in range(middle + 1, len(lines))
               if lines[i].strip() and not lines[i].startswith(indent + " "))
    return "\n".join(lines[start:middle]), "\n".join(lines[middle:end])


@pytest.mark.parametrize("stages,delay", [(2, 0), (5, 0), (4, 2)])
def test_source_follows_the_ring(stages, delay):
    cfg = TensorCoreConfig(bM=32, bN=32, warps=(1, 1), stages=stages, delay_release=delay)
    module = tensorcore_source(cfg, simulator=True)
    interior, general = main_loops(module)
    assert "zfill" not in interior and "zfill" in general
    ahead = stages - 1 - delay
    for text in (interior, general):
        # before the loop, at the last k-block of each k-tile (and wait(0) after the loop)
        assert text.count(f"cp_async_wait({ahead - 1})") == 2 + (ahead == 1)
        assert text.count("cp_async_commit()") == ahead + 1
        # k-block 0 before the loop, then each of the bK/16 k-blocks: one ldmatrix x4 per
        # 16 rows of the warp's A and per 16 columns of its B
        per_kb = cfg.bM // (16 * cfg.warps[0]) + cfg.bN // (16 * cfg.warps[1])
        assert issued(module, "load_tile", "ldmatrix_x4", text) == (1 + cfg.bK // 16) * per_kb
        assert issued(module, "mma_tile", "mma_m16n8k16_f32_bf16", text) == (cfg.bK // 16) * 2 * 4


def test_source_of_the_other_majors_and_types():
    mn = tensorcore_source(Variant(TensorCoreConfig(), "MN", "MN", "bfloat16"))
    assert issued(mn, "load_tile", "ldmatrix_x4_trans") and not issued(mn, "load_tile",
                                                                       "ldmatrix_x4")
    assert "cvt_rn_bf16x2_f32(" in mn and "st_v4_b32(C" in mn
    tf = tensorcore_source(Variant(TensorCoreConfig(dtype="tfloat32"), "K", "MN"))
    assert issued(tf, "mma_tile", "mma_m16n8k8_f32_tf32") and issued(tf, "load_tile", "ld_tf32")
    assert not any(args[0].startswith("ldmatrix") for factory, args
                   in module_tiles(tf).values() if factory == "load_tile")
    assert "cuda.shared.array(0, float32)" in tf
