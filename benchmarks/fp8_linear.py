"""An FP8 linear layer for inference (issue 35): ``gemm.torch.fp8_linear`` beside torch's ways
of writing it, in one process.

    python3 benchmarks/fp8_linear.py [--reps R] [--json PATH]

The layer ``gelu_tanh(x @ (sw * W8)^T + b)``: x (M, K) bf16, W8 (N, K) e4m3 with one float32
scale per output channel (sw (N,)), b (N,) bf16. Eager calls as users write them, no out:

- ``ours``: ``fp8_linear(x, W8, sw, b, "gelu_tanh")`` (x quantized per row by one kernel,
  ``gemm.quantize``, then the Hopper kernel with the scales, the bias and the activation in
  its epilogue);
- ``torch``: the same quantization written with torch's operations (amax, divide, clamp,
  cast: the same bits), ``torch._scaled_mm(xq, W8.t(), sx, sw, bias=b, out_dtype=bf16,
  use_fast_accum=True)`` (cuBLASLt, row-wise scales), then ``F.gelu``;
- ``compiled``: that function under ``torch.compile`` (its quantization and GELU fused
  into Triton kernels);
- ``ours fp8x`` and ``torch fp8x``: the first two with x given quantized (the product and
  its epilogue alone);
- ``bf16``: ``F.gelu(F.linear(x, W, b), approximate="tanh")`` with the bf16 weight, the
  layer FP8 replaces.

Each time is the median over R of a loop of calls between CUDA events, every rep timing a
shape's calls in turn (``benchmarks.timing.timed_together``). Shapes: tokens M in 2048 and
8192 over (N, K) of an MLP's projections (14336 x 4096, 4096 x 14336) and 4096 x 4096.
Prints a table and geometric means, then each eager form's host time a call: 1000 calls
of a 16 x 256 x 256 layer (whose kernels take a few microseconds) between two
synchronizations, the wall time over the count.
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

import gemm.torch as gt  # noqa: E402
from gemm.report import per_call_us  # noqa: E402
from benchmarks.timing import eager_arguments, timed_together  # noqa: E402

SHAPES = [(m, n, k) for m in (2048, 8192) for n, k in ((14336, 4096), (4096, 14336),
                                                       (4096, 4096))]
RATIOS = {"ours / torch": ("torch", "ours"), "ours / compiled": ("compiled", "ours"),
          "x in fp8: ours / torch": ("torch fp8x", "ours fp8x"), "ours / bf16": ("bf16", "ours")}


def torch_quantize(x):
    """Rows of x to e4m3 with their scales, in torch's operations."""
    amax = x.abs().amax(dim=1, keepdim=True).float()
    scale = torch.where(amax == 0, 1.0, amax / gt.E4M3_MAX)
    return (x.float() / scale).clamp(-gt.E4M3_MAX, gt.E4M3_MAX).to(torch.float8_e4m3fn), scale


def row_functions(m, n, k):
    """{name: the call} of each form of the layer at M x N x K (module docstring)."""
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    sw = w.abs().amax(dim=1).float() / gt.E4M3_MAX
    w8 = (w.float() / sw[:, None]).to(torch.float8_e4m3fn)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    xq, sx = torch_quantize(x)

    def torch_fp8(xq, sx):
        y = torch._scaled_mm(xq, w8.t(), sx, sw[None, :], bias=b, out_dtype=torch.bfloat16,
                             use_fast_accum=True)
        return F.gelu(y, approximate="tanh")

    def torch_layer(x):
        return torch_fp8(*torch_quantize(x))
    compiled = torch.compile(torch_layer, dynamic=False)
    return {
        "ours": lambda: gt.fp8_linear(x, w8, sw, b, "gelu_tanh"),
        "torch": lambda: torch_layer(x),
        "compiled": lambda: compiled(x),
        "ours fp8x": lambda: gt.fp8_linear(xq, w8, sw, b, "gelu_tanh", x_scale=sx),
        "torch fp8x": lambda: torch_fp8(xq, sx),
        "bf16": lambda: F.gelu(F.linear(x, w, b), approximate="tanh"),
    }


def row(shape, reps):
    fns = row_functions(*shape)
    with torch.no_grad():
        return {name: ms * 1000 for name, ms in timed_together(fns, reps).items()}   # us


def host_times(calls=1000):
    """{name: microseconds of host time a call} of the eager forms at 16 x 256 x 256."""
    fns = row_functions(16, 256, 256)
    del fns["compiled"]
    with torch.no_grad():
        return {name: per_call_us(fn, calls, warmup=10) for name, fn in fns.items()}


def main():
    args = eager_arguments("torch.no_grad(); times in us")
    rows, ratios = [], {key: [] for key in RATIOS}
    for shape in SHAPES:
        t = row(shape, args.reps)
        if not rows:
            print(f"{'M x N x K':>18} " + " ".join(f"{n:>11}" for n in t)
                  + "".join(f"  {key:>22}" for key in RATIOS))
        r = {key: t[base] / t[ours] for key, (base, ours) in RATIOS.items()}
        for key, value in r.items():
            ratios[key].append(value)
        rows.append(dict(shape=shape, **t))
        print(f"{'x'.join(map(str, shape)):>18} " + " ".join(f"{v:11.1f}" for v in t.values())
              + "".join(f"  {v:22.3f}" for v in r.values()))
    for key, values in ratios.items():
        print(f"{key}: {geometric_mean(values):.3f}x (geometric mean), "
              f"{min(values):.3f}-{max(values):.3f}")
    host = host_times()
    print("host time a call, 16 x 256 x 256: "
          + ", ".join(f"{name} {us:.1f} us" for name, us in host.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, host_us=host), f, indent=1)


if __name__ == "__main__":
    main()
