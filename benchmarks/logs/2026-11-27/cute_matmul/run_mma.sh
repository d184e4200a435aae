#!/bin/bash
# gemm(tiled_mma, ...) with the SM80 mma.sync atoms (tf32, bf16, f16), ldmatrix copies into
# the MMA's fragments, and the cute matmul kernels after shared arrays became 16-byte aligned.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_cute_gpu.py > $OUT/pytest_cute_gpu.log 2>&1
tail -2 $OUT/pytest_cute_gpu.log
python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_gemm_gpu.py -k cute > $OUT/pytest_gemm_cute.log 2>&1
tail -2 $OUT/pytest_gemm_cute.log
