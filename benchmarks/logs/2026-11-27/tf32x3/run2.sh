#!/usr/bin/env bash
# Issue 14: tf32x3 with each step's products summed on the CUDA cores (the tensor cores' f32
# accumulation truncates): the GPU tests again, then configs on fp32 shapes (x3_configs.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
timeout 200 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_hopper_gpu.py \
    -k "x3" > "$OUT/pytest_x3_run2.log" 2>&1
echo "pytest rc=$?"; grep -E "passed|failed|Error|error ratio" "$OUT/pytest_x3_run2.log" | head -20
timeout 380 python3 benchmarks/logs/2026-11-27/tf32x3/x3_configs.py 4096x4096x4096 \
    1024x1024x1024 64x4096x4096 16x4096x4096 128x4096x4096 65536x64x4096 64x14336x4096 \
    1024x1024x16384 > "$OUT/x3_configs.log" 2>&1
echo "configs rc=$?"; grep "^|" "$OUT/x3_configs.log" | cut -c1-250; tail -2 "$OUT/x3_configs.log" | cut -c1-300
