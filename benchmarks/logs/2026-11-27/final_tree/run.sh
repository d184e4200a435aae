#!/usr/bin/env bash
# The session's final tree on one GPU: the collective tests (the peer ring by 3 processes
# sharing the GPU, with the call-order event and 4 calls on two streams), the Hopper GPU tests
# (narrow tiles allowed in HopperConfig), and the swapped-rules / shipped-table tests.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
timeout 200 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_collective.py \
    tests/test_gemm_gpu.py -k "collective or ring or swap or shipped or plan or slot or set" \
    > "$OUT/pytest_collective_rules.log" 2>&1
echo "pytest 1 rc=$?"; tail -3 "$OUT/pytest_collective_rules.log"
timeout 250 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_hopper_gpu.py \
    > "$OUT/pytest_hopper_gpu.log" 2>&1
echo "pytest 2 rc=$?"; tail -3 "$OUT/pytest_hopper_gpu.log"
