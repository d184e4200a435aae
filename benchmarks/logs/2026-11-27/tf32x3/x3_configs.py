"""Issue 14: 3xTF32 (precision="tf32x3") configs on fp32 shapes of the suite, against cuBLAS
(TF32 off) and the rules' pick, in one run: which tiles, swaps and K ranges the rules should
give tf32x3. Prints one table: us per config per shape, and the error ratio (bound 1e-5
|A| @ |B|, as benchmarks/shapes.py) of the rules' pick and of cuBLAS."""

import math
import os
import sys

sys.path.insert(0, os.getcwd())
import torch  # noqa: E402

from benchmarks import hopper_check as hc  # noqa: E402
from benchmarks.shapes import error, graph_us, operands  # noqa: E402
from layoutalg import gemm  # noqa: E402
from layoutalg.gemm import hopper  # noqa: E402
from layoutalg.gemm.hopper import HopperConfig  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False


def x3(bm, bn, consumers, stages, split=1, swap=False, schedule="cooperative"):
    return HopperConfig(bM=bm, bN=bn, consumers=consumers, stages=stages, split_k=split,
                        swap_ab=swap, schedule=schedule, dtype="tfloat32", tf32x3=True)


def candidates(m, n, k):
    out = {}
    if m <= 128:
        w = min(64, max(8, -(-m // 8) * 8))
        for split in (1, 2, 4, 8):
            out[f"swap 64x{w} 1c s8 k{split}"] = x3(64, w, 1, 8, split, True)
            out[f"swap 2x64x{w} s8 k{split}"] = x3(64, w, 2, 8, split, True)
            out[f"64x64 1c s8 k{split}"] = x3(64, 64, 1, 8, split)
            out[f"64x128 1c s6 k{split}"] = x3(64, 128, 1, 6, split)
    else:
        for split in (1, 2, 4):
            out[f"2x64x128 s4 k{split}"] = x3(64, 128, 2, 4, split)
            out[f"2x64x64 s8 k{split}"] = x3(64, 64, 2, 8, split)
        out["2x64x128 s3"] = x3(64, 128, 2, 3)
        out["2x64x128 s5"] = x3(64, 128, 2, 5)
        out["pp 128x64 s4"] = x3(128, 64, 2, 4, schedule="pingpong")
        out["pp 64x128 s5"] = x3(64, 128, 2, 5, schedule="pingpong")
    return out


def main():
    shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[1:]]
    gen = torch.Generator(device="cuda").manual_seed(5)
    plans = []
    for m, n, k in shapes:
        sets = [operands(m, n, k, torch.float32, gen) for _ in range(3)]
        sets = [(a, b, torch.empty((m, n), device="cuda")) for a, b in sets]
        plans.append((m, n, k, sets, candidates(m, n, k)))
    variants = set()
    for m, n, k, sets, cands in plans:
        a, b, o = sets[0]
        variants.add(hopper.plan_call(a, b, o, tf32x3=True))
        for cfg in cands.values():
            variants.add(hopper.plan_call(a, b, o, config=cfg))
    hc.compile_all(sorted(variants, key=str), 16, print)
    for m, n, k, sets, cands in plans:
        a, b, o = sets[0]
        rules = hopper.plan_call(a, b, o, tf32x3=True)
        o.fill_(math.nan)
        gemm.matmul(a, b, o, precision="tf32x3")
        err = error(a, b, o, False, gen)
        torch.mm(a, b, out=o)
        err_c = error(a, b, o, False, gen)
        t = {"cuBLAS": graph_us(lambda x, y, z: torch.mm(x, y, out=z), sets, 5, 3),
             "ieee": graph_us(lambda x, y, z: gemm.matmul(x, y, z), sets, 5, 3),
             "rules": graph_us(lambda x, y, z: gemm.matmul(x, y, z, precision="tf32x3"),
                               sets, 5, 3)}
        for name, cfg in cands.items():
            t[name] = graph_us(lambda x, y, z, c=cfg: gemm.matmul(x, y, z, kernel=c,
                                                                   precision="tf32x3"),
                               sets, 5, 3)
        best = min((v, name) for name, v in t.items() if name not in ("cuBLAS", "ieee"))
        print(f"| {m}x{n}x{k} | {t['cuBLAS']:.1f} | {t['ieee']:.1f} | {t['rules']:.1f} "
              f"({t['cuBLAS'] / t['rules']:.2f}x) | {best[1]} {best[0]:.1f} "
              f"({t['cuBLAS'] / best[0]:.2f}x) | {err:.3f} / {err_c:.3f} | "
              f"{rules.config.bM}x{rules.config.bN} c{rules.config.consumers} "
              f"s{rules.config.stages} swap {rules.c_columns} |", flush=True)
        print("  " + "; ".join(f"{name} {v:.1f}" for name, v in t.items()), flush=True)


if __name__ == "__main__":
    print("| shape | cuBLAS us | ieee us | rules us | best config us | error ours / cuBLAS | "
          "rules' config |")
    main()
