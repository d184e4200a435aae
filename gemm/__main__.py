"""The main job: ``python -m gemm`` runs every kernel and checks it.

With a GPU: each SIMT kernel at a default size (4096^3), checked element by element against
cuBLAS (through torch or CuPy when installed, else numpy float64 on the host), and the
tensor-core kernels for bf16, f16 and tf32 (float32 inputs): the one ``gemm.matmul`` picks
(on compute capability 9.x the Hopper wgmma kernel) and the SM80 mma.sync kernel, checked
against float64 on the same inputs beside cuBLAS on the same operands; all timed and
printed as tables of TFLOP/s and the ratio to cuBLAS measured in the same run. Without one:
the same kernels in numba's CUDA simulator on small problems with partial tiles, checked
against numpy; the output says it is the simulator.

``python -m gemm bench --sizes 1024 2048 4096`` times the SIMT kernels and cuBLAS
at each size and writes JSON and a PNG plot (matplotlib). ``python -m gemm tune
--sizes 4096 8192 --dtype bfloat16`` tunes the tensor-core kernel for those problems into the
autotune cache that ``gemm.matmul`` reads (see gemm.tuning.autotune). ``python -m gemm
precompile`` fills numba's disk cache with every kernel variant.
"""

import argparse
import os
import subprocess
import sys

from gemm._env import gpu_present


EXAMPLES = """examples:
  python -m gemm                      check and time every kernel
  python -m gemm run --size 8192      the same at 8192^3 (GPU)
  python -m gemm precompile           compile every kernel variant ahead of time
  python -m gemm tune --sizes 4096 8192 --dtype bfloat16
  python -m gemm bench --sizes 1024 2048 4096 --json out.json --plot out.png
"""


def _plain(text):
    """reStructuredText's literals as plain text, for the terminal."""
    return text.replace("``", "")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gemm", description=_plain(__doc__),
                                     epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="check and time every kernel (the default)")
    run.add_argument("--size", type=int, default=4096, help="M = N = K on a GPU")
    pre = sub.add_parser("precompile", help="compile every kernel variant into the kernel cache")
    pre.add_argument("--no-tensorcore", action="store_true",
                     help="only the SIMT kernels (the tensor-core ones need a GPU to plan)")
    tune = sub.add_parser("tune", help="autotune the tensor-core kernel into the autotune cache")
    tune.add_argument("--sizes", type=int, nargs="+", default=[4096], help="M = N = K values")
    tune.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "tfloat32"],
                      help="operand type (tfloat32: float32 operands run as tf32)")
    tune.add_argument("--a-major", default="K", choices=["K", "M"],
                      help="K: A row-major (default), M: column-major")
    tune.add_argument("--b-major", default="K", choices=["K", "N"],
                      help="K: B the .T of a row-major (N, K) matrix (default), N: row-major")
    tune.add_argument("--out-dtype", default="float32",
                      choices=["float32", "bfloat16", "float16"])
    tune.add_argument("--reps", type=int, default=20, help="timed calls per candidate")
    tune.add_argument("--workers", type=int, default=None, help="parallel compiles")
    tune.add_argument("--force", action="store_true", help="tune again a problem in the cache")
    bench = sub.add_parser("bench", help="time kernels and cuBLAS over sizes")
    bench.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    bench.add_argument("--kernels", nargs="+", default=None)
    bench.add_argument("--json", default="gemm_bench.json")
    bench.add_argument("--plot", default="gemm_bench.png")
    bench.add_argument("--overhead", action="store_true",
                       help="also time the per-call host overhead against torch.mm")
    args = parser.parse_args(argv)

    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") != "1" and not gpu_present():
        print("No CUDA GPU found: re-running in numba's CUDA simulator.", flush=True)
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        sys.exit(subprocess.run([sys.executable, "-m", "gemm", *(argv or sys.argv[1:])],
                                env=env).returncode)

    # the kernels are imported only now, once numba's target (GPU or simulator) is settled
    from gemm import report
    if args.command == "precompile":
        from gemm.tuning.precompile import precompile
        print(f"compiled {precompile(tensorcore=not args.no_tensorcore)} kernel variants")
        return 0
    if args.command == "tune":
        return report.tune(args.sizes, args.dtype, args.a_major, args.b_major, args.out_dtype,
                           args.reps, args.workers, args.force)
    if args.command == "bench":
        if args.overhead:
            report.overhead()
        return report.bench(args.sizes, args.kernels, args.json, args.plot)
    return report.run(getattr(args, "size", 4096))


if __name__ == "__main__":
    sys.exit(main())
