#!/bin/bash
# gemm.matmul's cute kernels: GPU tests, sanitizer, and the side-by-side benchmark.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
export LAYOUTALG_CACHE=/tmp/lacache
( time python3 -m pytest -o addopts="" -p no:randomly -n 0 -q tests/test_gemm_gpu.py -k "cute or sanitizer" tests/test_cute_gpu.py ) > $OUT/pytest_cute_matmul.log 2>&1
tail -5 $OUT/pytest_cute_matmul.log
python3 benchmarks/cute_moye.py --sizes 1024 2048 4096 4095 > $OUT/cute_moye.log 2>&1
tail -16 $OUT/cute_moye.log
