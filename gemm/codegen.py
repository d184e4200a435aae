"""Kernel source generation, for the one kernel still written as text (:mod:`gemm.skinny`,
issue 34): a line emitter, and the cache of generated modules and compiled kernels' names.

:class:`Source` writes each ``U(n)`` (``np.uint32``) constant as a module-level constant
``_un`` (numba freezes globals: one IR statement instead of a call to type and lower).
A kernel variant's generated module is written to a cache folder and imported from there,
under a name that hashes the variant and the package's code (:func:`kernel_module`), so a
later process finds it without generating the source again; :func:`module_name` also names
every kernel family's compiled cubin (gemm.call.binary).
"""

import hashlib
import importlib.util
import os
import re
import sys
from contextlib import contextmanager
from functools import lru_cache

import layoutalg

__all__ = ["Source", "kernel_module", "module_name", "generator_version", "cache_dir",
           "align_arg"]


def align_arg(nbytes, simulator):
    """A shared array's alignment argument for generated code: ``", alignment=N"``, or none
    for numba's simulator, which refuses it."""
    return "" if simulator else f", alignment={nbytes}"


# ``U(n)`` in generated code: written as a module-level uint32 constant ``_un`` (numba freezes
# globals, so a constant is one IR statement instead of a call of np.uint32 to type and lower)
_CONSTANT = re.compile(r"\bU\((\d+)\)")
_CONSTANT_NAME = re.compile(r"\b_u(\d+)\b")


class Source:
    """Lines of Python source with indentation; ``U(n)`` constants become module-level
    names written before the first function."""

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
        lines = [_CONSTANT.sub(lambda m: f"_u{m.group(1)}", line) for line in self.lines]
        used = sorted({int(n) for line in lines for n in _CONSTANT_NAME.findall(line)})
        defs = {f"U({n})": f"_u{n}" for n in used}
        if defs:
            at = next((i for i, line in enumerate(lines) if line.startswith(("def ", "@"))),
                      len(lines))
            lines = (lines[:at] + [f"{name} = {expr}" for expr, name in defs.items()]
                     + ["", ""] + lines[at:])
        return "\n".join(lines) + "\n"


def cache_dir():
    """Where generated kernel modules live: ``$LAYOUTALG_CACHE`` or ``~/.cache/layoutalg``."""
    root = os.environ.get("LAYOUTALG_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "layoutalg")
    path = os.path.join(root, "kernels")
    os.makedirs(path, exist_ok=True)
    return path


def kernel_module(prefix, key, make_source):
    """The generated module of a kernel variant, found by ``key`` (a value whose repr names
    everything its source depends on) and :func:`generator_version`: the first process writes
    ``make_source()`` to a file named by their hash, later ones import that file without
    generating the source again (and gemm.call.binary names the compiled kernel's file after it).
    A change to the package's code changes the version, hence the file."""
    return _import(module_name(prefix, key), make_source)


def module_name(prefix, key):
    """The name of the generated module of a kernel variant (see :func:`kernel_module`); its
    compiled kernel's file (gemm.call.binary) is named after it."""
    text = f"{key!r} {generator_version()}"
    return f"_layoutalg_{prefix}_{hashlib.sha256(text.encode()).hexdigest()[:20]}"


def _package_dirs():
    """The folders of the two packages generated kernels depend on: gemm (this package) and
    layoutalg (the algebra their layouts come from)."""
    return [os.path.dirname(os.path.abspath(__file__)),
            os.path.dirname(os.path.abspath(layoutalg.__file__))]


def source_files():
    """The Python files of the gemm and layoutalg packages (what generated kernels depend
    on), in a fixed order: gemm's, then layoutalg's."""
    found = []
    for package in _package_dirs():
        for folder, dirs, files in os.walk(package):
            dirs.sort()
            found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".py")]
    return found


@lru_cache(maxsize=None)
def generator_version():
    """A hash of :func:`source_files` (their paths within the folder holding their package,
    as ``gemm/api.py`` and ``layoutalg/layout.py``, and contents), computed once per process."""
    digest = hashlib.sha256()
    packages = _package_dirs()
    for path in source_files():
        root = os.path.dirname(next(p for p in packages if path.startswith(p + os.sep)))
        with open(path, "rb") as fh:
            digest.update(os.path.relpath(path, root).encode() + b"\0" + fh.read())
    return digest.hexdigest()[:16]


def _import(name, make_source):
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(cache_dir(), name + ".py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(make_source())
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
