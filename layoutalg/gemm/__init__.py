"""Deprecated: the kernels are the top-level package :mod:`gemm` (``import gemm``).

``layoutalg.gemm`` re-exports gemm's public names for a while, with a DeprecationWarning on
import. It is a plain module: ``layoutalg.gemm.matmul`` is ``gemm.matmul``, and
``layoutalg.gemm.hopper`` (or ``from layoutalg.gemm import hopper``) is the module
``gemm.hopper``, imported on first use as gemm itself imports its API (so that importing this
shim loads no numba, as ``import gemm`` loads none); ``import layoutalg.gemm.hopper`` is not
answered: import ``gemm.hopper``. Nothing in the project imports this module.
"""

import importlib as _importlib
import importlib.util as _util
import pkgutil as _pkgutil
import warnings as _warnings

_warnings.warn("layoutalg.gemm is now the top-level package gemm: import gemm",
               DeprecationWarning, stacklevel=2)

import gemm as _gemm    # noqa: E402  (after the warning: without numba-cuda it raises)

__all__ = list(_gemm.__all__)


def __getattr__(name):
    # gemm's names (its API, imported on first use) and its submodules, as gemm's own.
    if not name.startswith("__"):
        try:
            return getattr(_gemm, name)
        except AttributeError:
            if _util.find_spec(f"gemm.{name}") is not None:
                return _importlib.import_module(f"gemm.{name}")
    raise AttributeError(f"module 'layoutalg.gemm' has no attribute {name!r}; "
                         f"layoutalg.gemm is now the top-level package gemm: import gemm")


def __dir__():
    return sorted(set(__all__) | {m.name for m in _pkgutil.iter_modules(_gemm.__path__)
                                  if not m.name.startswith("_")})
