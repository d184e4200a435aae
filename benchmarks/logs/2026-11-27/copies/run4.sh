#!/usr/bin/env bash
# Ran before the warm-up fix (3 calls; the second scratch set captured its graph in the timed calls).
# Issue 16: the ring with two scratch sets and no acknowledgement: the collective tests, the
# benchmark at D = 2 and 4 (with the ring's copies alone), and the copies timed alone.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 150 python3 -m pytest -o addopts="" -p no:randomly -q -rfE tests/test_collective.py \
    > "$OUT/pytest_collective4.log" 2>&1; echo "pytest rc=$?"; tail -3 "$OUT/pytest_collective4.log"
for d in 2 4; do
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((d - 1))) timeout 170 torchrun --nproc_per_node $d \
      benchmarks/collective.py --iters 30 --json "$OUT/collective4_d$d.json" > "$OUT/collective4_d$d.log" 2>&1
  echo "D=$d rc=$?"; grep -A8 "^D=" "$OUT/collective4_d$d.log" | cut -c1-300
done
CUDA_VISIBLE_DEVICES=0,1 timeout 100 torchrun --nproc_per_node 2 benchmarks/p2p_copy.py \
    --mb 8 32 --json "$OUT/p2p4_d2.json" > "$OUT/p2p4_d2.log" 2>&1
echo "p2p rc=$?"; grep "^|" "$OUT/p2p4_d2.log" | tail -50
