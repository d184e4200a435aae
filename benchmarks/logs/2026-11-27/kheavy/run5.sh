#!/usr/bin/env bash
# Issue 14: the table's entries at shapes whose rules the few-tile rule changed, untuned
# ("ours" is the table's config there, "rules" the new rule's), for shape_table.py --prune.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
timeout 300 python3 benchmarks/shapes.py --dtypes bf16 --shapes 128x4096x4096 128x4096x14336 \
    256x256x65536 1024x1024x4096 --json "$OUT/table_check.json" > "$OUT/table_check.log" 2>&1
echo "rc=$?"; grep "^|" "$OUT/table_check.log" | cut -c1-200
