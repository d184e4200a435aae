"""Kernel source generation: offsets as uint32 code, a line emitter, a module cache.

The kernel builders of this package describe a kernel with layoutalg's tensors and
partitions whose engines are sympy expressions of the thread and block indices (``t``,
``bx``, ...) and of run-time strides. :func:`code` prints such an expression as numba source
in which every integer is ``U(n)`` (``np.uint32``): numba then emits 32-bit unsigned
arithmetic, with shifts and masks for powers of two, instead of 64-bit signed division with
negative-index fix-ups.

Generated modules are written to a cache folder under a name that hashes their source and
imported from there, so numba's on-disk cache (``cache=True``) keeps their compiled code
across processes.
"""

import hashlib
import importlib.util
import os
import sys
from contextlib import contextmanager

import sympy

__all__ = ["code", "Source", "load_module", "cache_dir", "sym"]


def sym(name):
    """A non-negative integer symbol: thread/block indices, loop counters, strides, extents."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def code(expr):
    """numba source for a non-negative integer sympy expression, in uint32 arithmetic.

    >>> t = sym("t")
    >>> code(4 * (t % 32) + 128 * (t // 32))
    '(U(4)*(t % U(32)) + U(128)*(t // U(32)))'
    """
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        if expr < 0:
            raise ValueError(f"negative constant {expr} in an unsigned offset")
        return f"U({int(expr)})"
    if expr.is_Symbol:
        return expr.name
    if expr.is_Add:
        terms = sorted(expr.args, key=sympy.default_sort_key)
        return "(" + " + ".join(code(a) for a in terms) + ")"
    if expr.is_Mul:
        if any(a.is_Integer and a < 0 for a in expr.args):
            raise ValueError(f"negative coefficient in the unsigned offset {expr}")
        return "*".join(code(a) for a in expr.args)
    if isinstance(expr, sympy.floor):
        num, den = expr.args[0].as_numer_denom()
        if not den.is_Integer:
            raise ValueError(f"cannot print {expr}: non-constant divisor")
        return f"({code(num)} // U({int(den)}))"
    if isinstance(expr, sympy.Mod):
        return f"({code(expr.args[0])} % {code(expr.args[1])})"
    raise ValueError(f"cannot print {expr!r} ({type(expr).__name__}) as unsigned index code")


class Source:
    """Lines of Python source with indentation."""

    def __init__(self):
        self.lines = []
        self.depth = 0

    def __call__(self, *lines):
        for line in lines:
            self.lines.append("    " * self.depth + line)

    @contextmanager
    def block(self, header):
        self(header)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def text(self):
        return "\n".join(self.lines) + "\n"


def cache_dir():
    """Where generated kernel modules live: ``$LAYOUTALG_CACHE`` or ``~/.cache/layoutalg``."""
    root = os.environ.get("LAYOUTALG_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "layoutalg")
    path = os.path.join(root, "kernels")
    os.makedirs(path, exist_ok=True)
    return path


def load_module(source, prefix="kernel"):
    """Import ``source`` as a module from a file named by its hash (written once), so that
    numba's ``cache=True`` finds the compiled kernel again in the next process."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    name = f"_layoutalg_{prefix}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(cache_dir(), name + ".py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
