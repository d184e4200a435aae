#!/usr/bin/env bash
# Issue 14: the K-heavy shapes on other tiles and splits (tiles.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
timeout 500 python3 benchmarks/logs/2026-11-27/kheavy/tiles.py > "$OUT/tiles.log" 2>&1
echo "rc=$?"; grep "^|" "$OUT/tiles.log" | cut -c1-200
