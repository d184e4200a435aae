#!/usr/bin/env bash
# Issue 16: the copies again, with copies to every peer at once and copies in CUDA graphs.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for d in 4 2; do
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((d - 1))) timeout 100 torchrun --nproc_per_node $d \
      benchmarks/p2p_copy.py --mb 8 32 --json "$OUT/p2p2_d$d.json" > "$OUT/p2p2_d$d.log" 2>&1
  echo "p2p D=$d rc=$?"; grep "^|" "$OUT/p2p2_d$d.log" | grep -v "sm p" | tail -40
done
