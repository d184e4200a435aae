"""Per-call host overhead of gemm.matmul against torch.mm on small torch tensors (GPU only),
and what its parts cost; then the same for a bf16 call on the tensor cores.

    python benchmarks/overhead.py
"""

import torch

from layoutalg import gemm
from layoutalg.gemm import api
from layoutalg.gemm.operands import operand
from layoutalg.gemm.report import overhead, per_call_us


overhead()
A, B = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
C = torch.empty(64, 64, device="cuda")
gemm.matmul(A, B, C)
(plan,) = api._plans.values()
ptrs = (A.data_ptr(), B.data_ptr(), C.data_ptr())
parts = {
    "3 x operand() (first call's checks)": lambda: (operand(A, "A"), operand(B, "B"),
                                                    operand(C, "C")),
    "first call's path, all checks": lambda: api._matmul(A, B, C, 1.0, 0.0, None),
    "matmul, planned call": lambda: gemm.matmul(A, B, C),
    "plan call alone": lambda: plan(ptrs, 0, 1.0, 0.0),
    "raw cuLaunchKernel": lambda: plan._launch(*plan._fixed, 0, plan._pointers, None),
    "torch.mm": lambda: torch.mm(A, B, out=C),
}
for name, fn in parts.items():
    print(f"{name:>36}: {per_call_us(fn, calls=5000, warmup=100):6.2f} us")

A16, B16 = A.to(torch.bfloat16), B.to(torch.bfloat16)
gemm.matmul(A16, B16, C)
parts = {
    "bf16: first call's path, all checks": lambda: api._matmul(A16, B16, C, 1.0, 0.0, None),
    "bf16: matmul, planned call": lambda: gemm.matmul(A16, B16, C),
    "bf16: torch.mm": lambda: torch.mm(A16, B16, out_dtype=torch.float32),
}
for name, fn in parts.items():
    print(f"{name:>36}: {per_call_us(fn, calls=5000, warmup=100):6.2f} us")
