"""Time SIMT kernel configurations against cuBLAS fp32 in one run (GPU only).

    python benchmarks/simt_variants.py [SIZE ...]

Each configuration is checked against cuBLAS (TF32 off) before it is timed; the table gives
TFLOP/s and the ratio to cuBLAS measured in the same run, for row-major A and B.
"""

import sys

import numpy as np
import torch

import gemm
from gemm.simt import SimtConfig
from gemm.report import Backend, check

VARIANTS = {
    "prefetch (seed)": SimtConfig(pipeline="prefetch"),
    "double_buffer (seed)": SimtConfig(pipeline="double_buffer"),
    "tuned": gemm.KERNELS["tuned"],
    "tuned, 2 blocks/SM": SimtConfig(pad=4, vector_mn=4, min_blocks=2),
    "tuned, bK=16": SimtConfig(bK=16, pad=4, vector_mn=4),
    "tuned, bK=16, 2 blocks/SM": SimtConfig(bK=16, pad=4, vector_mn=4, min_blocks=2),
    "tuned, (32,8) threads": SimtConfig(mma_threads=(32, 8), pad=4, vector_mn=4),
}


def main(sizes):
    backend = Backend()
    rows = []
    for n in sizes:
        A, B = backend.random((n, n)), backend.random((n, n))
        C = backend.empty_nan((n, n))
        cublas = 2.0 * n ** 3 / backend.time_ms(lambda: backend.cublas(A, B, C)) / 1e9
        rows.append((n, "cuBLAS", cublas, 1.0, 0.0))
        for name, cfg in VARIANTS.items():
            C = backend.empty_nan((n, n))
            gemm.matmul(A, B, C, kernel=cfg)
            err = check(backend, C, A, B)
            tf = 2.0 * n ** 3 / backend.time_ms(lambda: gemm.matmul(A, B, C, kernel=cfg)) / 1e9
            rows.append((n, name, tf, tf / cublas, err))
            print(f"{n:>6} {name:>28} {tf:8.2f} TFLOP/s {tf / cublas:6.2f}x  err/tol {err:.3f}",
                  flush=True)
    print(f"\n{'n':>6} {'kernel':>28} {'TFLOP/s':>8} {'x cuBLAS':>9} {'err/tol':>8}")
    for n, name, tf, ratio, err in rows:
        print(f"{n:>6} {name:>28} {tf:8.2f} {ratio:9.2f} {err:8.3f}")


if __name__ == "__main__":
    main([int(s) for s in sys.argv[1:]] or [4096])
