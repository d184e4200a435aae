#!/usr/bin/env bash
# Issue 14: the few-tile rule (rules_check.py; run 1 without its fallback, run 2 with it).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
timeout 300 python3 benchmarks/logs/2026-11-27/kheavy/rules_check.py > "$OUT/rules_check$1.log" 2>&1
echo "rc=$?"; grep "^|" "$OUT/rules_check$1.log" | cut -c1-200
