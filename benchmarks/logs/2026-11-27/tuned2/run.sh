#!/usr/bin/env bash
# Issue 14: the bf16 suite tuned, after split-K's new reduction and the few-tile rule (the
# tuner's split space has the rule's tiles), parts given as arguments (of 4). Run 1 (files
# run1_*) as it ran; run 2 after shapes.py timed the rules and cuBLAS again beside the tuned
# config: $RUN names the files.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
for p in "$@"; do
  start=$(date +%s)
  GEMM_AUTOTUNE_CACHE="$OUT/${RUN}_autotune_part$p.json" timeout 560 python3 benchmarks/shapes.py \
      --dtypes bf16 --tune --part "$p" 4 --json "$OUT/${RUN}_tuned_part$p.json" > "$OUT/${RUN}_tuned_part$p.log" 2>&1
  echo "part $p rc=$? $(( $(date +%s) - start )) s"; tail -3 "$OUT/${RUN}_tuned_part$p.log"
done
