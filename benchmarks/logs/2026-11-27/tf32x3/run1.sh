#!/usr/bin/env bash
# Issue 14: 3xTF32 on the Hopper kernel (precision="tf32x3"): its GPU tests, then a few fp32
# shapes of the suite against cuBLAS (TF32 off) and our exact SIMT kernel.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout 300 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_hopper_gpu.py \
    -k "x3" > "$OUT/pytest_x3.log" 2>&1
echo "pytest rc=$?"; grep -E "passed|failed|Error|error ratio" "$OUT/pytest_x3.log" | head -20
timeout 250 python3 benchmarks/shapes.py --dtypes fp32 --precision tf32x3 --reps 5 --calls 3 \
    --shapes 4096x4096x4096 64x4096x4096 16x4096x4096 128x4096x4096 1024x1024x1024 \
    65536x64x4096 65536x128x128 1024x1024x16384 --json "$OUT/quick.json" > "$OUT/quick.log" 2>&1
echo "quick rc=$?"; grep "^|" "$OUT/quick.log" | cut -c1-250; tail -3 "$OUT/quick.log"
