#!/usr/bin/env bash
# Issue 14, the final tree: precompile (the default's new tiles included), the GPU tests of
# gemm, the Hopper kernel and the small-M kernel (split-K's new reduction, the few-tile rule);
# with "suite", the bf16 suite untuned in two parts instead.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
if [ "$1" = suite ]; then
  for p in 0 1; do
    timeout 280 python3 benchmarks/shapes.py --dtypes bf16 --part $p 2 \
        --json "$OUT/final_suite_bf16_part$p.json" > "$OUT/final_suite_bf16_part$p.log" 2>&1
    echo "suite part $p rc=$?"; tail -1 "$OUT/final_suite_bf16_part$p.log"
  done
  exit
fi
(time timeout 200 python3 -m layoutalg.gemm precompile) > "$OUT/precompile.log" 2>&1
echo "precompile rc=$?"; tail -4 "$OUT/precompile.log"
timeout 330 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py \
    tests/test_skinny_gpu.py tests/test_hopper_gpu.py tests/test_shape_table.py \
    > "$OUT/pytest_final.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/pytest_final.log"
