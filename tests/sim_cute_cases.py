"""Run the gemm.cute kernels of cute_kernels.py in numba's CUDA simulator; print one JSON
line. Used by tests/test_cute.py in a child process (the simulator is chosen before numba
is imported)."""

import json
import os
import sys

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run me in the simulator"
sys.path.insert(0, os.path.dirname(__file__))

import cute_kernels  # noqa: E402

if __name__ == "__main__":
    seed = int(sys.argv[1])
    err, odd_ok = cute_kernels.run_transpose(seed)
    print(json.dumps({"transpose": err, "odd offsets": odd_ok,
                      "small gemm": cute_kernels.run_small_gemm(seed),
                      "tiled copy": cute_kernels.run_tiled_copy(seed)}))
