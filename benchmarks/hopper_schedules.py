"""The Hopper kernel written with gemm.cute under its schedules (issue 35): cooperative
consumers (the default 2 x 64 x 256 tiles, and with one wgmma group in flight) beside pingpong
consumers (128 x 128 and 64 x 256 tiles of their own, one group in flight), for bf16 with a
fused bias and GELU and plain, FP8 row-wise and per-tensor fast, and FP8 promoted, in one
process.

    python3 benchmarks/hopper_schedules.py [--reps R] [--json PATH]

First each config against float64 on fresh data (bf16 with bias and GELU, and with beta into
a float32 out; FP8 row-wise, fast and promoted, beside ``torch._scaled_mm``'s error); then
eager calls without an out, median of R loops between CUDA events, every rep timing all of
a shape's calls in turn (benchmarks/timing.py's ``timed_together``), on issue 35's shapes.
Baselines in the same process: ``torch._addmm_activation`` (bf16 with GELU), ``torch.mm``
(plain), ``torch._scaled_mm`` with the same scales and accumulation (FP8). Prints a JSON row
a shape, then each column's geometric mean of baseline / ours and its lowest.

The FP8 "coop" columns pass the cooperative 2 x 64 x 256 config, which was FP8's default
before the pingpong one (``gemm.hopper.fp8_fast_config``): the log of 2026-11-28 names them
"default".
"""

import json
import os
import sys
from statistics import geometric_mean

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import gemm  # noqa: E402
from benchmarks.fp8 import E4M3, SHAPES  # noqa: E402
from benchmarks.timing import eager_arguments, timed_together  # noqa: E402
from gemm.hopper import HopperConfig, hopper_matmul  # noqa: E402


def pingpong(**fields):
    return HopperConfig(**dict(dict(schedule="pingpong", delay_release=1), **fields))


def fp8(**fields):
    return HopperConfig(**dict(dict(dtype="float8_e4m3fn"), **fields))


BF16 = dict(pp128=pingpong(bM=128, bN=128, stages=4), pp64=pingpong(bM=64, bN=256, stages=4),
            coopd1=HopperConfig(delay_release=1))
FAST = dict(coop=fp8(), pp128_5=fp8(bM=128, bN=128, stages=5, schedule="pingpong",
                                    delay_release=1),
            pp64=fp8(bM=64, bN=256, stages=4, schedule="pingpong", delay_release=1),
            coopd1=fp8(delay_release=1))
PROMOTED = dict(pp64x128=fp8(bM=64, bN=128, stages=6, schedule="pingpong"))


def relative(got, ref):
    return ((got.double() - ref).abs().max() / ref.abs().max()).item()


def check():
    """Each config's largest error against float64 over three shapes."""
    worst = {}

    def note(name, err):
        worst[name] = max(worst.get(name, 0.0), err)

    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(3), "little"))
    for m, n, k in [(1008, 1504, 704), (4096, 2048, 1024), (304, 4096, 4112)]:
        x = torch.randn(m, k, device="cuda", generator=g, dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", generator=g, dtype=torch.bfloat16)
        b = torch.randn(n, device="cuda", generator=g, dtype=torch.bfloat16)
        ref = F.gelu(x.double() @ w.double().T + b.double(), approximate="tanh")
        plain = x.double() @ w.double().T
        for name, cfg in BF16.items():
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            hopper_matmul(x, w.T, out, config=cfg, bias=b, activation="gelu_tanh")
            note(f"bf16 {name}", relative(out, ref))
            c0 = torch.randn(m, n, device="cuda", generator=g)
            out = c0.clone()
            hopper_matmul(x, w.T, out, config=cfg, beta=0.5)
            note(f"bf16 beta {name}", relative(out - 0.5 * c0, plain))
        a = torch.randn(m, k, device="cuda", generator=g).to(E4M3)
        bb = torch.randn(n, k, device="cuda", generator=g).to(E4M3)
        sa = torch.rand(m, 1, device="cuda", generator=g) + 0.5
        sb = torch.rand(1, n, device="cuda", generator=g) + 0.5
        ref = (a.double() * sa.double()) @ (bb.double() * sb.double().T).T
        for fast, configs in ((True, FAST), (False, PROMOTED)):
            for name, cfg in configs.items():
                note(f"fp8 {name}", relative(gemm.scaled_matmul(
                    a, bb.T, sa, sb, out_dtype="float32", use_fast_accum=fast, config=cfg), ref))
            note(f"fp8 torch {'fast' if fast else 'slow'}", relative(torch._scaled_mm(
                a, bb.T, sa, sb, out_dtype=torch.float32, use_fast_accum=fast), ref))
    for name, err in worst.items():
        print(f"check {name:24s} {err:.3e}")


def row(shape, reps):
    m, n, k = shape
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(m, k, device="cuda").to(E4M3)
    bb = torch.randn(n, k, device="cuda").to(E4M3)
    rows = torch.rand(m, 1, device="cuda") + 0.5, torch.rand(1, n, device="cuda") + 0.5
    tensor = torch.rand((), device="cuda") + 0.5, torch.rand((), device="cuda") + 0.5
    fns = {"bf16 torch addmm_act": lambda: torch._addmm_activation(b, x, w.T, use_gelu=True),
           "bf16 torch mm": lambda: torch.mm(x, w.T),
           "bf16 gelu default": lambda: gemm.matmul(x, w.T, bias=b, activation="gelu_tanh"),
           "bf16 plain rules": lambda: gemm.matmul(x, w.T, kernel="hopper"),
           "bf16 plain default": lambda: gemm.matmul(x, w.T)}
    for name, cfg in BF16.items():
        fns[f"bf16 gelu {name}"] = lambda cfg=cfg: hopper_matmul(
            x, w.T, config=cfg, bias=b, activation="gelu_tanh", out_dtype="bfloat16")
        fns[f"bf16 plain {name}"] = lambda cfg=cfg: hopper_matmul(
            x, w.T, config=cfg, out_dtype="bfloat16")
    for kind, (sa, sb) in (("rows", rows), ("tensor", tensor)):
        fns[f"fp8 {kind} torch fast"] = lambda sa=sa, sb=sb: torch._scaled_mm(
            a, bb.T, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True)
        for name, cfg in FAST.items():
            fns[f"fp8 {kind} {name} fast"] = lambda sa=sa, sb=sb, cfg=cfg: gemm.scaled_matmul(
                a, bb.T, sa, sb, out_dtype="bfloat16", use_fast_accum=True, config=cfg)
    fns["fp8 rows torch slow"] = lambda: torch._scaled_mm(
        a, bb.T, *rows, out_dtype=torch.bfloat16, use_fast_accum=False)
    fns["fp8 rows default slow"] = lambda: gemm.scaled_matmul(
        a, bb.T, *rows, out_dtype="bfloat16", use_fast_accum=False)
    for name, cfg in PROMOTED.items():
        fns[f"fp8 rows {name} slow"] = lambda cfg=cfg: gemm.scaled_matmul(
            a, bb.T, *rows, out_dtype="bfloat16", use_fast_accum=False, config=cfg)
    times = {name: ms * 1000 for name, ms in timed_together(fns, reps).items()}     # us
    times["shape"] = f"{m}x{n}x{k}"
    return times


def baseline(name):
    if name.startswith("bf16 gelu"):
        return "bf16 torch addmm_act"
    if name.startswith("bf16 plain"):
        return "bf16 torch mm"
    return f"fp8 {name.split()[1]} torch {name.split()[-1]}"


def main():
    args = eager_arguments("schedules of the Hopper kernel written with gemm.cute", reps=3)
    check()
    rows = []
    for shape in SHAPES:
        rows.append(row(shape, args.reps))
        print(json.dumps(rows[-1]), flush=True)
    print("\ngeomean ratio baseline/ours:")
    for name in rows[0]:
        if name == "shape" or "torch" in name:
            continue
        ratios = [r[baseline(name)] / r[name] for r in rows]
        mean = geometric_mean(ratios)
        print(f"{name:28s} {mean:.3f}  min {min(ratios):.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
