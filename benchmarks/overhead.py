"""Per-call host overhead of gemm.matmul against torch.mm on small torch tensors (GPU only),
and what its parts cost.

    python benchmarks/overhead.py
"""

import time

import torch

import gemm
from gemm import api
from gemm.operands import operand
from gemm.report import overhead


def per_call_us(fn, calls=5000):
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


overhead()
A, B = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
C = torch.empty(64, 64, device="cuda")
gemm.matmul(A, B, C)
a, b, c = operand(A, "A"), operand(B, "B"), operand(C, "C")
cfg, launch = api._launcher(None, a.unit_mode, 1 - b.unit_mode, api._vector(a), api._vector(b))
args = ((a.ptr, a.span), (b.ptr, b.span), (c.ptr, c.span))
scalars = (64, 64, 64, 64, 1, 1, 64, 64, 1, 1.0, 0.0)
parts = {
    "3 x operand()": lambda: (operand(A, "A"), operand(B, "B"), operand(C, "C")),
    "stream handle": lambda: api._stream(a),
    "launcher call": lambda: launch((1, 1, 1), (256, 1, 1), 0, args, scalars),
    "raw cuLaunchKernel": lambda: launch._launch(launch._func, 1, 1, 1, 256, 1, 1, 0, 0,
                                                 launch._params, None),
    "torch.mm": lambda: torch.mm(A, B, out=C),
}
for name, fn in parts.items():
    print(f"{name:>20}: {per_call_us(fn):6.2f} us")
