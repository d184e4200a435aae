"""An SM80 tensor-core GEMM written with gemm.cute (tests/cute_kernels.py ``sm80_gemm``:
cp.async 16-byte copies predicated by identity tensors, two shared stages of padded
K-contiguous rows, ldmatrix into the MMA's fragments by make_tiled_copy_A/B and retile_D,
mma.sync m16n8k16, an axpby epilogue; run-time shapes), in the grid's (M, N) order and in
groups of 8 tile rows ("group 8", the generated kernels' order), beside the generated SM80 kernel of
the same tile (``gemm.matmul`` with ``TensorCoreConfig(128, 128, 32, (2, 2), stages=2)``:
swizzled shared tiles, ldmatrix, its pipeline), gemm.matmul's default (on 9.x the Hopper
kernel) and cuBLAS, in one run. GPU only.

    python3 benchmarks/cute_tensorcore.py [--sizes 2048 4096] [--reps 20]

bf16 A (M, K) row-major and B (K, N) column-major (CUTLASS's TN), f32 out (cuBLAS: bf16
out, torch.mm's). The cute kernel's compile time is its first call's; the generated
kernel's too, with a fresh kernel cache. Times: CUDA events around ``--reps`` launches.
"""

import argparse
import os
import sys
import tempfile

os.environ["LAYOUTALG_CACHE"] = tempfile.mkdtemp()       # the generated kernel compiles anew
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import torch  # noqa: E402
from numba import cuda  # noqa: E402

import cute_kernels  # noqa: E402
import gemm  # noqa: E402
from gemm.tensorcore import TensorCoreConfig  # noqa: E402
from cute_moye import events_us, first_call_s, registers  # noqa: E402

SM80 = TensorCoreConfig(bM=128, bN=128, bK=32, warps=(2, 2), stages=2, dtype="bfloat16")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", nargs="+", type=int, default=[2048, 4096])
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    variants = {}
    for name, group in (("cute sm80", 1), ("cute sm80 group 8", 8)):
        kernel, threads, grid = cute_kernels.sm80_gemm("bf16", group_m=group)
        variants[name] = (cuda.jit(kernel), threads, grid)
    rows = []
    for s in args.sizes:
        m = n = k = s
        a = torch.randn((m, k), device="cuda").bfloat16()           # (M, K) row-major
        bt = torch.randn((n, k), device="cuda").bfloat16()          # B as (N, K) row-major
        b = bt.T                                                    # (K, N) column-major
        ref = a.double() @ b.double()
        bound = a.double().abs() @ b.double().abs()

        def error(c):
            return float(((c.double() - ref).abs() / bound).nan_to_num(nan=9.0).max())
        runs, compile_s, err = {}, {}, {}
        bits = [cuda.as_cuda_array(x.reshape(-1).view(torch.uint16)) for x in (a, bt)]
        for name, (jitted, threads, grid) in variants.items():
            c1 = torch.full((n, m), float("nan"), device="cuda")   # C (M, N) column-major
            flat = bits + [cuda.as_cuda_array(c1.reshape(-1))]

            def cute_call(f=flat, j=jitted, th=threads, g=grid(m, n)):
                j[g, th](*f, m, n, k, k, k, m, 1.0, 0.0)
            runs[name] = cute_call
            compile_s[name] = first_call_s(cute_call)
            err[name] = error(c1.T)
        for name, cfg in (("generated sm80", SM80), ("gemm.matmul default", None)):
            c2 = torch.full((m, n), float("nan"), device="cuda")
            runs[name] = (lambda c=c2, cf=cfg: gemm.matmul(a, b, c, kernel=cf))
            compile_s[name] = first_call_s(runs[name])
            err[name] = error(c2)
        c3 = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
        runs["cuBLAS"] = lambda: torch.mm(a, b, out=c3)
        t = {name: events_us(run, args.reps) for name, run in runs.items()}
        tf = {x: 2 * m * n * k / v / 1e6 for x, v in t.items()}
        rows.append((s, tf, compile_s, err))
        print(s, t, compile_s, err, flush=True)
    regs = registers(variants["cute sm80"][0])
    names = list(variants) + ["generated sm80", "gemm.matmul default"]
    print(f"\n{torch.cuda.get_device_name()}, bf16 TN, f32 out, mean of {args.reps} launches; "
          f"TFLOP/s (compile s of the first call); cute sm80: {regs} registers\n")
    print("| M = N = K | " + " | ".join(names) + " | cuBLAS (bf16 out) | max error |")
    print("|---|" + "---|" * (len(names) + 2))
    for s, tf, cs, err in rows:
        print(f"| {s} | " + " | ".join(f"{tf[x]:.1f} ({cs[x]:.1f} s)" for x in names)
              + f" | {tf['cuBLAS']:.1f} | {max(err.values()):.1e} |")


if __name__ == "__main__":
    main()
