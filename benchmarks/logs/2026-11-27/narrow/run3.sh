#!/usr/bin/env bash
# Issue 14: the shipped-table GPU test again (its shapes of at most 32 rows now go to the table
# with a column-major A: a row-major one takes the narrow swapped tiles), then the bf16 suite
# untuned, part 1 of 2.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
timeout 150 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py \
    -k "shipped or swap" > "$OUT/pytest_rules2.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/pytest_rules2.log"
timeout 380 python3 benchmarks/shapes.py --dtypes bf16 --part 1 2 --json "$OUT/suite_bf16_part1.json" \
    > "$OUT/suite_bf16_part1.log" 2>&1
echo "suite rc=$?"; tail -24 "$OUT/suite_bf16_part1.log" | cut -c1-200
