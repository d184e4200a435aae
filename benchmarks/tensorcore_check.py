"""GPU check of gemm.tensorcore: correctness against torch float64, then speed against cuBLAS.

Run on the GPU host from the project root (after the wheel line of ../shared/gpu/wheels.sh):

    python3 benchmarks/tensorcore_check.py [--quick] [--time-only]

(--quick: correctness up to 1024^3 and timing at 4096 only; --time-only: the ring-depth
checks and the timings only.)

1. Compiles every kernel variant the run needs in parallel (ProcessPoolExecutor, spawn;
   numba's on-disk cache hands the results to this process).
2. Checks bf16 and f16, out = alpha * A @ B + beta * out with A (M, K) row-major and B the
   .T of an (N, K) row-major matrix, on cubes 64..4096, 64x64x256, random odd shapes (odd K
   takes the plain-copy path), a column-major out and alpha/beta; outputs are poisoned with
   NaN. Error measure: max |C - ref| / (|alpha| |A| @ |B| + |beta C0|), limit 2e-5 * sqrt(K/64)+
   (f32 accumulation of exactly rounded products).
3. Times 4096^3 and 8192^3 (bf16 in, f32 out) for stages 2..5 of the 128x128x32, 2x2-warp
   kernel and cuBLAS bf16 (torch.mm, f32 output where torch allows it) in the same run, and
   prints the table last.
"""

import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TILE = dict(bM=128, bN=128, bK=32, warps=(2, 2))


def _vec(k):
    return next(v for v in (8, 4, 2, 1) if k % v == 0)


def _compile(args):
    stages, dtype, va, vb = args
    t0 = time.time()
    from numba import cuda
    from gemm.tensorcore import SIGNATURE, TensorCoreConfig, tensorcore_kernel
    cfg = TensorCoreConfig(**TILE, stages=stages, dtype=dtype)
    k = tensorcore_kernel(cfg, va, vb)
    k.compile(SIGNATURE)
    cuda.synchronize()
    return args, time.time() - t0


def main(quick=False, time_only=False):
    import numpy as np
    import torch
    from gemm.tensorcore import TensorCoreConfig, tensorcore_matmul

    t_start = time.time()
    rng = np.random.default_rng(0)
    cubes = [64, 128, 256, 512, 1024, 2048, 4096]
    odd = [tuple(int(x) for x in rng.integers(1, 700, 3)) for _ in range(4)]
    odd += [(333, 517, 77), (1, 1, 1), (129, 257, 4)]
    cases = [(d, s, s, s) for d in ("bfloat16", "float16") for s in cubes]
    cases += [(d, 64, 64, 256) for d in ("bfloat16", "float16")]
    cases += [(d, *s) for d in ("bfloat16", "float16") for s in odd]
    stages_list = [2, 3, 4, 5]
    variants = {(s, "bfloat16", 8, 8) for s in stages_list}
    if time_only:
        cases = []
    variants |= {(3, d, _vec(k), _vec(k)) for d, m, n, k in cases}
    print(f"compiling {len(variants)} variants in parallel ...", flush=True)
    with ProcessPoolExecutor(min(len(variants), os.cpu_count() or 4),
                             mp_context=mp.get_context("spawn")) as ex:
        for args, dt in ex.map(_compile, sorted(variants)):
            print(f"  compiled stages={args[0]} {args[1]} vectors={args[2:]} in {dt:.0f} s",
                  flush=True)
    print(f"compile phase: {time.time() - t_start:.0f} s", flush=True)

    tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16}
    failures = 0

    def check(dtype, m, n, k, alpha=1.0, beta=0.0, col_out=False, stages=3):
        nonlocal failures
        g = torch.Generator(device="cuda").manual_seed(m * 7919 + n * 31 + k)
        a = torch.randn(m, k, device="cuda", generator=g).to(tdt[dtype])
        bt = torch.randn(n, k, device="cuda", generator=g).to(tdt[dtype])
        c0 = torch.randn(m, n, device="cuda", generator=g)
        out = (torch.full((n, m), float("nan"), device="cuda").T if col_out
               else torch.full((m, n), float("nan"), device="cuda"))
        if beta:
            out.copy_(c0)
        cfg = TensorCoreConfig(**TILE, stages=stages, dtype=dtype)
        tensorcore_matmul(a, bt.T, out, alpha=alpha, beta=beta, config=cfg)
        torch.cuda.synchronize()
        a64, b64 = a.double(), bt.double()
        ref = alpha * (a64 @ b64.T) + beta * c0.double()
        bound = abs(alpha) * (a64.abs() @ b64.abs().T) + abs(beta) * c0.double().abs()
        err = ((out.double() - ref).abs() / (bound + 1e-30)).nan_to_num(nan=math.inf).max().item()
        limit = 2e-5 * math.sqrt(max(1.0, k / 64))
        ok = err <= limit
        failures += not ok
        print(f"  {'ok  ' if ok else 'FAIL'} {dtype:8s} {m:5d}x{n:5d}x{k:5d} alpha={alpha} "
              f"beta={beta} col_out={col_out}: err {err:.2e} (limit {limit:.1e})", flush=True)

    print("correctness:", flush=True)
    for d, m, n, k in cases:
        if quick and m * n * k > 2 ** 30:
            continue
        check(d, m, n, k)
    if not time_only:
        check("bfloat16", 300, 200, 96, alpha=0.5, beta=-2.0)
        check("float16", 300, 200, 96, alpha=1.5, beta=0.25, col_out=True)
    for s in stages_list:
        check("bfloat16", 517, 389, 1000 - 8 * s, stages=s)   # vectors 8, every ring depth

    print("timing (TFLOP/s, bf16 in, f32 accumulate):", flush=True)
    rows = []
    sizes = [4096] if quick else [4096, 8192]

    def bench(fn, flops, reps):
        for _ in range(3):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        return flops / (start.elapsed_time(end) / reps * 1e-3) / 1e12

    for n in sizes:
        a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
        bt = torch.randn(n, n, device="cuda").to(torch.bfloat16)
        out = torch.empty(n, n, device="cuda")
        flops = 2.0 * n ** 3
        reps = 20 if n <= 4096 else 8
        try:
            torch.mm(a, bt.T, out_dtype=torch.float32)
            cublas = lambda: torch.mm(a, bt.T, out_dtype=torch.float32)  # noqa: E731
            label = "cuBLAS bf16 (f32 out)"
        except (TypeError, RuntimeError):
            cublas = lambda: torch.mm(a, bt.T)  # noqa: E731
            label = "cuBLAS bf16 (bf16 out)"
        ref = bench(cublas, flops, reps)
        row = {"n": n, label: ref}
        for s in stages_list:
            cfg = TensorCoreConfig(**TILE, stages=s, dtype="bfloat16")
            row[f"stages={s}"] = bench(lambda: tensorcore_matmul(a, bt.T, out, config=cfg),
                                       flops, reps)
        rows.append(row)
        print("  ", {k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()},
              flush=True)

    print(f"\ncorrectness failures: {failures}; total time {time.time() - t_start:.0f} s")
    print("\n| n^3 | " + " | ".join(k for k in rows[0] if k != "n") + " | best / cuBLAS |")
    print("|---" * (len(rows[0]) + 1) + "|")
    for row in rows:
        vals = [v for k, v in row.items() if k != "n"]
        best = max(vals[1:])
        print(f"| {row['n']} | " + " | ".join(f"{v:.0f}" for v in vals)
              + f" | {best / vals[0]:.2f} |")
    return failures


if __name__ == "__main__":
    sys.exit(1 if main("--quick" in sys.argv, "--time-only" in sys.argv) else 0)
