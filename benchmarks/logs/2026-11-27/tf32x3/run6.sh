#!/usr/bin/env bash
# Issue 14: tf32x3 calls through the torch fast path (a kept plan per kernel and precision):
# the tf32x3 and fast-path GPU tests, and the host time per call on a few shapes.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
timeout 250 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_hopper_gpu.py \
    tests/test_gemm_gpu.py tests/test_tensorcore_gpu.py -k "x3 or plan or fast or torch" \
    > "$OUT/pytest_run6.log" 2>&1
echo "pytest rc=$?"; grep -E "passed|failed|Error|error ratio" "$OUT/pytest_run6.log" | head -20
timeout 150 python3 benchmarks/shapes.py --dtypes fp32 --precision tf32x3 --reps 5 --calls 3 \
    --shapes 16x4096x4096 1024x1024x1024 4096x4096x4096 --json "$OUT/host.json" > "$OUT/host.log" 2>&1
echo "host rc=$?"; grep "^|" "$OUT/host.log" | cut -c1-200
