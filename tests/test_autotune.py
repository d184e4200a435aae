"""gemm.tuning.autotune and matmul's choice of kernel, without a GPU.

In this process: the candidate list, the on-disk cache (round trip, atomic writes, corrupt
files), ``tune`` with its compile and timing steps replaced by fakes, the real spawned compile
pool on a stand-in compile function, and matmul's routing rules. In a child process under
numba's CUDA simulator (this file run as a script): matmul on real simulator arrays, with
the tensor-core kernel run for real on small tiles and replaced by a recording stand-in where
only the choice of config matters.
"""

import json
import math
import os
import subprocess
import sys

import pytest

from gemm.tuning import autotune
from gemm import tensorcore as tc
from gemm.api import KERNELS, route
from gemm.simt import SimtConfig
from gemm.tensorcore import TensorCoreConfig

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache file for the test, through the environment variable."""
    path = tmp_path / "sub" / "autotune.json"
    monkeypatch.setenv(autotune.CACHE_ENV, str(path))
    return path


# --- candidates --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "tfloat32"])
def test_candidates_are_valid_distinct_and_fit_shared_memory(dtype):
    configs = autotune.candidates(dtype)
    assert 12 <= len(configs) <= 24
    assert len(set(configs)) == len(configs)
    row_bytes = set()
    for cfg in configs:
        assert isinstance(cfg, TensorCoreConfig) and cfg.dtype == dtype
        assert cfg.shared_bytes <= 227 * 1024
        row_bytes.add(cfg.bK * (4 if dtype == "tfloat32" else 2))
    assert row_bytes == {64, 128}           # the same ring depths in bytes for every type
    small = autotune.candidates(dtype, smem_limit=48 * 1024)
    assert small and len(small) < len(configs)
    assert all(c.shared_bytes <= 48 * 1024 for c in small)
    assert set(small) <= set(configs)


def test_candidates_skip_configs_that_do_not_construct(monkeypatch):
    class NoDeepTiles(TensorCoreConfig):
        def __post_init__(self):
            if self.bK == 64:
                raise ValueError("no bK=64 here")
            super().__post_init__()

    every = autotune.candidates("bfloat16")
    monkeypatch.setattr(tc, "TensorCoreConfig", NoDeepTiles)
    kept = autotune.candidates("bfloat16")
    assert kept and all(c.bK == 32 for c in kept)
    assert len(kept) == sum(c.bK == 32 for c in every)


@pytest.mark.parametrize("args, match", [(("float64",), "dtype must be one of"),
                                         (("bfloat16", 0), "smem_limit"),
                                         (("bfloat16", 1.5e5), "smem_limit")])
def test_candidates_refuse_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        autotune.candidates(*args)


# --- the cache ---------------------------------------------------------------------------------

WINNER = TensorCoreConfig(bM=128, bN=256, bK=32, warps=(2, 4), stages=4)
OTHER = TensorCoreConfig(bM=64, bN=64, bK=64, warps=(2, 2), stages=3)


def test_cache_path_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(autotune.CACHE_ENV, str(tmp_path / "x.json"))
    assert autotune.cache_path() == str(tmp_path / "x.json")
    monkeypatch.delenv(autotune.CACHE_ENV)
    assert autotune.cache_path().endswith(os.path.join(".cache", "layoutalg-gemm",
                                                       "autotune.json"))


def test_cache_round_trips(cache):
    assert autotune.lookup("k1") is None                    # no file yet
    autotune.record("k1", WINNER, [(OTHER, 2.5), (WINNER, 1.25)], [(OTHER, "ValueError: x")])
    autotune.record("k2", OTHER, [(OTHER, 3.0)])
    assert autotune.lookup("k1") == WINNER and autotune.lookup("k2") == OTHER
    assert autotune.lookup("k3") is None
    entry = json.loads(cache.read_text())["entries"]["k1"]
    assert [t["ms"] for t in entry["timings_ms"]] == [1.25, 2.5]      # fastest first
    assert entry["label"] == "128x256x32 w2x4 s4"
    assert entry["failed"] == [{"config": entry["timings_ms"][1]["config"],
                                "label": "64x64x64 w2x2 s3", "error": "ValueError: x"}]


def test_cache_sees_a_write_by_another_process(cache):
    autotune.record("k", WINNER, [(WINNER, 1.0)])
    assert autotune.lookup("k") == WINNER
    data = json.loads(cache.read_text())
    data["entries"]["k"]["config"]["stages"] = 5
    data["entries"]["k"]["config"]["bN"] = 128
    cache.write_text(json.dumps(data))
    assert autotune.lookup("k") == TensorCoreConfig(bM=128, bN=128, bK=32, warps=(2, 4), stages=5)


def test_cache_write_is_atomic(cache, monkeypatch):
    autotune.record("old", OTHER, [(OTHER, 1.0)])
    before = cache.read_text()
    real_replace = os.replace
    seen = []

    def checking_replace(src, dst):
        # The target still holds the old file and the new one is complete beside it.
        assert os.path.samefile(os.path.dirname(src), os.path.dirname(dst))
        assert open(dst).read() == before
        seen.append(set(json.load(open(src))["entries"]))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", checking_replace)
    autotune.record("new", WINNER, [(WINNER, 1.0)])
    assert seen == [{"old", "new"}]
    assert sorted(os.listdir(cache.parent)) == ["autotune.json"]


def test_failed_write_warns_and_leaves_the_old_file(cache, monkeypatch):
    autotune.record("old", OTHER, [(OTHER, 1.0)])
    before = cache.read_text()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.warns(autotune.AutotuneCacheWarning, match="could not be written.*disk full"):
        autotune.record("new", WINNER, [(WINNER, 1.0)])
    assert cache.read_text() == before
    assert sorted(os.listdir(cache.parent)) == ["autotune.json"]     # no temporary file left


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"format": 99, "entries": {}}',
                                     "\udcff"])
def test_corrupt_cache_warns_and_reads_as_empty(cache, content):
    cache.parent.mkdir(parents=True)
    cache.write_bytes(content.encode("utf-8", "surrogateescape"))
    with pytest.warns(autotune.AutotuneCacheWarning, match="unreadable or corrupt"):
        assert autotune.lookup("k") is None
    autotune.record("k", WINNER, [(WINNER, 1.0)])     # a later result replaces the bad file
    assert autotune.lookup("k") == WINNER


def test_unreadable_cache_warns(cache):
    cache.mkdir(parents=True)                         # a folder where the file should be
    with pytest.warns(autotune.AutotuneCacheWarning, match="unreadable"):
        assert autotune.lookup("k") is None


def test_stored_config_this_version_cannot_build_is_ignored(cache):
    autotune.record("k", WINNER, [(WINNER, 1.0)])
    data = json.loads(cache.read_text())
    data["entries"]["k"]["config"]["no_such_field"] = 1
    cache.write_text(json.dumps(data))
    with pytest.warns(autotune.AutotuneCacheWarning, match="cannot use stored config"):
        assert autotune.lookup("k") is None


# --- tune, with fake compile and timing steps --------------------------------------------------

FAKE_SMEM = 100 * 1024


@pytest.fixture
def fake_gpu(monkeypatch, cache):
    """tune's GPU-facing steps replaced: the problem, planning, compiling and timing. A
    config's time is a function of its shape; one config fails to plan, one to compile."""
    calls = {"compiled": [], "timed": []}
    fail_plan = TensorCoreConfig(bM=64, bN=64, bK=32, warps=(2, 2), stages=4)
    fail_compile = TensorCoreConfig(bM=128, bN=128, bK=32, warps=(2, 2), stages=4)

    def plan_call(A, B, out=None, *, config=None, out_dtype=None):
        assert (A, B) == ("A", "B")
        if config == fail_plan:
            raise ValueError("tile does not fit")
        return ("variant", config)

    def compile_all(variants, workers=None, progress=True):
        calls["compiled"] += list(variants)
        return {("variant", fail_compile): "RuntimeError: ptxas died"}

    def measure(A, B, out, cfg, out_dtype, reps, warmup):
        calls["timed"].append((cfg, out, out_dtype, reps, warmup))
        return fake_ms(cfg), "scratch"

    monkeypatch.setattr(autotune, "simulator_active", lambda: False)
    monkeypatch.setattr(autotune, "_problem", lambda A, B, out, out_dtype, caller:
                        autotune._Problem("fake key", "bfloat16", out_dtype or "float32", 0))
    monkeypatch.setattr(autotune, "_device_info", lambda index: ("Fake", (9, 0), FAKE_SMEM))
    monkeypatch.setattr(tc, "plan_call", plan_call, raising=False)
    monkeypatch.setattr(autotune, "_compile_all", compile_all)
    monkeypatch.setattr(autotune, "_measure", measure)
    calls["fail_plan"], calls["fail_compile"] = fail_plan, fail_compile
    return calls


def fake_ms(cfg):
    """Fastest: 128x128x32 with 4 stages (it fails to compile), then 128x128x32 w2x4 s4."""
    return (abs(cfg.bM - 128) + abs(cfg.bN - 128)) / 64 + abs(cfg.stages - 4) + cfg.bK / 32 \
        + (cfg.warps != (2, 2)) * 0.5


def test_tune_picks_the_fastest_that_works_and_stores_every_timing(fake_gpu, cache, capsys):
    winner = autotune.tune("A", "B", reps=7, warmup=2)
    expected = [c for c in autotune.candidates("bfloat16", FAKE_SMEM)
                if c not in (fake_gpu["fail_plan"], fake_gpu["fail_compile"])]
    assert winner == min(expected, key=fake_ms)
    assert winner == TensorCoreConfig(bM=128, bN=128, bK=32, warps=(2, 4), stages=4)
    # Every candidate within the device's shared memory, and only those, was planned.
    assert len(fake_gpu["compiled"]) == len(autotune.candidates("bfloat16", FAKE_SMEM)) - 1
    timed = fake_gpu["timed"]
    assert [t[0] for t in timed] == expected
    assert {t[3:] for t in timed} == {(7, 2)}
    assert timed[0][1] is None and all(t[1] == "scratch" for t in timed[1:])
    assert autotune.lookup("fake key") == winner
    entry = json.loads(cache.read_text())["entries"]["fake key"]
    assert len(entry["timings_ms"]) == len(expected)
    assert entry["timings_ms"][0]["ms"] == fake_ms(winner)
    assert {f["error"] for f in entry["failed"]} == {"ValueError: tile does not fit",
                                                     "RuntimeError: ptxas died"}
    err = capsys.readouterr().err
    assert "timing" in err and f"{len(expected) + 2}/{len(expected) + 2}" in err   # the bar
    assert "skipped 128x128x32 w2x2 s4: RuntimeError: ptxas died" in err
    assert "skipped 64x64x32 w2x2 s4: ValueError: tile does not fit" in err


def test_tune_without_progress_prints_no_bar(fake_gpu, capsys):
    configs = [TensorCoreConfig(bK=32, stages=s) for s in (2, 6, 3)]
    assert autotune.tune("A", "B", configs=configs, progress=False) == configs[2]
    assert "timing" not in capsys.readouterr().err


def test_tune_when_every_candidate_fails(fake_gpu):
    with pytest.raises(RuntimeError, match="every candidate failed.*ptxas died"):
        autotune.tune("A", "B", configs=[fake_gpu["fail_compile"]], progress=False)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"reps": 0}, ValueError, "reps must be an int >= 1"),
    ({"warmup": -1}, ValueError, "warmup"),
    ({"configs": [SimtConfig()]}, TypeError, "configs must be TensorCoreConfigs"),
    ({"configs": []}, ValueError, "no candidate"),
])
def test_tune_refuses_bad_arguments(fake_gpu, kwargs, error, match):
    with pytest.raises(error, match=match):
        autotune.tune("A", "B", progress=False, **kwargs)


def test_tune_refuses_the_simulator(fake_gpu, monkeypatch):
    monkeypatch.setattr(autotune, "simulator_active", lambda: True)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        autotune.tune("A", "B")


def test_compile_pool_skips_failures_and_shows_progress(capsys):
    """The real spawned pool, on a stand-in compile function importable by name."""
    failed = autotune._compile_all([4.0, -1.0, 9.0], workers=2, compile_fn=math.sqrt)
    assert failed == {-1.0: "ValueError: math domain error"}
    assert "compiling" in capsys.readouterr().err
    assert autotune._compile_all([], compile_fn=math.sqrt) == {}


# --- matmul's routing --------------------------------------------------------------------------

CFG16 = TensorCoreConfig(dtype="float16")


@pytest.mark.parametrize("a, b, kernel, tf32, expected", [
    ("float32", "float32", None, False, ("simt", KERNELS["tuned"])),
    ("float32", "float32", "prefetch", True, ("simt", KERNELS["prefetch"])),
    ("float32", "float32", None, True, ("tensorcore", "tensorcore")),
    ("float32", "float32", "autotune", True, ("tensorcore", "autotune")),
    ("bfloat16", "bfloat16", None, False, ("tensorcore", "tensorcore")),
    ("float16", "float16", None, False, ("tensorcore", "tensorcore")),
    ("bfloat16", "bfloat16", "autotune", False, ("tensorcore", "autotune")),
    ("float16", "float16", CFG16, False, ("tensorcore", CFG16)),
    ("uint16", "uint16", CFG16, False, ("tensorcore", CFG16)),
    ("int16", "int16", CFG16, False, ("tensorcore", CFG16)),
])
def test_route(a, b, kernel, tf32, expected):
    assert route(a, b, kernel, tf32) == expected


@pytest.mark.parametrize("a, b, kernel, tf32, error, words", [
    ("float32", "bfloat16", None, False, TypeError, "A is float32 and B is bfloat16"),
    ("float16", "bfloat16", "tensorcore", False, TypeError, "A is float16 and B is bfloat16"),
    ("float64", "float64", None, False, TypeError, "A has dtype float64"),
    ("float32", "int32", None, False, TypeError, "B has dtype int32"),
    ("uint16", "uint16", None, False, TypeError, "need kernel=TensorCoreConfig"),
    ("uint16", "uint16", "tensorcore", False, TypeError, "A has dtype uint16"),
    ("bfloat16", "bfloat16", "tuned", False, TypeError, "SIMT kernel 'tuned' takes float32"),
    ("float16", "float16", SimtConfig(), False, TypeError, "takes float32"),
    ("float32", "float32", "tensorcore", False, TypeError, "allow_tf32=True"),
    ("float32", "float32", CFG16, False, TypeError, "allow_tf32=True"),
    ("float32", "float32", "fastest", False, ValueError, "unknown kernel 'fastest'"),
    ("bfloat16", "bfloat16", 3, False, TypeError, "kernel must be None, a name"),
    ("bfloat16", "bfloat16", {"bM": 64}, False, TypeError, "not dict"),
])
def test_route_refuses(a, b, kernel, tf32, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(")) as info:
        route(a, b, kernel, tf32)
    assert str(info.value).startswith("matmul: ")


def test_route_by_precision():
    assert route("float32", "float32", precision="tf32") == ("tensorcore", "tensorcore")
    assert route("float32", "float32", precision="tf32x3") == ("tensorcore", "tensorcore")
    assert route("float32", "float32", "hopper", precision="tf32x3") == ("tensorcore",
                                                                         "hopper")
    assert route("float32", "float32", precision="ieee")[0] == "simt"
    for kw, error, words in [
            (dict(precision="fp32"), ValueError, "precision must be one of"),
            (dict(precision="ieee", allow_tf32=True), ValueError, "allow_tf32=True asks"),
            (dict(kernel="tuned", precision="tf32x3"), ValueError, "runs on the Hopper"),
            (dict(kernel="sm80", precision="tf32x3"), ValueError, "runs on the Hopper"),
            (dict(kernel=CFG16, precision="tf32x3"), ValueError, "runs on the Hopper")]:
        with pytest.raises(error, match=words):
            route("float32", "float32", **kw)
    with pytest.raises(TypeError, match="is for float32 operands"):
        route("bfloat16", "bfloat16", precision="tf32x3")


# --- matmul in the simulator -------------------------------------------------------------------

SIM_TUNED = TensorCoreConfig(bM=64, bN=64, bK=64, warps=(2, 2), stages=2, dtype="float16")
SIM_ERRORS = {
    "mixed": ("TypeError", "A is float32 and B is float16"),
    "f16 SIMT kernel": ("TypeError", "takes float32"),
    "f32 tensorcore without tf32": ("TypeError", "allow_tf32=True"),
    "bits without config": ("TypeError", "A has dtype uint16"),
    "bad kernel": ("ValueError", "unknown kernel"),
    "inner dims": ("ValueError", "inner dimensions"),
    "autotune in simulator": ("RuntimeError", "needs a CUDA GPU"),
}


def test_matmul_dispatch_in_simulator(tmp_path):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               GEMM_AUTOTUNE_CACHE=str(tmp_path / "autotune.json"),
               PYTHONPATH=os.pathsep.join([os.path.dirname(HERE),
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # Real runs: the tensor-core kernel through matmul (f16, bf16 bits), SIMT for float32.
    for name in ("f16 tensorcore", "bf16 bits tensorcore", "f32 simt"):
        assert got[name] <= 1.0, (name, got[name])
    # Which config the tensor-core stand-in received (None: the kernel's default for the type).
    default, tuned = "None", str(SIM_TUNED)
    assert got["f16 None, empty cache"] == ["float16", default]
    assert got["f16 None, tuned"] == ["float16", tuned]
    assert got["f16 'tensorcore', tuned"] == ["float16", tuned]
    assert got["f16 'autotune', tuned"] == ["float16", tuned]
    assert got["f16 'autotune', miss"] == ["float16", str(TensorCoreConfig(stages=2))]
    assert got["tune calls"] == 1 and got["f16 'autotune', after tuning"] == got[
        "f16 'autotune', miss"]
    assert got["f32 allow_tf32"] == ["float32", default]
    # float32's default precision, set to tf32, reaches the tensor cores; a named precision or
    # kernel does not. The default itself (tf32x3) runs the SIMT kernel in the simulator.
    assert got["default was"] == "tf32x3"
    assert got["f32 default tf32"] == ["float32", default]
    assert got["f32 default tf32, named: tensorcore calls"] == 0
    assert "writes float32" in got["f32 default tf32, float16 out"]
    assert got["f32 None: tensorcore calls"] == 0
    assert got["key"] == ("numba CUDA simulator sm00 | 20x16x40 float16 | A K-major, B K-major"
                          " | out float32 N-major")
    assert got["key B row, out col"].endswith("A K-major, B N-major | out float32 M-major")
    assert got["key tf32"].startswith("numba CUDA simulator sm00 | 20x16x40 tfloat32 |")
    assert got["precompile variants"] == sorted(
        [d, a, b, 16] for d in tc.DTYPES for a in ("K", "MN") for b in ("K", "MN"))
    for name, (etype, words) in SIM_ERRORS.items():
        assert got[name][0] == etype and words in got[name][1], (name, got[name])


def _simulated_cases():
    """Run in the simulator child: {case: result} (see test_matmul_dispatch_in_simulator)."""
    import numpy as np
    from numba import cuda

    import gemm
    from gemm.report import bfloat16_bits
    from simcase import outcomes
    d = cuda.to_device
    rng = np.random.default_rng(0)
    m, n, k = 20, 16, 40
    small = TensorCoreConfig(bM=32, bN=32, bK=32, warps=(1, 1), stages=2, dtype="float16")
    results = {}

    def err(out, a64, b64):
        ref, bound = a64 @ b64, np.abs(a64) @ np.abs(b64)
        return float(np.nan_to_num(np.abs(out.copy_to_host() - ref) / (1e-5 * bound + 1e-30),
                                   nan=np.inf).max())

    a = rng.standard_normal((m, k)).astype(np.float16)
    bt = rng.standard_normal((n, k)).astype(np.float16)
    A, B = d(a), d(bt).T
    out = d(np.full((m, n), np.nan, np.float32))
    gemm.matmul(A, B, out, kernel=small)
    results["f16 tensorcore"] = err(out, a.astype(np.float64), bt.T.astype(np.float64))
    (abits, a64), (btbits, bt64) = bfloat16_bits(a), bfloat16_bits(bt)
    out = d(np.full((m, n), np.nan, np.float32))
    gemm.matmul(d(abits), d(btbits).T, out, kernel=TensorCoreConfig(
        bM=32, bN=32, bK=32, warps=(1, 1), stages=3, dtype="bfloat16"))
    results["bf16 bits tensorcore"] = err(out, a64, bt64.T)

    a32 = rng.standard_normal((5, 3)).astype(np.float32)
    b32 = rng.standard_normal((3, 7)).astype(np.float32)
    seen = []

    def stand_in(A, B, out, alpha, beta, config, out_dtype, caller, stream=None):
        seen.append([str(A.dtype), str(config)])
        return out, None

    real = tc.launch_matmul
    tc.launch_matmul = stand_in
    out = d(np.full((5, 7), np.nan, np.float32))
    gemm.matmul(d(a32), d(b32), out)
    results["f32 simt"] = err(out, a32.astype(np.float64), b32.astype(np.float64))
    results["f32 None: tensorcore calls"] = len(seen)
    gemm.matmul(d(a32), d(b32), allow_tf32=True)
    results["f32 allow_tf32"] = seen.pop()
    old = gemm.set_float32_precision("tf32")        # float32's default: on the tensor cores
    gemm.matmul(d(a32), d(b32))
    results["f32 default tf32"] = seen.pop()
    gemm.matmul(d(a32), d(b32), precision="ieee")   # a named precision or kernel: as named
    gemm.matmul(d(a32), d(b32), kernel="tuned")
    try:                                            # a float16 out: not the default's
        gemm.matmul(d(a32), d(b32), out_dtype="float16")
    except TypeError as e:
        results["f32 default tf32, float16 out"] = str(e)
    results["f32 default tf32, named: tensorcore calls"] = len(seen)
    results["default was"] = old
    gemm.set_float32_precision(old)

    gemm.matmul(A, B)
    results["f16 None, empty cache"] = seen.pop()
    results["key"] = autotune.problem_key(A, B)
    results["key B row, out col"] = autotune.problem_key(
        A, d(bt.T.copy()), d(np.zeros((n, m), np.float32)).T)
    results["key tf32"] = autotune.problem_key(d(rng.standard_normal((m, k)).astype(np.float32)),
                                               d(rng.standard_normal((k, n)).astype(np.float32)))
    # matmul's key: its out is float16 (the inputs' type, as torch.mm)
    autotune.record(autotune.problem_key(A, B, out_dtype="float16"), SIM_TUNED,
                    [(SIM_TUNED, 1.0)])
    for kernel, name in ((None, "None"), ("tensorcore", "'tensorcore'"),
                         ("autotune", "'autotune'")):
        gemm.matmul(A, B, kernel=kernel)
        results[f"f16 {name}, tuned"] = seen.pop()

    tunes = []

    def fake_tune(A, B, out=None, **kw):
        tunes.append(1)
        cfg = TensorCoreConfig(stages=2)
        autotune.record(autotune.problem_key(A, B, out, kw.get("out_dtype")), cfg, [(cfg, 1.0)])
        return cfg

    A2 = d(rng.standard_normal((8, k)).astype(np.float16))
    real_tune, autotune.tune = autotune.tune, fake_tune
    gemm.matmul(A2, B, kernel="autotune")
    results["f16 'autotune', miss"] = seen.pop()
    gemm.matmul(A2, B, kernel="autotune")
    results["f16 'autotune', after tuning"] = seen.pop()
    results["tune calls"] = len(tunes)
    autotune.tune = real_tune

    u16 = d(np.zeros((4, 8), np.uint16))
    results.update(outcomes({
        "mixed": lambda: gemm.matmul(d(a32[:, :2].copy()), d(np.zeros((2, 4), np.float16))),
        "f16 SIMT kernel": lambda: gemm.matmul(A, B, kernel="tuned"),
        "f32 tensorcore without tf32": lambda: gemm.matmul(d(a32), d(b32), kernel="tensorcore"),
        "bits without config": lambda: gemm.matmul(u16, u16.T),
        "bad kernel": lambda: gemm.matmul(A, B, kernel="fastest"),
        "inner dims": lambda: gemm.matmul(A, A),
        "autotune in simulator": lambda: gemm.matmul(A2[:3], B, kernel="autotune"),
    }))
    tc.launch_matmul = real

    # precompile's tensor-core variants, planned on the simulator's arrays: every type and
    # pair of majors, with full-width copies.
    import gemm.tuning.precompile as pre
    pre.simulator_active = lambda: False
    results["precompile variants"] = sorted(
        [v.config.dtype, v.a_major, v.b_major, v.vec_a * v.config.element_bytes]
        for v in pre.tensorcore_variants())
    return results


if __name__ == "__main__":
    assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run me in the simulator"
    sys.path.insert(0, HERE)
    print(json.dumps(_simulated_cases()))


def test_bucket_shares_keys_between_nearby_shapes_only():
    values = [autotune.bucket(x) for x in range(1, 70000)]
    assert all(b >= x and b < 1.25 * x + 1 for x, b in zip(range(1, 70000), values))
    assert values == sorted(values)                         # monotone
    assert all(autotune.bucket(b) == b for b in set(values))  # a bucket is its own bucket
    assert len(set(values[1024:2048])) == 4                 # x in 1025..2048: 4 buckets


def test_split_candidates_fill_two_waves_with_long_enough_ranges():
    got = autotune.split_candidates("bfloat16", 1024, 1024, 16384, 132)
    assert got and all(c.split_k > 1 for c in got)
    for c in got:
        tiles = -(-1024 // c.tile_m) * -(-1024 // c.bN)
        assert tiles * c.split_k <= 2 * 132 and (16384 // c.bK) // c.split_k >= 4
    assert {(c.bN, c.stages) for c in got} == {(256, 3), (128, 3), (128, 6), (64, 8)}
    assert autotune.split_candidates("bfloat16", 8192, 8192, 8192, 132) == []   # many tiles
    assert "split4" in autotune.config_label(got[0].__class__(split_k=4))


def test_split_candidates_add_the_swapped_tiles_for_few_rows():
    got = [c for c in autotune.split_candidates("bfloat16", 16, 4096, 4096, 132)
           if c.swap_ab and c.bN == 64]
    assert [c.split_k for c in got] == [1, 2, 3, 4]         # 64 tiles: up to two waves
    assert all((c.bM, c.bN, c.consumers, c.stages) == (64, 64, 1, 8) for c in got)
    assert autotune.config_label(got[1]).endswith("split2 swap")
    assert not any(c.swap_ab for c in autotune.split_candidates("bfloat16", 65, 4096, 4096,
                                                                132))


def test_split_candidates_add_narrow_swapped_tiles_up_to_32_rows():
    got = {c.bN for c in autotune.split_candidates("float16", 16, 4096, 4096, 132) if c.swap_ab}
    assert got == {64, 16}
    got = {c.bN for c in autotune.split_candidates("bfloat16", 1, 4096, 4096, 132) if c.swap_ab}
    assert got == {64, 8}
    for m, dtype in ((33, "bfloat16"), (16, "tfloat32")):    # too many rows; tf32
        got = {c.bN for c in autotune.split_candidates(dtype, m, 4096, 4096, 132) if c.swap_ab}
        assert got == {64}
