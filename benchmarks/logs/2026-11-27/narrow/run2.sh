#!/usr/bin/env bash
# Issue 14: the rules with narrow swapped tiles (up to 32 rows of a row-major A): the GPU tests
# of the swapped rules, the shipped table and the tuner, compute-sanitizer on the narrow
# cases (7: unsplit, 11: split-K), then the bf16 suite untuned, part $1 of 2.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
if [ "$1" = 0 ]; then
  timeout 150 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py \
      -k "swap or shipped or tune" > "$OUT/pytest_rules.log" 2>&1
  echo "pytest rc=$?"; tail -3 "$OUT/pytest_rules.log"
  timeout 150 python3 benchmarks/sanitize_hopper.py --cases 7 11 > "$OUT/sanitize_narrow.log" 2>&1
  echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|BAD|rc=" "$OUT/sanitize_narrow.log" | head
fi
timeout 380 python3 benchmarks/shapes.py --dtypes bf16 --part "$1" 2 --json "$OUT/suite_bf16_part$1.json" \
    > "$OUT/suite_bf16_part$1.log" 2>&1
echo "suite rc=$?"; tail -24 "$OUT/suite_bf16_part$1.log" | cut -c1-200
