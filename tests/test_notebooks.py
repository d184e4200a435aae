"""Every notebook in notebooks/ runs top to bottom on the CPU and fails the test on any error.

The notebooks are stored as jupytext percent-format scripts (``# %%`` starts a cell), so
that diffs stay readable. They are run without Jupyter, nbclient or jupytext (none of
which the package needs): each notebook runs in its own Python process, cell by cell, the
way a notebook kernel runs it. As in Jupyter, a cell whose last statement is an expression
displays that value: its ``_repr_svg_`` picture is produced and must be well-formed SVG, and
its ``_repr_latex_`` formula (layoutalg.symbolic.latex) must be one ``$...$`` with balanced
braces.
"""

import ast
import os
import pathlib
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.py"))
TIMEOUT_S = 60          # each notebook is meant to take well under 20 s


def code_cells(source):
    """The code cells of a percent-format notebook: markdown cells are skipped."""
    cells, current, is_code = [], [], True
    for line in source.splitlines():
        if line.startswith("# %%"):
            if is_code and current:
                cells.append("\n".join(current))
            current, is_code = [], "[markdown]" not in line
            continue
        current.append(line)
    if is_code and current:
        cells.append("\n".join(current))
    return cells


def run_notebook(path):
    """Run the notebook's cells in one namespace; show each cell's last expression."""
    namespace = {"__name__": "__main__"}
    shown = formulas = 0
    for n, cell in enumerate(code_cells(pathlib.Path(path).read_text())):
        tree = ast.parse(cell, filename=f"{path} cell {n}")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, f"{path} cell {n}", "exec"), namespace)
        if last is None:
            continue
        value = eval(compile(ast.Expression(last.value), f"{path} cell {n}", "eval"), namespace)
        if hasattr(value, "_repr_svg_"):
            svg = value._repr_svg_()
            if svg is not None:
                ET.fromstring(svg)          # a picture that a browser can show
                shown += 1
        if hasattr(value, "_repr_latex_"):
            tex = value._repr_latex_()
            if tex is not None:
                check_latex(tex)
                formulas += 1
    print(f"{path}: {shown} pictures, {formulas} formulas")


def check_latex(tex):
    """A formula that MathJax can take: ``$...$``, braces balanced and never closed early."""
    assert tex.startswith("$") and tex.endswith("$") and tex.count("$") == 2, tex[:80]
    depth = 0
    for ch in tex:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0, tex
    assert depth == 0, tex


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MPLBACKEND="Agg")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, str(path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, f"{path.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    assert "pictures" in done.stdout
    assert seconds < TIMEOUT_S


def test_latex_check_refuses_broken_formulas():
    check_latex("$i_{0} w$")
    for bad in ("i_{0} w", "$i_{0 w$", "$i_0} w{$", "$a$ + $b$"):
        with pytest.raises(AssertionError):
            check_latex(bad)


def test_cells_are_split_like_jupytext():
    src = "# %%\nx = 1\n# %% [markdown]\n# text\n# %%\nx + 1\n"
    assert code_cells(src) == ["x = 1", "x + 1"]


if __name__ == "__main__":
    run_notebook(sys.argv[1])
