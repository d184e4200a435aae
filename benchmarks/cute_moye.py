"""The seed's first MoYe kernel written with gemm.cute (tests/cute_kernels.py: layouts and
tensors in the kernel) beside the generated kernel of the same pipeline and configuration
(gemm.matmul kernel="prefetch": 128 x 128 x 8 tiles, 256 threads) and cuBLAS, in one run.
GPU only.

    python3 benchmarks/cute_moye.py [--sizes 2048 4096] [--reps 20]

MoYe's operands: A (M, K) and B as (N, K), column-major; C (M, N) column-major. The cute
kernels (one with universal copies global -> shared, one with the seed's cp.async copies)
are compiled for each static size; their compile time is their first call's. The generated
kernel's compile time is its first call's too, with a fresh kernel cache (compiled once: the
later sizes reuse it). Times: CUDA events around ``--reps`` launches.
"""

import argparse
import os
import sys
import tempfile
import time

os.environ["LAYOUTALG_CACHE"] = tempfile.mkdtemp()       # the generated kernel compiles anew
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import torch  # noqa: E402
from numba import cuda  # noqa: E402

import cute_kernels  # noqa: E402
from layoutalg import gemm  # noqa: E402


def events_us(fn, reps):
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3 / reps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", nargs="+", type=int, default=[2048, 4096])
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for s in args.sizes:
        m = n = k = s
        a = torch.randn((k, m), device="cuda").T                # (M, K) column-major
        bt = torch.randn((k, n), device="cuda").T               # B as (N, K) column-major
        b = bt.T                                                # (K, N) row-major
        ref = (a.double() @ b.double())
        bound = a.double().abs() @ b.double().abs()

        cute_runs, compile_cute, err_cute = {}, {}, {}
        for name, cp_async in (("cute", False), ("cute cp.async", True)):
            kernel, grid, threads = cute_kernels.moye_prefetch(m, n, k, cp_async=cp_async)
            c1 = torch.full((n, m), float("nan"), device="cuda")  # C (M, N) column-major
            flat = [cuda.as_cuda_array(x.T.reshape(-1) if x is not c1 else x.reshape(-1))
                    for x in (a, bt, c1)]
            t0 = time.perf_counter()
            jitted = cuda.jit(kernel)
            jitted[grid, threads](*flat)
            cuda.synchronize()
            compile_cute[name] = time.perf_counter() - t0
            err_cute[name] = float(((c1.T.double() - ref).abs() / bound).nan_to_num(
                nan=9.0).max())
            cute_runs[name] = (lambda j=jitted, g=grid, th=threads, f=flat: j[g, th](*f))

        c2 = torch.full((n, m), float("nan"), device="cuda").T
        t0 = time.perf_counter()
        gemm.matmul(a, b, c2, kernel="prefetch")
        torch.cuda.synchronize()
        compile_gen = time.perf_counter() - t0
        err_gen = float(((c2.double() - ref).abs() / bound).nan_to_num(nan=9.0).max())

        c3 = torch.empty((m, n), device="cuda")
        t = {name: events_us(run, args.reps) for name, run in cute_runs.items()}
        t |= {"generated": events_us(lambda: gemm.matmul(a, b, c2, kernel="prefetch"),
                                    args.reps),
             "cuBLAS": events_us(lambda: torch.mm(a, b, out=c3), args.reps)}
        tf = {x: 2 * m * n * k / v / 1e6 for x, v in t.items()}
        rows.append((s, t, tf, compile_cute, compile_gen, err_cute, err_gen))
        print(s, t, compile_cute, compile_gen, err_cute, err_gen, flush=True)
    print(f"\n{torch.cuda.get_device_name()}, fp32, MoYe's first pipeline, mean of "
          f"{args.reps} launches\n")
    print("| M = N = K | cute TFLOP/s | cute cp.async TFLOP/s | generated TFLOP/s | "
          "cuBLAS TFLOP/s | compile s: cute / cute cp.async / generated | error |")
    print("|---|---|---|---|---|---|---|")
    for s, t, tf, cc, cg, ec, eg in rows:
        print(f"| {s} | {tf['cute']:.1f} | {tf['cute cp.async']:.1f} | "
              f"{tf['generated']:.1f} | {tf['cuBLAS']:.1f} | {cc['cute']:.1f} / "
              f"{cc['cute cp.async']:.1f} / {cg:.1f} | "
              f"{max(max(ec.values()), eg):.1e} |")


if __name__ == "__main__":
    main()
