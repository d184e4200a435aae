"""Issue 14: where the K-heavy shapes' time goes. For 1024x1024x16384 and 256x256x65536 (bf16)
and a few splits of the rules' tiles: the whole call (CUDA graphs of 10 calls over 3 operand
sets, median of 20, as benchmarks/shapes.py) and, from torch's profiler, the GPU time of the
matmul kernel and of split-K's reduction kernel apart. Each config checked against float64
first."""

import json
import math
import os
import sys
from dataclasses import replace

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.shapes import error, graph_us, operands  # noqa: E402
from layoutalg import gemm  # noqa: E402
from layoutalg.gemm import hopper  # noqa: E402

SHAPES = [(1024, 1024, 16384), (256, 256, 65536)]


def kernel_us(fn, sets, calls=30):
    """{kernel name: mean us per call} from torch's profiler over ``calls`` calls."""
    from torch.profiler import ProfilerActivity, profile
    for x, y, o in sets:
        fn(x, y, o)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            fn(*sets[i % len(sets)])
        torch.cuda.synchronize()
    got = {}
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" and e.count:
            t = getattr(e, "device_time_total", None) or e.cuda_time_total
            got[e.key[:60]] = round(t / calls, 2)
    return got


def main():
    gen = torch.Generator(device="cuda").manual_seed(3)
    rows = []
    for m, n, k in SHAPES:
        sets = [operands(m, n, k, torch.bfloat16, gen) for _ in range(3)]
        sets = [(a, b, torch.empty((m, n), device="cuda", dtype=torch.bfloat16))
                for a, b in sets]
        a, b, out = sets[0]
        rules = hopper.plan_call(a, b, out).config
        splits = sorted({1, 2, 4, 8, 16, 32, rules.split_k})
        fns = {"cuBLAS": lambda x, y, o: torch.mm(x, y, out=o)}
        for s in splits:
            fns[f"split{s}"] = lambda x, y, o, c=replace(rules, split_k=s): gemm.matmul(
                x, y, o, kernel=c)
        row = {"shape": f"{m}x{n}x{k}", "rules config": str(rules)}
        for name, fn in fns.items():
            out.fill_(math.nan)
            fn(a, b, out)
            err = error(a, b, out, True, gen)
            row[name] = {"us": round(graph_us(fn, sets, 20), 2), "error": round(err, 3),
                         "kernels": kernel_us(fn, sets)}
            print(json.dumps({row["shape"]: {name: row[name]}}), flush=True)
        rows.append(row)
    print("\n| shape | config | whole call us | kernels (profiler, us per call) |\n|---|---|---|---|")
    for r in rows:
        for name, v in r.items():
            if isinstance(v, dict):
                ks = ", ".join(f"{k_}: {t}" for k_, t in v["kernels"].items())
                print(f"| {r['shape']} | {name} | {v['us']} | {ks} |")


if __name__ == "__main__":
    main()
