"""The seed's two MoYe kernels written with gemm.cute (tests/cute_kernels.py: layouts and
tensors in the kernel) beside the generated kernels of the same pipelines and configuration
(gemm.matmul kernel="prefetch" and "double_buffer": 128 x 128 x 8 tiles, 256 threads) and
cuBLAS, in one run. GPU only.

    python3 benchmarks/cute_moye.py [--sizes 2048 4096] [--reps 20]

MoYe's operands: A (M, K) and B as (N, K), column-major; C (M, N) column-major. The cute
kernels (the first pipeline with universal copies global -> shared and with the seed's
cp.async copies, and the double-buffered one) are compiled for each static size; their
compile time is their first call's. The generated kernels' compile time is their first
call's too, with a fresh kernel cache (compiled once: the later sizes reuse them). Times:
CUDA events around ``--reps`` launches.
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


CUTE = (("cute prefetch", cute_kernels.moye_prefetch, {}),
        ("cute prefetch cp.async", cute_kernels.moye_prefetch, {"cp_async": True}),
        ("cute double buffer", cute_kernels.moye_double_buffer, {}))
GENERATED = ("prefetch", "double_buffer")       # gemm.KERNELS: the seed's two pipelines


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

        def error(c):
            return float(((c.double() - ref).abs() / bound).nan_to_num(nan=9.0).max())

        runs, compile_s, err = {}, {}, {}
        for name, make, config in CUTE:
            kernel, grid, threads = make(m, n, k, **config)
            c1 = torch.full((n, m), float("nan"), device="cuda")  # C (M, N) column-major
            flat = [cuda.as_cuda_array(x.T.reshape(-1) if x is not c1 else x.reshape(-1))
                    for x in (a, bt, c1)]
            t0 = time.perf_counter()
            jitted = cuda.jit(kernel)
            jitted[grid, threads](*flat)
            cuda.synchronize()
            compile_s[name] = time.perf_counter() - t0
            err[name] = error(c1.T)
            runs[name] = (lambda j=jitted, g=grid, th=threads, f=flat: j[g, th](*f))
            regs = jitted.get_regs_per_thread()
            print(f"{name}: {regs if isinstance(regs, int) else max(regs.values())} registers")
        for name in GENERATED:
            c2 = torch.full((n, m), float("nan"), device="cuda").T
            t0 = time.perf_counter()
            gemm.matmul(a, b, c2, kernel=name)
            torch.cuda.synchronize()
            compile_s[name] = time.perf_counter() - t0
            err[name] = error(c2)
            runs[name] = (lambda c=c2, kn=name: gemm.matmul(a, b, c, kernel=kn))
        c3 = torch.empty((m, n), device="cuda")
        runs["cuBLAS"] = lambda: torch.mm(a, b, out=c3)
        t = {name: events_us(run, args.reps) for name, run in runs.items()}
        tf = {x: 2 * m * n * k / v / 1e6 for x, v in t.items()}
        rows.append((s, tf, compile_s, err))
        print(s, t, compile_s, err, flush=True)
    names = [c[0] for c in CUTE] + list(GENERATED)
    print(f"\n{torch.cuda.get_device_name()}, fp32, MoYe's two pipelines, mean of "
          f"{args.reps} launches; TFLOP/s (compile s of the first call)\n")
    print("| M = N = K | " + " | ".join(names) + " | cuBLAS | max error |")
    print("|---|" + "---|" * (len(names) + 2))
    for s, tf, cs, err in rows:
        print(f"| {s} | " + " | ".join(f"{tf[x]:.1f} ({cs[x]:.1f} s)" for x in names)
              + f" | {tf['cuBLAS']:.1f} | {max(err.values()):.1e} |")


if __name__ == "__main__":
    main()
