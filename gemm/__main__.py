"""The main job: ``python -m gemm`` runs every kernel and checks it.

With a GPU: each kernel at a default size (4096^3), checked element by element against cuBLAS
(through torch or CuPy when installed, else numpy float64 on the host), timed, and printed as
a table of TFLOP/s and the ratio to cuBLAS measured in the same run. Without one: the same
kernels in numba's CUDA simulator on a small problem with partial tiles, checked against numpy;
the output says it is the simulator.

``python -m gemm bench --sizes 1024 2048 4096`` times the kernels and cuBLAS at each size and
writes JSON and a PNG plot (matplotlib).
"""

import argparse
import os
import subprocess
import sys


def _gpu_present():
    """Whether a CUDA GPU is usable, asked in a child process so that this one can still
    choose the simulator (numba reads NUMBA_ENABLE_CUDASIM at import)."""
    probe = "from numba import cuda; import sys; sys.exit(0 if cuda.is_available() else 1)"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    return subprocess.run([sys.executable, "-c", probe], env=env,
                          capture_output=True).returncode == 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gemm", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="check and time every kernel (the default)")
    run.add_argument("--size", type=int, default=4096, help="M = N = K on a GPU")
    sub.add_parser("precompile", help="compile every kernel variant into numba's disk cache")
    bench = sub.add_parser("bench", help="time kernels and cuBLAS over sizes")
    bench.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    bench.add_argument("--kernels", nargs="+", default=None)
    bench.add_argument("--json", default="gemm_bench.json")
    bench.add_argument("--plot", default="gemm_bench.png")
    bench.add_argument("--overhead", action="store_true",
                       help="also time the per-call host overhead against torch.mm")
    args = parser.parse_args(argv)

    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") != "1" and not _gpu_present():
        print("No CUDA GPU found: re-running in numba's CUDA simulator.", flush=True)
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        sys.exit(subprocess.run([sys.executable, "-m", "gemm", *(argv or sys.argv[1:])],
                                env=env).returncode)

    from gemm import report
    if args.command == "precompile":
        from gemm.precompile import precompile
        print(f"compiled {precompile()} kernel variants")
        return 0
    if args.command == "bench":
        if args.overhead:
            report.overhead()
        return report.bench(args.sizes, args.kernels, args.json, args.plot)
    return report.run(getattr(args, "size", 4096))


if __name__ == "__main__":
    sys.exit(main())
