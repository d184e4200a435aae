#!/usr/bin/env bash
# The GPU session of 2026-11-27 (issue 12's TMA epilogue): the Hopper GPU tests, then
# timing of the epilogues beside cuBLAS and Triton. Run from the project root; logs to $OUT.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 330 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_hopper_gpu.py \
    > "$OUT/pytest_hopper_gpu.log" 2>&1; echo "pytest rc=$?" >> "$OUT/pytest_hopper_gpu.log"
tail -5 "$OUT/pytest_hopper_gpu.log"
timeout 250 python3 benchmarks/hopper_check.py --no-correctness --sizes 4096 8192 \
    --sections bf16 bf16_out f16 --configs 64x256:3:2:d0 64x256:3:2:d0:t 128x128:4:2:p \
    128x128:4:2:p:t --json "$OUT/timing.json" > "$OUT/timing.log" 2>&1
echo "timing rc=$?"; tail -30 "$OUT/timing.log"
