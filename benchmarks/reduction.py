"""Split-K's reduction kernel (``gemm.splitk_kernel``) in its two forms on the same partials,
beside torch, in one process:

    python3 benchmarks/reduction.py [--json PATH]

Each case is S partials of an (M, N) product, contiguous (the reduce-scatter's 16-bit
blocks, split-K's float32 ranges), added in order in float32 into a fresh contiguous out:
``element by element`` (4 columns a thread, a load per element) and ``vector`` (16 bytes of
partials a load, the form ``gemm.splitk.reduce_splits`` takes where rows are 16-byte
aligned), each 20 launches captured in a CUDA graph and replayed (the kernel's GPU time, us
a launch); ``torch``: ``torch.sum(w, 0, dtype=torch.float32)`` then ``.to(out)``, eager
(benchmarks/timing.py's ``timed``, median of 7).
GB/s counts the partials read and the out written. The two forms' outs are checked equal
bit for bit and against float64 (max |err| / max |ref|).
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

from benchmarks.timing import graph_of, table_main, timed  # noqa: E402
from gemm import splitk_kernel as sk  # noqa: E402

TYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
CASES = [  # (out, partials, S, M, N): the reduce-scatter's blocks, then split-K's
    ("bfloat16", "bfloat16", 2, 2048, 4096), ("bfloat16", "bfloat16", 2, 4096, 4096),
    ("bfloat16", "bfloat16", 4, 2048, 4096), ("bfloat16", "float32", 2, 1024, 1024),
    ("bfloat16", "float32", 4, 128, 14336), ("bfloat16", "float32", 8, 256, 4096),
    ("float32", "float32", 3, 4096, 4096)]
LAUNCHES = 20


def _graph_us(fn):
    """us per call of ``fn``: LAUNCHES calls captured in a CUDA graph, replayed once after a
    replay."""
    replay = graph_of(fn, LAUNCHES)
    replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / LAUNCHES


def case(out_dtype, part_dtype, S, M, N):
    g = torch.Generator("cuda").manual_seed(S + M + N)
    w = torch.randn(S, M, N, device="cuda", generator=g).to(TYPES[part_dtype])
    ref = w.double().sum(0)
    nbytes = w.numel() * w.element_size() + M * N * TYPES[out_dtype].itemsize
    row = {"out": out_dtype, "partials": part_dtype, "S": S, "M": M, "N": N}
    outs = {}
    for name, vector in (("element by element", False), ("vector", True)):
        out = torch.full((M, N), float("nan"), device="cuda", dtype=TYPES[out_dtype])
        cols = sk.columns(part_dtype, vector)
        grid = (-(-M * -(-N // cols) // sk.THREADS), 1, 1)
        launch = sk.launcher(out_dtype, part_dtype, vector)

        def go(out=out, grid=grid, launch=launch):
            launch(grid, (sk.THREADS, 1, 1), torch.cuda.current_stream().cuda_stream,
                   ((w.data_ptr(), w.numel()), (out.data_ptr(), out.numel())),
                   (M, N, N, 1, S, N, 1, 0, 1.0, 0.0))
        us = _graph_us(go)
        outs[name] = out
        row[name] = {"us": us, "GB/s": nbytes / us / 1e3,
                     "max rel err vs float64": ((out.double() - ref).abs().max()
                                                / ref.abs().max()).item()}
    us = 1e3 * timed(lambda: torch.sum(w, 0, dtype=torch.float32).to(TYPES[out_dtype]), 7)
    row["torch"] = {"us": us, "GB/s": nbytes / us / 1e3}
    row["forms equal"] = torch.equal(outs["element by element"], outs["vector"])
    return row


def main():
    def cells(r):
        e, v, t = r["element by element"], r["vector"], r["torch"]
        return [r["out"], r["partials"], f"{r['S']} x {r['M']} x {r['N']}",
                f"{e['us']:.1f} us ({e['GB/s']:.0f} GB/s)",
                f"{v['us']:.1f} us ({v['GB/s']:.0f} GB/s)", f"{e['us'] / v['us']:.2f}x",
                f"{t['us']:.1f} us", f"{r['forms equal']}",
                f"{v['max rel err vs float64']:.1e}"]
    table_main(case, CASES, ["out", "partials", "S x M x N", "element by element", "vector",
                             "speedup", "torch", "equal", "err"], cells)


if __name__ == "__main__":
    main()
