#!/usr/bin/env bash
# Issue 14: split-K's reduction with four columns per thread and two K ranges per turn.
# Part 0: the split-K GPU tests, the K-heavy profile again, then the bf16 suite's part 0 of 2;
# part 1: the suite's part 1.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
if [ "$1" = 0 ]; then
  timeout 200 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py \
      tests/test_skinny_gpu.py tests/test_hopper_gpu.py -k "split" > "$OUT/pytest_split.log" 2>&1
  echo "pytest rc=$?"; tail -3 "$OUT/pytest_split.log"
  timeout 200 python3 benchmarks/logs/2026-11-27/kheavy/profile.py > "$OUT/profile2.log" 2>&1
  echo "profile rc=$?"; grep "^|" "$OUT/profile2.log" | cut -c1-330
fi
timeout 380 python3 benchmarks/shapes.py --dtypes bf16 --part "$1" 2 --json "$OUT/suite_bf16_part$1.json" \
    > "$OUT/suite_bf16_part$1.log" 2>&1
echo "suite rc=$?"; tail -2 "$OUT/suite_bf16_part$1.log"
