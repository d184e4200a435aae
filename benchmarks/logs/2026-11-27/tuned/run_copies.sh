#!/usr/bin/env bash
# The tuner timing three copies of small operands in turn: its GPU test, then the tuned
# suite's part 0 (the decode shapes, where one set stayed in L2) again.
set -u
timeout 200 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py \
    -k "tune_times_copies" > "$OUT/pytest_tune_copies.log" 2>&1
echo "pytest rc=$?" | tee -a "$OUT/pytest_tune_copies.log"; tail -3 "$OUT/pytest_tune_copies.log"
GEMM_AUTOTUNE_CACHE="$OUT/autotune_copies_part0.json" timeout 360 python3 benchmarks/shapes.py \
    --dtypes bf16 --tune --part 0 4 --json "$OUT/tuned_copies_part0.json" > "$OUT/tuned_copies_part0.log" 2>&1
echo "rc=$?"; tail -4 "$OUT/tuned_copies_part0.log"
