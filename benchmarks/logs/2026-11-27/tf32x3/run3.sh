#!/usr/bin/env bash
# Issue 14: the fp32 suite with precision="tf32x3" (ours), the exact SIMT kernel ("ieee") and
# cuBLAS (TF32 off) in one run, in two parts ($1 = 0 or 1); part 0 first compiles the
# suite's tf32x3 variants in parallel and times tf32x3 configs at M = 1.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout 200 python3 benchmarks/logs/2026-11-27/tf32x3/precompile_x3.py > "$OUT/precompile_$1.log" 2>&1
echo "precompile rc=$?"; tail -1 "$OUT/precompile_$1.log"
if [ "$1" = 0 ]; then
  timeout 150 python3 benchmarks/logs/2026-11-27/tf32x3/x3_configs.py 1x4096x14336 \
      1x128256x4096 16x4096x4096 > "$OUT/x3_configs_m1.log" 2>&1
  echo "configs rc=$?"; grep "^|" "$OUT/x3_configs_m1.log" | cut -c1-250
fi
timeout 400 python3 benchmarks/shapes.py --dtypes fp32 --precision tf32x3 --reps 5 --calls 3 \
    --part "$1" 2 --json "$OUT/suite_fp32_x3_part$1.json" > "$OUT/suite_fp32_x3_part$1.log" 2>&1
echo "suite rc=$?"; grep "^|" "$OUT/suite_fp32_x3_part$1.log" | cut -c1-200; tail -2 "$OUT/suite_fp32_x3_part$1.log"
