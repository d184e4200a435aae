"""The SIMT kernels gemm.matmul runs for float32 ("tuned", its default, and "small_m", for
calls of few rows; both with runs of 4 rows a thread, ``vector_mn=4``) generated as source
text beside the same configs written with gemm.cute (``SimtConfig(cute=True)``), in one
process (issue 34).

    python3 benchmarks/simt_cute.py [--reps R] [--json PATH]

Eager calls without an out, float32, row-major A and B: ``gemm.matmul(a, b, kernel=cfg)``
and ``kernel=replace(cfg, cute=True)``, median of R loops between CUDA events, every rep
timing both in turn (benchmarks/timing.py's ``timed_together``); each result first checked
against float64 (max |out - ref| / max |ref|). Prints a row a shape and the geometric mean of
generated / gemm.cute (above 1: gemm.cute faster) with its lowest.
"""

import json
import os
import sys
from dataclasses import replace
from statistics import geometric_mean

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import gemm  # noqa: E402
from gemm import api  # noqa: E402
from benchmarks.timing import eager_arguments, timed_together  # noqa: E402

SHAPES = {"tuned": [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
                    (4095, 4097, 1000), (8192, 8192, 1024)],
          "small_m": [(16, 16384, 4096), (32, 4096, 4096), (64, 8192, 4096)]}


def relative(got, ref):
    return ((got.double() - ref).abs().max() / ref.abs().max()).item()


def main():
    args = eager_arguments("float32; times in us; generated / gemm.cute")
    rows, ratios = [], []
    for name, shapes in SHAPES.items():
        for m, n, k in shapes:
            a = torch.randn(m, k, device="cuda")
            b = torch.randn(k, n, device="cuda")
            ref = a.double() @ b.double()
            kernels = {"generated": api.KERNELS[name], "cute": replace(api.KERNELS[name],
                                                                      cute=True)}
            errors = {w: relative(gemm.matmul(a, b, kernel=cfg), ref)
                      for w, cfg in kernels.items()}
            t = timed_together({w: (lambda cfg=cfg: gemm.matmul(a, b, kernel=cfg))
                                for w, cfg in kernels.items()}, args.reps)
            r = t["generated"] / t["cute"]
            ratios.append(r)
            rows.append(dict(kernel=name, shape=(m, n, k), errors=errors,
                             **{w: ms * 1000 for w, ms in t.items()}))
            print(f"{name:>8} {m}x{n}x{k}: generated {t['generated'] * 1000:9.1f}  cute "
                  f"{t['cute'] * 1000:9.1f}  {r:.3f}x  (errors {errors['generated']:.1e}, "
                  f"{errors['cute']:.1e})", flush=True)
    print(f"generated / gemm.cute: {geometric_mean(ratios):.3f}x (geometric mean), "
          f"{min(ratios):.3f}-{max(ratios):.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
