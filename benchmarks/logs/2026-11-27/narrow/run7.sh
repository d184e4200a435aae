#!/usr/bin/env bash
# Issue 14: the swap GPU tests again (K of 704, not 700: TMA needs 16-byte rows for bf16).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
timeout 150 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py \
    -k "shipped or swap" > "$OUT/pytest_two2.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/pytest_two2.log"
