#!/usr/bin/env bash
# Issue 14: tiles narrower than 64 columns for swapped decode steps: the GPU tests that name
# them, then their timings beside the rules' tiles and cuBLAS (narrow.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 240 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE \
    tests/test_gemm_gpu.py -k "swap or shipped" tests/test_hopper_gpu.py > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/pytest.log"
timeout 330 python3 benchmarks/logs/2026-11-27/narrow/narrow.py > "$OUT/narrow.log" 2>&1
echo "narrow rc=$?"; tail -12 "$OUT/narrow.log"
