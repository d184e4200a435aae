#!/usr/bin/env bash
# Issue 14, before making tf32x3 float32's default: its accuracy across the exponent range
# (range.py), the tf32x3 and fast-path GPU tests after 606c9e5's api refactor, the tf32x3
# precompile list compiled, and the skinny row timed in both orders.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
set -u
D=benchmarks/logs/2026-11-27/x3_default
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout 120 python3 -c "
from layoutalg.gemm import precompile as p, autotune
import time; t = time.time(); v = p.hopper_x3_variants()
failed = autotune._compile_all([('hopper', x) for x in v], 16, False, compile_fn=p._compile)
print(len(v), 'variants,', len(failed), 'failed,', round(time.time() - t), 's')" > "$OUT/precompile_x3.log" 2>&1
echo "precompile rc=$?"; tail -2 "$OUT/precompile_x3.log"
timeout 100 python3 $D/range.py > "$OUT/range.log" 2>&1
echo "range rc=$?"; cat "$OUT/range.log" | tail -16
timeout 180 python3 -m pytest -o addopts="" -p no:randomly -n 0 -q -rfE tests/test_hopper_gpu.py \
    tests/test_gemm_gpu.py tests/test_tensorcore_gpu.py -k "x3 or plan or fast or torch" \
    > "$OUT/pytest_refactor.log" 2>&1
echo "pytest rc=$?"; grep -E "passed|failed|Error" "$OUT/pytest_refactor.log" | head -10
for order in "" "--ours-last"; do
  timeout 60 python3 benchmarks/shapes.py --dtypes fp32 --precision tf32x3 --reps 5 --calls 3 \
    --shapes 1x128256x4096 16x4096x4096 $order > "$OUT/skinny$order.log" 2>&1
  echo "skinny $order rc=$?"; grep "^|" "$OUT/skinny$order.log" | cut -c1-160
done
