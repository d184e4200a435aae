"""``gemm``: the kernels' name before they moved under the project's namespace. It is
:mod:`layoutalg.gemm` itself, the same module objects: ``import gemm``, ``import gemm.torch``,
``from gemm.hopper import HopperConfig`` and ``python -m gemm`` keep working, and a class
reached either way is one class.

A finder on ``sys.meta_path`` answers every ``gemm.<name>`` import with the module
``layoutalg.gemm.<name>`` (imported if needed); ``gemm.__main__`` is left to the ordinary
finders, which find ``layoutalg/gemm/__main__.py`` through this package's path.
"""

import importlib
import importlib.abc
import importlib.util
import sys

_REAL = "layoutalg.gemm"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``gemm.x.y`` -> the module ``layoutalg.gemm.x.y``."""

    def find_spec(self, name, path=None, target=None):
        if not name.startswith("gemm.") or name.endswith(".__main__"):
            return None
        if importlib.util.find_spec(_REAL + name[4:]) is None:
            return None
        return importlib.util.spec_from_loader(name, self)

    def __init__(self):
        self._specs = {}                    # alias name -> the real module's own spec

    def create_module(self, spec):
        module = importlib.import_module(_REAL + spec.name[4:])
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module):
        # the import system has set the alias's spec on the module: give its own back
        module.__spec__ = self._specs.pop(module.__spec__.name)


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
sys.modules[__name__] = importlib.import_module(_REAL)
