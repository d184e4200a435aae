"""Scratch script of swap_configs.log (run on 04145e3 + the swap_ab code before its rule):
decode shapes in the swapped orientation (the weight on the wgmma's 64-row side:
C^T = W @ A^T, called as gemm.matmul(W, A.T, out (N, M))) against the suite's (A @ W^T),
B cold (3 sets), CUDA-graph timings. python3 swap_configs.py 1 16 64"""
import functools
import sys

import torch
from benchmarks import shapes  # the suite's CUDA-graph timer (the run used a copy of it)
from layoutalg import gemm
from layoutalg.gemm.hopper import HopperConfig as H

N = K = 4096


graph_us = functools.partial(shapes.graph_us, reps=20, calls=12)


configs = {"rules": "hopper", "default": None}
for bm in (64, 128):
    for c in (1, 2):
        for split in (1, 2, 4, 8):
            st = min(8, (227 * 1024 - 1024) // ((bm * c + 64) * 128))
            configs[f"{bm}x64 c{c} s{st} split{split}"] = H(bM=bm, bN=64, consumers=c,
                                                          stages=st, split_k=split)
for m in [int(x) for x in sys.argv[1:]]:
    a = torch.randn(m, K, device="cuda", dtype=torch.bfloat16)
    ws = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    row = [(a, w.T, torch.empty(m, N, device="cuda", dtype=torch.bfloat16)) for w in ws]
    swp = [(w, a.T, torch.empty(N, m, device="cuda", dtype=torch.bfloat16)) for w in ws]
    res = {"cuBLAS": graph_us(lambda x, y, o: torch.mm(x, y, out=o), row),
           "ours (suite orientation)": graph_us(lambda x, y, o: gemm.matmul(x, y, o), row)}
    ref = (a.double() @ ws[0].double().T)
    for name, cfg in configs.items():
        try:
            res["swapped " + name] = graph_us(lambda x, y, o: gemm.matmul(x, y, o, kernel=cfg), swp)
            gemm.matmul(*swp[0], kernel=cfg)
            err = float(((swp[0][2].double().T - ref).abs() / (ref.abs() + 1)).max())
            if err > 0.05:
                res["swapped " + name] = float("nan")
        except Exception as e:   # noqa
            print(name, "failed", repr(e)[:200])
    best = min((v, k) for k, v in res.items() if k.startswith("swapped") and v == v)
    print(f"M={m}: cuBLAS {res['cuBLAS']:.1f} | ours {res['ours (suite orientation)']:.1f} | "
          f"best swapped {best[0]:.1f} ({best[1]})", flush=True)
    for k, v in sorted(res.items(), key=lambda kv: kv[1]):
        print(f"   {k}: {v:.1f}")
