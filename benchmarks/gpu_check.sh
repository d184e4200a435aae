#!/usr/bin/env bash
# One device session: compile every SIMT kernel variant, then the chosen steps (default: all),
# each with its log under OUTDIR and a time limit of its own.
#   bash benchmarks/gpu_check.sh OUTDIR [precompile main bench variants overhead tests tc_tests
#                                        sanitize elementwise notebooks tensorcore tile_tests
#                                        compile_time main_cold]
# compile_time and main_cold (python -m gemm with empty caches, timed end to end) run the
# checkout at $TREE (default: this one), so an older checkout can be timed in the same session.
# tc_tests and sanitize compile their tensor-core variants into numba's cache first (all cores);
# tensorcore reuses what tc_tests compiled and checks every timed result against float64.
# On the GPU host, first run the wheel install line that ../shared/gpu/wheels.sh prints.
set -uo pipefail
out=${1:-/tmp/gpu_check}
shift || true
all="precompile main bench variants overhead tests tc_tests sanitize elementwise notebooks"
all="$all tensorcore"
steps=${*:-$all}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import numba_cuda, numpy, torch; print('numba-cuda', numba_cuda.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__)" | tee -a "$out/gpu.txt"
run() {   # run NAME LIMIT_S COMMAND...: output to OUTDIR/NAME.log, rc and seconds printed
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  echo "=== $name"
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "=== $name: rc=$? in $((SECONDS - t0)) s"
}
for step in $steps; do
  case $step in
    precompile) run precompile 200 python3 -m gemm precompile ;;
    main) run main 120 python3 -m gemm ;;
    bench) run bench 120 python3 -m gemm bench --sizes 4096 8192 --overhead \
             --json "$out/bench.json" --plot "$out/bench.png" ;;
    variants) run variants 300 python3 benchmarks/simt_variants.py 4096 8192 ;;
    overhead) run overhead 120 python3 benchmarks/overhead.py ;;
    tests) run tests 540 python3 -m pytest -p no:cacheprovider -n 8 -rfEs -m gpu \
             tests/test_gemm_gpu.py tests/test_arch_gpu.py ;;
    tc_tests) run tc_tests 420 python3 -m pytest -p no:cacheprovider -n 0 -rfEs -m gpu \
             tests/test_tensorcore_gpu.py ;;
    sanitize) run sanitize 590 python3 benchmarks/sanitize_tensorcore.py --logs "$out/sanitize" ;;
    elementwise) run elementwise 200 python3 benchmarks/elementwise.py ;;
    notebooks) run notebooks 300 python3 -m pytest -p no:cacheprovider -rfEs \
             tests/test_notebooks.py ;;
    tensorcore) run tensorcore 540 python3 benchmarks/tensorcore_check.py --no-correctness \
             --json "$out/tensorcore.json" ;;
    tile_tests) run tile_tests 300 python3 -m pytest -p no:cacheprovider -n 0 -rfEs -m gpu \
             tests/test_tile.py ;;
    compile_time) run compile_time 500 python3 benchmarks/compile_time.py --tree "${TREE:-.}" \
             --json "$out/compile_time.json" ;;
    main_cold) fresh=$(mktemp -d)
      run main_cold 500 env -C "${TREE:-.}" LAYOUTALG_CACHE="$fresh/layoutalg" \
        NUMBA_CACHE_DIR="$fresh/numba" GEMM_AUTOTUNE_CACHE="$fresh/autotune.json" \
        PYTHONPATH="$(realpath "${TREE:-.}"):${PYTHONPATH:-}" python3 -m gemm ;;
    *) echo "unknown step $step" ;;
  esac
done
