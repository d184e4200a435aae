"""Launch one tensor-core kernel a few times, for Nsight Compute to profile the last launch.

    ncu --launch-skip 2 --launch-count 1 -k regex:kernel --section SpeedOfLight \\
        --section WarpStateStats --section MemoryWorkloadAnalysis \\
        python3 benchmarks/ncu_tensorcore.py SPEC N

SPEC as in benchmarks/tensorcore_check.py (``256x128x32:4x2:3:g8``, or ``default``); bf16
operands, A row-major, B the .T of a row-major (N, N) matrix, f32 out. The result of the last
launch is checked against a float64 reference (error over the bound printed; <= 1 passes).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(spec, n):
    import math

    import torch
    from gemm.tensorcore import tensorcore_matmul
    from tensorcore_check import (make_config, parse_config, ratio, reference, timing_inputs,
                                  tolerances)
    cfg = make_config(parse_config(spec))
    (A, B, C), = timing_inputs("bfloat16", n, sets=1)
    for _ in range(2):
        tensorcore_matmul(A, B, C, config=cfg)
    C.fill_(math.nan)
    tensorcore_matmul(A, B, C, config=cfg)
    torch.cuda.synchronize()
    ref, scale = reference(A.double(), B.double())
    err = ratio(C.double(), ref, scale, tolerances("bfloat16", "float32", n))
    print(f"{spec} n={n}: error/bound {err:.2e} ({'ok' if err <= 1 else 'WRONG'})")
    return 0 if err <= 1 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
