"""Run the gemm.cute kernels of cute_kernels.py in numba's CUDA simulator; print one JSON
line. Used by tests/test_cute.py in a child process (the simulator is chosen before numba
is imported)."""

import json
import os
import sys

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run me in the simulator"
sys.path.insert(0, os.path.dirname(__file__))

import cute_kernels  # noqa: E402

if __name__ == "__main__" and sys.argv[2:] == ["sm80"]:
    seed = int(sys.argv[1])     # the SM80 tensor-core GEMM on small tiles: partial M, N, K
    print(json.dumps({"bf16": cute_kernels.run_sm80_gemm(seed, 37, 20, 40, "bf16",
                                                        tile=(32, 32, 32))}))
elif __name__ == "__main__" and sys.argv[2:] == ["tensor cores"]:
    seed = int(sys.argv[1])     # mma.sync fragments from global, and ldmatrix from shared
    print(json.dumps({"mma tile": {kind: cute_kernels.run_mma_tile(seed, kind)
                                   for kind in cute_kernels.MMAS},
                      "ldmatrix tile": cute_kernels.run_ldmatrix_tile(seed, "bf16")}))
elif __name__ == "__main__":
    seed = int(sys.argv[1])
    err, odd_ok = cute_kernels.run_transpose(seed)
    print(json.dumps({"transpose": err, "odd offsets": odd_ok,
                      "small gemm": cute_kernels.run_small_gemm(seed),
                      "tiled copy": cute_kernels.run_tiled_copy(seed),
                      "moye prefetch": cute_kernels.run_moye_prefetch(
                          seed, 64, 32, 16, tile=(32, 16, 8), copy_threads=(8, 4),
                          mma_threads=(8, 4)),
                      "moye prefetch cp.async": cute_kernels.run_moye_prefetch(
                          seed, 32, 32, 24, tile=(32, 16, 8), copy_threads=(8, 4),
                          mma_threads=(8, 4), cp_async=True),
                      "moye double buffer": cute_kernels.run_moye_double_buffer(
                          seed, 32, 32, 24, tile=(32, 16, 8), copy_threads=(8, 4),
                          mma_threads=(8, 4)),
                      "any shape copy": cute_kernels.run_any_shape_copy(seed)}))
