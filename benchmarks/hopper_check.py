"""GPU check of gemm.hopper (the wgmma + TMA kernel): correctness against float64, then speed
against cuBLAS and Triton in the same run.

Run on an H100/H200 host from the project root (after the wheel line of
../shared/gpu/wheels.sh):

    python3 benchmarks/hopper_check.py [--json PATH] [--sizes N ...] [--configs SPEC ...]
        [--sections bf16 bf16_nn f16 tf32] [--no-correctness] [--no-timing] [--reps R]

A SPEC is ``bMxbN:stages:consumers[:dD][:gG][:rR][:sS][:p|:plain][:t]`` (D delay_release, G
group_m, R the producer's registers, 0 for no setmaxnreg, S split_k, p the pingpong schedule,
plain the plain pipeline with one warpgroup, t the TMA epilogue), ``default`` (the default
config, no split-K) or ``auto`` (no config: the default with the split-K the shape gets); a
trailing ``:x3`` runs float32 operands by 3xTF32 (``tf32x3``, checked with float32's bound).

1. Correctness (:func:`cases`): the seed's bf16 cubes, random odd shapes for every dtype x
   majors x out dtype, alpha/beta into row- and column-major outputs, K not a multiple of the
   k-tile, every ring depth with delay_release 0 and 1 and one consumer.
   Outputs are NaN-poisoned inside a NaN guard that must stay intact; bounds as
   benchmarks/tensorcore_check.py (``|C - ref| <= rel |A| @ |B| + unit |ref|``).
2. Timing (TFLOP/s, median CUDA-event time of single calls, 3 rotating input sets): per
   section and size, cuBLAS (torch.mm) before and after the configs, Triton's best config,
   each config of ours; every timed result is checked against float64 as well.
   Sections: bf16 (A row-major, B = the .T of a row-major matrix: both K-major, f32 out),
   bf16_out (the same with a bf16 out, as torch.mm), bf16_nn (B row-major: MN-major B),
   f16, tf32 (float32 in, TF32 on for cuBLAS).
3. Prints the tables last (markdown).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.tensorcore_check import error_ratio, guarded_out, torch_dtype  # noqa: E402

SECTIONS = {"bf16": ("bfloat16", "K", "float32"), "bf16_out": ("bfloat16", "K", "bfloat16"),
            "bf16_nn": ("bfloat16", "MN", "float32"), "f16": ("float16", "K", "float32"),
            "tf32": ("tfloat32", "K", "float32")}
SETS = 3


def split_spec(spec):
    """(the spec without a trailing ":x3", whether it had one: 3xTF32, hopper_matmul's
    tf32x3)."""
    return (spec[:-3], True) if spec.endswith(":x3") else (spec, False)


def parse_config(spec, dtype):
    from gemm.hopper import HopperConfig
    spec, _ = split_spec(spec)
    if spec == "auto":
        return None             # what a call without a config runs (split-K by shape)
    if spec == "default":
        return HopperConfig(dtype=dtype)
    parts = spec.split(":")
    bm, bn = (int(x) for x in parts[0].split("x"))
    kw = dict(bM=bm, bN=bn, stages=int(parts[1]), consumers=int(parts[2]), dtype=dtype)
    for p in parts[3:]:
        if p in ("p", "plain"):
            kw["schedule"] = "pingpong" if p == "p" else "plain"
            continue
        if p == "t":
            kw["epilogue"] = "tma"
            continue
        key = {"d": "delay_release", "g": "group_m", "r": "memory_registers",
               "s": "split_k"}[p[0]]
        kw[key] = int(p[1:]) if not (p[0] == "r" and p[1:] == "0") else None
    return HopperConfig(**kw)


def cases(seed=None):
    """The correctness cases (dicts); with ``seed``, also random shapes from it."""
    import random
    out = []

    def add(dtype, m, n, k, am="row", bm="row", od="float32", om="row", alpha=1.0, beta=0.0,
            spec="default"):
        out.append(dict(dtype=dtype, m=m, n=n, k=k, a_major=am, b_major=bm, out_dtype=od,
                        out_major=om, alpha=alpha, beta=beta, spec=spec))
    for s in (64, 128, 256, 512, 1024, 4096):         # the seed's TN cubes
        add("bfloat16", s, s, s, bm="col")
    add("bfloat16", 64, 64, 256, bm="col")
    shapes = [(1, 8, 8), (77, 130, 201), (300, 1000, 72), (513, 257, 1031), (1000, 64, 8)]
    for dtype in ("bfloat16", "float16", "tfloat32"):
        for am in ("row", "col"):
            for bm in ("row", "col"):
                if dtype == "tfloat32" and (am, bm) != ("row", "col"):
                    continue            # tf32 needs K-major operands
                for od in ("float32", "bfloat16", "float16"):
                    m, n, k = shapes[len(out) % len(shapes)]
                    add(dtype, m, n, k, am, bm, od)
    add("bfloat16", 333, 129, 104, bm="col", alpha=-0.5, beta=2.0)
    add("bfloat16", 333, 129, 104, bm="col", om="col", alpha=1.5, beta=-1.0)
    add("float16", 200, 300, 64, od="float16", alpha=0.25, beta=0.5)
    add("bfloat16", 257, 513, 4104, bm="col")
    for stages in (2, 3, 4):
        for d in (0, 1):
            add("bfloat16", 300, 260, 1000, bm="col", spec=f"128x128:{stages}:2:d{d}")
    add("bfloat16", 300, 260, 1000, spec="64x256:4:2")
    add("bfloat16", 300, 260, 1000, spec="128x128:4:1")
    # 2 slots, one reader, a 4x-unrolled main loop: where ptxas once dropped a descriptor's
    # high word (gemm.arch.sm90.wgmma_tile)
    for d in (0, 1):
        add("bfloat16", 300, 260, 1000, bm="col", spec=f"128x128:2:1:d{d}")
    add("bfloat16", 300, 260, 1000, bm="col", spec="64x128:6:2")
    add("bfloat16", 300, 260, 1000, bm="col", spec="128x128:4:2:r0")
    add("tfloat32", 300, 260, 1000, bm="col", spec="128x64:4:2")
    # the plain pipeline (one warpgroup, no producer), one and two blocks per SM
    for spec in ("128x128:3:1:plain", "128x128:4:1:d0:plain", "64x256:3:1:d0:plain"):
        add("bfloat16", 300, 260, 1000, bm="col", spec=spec)
    add("float16", 3000, 2100, 200, am="col", od="float16", spec="128x128:3:1:plain")
    add("tfloat32", 333, 129, 104, bm="col", om="col", beta=0.5, spec="128x128:3:1:d0:plain")
    # pingpong: more tiles than an H100's 132 blocks, so that each consumer takes turns
    for spec in ("128x128:4:2:p", "64x256:5:2:d0:p", "128x128:2:2:p", "128x128:6:2:p"):
        add("bfloat16", 1500, 2100, 520, bm="col", spec=spec)
    add("float16", 3000, 1000, 200, am="col", od="bfloat16", spec="128x128:3:2:p")
    add("tfloat32", 2000, 1400, 300, bm="col", om="col", beta=0.5, spec="128x128:4:2:p")
    add("bfloat16", 4096, 4096, 4096, bm="col", spec="128x128:4:2:p")
    # split-K: explicit (uneven K ranges; more ranges than k-tiles), and the default's choice
    # by shape (few output tiles: 1, 16 and 8 of them)
    add("bfloat16", 300, 260, 1000, bm="col", spec="64x256:3:2:d0:s3")
    add("bfloat16", 333, 129, 104, bm="col", om="col", alpha=1.5, beta=-1.0,
        spec="64x256:3:2:d0:s5")
    add("float16", 200, 300, 1000, am="col", od="float16", beta=0.5, spec="128x128:4:1:s4")
    add("tfloat32", 130, 70, 2000, bm="col", od="bfloat16", spec="64x256:3:2:d0:s7")
    add("bfloat16", 300, 260, 1000, bm="col", spec="128x128:4:2:p:s2")
    # the TMA epilogue: odd edges, every out type, both schedules, a column-major out (the
    # transposed product), bM 128 (two atoms), and beta (stored from registers)
    for dtype, am, bm, od, om, spec in (
            ("bfloat16", "row", "col", "float32", "row", "64x256:3:2:d0:t"),
            ("bfloat16", "col", "row", "bfloat16", "row", "64x256:3:2:d0:t"),
            ("float16", "row", "row", "float16", "col", "128x128:4:2:t"),
            ("tfloat32", "row", "col", "bfloat16", "row", "128x128:4:2:p:t"),
            ("bfloat16", "row", "col", "float32", "col", "64x256:5:2:d0:p:t"),
            ("float16", "col", "col", "float32", "row", "128x64:4:1:t")):
        add(dtype, 1500, 2100, 520, am, bm, od, om, spec=spec)
        add(dtype, 77, 130, 201, am, bm, od, om, spec=spec)
    add("bfloat16", 333, 129, 104, bm="col", alpha=-0.5, beta=2.0, spec="64x256:3:2:d0:t")
    add("bfloat16", 4096, 4096, 4096, bm="col", od="bfloat16", spec="64x256:3:2:d0:t")
    for dtype, am, bm, od, om in (("bfloat16", "row", "col", "float32", "row"),
                                  ("bfloat16", "col", "row", "bfloat16", "col"),
                                  ("float16", "row", "row", "float16", "row"),
                                  ("tfloat32", "row", "col", "float32", "col")):
        for m, n, k in ((64, 256, 4096), (1000, 500, 3000), (16, 4096, 4096)):
            add(dtype, m, n, k, am, bm, od, om, beta=0.5 if om == "col" else 0.0, spec="auto")
    # 3xTF32 (float32 to about float32's accuracy: checked with float32's bound): the rules'
    # tiles (split-K and swapped ones among them), both consumer schedules, plain, TMA stores
    for m, n, k, od, om, spec in ((77, 130, 201, "float32", "row", "auto:x3"),
                                  (300, 1000, 72, "bfloat16", "row", "auto:x3"),
                                  (16, 4096, 4096, "float32", "row", "auto:x3"),
                                  (64, 256, 4096, "float32", "row", "auto:x3"),
                                  (1024, 1024, 1024, "float32", "row", "auto:x3"),
                                  (1500, 2100, 520, "float32", "row", "128x128:4:2:p:t:x3"),
                                  (333, 129, 104, "float32", "col", "128x128:3:1:d0:plain:x3"),
                                  (300, 260, 1000, "bfloat16", "row", "128x64:4:2:s3:x3")):
        add("tfloat32", m, n, k, bm="col", od=od, om=om, beta=0.5 if om == "col" else 0.0,
            spec=spec)
    if seed is not None:
        rng = random.Random(seed)
        for _ in range(8):
            dtype = rng.choice(("bfloat16", "float16", "tfloat32"))
            am, bm = ("row", "col") if dtype == "tfloat32" else \
                (rng.choice(("row", "col")), rng.choice(("row", "col")))
            add(dtype, rng.randint(1, 700), rng.randint(1, 700), rng.randint(1, 1500), am, bm,
                rng.choice(("float32", "bfloat16", "float16")), rng.choice(("row", "col")),
                rng.choice((1.0, -0.75)), rng.choice((0.0, 0.5)))
    return out


def _matrix(rows, cols, major, dtype, gen):
    """A random (rows, cols) matrix of ``major`` whose leading dimension is padded to a
    multiple of 8 elements (TMA needs 16-byte rows), so any shape can be tested."""
    import torch
    shape = (rows, cols) if major == "row" else (cols, rows)
    ld = -(-shape[1] // 8) * 8
    x = torch.randn((shape[0], ld), generator=gen, device="cuda").to(torch_dtype(dtype))
    x = x[:, :shape[1]]
    return x if major == "row" else x.T


def operands(case, seed=0):
    """(a, b, flat, out, c0) of a case: random normal data, out NaN inside a NaN guard."""
    import torch
    gen = torch.Generator(device="cuda").manual_seed((zlib.crc32(str(case).encode()) ^ seed)
                                                     & 0x7FFFFFFF)
    d, od = case["dtype"], case["out_dtype"]
    a = _matrix(case["m"], case["k"], case["a_major"], d, gen)
    b = _matrix(case["k"], case["n"], case["b_major"], d, gen)
    flat, out = guarded_out(case["m"], case["n"], torch_dtype(od), case["out_major"], False)
    c0 = None
    if case["beta"]:
        c0 = _matrix(case["m"], case["n"], "row", od, gen)
        out.copy_(c0)
    return a, b, flat, out, c0


def check(case, seed=0):
    """Run one case; (ok, error ratio, guard intact)."""
    import torch
    from gemm.hopper import hopper_matmul
    a, b, flat, out, c0 = operands(case, seed)
    cfg = parse_config(case["spec"], case["dtype"])
    x3 = split_spec(case["spec"])[1]
    res = hopper_matmul(a, b, out, alpha=case["alpha"], beta=case["beta"], config=cfg,
                        tf32x3=x3)
    torch.cuda.synchronize()
    C = out.double().clone()
    out.fill_(math.nan)
    guard = bool(flat.isnan().all())
    err = error_ratio(C, a.double(), b.double(), "float32" if x3 else case["dtype"],
                      case["out_dtype"], case["alpha"], case["beta"],
                      None if c0 is None else c0.double())
    return err <= 1 and guard and res is out, err, guard


def compile_all(variants, workers, log):
    """Compile the variants in parallel child processes (their cubin files come back)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from gemm.hopper import compile_variant
    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        list(pool.map(compile_variant, variants))
    log(f"compiled {len(variants)} variants in {time.perf_counter() - t0:.1f} s "
        f"({workers} processes)")


def variants_of(case_list, specs=(), sections=(), seed=0):
    from gemm.hopper import HopperVariant, plan_call
    out = set()
    for case in case_list:
        a, b, _, o, _ = operands(case, seed)
        out.add(plan_call(a, b, o, config=parse_config(case["spec"], case["dtype"]),
                          tf32x3=split_spec(case["spec"])[1]))
    for section in sections:
        dtype, b_major, out_dtype = SECTIONS[section]
        for spec in specs:
            out.add(HopperVariant(parse_config(spec, dtype), "K", b_major, out_dtype))
    return sorted(out, key=str)


def correctness(log, seed=0):
    rows, bad = [], 0
    for case in cases(seed):
        t0 = time.perf_counter()
        try:
            ok, err, guard = check(case, seed)
        except Exception as e:  # noqa: BLE001 - reported, counted as a failure
            ok, err, guard = False, math.inf, False
            log(f"  ERROR {case}: {type(e).__name__}: {e}")
        bad += not ok
        rows.append(dict(case, ok=ok, err=err, guard=guard))
        log(f"  {'ok ' if ok else 'BAD'} {case['dtype']} {case['m']}x{case['n']}x{case['k']} "
            f"A {case['a_major']} B {case['b_major']} out {case['out_dtype']} "
            f"{case['out_major']} a={case['alpha']} b={case['beta']} {case['spec']}: "
            f"err {err:.2e} ({time.perf_counter() - t0:.1f} s)")
    log(f"correctness: {len(rows) - bad}/{len(rows)} passed")
    return rows


def event_times(fn, reps, warmup=3):
    import torch
    for i in range(max(warmup, SETS)):
        fn(i % SETS)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(reps)]
    torch.cuda.synchronize()
    for i, (s, e) in enumerate(ev):
        s.record()
        fn(i % SETS)
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in ev]


def time_section(section, n, specs, reps, log):
    import torch
    from gemm.hopper import hopper_matmul
    from benchmarks.triton_baseline import triton_matmul
    dtype, b_major, out_dtype = SECTIONS[section]
    t, ot = torch_dtype(dtype), torch_dtype(out_dtype)
    sets = []
    for _ in range(SETS):
        a = torch.randn(n, n, device="cuda").to(t)
        b = torch.randn(n, n, device="cuda").to(t)
        sets.append((a, b.T if b_major == "K" else b,
                     torch.empty(n, n, device="cuda", dtype=ot)))
    flop = 2.0 * n ** 3
    rows = []

    def row(name, ms, err):
        med = statistics.median(ms)
        r = dict(section=section, n=n, name=name, ms=med, tflops=flop / med / 1e9, err=err)
        log(f"  {section} n={n} {name}: {r['tflops']:.1f} TFLOP/s ({med:.3f} ms) "
            f"err {err:.2e}")
        rows.append(r)

    def err_of(i, C):
        a, b, _ = sets[i]
        return error_ratio(C.double(), a.double(), b.double(), dtype, out_dtype)

    torch.backends.cuda.matmul.allow_tf32 = dtype == "tfloat32"
    if dtype == "tfloat32" or out_dtype != "float32":
        cublas = lambda i: torch.mm(sets[i][0], sets[i][1], out=sets[i][2])  # noqa: E731
    else:
        cublas = lambda i: torch.mm(sets[i][0], sets[i][1], out_dtype=torch.float32)  # noqa
    before = event_times(cublas, reps)
    cu_err = err_of(0, cublas(0))
    tri = lambda i: triton_matmul(sets[i][0], sets[i][1], sets[i][2])  # noqa: E731
    row("Triton (best of 6 configs)", event_times(tri, reps), err_of(0, tri(0)))
    for spec in specs:
        cfg = parse_config(spec, dtype)
        ours = lambda i, cfg=cfg: hopper_matmul(sets[i][0], sets[i][1], sets[i][2],  # noqa
                                                config=cfg)
        try:
            ms = event_times(ours, reps)
            row(f"hopper {spec}", ms, err_of(0, ours(0)))
        except Exception as e:  # noqa: BLE001 - a config that fails is reported
            log(f"  {section} n={n} hopper {spec}: FAILED {type(e).__name__}: {e}")
    row("cuBLAS", before + event_times(cublas, reps), cu_err)
    return rows


def table(rows):
    lines = []
    for section in SECTIONS:
        sec = [r for r in rows if r["section"] == section]
        if not sec:
            continue
        sizes = sorted({r["n"] for r in sec})
        lines += ["", f"### {section}", "",
                  "| kernel | " + " | ".join(f"{n}^3 TFLOP/s (x cuBLAS)" for n in sizes) + " |",
                  "|---|" + "---|" * len(sizes)]
        names = list(dict.fromkeys(r["name"] for r in sec))
        for name in names:
            cells = []
            for n in sizes:
                base = next(r for r in sec if r["n"] == n and r["name"] == "cuBLAS")
                got = [r for r in sec if r["n"] == n and r["name"] == name]
                cells.append(f"{got[0]['tflops']:.0f} ({got[0]['tflops'] / base['tflops']:.2f}x)"
                             if got else "-")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--configs", nargs="+", default=["default"])
    ap.add_argument("--sections", nargs="+", default=list(SECTIONS))
    ap.add_argument("--no-correctness", action="store_true")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0, help="random cases and data")
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    args = ap.parse_args(argv)
    import torch
    log = lambda s: print(s, flush=True)  # noqa: E731
    log(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    result = {"device": torch.cuda.get_device_name()}
    compile_all(variants_of([] if args.no_correctness else cases(args.seed),
                            [] if args.no_timing else args.configs,
                            [] if args.no_timing else args.sections), args.workers, log)
    if not args.no_correctness:
        result["correctness"] = correctness(log, args.seed)
    rows = []
    if not args.no_timing:
        for section in args.sections:
            for n in args.sizes:
                rows += time_section(section, n, args.configs, args.reps, log)
                if args.json:
                    with open(args.json, "w") as f:
                        json.dump(dict(result, timing=rows), f, indent=1, default=str)
        log(table(rows))
    result["timing"] = rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
    bad = [r for r in result.get("correctness", []) if not r["ok"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
