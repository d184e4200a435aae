#!/usr/bin/env bash
# Issue 16, the final tree (one comm stream, the ring the default, "direct" a keyword): the
# collective tests on 4 GPUs, then the benchmark at D = 4.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 200 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q tests/test_collective.py \
    > "$OUT/run3_pytest_collective.log" 2>&1
echo "pytest rc=$?"; tail -2 "$OUT/run3_pytest_collective.log"
timeout 200 torchrun --nproc_per_node 4 benchmarks/collective.py --iters 30 \
    --json "$OUT/run3_collective_d4.json" > "$OUT/run3_collective_d4.log" 2>&1
echo "D=4 rc=$?"; grep -B1 -A8 "^D=" "$OUT/run3_collective_d4.log" | cut -c1-400
