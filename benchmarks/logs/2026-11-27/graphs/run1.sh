#!/usr/bin/env bash
# gemm.matmul in CUDA graphs whose capture meets new addresses (graph_check.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
D=benchmarks/logs/2026-11-27/graphs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
for c in "given bfloat16" "new_out bfloat16" "new_input bfloat16" "new_out float32" "compile bfloat16"; do
  timeout 120 python3 $D/graph_check.py $c 2>&1 | grep -E "ok|FAILED" | tail -1 | tee -a "$OUT/graph_check.log"
done
