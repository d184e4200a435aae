#!/usr/bin/env bash
# Second GPU call: the sanitizers on the TMA-epilogue cases, then part $1 of 2 of the bf16 suite.
set -u
if [ "$1" = 0 ]; then
  timeout 200 python3 benchmarks/sanitize_hopper.py --cases 10 11 > "$OUT/sanitize_tma.log" 2>&1
  echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|wrong|rc=" "$OUT/sanitize_tma.log" | head
fi
timeout 380 python3 benchmarks/shapes.py --dtypes bf16 --part "$1" 2 --json "$OUT/suite_bf16_part$1.json" \
    > "$OUT/suite_bf16_part$1.log" 2>&1
echo "suite rc=$?"; tail -12 "$OUT/suite_bf16_part$1.log"
