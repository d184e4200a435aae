#!/usr/bin/env bash
# Issue 14: float32's default is now tf32x3 where the Hopper kernel runs it. The GPU tests of
# matmul (float32 calls that name no precision among them), the Hopper, skinny and
# torch-operator tests.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout 570 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE --durations=8 \
    tests/test_gemm_gpu.py tests/test_hopper_gpu.py tests/test_torch_op.py tests/test_skinny_gpu.py \
    > "$OUT/pytest_default.log" 2>&1
echo "pytest rc=$?"; grep -E "passed|failed|FAILED|Error" "$OUT/pytest_default.log" | head -20
