"""Few rows with a fused bias and activation: a decode step's linear layer, ``gemm.matmul(x,
w.T, bias=b[, activation="gelu"])``, on the tiles the rules take (A and B swapped as the call
without a bias is, split-K off) beside the unswapped tiles fused calls took before, the call
without the bias, and cuBLAS (``torch.addmm(b, x, w.T)``; ``F.gelu(F.linear(x, w, b))``),
in one process (GPU only):

    python3 benchmarks/fused_few_rows.py [--reps R] [--json PATH]

x (M, K) row-major, w (N, K) (``nn.Linear``'s), b (N,), bf16. Each column is 12 calls in a
CUDA graph over 3 operand sets in turn (so that w is not left in L2 by the call before), the
graphs timed in turn (benchmarks/timing.py's ``rotating_us``, median of R), us a call;
``F.gelu(F.linear(...))`` makes its own out (``timing.kept``), the others write a given one.
Every out is checked against float64 (GELU by erf): max |err| / max |ref|.
"""

import math
import os
import sys
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import gemm  # noqa: E402
from benchmarks.timing import kept, rotating_us, table_main  # noqa: E402
from gemm.call.binary import sm_count  # noqa: E402
from gemm.hopper.rules import default_config  # noqa: E402

# (M, N, K): decode steps against an LLM's projections (4096 x 4096, 14336 x 4096, 4096 x
# 14336) and its vocabulary (128256 x 4096)
SHAPES = [(m, n, k) for m in (1, 16, 64) for n, k in ((4096, 4096), (14336, 4096),
                                                      (4096, 14336))] + [(1, 128256, 4096)]
CALLS, SETS = 12, 3


def case(m, n, k, reps):
    g = torch.Generator("cuda").manual_seed(m + n + k)
    sets = [(torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16),
             torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16),
             torch.randn(n, device="cuda", generator=g).to(torch.bfloat16))
            for _ in range(SETS)]
    sms = sm_count(sets[0][0].device.index)
    # what a fused call took before it swapped: the unswapped rules, split-K off, cooperative
    before = replace(default_config("bfloat16", m, n, k, 1, sms), split_k=1,
                     schedule="cooperative", delay_release=0)
    outs = {}

    def out(name):
        return outs.setdefault(name, torch.empty(m, n, device="cuda", dtype=torch.bfloat16))
    fns = {
        "no bias": lambda x, w, b: gemm.matmul(x, w.T, out("no bias")),
        "bias": lambda x, w, b: gemm.matmul(x, w.T, out("bias"), bias=b),
        "bias before": lambda x, w, b: gemm.matmul(x, w.T, out("bias before"), bias=b,
                                                   kernel=before),
        "bias gelu": lambda x, w, b: gemm.matmul(x, w.T, out("bias gelu"), bias=b,
                                                 activation="gelu"),
        "cuBLAS bias": lambda x, w, b: torch.addmm(b, x, w.T, out=out("cuBLAS bias")),
        "cuBLAS bias gelu": kept(outs, "cuBLAS bias gelu",
                                 lambda x, w, b: F.gelu(F.linear(x, w, b))),
    }

    us = rotating_us(fns, sets, CALLS, reps)
    x, w, b = sets[(CALLS - 1) % SETS]      # the operands of every out's last call
    pre = x.double() @ w.double().T
    biased = pre + b.double()
    gelu = 0.5 * biased * (1 + torch.erf(biased / math.sqrt(2)))
    refs = {"no bias": pre, "bias gelu": gelu, "cuBLAS bias gelu": gelu}
    err = {name: float((o.double() - refs.get(name, biased)).abs().max()
                       / refs.get(name, biased).abs().max()) for name, o in outs.items()}
    return {"m": m, "n": n, "k": k, "us": us, "error": err}


def main():
    def cells(r):
        u = r["us"]
        return [f"{r['m']} x {r['n']} x {r['k']}", f"{u['no bias']:.1f}", f"{u['bias']:.1f}",
                f"{u['bias before']:.1f}", f"{u['bias gelu']:.1f}", f"{u['cuBLAS bias']:.1f}",
                f"{u['cuBLAS bias gelu']:.1f}", f"{u['bias before'] / u['bias']:.2f}x",
                f"{u['cuBLAS bias'] / u['bias']:.2f}x",
                f"{u['cuBLAS bias gelu'] / u['bias gelu']:.2f}x",
                f"{max(r['error'].values()):.1e}"]
    table_main(case, SHAPES, ["M x N x K", "no bias", "bias", "bias, before", "bias + gelu",
                              "cuBLAS bias", "cuBLAS bias, F.gelu", "before / bias",
                              "cuBLAS / bias", "cuBLAS, F.gelu / bias + gelu", "max error"],
               cells, "us a call", reps=9)


if __name__ == "__main__":
    main()
