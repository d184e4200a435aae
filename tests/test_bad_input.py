"""Input the algebra used to accept silently (issue 15): each now raises an error that names
what is wrong, and the accepted forms still work."""

import textwrap

import pytest

import layoutalg
from layoutalg import Layout, LayoutError, format_layout, make_tiled_copy, make_tiled_mma
from layoutalg.atom import (SM80_16x8x16_F32BF16BF16F32_TN, SM80_CP_ASYNC_CACHEALWAYS,
                            SM80_CP_ASYNC_CACHEGLOBAL, UniversalCopy)


@pytest.mark.parametrize("crd", [1.5, (1, 2.0), True, (True, 0), "a", (1, "b")])
def test_a_coordinate_must_be_integers(crd):
    with pytest.raises(LayoutError, match="is not an integer"):
        Layout((4, 8))(crd)


def test_integer_and_sliced_coordinates_still_work():
    import numpy as np
    L = Layout((4, 8))
    assert L(np.int64(5)) == L(5) == 5 and L((1, 2)) == 9 and L(1, 2) == 9
    assert L((None, 1))(3) == 3 and L((1, None))(1) == 4          # the sliced layouts


@pytest.mark.parametrize("thr", [1000, -1, 1.0, True, "0"])
def test_get_slice_refuses_a_thread_that_does_not_exist(thr):
    mma = make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN())
    copy = make_tiled_copy(UniversalCopy(32), (32, 8), (1, 1))
    for tiled in (mma, copy):
        with pytest.raises(LayoutError, match="thread index"):
            tiled.get_slice(thr)
    with pytest.raises(LayoutError, match=r"outside \[0, 32\)"):
        mma.get_slice(32)
    assert mma.get_slice(31).thr_idx == 31 and copy.get_slice(255).thr_idx == 255


def test_a_symbolic_thread_index_is_kept():
    from sympy import Symbol
    t = Symbol("t", integer=True, nonnegative=True)
    assert make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN()).get_slice(t).thr_idx is t


def test_print_layout_of_symbolic_extents_says_so():
    from layoutalg.symbolic import extent_symbols
    (n,) = extent_symbols("n")
    with pytest.raises(LayoutError, match="integer extents"):
        format_layout(Layout((n, 4)))


def test_huge_layouts_print_truncated_and_refuse_pictures():
    from layoutalg.viz import svg_layout
    text = format_layout(Layout((512, 512)))
    assert len(text) < 100_000 and "showing 64 of 512 rows, 64 of 512 columns" in text
    full = format_layout(Layout((3, 80)), max_cols=None)
    assert "..." not in full and " 237 |" in full          # the last column: 2 + 3 * 79
    with pytest.raises(LayoutError, match="cells is more than"):
        svg_layout(Layout((512, 512)))
    with pytest.raises(ValueError, match="max_rows"):
        format_layout(Layout(4), max_rows=0)


def test_copy_sizes_by_bytes_or_bits():
    assert UniversalCopy(32).bits == UniversalCopy(bits=32).bits == UniversalCopy(nbytes=4).bits
    assert SM80_CP_ASYNC_CACHEALWAYS(16).bits == SM80_CP_ASYNC_CACHEALWAYS(bits=128).bits
    assert SM80_CP_ASYNC_CACHEGLOBAL(bits=128).bits == 128
    with pytest.raises(ValueError, match=r"bits=128\?"):
        SM80_CP_ASYNC_CACHEALWAYS(128)         # bits given as bytes
    with pytest.raises(TypeError, match="not both"):
        UniversalCopy(32, nbytes=4)
    with pytest.raises(TypeError, match="nbytes= or bits="):
        UniversalCopy()
    with pytest.raises(ValueError, match="multiple of 8"):
        UniversalCopy(bits=12)


def test_version_and_typing_marker():
    import os
    assert layoutalg.__version__.count(".") == 2
    assert os.path.exists(os.path.join(os.path.dirname(layoutalg.__file__), "py.typed"))


def test_gemm_without_numba_says_which_extra(monkeypatch):
    import importlib
    import sys
    import importlib.util as util
    real = util.find_spec
    monkeypatch.setattr(util, "find_spec",
                        lambda name, *a: None if name == "numba_cuda" else real(name, *a))
    saved = {n: sys.modules.pop(n, None) for n in ("gemm",)}
    try:
        with pytest.raises(ImportError, match=r"layoutalg\[gemm\]"):
            importlib.import_module("gemm")
    finally:
        for n, module in saved.items():
            sys.modules.pop(n, None)
            if module is not None:
                sys.modules[n] = module


def _python(*args):
    """Run ``python *args`` in a fresh interpreter: (returncode, stdout, stderr)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


def test_gemm_without_numba_in_a_fresh_interpreter():
    """numba blocked (``sys.modules['numba'] = None``, as where numba-cuda is not installed):
    ``import gemm`` raises the ImportError naming the extra; ``import layoutalg`` works and
    loads no gemm."""
    rc, out, err = _python("-c", textwrap.dedent("""
        import sys
        sys.modules['numba'] = None
        import layoutalg
        assert 'gemm' not in sys.modules and 'layoutalg.gemm' not in sys.modules
        try:
            import gemm
        except ImportError as e:
            print('ImportError:', e)
        """))
    assert rc == 0, err
    assert out.startswith("ImportError:") and "layoutalg[gemm]" in out, out


def test_layoutalg_gemm_is_a_deprecated_re_export():
    """``layoutalg.gemm`` (the kernels' former name) warns and re-exports gemm's names and
    submodules as attributes; it is not an import hook: ``import layoutalg.gemm.hopper`` is
    not answered. ``python -m gemm`` runs the CLI."""
    rc, out, err = _python("-c", textwrap.dedent("""
        import importlib, sys, warnings
        import gemm, gemm.hopper
        assert 'layoutalg.gemm' not in sys.modules
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            from layoutalg import gemm as lg
        assert [x.category for x in w] == [DeprecationWarning], w
        assert 'import gemm' in str(w[0].message)
        assert lg.__name__ == 'layoutalg.gemm' and lg is not gemm
        assert lg.matmul is gemm.matmul and lg.SimtConfig is gemm.SimtConfig
        assert lg.hopper is gemm.hopper
        assert lg.hopper.HopperConfig is gemm.hopper.HopperConfig
        from layoutalg.gemm import hopper, KERNELS
        assert hopper is gemm.hopper and KERNELS is gemm.KERNELS
        assert set(gemm.__all__) <= set(dir(lg))
        try:
            importlib.import_module('layoutalg.gemm.hopper')
            print('layoutalg.gemm.hopper imported')
        except ModuleNotFoundError:
            print('ok')
        """))
    assert rc == 0 and out.strip() == "ok", (out, err)
    rc, out, err = _python("-m", "gemm", "--help")
    assert rc == 0 and "python -m gemm tune" in out, err


def test_cli_help_is_plain_text_with_examples(capsys):
    from gemm.__main__ import main
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert "``" not in out and "examples:" in out and "python -m gemm tune" in out
