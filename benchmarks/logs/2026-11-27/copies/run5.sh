#!/usr/bin/env bash
# Issue 16: the benchmark again with 6 warm-up calls (run4's 3 left the capture of the second
# scratch set's graph inside the timed calls).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in 2 4; do
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((d - 1))) timeout 200 torchrun --nproc_per_node $d \
      benchmarks/collective.py --iters 30 --json "$OUT/collective5_d$d.json" > "$OUT/collective5_d$d.log" 2>&1
  echo "D=$d rc=$?"; grep -A8 "^D=" "$OUT/collective5_d$d.log" | cut -c1-300
done
