#!/usr/bin/env bash
# Issue 16: the direct schedule (each rank pushes its own shard to every peer in turn) beside
# the ring: the collective tests on 4 GPUs (both paths, both schedules), then the benchmark
# at D = 4 (the auto path takes the direct schedule on NVSwitch; the ring is a column).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
timeout 230 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q tests/test_collective.py \
    > "$OUT/pytest_collective.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/pytest_collective.log"
for d in 4; do
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((d - 1))) timeout 300 torchrun --nproc_per_node $d \
      benchmarks/collective.py --iters 30 --json "$OUT/collective_d$d.json" > "$OUT/collective_d$d.log" 2>&1
  echo "D=$d rc=$?"; grep -B1 -A8 "^D=" "$OUT/collective_d$d.log" | cut -c1-400
done
