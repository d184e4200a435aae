"""Batched products: ``gemm.matmul`` on (B, M, K) @ (B, K, N) and with a shared 2-D operand,
against ``torch.matmul`` (cuBLAS's batched GEMM) in the same run. GPU only.

    python benchmarks/batched.py [--json PATH] [--reps R]

Each shape: fresh random bf16 operands (B from a row-major (B, N, K) tensor: K-major, as a
weight is stored), out bf16 as torch.matmul's; ours is first checked against float64 (NaN
poisoned out), then both are timed as the median of ``reps`` CUDA-event timed calls after a
warm-up (3 rotating input sets, so no call finds its operands in L2 from the previous one).
Prints a markdown table last.
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import gemm  # noqa: E402
from benchmarks.shapes import median_us  # noqa: E402

# (name, A shape, B shape (as (.., K, N)))
SHAPES = [
    ("bmm 8 x 2048^3", (8, 2048, 2048), (8, 2048, 2048)),
    ("bmm 64 x 512x512x128 (attention-like)", (64, 512, 128), (64, 128, 512)),
    ("bmm 32 x 1024x1024x4096", (32, 1024, 4096), (32, 4096, 1024)),
    ("x @ W: (8, 512, 4096) @ (4096, 4096)", (8, 512, 4096), (4096, 4096)),
    ("x @ W: (4, 2048, 4096) @ (4096, 14336)", (4, 2048, 4096), (4096, 14336)),
    ("W @ x: (4096, 4096) @ (16, 4096, 256)", (4096, 4096), (16, 4096, 256)),
]
SETS = 3


def operands(a_shape, b_shape, g):
    a = torch.randn(a_shape, device="cuda", generator=g).bfloat16()
    bt = torch.randn(b_shape[:-2] + (b_shape[-1], b_shape[-2]), device="cuda",
                     generator=g).bfloat16()
    return a, bt.transpose(-1, -2)


def error(a, b, out):
    ref = torch.matmul(a.double(), b.double())
    bound = torch.matmul(a.double().abs(), b.double().abs())
    err = (out.double() - ref).abs() / (2 ** -8 * ref.abs() + 1e-3 * bound + 1e-30)
    return float(err.nan_to_num(nan=float("inf")).max())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for name, a_shape, b_shape in SHAPES:
        sets = [operands(a_shape, b_shape, g) for _ in range(SETS)]
        a, b = sets[0]
        shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        out = torch.full(shape, float("nan"), device="cuda", dtype=torch.bfloat16)
        gemm.matmul(a, b, out)
        err = error(a, b, out)
        outs = [torch.empty_like(out) for _ in sets]
        sets = [(x, y, o) for (x, y), o in zip(sets, outs)]
        ours = median_us(lambda x, y, o: gemm.matmul(x, y, o), sets, args.reps)
        cublas = median_us(lambda x, y, o: torch.matmul(x, y, out=o), sets, args.reps)
        flops = 2 * out.numel() * a.shape[-1]
        rows.append(dict(name=name, a=list(a_shape), b=list(b_shape), error=err, ours_us=ours,
                         cublas_us=cublas, ours_tflops=flops / ours / 1e6,
                         cublas_tflops=flops / cublas / 1e6))
        print(rows[-1], flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)
    print(f"\n{torch.cuda.get_device_name()}, bf16 in, bf16 out, median of {args.reps} calls\n")
    print("| shape | ours us (TFLOP/s) | torch.matmul us (TFLOP/s) | ours / cuBLAS | error |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['ours_us']:.1f} ({r['ours_tflops']:.0f}) | "
              f"{r['cublas_us']:.1f} ({r['cublas_tflops']:.0f}) | "
              f"{r['cublas_us'] / r['ours_us']:.2f}x | {r['error']:.3f} |")


if __name__ == "__main__":
    main()
