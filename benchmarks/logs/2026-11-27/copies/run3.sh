#!/usr/bin/env bash
# Ran on a working tree of this session: the ring options it names (peer.COPY_STREAMS, peer.WAITS,
# collective.py --copy-streams / --variants) were removed after these runs; see RESULTS.md.
# Issue 16: flag hops by stream operations and by kernels (benchmarks/p2p_copy.py), then the
# collective with the ring's flags by stream operations or kernels, at D = 2 and 4.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
CUDA_VISIBLE_DEVICES=0,1 timeout 100 torchrun --nproc_per_node 2 benchmarks/p2p_copy.py \
    --mb 8 --json "$OUT/p2p3_d2.json" > "$OUT/p2p3_d2.log" 2>&1
echo "p2p rc=$?"; grep "^|" "$OUT/p2p3_d2.log" | grep -v "sm p" | tail -24
for d in 2 4; do
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((d - 1))) timeout 200 torchrun --nproc_per_node $d \
      benchmarks/collective.py --iters 30 --dtypes bfloat16 --variants 1:stream,1:kernel,2:kernel \
      --json "$OUT/collective3_d$d.json" > "$OUT/collective3_d$d.log" 2>&1
  echo "D=$d rc=$?"; grep -A8 "^D=" "$OUT/collective3_d$d.log" | cut -c1-250
done
timeout 150 python3 -m pytest -o addopts="" -p no:randomly -q -rfE tests/test_collective.py \
    > "$OUT/pytest_collective3.log" 2>&1; echo "pytest rc=$?"; tail -3 "$OUT/pytest_collective3.log"
