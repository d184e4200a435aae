"""Scratch: the in-kernel split-K reduction of 64 x 64 tiles against the second kernel, at
decode shapes (B cold: 3 sets), CUDA-graph timings, us."""
from dataclasses import replace
import functools

import torch
from benchmarks import shapes  # the suite's CUDA-graph timer (the run used a copy of it)
from layoutalg import gemm
from layoutalg.gemm import hopper


graph_us = functools.partial(shapes.graph_us, reps=20, calls=12)


for m, n, k in ((1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (1, 4096, 14336),
                (16, 4096, 14336), (2, 2048, 8192), (12, 1024, 16384), (32, 1536, 12288),
                (48, 2048, 2048), (8, 3072, 3072)):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    sets = [(a, torch.randn(n, k, device="cuda", dtype=torch.bfloat16).T,
             torch.empty(m, n, device="cuda", dtype=torch.bfloat16)) for _ in range(3)]
    rules = hopper.swapped_config("bfloat16", n, m, k, 1, 132)
    res = {"cuBLAS": graph_us(lambda x, y, o: torch.mm(x, y, out=o), sets),
           "ours": graph_us(lambda x, y, o: gemm.matmul(x, y, o), sets)}
    for sp in sorted({rules.split_k, 2, 4}):
        for how in ("in_kernel", "second_kernel"):
            cfg = replace(rules, split_k=sp, split_reduce=how)
            res[f"split{sp} {how}"] = graph_us(
                lambda x, y, o, cfg=cfg: gemm.matmul(x, y, o, kernel=cfg), sets)
    print(f"{m}x{n}x{k} (rules split {rules.split_k}): " + ", ".join(
        f"{kk} {v:.1f}" for kk, v in res.items()), flush=True)
