#!/usr/bin/env bash
# Issue 14: a row-major B under float32's default runs 3xTF32 on a column-major copy
# (gemm.transpose, a workspace of torch's allocator, a kept plan that copies each call) from
# gemm.api.X3_COPY_ROWS rows of A up. Timed in CUDA graphs beside ieee and cuBLAS, each
# result checked against float64 first; then the tf32x3 GPU tests (a copied case in a graph).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout 40 python3 benchmarks/logs/2026-11-27/tf32x3/precompile_x3.py > "$OUT/precompile_run4.log" 2>&1
timeout 110 python3 benchmarks/shapes.py --dtypes fp32 --reps 5 --calls 3 --b-rows --shapes \
    512x4096x4096 2048x4096x4096 4096x4096x4096 1024x1024x16384 \
    --json "$OUT/b_rows.json" > "$OUT/b_rows.log" 2>&1
echo "b_rows rc=$?"; grep -E "^\||geometric" "$OUT/b_rows.log" | cut -c1-200
timeout 150 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_hopper_gpu.py \
    -k tf32x3_through_matmul > "$OUT/pytest_copy.log" 2>&1
echo "pytest rc=$?"; grep -E "passed|failed|FAILED|Error" "$OUT/pytest_copy.log" | head -10
