"""Every shape, not only big squares (issue 14): ``gemm.matmul`` untuned, as a new user calls
it, against cuBLAS (torch.mm) and Triton in the same run, on a suite of LLM and scientific
shapes. GPU only.

    python3 benchmarks/shapes.py [--dtypes bf16 fp32] [--reps R] [--calls C] [--no-graphs]
        [--json PATH] [--plot PNG] [--quick] [--held-out] [--shapes MxNxK ...] [--tune] [--part I N]
        [--precision ieee|tf32x3] [--ours-last] [--b-rows]

Shapes: M in 1, 16, 64, 128, 512, 2048, 8192 over (N, K) in 4096x4096, 14336x4096,
4096x14336, 128256x4096 (a weight stored (N, K) row-major, so B = W.T is K-major, A
row-major), and square, tall-skinny and K-heavy problems. bf16: out bf16 as torch.mm;
Triton's tutorial kernel (benchmarks/triton_baseline.py, best of its configs) beside, and on
a 9.x GPU our default kernel without split-K ("no split-K": the default config passed
explicitly, which keeps split_k=1), to show what the shape-aware split-K gives, and
"rules": ``kernel="hopper"``, gemm.hopper.default_config's rules alone (without the shipped
table of gemm.tuning.shape_table that an unnamed call asks first). Where the rules swap A and B (few
rows against a wide B: gemm.hopper.swaps), also what an unnamed call took before:
"unswapped", the rules' unswapped config, and "table", the table's config where it has one
near. fp32: "ours" is ``gemm.matmul``'s default (3xTF32 on the Hopper kernel where it runs,
else the exact SIMT kernel; ``--precision`` names one) against cuBLAS with TF32 off (Triton's
tl.dot would use TF32: left out), "ieee" the exact SIMT kernel beside it, and cuBLAS's
result is checked as ours is ("cuBLAS error"). Each result is first
checked on 64 random rows against float64 (bf16: |C - ref| <= 2^-8 |ref| + 1e-3 |A| @ |B|;
fp32: 1e-5 |A| @ |B|). Times are medians of CUDA-event timings of a CUDA graph of
``--calls`` calls (3 rotating input sets), after one timing of the row's first column
that is thrown away (the first timing of a row ran slow, whichever column it was): the
GPU's time alone
(``--no-graphs``: the calls queued from Python, where the host's work per call shows);
each call's host time is measured apart. The headline columns, first in each row: eager
calls in the form users write, ``gemm.matmul(a, b)`` without an out beside
``torch.matmul(a, b)``, ``--calls`` calls queued from Python between two CUDA events (the
host's work per call shows where it exceeds the GPU's). Prints a table per dtype with the
ratios per shape and their geometric means, last.

``--tune`` (bf16) also tunes each shape after its untuned timings (``gemm.tuning.autotune.tune``,
its cache ``$GEMM_AUTOTUNE_CACHE``) and times the winner, then the rules and cuBLAS again
beside it (the GPU's clocks after the tuning may differ): the "tuned" column, compared with
that cuBLAS timing, whose configs ``gemm.tuning.shape_table`` records. ``--held-out`` runs shapes
beside the suite instead, to check that what was derived from the suite carries over.
"""

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import gemm  # noqa: E402
from gemm import hopper  # noqa: E402
from gemm.call.binary import sm_count  # noqa: E402
from gemm.tuning import autotune, shape_table  # noqa: E402

LLM_M = (1, 16, 64, 128, 512, 2048, 8192)
LLM_NK = ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096))
OTHER = [("square", s, s, s) for s in (1024, 2048, 4096, 8192)] + [
    ("tall-skinny", 65536, 128, 128), ("tall-skinny", 65536, 64, 4096),
    ("K-heavy", 1024, 1024, 16384), ("K-heavy", 256, 256, 65536),
    ("K-heavy", 2048, 2048, 32768)]
# Shapes outside the suite, for checking that what was derived from the suite's tuned runs
# (gemm.tuning.shape_table) carries over to the shapes beside them (--held-out). Each of the first
# three sets, run with the table's rules of its time, showed configs taken too far and led to
# a rule (see gemm.tuning.shape_table); the fourth, written after the last rule, checks the result.
HELD_OUT = [("held-out", m, n, k) for m in (8, 32, 256, 1024)
            for n, k in ((11008, 4096), (4096, 11008), (8192, 8192))] + [
    ("held-out", 3000, 3000, 3000), ("held-out", 768, 768, 768), ("held-out", 32768, 256, 256),
    ("held-out", 512, 512, 32768)]
HELD_OUT += [("held-out 2", m, 4096, 4096) for m in (24, 48, 100, 160, 400, 640)] + [
    ("held-out 2", m, n, k) for m, n, k in (
        (8, 14336, 4096), (24, 14336, 5120), (48, 5120, 14336), (96, 4096, 12288),
        (384, 4096, 12288), (1536, 4096, 16384), (896, 896, 1024), (1280, 1280, 1280),
        (49152, 128, 128), (65536, 96, 4096), (320, 320, 49152))]
HELD_OUT += [("held-out 3", m, n, k) for m, n, k in (
    (12, 4096, 4096), (56, 4096, 4096), (112, 4096, 4096), (120, 4096, 14336),
    (448, 4096, 4096), (600, 4096, 16384), (2560, 4096, 12288), (2, 14336, 4096),
    (20, 12288, 4096), (1152, 1152, 1152), (81920, 128, 160), (65536, 48, 4096),
    (300, 300, 60000), (200, 256, 65536))]
HELD_OUT += [("held-out 4", m, n, k) for m, n, k in (
    (10, 4096, 5000), (40, 4096, 3584), (80, 4096, 4096), (104, 4096, 4096),
    (112, 4096, 16384), (480, 4096, 12288), (512, 3584, 4096), (1792, 4096, 14336),
    (1, 12288, 4096), (16, 16384, 4096), (928, 928, 928), (65536, 112, 256),
    (57344, 64, 3072), (256, 192, 65536), (224, 224, 81920))]
SETS = 3


def suite(quick=False, held_out=False):
    """(kind, M, N, K) of every shape (``held_out``: the shapes beside the suite instead)."""
    shapes = list(HELD_OUT) if held_out else [("LLM", m, n, k) for n, k in LLM_NK
                                               for m in LLM_M] + OTHER
    if quick:
        shapes = [s for s in shapes if s[1] * s[2] * s[3] <= 2 ** 36]
    return shapes


def operands(m, n, k, dtype, gen, b_rows=False):
    """A (M, K) row-major and B = W.T for a W stored (N, K) row-major; ``b_rows``: B stored
    (K, N) row-major instead."""
    a = torch.randn((m, k), device="cuda", generator=gen).to(dtype)
    if b_rows:
        return a, torch.randn((k, n), device="cuda", generator=gen).to(dtype)
    w = torch.randn((n, k), device="cuda", generator=gen).to(dtype)
    return a, w.T


def median_us(fn, sets, reps, calls=1):
    """Median microseconds per call of ``fn`` over ``reps`` timings, each of ``calls`` calls
    queued back to back between two CUDA events (the sets in turn). One call: the GPU waits
    for each call's host work too (a call's latency); many: the host work overlaps the GPU's
    (a kernel's throughput, as a loop of calls or a CUDA graph sees it)."""
    for s in sets:
        fn(*s)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for j in range(calls):
            fn(*sets[(i * calls + j) % len(sets)])
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / calls)
    return statistics.median(times)


def graph_us(fn, sets, reps, calls=10):
    """Median microseconds per call of ``fn`` replayed from a CUDA graph of ``calls`` calls
    (the sets in turn): the GPU's time alone, without the host's work per call. Warmed up
    on the capture's stream first (a first call allocates and binds there)."""
    return graphs_together({"fn": fn}, sets, reps, calls)["fn"]


def graphs_together(fns, sets, reps, calls=10):
    """``{name: us}``: :func:`graph_us` of each of ``fns`` (name -> function), every rep
    replaying each one's graph in turn, so that the GPU's clock and temperature drift alike
    over all of them."""
    stream = torch.cuda.Stream()
    graphs = {}
    for name, fn in fns.items():
        with torch.cuda.stream(stream):
            for s in sets:
                fn(*s)
        stream.synchronize()
        graphs[name] = graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for j in range(calls):
                fn(*sets[j % len(sets)])
        graph.replay()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, graph in graphs.items():
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            times[name].append(start.elapsed_time(stop) * 1e3 / calls)
    return {name: statistics.median(t) for name, t in times.items()}


def host_us(fn, args, calls=200):
    """Microseconds of host time per call (the GPU's work not waited for)."""
    import time
    fn(*args)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def error(a, b, out, bf16, gen):
    """Error / tolerance on 64 random rows of the product, against float64."""
    rows = torch.randint(0, a.shape[0], (min(64, a.shape[0]),), device="cuda", generator=gen)
    a64, b64 = a[rows].double(), b.double()
    ref, bound = a64 @ b64, a64.abs() @ b64.abs()
    tol = 2 ** -8 * ref.abs() + 1e-3 * bound if bf16 else 1e-5 * bound
    err = (out[rows].double() - ref).abs() / (tol + 1e-30)
    return float(err.nan_to_num(nan=float("inf")).max())


def tma_fits(a, b, out):
    """Whether the Hopper kernel can be named for these operands (TMA reads their rows);
    where not, the columns that name it are left out of the shape's row."""
    try:
        hopper.plan_call(a, b, out)
    except hopper.TmaUnfit:
        return False
    return True


def run(dtype_name, shapes, reps, calls, graphs, log, tune=False, precision=None,
        ours_last=False, b_rows=False):
    bf16 = dtype_name == "bf16"
    dtype = torch.bfloat16 if bf16 else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = False
    triton = None
    if bf16:
        from benchmarks.triton_baseline import triton_matmul as triton
    gen = torch.Generator(device="cuda").manual_seed(1)
    rows = []
    for kind, m, n, k in shapes:
        sets = [operands(m, n, k, dtype, gen, b_rows) for _ in range(SETS)]
        sets = [(a, b, torch.empty((m, n), device="cuda", dtype=dtype)) for a, b in sets]
        a, b, out = sets[0]
        prec = dict(precision=precision) if not bf16 and precision else {}
        out.fill_(math.nan)
        gemm.matmul(a, b, out, **prec)
        err = error(a, b, out, bf16, gen)
        fns = {"ours": lambda x, y, o: gemm.matmul(x, y, o, **prec),
               "cuBLAS": lambda x, y, o: torch.mm(x, y, out=o)}
        extra = {}
        if not bf16 and precision != "ieee":       # the exact kernel beside the default
            fns["ieee"] = lambda x, y, o: gemm.matmul(x, y, o, precision="ieee")
            out.fill_(math.nan)
            torch.mm(a, b, out=out)
            extra["cuBLAS_error"] = error(a, b, out, bf16, gen)
        if triton:
            fns["Triton"] = lambda x, y, o: triton(x, y, o)
        if bf16 and hopper.hopper_supported(torch.cuda.current_device()) and tma_fits(a, b, out):
            plain = hopper.HopperConfig()           # the default's tiles without split-K
            fns["no split-K"] = lambda x, y, o: gemm.matmul(x, y, o, kernel=plain)
            fns["rules"] = lambda x, y, o: gemm.matmul(x, y, o, kernel="hopper")
            sms = sm_count(torch.cuda.current_device())
            if hopper.swaps(m, n, sms, narrow=True) or hopper.pairs(m, n, k, sms, True):
                # the rules swap A and B (A is row-major: narrow tiles up to 32 rows, two of
                # the rows up to PAIR_ROWS): what they did before
                old = {"unswapped": hopper.default_config("bfloat16", m, n, k, 1, sms),
                       "table": shape_table.lookup("bfloat16", m, n, k, sms)}
                for name, cfg in old.items():
                    if cfg is not None:
                        fns[name] = lambda x, y, o, cfg=cfg: gemm.matmul(x, y, o, kernel=cfg)
        timing = graph_us if graphs else median_us
        order = [n for n in fns if n != "ours"] + ["ours"] if ours_last else list(fns)
        timing(fns[order[0]], sets, reps, calls)        # thrown away (see the docstring)
        t = {name: timing(fns[name], sets, reps, calls) for name in order}
        tuned = {}
        if tune and bf16:       # after the untuned timings: matmul reads the tuned cache
            cfg = autotune.tune(a, b, out, progress=False)
            out.fill_(math.nan)
            gemm.matmul(a, b, out, kernel=cfg)
            err = max(err, error(a, b, out, bf16, gen))
            # the tuned config, and again the rules and cuBLAS beside it: after minutes of
            # tuning the GPU may run at other clocks than during the untuned timings
            # (8192^3's default config timed 9% slower as the tuned pick than as the rules)
            after = {"tuned": lambda x, y, o: gemm.matmul(x, y, o, kernel=cfg),
                     "ours_after_tune": fns["ours"], "cuBLAS_after_tune": fns["cuBLAS"]}
            t.update({name: timing(fn, sets, reps, calls) for name, fn in after.items()})
            tuned = dict(tuned=autotune.config_label(cfg), tuned_config=dataclasses.asdict(cfg))
        host = {f"{name}_host_us": host_us(fns[name], sets[0]) for name in ("ours", "cuBLAS")}
        # the headline: eager calls in the form users write, no out, queued from Python
        eager = {"torch_eager": lambda x, y, o: torch.matmul(x, y),
                 "ours_eager": lambda x, y, o: gemm.matmul(x, y, **prec)}
        t.update({name: median_us(fn, sets, reps, calls) for name, fn in eager.items()})
        flops = 2 * m * n * k
        row = dict(dtype=dtype_name, kind=kind, m=m, n=n, k=k, error=err, **extra, **tuned,
                   **{f"{name}_us": v for name, v in t.items()}, **host,
                   eager_ratio=t["torch_eager"] / t["ours_eager"],
                   ratio=t["cuBLAS"] / t["ours"], tflops=flops / t["ours"] / 1e6)
        rows.append(row)
        log(json.dumps(row))
        del sets, a, b, out
        torch.cuda.empty_cache()
    return rows


def geomean(values):
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def table(rows):
    names = [n for n in ("ours", "ieee", "rules", "no split-K", "unswapped", "table", "tuned",
                         "ours_after_tune", "cuBLAS", "cuBLAS_after_tune", "Triton")
             if any(f"{n}_us" in r for r in rows)]
    tuned = "tuned_us" in rows[0]
    ce = "cuBLAS_error" in rows[0]
    lines = ["| shape (M x N x K) | eager us ours / torch.matmul | eager ratio | "
             + " | ".join(f"{n} us" for n in names)
             + " | ours TFLOP/s | ours / cuBLAS | " + ("tuned / cuBLAS | tuned config | "
                                                        if tuned else "")
             + "host us ours / cuBLAS | error |" + (" cuBLAS error |" if ce else ""),
             "|---|" + "---|" * (len(names) + 6 + 2 * tuned + ce)]
    for r in rows:
        lines.append(f"| {r['kind']} {r['m']}x{r['n']}x{r['k']} | "
                     f"{r['ours_eager_us']:.1f} / {r['torch_eager_us']:.1f} | "
                     f"{r['eager_ratio']:.2f}x | "
                     + " | ".join(f"{r[n + '_us']:.1f}" if n + "_us" in r else "-"
                                  for n in names)
                     + f" | {r['tflops']:.1f} | {r['ratio']:.2f}x | "
                     + (f"{tuned_ratio(r):.2f}x | {r['tuned']} | " if tuned else "")
                     + f"{r['ours_host_us']:.0f} / {r['cuBLAS_host_us']:.0f} | {r['error']:.3f} |"
                     + (f" {r['cuBLAS_error']:.3f} |" if ce else ""))
    worst = min(rows, key=lambda r: r["eager_ratio"])
    lines.append(f"\ngeometric mean, eager calls without out, ours / torch.matmul: "
                 f"{geomean(r['eager_ratio'] for r in rows):.3f}x over {len(rows)} shapes; "
                 f"lowest {worst['eager_ratio']:.2f}x at {worst['m']}x{worst['n']}x{worst['k']}")
    worst = min(rows, key=lambda r: r["ratio"])
    lines.append("geometric mean ours / cuBLAS (the columns' timing, with out): "
                 f"{geomean(r['ratio'] for r in rows):.3f}x "
                 f"over {len(rows)} shapes; lowest {worst['ratio']:.2f}x at "
                 f"{worst['m']}x{worst['n']}x{worst['k']}")
    if "ieee_us" in rows[0]:
        lines.append("geometric mean ieee / cuBLAS: "
                     f"{geomean(r['cuBLAS_us'] / r['ieee_us'] for r in rows):.3f}x")
    if tuned:
        lines.append("geometric mean tuned / cuBLAS: "
                     f"{geomean(tuned_ratio(r) for r in rows):.3f}x (cuBLAS timed after the "
                     "tuning, beside the tuned config)")
    return "\n".join(lines)


def tuned_ratio(row):
    """cuBLAS / tuned speed, cuBLAS timed beside the tuned config (after the tuning) where
    the row has that timing."""
    return row.get("cuBLAS_after_tune_us", row["cuBLAS_us"]) / row["tuned_us"]


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(12, 4))
    for dt in sorted({r["dtype"] for r in rows}):
        sel = [r for r in rows if r["dtype"] == dt]
        ax.plot(range(len(sel)), [r["ratio"] for r in sel], "o-", label=dt)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_ylabel("ours / cuBLAS (speed)")
    ax.set_xlabel("shape index (benchmarks/shapes.py order)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"], choices=["bf16", "fp32"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--quick", action="store_true", help="only shapes of <= 2^36 M*N*K")
    ap.add_argument("--held-out", action="store_true",
                    help="the shapes beside the suite (HELD_OUT) instead of the suite")
    ap.add_argument("--shapes", nargs="+", metavar="MxNxK",
                    help="these shapes instead of the suite")
    ap.add_argument("--part", type=int, nargs=2, metavar=("I", "N"), default=(0, 1),
                    help="only the I-th of N equal parts of the shapes (runs that must be split)")
    ap.add_argument("--tune", action="store_true",
                    help="bf16: also tune each shape (gemm.tuning.autotune.tune, into the cache of "
                         "$GEMM_AUTOTUNE_CACHE) and time the tuned config")
    ap.add_argument("--no-graphs", action="store_true",
                    help="time calls queued from Python instead of replayed CUDA graphs")
    ap.add_argument("--precision", choices=["ieee", "tf32x3"],
                    help="fp32: gemm.matmul's precision for 'ours' (default: none named)")
    ap.add_argument("--b-rows", action="store_true",
                    help="B stored (K, N) row-major, not as W.T for a row-major (N, K) W")
    ap.add_argument("--ours-last", action="store_true",
                    help="time 'ours' after the other columns of its row, not first")
    ap.add_argument("--calls", type=int, default=10,
                    help="calls queued back to back per timing (1: each call's latency, "
                         "the host's work included)")
    args = ap.parse_args()
    rows = []
    for dt in args.dtypes:
        shapes = suite(args.quick, args.held_out) if not args.shapes else [
            ("asked", *(int(x) for x in text.split("x"))) for text in args.shapes]
        i, parts = args.part
        shapes = shapes[i * len(shapes) // parts:(i + 1) * len(shapes) // parts]
        rows += run(dt, shapes, args.reps, args.calls,
                    not args.no_graphs, lambda s: print(s, flush=True), args.tune,
                    args.precision, args.ours_last, args.b_rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)
    if args.plot:
        plot(rows, args.plot)
    how = "calls queued from Python" if args.no_graphs else "calls in a CUDA graph"
    print(f"\n{torch.cuda.get_device_name()}, gemm.matmul untuned, median of {args.reps} "
          f"timings of {args.calls} {how}")
    for dt in args.dtypes:
        print(f"\n### {dt}\n")
        print(table([r for r in rows if r["dtype"] == dt]))


if __name__ == "__main__":
    main()
