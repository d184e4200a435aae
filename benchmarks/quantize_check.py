"""gemm.torch.quantize_rows (one kernel, gemm.quantize) against torch's own operations, bit for
bit, on three shapes (a row longer than a block's one pass, 257 rows of 4096, one row of 8):
the script compute-sanitizer runs.

    compute-sanitizer --tool memcheck --report-api-errors no python3 benchmarks/quantize_check.py

Prints, per shape, whether the FP8 bits and the scales equal torch's.
"""

import torch

import gemm.torch as gt

for shape, dtype in (((3, 1032), torch.float16), ((257, 4096), torch.bfloat16),
                     ((1, 8), torch.bfloat16)):
    x = torch.randn(shape, device="cuda").to(dtype)
    q, s = gt.quantize_rows(x)
    amax = x.abs().amax(dim=1, keepdim=True).float()
    want_s = torch.where(amax == 0, 1.0, amax / 448.0)
    want_q = (x.float() / want_s).clamp(-448, 448).to(torch.float8_e4m3fn)
    torch.cuda.synchronize()
    print(shape, torch.equal(q.view(torch.uint8), want_q.view(torch.uint8)),
          torch.equal(s, want_s))
