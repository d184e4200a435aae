#!/bin/bash
# The collective's per-step matmul at the seed's shape (1024 x 1024 x 4096) and its
# neighbours: untuned rules, the tuner's pick, cuBLAS and Triton in one run.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
export GEMM_AUTOTUNE_CACHE=$OUT/autotune_cache.json
python3 benchmarks/shapes.py --dtypes bf16 --tune --shapes 1024x1024x4096 1024x1024x2048 2048x1024x4096 1024x2048x4096 --json $OUT/seed_shape.json > $OUT/seed_shape.log 2>&1
tail -25 $OUT/seed_shape.log
