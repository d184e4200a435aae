"""Fused epilogues on partial tiles, checked against float64, small enough for
compute-sanitizer (issue 35):

    compute-sanitizer --tool memcheck --report-api-errors no python3 benchmarks/epilogue_check.py

A bias per column into a bf16 out (the TMA epilogue), per row with beta (the epilogue from
registers), per column on 130 x 200 (tiles past both edges), each with silu; prints each
case's relative error and OK (< 1e-2) or BAD.
"""

import torch

import gemm

F = torch.nn.functional
torch.manual_seed(0)
for (m, n, k), bias, out_dtype, beta in [((70, 90, 104), "columns", torch.bfloat16, 0.0),
                                         ((70, 90, 104), "rows", torch.float32, 0.5),
                                         ((130, 200, 64), "columns", torch.float32, 0.0)]:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n if bias == "columns" else m, device="cuda", dtype=torch.float32)
    b = b if bias == "columns" else b[:, None]
    out = torch.randn(m, n, device="cuda").to(out_dtype)
    c0 = out.double()
    gemm.matmul(x, w.T, out=out, beta=beta, bias=b, activation="silu")
    ref = F.silu(x.double() @ w.double().T + beta * c0 + b.double())
    err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
    print(m, n, k, bias, out_dtype, beta, f"rel err {err:.2e}", "OK" if err < 1e-2 else "BAD")
