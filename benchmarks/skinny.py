"""Few rows (decode steps): the small-M kernel (gemm.skinny) against what gemm.matmul ran
before it (the Hopper tensor-core default for bf16, the SIMT kernel for fp32) and cuBLAS,
in one run. GPU only.

    python3 benchmarks/skinny.py [--dtypes bf16 fp32] [--ms 1 8 16 32 64] [--reps R]

B is a weight W (N, K) stored row-major, used as W.T (K the unit stride: "k") and as a
(K, N) row-major matrix ("n"). Each result is checked on the whole product against float64
first. Times: GPU time from CUDA graphs of 10 calls (benchmarks/shapes.py's graph_us).
The kernels are compiled first, in parallel processes (their cubins land in the disk cache).
"""

import argparse
import json
import math
import os
import sys
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

from benchmarks.shapes import LLM_NK, graph_us  # noqa: E402
import gemm  # noqa: E402
from gemm import hopper, skinny  # noqa: E402

TYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
NAMES = {"bf16": "bfloat16", "fp32": "float32"}


def _compile(args):
    dtype, m, b_unit = args
    cfg = skinny.default_config(dtype, dtype, m, b_unit)
    skinny.skinny_kernel(cfg, b_unit)
    return args


def operands(m, n, k, dtype, b_unit, gen):
    a = torch.randn((m, k), device="cuda", generator=gen).to(dtype)
    w = torch.randn((n, k), device="cuda", generator=gen).to(dtype)
    return a, (w.T if b_unit == "k" else w.T.contiguous())


def error(out, a, b):
    a64, b64 = a.double(), b.double()
    ref, bound = a64 @ b64, a64.abs() @ b64.abs()
    rounding = 2 ** -8 if out.dtype == torch.bfloat16 else 0.0
    tol = rounding * ref.abs() + 1e-5 * bound + 1e-30
    return float(((out.double() - ref).abs() / tol).nan_to_num(nan=float("inf")).max())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"])
    p.add_argument("--ms", nargs="+", type=int, default=[1, 8, 16, 32, 64])
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--json")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    jobs = [(NAMES[d], m, u) for d in args.dtypes for m in args.ms for u in ("k", "n")]
    with ProcessPoolExecutor(min(16, len(jobs))) as pool:
        list(pool.map(_compile, jobs))
    gen = torch.Generator(device="cuda").manual_seed(3)
    rows = []
    on_hopper = hopper.hopper_supported(torch.cuda.current_device())
    for d in args.dtypes:
        dtype = TYPES[d]
        before = "tensorcore" if d == "bf16" else "tuned"
        for b_unit in ("k", "n"):
            for n, k in LLM_NK:
                for m in args.ms:
                    sets = [operands(m, n, k, dtype, b_unit, gen) for _ in range(3)]
                    sets = [(a, b, torch.empty((m, n), device="cuda", dtype=dtype))
                            for a, b in sets]
                    a, b, out = sets[0]
                    out.fill_(math.nan)
                    skinny.launch_matmul(a, b, out, 1.0, 0.0, None, None)
                    err = error(out, a, b)
                    fns = {"skinny": lambda x, y, o: skinny.launch_matmul(x, y, o, 1.0, 0.0,
                                                                          None, None),
                           "before": lambda x, y, o: gemm.matmul(x, y, o, kernel=before),
                           "cuBLAS": lambda x, y, o: torch.mm(x, y, out=o)}
                    t = {name: graph_us(fn, sets, args.reps) for name, fn in fns.items()}
                    row = dict(dtype=d, b_unit=b_unit, m=m, n=n, k=k, error=err,
                               hopper=on_hopper, **{f"{x}_us": v for x, v in t.items()})
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    del sets, a, b, out
                    torch.cuda.empty_cache()
    print(f"\n{torch.cuda.get_device_name()}, GPU time from CUDA graphs, median of "
          f"{args.reps}\n")
    print("| dtype | B | M x N x K | skinny us | before us | cuBLAS us | skinny / cuBLAS | "
          "before / cuBLAS | error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dtype']} | {r['b_unit']} | {r['m']}x{r['n']}x{r['k']} | "
              f"{r['skinny_us']:.1f} | {r['before_us']:.1f} | {r['cuBLAS_us']:.1f} | "
              f"{r['cuBLAS_us'] / r['skinny_us']:.2f}x | {r['cuBLAS_us'] / r['before_us']:.2f}x"
              f" | {r['error']:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
