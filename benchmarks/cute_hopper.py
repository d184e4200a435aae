"""The SM90 GEMM written with gemm.cute beside the generated one and cuBLAS (issue 33).

    python3 benchmarks/cute_hopper.py [--reps R] [--json PATH] [--quick]

Eager calls as users write them, without an out: ``gemm.matmul(a, w.T,
kernel="cute_hopper")``, ``gemm.matmul(a, w.T, kernel="hopper")`` (the generated kernel with
its rules' config: split-K and swaps where they apply; cute_hopper takes the same tiles
without them) and ``torch.mm(a, w.T)`` (cuBLAS), bf16 and f16 in and out, A row-major and W
(N, K) row-major; each the median over R timings of a loop of calls between CUDA events,
the three interleaved in every rep (``timed_together``: the clocks drift alike for all).
Shapes: 4096^3 and 8192^3, and an LLM set (M in 128, 2048, 8192 over (N, K) in 4096x4096,
14336x4096, 4096x14336). Then each kernel's first call in a fresh process with an empty
kernel cache ($LAYOUTALG_CACHE): numba's compile, the CUDA context and imports (the same
for both). Prints a table and the geometric means last. ``--quick``: bf16 at the squares and
M = 2048 of the LLM set, no first calls.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import gemm  # noqa: E402
from benchmarks.timing import timed_together  # noqa: E402

SQUARES = [(4096, 4096, 4096), (8192, 8192, 8192)]
LLM = [(m, n, k) for m in (128, 2048, 8192) for n, k in ((4096, 4096), (14336, 4096),
                                                         (4096, 14336))]
FIRST_CALL = """
import time, torch, gemm
a = torch.randn(256, 512, device="cuda").to(torch.bfloat16)
w = torch.randn(384, 512, device="cuda").to(torch.bfloat16)
torch.cuda.synchronize()
t0 = time.perf_counter()
gemm.matmul(a, w.T, kernel={kernel!r})
torch.cuda.synchronize()
print(time.perf_counter() - t0)
"""


def row(dtype, shape, reps):
    m, n, k = shape
    a = torch.randn(m, k, device="cuda").to(dtype)
    w = torch.randn(n, k, device="cuda").to(dtype)
    fns = {"cuBLAS": lambda: torch.mm(a, w.T),
           "hopper": lambda: gemm.matmul(a, w.T, kernel="hopper"),
           "cute_hopper": lambda: gemm.matmul(a, w.T, kernel="cute_hopper")}
    return timed_together(fns, reps)


def first_call(kernel):
    """Seconds of a first call in a fresh process with an empty kernel cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, LAYOUTALG_CACHE=cache)
        out = subprocess.run([sys.executable, "-c", FIRST_CALL.format(kernel=kernel)],
                             env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    shapes = SQUARES + [s for s in LLM if s[0] == 2048] if args.quick else SQUARES + LLM
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; eager calls, no out, "
          f"median of {args.reps}")
    print(f"{'dtype':9} {'M x N x K':>20} {'cuBLAS us':>10} {'hopper us':>10} "
          f"{'cute us':>10} {'cute/gen':>9} {'cute/cuBLAS':>12}")
    rows = []
    for dtype in (torch.bfloat16,) if args.quick else (torch.bfloat16, torch.float16):
        for shape in shapes:
            t = row(dtype, shape, args.reps)
            r = dict(dtype=str(dtype).split(".")[1], shape=shape, ms=t,
                     vs_generated=t["hopper"] / t["cute_hopper"],
                     vs_cublas=t["cuBLAS"] / t["cute_hopper"])
            rows.append(r)
            print(f"{r['dtype']:9} {'x'.join(map(str, shape)):>20} {t['cuBLAS'] * 1e3:10.1f} "
                  f"{t['hopper'] * 1e3:10.1f} {t['cute_hopper'] * 1e3:10.1f} "
                  f"{r['vs_generated']:9.3f} {r['vs_cublas']:12.3f}", flush=True)
    firsts = {} if args.quick else {kernel: first_call(kernel)
                                    for kernel in ("hopper", "cute_hopper")}
    for name, sel in (("squares", SQUARES), ("LLM set", LLM), ("all", SQUARES + LLM)):
        picked = [r for r in rows if tuple(r["shape"]) in sel]
        if not picked:
            continue
        gm = {key: math.exp(statistics.mean(math.log(r[key]) for r in picked))
              for key in ("vs_generated", "vs_cublas")}
        print(f"geometric mean, {name}: {gm['vs_generated']:.3f}x the generated kernel, "
              f"{gm['vs_cublas']:.3f}x cuBLAS")
    print("first call, fresh process and kernel cache: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in firsts.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "first_call_s": firsts}, f, indent=1)


if __name__ == "__main__":
    main()
