"""The call path beneath ``gemm.matmul`` and the kernel families' calls.

A call's arrays are read once into operands (``gemm.call.operands``: address, shape, strides,
dtype); the launches the first call of a signature made are kept as a plan under that
signature, so a repeat call reads only its addresses and launches (``gemm.call.plan``);
compiled kernels are kept as cubin files and loaded with the CUDA driver
(``gemm.call.binary``), and launched through the driver with a parameter block made once
(``gemm.call.launch``).

Nothing is imported here, so ``import gemm.call`` stays light.
"""
