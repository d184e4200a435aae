#!/usr/bin/env bash
# Issue 16 after the shipped table got the per-step shape (1024 x 1024 x 4096): the collective
# tests, then the benchmark at D = 2 (GPUs 0-1) and D = 4.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpus.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
timeout 200 python3 -m pytest -o addopts="" -p no:randomly -q -rfE tests/test_collective.py \
    > "$OUT/pytest_collective.log" 2>&1; echo "pytest rc=$?" | tee -a "$OUT/pytest_collective.log"
tail -3 "$OUT/pytest_collective.log"
for d in 2 4; do
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((d - 1))) timeout 170 torchrun --nproc_per_node $d \
      benchmarks/collective.py --iters 30 --json "$OUT/collective_d$d.json" > "$OUT/collective_d$d.log" 2>&1
  echo "D=$d rc=$?"; grep "^|" "$OUT/collective_d$d.log" | tail -8
done
