"""FP8 decode steps: ``gemm.scaled_matmul(x8, w8.T, sx, sw, bias=b, use_fast_accum=True)``
(x8 (M, K) and w8 (N, K) float8_e4m3fn, x's scales per row, w's per output channel, a bf16
bias, a bf16 out) on the tiles the rules take beside the config it took before
(``gemm.hopper.fp8_fast_config`` without the few rows), and ``torch._scaled_mm`` with the same
operands, in one process (GPU only):

    python3 benchmarks/fp8_few_rows.py [--reps R] [--json PATH]

Each column is 12 calls in a CUDA graph over 3 operand sets in turn (so that w8 is not left in
L2 by the call before), the graphs timed in turn (benchmarks/timing.py's ``rotating_us``,
median of R), us a call; torch's call makes its own out (``timing.kept``), "n/a" where it is
refused (cuBLASLt has no kernel for some shapes). Every out is checked against float64 of
the scaled operands: max |err| / max |ref|.
"""

import os
import sys
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import gemm  # noqa: E402
from benchmarks.timing import kept, rotating_us, table_main  # noqa: E402
from gemm.call.binary import sm_count  # noqa: E402
from gemm.hopper.rules import default_config, fp8_fast_config  # noqa: E402

SHAPES = [(m, n, k) for m in (1, 16, 64, 128) for n, k in ((4096, 4096), (14336, 4096),
                                                           (4096, 14336))] + [(16, 128256, 4096)]
CALLS, SETS = 12, 3
E4M3 = torch.float8_e4m3fn


def case(m, n, k, reps):
    g = torch.Generator("cuda").manual_seed(m + n + k)
    sets = [(torch.randn(m, k, device="cuda", generator=g).to(E4M3),
             torch.randn(n, k, device="cuda", generator=g).to(E4M3),
             torch.rand(m, 1, device="cuda", generator=g) + 0.5,
             torch.rand(1, n, device="cuda", generator=g) + 0.5,
             torch.randn(n, device="cuda", generator=g).to(torch.bfloat16))
            for _ in range(SETS)]
    # the config before the few rows' tiles: the shape's default as a fused call took it
    # (one K range, cooperative), then the fast FP8 tiles without the few rows
    shape_default = default_config("float8_e4m3fn", m, n, k, 1,
                                   sm_count(sets[0][0].device.index))
    before = fp8_fast_config(replace(shape_default, split_k=1, schedule="cooperative",
                                     delay_release=0), few_rows=False)
    outs = {}

    def out(name):
        return outs.setdefault(name, torch.empty(m, n, device="cuda", dtype=torch.bfloat16))

    def ours(name, config=None):
        return lambda x, w, sx, sw, b: gemm.scaled_matmul(
            x, w.T, sx, sw, bias=b, out=out(name), use_fast_accum=True, config=config)
    fns = {"ours": ours("ours"), "before": ours("before", before),
           "torch": kept(outs, "torch", lambda x, w, sx, sw, b: torch._scaled_mm(
               x, w.T, scale_a=sx, scale_b=sw, bias=b, out_dtype=torch.bfloat16,
               use_fast_accum=True))}
    try:
        fns["torch"](*sets[0])
    except RuntimeError:            # cuBLASLt refuses the shape
        del fns["torch"]

    us = rotating_us(fns, sets, CALLS, reps)
    x, w, sx, sw, b = sets[(CALLS - 1) % SETS]      # the operands of every out's last call
    ref = (x.double() * sx.double()) @ (w.double() * sw.double().T).T + b.double()
    err = {name: float((o.double() - ref).abs().max() / ref.abs().max())
           for name, o in outs.items()}
    return {"m": m, "n": n, "k": k, "us": us, "error": err}


def main():
    def cells(r):
        u = r["us"]
        torch_us = u.get("torch")
        return [f"{r['m']} x {r['n']} x {r['k']}", f"{u['ours']:.1f}", f"{u['before']:.1f}",
                "n/a" if torch_us is None else f"{torch_us:.1f}",
                f"{u['before'] / u['ours']:.2f}x",
                "n/a" if torch_us is None else f"{torch_us / u['ours']:.2f}x",
                f"{max(r['error'].values()):.1e}"]
    table_main(case, SHAPES, ["M x N x K", "ours", "before", "torch._scaled_mm",
                              "before / ours", "torch / ours", "max error"], cells,
               "us a call", reps=9)


if __name__ == "__main__":
    main()
