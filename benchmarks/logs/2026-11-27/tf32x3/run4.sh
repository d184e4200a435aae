#!/usr/bin/env bash
# Issue 14: tf32x3 swapping A and B at any number of columns (x3_swaps): the suite's wide
# shapes again, then the Hopper and gemm GPU tests on the final tree.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
timeout 100 python3 benchmarks/logs/2026-11-27/tf32x3/precompile_x3.py > "$OUT/precompile_run4.log" 2>&1
echo "precompile rc=$?"; tail -1 "$OUT/precompile_run4.log"
timeout 200 python3 benchmarks/shapes.py --dtypes fp32 --precision tf32x3 --reps 5 --calls 3 \
    --shapes 16x128256x4096 64x128256x4096 1x128256x4096 16x4096x4096 64x14336x4096 \
    --json "$OUT/wide.json" > "$OUT/wide.log" 2>&1
echo "wide rc=$?"; grep "^|" "$OUT/wide.log" | cut -c1-200
timeout 280 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_hopper_gpu.py \
    tests/test_gemm_gpu.py > "$OUT/pytest_run4.log" 2>&1
echo "pytest rc=$?"; grep -E "passed|failed|Error|error ratio" "$OUT/pytest_run4.log" | head -20
