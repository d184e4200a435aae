"""Autotuning of the tensor-core kernels: a search over tile shape, warp layout and ring depth
(SM80's mma.sync kernel) and, on a GPU of compute capability 9.x, over the Hopper kernel's
tile, ring depth, consumer warpgroups, delay_release and split-K (:func:`split_candidates`),
per problem, with an on-disk cache that :func:`gemm.matmul` reads.

A *problem* is what decides which kernel is fastest: the device (name and compute
capability), M, N, K (each rounded up to a quarter of its octave above 16, :func:`bucket`:
nearby shapes share a tuned config), the operands' type ("bfloat16", "float16", or
"tfloat32" for float32 inputs), the major of A, B and ``out`` (which mode has the unit stride) and the output type.
:func:`problem_key` writes it as one readable string, for example (one line, wrapped here)::

    NVIDIA H100 80GB HBM3 sm90 | 4096x4096x4096 bfloat16 | A K-major, B K-major |
    out float32 N-major

:func:`tune` compiles every candidate of :func:`candidates` in parallel (spawned processes,
their cubin files (gemm.call.binary) hand the results to this one), times each on the caller's
operands with CUDA events (median of ``reps`` calls after a few warm-up calls, on three copies
of A and B in turn where they are small enough to stay in L2), stores the winner and every
timing in the cache and returns the winner. :func:`tuned_config` answers from the cache alone.
The cache is one JSON file, ``$GEMM_AUTOTUNE_CACHE`` or
``~/.cache/layoutalg-gemm/autotune.json``, written atomically (a temporary file, then
``os.replace``); a corrupt or unreadable file is warned about (:class:`AutotuneCacheWarning`)
and read as empty, so it never stops a matmul.

>>> len(candidates("bfloat16")) <= 24
True
>>> [config_label(c) for c in hopper_candidates("bfloat16")[:2]]
['hopper 128x256 c2 s3 d0', 'hopper 128x256 c2 s4 d0']
"""

from __future__ import annotations

import functools
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from typing import Any, Optional, Sequence

from gemm import hopper, tensorcore as tc
from gemm._env import simulator_active
from gemm.arch.smem import DYNAMIC_SHARED_LIMIT
from gemm.call import plan as callplan
from gemm.call.binary import _check, _driver, device_properties, sm_count
from gemm.call.operands import current_stream, operand
from gemm.hopper import NARROW_ROWS, SWAP_ROWS, HopperConfig, swapped_tiles

# numba, torch, CuPy and tqdm are imported inside the functions that use them: gemm.matmul
# reads the cache (tuned_config) in processes that load none of them.

__all__ = ["candidates", "hopper_candidates", "split_candidates", "compile_any", "tune",
           "problem_key", "bucket", "tuned_config", "lookup", "record", "load_cache",
           "cache_path", "config_label", "config_from_dict", "AutotuneCacheWarning",
           "CACHE_ENV"]

CACHE_ENV = "GEMM_AUTOTUNE_CACHE"
FORMAT = 1

# The search space, chosen by hand rather than enumerated (each candidate costs a 10-60 s
# compile). Warp layouts give every warp a tile between 32x32 and 64x64 outputs: 32 to 128 f32
# accumulators per thread, enough MMAs per fragment load without spilling. Large block tiles
# (128x128 with 4 or 8 warps, 256x128 and 128x256 with 8) serve large problems; the three
# small ones fill the SMs when M and N are small. Ring depths, as (bytes of a K row, stages):
# 64-byte rows (bK = 32 for bf16/f16, 16 for tf32) with 3, 4 or 5 stages and 128-byte rows
# with 3, so 128 to 256 bytes of each row are in flight (two stages of 128-byte rows keep too
# little in flight, four spend shared memory that five 64-byte stages use better); small tiles
# get the middle two. delay_release stays 0 (all stages - 1 k-tiles in flight).
_LARGE_TILES = ((128, 128, (2, 2)), (128, 128, (2, 4)), (256, 128, (4, 2)), (128, 256, (2, 4)))
_SMALL_TILES = ((64, 64, (2, 2)), (128, 64, (2, 2)), (64, 128, (2, 2)))
_LARGE_DEPTHS = ((64, 3), (64, 4), (64, 5), (128, 3))
_SMALL_DEPTHS = ((64, 4), (128, 3))
_ELEMENT_BYTES = {"tfloat32": 4}        # in memory; 2 for bfloat16 and float16
# The Hopper kernel's: (bM, bN, stages, consumers, delay_release, group_m, schedule). The
# first is the default (benchmarks/RESULTS.md, "Hopper GEMM": 2 x 64 x 256 tiles, 3 slots,
# best or tied at 4096^3 and 8192^3 for every dtype); then deeper rings, delay_release 1,
# square tiles, one consumer and smaller tiles (more tiles for the 132 SMs of a small
# problem; 64-row tiles of one consumer for problems of few rows), a wider launch-order
# group, and the pingpong schedule.
_HOPPER = ((64, 256, 3, 2, 0, 8, "cooperative"), (64, 256, 4, 2, 0, 8, "cooperative"),
           (64, 256, 4, 2, 1, 8, "cooperative"), (128, 128, 3, 2, 0, 8, "cooperative"),
           (128, 128, 4, 2, 1, 8, "cooperative"), (128, 128, 4, 1, 1, 8, "cooperative"),
           (128, 64, 5, 2, 1, 8, "cooperative"), (64, 128, 6, 2, 1, 8, "cooperative"),
           (64, 64, 8, 2, 0, 8, "cooperative"), (64, 256, 5, 1, 0, 8, "cooperative"),
           (64, 128, 6, 1, 0, 8, "cooperative"),
           (64, 256, 3, 2, 0, 16, "cooperative"), (128, 128, 4, 2, 1, 8, "pingpong"))
# The tiles split_candidates cuts K for, as (bM, bN, stages, consumers): the default's, its
# narrow form, the narrower tiles of gemm.hopper's few-tile rule, and the one-consumer 64-row
# tiles.
_SPLIT_TILES = ((64, 256, 3, 2), (64, 128, 3, 2), (64, 128, 6, 2), (64, 64, 8, 2),
                (64, 256, 5, 1), (64, 128, 6, 1))
SMEM_LIMIT = DYNAMIC_SHARED_LIMIT     # an H100's opt-in shared memory per block


class AutotuneCacheWarning(UserWarning):
    """The autotune cache could not be read or written; it is treated as empty."""


def hopper_candidates(dtype="bfloat16", smem_limit=SMEM_LIMIT):
    """The HopperConfigs :func:`tune` tries on a 9.x GPU (see ``_HOPPER``)."""
    out = []
    for bm, bn, stages, consumers, delay, group, schedule in _HOPPER:
        cfg = HopperConfig(bM=bm, bN=bn, stages=stages, consumers=consumers,
                           delay_release=delay, group_m=group, schedule=schedule, dtype=dtype)
        if cfg.shared_bytes <= smem_limit:
            out.append(cfg)
    return out


def split_candidates(dtype, m, n, k, sms, smem_limit=SMEM_LIMIT):
    """Split-K configs :func:`tune` adds for an (m, n, k) problem on ``sms`` SMs: the tiles of
    ``_SPLIT_TILES`` (the default's, the narrower ones of its few-tile rule, 2 x 64 x 128 with
    3 slots, and for at most 64 rows the one-consumer 64-row ones), each with the K ranges
    (2 to 32) whose work units fit in two waves and keep >= 4 k-tiles per range; for at most
    SWAP_ROWS rows also :func:`gemm.hopper.swapped_tiles` (64 columns, and up to NARROW_ROWS
    rows the narrow ones too: they need a row-major A, and a call that has none skips them),
    with and without split-K. They share one compiled kernel per tile shape (the ranges are
    a run-time argument)."""
    out = []
    for bm, bn, stages, consumers in _SPLIT_TILES:
        cfg = HopperConfig(bM=bm, bN=bn, stages=stages, consumers=consumers, dtype=dtype)
        if cfg.shared_bytes > smem_limit or (consumers == 1 and m > 64):
            continue
        tiles = -(-m // cfg.tile_m) * -(-n // cfg.bN)
        k_tiles = -(-k // cfg.bK)
        for split in (2, 3, 4, 6, 8, 12, 16, 24, 32):
            if tiles * split <= 2 * sms and k_tiles // split >= 4:
                out.append(replace(cfg, split_k=split))
    swapped = [swapped_tiles(dtype)] if m <= SWAP_ROWS else []
    if m <= NARROW_ROWS and dtype != "tfloat32":
        swapped.append(swapped_tiles(dtype, m))
    for cfg in swapped:     # A and B swapped: B's columns on the tile rows, m on its N
        tiles, k_tiles = -(-n // cfg.tile_m) * -(-m // cfg.bN), -(-k // cfg.bK)
        out += [replace(cfg, split_k=split) for split in (1, 2, 3, 4, 8)
                if split == 1 or (tiles * split <= 2 * sms and k_tiles // split >= 4)]
    return out


def compile_any(variant):
    """Compile a tensor-core or Hopper variant (the compile function of spawned workers)."""
    if isinstance(variant, hopper.HopperVariant):
        hopper.compile_variant(variant)
    else:
        tc.compile_variant(variant)


def candidates(dtype="bfloat16", smem_limit=SMEM_LIMIT, cc=(0, 0)):
    """The configs :func:`tune` tries for operands of ``dtype``: TensorCoreConfigs (22 at most;
    see the comment on the search space above), leaving out those that are invalid for the
    dtype (their construction raises ValueError) or need more than ``smem_limit`` bytes of
    shared memory, then on compute capability ``cc`` 9.x the :func:`hopper_candidates`."""
    if dtype not in tc.DTYPES:
        raise ValueError(f"candidates: dtype must be one of {tc.DTYPES}, got {dtype!r}")
    if not isinstance(smem_limit, int) or isinstance(smem_limit, bool) or smem_limit <= 0:
        raise ValueError(f"candidates: smem_limit must be a positive int, got {smem_limit!r}")
    out = []
    for tiles, depths in ((_LARGE_TILES, _LARGE_DEPTHS), (_SMALL_TILES, _SMALL_DEPTHS)):
        for bm, bn, warps in tiles:
            for row_bytes, stages in depths:
                bk = row_bytes // _ELEMENT_BYTES.get(dtype, 2)
                try:
                    cfg = tc.TensorCoreConfig(bM=bm, bN=bn, bK=bk, warps=warps, stages=stages,
                                              dtype=dtype)
                except ValueError:
                    continue
                if cfg.shared_bytes <= smem_limit:
                    out.append(cfg)
    if cc[0] == 9:
        out += hopper_candidates(dtype, smem_limit)
    return out


def config_label(cfg):
    """A short name: ``128x128x32 w2x2 s4`` (block tile, warps, stages), or for the Hopper
    kernel ``hopper 128x256 c2 s3 d0`` (block tile, consumers, stages, delay_release; then
    ``g16`` for a group_m other than 8, ``pingpong`` for that schedule, ``split4`` for
    split-K, ``swap`` for swap_ab)."""
    if hasattr(cfg, "consumers"):
        return (f"hopper {cfg.tile_m}x{cfg.bN} c{cfg.consumers} s{cfg.stages} "
                f"d{cfg.delay_release}" + (f" g{cfg.group_m}" if cfg.group_m != 8 else "")
                + (" pingpong" if cfg.schedule == "pingpong" else "")
                + (f" split{cfg.split_k}" if cfg.split_k > 1 else "")
                + (" swap" if cfg.swap_ab else ""))
    wm, wn = cfg.warps
    return f"{cfg.bM}x{cfg.bN}x{cfg.bK} w{wm}x{wn} s{cfg.stages}"


# --- problems ----------------------------------------------------------------------------------

def _device_info(index):
    """(name, compute capability, opt-in shared bytes per block) of CUDA device ``index``."""
    if simulator_active():
        return "numba CUDA simulator", (0, 0), SMEM_LIMIT
    return device_properties(index)


def _compute_dtype(a, b, caller):
    """What the tensor cores compute with for these operands: bfloat16, float16, tfloat32."""
    kinds = {"bfloat16": "bfloat16", "float16": "float16", "float32": "tfloat32"}
    for name, op in (("A", a), ("B", b)):
        if op.dtype not in kinds:
            raise TypeError(f"{caller}: {name} has dtype {op.dtype}; supported: bfloat16, "
                            "float16, float32 (as tf32)")
    if a.dtype != b.dtype:
        raise TypeError(f"{caller}: A is {a.dtype} and B is {b.dtype}; they must match")
    return kinds[a.dtype]


@dataclass(frozen=True)
class _Problem:
    """A call described: its cache key, compute dtype, output dtype and device index."""

    key: str
    dtype: str
    out_dtype: str
    device: int
    shape: tuple = ()           # (M, N, K)


def _problem(A, B, out, out_dtype, caller):
    sim = simulator_active()
    a, b = operand(A, "A", sim, caller), operand(B, "B", sim, caller)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"{caller}: inner dimensions differ: A is {a.shape}, B is {b.shape}")
    dtype = _compute_dtype(a, b, caller)
    if out is not None:
        c = operand(out, "out", sim, caller)
        if out_dtype is not None and out_dtype != c.dtype:
            raise ValueError(f"{caller}: out_dtype={out_dtype!r} but out has dtype {c.dtype}")
        out_dtype, out_major = c.dtype, "N" if c.unit_mode == 1 else "M"
    else:
        if out_dtype is None:
            out_dtype = "float32"
        if not isinstance(out_dtype, str):
            raise TypeError(f"{caller}: out_dtype must be a dtype name such as 'float32', got "
                            f"{out_dtype!r}")
        out_major = "N"
    name, cc, _ = _device_info(a.device)
    size = "x".join(str(bucket(x)) for x in (m, n, k))
    key = (f"{name} sm{cc[0]}{cc[1]} | {size} {dtype} | A {'K' if a.unit_mode else 'M'}"
           f"-major, B {'N' if b.unit_mode else 'K'}-major | out {out_dtype} {out_major}-major")
    return _Problem(key, dtype, out_dtype, a.device, (m, n, k))


def bucket(x: int) -> int:
    """The extent a problem's key records for ``x`` (M, N or K): ``x`` itself up to 16, else
    ``x`` rounded up to a quarter of its octave (20, 24, 28, 32, 40, .., 4096, 5120, ...), so
    that nearby shapes share one tuned config.

    >>> [bucket(x) for x in (1, 16, 17, 20, 33, 1000, 4096, 4097)]
    [1, 16, 20, 20, 40, 1024, 4096, 5120]
    """
    if x <= 16:
        return x
    step = 1 << (x.bit_length() - 3)
    return -(-x // step) * step


def problem_key(A: Any, B: Any, out: Any = None, out_dtype: Optional[str] = None, *,
                caller: str = "problem_key") -> str:
    """The cache key of ``tensorcore_matmul(A, B, out, out_dtype=out_dtype)`` on this device
    (see the module docstring); errors name ``caller``."""
    return _problem(A, B, out, out_dtype, caller).key


# --- the cache ---------------------------------------------------------------------------------

_memory = {}        # path -> (file signature, entries): the file is parsed once per change


def cache_path() -> str:
    """``$GEMM_AUTOTUNE_CACHE``, else ``~/.cache/layoutalg-gemm/autotune.json``."""
    return os.environ.get(CACHE_ENV) or os.path.join(
        os.path.expanduser("~"), ".cache", "layoutalg-gemm", "autotune.json")


def _signature(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return ("error", str(e))
    return st.st_mtime_ns, st.st_size, st.st_ino


def load_cache(path: Optional[str] = None) -> dict:
    """The cache's entries {key: entry}; {} when the file is missing, and, with an
    :class:`AutotuneCacheWarning`, when it is unreadable or not an autotune cache."""
    path = path or cache_path()
    sig = _signature(path)
    if sig is None:
        return {}
    held = _memory.get(path)
    if held is not None and held[0] == sig:
        return held[1]
    entries = {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not (isinstance(data, dict) and data.get("format") == FORMAT
                and isinstance(data.get("entries"), dict)):
            raise ValueError(f"not an autotune cache of format {FORMAT}")
        entries = data["entries"]
    except (OSError, ValueError) as e:   # json.JSONDecodeError and UnicodeError are ValueErrors
        warnings.warn(f"autotune cache {path} is unreadable or corrupt ({e}); treating it as "
                      "empty", AutotuneCacheWarning, stacklevel=2)
    _memory[path] = sig, entries
    return entries


def config_from_dict(d):
    """The TensorCoreConfig or HopperConfig (it has ``consumers``) stored as ``d`` (lists back
    to tuples); None if it is not one this version can build."""
    kind = hopper.HopperConfig if "consumers" in d else tc.TensorCoreConfig
    try:
        return kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
    except (TypeError, ValueError, AttributeError) as e:
        warnings.warn(f"autotune cache: cannot use stored config {d!r} ({e}); ignoring it",
                      AutotuneCacheWarning, stacklevel=3)
        return None


def lookup(key: str, path: Optional[str] = None) -> Any:
    """The tuned config (TensorCoreConfig or HopperConfig) stored under ``key``, or None."""
    entry = load_cache(path).get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
        return None
    return config_from_dict(entry["config"])


def tuned_config(A: Any, B: Any, out: Any = None, out_dtype: Optional[str] = None) -> Any:
    """The tuned config for this call from the cache, or None."""
    return lookup(problem_key(A, B, out, out_dtype, caller="tuned_config"))


def _write_atomic(path, text):
    """Replace ``path`` by ``text`` at once: write a temporary file beside it, then rename."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".autotune-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def record(key, winner, timings=(), failed=(), path=None):
    """Store ``winner`` under ``key`` with ``timings`` ((config, ms) pairs) and ``failed``
    ((config, error) pairs). The file is re-read just before the write, so entries another
    process stored meanwhile are kept. A failed write is warned about, not raised."""
    path = path or cache_path()
    entries = dict(load_cache(path))
    entries[key] = {
        "config": asdict(winner),
        "label": config_label(winner),
        "tuned": time.strftime("%Y-%m-%d %H:%M:%S"),
        "timings_ms": [{"config": asdict(c), "label": config_label(c), "ms": ms}
                       for c, ms in sorted(timings, key=lambda x: x[1])],
        "failed": [{"config": asdict(c), "label": config_label(c), "error": err}
                   for c, err in failed],
    }
    text = json.dumps({"format": FORMAT, "entries": entries}, indent=1, sort_keys=True)
    try:
        _write_atomic(path, text)
    except OSError as e:
        warnings.warn(f"autotune cache {path} could not be written ({e}); the result is not "
                      "kept", AutotuneCacheWarning, stacklevel=2)
        return
    _memory[path] = _signature(path), entries
    callplan.clear()                # calls planned before may now choose the tuned config


# --- tuning ------------------------------------------------------------------------------------

def _progress(iterable, progress, **kw):
    # tqdm: the well-kept progress-bar library (a dependency of the package); it writes to
    # stderr, so stdout keeps only results.
    from tqdm import tqdm
    return tqdm(iterable, disable=not progress, file=sys.stderr, **kw)


def _say(text):
    from tqdm import tqdm
    tqdm.write(text, file=sys.stderr)


def _compile_all(variants, workers=None, progress=True, compile_fn=None):
    """Compile ``variants`` in spawned processes (``compile_fn``, default :func:`compile_any`,
    must be importable by name). Returns {variant: error text} for those that failed; the
    others are in the kernel cache (gemm.call.binary)."""
    if compile_fn is None:
        compile_fn = compile_any
    variants = list(variants)
    if not variants:
        return {}
    workers = workers or min(len(variants), os.cpu_count() or 1)
    failed = {}
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        jobs = {pool.submit(compile_fn, v): v for v in variants}
        for job in _progress(as_completed(jobs), progress, total=len(jobs), desc="compiling",
                             unit="kernel"):
            err = job.exception()
            if err is not None:
                failed[jobs[job]] = f"{type(err).__name__}: {err}"
    return failed


def _measure(A, B, out, cfg, out_dtype, reps, warmup):
    """(median milliseconds of the kernel of ``tensorcore_matmul(A, B, out, config=cfg)`` over
    ``reps`` launches after ``warmup``, the output used). A None ``out`` is made by the first
    call (of ``out_dtype``), and returned for the next candidate. The timed launches are the
    call's plan (as gemm.matmul repeats a call), so the argument checks of a call are not
    timed: on small problems they would outweigh the kernel."""
    from numba import cuda
    kernel = hopper if isinstance(cfg, hopper.HopperConfig) else tc
    out, plan = kernel.launch_matmul(A, B, out, 1.0, 0.0, cfg, out_dtype, "tune")
    ops = [operand(x, name, False, "tune") for x, name in ((A, "A"), (B, "B"), (out, "out"))]
    sets, copies = _input_sets(ops[:2])
    handle = current_stream(ops[0])      # the caller's stream (torch's or CuPy's current one)
    stream = cuda.external_stream(handle) if handle else cuda.default_stream()
    for i in range(warmup):
        plan((*sets[i % len(sets)], ops[2].ptr), handle, 1.0, 0.0)
    busy = _busy(stream, reps)
    events = [(cuda.event(), cuda.event()) for _ in range(reps)]
    for i, (start, stop) in enumerate(events):
        start.record(stream)
        plan((*sets[i % len(sets)], ops[2].ptr), handle, 1.0, 0.0)
        stop.record(stream)
    events[-1][1].synchronize()
    del busy, copies                # freed once the stream is done with them
    return statistics.median(cuda.event_elapsed_time(s, e) for s, e in events), out


INPUT_SETS = 3                  # A and B, and two copies, taken in turn by the timed calls
COPY_LIMIT = 1 << 28            # bytes of A and B up to which they are copied


def _input_sets(ops):
    """The (A, B) addresses the timed calls take in turn, and the copies to keep meanwhile.
    Up to COPY_LIMIT bytes of A and B (where a repeated call would find them in L2, 50 MB on
    an H100), INPUT_SETS sets: the operands and copies of their bytes (the same strides at
    other addresses), so that each call reads its operands from memory as a call on fresh
    activations or a weight streamed once does, and as benchmarks/shapes.py times (a weight
    of 4096 x 4096 bf16, 32 MB, stayed in L2 when one set was timed, and the tuner chose
    split-K configs that ran slower than the rules on fresh data). Larger operands: one
    set."""
    from numba import cuda
    sizes = [op.span * op.itemsize for op in ops]
    if sum(sizes) > COPY_LIMIT:
        return [tuple(op.ptr for op in ops)], []
    drv = _driver()
    _check(drv.cuCtxSynchronize(), "cuCtxSynchronize")     # the operands are written
    copies, sets = [], [tuple(op.ptr for op in ops)]
    for _ in range(INPUT_SETS - 1):
        got = []
        for op, size in zip(ops, sizes):
            buf = cuda.device_array(size, dtype="uint8")
            dst = buf.device_ctypes_pointer.value
            _check(drv.cuMemcpyDtoD(dst, op.ptr, size), "cuMemcpyDtoD(tuning copy)")
            copies.append(buf)
            got.append(dst)
        sets.append(tuple(got))
    return sets, copies


@functools.lru_cache(maxsize=None)
def _spin_kernel():
    """A one-thread kernel running a chain of ``n`` dependent multiply-adds (each waits for
    the last: at least the FMA latency, 4 cycles, about 2 ns at 1.98 GHz)."""
    from numba import cuda

    @cuda.jit
    def spin(x, n):
        v = x[0]
        for _ in range(n):
            v = v * 0.999999 + 1e-6
        x[0] = v
    return spin


def _busy(stream, launches):
    """Keep ``stream`` busy while the host queues ``launches`` timed launches behind it, so
    their events time the GPU alone: a small problem's kernel is shorter than the host's work
    per launch, and would otherwise be timed with the gaps between launches. Returns the
    spin's scratch, to keep until the stream is done with it. The spin lasts about 100 us
    per launch queued (50,000 steps of >= 2 ns), well above a plan's host work (10-40 us)."""
    from numba import cuda
    scratch = cuda.device_array(1, dtype="float32", stream=stream)
    with warnings.catch_warnings():             # numba's low-occupancy warning: on purpose
        warnings.filterwarnings("ignore", message="Grid size")
        _spin_kernel()[1, 1, stream](scratch, 50_000 * launches)
    return scratch


def _scratch_like(out):
    """An uninitialised array of the kind, device, dtype and major of ``out``: tuning writes
    there, never into the caller's array."""
    c = operand(out, "out", simulator_active(), "tune")
    col = c.unit_mode == 0
    shape = c.shape[::-1] if col else c.shape
    if c.kind == "torch":
        import torch
        new = torch.empty(shape, dtype=out.dtype, device=out.device)
    elif c.kind == "cupy":
        import cupy
        with cupy.cuda.Device(c.device):
            new = cupy.empty(shape, dtype=out.dtype)
    else:
        from numba import cuda
        new = cuda.device_array(shape, dtype=out.dtype)
    return new.T if col else new


def tune(A: Any, B: Any, out: Any = None, *, out_dtype: Optional[str] = None,
         configs: Optional[Sequence[Any]] = None, reps: int = 20, warmup: int = 3,
         workers: Optional[int] = None, progress: bool = True) -> Any:
    """Find the fastest config (TensorCoreConfig, or on a 9.x GPU possibly a HopperConfig) for
    ``matmul(A, B, out)`` on these operands, store it (and every timing) in the cache, and
    return it.

    ``configs``: the candidates (default :func:`candidates` for the operands' type and the
    device's shared memory and compute capability; Hopper configs TMA cannot use for these
    operands are skipped). Each is compiled in a spawned process (``workers`` at a time,
    default one per core), then timed here: ``warmup`` calls, then the median of ``reps``
    calls measured with CUDA events on the caller's stream. A candidate that fails to plan,
    compile or run is skipped and reported on stderr. ``out`` (or ``out_dtype`` when out is
    None) fixes the output's type and major; the timed calls write a scratch array, never
    ``out``. ``progress``: tqdm progress bars on stderr. Needs a GPU.
    """
    if simulator_active():
        raise RuntimeError("tune: needs a CUDA GPU; the numba CUDA simulator has nothing to "
                           "time")
    for name, v, low in (("reps", reps, 1), ("warmup", warmup, 0)):
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise ValueError(f"tune: {name} must be an int >= {low}, got {v!r}")
    problem = _problem(A, B, out, out_dtype, "tune")
    if configs is None:
        _, cc, smem = _device_info(problem.device)
        configs = candidates(problem.dtype, smem, cc)
        if cc[0] == 9 and problem.shape:
            configs += split_candidates(problem.dtype, *problem.shape,
                                        sm_count(problem.device), smem)
    configs = list(dict.fromkeys(configs))
    for c in configs:
        if not isinstance(c, (tc.TensorCoreConfig, hopper.HopperConfig)):
            raise TypeError(f"tune: configs must be TensorCoreConfigs or HopperConfigs, got "
                            f"{c!r}")
    if not configs:
        raise ValueError(f"tune: no candidate configs for {problem.dtype}")
    scratch = None if out is None else _scratch_like(out)
    out_dtype = None if out is not None else problem.out_dtype

    failed, planned = [], {}
    for cfg in configs:
        try:
            kernel = hopper if isinstance(cfg, hopper.HopperConfig) else tc
            planned[cfg] = kernel.plan_call(A, B, scratch, config=cfg, out_dtype=out_dtype)
        except (TypeError, ValueError) as e:
            failed.append((cfg, f"{type(e).__name__}: {e}"))
    broken = _compile_all(dict.fromkeys(planned.values()), workers, progress)
    timings = []
    for cfg in _progress(configs, progress, desc="timing", unit="config"):
        if cfg not in planned:
            continue
        if planned[cfg] in broken:
            failed.append((cfg, broken[planned[cfg]]))
            continue
        try:
            ms, scratch = _measure(A, B, scratch, cfg, out_dtype, reps, warmup)
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run is skipped
            failed.append((cfg, f"{type(e).__name__}: {e}"))
            continue
        timings.append((cfg, ms))
    for cfg, err in failed:
        _say(f"tune: skipped {config_label(cfg)}: {err}")
    if not timings:
        raise RuntimeError(f"tune: every candidate failed for {problem.key}; first: "
                           f"{config_label(failed[0][0])}: {failed[0][1]}")
    winner = min(timings, key=lambda x: x[1])[0]
    record(problem.key, winner, timings, failed)
    return winner
