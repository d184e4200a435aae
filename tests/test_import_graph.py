"""The package's import graph, read from the source with ``ast``: no import cycles, ``import
layoutalg`` stays light, every module of ``gemm`` imports on its own, and nothing imports the
deprecated re-export ``layoutalg.gemm``.

Imports inside functions count: a cycle through one is still a cycle in the design (the
lazy import only hides it until the function runs). The layering the check keeps, lower
layers never importing higher ones: the algebra (``layoutalg``) -> ``gemm.arch`` (PTX
intrinsics and their simulator twins) -> the in-kernel vocabulary (the package ``gemm.cute``:
its objects in ``_python``, their numba side in ``_numba`` and ``_numba_ops``) -> the kernel
families (the packages ``simt``, ``tensorcore`` and ``hopper``, each with a ``config`` module
below its generator, ``skinny`` and ``cute_kernels``), with the type rules (``dtypes``) and the
call path's package ``gemm.call`` (operands, kept plans, cubins and their launch, importing
only ``gemm._env``) below them -> ``gemm.matmul`` (``api``) and the
package ``gemm.tuning`` (autotuning, the shipped shape table, precompiling), which only the
modules on top import (``ON_TOP``).

Only imports under ``if TYPE_CHECKING:`` are left out of the graph: they never run (type
checkers alone read them; ``layoutalg.types`` and the modules annotated with its aliases
import each other that way).

``python tests/test_import_graph.py`` prints the cycles.
"""

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The distribution's two packages: the algebra and the kernels. ``layoutalg.gemm`` (in
# layoutalg) is the kernels' former name, a deprecated re-export of ``gemm``.
PACKAGES = ("layoutalg", "gemm")
SHIM = "layoutalg.gemm"
# Names read as other modules' (``{"old.": "new."}``) and edges the source does not show
# (``{(importer, imported): where}``): none now that no package aliases another.
ALIASES = {}
EXTRA_EDGES = {}

# Where the call path and tuning sit: the modules of each package here import, of gemm, only
# their own package and these (gemm.call sits under the kernel families, which import it) ...
BELOW = {"gemm.call": {"gemm._env"}}
# ... and only these modules import the packages here (gemm.tuning sits on top, beside api).
ON_TOP = {"gemm.tuning": {"gemm.api", "gemm.report", "gemm.__main__"}}

# Imports (importer, imported) left out of the cycle check, each with its reason. None is
# left; the list may only shrink: an exemption the source no longer has fails the test.
EXEMPT = {}


def modules(root=ROOT, packages=PACKAGES):
    """{dotted name: path} of every module of ``packages`` under ``root``."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(test):
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(node, in_function=False):
    """(import statement, in_function) for every import in ``node`` that can run."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.orelse:
                yield from _imports(ast.Module(body=[statement], type_ignores=[]), in_function)
        else:
            yield from _imports(child, in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def import_graph(root=ROOT, packages=PACKAGES, aliases=ALIASES, extra=EXTRA_EDGES):
    """{(importer, imported): [(path:line, in_function), ...]} between the modules of
    ``packages``. ``import a.b`` imports ``a.b``; ``from a import b`` imports the module
    ``a.b`` where there is one, else ``a``; relative imports are resolved."""
    found = modules(root, packages)

    def known(name):
        for alias, real in aliases.items():
            if name.startswith(alias):
                name = real + name[len(alias):]
        return name if name in found else None

    edges = {}
    for name, path in found.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, in_function in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [known(alias.name) for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [known(f"{base}.{alias.name}") or known(base) for alias in node.names]
            where = (f"{path.relative_to(root)}:{node.lineno}", in_function)
            for target in targets:
                if target is not None and target != name:
                    places = edges.setdefault((name, target), [])
                    if where not in places:
                        places.append(where)
    for edge, where in extra.items():
        edges.setdefault(edge, []).append((where, False))
    return edges


def cycles(edges):
    """[(component, cycle)]: each strongly connected component of more than one module
    (Tarjan's algorithm) and a shortest cycle through its first module."""
    succ = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)
        succ.setdefault(b, set())
    index, low, stack, components = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    found = []
    for component in components:
        inside, start = set(component), component[0]
        paths, queue, cycle = {start: [start]}, [start], None
        while cycle is None:                        # breadth first, back to start
            v = queue.pop(0)
            for w in sorted(succ[v] & inside):
                if w == start:
                    cycle = paths[v] + [start]
                    break
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    queue.append(w)
        found.append((component, cycle))
    return found


def describe(edges, component, cycle):
    """A cycle and every import between the modules of its component, with their lines."""
    def line(a, b):
        where = ", ".join(f"{w}{' (in a function)' if f else ''}" for w, f in edges[a, b])
        return f"    {a} -> {b}   [{where}]"
    inside = set(component)
    return "\n".join([f"cycle among {len(component)} modules: {' -> '.join(cycle)}",
                      "  its imports:"]
                     + [line(a, b) for a, b in sorted(edges) if a in inside and b in inside])


def test_no_import_cycles():
    edges = import_graph()
    assert len(edges) > 250                         # the graph is read
    assert any(f for places in edges.values() for _, f in places)   # function-level ones too
    for edge in EXEMPT:
        assert edge in edges, f"the exemption {edge} is no longer needed: remove it from EXEMPT"
    edges = {e: w for e, w in edges.items() if e not in EXEMPT}
    found = cycles(edges)
    report = "\n".join(describe(edges, c, cycle) for c, cycle in found)
    assert not found, "import cycles in the package:\n" + report


def _inside(name, package):
    return name == package or name.startswith(package + ".")


def test_the_call_path_and_tuning_sit_in_their_layers():
    """``gemm.call`` imports nothing of gemm above it (the kernel families, api and tuning
    import it); ``gemm.tuning`` is imported only by the modules on top."""
    edges = import_graph()
    for package, allowed in BELOW.items():
        assert any(_inside(a, package) for a, _ in edges), package      # the graph has it
        up = [(a, b, w) for (a, b), w in edges.items() if _inside(a, package)
              and b.partition(".")[0] == "gemm" and not _inside(b, package) and b not in allowed]
        assert not up, f"{package} imports above its layer: {up}"
    for package, allowed in ON_TOP.items():
        assert any(_inside(b, package) for _, b in edges), package
        down = [(a, b, w) for (a, b), w in edges.items() if _inside(b, package)
                and not _inside(a, package) and a not in allowed]
        assert not down, f"{package} is imported from below it: {down}"


def test_the_graph_reader(tmp_path):
    """Relative, absolute, function-level and TYPE_CHECKING imports, ``from pkg import
    module`` and a cycle through a function, on a package written here."""
    files = {
        "pkg/__init__.py": "from .a import f\n",
        "pkg/a.py": "from . import b\n\ndef f():\n    from .sub import c\n",
        "pkg/b.py": ("from typing import TYPE_CHECKING\nimport pkg.sub\nimport os\n"
                     "if TYPE_CHECKING:\n    from .a import f\n"),
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "from ..b import x\nfrom pkg import a, sub\n",
        "old/__init__.py": "from old.sub import c\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    edges = import_graph(tmp_path, ("pkg", "old"), {"old.": "pkg."}, {})
    assert {e: [f for _, f in w] for e, w in edges.items()} == {
        ("pkg", "pkg.a"): [False], ("pkg.a", "pkg.b"): [False], ("pkg.a", "pkg.sub.c"): [True],
        ("pkg.b", "pkg.sub"): [False], ("pkg.sub.c", "pkg.b"): [False],
        ("pkg.sub.c", "pkg.a"): [False], ("pkg.sub.c", "pkg.sub"): [False],
        ("old", "pkg.sub.c"): [False]}
    found = cycles(edges)
    assert found == [(["pkg.a", "pkg.sub.c"], ["pkg.a", "pkg.sub.c", "pkg.a"])]
    assert "pkg/a.py:4 (in a function)" in describe(edges, *found[0])


def test_nothing_imports_the_deprecated_name():
    """``layoutalg.gemm`` re-exports ``gemm``; no module of either package imports it (so
    its DeprecationWarning is the user's alone), and the algebra imports no gemm module."""
    edges = import_graph()
    assert SHIM in modules() and (SHIM, "gemm") in edges
    assert not [(a, b) for a, b in edges if b == SHIM], [(a, b) for a, b in edges if b == SHIM]
    algebra_to_gemm = [(a, b) for a, b in edges if a.partition(".")[0] == "layoutalg"
                       and a != SHIM and (b == "gemm" or b.startswith("gemm."))]
    assert not algebra_to_gemm, algebra_to_gemm


def _defined(path):
    """(the names ``path``'s module defines at its top level, whether it makes others on
    demand: a module ``__getattr__`` or a star import)."""
    names, dynamic = set(), False

    def visit(body):
        nonlocal dynamic
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
                dynamic |= node.name == "__getattr__"
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, ast.Import):
                names.update((a.asname or a.name).partition(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                dynamic |= any(a.name == "*" for a in node.names)
                names.update(a.asname or a.name for a in node.names)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))
    visit(ast.parse(path.read_text()).body)
    return names, dynamic


def test_every_import_names_a_module_or_name_that_exists():
    """Every import of the packages' own modules, function-level ones included, names a
    module that exists and, for ``from m import x``, a submodule of m or a name m defines:
    a stale path in an import that runs only on a GPU fails here, on a CPU."""
    found = modules()
    wrong = []
    for name, path in found.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, _ in _imports(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if isinstance(node, ast.Import):
                wrong += [(where, a.name) for a in node.names
                          if a.name.partition(".")[0] in PACKAGES and a.name not in found]
                continue
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1]
                                + ([node.module] if node.module else []))
            if base.partition(".")[0] not in PACKAGES:
                continue
            if base not in found:
                wrong.append((where, base))
                continue
            names, dynamic = _defined(found[base])
            wrong += [(where, f"{base}.{a.name}") for a in node.names
                      if a.name != "*" and f"{base}.{a.name}" not in found
                      and a.name not in names and not dynamic]
    assert not wrong, wrong


def _run(code, *args):
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=path))


def test_import_layoutalg_is_light():
    done = _run("import sys, layoutalg; "
                "print(sorted(m for m in ('layoutalg.gemm', 'gemm', 'numba', 'sympy') "
                "if m in sys.modules))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


# Modules that need a package the tests may not have: skipped where it is missing
# (gemm.collective imports torch only when it is called).
NEEDS = {"gemm.torch": "torch"}


# Run in one interpreter that forks a child per module (argv), each importing its module first
# of gemm's; the interpreter first imports the other modules that they all import (numba,
# numpy, layoutalg: found by a child that imports them all), so that each child imports only
# gemm's own (64 fresh interpreters, each importing numba, took 30 s of CI's two cores).
# Prints {module: error} of those that failed.
_FORKED_IMPORTS = r"""
import importlib, json, os, sys

SHIM = %r


def ours(m):
    return m == "gemm" or m.startswith("gemm.") or m == SHIM


def in_child(work):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            msg = work()
        except BaseException as e:
            msg = f"{type(e).__name__}: {e}"
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    _, status = os.waitpid(pid, 0)
    return msg or (f"exit status {status}" if status else "")


def all_of_them():
    for name in sys.argv[1:]:
        __import__(name)
    return json.dumps(sorted(m for m in sys.modules if not ours(m)))


def one(name):
    __import__(name)
    assert SHIM not in sys.modules, "imported " + SHIM
    return ""


others = in_child(all_of_them)
for m in json.loads(others) if others.startswith("[") else []:
    try:
        importlib.import_module(m)
    except BaseException:       # (then the children import it, as before)
        pass
assert not any(ours(m) for m in sys.modules), "another package imported gemm"
failed = {}
for name in sys.argv[1:]:
    msg = in_child(lambda: one(name))
    if msg:
        failed[name] = msg
print(json.dumps(failed))
""" % SHIM


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_each_gemm_module_imports_on_its_own():
    """Each module first, of gemm's (a forked child of an interpreter that has imported
    the other modules they import, layoutalg's among them): a cycle shows as an ImportError
    that depends on which of its modules is imported first. None of them imports the
    deprecated ``layoutalg.gemm``."""
    names = [n for n in sorted(modules()) if (n == "gemm" or n.startswith("gemm."))
             and not n.endswith("__main__")
             and (n not in NEEDS or importlib.util.find_spec(NEEDS[n]))]
    assert len(names) > 40
    done = _run(_FORKED_IMPORTS, *names)
    assert done.returncode == 0, done.stderr[-2000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failed, failed


if __name__ == "__main__":
    graph = import_graph()
    print("\n".join(describe(graph, c, cycle) for c, cycle in cycles(graph)) or "no cycles")
