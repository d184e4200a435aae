"""Small Hopper GEMMs (gemm.hopper) under compute-sanitizer: memcheck, racecheck, synccheck.

Run on an H100/H200 host from the project root:

    python3 benchmarks/sanitize_hopper.py [--tools memcheck racecheck synccheck] [--cases I ...]

The cases (from benchmarks/hopper_check.py's operands and checks): bf16 with partial tiles in
M, N and K for both B majors, a column-major out with beta != 0, a ring of 2 slots without
delay_release and one consumer warpgroup, a pingpong ring of 2 slots with more tiles than
blocks, the plain pipeline with two blocks per SM, tf32 with a bf16 out, and two calls of
few rows that the rules run with A and B swapped (C stored column by column; 5 rows on tiles
of 8 columns into a bf16 out with beta, 40 on 64 columns), the TMA epilogue (cooperative into
a bf16 out, pingpong), 5 rows on tiles of 8 columns with split-K, and 3xTF32 (``:x3``;
the rules' tiles unswapped and swapped, pingpong) (``--cases``: only these, by index).
The kernel is the one written with gemm.cute (``gemm.hopper.cute_gemm``; ``--cute``, which
named it beside a generated kernel, is kept and changes nothing). This process compiles the
cases' variants first; then, per tool, it runs itself with ``--child`` under
``compute-sanitizer --tool TOOL``: the child runs and checks every case and exits non-zero
on a wrong result.
Prints each tool's summary lines; exits 1 on any error, wrong result or missing summary.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import hopper_check as hc  # noqa: E402

TOOLS = ("memcheck", "racecheck", "synccheck")


def cases():
    base = dict(dtype="bfloat16", m=300, n=136, k=200, a_major="row", b_major="col",
                out_dtype="float32", out_major="row", alpha=1.0, beta=0.0, spec="default")
    return [base, dict(base, b_major="row", out_dtype="bfloat16"),
            dict(base, out_major="col", alpha=0.5, beta=-1.0),
            dict(base, spec="128x128:2:1:d0"),
            dict(base, m=2000, n=1100, spec="128x128:2:2:p"),     # 144 tiles: turns taken
            dict(base, m=2000, n=2100, spec="128x128:3:1:plain"),  # 272 tiles, 2 per SM
            dict(base, dtype="tfloat32", m=77, n=64, k=100, out_dtype="bfloat16"),
            dict(base, m=5, n=1100, k=2000, out_dtype="bfloat16", beta=0.5, spec="auto"),
            dict(base, m=40, n=1100, k=300, spec="auto"),       # swapped: split 4, unsplit
            dict(base, m=2000, n=1100, out_dtype="bfloat16", spec="64x256:3:2:d0:t"),
            dict(base, m=2000, n=1100, spec="128x128:2:2:p:t"),  # TMA epilogue: 2 schedules
            dict(base, m=5, n=1100, k=14000, spec="auto"),      # narrow swapped, split 2
            # 3xTF32: two consumers splitting each slot (the rules: unswapped; swapped,
            # 40 columns, split), and pingpong (a buffer per consumer)
            dict(base, dtype="tfloat32", spec="auto:x3"),
            dict(base, dtype="tfloat32", m=40, n=1100, k=300, spec="auto:x3"),
            dict(base, dtype="tfloat32", m=2000, n=1100, spec="128x128:2:2:p:x3")]


def chosen(indices):
    return [c for i, c in enumerate(cases()) if not indices or i in indices]


def child(indices=()):
    bad = 0
    for case in chosen(indices):
        ok, err, guard = hc.check(case)
        print(f"{'ok ' if ok else 'BAD'} {case}: err {err:.3g} guard {guard}", flush=True)
        bad += not ok
    return 1 if bad else 0


def summary(text):
    return [line for line in text.splitlines()
            if re.search(r"(ERROR|RACECHECK) SUMMARY", line)]


def reports(text, limit=40):
    """The sanitizer's report lines (what it found and where: no host stack frames), each
    distinct one once."""
    keep = [ln for ln in text.splitlines()
            if ln.startswith("=========") and "Host Frame" not in ln and ln.strip("= ")]
    return list(dict.fromkeys(keep))[:limit]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", nargs="+", default=list(TOOLS))
    ap.add_argument("--cases", nargs="+", type=int, default=[])
    ap.add_argument("--cute", action="store_true", help="(the only kernel: changes nothing)")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args(argv)
    if args.child:
        return child(args.cases)
    hc.compile_all(hc.variants_of(chosen(args.cases)), 8, print)
    if child(args.cases):
        print("wrong results without the sanitizer")
        return 1
    tool_bin = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    failed = 0
    for tool in args.tools:
        # memcheck: device accesses only (the CUDA libraries' own probing of driver entry
        # points returns errors that memcheck would report as API errors)
        extra = ["--report-api-errors", "no"] if tool == "memcheck" else []
        only = ["--cases", *map(str, args.cases)] if args.cases else []
        proc = subprocess.run([tool_bin, "--tool", tool, *extra, sys.executable, __file__,
                               "--child", *only], capture_output=True, text=True)
        lines = summary(proc.stdout + proc.stderr)
        clean = bool(lines) and all(re.search(r"\b0 (errors|hazards)", ln) for ln in lines)
        print(f"{tool}: rc {proc.returncode}; " + "; ".join(lines or ["no summary"]))
        if not clean or proc.returncode:
            failed += 1
            print("\n".join(reports(proc.stdout + proc.stderr)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
