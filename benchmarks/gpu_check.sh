#!/usr/bin/env bash
# One device session for the SIMT kernels: compile every variant, run the GPU tests, the main
# job, the benchmark (4096^3, 8192^3, host overhead) and the SIMT variants table.
# Usage on the GPU host (after the wheel install line of ../shared/gpu/wheels.sh):
#   bash benchmarks/gpu_check.sh OUTDIR
set -uo pipefail
out=${1:-/tmp/gpu_check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import numba_cuda, numpy, torch; print('numba-cuda', numba_cuda.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__)" | tee -a "$out/gpu.txt"
step() { echo "=== $1"; shift; local t0=$SECONDS; "$@"; echo "=== rc=$? in $((SECONDS - t0)) s"; }
step precompile python3 -m gemm precompile
step main python3 -m gemm 2>&1 | tee "$out/main.log"
step bench python3 -m gemm bench --sizes 4096 8192 --overhead --json "$out/bench.json" --plot "$out/bench.png" 2>&1 | tee "$out/bench.log"
step variants python3 benchmarks/simt_variants.py 4096 8192 2>&1 | tee "$out/variants.log"
step gpu-tests python3 -m pytest -p no:cacheprovider -q -n 8 -rs -m gpu tests/test_gemm_gpu.py tests/test_arch_gpu.py 2>&1 | tee "$out/pytest.log"
