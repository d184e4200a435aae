#!/usr/bin/env bash
# Third GPU call: the bf16 suite (part $1 of 2) after the table's prune (two SM80 entries the
# Hopper rules with the TMA epilogue beat), and the shipped-table GPU tests on part 0.
set -u
if [ "$1" = 0 ]; then
  timeout 150 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py \
      -k "shipped or swap or split" > "$OUT/pytest_gemm_gpu.log" 2>&1
  echo "pytest rc=$?" | tee -a "$OUT/pytest_gemm_gpu.log"; tail -2 "$OUT/pytest_gemm_gpu.log"
fi
timeout 380 python3 benchmarks/shapes.py --dtypes bf16 --part "$1" 2 --json "$OUT/suite_pruned_part$1.json" \
    > "$OUT/suite_pruned_part$1.log" 2>&1
echo "suite rc=$?"; tail -3 "$OUT/suite_pruned_part$1.log"
