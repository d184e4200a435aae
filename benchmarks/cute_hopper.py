"""The SM90 GEMM written with gemm.cute beside the generated one on the shapes suite
(issue 34: each family >= 0.98x its generated kernel, no shape below 0.95x).

    python3 benchmarks/cute_hopper.py [--reps R] [--json PATH] [--quick] [--first-calls]
                                      [--plain] [--plain-x3] [--table] [--beta B]

Both kernels with the same rules (``gemm.hopper.default_config`` and its split-K, swapped
operands on narrow tiles, 3xTF32's tiles): ``gemm.hopper.hopper_matmul(a, w.T, cute=False)``
(the generated kernel) and ``cute=True`` (the one written with gemm.cute, which
``gemm.matmul`` runs since 2026-11-29), beside ``torch.mm(a, w.T)`` (cuBLAS; TF32 off for
float32). ``hopper_matmul`` plans every call (no kept plans): its eager calls carry ~100 us
or more of host time a call, the same for both kernels, so the graph columns compare them
(``benchmarks/shapes.py`` times the calls users write). Shapes: benchmarks/shapes.py's suite in
bf16 (A (M, K) row-major, W (N, K) row-major), and float32 (3xTF32 on both kernels:
``tf32x3=True``) at M in 16, 128, 2048, 8192 over 4096 x 4096, 4096^3 and 128 x 4096
x 14336. Per shape: eager calls without an out (``timed_together``: the
three interleaved in every rep, the median of R loops of calls between CUDA events), and, an
extra column per kernel, the same calls with an out replayed from a CUDA graph (the GPU's
time alone, where the host's work per call would hide the kernels' difference; the two
kernels' graphs replayed in turn in every rep). Prints a table and the geometric means last.
``--quick``: the LLM shapes with M = 2048 and the squares, bf16. ``--first-calls``: each
kernel's first call in a fresh process with an empty kernel cache ($LAYOUTALG_CACHE):
numba's compile, the CUDA context and imports (the same for both). ``--plain``: the bf16
shapes on one config of the plain schedule (no producer warpgroup; :data:`PLAIN`), called
through ``hopper_matmul(a, w.T, config=PLAIN, cute=...)`` for both kernels;
``--plain-x3`` the float32 shapes on the plain schedule's 3xTF32 (:data:`PLAIN_X3`) alike.
``--table``: the bf16 shapes for which the shipped table (``gemm.tuning.shape_table``) has a
config, which an unnamed ``gemm.matmul`` call takes, both kernels on that config.
``--beta B``: the bf16 shapes as ``out = A @ W.T + B * out`` (the eager calls with an out,
as a residual's users write them; cuBLAS as ``torch.addmm(c, a, w.T, beta=B)``), which the
registers epilogue stores (the TMA epilogue does not read C).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

from gemm.hopper import HopperConfig, hopper_matmul  # noqa: E402
from gemm.tuning import shape_table  # noqa: E402
from gemm.tuning.autotune import config_label  # noqa: E402
from benchmarks.shapes import graphs_together, suite  # noqa: E402
from benchmarks.timing import timed_together  # noqa: E402

KERNELS = ("hopper", "cute_hopper")
FP32 = [("fp32", m, 4096, 4096) for m in (16, 128, 2048, 8192)] + [
    ("fp32", 4096, 4096, 4096), ("fp32", 128, 4096, 14336)]
PLAIN = HopperConfig(bM=128, bN=128, stages=4, consumers=1, schedule="plain", delay_release=1)
PLAIN_X3 = HopperConfig(dtype="tfloat32", tf32x3=True, bM=64, bN=128, stages=3, consumers=1,
                        schedule="plain")
FIRST_CALL = """
import time, torch
from gemm.hopper import hopper_matmul
a = torch.randn(256, 512, device="cuda").to(torch.bfloat16)
w = torch.randn(384, 512, device="cuda").to(torch.bfloat16)
torch.cuda.synchronize()
t0 = time.perf_counter()
hopper_matmul(a, w.T, cute={cute})
torch.cuda.synchronize()
print(time.perf_counter() - t0)
"""


def row(dtype, m, n, k, reps, config=None, beta=0.0):
    """A shape's timings (ms): eager calls of cuBLAS and both kernels, and each kernel's
    CUDA-graph replay; and the largest error of each kernel against float64 on 64 rows
    (relative to |A| @ |B| + |beta C|). ``config``: both kernels on that HopperConfig;
    ``beta``: ``out = A @ W.T + beta * out``, every call with an out."""
    a = torch.randn(m, k, device="cuda").to(dtype)
    w = torch.randn(n, k, device="cuda").to(dtype)
    c0 = torch.randn(m, n, device="cuda").to(dtype)
    x3 = dtype == torch.float32

    def run(kern, x, y, o=None):
        return hopper_matmul(x, y, o, beta=beta, config=config, tf32x3=x3,
                             cute=kern == "cute_hopper")
    if beta:
        outs = {kern: c0.clone() for kern in ("cuBLAS",) + KERNELS}
        fns = {"cuBLAS": lambda: torch.addmm(outs["cuBLAS"], a, w.T, beta=beta,
                                             out=outs["cuBLAS"])}
        fns.update({kern: lambda kern=kern: run(kern, a, w.T, outs[kern]) for kern in KERNELS})
    else:
        fns = {"cuBLAS": lambda: torch.mm(a, w.T)}
        fns.update({kern: lambda kern=kern: run(kern, a, w.T) for kern in KERNELS})
    t = timed_together(fns, reps)
    sets = [(a, w.T, torch.empty(m, n, device="cuda", dtype=dtype))]
    calls = {kern: (lambda x, y, o, kern=kern: run(kern, x, y, o)) for kern in KERNELS}
    t.update({kern + " graph": us / 1e3
              for kern, us in graphs_together(calls, sets, reps).items()})
    err = {}
    for kern, call in calls.items():
        o = sets[0][2].copy_(c0) if beta else sets[0][2].fill_(float("nan"))
        call(*sets[0])
        rows = torch.randperm(m, device="cuda")[:64]
        ref = a[rows].double() @ w.double().T + beta * c0[rows].double()
        bound = a[rows].double().abs() @ w.double().abs().T + abs(beta * c0[rows].double())
        err[kern] = ((o[rows].double() - ref).abs() / bound).max().item()
    return t, err


def first_call(kernel):
    """Seconds of a first call in a fresh process with an empty kernel cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, LAYOUTALG_CACHE=cache)
        out = subprocess.run([sys.executable, "-c", FIRST_CALL.format(cute=kernel == "cute_hopper")],
                             env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--first-calls", action="store_true")
    ap.add_argument("--plain", action="store_true")
    ap.add_argument("--plain-x3", action="store_true")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--beta", type=float, default=0.0)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    bf16_only = args.plain or args.beta or args.table
    shapes = ([] if args.plain_x3 else [("bf16",) + s[1:] for s in suite()]) + \
        ([] if bf16_only else FP32)
    if args.quick:
        shapes = [s for s in shapes if s[0] == "bf16" and (s[1] == 2048 or s[1] == s[2] == s[3])]
    configs = {s: PLAIN if args.plain else PLAIN_X3 if args.plain_x3 else None for s in shapes}
    if args.table:      # the shipped table's config of each shape that has one
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        configs = {s: shape_table.lookup("bfloat16", *s[1:], sms, narrow=True) for s in shapes}
        shapes = [s for s in shapes if configs[s] is not None]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; eager calls, no out, "
          f"median of {args.reps}; graph: CUDA-graph replay with an out"
          + (f"; both kernels on {PLAIN}" if args.plain else "")
          + (f"; both kernels on {PLAIN_X3}" if args.plain_x3 else "")
          + ("; both kernels on the shipped table's config" if args.table else "")
          + (f"; out = A @ W.T + {args.beta} * out (cuBLAS: torch.addmm)" if args.beta else ""))
    print(f"{'dtype':5} {'M x N x K':>20} {'cuBLAS us':>10} {'gen us':>9} {'cute us':>9} "
          f"{'cute/gen':>9} {'graph gen':>10} {'graph cute':>11} {'graph c/g':>10} "
          f"{'err gen':>8} {'err cute':>8}")
    rows = []
    for dt, m, n, k in shapes:
        t, err = row(torch.bfloat16 if dt == "bf16" else torch.float32, m, n, k, args.reps,
                     configs[(dt, m, n, k)], args.beta)
        r = dict(dtype=dt, shape=(m, n, k), ms=t, error=err,
                 vs_generated=t["hopper"] / t["cute_hopper"],
                 graph_vs_generated=t["hopper graph"] / t["cute_hopper graph"],
                 vs_cublas=t["cuBLAS"] / t["cute_hopper"])
        rows.append(r)
        print(f"{dt:5} {f'{m}x{n}x{k}':>20} {t['cuBLAS'] * 1e3:10.1f} "
              f"{t['hopper'] * 1e3:9.1f} {t['cute_hopper'] * 1e3:9.1f} "
              f"{r['vs_generated']:9.3f} {t['hopper graph'] * 1e3:10.1f} "
              f"{t['cute_hopper graph'] * 1e3:11.1f} {r['graph_vs_generated']:10.3f} "
              f"{err['hopper']:8.1e} {err['cute_hopper']:8.1e}"
              + (f"  {config_label(configs[(dt, m, n, k)])}" if args.table else ""), flush=True)
    for dt in ("bf16", "fp32"):
        picked = [r for r in rows if r["dtype"] == dt]
        if not picked:
            continue
        gm = {key: statistics.geometric_mean(r[key] for r in picked)
              for key in ("vs_generated", "graph_vs_generated", "vs_cublas")}
        low = min(picked, key=lambda r: r["graph_vs_generated"])
        print(f"{dt}, {len(picked)} shapes: cute / generated {gm['vs_generated']:.3f}x eager, "
              f"{gm['graph_vs_generated']:.3f}x graph (lowest {low['graph_vs_generated']:.3f}x "
              f"at {'x'.join(map(str, low['shape']))}); cute / cuBLAS {gm['vs_cublas']:.3f}x "
              "eager (geometric means)")
    firsts = {kernel: first_call(kernel) for kernel in KERNELS} if args.first_calls else {}
    if firsts:
        print("first call, fresh process and kernel cache: "
              + ", ".join(f"{k} {v:.1f} s" for k, v in firsts.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "first_call_s": firsts}, f, indent=1)


if __name__ == "__main__":
    main()
