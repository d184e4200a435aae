"""Scratch: swapped decode configs with deeper rings (stages 8 / 12 / 13), B cold."""
import functools

import torch
from benchmarks import shapes  # the suite's CUDA-graph timer (the run used a copy of it)
from layoutalg import gemm
from layoutalg.gemm.hopper import HopperConfig as H


graph_us = functools.partial(shapes.graph_us, reps=20, calls=12)


for m, n, k in ((1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (1, 4096, 14336),
                (16, 14336, 4096), (32, 5120, 5120)):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    sets = [(a, torch.randn(n, k, device="cuda", dtype=torch.bfloat16).T,
             torch.empty(m, n, device="cuda", dtype=torch.bfloat16)) for _ in range(3)]
    res = {"cuBLAS": graph_us(lambda x, y, o: torch.mm(x, y, out=o), sets),
           "rules": graph_us(lambda x, y, o: gemm.matmul(x, y, o, kernel="hopper"), sets)}
    from layoutalg.gemm.hopper import _Call
    base = _Call(*sets[0], 1.0, 0.0, None, None, "diag")
    split = base.split
    for st in (8, 12, 13):
        for sp in sorted({1, split, 2 * split} if split > 1 else {1, 2}):
            cfg = H(bM=64, bN=64, consumers=1, stages=st, swap_ab=True, split_k=sp)
            res[f"s{st} split{sp}"] = graph_us(lambda x, y, o: gemm.matmul(x, y, o, kernel=cfg), sets)
    ref = a.double() @ sets[0][1].double()
    gemm.matmul(*sets[0], kernel=H(bM=64, bN=64, consumers=1, stages=13, swap_ab=True))
    err = float(((sets[0][2].double() - ref).abs() / (ref.abs() + 1)).max())
    print(f"{m}x{n}x{k} (rules split {split}, err s13 {err:.3f}): " + ", ".join(
        f"{kk} {v:.1f}" for kk, v in sorted(res.items(), key=lambda kv: kv[1])), flush=True)
