#!/usr/bin/env bash
# Issue 16, run 2: each copy on one of two comm streams in turn, waiting for the copy before
# (an event) but not for its flag write; both schedules; D = 4 and 2.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 230 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q tests/test_collective.py \
    > "$OUT/run2_pytest_collective.log" 2>&1
echo "pytest rc=$?"; tail -3 "$OUT/run2_pytest_collective.log"
for d in 4 2; do
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((d - 1))) timeout 300 torchrun --nproc_per_node $d \
      benchmarks/collective.py --iters 30 --json "$OUT/run2_collective_d$d.json" > "$OUT/run2_collective_d$d.log" 2>&1
  echo "D=$d rc=$?"; grep -B1 -A8 "^D=" "$OUT/run2_collective_d$d.log" | cut -c1-400
done
