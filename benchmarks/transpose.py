"""The column-major copy that 3xTF32 runs on a row-major B (``gemm.transpose``, written with
gemm.cute) beside torch's copy of a transposed view into a contiguous tensor, in one process
(issue 34).

    python3 benchmarks/transpose.py [--reps R] [--json PATH]

float32 (R, C) row-major sources (one with a padded leading dimension), copied column-major:
``column_major_copy``'s bound launch (made once, as gemm.matmul's kept plan keeps it) on
torch's current stream, and ``dst.copy_(src.T)`` for a (C, R) contiguous ``dst``; every rep
times both in turn (benchmarks/timing.py's ``timed_together``, median of R), each result
first checked equal to torch's bit for bit. Prints us a copy, GB/s (read + written) and
torch / ours.
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

from benchmarks.timing import eager_arguments, timed_together  # noqa: E402
from gemm import transpose  # noqa: E402

SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (4096, 14336, 14336), (14336, 4096, 4096),
          (1000, 4097, 4100)]          # (rows, columns, leading dimension)


def copies(rows, cols, ld):
    """(ours, torch's, check): the two copies of a fresh (rows, cols) matrix and a function
    that runs both once and says whether they agree bit for bit."""
    src = torch.randn(rows, ld, device="cuda")[:, :cols]
    ours_dst = torch.full((cols, rows), float("nan"), device="cuda")
    torch_dst = torch.empty((cols, rows), device="cuda")

    stream = torch.cuda.current_stream().cuda_stream
    bound = transpose.column_major_copy((src.data_ptr(), rows * ld),
                                        (ours_dst.data_ptr(), rows * cols), (rows, cols), ld)
    addresses = (src.data_ptr(), ours_dst.data_ptr())

    def ours(keep=(src, ours_dst)):     # the bound launch, as gemm.matmul's plan calls it
        bound(addresses, stream)

    def theirs():
        torch_dst.copy_(src.T)

    def check():
        ours(), theirs()
        torch.cuda.synchronize()
        return bool(torch.equal(ours_dst, torch_dst))
    return ours, theirs, check


def main():
    args = eager_arguments("float32 column-major copies; us a copy")
    rows_out = []
    for rows, cols, ld in SHAPES:
        ours, theirs, check = copies(rows, cols, ld)
        same = check()
        t = timed_together({"ours": ours, "torch": theirs}, args.reps)
        gbs = 2 * 4 * rows * cols / (t["ours"] * 1e-3) / 1e9
        row = dict(shape=(rows, cols, ld), equal=same, ours_us=t["ours"] * 1e3,
                   torch_us=t["torch"] * 1e3, ours_gb_s=gbs)
        rows_out.append(row)
        print(f"{rows}x{cols} (ld {ld}): ours {row['ours_us']:8.1f} us ({gbs:6.0f} GB/s)  torch "
              f"{row['torch_us']:8.1f} us  torch / ours {t['torch'] / t['ours']:.3f}  "
              f"equal {same}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows_out, f, indent=1)


if __name__ == "__main__":
    main()
