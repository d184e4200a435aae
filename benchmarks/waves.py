"""Tiles that fill the waves: ``gemm.matmul`` untuned (its default config, now 2 x 64 x 192
tiles where whole waves of them take less time, ``gemm.hopper.rules._fuller_waves``) beside
the same call on the 2 x 64 x 256 tiles it took before and cuBLAS, on shapes the rule changes
and two it leaves, in one process (GPU only):

    python3 benchmarks/waves.py [--reps R] [--json PATH]

bf16, A row-major, B = W.T of a row-major (N, K) weight (K-major, as ``nn.Linear``'s), out
bf16; "gelu": ``activation="gelu"`` in ours (the MLP's first matmul), ``F.gelu(torch.mm)`` in
cuBLAS's column. Each is 10 calls in a CUDA graph, the graphs timed in turn
(benchmarks/timing.py's ``timed_together``, median of R), us a call. Ours' outs are checked
equal to the 256-column tiles' bit for bit (the same K order per element).
"""

import os
import sys
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import gemm  # noqa: E402
from benchmarks.timing import graph_of, table_main, timed_together  # noqa: E402
from gemm.call.binary import sm_count  # noqa: E402
from gemm.hopper.rules import default_config  # noqa: E402

SHAPES = [(2048, 7168, 4096, "gelu"), (2048, 7168, 4096, None), (3072, 7168, 4096, None),
          (3000, 3000, 3000, None), (1024, 14336, 4096, None),
          (4096, 7168, 4096, "gelu"), (8192, 8192, 8192, None)]      # the last two: unchanged
CALLS = 10


def case(m, n, k, act, reps):
    g = torch.Generator("cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g).T
    sms = sm_count(a.device.index)
    ours = default_config("bfloat16", m, n, k, 1, sms)
    wide = replace(ours, bN=256)
    outs = {name: torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            for name in ("ours", "256 columns")}
    fns = {"ours": lambda: gemm.matmul(a, b, outs["ours"], activation=act),
           "256 columns": lambda: gemm.matmul(a, b, outs["256 columns"], activation=act,
                                              kernel=wide),
           "cuBLAS": (lambda: F.gelu(torch.mm(a, b))) if act else (lambda: torch.mm(a, b))}
    t = timed_together({name: graph_of(fn, CALLS) for name, fn in fns.items()}, reps)
    us = {name: 1e3 * v / CALLS for name, v in t.items()}
    return {"m": m, "n": n, "k": k, "activation": act, "ours bN": ours.bN, "us": us,
            "equal": torch.equal(outs["ours"], outs["256 columns"])}


def main():
    def cells(r):
        u = r["us"]
        return [f"{r['m']} x {r['n']} x {r['k']}{' gelu' if r['activation'] else ''}",
                f"{u['ours']:.1f} (2 x 64 x {r['ours bN']})", f"{u['256 columns']:.1f}",
                f"{u['cuBLAS']:.1f}", f"{u['256 columns'] / u['ours']:.3f}x",
                f"{u['cuBLAS'] / u['ours']:.3f}x", f"{r['equal']}"]
    table_main(case, SHAPES, ["M x N x K", "ours (tiles)", "256 columns", "cuBLAS",
                              "256 columns / ours", "cuBLAS / ours", "equal"], cells,
               "us a call", reps=7)


if __name__ == "__main__":
    main()
