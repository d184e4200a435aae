#!/usr/bin/env bash
# The bf16 suite tuned with the TMA epilogue, part $1 of 4 (issue 14).
set -u
GEMM_AUTOTUNE_CACHE="$OUT/autotune_part$1.json" timeout 560 python3 benchmarks/shapes.py \
    --dtypes bf16 --tune --part "$1" 4 --json "$OUT/tuned_part$1.json" > "$OUT/tuned_part$1.log" 2>&1
echo "rc=$?"; tail -4 "$OUT/tuned_part$1.log"
