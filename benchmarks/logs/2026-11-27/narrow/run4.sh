#!/usr/bin/env bash
# Issue 14: the shipped-table GPU test again (a one-row A has no table route), then the narrow
# swapped rules on the held-out shapes of at most 32 rows (benchmarks/shapes.py HELD_OUT).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
timeout 150 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py \
    -k "shipped or swap" > "$OUT/pytest_rules3.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/pytest_rules3.log"
timeout 300 python3 benchmarks/shapes.py --dtypes bf16 --json "$OUT/held_out_narrow.json" --shapes \
    8x11008x4096 8x4096x11008 8x8192x8192 32x11008x4096 32x4096x11008 32x8192x8192 24x4096x4096 \
    8x14336x4096 24x14336x5120 12x4096x4096 2x14336x4096 20x12288x4096 10x4096x5000 \
    1x12288x4096 16x16384x4096 > "$OUT/held_out_narrow.log" 2>&1
echo "held-out rc=$?"; tail -20 "$OUT/held_out_narrow.log" | cut -c1-220
