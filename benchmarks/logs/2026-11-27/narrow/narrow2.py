"""Issue 14: swapped calls of 33 to 64 rows: tiles of ceil8(rows) columns (40, 48, 56) against
the rules' 64-column swapped tiles, with one or two consumer warpgroups and 1-3 K ranges, bf16,
timed as narrow.py (CUDA graphs of 10 calls over 3 operand sets, median of 20), each checked
against float64 first."""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.shapes import error, graph_us, operands  # noqa: E402
from layoutalg import gemm  # noqa: E402
from layoutalg.gemm import hopper  # noqa: E402

SHAPES = [(40, 4096, 4096), (48, 4096, 4096), (64, 4096, 4096), (56, 14336, 4096),
          (64, 14336, 4096), (64, 4096, 14336), (48, 11008, 4096)]


def configs(m):
    out = {}
    for bn in sorted({-(-m // 8) * 8, 64}):
        for consumers in (1, 2):
            for split in (1, 2, 3):
                out[f"{consumers}x64x{bn} s8 split{split}"] = hopper.HopperConfig(
                    bM=64, bN=bn, consumers=consumers, stages=8, swap_ab=True, split_k=split)
    return out


def main():
    gen = torch.Generator(device="cuda").manual_seed(2)
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
        row = {"shape": f"{m}x{n}x{k}", "rules config": str(hopper.plan_call(a, b, out).config)}
        for name, fn in fns.items():
            out.fill_(math.nan)
            fn(a, b, out)
            err = error(a, b, out, True, gen)
            row[name] = (round(graph_us(fn, sets, 20), 2), round(err, 3))
        rows.append(row)
        print(json.dumps(row), flush=True)
        del sets, a, b, out
        torch.cuda.empty_cache()
    print("\n| shape | cuBLAS us | rules us | best | its us | best / cuBLAS | rules / cuBLAS |"
          " worst error |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        cands = {k: v for k, v in r.items() if "x64x" in k}
        best = min(cands, key=lambda c: cands[c][0])
        worst = max(v[1] for v in r.values() if isinstance(v, tuple))
        cb = r["cuBLAS"][0]
        print(f"| {r['shape']} | {cb} | {r['rules'][0]} | {best} | {cands[best][0]} | "
              f"{cb / cands[best][0]:.2f}x | {cb / r['rules'][0]:.2f}x | {worst} |")


if __name__ == "__main__":
    main()
