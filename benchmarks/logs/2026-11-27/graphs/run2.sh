#!/usr/bin/env bash
# After gemm.tensor_maps (maps in never-freed slots, written by the capture's copy nodes
# inside a CUDA graph capture): graph_check.py's cases again, and the GPU tests of CUDA
# graphs, repeated calls, split-K, few rows and the torch operator (torch.compile).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
D=benchmarks/logs/2026-11-27/graphs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
for c in "given bfloat16" "new_out bfloat16" "new_input bfloat16" "new_out float32" "compile bfloat16"; do
  timeout 100 python3 $D/graph_check.py $c 2>&1 | grep -E "ok|FAILED" | tail -1 | tee -a "$OUT/graph_check_run2.log"
done
timeout 300 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py \
    tests/test_torch_op.py -k "graph or repeated or split_k or swap or compile or torch" \
    > "$OUT/pytest_graphs.log" 2>&1
echo "pytest rc=$?"; grep -E "passed|failed|FAILED|Error" "$OUT/pytest_graphs.log" | head -10
