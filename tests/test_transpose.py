"""gemm.transpose.column_major_copy in numba's CUDA simulator (a child process): a row-major
float32 matrix with a padded leading dimension and partial tiles, copied column-major into a
NaN-poisoned buffer; and its refusals."""

import json
import os

import pytest

from gemm import transpose
from simcase import simulator_report


def _child():
    import numpy as np
    rng = np.random.default_rng(3)
    out = {}
    for rows, cols, ld in ((37, 70, 75), (32, 32, 32), (1, 5, 8)):
        src = rng.standard_normal(rows * ld).astype(np.float32)
        dst = np.full(rows * cols + 7, np.nan, np.float32)    # 7 past the copy: untouched
        transpose.column_major_copy(src, dst, (rows, cols), ld)
        want = src.reshape(rows, ld)[:, :cols].T.ravel()
        out[f"{rows}x{cols}/{ld}"] = [bool(np.array_equal(dst[:rows * cols], want)),
                                      bool(np.isnan(dst[rows * cols:]).all())]
    print(json.dumps(out))


def test_copy_in_simulator():
    got = simulator_report(os.path.abspath(__file__))
    assert got == {k: [True, True] for k in ("37x70/75", "32x32/32", "1x5/8")}, got


def test_too_large_is_refused():
    with pytest.raises(ValueError, match="too large"):
        transpose.column_major_copy(0, 0, (2 ** 17, 2 ** 16), 2 ** 16)
    with pytest.raises(ValueError, match="too large"):
        transpose.column_major_copy(0, 0, (65536 * 32 + 1, 4), 4)       # grid's y


if __name__ == "__main__":
    _child()
