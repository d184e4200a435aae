"""A linear layer's bias and activation fused into the GEMM's epilogue (issue 35), beside
torch's ways of writing it, in one process.

    python3 benchmarks/epilogue.py [--reps R] [--json PATH]

Eager calls as users write them, no out, bf16: ``gemm.matmul(x, w.T, bias=b,
activation="gelu_tanh")`` (the Hopper kernel written with gemm.cute, its epilogue adding the
bias and applying the activation before the TMA store) against
``torch._addmm_activation(b, x, w.T, use_gelu=True)`` (cuBLASLt's GELU-bias epilogue, the
tanh form) and ``F.gelu(F.linear(x, w, b), approximate="tanh")`` (cuBLAS with its bias, then
a second kernel); the erf form ``activation="gelu"`` against ``F.gelu(F.linear(x, w, b))``;
and what the epilogue costs: ``gemm.matmul(x, w.T, kernel="cute_hopper")`` without it.
Each time is the median over R of a loop of calls between CUDA events, every rep timing
the six calls of a shape in turn (benchmarks/timing.py's ``timed_together``). Shapes:
tokens M in 2048 and 8192 over (N, K) of an MLP's projections (14336 x 4096, 4096 x 14336)
and 4096 x 4096. Prints a table and geometric means.
"""

import json
import os
import sys
from statistics import geometric_mean

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import gemm  # noqa: E402
from benchmarks.timing import eager_arguments, timed_together  # noqa: E402

SHAPES = [(m, n, k) for m in (2048, 8192) for n, k in ((14336, 4096), (4096, 14336),
                                                       (4096, 4096))]


def row(shape, reps):
    m, n, k = shape
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    fns = {
        "ours tanh": lambda: gemm.matmul(x, w.T, bias=b, activation="gelu_tanh"),
        "addmm_act": lambda: torch._addmm_activation(b, x, w.T, use_gelu=True),
        "eager tanh": lambda: F.gelu(F.linear(x, w, b), approximate="tanh"),
        "ours erf": lambda: gemm.matmul(x, w.T, bias=b, activation="gelu"),
        "eager erf": lambda: F.gelu(F.linear(x, w, b)),
        "ours plain": lambda: gemm.matmul(x, w.T, kernel="cute_hopper"),
    }
    return {name: ms * 1000 for name, ms in timed_together(fns, reps).items()}     # us


def main():
    args = eager_arguments("bf16; times in us")
    names = None
    ratios = {"vs addmm_act": [], "vs eager tanh": [], "vs eager erf": [], "fused cost": []}
    rows = []
    for shape in SHAPES:
        t = row(shape, args.reps)
        if names is None:
            names = list(t)
            print(f"{'M x N x K':>18} " + " ".join(f"{n:>11}" for n in names)
                  + "  /addmm  /eager  /erf   cost")
        r = (t["addmm_act"] / t["ours tanh"], t["eager tanh"] / t["ours tanh"],
             t["eager erf"] / t["ours erf"], t["ours tanh"] / t["ours plain"] - 1)
        for key, value in zip(ratios, r):
            ratios[key].append(value)
        rows.append(dict(shape=shape, **t))
        print(f"{'x'.join(map(str, shape)):>18} " + " ".join(f"{t[n]:11.1f}" for n in names)
              + f"  {r[0]:.3f}  {r[1]:.3f}  {r[2]:.3f}  {100 * r[3]:+.1f}%")
    for key, values in ratios.items():
        if key == "fused cost":
            print(f"fused epilogue's cost over the plain kernel: "
                  f"{100 * (geometric_mean(1 + v for v in values) - 1):+.1f}% "
                  f"(geometric mean), at most {100 * max(values):+.1f}%")
        else:
            print(f"speed-up {key}: {geometric_mean(values):.3f}x "
                  f"(geometric mean), {min(values):.3f}-{max(values):.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
