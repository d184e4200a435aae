"""Issue 14: the K-heavy shapes on smaller tiles and longer K ranges (cuBLAS picks 128x128
split-K at 1024x1024x16384 and 64x64 split-K at 256x256x65536), bf16, each config checked
against float64 first, timed as benchmarks/shapes.py (CUDA graphs of 10 calls over 3 operand
sets, median of 20), with each kernel's time from torch's profiler (profile.py)."""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchmarks.shapes import error, graph_us, operands  # noqa: E402
from layoutalg import gemm  # noqa: E402
from layoutalg.gemm import hopper  # noqa: E402
from profile import kernel_us  # noqa: E402

H = hopper.HopperConfig
TILES = {  # name (block rows x bN, consumers, slots) -> config without its split
    "128x256 c2 s3": H(bM=64, bN=256, consumers=2, stages=3),
    "128x128 c2 s3": H(bM=64, bN=128, consumers=2, stages=3),
    "128x128 c2 s4": H(bM=64, bN=128, consumers=2, stages=4),
    "128x128 c2 s6": H(bM=64, bN=128, consumers=2, stages=6),
    "64x128 c1 s6": H(bM=64, bN=128, consumers=1, stages=6),
    "64x64 c1 s8": H(bM=64, bN=64, consumers=1, stages=8),
    "128x64 c2 s8": H(bM=64, bN=64, consumers=2, stages=8),
}
RUNS = {(1024, 1024, 16384): [("128x256 c2 s3", 4), ("128x128 c2 s4", 2), ("128x128 c2 s6", 2),
                              ("128x128 c2 s4", 3), ("64x128 c1 s6", 1), ("64x128 c1 s6", 2),
                              ("128x64 c2 s8", 1), ("128x64 c2 s8", 2)],
        (256, 256, 65536): [("128x128 c2 s3", 32), ("64x64 c1 s8", 8), ("64x64 c1 s8", 16),
                            ("64x128 c1 s6", 16), ("128x64 c2 s8", 16), ("128x64 c2 s8", 8)]}


def main():
    from dataclasses import replace
    gen = torch.Generator(device="cuda").manual_seed(4)
    rows = []
    for (m, n, k), runs in RUNS.items():
        sets = [operands(m, n, k, torch.bfloat16, gen) for _ in range(3)]
        sets = [(a, b, torch.empty((m, n), device="cuda", dtype=torch.bfloat16))
                for a, b in sets]
        a, b, out = sets[0]
        fns = {"cuBLAS": lambda x, y, o: torch.mm(x, y, out=o),
               "rules": lambda x, y, o: gemm.matmul(x, y, o)}
        for tile, split in runs:
            cfg = replace(TILES[tile], split_k=split)
            fns[f"{tile} split{split}"] = lambda x, y, o, c=cfg: gemm.matmul(x, y, o, kernel=c)
        for name, fn in fns.items():
            try:
                out.fill_(math.nan)
                fn(a, b, out)
                err = error(a, b, out, True, gen)
                row = {"shape": f"{m}x{n}x{k}", "config": name,
                       "us": round(graph_us(fn, sets, 20), 2), "error": round(err, 3),
                       "kernels": kernel_us(fn, sets)}
            except Exception as e:     # noqa: BLE001  (reported)
                row = {"shape": f"{m}x{n}x{k}", "config": name, "us": None,
                       "failed": f"{type(e).__name__}: {e}"[:200]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| shape | config | us | error | kernels (us per call) |\n|---|---|---|---|---|")
    for r in rows:
        ks = ", ".join(f"{k_[:22]}: {t}" for k_, t in r.get("kernels", {}).items())
        print(f"| {r['shape']} | {r['config']} | {r['us']} | {r.get('error', r.get('failed'))}"
              f" | {ks} |")


if __name__ == "__main__":
    main()
