"""3xTF32 across float32's exponent range: A scaled by 2^-s and B by 2^min(s, 120) (A's small
parts go subnormal from s = 115, A itself from s = 126), and both by
2^-s (the products and the cross terms near float32's smallest normals). Error / (2^-24
|A| @ |B|) against float64 on the float32 operands, for tf32x3, the exact SIMT kernel
(ieee), cuBLAS (TF32 off) and plain tf32. The bound is float32's, so tf32 is far above 1."""

import os
import sys

sys.path.insert(0, os.getcwd())
import torch  # noqa: E402

from layoutalg import gemm  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
M, N, K = 256, 1024, 1024


def err(a, b, out):
    a64, b64 = a.double(), b.double()
    ref, bound = a64 @ b64, a64.abs() @ b64.abs()
    e = (out.double() - ref).abs() / (2.0 ** -24 * bound + 1e-300)
    return float(e.nan_to_num(nan=float("inf")).max())


def main():
    gen = torch.Generator(device="cuda").manual_seed(5)
    # B at most 2^120: randn x 2^126 would overflow float32 (4 x 2^126 = 2^128)
    cases = [("A 2^-s, B 2^s", s, -s, min(s, 120)) for s in (0, 100, 110, 114, 116, 118, 120,
                                                            122, 124, 126, 130)]
    cases += [("both 2^-s", s, -s, -s) for s in (50, 58, 60, 62, 63)]
    print(f"{'case':16} {'s':>4} {'tf32x3':>10} {'ieee':>10} {'cuBLAS':>10} {'tf32':>10}")
    for name, s, ea, eb in cases:
        a = torch.randn(M, K, device="cuda", generator=gen) * 2.0 ** ea
        w = torch.randn(N, K, device="cuda", generator=gen) * 2.0 ** eb
        b = w.T
        row = {}
        for label, fn in (("tf32x3", lambda o: gemm.matmul(a, b, o, precision="tf32x3")),
                          ("ieee", lambda o: gemm.matmul(a, b, o, precision="ieee")),
                          ("cuBLAS", lambda o: torch.mm(a, b, out=o)),
                          ("tf32", lambda o: gemm.matmul(a, b, o, precision="tf32"))):
            out = torch.full((M, N), float("nan"), device="cuda")
            fn(out)
            torch.cuda.synchronize()
            row[label] = err(a, b, out)
        print(f"{name:16} {s:4d} " + " ".join(f"{row[k]:10.3g}" for k in row), flush=True)


main()
