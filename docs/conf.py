"""Sphinx configuration: the API reference from the docstrings (autodoc) and the notebooks
(jupytext percent scripts in ../notebooks, run at build time by myst-nb so that their
pictures are today's). Build: ``sphinx-build -W -b html docs docs/_build/html``."""

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import layoutalg  # noqa: E402

project = "layoutalg"
release = version = layoutalg.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.viewcode", "myst_nb"]
exclude_patterns = ["_build", "conf.py"]
html_theme = "alabaster"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_mock_imports = ["torch"]            # gemm.collective's optional runtime import
myst_enable_extensions = ["dollarmath"]

# The notebooks are kept as jupytext percent scripts; copy them in and let myst-nb read them
# through jupytext and execute them (every picture in the docs comes from this build).
nb_custom_formats = {".py": ["jupytext.reads", {"fmt": "py:percent"}]}
nb_execution_mode = "force"
nb_execution_timeout = 120
nb_execution_raise_on_error = True
_NOTEBOOKS = Path(__file__).parent / "notebooks"
shutil.rmtree(_NOTEBOOKS, ignore_errors=True)
_NOTEBOOKS.mkdir()
for nb in sorted((ROOT / "notebooks").glob("[0-9]*.py")):
    shutil.copy(nb, _NOTEBOOKS / nb.name)
