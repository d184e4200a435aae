"""FP8 products with scales (issue 35): ``gemm.scaled_matmul`` beside ``torch._scaled_mm``
(cuBLASLt) in one process.

    python3 benchmarks/fp8.py [--reps R] [--json PATH]

Eager calls as users write them, no out, bf16 out, e4m3 operands (A row-major, B the
transpose of a row-major (N, K) weight): per-tensor scales with ``use_fast_accum`` True and
False, row-wise scales ((M, 1), (1, N)) with both settings, and DeepSeek's block scales
(1 x 128 of A, column-major, and 128 x 128 of B; always promoted), each against
``torch._scaled_mm`` with the same arguments (block scales: where this torch takes them,
else its per-tensor promoted call stands in). Each time is the median over R of a loop of
calls between CUDA events, every rep timing all of a shape's calls in turn
(benchmarks/timing.py's ``timed_together``: FP8 at full rate runs at the H200's power limit,
and its clock drifts within a run). Shapes: 4096^3, 8192^3, and tokens M in 2048 and 8192
over an MLP's projections (N x K: 14336 x 4096, 4096 x 14336) and 4096 x 4096. Then the
error against float64 of the dequantized operands at 2048 x 2048 x 8192 with a float32 out,
ours beside torch's, per setting. Prints tables and geometric means.
"""

import json
import os
import sys
from statistics import geometric_mean

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import gemm  # noqa: E402
from benchmarks.timing import eager_arguments, timed_together  # noqa: E402

E4M3 = torch.float8_e4m3fn
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)] + [
    (m, n, k) for m in (2048, 8192) for n, k in ((14336, 4096), (4096, 14336), (4096, 4096))]
# (name, scales, use_fast_accum)
MODES = [("tensor fast", "tensor", True), ("tensor", "tensor", False),
         ("rows fast", "rows", True), ("rows", "rows", False), ("blocks", "blocks", False)]


def operands(m, n, k, scales, seed=0):
    """(a, b, scale_a, scale_b): e4m3 A (m, k) row-major, B (k, n) column-major, float32
    scales per tensor or per row / column."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).to(E4M3)
    b = torch.randn(n, k, device="cuda", generator=g).to(E4M3).t()
    if scales == "tensor":
        sa, sb = (torch.rand((), device="cuda", generator=g) + 0.5 for _ in range(2))
    elif scales == "rows":
        sa = torch.rand(m, 1, device="cuda", generator=g) + 0.5
        sb = torch.rand(1, n, device="cuda", generator=g) + 0.5
    else:                   # DeepSeek's blocks, A's scales column-major
        sa = (torch.rand(-(-k // 128), m, device="cuda", generator=g) + 0.5).t()
        sb = torch.rand(-(-n // 128), -(-k // 128), device="cuda", generator=g) + 0.5
    return a, b, sa, sb


def _torch_blocks(a, b, sa, sb):
    """Whether this torch's _scaled_mm takes block scales (cuBLASLt 12.9 and later)."""
    try:
        torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
        return True
    except (RuntimeError, ValueError):
        return False


def row(shape, reps):
    fns = {}
    for name, scales, fast in MODES:
        a, b, sa, sb = operands(*shape, scales)
        fns[f"ours {name}"] = (lambda a=a, b=b, sa=sa, sb=sb, fast=fast: gemm.scaled_matmul(
            a, b, sa, sb, out_dtype="bfloat16", use_fast_accum=fast))
        fns[f"torch {name}"] = (lambda a=a, b=b, sa=sa, sb=sb, fast=fast: torch._scaled_mm(
            a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast))
        if scales == "blocks" and not _torch_blocks(a, b, sa, sb):
            fns[f"torch {name}"] = fns["torch tensor"]      # (no baseline: per tensor's)
    return {name: ms * 1000 for name, ms in timed_together(fns, reps).items()}     # us


def dequantized(a, b, sa, sb, scales):
    """float64 of A and B with their scales applied (per tensor, row or block)."""
    k, n = a.shape[1], b.shape[1]
    if scales == "blocks":
        sa = sa.double().repeat_interleave(128, 1)[:, :k]
        sb = sb.double().repeat_interleave(128, 0).repeat_interleave(128, 1)[:n, :k].t()
    return a.double() * sa.double(), b.double() * sb.double()


def errors(m=2048, n=2048, k=8192):
    """Max |out - ref| / max |ref| with a float32 out, ours and torch's (NaN where torch
    does not take the scales), per mode."""
    got = {}
    for name, scales, fast in MODES:
        a, b, sa, sb = operands(m, n, k, scales, seed=1)
        xa, xb = dequantized(a, b, sa, sb, scales)
        ref = xa @ xb
        outs = [gemm.scaled_matmul(a, b, sa, sb, out_dtype="float32", use_fast_accum=fast)]
        try:
            outs.append(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.float32,
                                         use_fast_accum=fast))
        except (RuntimeError, ValueError):
            outs.append(torch.full_like(ref, float("nan")))
        scale = ref.abs().max()
        got[name] = tuple(float((x.double() - ref).abs().max() / scale) for x in outs)
    return got


def main():
    args = eager_arguments("e4m3 in, bf16 out; times in us; speed-up = torch / ours")
    print(f"{'M x N x K':>18} " + " ".join(f"{m[0]:>22}" for m in MODES))
    ratios = {m[0]: [] for m in MODES}
    rows = []
    for shape in SHAPES:
        t = row(shape, args.reps)
        cells = []
        for name, _, _ in MODES:
            r = t[f"torch {name}"] / t[f"ours {name}"]
            ratios[name].append(r)
            cells.append(f"{t[f'ours {name}']:7.1f} {t[f'torch {name}']:7.1f} {r:5.3f}x")
        rows.append(dict(shape=shape, **t))
        print(f"{'x'.join(map(str, shape)):>18} " + " ".join(f"{c:>22}" for c in cells))
    for name, values in ratios.items():
        print(f"{name}: {geometric_mean(values):.3f}x torch._scaled_mm "
              f"(geometric mean), {min(values):.3f}-{max(values):.3f}")
    per_tensor = [r["ours tensor"] / r["ours blocks"] for r in rows]
    print(f"ours blocks: {geometric_mean(per_tensor):.3f}x ours per "
          f"tensor promoted (geometric mean), {min(per_tensor):.3f}-{max(per_tensor):.3f}")
    errs = errors()
    print("error against float64 (max |out - ref| / max |ref|, f32 out, 2048 x 2048 x 8192):")
    for name, (ours, theirs) in errs.items():
        print(f"  {name:>12}: ours {ours:.2e}, torch {theirs:.2e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, errors=errs), f, indent=1)


if __name__ == "__main__":
    main()
