#!/usr/bin/env bash
# Issue 14: the K-heavy shapes' time split between the matmul kernel and split-K's reduction.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout 400 python3 benchmarks/logs/2026-11-27/kheavy/profile.py > "$OUT/profile.log" 2>&1
echo "rc=$?"; grep "^|" "$OUT/profile.log" | cut -c1-330
