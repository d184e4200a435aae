#!/usr/bin/env bash
# Ran on a working tree of this session: the ring options it names (peer.COPY_STREAMS, peer.WAITS,
# collective.py --copy-streams / --variants) were removed after these runs; see RESULTS.md.
# Issue 16: the ring's copies timed alone (benchmarks/p2p_copy.py), then the collective with
# each shard copied in 1, 2 or 4 pieces on as many streams, and its copies alone, at D = 2, 4.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpus.txt"
cat "$OUT/gpus.txt"
for d in 2 4; do
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((d - 1))) timeout 100 torchrun --nproc_per_node $d \
      benchmarks/p2p_copy.py --mb 8 32 --json "$OUT/p2p_d$d.json" > "$OUT/p2p_d$d.log" 2>&1
  echo "p2p D=$d rc=$?"; grep "^|" "$OUT/p2p_d$d.log" | tail -40
done
for d in 2 4; do
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((d - 1))) timeout 170 torchrun --nproc_per_node $d \
      benchmarks/collective.py --iters 30 --dtypes bfloat16 --copy-streams 1,2,4 \
      --json "$OUT/collective_d$d.json" > "$OUT/collective_d$d.log" 2>&1
  echo "D=$d rc=$?"; grep -A8 "^D=" "$OUT/collective_d$d.log" | cut -c1-250
done
timeout 150 python3 -m pytest -o addopts="" -p no:randomly -q -rfE tests/test_collective.py \
    > "$OUT/pytest_collective.log" 2>&1; echo "pytest rc=$?"; tail -3 "$OUT/pytest_collective.log"
