"""Compile, in parallel, the tf32x3 variants that benchmarks/shapes.py's fp32 suite calls
(gemm.matmul(precision="tf32x3") on A row-major and B = W.T), so that the suite's first
calls do not compile one at a time."""

import os
import sys

sys.path.insert(0, os.getcwd())
import torch  # noqa: E402

from benchmarks import hopper_check as hc  # noqa: E402
from benchmarks.shapes import suite  # noqa: E402
from layoutalg.gemm import hopper, skinny  # noqa: E402


def main():
    variants = set()
    extra = [("asked", *(int(v) for v in s.split("x"))) for s in sys.argv[1:]]
    for _, m, n, k in suite() + extra:
        if skinny.fits("float32", m, n, k, 1, "k"):
            continue
        a = torch.empty((m, k), device="cuda")
        b = torch.empty((n, k), device="cuda").T
        variants.add(hopper.plan_call(a, b, torch.empty((m, n), device="cuda"), tf32x3=True))
    hc.compile_all(sorted(variants, key=str), 16, print)


if __name__ == "__main__":      # the compiling children (spawned) import this module
    main()
