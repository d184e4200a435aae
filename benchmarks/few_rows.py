"""Few rows: a swapped call (A's rows against a weight, A and B swapped,
``gemm.hopper.swapped_config``) on 64-column tiles in 1 and in 2 K ranges (the rule at 33-64
rows from K = 12288), beside the config the unnamed call took before two narrow tiles of
the rows (``gemm.hopper.pairs``: 33-96 rows at shorter K), the unnamed call and cuBLAS, in
one process (GPU only):

    python3 benchmarks/few_rows.py [--reps R] [--json PATH]

A row-major, B = W.T of a row-major (N, K) weight (``nn.Linear``'s), out bf16 (fp32 with
``allow_tf32`` for the tf32 row). Each column is 12 calls in a CUDA graph over 3 operand sets
in turn (so that B is not left in L2 by the call before), the graphs timed in turn
(benchmarks/timing.py's ``rotating_us``, median of R), us a call. Every out is checked
against float64: max |err| / max |ref|.
"""

import os
import sys
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import gemm  # noqa: E402
from benchmarks.timing import rotating_us, table_main  # noqa: E402
from gemm.call.binary import sm_count  # noqa: E402
from gemm.hopper.rules import SWAP_ROWS, default_config, swapped_config  # noqa: E402
from gemm.tuning import shape_table  # noqa: E402

# (M, N, K, dtype): the rule's 2 ranges from K = 12288 (bf16; 192 k-tiles), 1 below; two
# narrow tiles of the rows below that
SHAPES = [(33, 4096, 4096, "bfloat16"), (48, 4096, 4096, "bfloat16"),
          (80, 4096, 4096, "bfloat16"), (96, 4096, 4096, "bfloat16"),
          (64, 4096, 4096, "bfloat16"), (64, 4096, 8192, "bfloat16"),
          (64, 4096, 12288, "bfloat16"), (64, 4096, 14336, "bfloat16"),
          (48, 4096, 14336, "bfloat16"), (33, 4096, 14336, "bfloat16"),
          (64, 3584, 16384, "bfloat16"), (64, 4096, 28672, "bfloat16"),
          (64, 4096, 8192, "tfloat32")]
CALLS, SETS = 12, 3


def unpaired(dtype, m, n, k, sms):
    """The config an unnamed call took before ``gemm.hopper.pairs``: the shipped table's
    entry near (m, n, k), else up to SWAP_ROWS rows the swapped 64-column tiles, else the
    unswapped rules'."""
    table = shape_table.lookup(dtype, m, n, k, sms)     # (not narrow: pairs not asked)
    if table is not None:
        return table
    if m <= SWAP_ROWS:
        return swapped_config(dtype, n, m, k, 1, sms)
    return default_config(dtype, m, n, k, 1, sms)


def case(m, n, k, dtype, reps):
    g = torch.Generator("cuda").manual_seed(m + n + k)
    tdt = torch.float32 if dtype == "tfloat32" else torch.bfloat16
    sets = [(torch.randn(m, k, device="cuda", generator=g).to(tdt),
             torch.randn(n, k, device="cuda", generator=g).to(tdt).T) for _ in range(SETS)]
    sms = sm_count(sets[0][0].device.index)
    rule = swapped_config(dtype, n, m, k, 1, sms)      # (the kernel's m: the out's columns)
    cfgs = {"1 range": replace(rule, split_k=1), "2 ranges": replace(rule, split_k=2),
            "before": unpaired(dtype, m, n, k, sms)}
    tf32 = dtype == "tfloat32"
    outs = {name: torch.empty(m, n, device="cuda", dtype=tdt)
            for name in ("1 range", "2 ranges", "before", "unnamed", "cuBLAS")}

    fns = {name: (lambda a, b, name=name, cfg=cfg: gemm.matmul(
               a, b, outs[name], kernel=cfg, allow_tf32=tf32)) for name, cfg in cfgs.items()}
    fns["unnamed"] = lambda a, b: gemm.matmul(a, b, outs["unnamed"], allow_tf32=tf32)
    fns["cuBLAS"] = lambda a, b: torch.mm(a, b, out=outs["cuBLAS"])
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        us = rotating_us(fns, sets, CALLS, reps)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    a, b = sets[(CALLS - 1) % SETS]                 # the operands of every out's last call
    ref = a.double() @ b.double()
    err = {name: float((o.double() - ref).abs().max() / ref.abs().max())
           for name, o in outs.items()}
    return {"m": m, "n": n, "k": k, "dtype": dtype, "rule ranges": rule.split_k, "us": us,
            "error": err}


def main():
    def cells(r):
        u = r["us"]
        return [f"{r['m']} x {r['n']} x {r['k']}{' tf32' if r['dtype'] == 'tfloat32' else ''}",
                f"{r['rule ranges']}", f"{u['1 range']:.1f}", f"{u['2 ranges']:.1f}",
                f"{u['before']:.1f}", f"{u['unnamed']:.1f}", f"{u['cuBLAS']:.1f}",
                f"{u['1 range'] / u['2 ranges']:.3f}x", f"{u['before'] / u['unnamed']:.3f}x",
                f"{u['cuBLAS'] / u['unnamed']:.3f}x", f"{max(r['error'].values()):.1e}"]
    table_main(case, SHAPES, ["M x N x K", "64-column tiles' ranges", "1 range", "2 ranges",
                              "before pairs", "unnamed call", "cuBLAS", "1 range / 2 ranges",
                              "before / unnamed", "cuBLAS / unnamed", "max error"], cells,
               "us a call", reps=9)


if __name__ == "__main__":
    main()
