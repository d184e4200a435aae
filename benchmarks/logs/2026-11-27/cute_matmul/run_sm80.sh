#!/bin/bash
# An SM80 tensor-core GEMM written with gemm.cute beside the generated SM80 kernel and cuBLAS.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_cute_gpu.py -k sm80 > $OUT/pytest_sm80.log 2>&1
tail -2 $OUT/pytest_sm80.log
python3 benchmarks/cute_tensorcore.py --sizes 1024 2048 4096 8192 > $OUT/cute_tensorcore.log 2>&1
tail -9 $OUT/cute_tensorcore.log
