#!/usr/bin/env bash
# Issue 14: the fp32 suite with gemm.matmul's new float32 default (tf32x3 where the Hopper
# kernel runs it), "ieee" beside it, one run; and tf32x3's accuracy across the exponent range.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
D=benchmarks/logs/2026-11-27/x3_default
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout 60 python3 benchmarks/logs/2026-11-27/tf32x3/precompile_x3.py > "$OUT/precompile.log" 2>&1
echo "precompile rc=$?"; tail -1 "$OUT/precompile.log"
timeout 90 python3 $D/range.py > "$OUT/range.log" 2>&1
echo "range rc=$?"; tail -17 "$OUT/range.log"
timeout 420 python3 benchmarks/shapes.py --dtypes fp32 --reps 5 --calls 3 \
    --json "$OUT/suite_fp32_default.json" > "$OUT/suite_fp32_default.log" 2>&1
echo "suite rc=$?"; grep -E "^\||geometric" "$OUT/suite_fp32_default.log" | cut -c1-200
