#!/usr/bin/env bash
# Issue 14: the final tree: the 3xTF32 sanitizer cases (memcheck, racecheck, synccheck), then
# the whole fp32 suite with precision="tf32x3" beside the exact SIMT kernel and cuBLAS.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout 220 python3 benchmarks/sanitize_hopper.py --cases 11 12 13 > "$OUT/sanitize_x3.log" 2>&1
echo "sanitize rc=$?"; grep -E "SUMMARY|BAD|Error" "$OUT/sanitize_x3.log" | head -12
timeout 60 python3 benchmarks/logs/2026-11-27/tf32x3/precompile_x3.py > "$OUT/precompile_final.log" 2>&1
echo "precompile rc=$?"; tail -1 "$OUT/precompile_final.log"
timeout 300 python3 benchmarks/shapes.py --dtypes fp32 --precision tf32x3 --reps 5 --calls 3 \
    --json "$OUT/suite_fp32_x3.json" > "$OUT/suite_fp32_x3.log" 2>&1
echo "suite rc=$?"; tail -4 "$OUT/suite_fp32_x3.log"
