"""Small tensor-core GEMMs under compute-sanitizer: memcheck, racecheck and synccheck.

Run on the GPU host from the project root:

    python3 benchmarks/sanitize_tensorcore.py [--tools memcheck racecheck synccheck] [--logs DIR]

The cases: bf16 on two shapes (all dimensions odd: the plain 2-byte copies; multiples of 8 with
partial tiles: the 16-byte cp.async), every A and B major, rings of 2 stages and of 4
(delay_release 0 and 1), beta 0 on a NaN-filled out and beta != 0, row- and column-major outs;
one f16 and one tf32 case. This process plans them, compiles their variants in parallel into
the kernel cache (gemm.call.binary) and runs them once, checked against float64. Then, per
tool, it runs itself with ``--child`` under ``compute-sanitizer --tool TOOL``: the child only
loads the cached kernels, runs and checks every case, and exits non-zero on a wrong result.
Operands are numba device arrays made with numpy (bf16 as uint16 bits): the sanitized process
loads no torch and launches nothing but these kernels.

Prints each tool's summary lines; exits 1 on any error, hazard error, wrong result or missing
summary (racecheck warnings are printed, not counted).
"""

import argparse
import itertools
import math
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import tensorcore_check as tc  # noqa: E402

TOOLS = ("memcheck", "racecheck", "synccheck")
SHAPES = ((37, 51, 29), (136, 200, 72))
RINGS = ((("stages", 2), ("delay_release", 0)), (("stages", 4), ("delay_release", 0)),
         (("stages", 4), ("delay_release", 1)))


def cases():
    out = []
    for ring in RINGS:
        for i, (am, bm) in enumerate(itertools.product(tc.MAJORS, tc.MAJORS)):
            for j, shape in enumerate(SHAPES):
                out.append(tc.Case("bfloat16", *shape, am, bm, "float32", tc.MAJORS[(i + j) % 2],
                                   alpha=1.5, beta=0.5 * j, kind="numba", config=ring))
    out.append(tc.Case("float16", *SHAPES[0], "col", "row", "float16", kind="numba"))
    out.append(tc.Case("tfloat32", *SHAPES[1], "row", "col", "float32", "col", beta=0.5,
                       kind="numba"))
    return out


def rounded(x, dtype):
    """(values as float64, the array to upload) of float32 ``x`` rounded to ``dtype``
    (bfloat16: to nearest even, uploaded as uint16 bits; tfloat32: the kernel rounds)."""
    if dtype == "bfloat16":
        u = x.view(np.uint32)
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64), bits
    if dtype == "float16":
        h = x.astype(np.float16)
        return h.astype(np.float64), h
    return x.astype(np.float64), x


def operands(case, rng):
    """(a, b, c0 as float64; A, B, C as numba device arrays): C holds c0 when beta != 0,
    else NaN."""
    from numba import cuda

    def matrix(rows, cols, major, dtype, fill=None):
        x = rng.standard_normal((rows, cols), dtype=np.float32)
        if fill is not None:
            x[:] = fill
        vals, data = rounded(x, dtype)
        data = np.ascontiguousarray(data) if major == "row" else np.asfortranarray(data)
        return vals, cuda.to_device(data)

    a, A = matrix(case.m, case.k, case.a_major, case.dtype)
    b, B = matrix(case.k, case.n, case.b_major, case.dtype)
    c0, C = matrix(case.m, case.n, case.out_major, case.out_dtype,
                   None if case.beta else math.nan)
    return (a, b, c0), (A, B, C)


def run_all(todo, seed, log):
    """Run and check every case; returns the number of wrong results."""
    from gemm.tensorcore import tensorcore_matmul
    rng = np.random.default_rng(seed)
    wrong = 0
    for case in todo:
        (a, b, c0), (A, B, C) = operands(case, rng)
        tensorcore_matmul(A, B, C, alpha=case.alpha, beta=case.beta,
                          config=tc.make_config(case.config))
        err = tc.error_ratio(C.copy_to_host().astype(np.float64), a, b, case.dtype,
                             case.out_dtype, case.alpha, case.beta, c0)
        wrong += not err <= 1
        log(f"  {'ok  ' if err <= 1 else 'FAIL'} {case.label()}: err {err:.2e}")
    return wrong


def usable(todo, log):
    """The cases whose config the kernel accepts (the others are logged)."""
    out = []
    for case in todo:
        try:
            tc.make_config(case.config)
            out.append(case)
        except (ValueError, TypeError) as e:
            log(f"  left out {case.label()}: {type(e).__name__}: {e}")
    return out


def summary(text):
    """(errors, summary lines) of a compute-sanitizer log: the ERROR SUMMARY count plus
    racecheck's error count; errors is None when no summary was printed."""
    lines = [line.strip("= ") for line in text.splitlines() if "SUMMARY" in line]
    errors = None
    for line in lines:
        m = re.search(r"ERROR SUMMARY: (\d+) error", line) or re.search(r"\((\d+) errors?,", line)
        if m:
            errors = (errors or 0) + int(m.group(1))
    return errors, lines


def sanitizer():
    found = shutil.which("compute-sanitizer")
    if found is None and os.path.exists("/usr/local/cuda/bin/compute-sanitizer"):
        found = "/usr/local/cuda/bin/compute-sanitizer"
    return found


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    p.add_argument("--logs", help="directory for each tool's full log")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=int, default=160, help="seconds per sanitized run")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    log = lambda *a: print(*a, flush=True)  # noqa: E731
    todo = usable(cases(), log)
    if args.child:
        return 1 if run_all(todo, args.seed, log) else 0

    tool_path = sanitizer()
    if tool_path is None:
        log("compute-sanitizer not found (PATH, /usr/local/cuda/bin)")
        return 1
    t0 = time.time()
    from gemm.tensorcore import plan_call
    rng = np.random.default_rng(args.seed)
    variants = [plan_call(*operands(c, rng)[1], config=tc.make_config(c.config)) for c in todo]
    tc.compile_all(variants, log=log)
    log("unsanitized run:")
    failed = run_all(todo, args.seed, log)
    log(f"{len(todo)} cases, {failed} wrong, {time.time() - t0:.0f} s")
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
    for tool in args.tools:
        t1 = time.time()
        cmd = [tool_path, "--tool", tool, "--error-exitcode", "3", "--print-limit", "20",
               sys.executable, os.path.abspath(__file__), "--child", "--seed", str(args.seed)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            text, rc = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            parts = [x.decode() if isinstance(x, bytes) else x for x in (e.stdout, e.stderr) if x]
            text, rc = "".join(parts) + f"\ntimed out after {args.timeout} s", -1
        if args.logs:
            with open(os.path.join(args.logs, f"{tool}.log"), "w") as f:
                f.write(text)
        errors, lines = summary(text)
        ok = rc == 0 and errors == 0
        failed += not ok
        log(f"=== {tool}: {'clean' if ok else 'FAILED'} (rc {rc}, {time.time() - t1:.0f} s): "
            + "; ".join(lines or ["no summary"]))
        if not ok:
            log(text[-4000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
