#!/usr/bin/env bash
# Issue 14: swapped tiles with two consumers where that fits one wave: the swap GPU tests (two
# new shapes take them), then the shapes it changes, timed as the suite.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
timeout 150 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py \
    -k "shipped or swap" > "$OUT/pytest_two.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/pytest_two.log"
timeout 300 python3 benchmarks/shapes.py --dtypes bf16 --json "$OUT/two_consumers.json" --shapes \
    8x11008x4096 32x11008x4096 48x11008x4096 64x11008x4096 1x14336x4096 16x14336x4096 \
    64x14336x4096 20x12288x4096 16x16384x4096 > "$OUT/two_consumers.log" 2>&1
echo "shapes rc=$?"; tail -13 "$OUT/two_consumers.log" | cut -c1-220
