"""fp32 with few rows (M = 16..64): SIMT tiles of 32 or 64 rows (the "prefetch" pipeline,
which allows bM != bN) against the default 128-row tile, the small-M kernel and cuBLAS, in
one run, each SIMT config with the shape-aware split-K an unnamed call would get. GPU only.

    python3 benchmarks/simt_small_m.py [--ms 16 32 64] [--reps 15]
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

from benchmarks.shapes import LLM_NK, graph_us  # noqa: E402
from benchmarks.skinny import error, operands  # noqa: E402
import gemm  # noqa: E402
from gemm import api, simt, skinny  # noqa: E402
from gemm.call.binary import sm_count  # noqa: E402

CONFIGS = {
    "tuned 128": api.KERNELS["tuned"],
    "prefetch 64": simt.SimtConfig(bM=64, bN=128, bK=8, mma_threads=(16, 16),
                                   pipeline="prefetch", vector_mn=4, pad=4, min_blocks=2),
    "prefetch 32": simt.SimtConfig(bM=32, bN=128, bK=8, mma_threads=(8, 16),
                                   pipeline="prefetch", vector_mn=4, pad=4, min_blocks=4),
}


def with_split(cfg, m, n, k):
    """``cfg`` with the split-K matmul gives an unnamed call (api.simt_split)."""
    blocks = -(-m // cfg.bM) * -(-n // cfg.bN)
    split = api.simt_split(blocks, -(-k // cfg.bK), sm_count(0) * cfg.min_blocks)
    return simt.SimtConfig(**{**cfg.__dict__, "split_k": split})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ms", nargs="+", type=int, default=[16, 32, 64])
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--json")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(5)
    rows = []
    for b_unit in ("k", "n"):
        for n, k in LLM_NK:
            for m in args.ms:
                sets = [operands(m, n, k, torch.float32, b_unit, gen) for _ in range(3)]
                sets = [(a, b, torch.empty((m, n), device="cuda")) for a, b in sets]
                a, b, out = sets[0]
                fns = {name: (lambda x, y, o, c=with_split(cfg, m, n, k):
                              gemm.matmul(x, y, o, kernel=c)) for name, cfg in CONFIGS.items()}
                fns["skinny"] = lambda x, y, o: skinny.launch_matmul(x, y, o, 1.0, 0.0, None,
                                                                     None)
                fns["cuBLAS"] = lambda x, y, o: torch.mm(x, y, out=o)
                errs = {}
                for name, fn in fns.items():
                    out.fill_(float("nan"))
                    fn(a, b, out)
                    errs[name] = error(out, a, b)
                t = {name: graph_us(fn, sets, args.reps) for name, fn in fns.items()}
                row = dict(b_unit=b_unit, m=m, n=n, k=k, error=max(errs.values()),
                           **{f"{x}_us": v for x, v in t.items()})
                rows.append(row)
                print(json.dumps(row), flush=True)
    names = list(CONFIGS) + ["skinny"]
    print(f"\n{torch.cuda.get_device_name()}, fp32, GPU time from CUDA graphs, ratio to cuBLAS\n")
    print("| B | M x N x K | " + " | ".join(names) + " | cuBLAS us | error |")
    print("|---" * (len(names) + 4) + "|")
    for r in rows:
        ratios = " | ".join(f"{r['cuBLAS_us'] / r[f'{x}_us']:.2f}x" for x in names)
        print(f"| {r['b_unit']} | {r['m']}x{r['n']}x{r['k']} | {ratios} | "
              f"{r['cuBLAS_us']:.1f} | {r['error']:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
