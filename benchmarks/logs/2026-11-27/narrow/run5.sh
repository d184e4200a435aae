#!/usr/bin/env bash
# Issue 14: swapped calls of 33 to 64 rows on tiles of ceil8(rows) columns (narrow2.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
timeout 400 python3 benchmarks/logs/2026-11-27/narrow/narrow2.py > "$OUT/narrow2.log" 2>&1
echo "narrow2 rc=$?"; tail -10 "$OUT/narrow2.log"
