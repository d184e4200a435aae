"""gemm: numba-cuda matrix-multiply kernels driven by layoutalg (``import gemm``; a top-level
package of the layoutalg distribution, installed with its ``gemm`` extra:
``pip install 'layoutalg[gemm]'``).

The package is layered like CuTe: ``gemm.arch`` wraps single PTX instructions (cp.async,
ldmatrix, mma.sync, wgmma, TMA, mbarriers, conversions) as numba intrinsics, with pure-Python
twins for numba's CUDA simulator; ``gemm.cute`` is the algebra inside ``@cuda.jit`` kernels;
each kernel family is a package with its config, kernel and calls together
(``gemm.simt``, ``gemm.tensorcore`` for SM80, ``gemm.hopper`` for SM90), beside
``gemm.skinny`` (few rows) and ``gemm.collective``. Beneath the families lie the type rules
(``gemm.dtypes``) and the call path, ``gemm.call`` (operands read once, plans kept per
signature, compiled kernels kept as cubins and launched through the driver); on top sit
``gemm.matmul`` (``gemm.api``), ``gemm.scaled_matmul`` (FP8, ``gemm.scaled``) and tuning, ``gemm.tuning`` (autotuning, the shipped shape
table, kernels compiled ahead).

Importing ``gemm`` itself is light: numba is imported only by the submodules that need it.
"""

import importlib.util as _util

if _util.find_spec("numba") is None or _util.find_spec("numba_cuda") is None:
    raise ImportError("gemm (the kernels) needs numba-cuda, sympy and tqdm: "
                      "pip install 'layoutalg[gemm]'; the algebra alone is layoutalg")

__all__ = ["matmul", "scaled_matmul", "KERNELS", "SimtConfig", "float32_precision",
           "set_float32_precision"]


def __getattr__(name):
    # The API is imported on first use, so ``import gemm`` stays cheap. A name found is kept
    # in the module's namespace: later lookups (``gemm.matmul(...)`` on every call) find it
    # there without this function and its import.
    if name in ("matmul", "KERNELS", "float32_precision", "set_float32_precision"):
        from gemm import api
        value = getattr(api, name)
    elif name == "scaled_matmul":
        from gemm.scaled import scaled_matmul as value
    elif name == "SimtConfig":
        from gemm.simt import SimtConfig as value
    else:
        raise AttributeError(f"module 'gemm' has no attribute {name!r}")
    globals()[name] = value
    return value
