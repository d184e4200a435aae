"""The seed's two MoYe kernels written with gemm.cute, as the seed writes them and as
gemm.matmul's kernels, beside cuBLAS, in one run. GPU only.

    python3 benchmarks/cute_moye.py [--sizes 2048 4096 4095] [--reps 20]

- "cute ..." : tests/cute_kernels.py, the seed's kernels line for line, compiled for each
  static size (a size that is not a multiple of the tile is skipped: "-"). The first
  pipeline with universal copies global -> shared and with the seed's cp.async copies, and
  the double-buffered one.
- gemm.matmul's kernels "prefetch" and "double_buffer" (gemm.cute_kernels: written with
  gemm.cute, run-time shapes, predicated partial tiles), 128 x 128 x 8 tiles over 256
  threads (16 x 16 for the MMA), compiled once for every size.

MoYe's operands: A (M, K) and B as (N, K), column-major; C (M, N) column-major. Compile
times are each kernel's first call, with a fresh kernel cache. Times: CUDA events around
``--reps`` launches.
"""

import argparse
import os
import sys
import tempfile
import time

os.environ["LAYOUTALG_CACHE"] = tempfile.mkdtemp()       # every kernel compiles anew
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import torch  # noqa: E402
from numba import cuda  # noqa: E402

import cute_kernels  # noqa: E402
import gemm  # noqa: E402


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


def registers(jitted):
    """Registers per thread of a numba kernel (the most over its compiled signatures)."""
    regs = jitted.get_regs_per_thread()
    return regs if isinstance(regs, int) else max(regs.values())


def first_call_s(fn):
    """Seconds of ``fn()``'s first call to the end of its GPU work (the compile included)."""
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


CUTE = (("cute prefetch", cute_kernels.moye_prefetch, {}),
        ("cute prefetch cp.async", cute_kernels.moye_prefetch, {"cp_async": True}),
        ("cute double buffer", cute_kernels.moye_double_buffer, {}))
MATMUL = ("prefetch", "double_buffer")   # gemm.KERNELS


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
            try:
                kernel, grid, threads = make(m, n, k, **config)
            except ValueError:              # not a multiple of the tile: static sizes only
                continue
            c1 = torch.full((n, m), float("nan"), device="cuda")  # C (M, N) column-major
            flat = [cuda.as_cuda_array(x.T.reshape(-1) if x is not c1 else x.reshape(-1))
                    for x in (a, bt, c1)]
            jitted = cuda.jit(kernel)
            runs[name] = (lambda j=jitted, g=grid, th=threads, f=flat: j[g, th](*f))
            compile_s[name] = first_call_s(runs[name])
            err[name] = error(c1.T)
            print(f"{name}: {registers(jitted)} registers")
        for name in MATMUL:
            c2 = torch.full((n, m), float("nan"), device="cuda").T
            runs[name] = (lambda c=c2, kn=name: gemm.matmul(a, b, c, kernel=kn))
            compile_s[name] = first_call_s(runs[name])
            err[name] = error(c2)
        c3 = torch.empty((m, n), device="cuda")
        runs["cuBLAS"] = lambda: torch.mm(a, b, out=c3)
        t = {name: events_us(run, args.reps) for name, run in runs.items()}
        tf = {x: 2 * m * n * k / v / 1e6 for x, v in t.items()}
        rows.append((s, tf, compile_s, err))
        print(s, t, compile_s, err, flush=True)
    names = [c[0] for c in CUTE] + list(MATMUL)
    matmul_registers = _matmul_registers()
    print(f"\n{torch.cuda.get_device_name()}, fp32, MoYe's two pipelines, mean of "
          f"{args.reps} launches; TFLOP/s (compile s of the first call)\n")
    print("| M = N = K | " + " | ".join(names) + " | cuBLAS | max error |")
    print("|---|" + "---|" * (len(names) + 2))
    for s, tf, cs, err in rows:
        print(f"| {s} | " + " | ".join(f"{tf[x]:.1f} ({cs[x]:.1f} s)" if x in tf else "-"
                                       for x in names)
              + f" | {tf['cuBLAS']:.1f} | {max(err.values()):.1e} |")
    print("\nregisters per thread of the gemm.matmul kernels (A and B column-major as MoYe's):",
          matmul_registers)


def _matmul_registers():
    """{name: registers} of the gemm.matmul kernels in the variant this benchmark runs (A's
    unit stride along M, B's along N), compiled again here."""
    from gemm import api, simt
    out = {}
    for name in MATMUL:
        cfg = api.KERNELS[name]
        vec = simt.copy_vector(cfg, 0, cfg.bM, 4)
        kernel = simt.simt_kernel(cfg, 0, 0, vec, vec)
        kernel.compile(simt.SIGNATURE)
        out[name] = registers(kernel)
    return out


if __name__ == "__main__":
    main()
