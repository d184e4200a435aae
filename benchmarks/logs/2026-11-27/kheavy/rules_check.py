"""Issue 14: the few-tile rule of gemm.hopper.default_config (narrower tiles where they fill
the SMs with fewer K ranges of >= 64 k-tiles, else the fewest ranges; run 1 had no
"else"), on the shapes whose config it changes and on
the K-heavy shapes the shipped table serves from its 256x256x65536 entry: the config before
(the old rule's, or the table's), the new rule's, and cuBLAS, bf16, each checked against
float64 first, timed as benchmarks/shapes.py (CUDA graphs of 10 calls over 3 operand sets,
median of 20)."""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.shapes import error, graph_us, operands  # noqa: E402
from layoutalg import gemm  # noqa: E402
from layoutalg.gemm import hopper, shape_table  # noqa: E402

H = hopper.HopperConfig
OLD_RULE = {(1024, 1024, 16384): 4, (256, 4096, 11008): 4, (512, 512, 32768): 16,
            (160, 4096, 4096): 4, (80, 4096, 4096): 8}
TABLE = [(256, 256, 65536), (320, 320, 49152), (300, 300, 60000), (200, 256, 65536),
         (256, 192, 65536), (224, 224, 81920)]


def main():
    gen = torch.Generator(device="cuda").manual_seed(5)
    rows = []
    for m, n, k in list(OLD_RULE) + TABLE:
        if (m, n, k) in OLD_RULE:
            before = ("old rule", H(bM=64, bN=256, consumers=2, stages=3,
                                    split_k=OLD_RULE[(m, n, k)]))
        else:
            before = ("table", shape_table.lookup("bfloat16", m, n, k, 132, narrow=True))
        rule = hopper.default_config("bfloat16", m, n, k, 1, 132)
        sets = [operands(m, n, k, torch.bfloat16, gen) for _ in range(3)]
        sets = [(a, b, torch.empty((m, n), device="cuda", dtype=torch.bfloat16))
                for a, b in sets]
        a, b, out = sets[0]
        fns = {"cuBLAS": lambda x, y, o: torch.mm(x, y, out=o),
               "before": lambda x, y, o, c=before[1]: gemm.matmul(x, y, o, kernel=c),
               "new rule": lambda x, y, o, c=rule: gemm.matmul(x, y, o, kernel=c)}
        row = {"shape": f"{m}x{n}x{k}", "before is": before[0],
               "before config": str(before[1]), "new rule config": str(rule)}
        for name, fn in fns.items():
            out.fill_(math.nan)
            fn(a, b, out)
            row[name] = (round(graph_us(fn, sets, 20), 2), round(error(a, b, out, True, gen), 3))
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| shape | before (what) | before us | new rule us | cuBLAS us | new / before |"
          " new vs cuBLAS | worst error |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        b, nr, cb = r["before"][0], r["new rule"][0], r["cuBLAS"][0]
        worst = max(r[x][1] for x in ("before", "new rule", "cuBLAS"))
        print(f"| {r['shape']} | {r['before is']} | {b} | {nr} | {cb} | {b / nr:.3f}x |"
              f" {cb / nr:.2f}x | {worst} |")


if __name__ == "__main__":
    main()
