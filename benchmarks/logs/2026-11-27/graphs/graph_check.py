"""gemm.matmul captured in CUDA graphs where the capture sees addresses the eager calls did
not: an out made inside the capture, an input made inside it, torch.compile's CUDA graphs
(mode="reduce-overhead"). One case per process (a failed capture may leave the context
unusable): python3 graph_check.py CASE [dtype]. Prints the case, ok or FAILED, and the
error against float64 / (2^-7 |A| @ |B|)."""

import os
import sys

sys.path.insert(0, os.getcwd())
import torch  # noqa: E402

from layoutalg import gemm  # noqa: E402

CASE, DT = sys.argv[1], getattr(torch, sys.argv[2] if len(sys.argv) > 2 else "bfloat16")
N = 2048


def err(x, w, y):
    ref = x.double() @ w.double().T
    bound = x.double().abs() @ w.double().abs().T
    return float(((y.double() - ref).abs() / (2 ** -7 * bound)).max())


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(N, N, device="cuda", generator=g).to(DT)
    w = torch.randn(N, N, device="cuda", generator=g).to(DT)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):             # warm-up, as torch's docs ask
        gemm.matmul(a, w.T)
        gemm.matmul(a * 2, w.T)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    if CASE == "new_out":                     # the out is made inside the capture
        with torch.cuda.graph(graph):
            y = gemm.matmul(a, w.T)
        x = a
    elif CASE == "new_input":                 # an input made inside the capture
        with torch.cuda.graph(graph):
            x = a * 2
            y = gemm.matmul(x, w.T)
    elif CASE == "given":                     # every address seen by the warm-up
        y = torch.empty(N, N, device="cuda", dtype=DT)
        with torch.cuda.stream(side):
            gemm.matmul(a, w.T, y)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            gemm.matmul(a, w.T, y)
        x = a
    elif CASE == "compile":
        import layoutalg.gemm.torch as gt
        f = torch.compile(lambda u, v: gt.matmul(u, v.T), mode="reduce-overhead")
        for _ in range(3):
            y = f(a, w).clone()
        torch.cuda.synchronize()
        print(CASE, sys.argv[2:], "ok", f"{err(a, w, y):.3g}")
        return
    y.fill_(float("nan")) if CASE == "given" else None
    graph.replay()
    torch.cuda.synchronize()
    print(CASE, sys.argv[2:], "ok", f"{err(x, w, y):.3g}")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:                    # noqa: BLE001 (the report is the point)
        print(CASE, sys.argv[2:], "FAILED", type(e).__name__, str(e).splitlines()[0][:160])
