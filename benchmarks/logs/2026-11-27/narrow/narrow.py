"""Issue 14: swapped decode steps with tiles narrower than 64 columns (A's few rows on the
wgmma's N = 8, 16 or 32) against the rules' swapped 64-column tiles and cuBLAS, bf16, timed
as benchmarks/shapes.py times the suite (CUDA graphs of 10 calls over 3 operand sets,
median of 20). Every config's result is checked against float64 first."""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.shapes import error, graph_us, operands  # noqa: E402
from layoutalg import gemm  # noqa: E402
from layoutalg.gemm import hopper  # noqa: E402

SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (32, 4096, 4096), (1, 14336, 4096),
          (16, 14336, 4096), (1, 4096, 14336), (16, 4096, 14336), (1, 128256, 4096),
          (16, 128256, 4096)]


def configs(m):
    narrow = [b for b in (8, 16, 32) if b >= m]
    out = {}
    for bn in narrow:
        for split in (1, 2, 4, 8):
            out[f"1x64x{bn} s8 split{split}"] = hopper.HopperConfig(
                bM=64, bN=bn, consumers=1, stages=8, swap_ab=True, split_k=split)
        for split in (1, 2, 4):
            out[f"2x64x{bn} s8 split{split}"] = hopper.HopperConfig(
                bM=64, bN=bn, consumers=2, stages=8, swap_ab=True, split_k=split)
    return out


def main():
    gen = torch.Generator(device="cuda").manual_seed(1)
    rows = []
    for m, n, k in SHAPES:
        sets = [operands(m, n, k, torch.bfloat16, gen) for _ in range(3)]
        sets = [(a, b, torch.empty((m, n), device="cuda", dtype=torch.bfloat16))
                for a, b in sets]
        a, b, out = sets[0]
        fns = {"rules": lambda x, y, o: gemm.matmul(x, y, o),
               "cuBLAS": lambda x, y, o: torch.mm(x, y, out=o)}
        for name, cfg in configs(m).items():
            fns[name] = lambda x, y, o, cfg=cfg: gemm.matmul(x, y, o, kernel=cfg)
        row = {"shape": f"{m}x{n}x{k}",
               "rules config": str(hopper.plan_call(a, b, out).config)}
        for name, fn in fns.items():
            out.fill_(math.nan)
            fn(a, b, out)
            err = error(a, b, out, True, gen)
            us = graph_us(fn, sets, 20)
            row[name] = (round(us, 2), round(err, 3))
        rows.append(row)
        print(json.dumps(row), flush=True)
        del sets, a, b, out
        torch.cuda.empty_cache()
    print("\n| shape | cuBLAS us | rules us | best narrow | its us | best / cuBLAS | rules / cuBLAS | worst error |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cands = {k: v for k, v in r.items() if "x64x" in k}
        best = min(cands, key=lambda c: cands[c][0])
        worst = max(v[1] for k, v in r.items() if isinstance(v, tuple))
        cb = r["cuBLAS"][0]
        print(f"| {r['shape']} | {cb} | {r['rules'][0]} | {best} | {cands[best][0]} | "
              f"{cb / cands[best][0]:.2f}x | {cb / r['rules'][0]:.2f}x | {worst} |")


if __name__ == "__main__":
    main()
