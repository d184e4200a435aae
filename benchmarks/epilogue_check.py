"""Fused epilogues and FP8 products on partial tiles, checked against float64, small enough
for compute-sanitizer (issue 35):

    compute-sanitizer --tool memcheck --report-api-errors no python3 benchmarks/epilogue_check.py

``gemm.matmul`` with silu: a bias per column into a bf16 out with rows TMA cannot store (the
epilogue from registers), per row with beta (registers), per column and per row on 130 x 200
(the TMA epilogue, its vectors staged in shared memory, tiles past both edges);
``gemm.scaled_matmul`` (e4m3): row-wise scales with a bias per column, promoted, and per
row, fast, on partial tiles (the TMA epilogue), per-tensor scales into a float32 out, row-wise
fast on 17 x 16 tiles (pingpong consumers taking two or three tiles a block by turns), and
block scales (A's column-major) with a bias per column, read from global memory (130 rows),
and staged in shared memory by bulk copies (260 rows: the last tile's copy of 4 rows).
Prints each case's relative error and OK (< 1e-2) or BAD.
"""

import torch

import gemm

F = torch.nn.functional
torch.manual_seed(0)
for (m, n, k), bias, out_dtype, beta in [((70, 90, 104), "columns", torch.bfloat16, 0.0),
                                         ((70, 90, 104), "rows", torch.float32, 0.5),
                                         ((130, 200, 64), "columns", torch.float32, 0.0),
                                         ((130, 200, 64), "rows", torch.bfloat16, 0.0)]:
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

E4M3 = torch.float8_e4m3fn
for (m, n, k), scales, bias, fast, out_dtype in [
        ((130, 200, 256), "rows", "columns", False, "bfloat16"),
        ((70, 96, 400), "rows", "rows", True, "float16"),
        ((200, 136, 144), "tensor", None, True, "float32"),
        ((2100, 2000, 256), "rows", "columns", True, "bfloat16"),
        ((130, 200, 400), "blocks", "columns", False, "bfloat16"),
        ((260, 200, 400), "blocks", None, False, "float32")]:
    x = torch.randn(m, k, device="cuda").to(E4M3)
    w = torch.randn(n, k, device="cuda").to(E4M3)
    kb, nb = -(-k // 128), -(-n // 128)
    if scales == "rows":
        sx, sw = torch.rand(m, 1, device="cuda") + 0.5, torch.rand(1, n, device="cuda") + 0.5
    elif scales == "blocks":
        sx, sw = torch.rand(kb, m, device="cuda").t() + 0.5, torch.rand(nb, kb, device="cuda")
    else:
        sx, sw = torch.rand((), device="cuda") + 0.5, torch.rand((), device="cuda") + 0.5
    b = None if bias is None else torch.randn(n if bias == "columns" else m, device="cuda")
    b = b if bias != "rows" else b[:, None]
    y = gemm.scaled_matmul(x, w.t(), sx, sw, bias=b, out_dtype=out_dtype,
                           use_fast_accum=fast)
    if scales == "blocks":                  # each element's block's scale
        sx = sx.double().repeat_interleave(128, 1)[:, :k]
        sw = sw.double().repeat_interleave(128, 0).repeat_interleave(128, 1)[:n, :k]
    else:
        sw = sw.double().reshape(-1, 1)     # (one per row of w)
    ref = (x.double() * sx.double()) @ (w.double() * sw).T
    ref = ref if b is None else ref + b.double()
    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
    print("fp8", m, n, k, scales, bias, fast, out_dtype, f"rel err {err:.2e}",
          "OK" if err < 1e-2 else "BAD")
