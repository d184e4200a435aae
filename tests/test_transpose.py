"""gemm.transpose.column_major_copy in numba's CUDA simulator (a child process): a row-major
float32 matrix with a padded leading dimension and partial tiles, copied column-major into a
NaN-poisoned buffer; the kernel's PTX; and its refusals."""

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


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                    reason="PTX is compiled outside the simulator")
def test_kernel_ptx_moves_each_value_once_through_shared_memory():
    """The gemm.cute kernel's PTX: a thread's 4 values read from global memory into the
    shared tile and 4 from the tile out, no local memory, no 64-bit sign extraction (a
    signed index numba would wrap around)."""
    import re
    from numba import cuda
    ptx, _ = cuda.compile_ptx(transpose._kernel, transpose.SIGNATURE, cc=(9, 0))
    count = {op: len(re.findall(rf"\b{re.escape(op)}\b", ptx))
             for op in ("ld.global.f32", "st.global.f32", "ld.shared.f32", "st.shared.f32")}
    assert count == dict.fromkeys(count, 4), count
    assert ".local" not in ptx
    assert not re.search(r"shr\.s64\s+[^,]+,\s*[^,]+,\s*63;", ptx)


def test_too_large_is_refused():
    with pytest.raises(ValueError, match="too large"):
        transpose.column_major_copy(0, 0, (2 ** 17, 2 ** 16), 2 ** 16)
    with pytest.raises(ValueError, match="too large"):
        transpose.column_major_copy(0, 0, (65536 * 32 + 1, 4), 4)       # grid's y


if __name__ == "__main__":
    _child()
