"""A Triton matmul baseline for the benchmarks: ``C = A @ B`` (f32 accumulate, C in A's type or
float32), the blocked kernel with grouped launch order that Triton's matmul tutorial teaches,
its best config among a few picked by timing (Triton's autotuner), as a user of Triton would
write it. Imported only on the GPU host (needs torch and triton).
"""

import torch
import triton
import triton.language as tl

__all__ = ["triton_matmul", "CONFIGS"]

CONFIGS = [
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "G": 8}, num_stages=3, num_warps=8),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "G": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "G": 8}, num_stages=4, num_warps=8),
    triton.Config({"BM": 256, "BN": 128, "BK": 64, "G": 8}, num_stages=3, num_warps=8),
    triton.Config({"BM": 128, "BN": 256, "BK": 32, "G": 8}, num_stages=4, num_warps=8),
    triton.Config({"BM": 64, "BN": 256, "BK": 64, "G": 8}, num_stages=4, num_warps=4),
]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def _matmul(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
    pid = tl.program_id(0)
    rows, cols = tl.cdiv(M, BM), tl.cdiv(N, BN)
    per_group = G * cols
    first = (pid // per_group) * G
    size = min(rows - first, G)
    pm = first + (pid % per_group) % size
    pn = (pid % per_group) // size
    rm = (pm * BM + tl.arange(0, BM)) % M
    rn = (pn * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    pa = a + rm[:, None] * sam + rk[None, :] * sak
    pb = b + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        left = K - k * BK
        x = tl.load(pa, mask=rk[None, :] < left, other=0.0)
        y = tl.load(pb, mask=rk[:, None] < left, other=0.0)
        acc = tl.dot(x, y, acc)
        pa += BK * sak
        pb += BK * sbk
    om = pm * BM + tl.arange(0, BM)
    on = pn * BN + tl.arange(0, BN)
    mask = (om[:, None] < M) & (on[None, :] < N)
    tl.store(c + om[:, None] * scm + on[None, :] * scn, acc.to(c.dtype.element_ty), mask=mask)


def triton_matmul(a, b, out=None):
    """``out = a @ b`` with the Triton kernel (``out`` float32 when None)."""
    m, k = a.shape
    n = b.shape[1]
    if out is None:
        out = torch.empty((m, n), device=a.device, dtype=torch.float32)

    def grid(meta):
        return (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)
    _matmul[grid](a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                  out.stride(0), out.stride(1))
    return out
