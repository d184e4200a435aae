"""The SM80 tensor-core GEMM written with gemm.cute (``gemm/tensorcore/cute_gemm.py``) beside
the generated one (``gemm/tensorcore/gen.py``) in the same configuration, in one process
(issue 34). GPU only.

    python3 benchmarks/cute_tensorcore.py [--reps R] [--json PATH]

``gemm.matmul(a, b, kernel=TensorCoreConfig(...))`` with the default configuration (256 x
128 x 64 tiles, 4 x 2 warps, 3 stages), ``cute=True`` (gemm.cute, the default) and
``cute=False`` (generated): eager calls without an out, A (M, K) row-major and B = W.T
(K-major, a torch Linear's weight; "B rows": B (K, N) row-major, N-major; "A cols": A
column-major, M-major; K = 4100 and 4098: 8- and 4-byte copies; "A odd": A a view one
element into rows of K + 1, so 2-byte copies; "delay 1": 4 stages, ``delay_release=1``),
bf16, f16, or float32
multiplied as tf32 (cuBLAS with TF32 allowed), the out type of each row. Every rep
times both calls and torch.matmul (cuBLAS, its own out type) in turn (benchmarks/timing.py's
``timed_together``, median of R). Before timing: both outs against float64 (max |C - ref| /
max |ref|) and against each other bit for bit; the first call's seconds (the compile
included, a fresh kernel cache) of each kernel.
"""

import json
import math
import os
import sys
import tempfile
import time

os.environ["LAYOUTALG_CACHE"] = tempfile.mkdtemp()       # both kernels compile anew
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import gemm  # noqa: E402
from benchmarks.timing import eager_arguments, timed_together  # noqa: E402
from gemm.tensorcore import TensorCoreConfig  # noqa: E402

# (M, N, K, batch, operand type, out type[, operands' form])
SHAPES = [(4096, 4096, 4096, 1, "bfloat16", "float32"),
          (4096, 4096, 4096, 1, "bfloat16", "bfloat16"),
          (8192, 8192, 8192, 1, "bfloat16", "bfloat16"),
          (2048, 2048, 2048, 1, "bfloat16", "bfloat16"),
          (2048, 14336, 4096, 1, "bfloat16", "bfloat16"),
          (8192, 4096, 14336, 1, "bfloat16", "bfloat16"),
          (4095, 4097, 4104, 1, "bfloat16", "bfloat16"),
          (1000, 3000, 1000, 1, "bfloat16", "float32"),
          (1024, 1024, 1024, 8, "bfloat16", "bfloat16"),
          (4096, 4096, 4096, 1, "float16", "float16"),
          (4096, 4096, 4096, 1, "bfloat16", "bfloat16", "B rows"),
          (2048, 14336, 4096, 1, "bfloat16", "bfloat16", "B rows"),
          (4096, 4096, 4096, 1, "bfloat16", "bfloat16", "A cols"),
          (4096, 4096, 4100, 1, "bfloat16", "bfloat16"),
          (4096, 4096, 4098, 1, "bfloat16", "bfloat16"),
          (4096, 4096, 4096, 1, "bfloat16", "bfloat16", "A odd"),
          (4096, 4096, 4096, 1, "bfloat16", "bfloat16", "delay 1"),
          (4096, 4096, 4096, 1, "tfloat32", "float32"),
          (2048, 14336, 4096, 1, "tfloat32", "float32", "B rows")]
TORCH = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32,
         "tfloat32": torch.float32}


def calls(m, n, k, batch, dtype, out_dtype, form="TN"):
    """({name: call}, {name: first call's seconds}, {name: error}, equal): the two kernels'
    calls and torch's on fresh operands."""
    lead = (batch,) if batch > 1 else ()
    a = torch.randn(*lead, m, k, device="cuda").to(TORCH[dtype])
    b = torch.randn(*lead, n, k, device="cuda").to(TORCH[dtype]).transpose(-1, -2)
    if form == "B rows":
        b = b.contiguous()
    elif form == "A cols":
        a = a.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif form == "A odd":
        a = torch.randn(*lead, m, k + 1, device="cuda").to(TORCH[dtype])[..., 1:]
    more = dict(stages=4, delay_release=1) if form == "delay 1" else {}
    ref = (a.double() @ b.double())
    fns, first, err, outs = {}, {}, {}, {}
    for name, cute in (("generated", False), ("gemm.cute", True)):
        cfg = TensorCoreConfig(dtype=dtype, cute=cute, **more)

        def call(cfg=cfg):
            return gemm.matmul(a, b, kernel=cfg, out_dtype=out_dtype,
                               allow_tf32=dtype == "tfloat32")
        t0 = time.perf_counter()
        out = call()
        torch.cuda.synchronize()
        first[name] = time.perf_counter() - t0
        outs[name] = out
        err[name] = float((out.double() - ref).abs().max() / ref.abs().max())
        fns[name] = call
    fns["cuBLAS"] = lambda: torch.matmul(a, b)
    return fns, first, err, bool(torch.equal(outs["generated"], outs["gemm.cute"]))


def main():
    args = eager_arguments("the SM80 kernel, generated and written with gemm.cute; us a call")
    rows = []
    for shape in SHAPES:
        fns, first, err, equal = calls(*shape)
        torch.backends.cuda.matmul.allow_tf32 = shape[4] == "tfloat32"    # cuBLAS's tf32
        t = timed_together(fns, args.reps)
        torch.backends.cuda.matmul.allow_tf32 = False
        m, n, k, batch, dtype, out_dtype, *form = shape
        row = dict(shape=shape, us={x: v * 1e3 for x, v in t.items()}, first_call_s=first,
                   error=err, equal=equal, ratio=t["generated"] / t["gemm.cute"])
        rows.append(row)
        flops = 2 * m * n * k * batch / (t["gemm.cute"] * 1e-3) / 1e12
        print(f"{batch} x {m}x{n}x{k} {dtype} -> {out_dtype}{' ' + form[0] if form else ''}: "
              f"generated "
              f"{row['us']['generated']:8.1f} us  gemm.cute {row['us']['gemm.cute']:8.1f} us "
              f"({flops:5.1f} TFLOP/s)  cuBLAS {row['us']['cuBLAS']:8.1f} us  generated / "
              f"gemm.cute {row['ratio']:.3f}  equal {equal}  error {err['gemm.cute']:.1e}  "
              f"first call {first['generated']:.1f} / {first['gemm.cute']:.1f} s", flush=True)
    ratios = [r["ratio"] for r in rows]
    print(f"generated / gemm.cute: geometric mean "
          f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}, lowest {min(ratios):.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
