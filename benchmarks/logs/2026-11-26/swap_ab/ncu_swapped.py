"""Scratch: profile the swapped decode call (B cold: 3 rotating sets)."""
import sys
import torch
from layoutalg import gemm
m = int(sys.argv[1])
a = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
bs = [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16).T for _ in range(3)]
out = torch.empty(m, 4096, device="cuda", dtype=torch.bfloat16)
for i in range(6):
    gemm.matmul(a, bs[i % 3], out)
torch.cuda.synchronize()
print("ok")
