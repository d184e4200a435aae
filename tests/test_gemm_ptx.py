"""The generated SIMT kernels compiled to PTX on the CPU (no GPU needed): cp.async present,
no local memory, no 64-bit division, and ptxas reports no spills."""

import os

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1":
    pytest.skip("PTX is compiled outside the simulator", allow_module_level=True)

from gemm import api  # noqa: E402
from gemm.arch.inspect import compile_ptx, local_memory_ops, ptxas_usage  # noqa: E402
from gemm.simt import SIGNATURE, simt_function  # noqa: E402

# (kernel, A unit mode, B unit mode, cc): row-major A and B (the usual torch/numpy case) for
# every kernel on sm_80, and the default kernel with column-major A on sm_90.
CASES = [(name, 1, 0, (8, 0)) for name in api.KERNELS] + [("tuned", 0, 0, (9, 0))]


@pytest.mark.parametrize("name, a_unit, b_unit, cc", CASES)
def test_generated_kernel_ptx(name, a_unit, b_unit, cc):
    fn = simt_function(api.KERNELS[name], a_unit, b_unit, 4, 4)
    ptx = compile_ptx(fn, SIGNATURE, cc=cc)
    assert "cp.async.c" in ptx and "cp.async.wait_all" in ptx
    assert "fma.rn.f32" in ptx
    assert not local_memory_ops(ptx), local_memory_ops(ptx)[:5]
    for op in ("div.s64", "rem.s64", "div.u64", "rem.u64"):
        assert op not in ptx, op
    (usage,) = ptxas_usage(ptx, cc)
    assert usage.spill_stores == 0 and usage.spill_loads == 0 and usage.local == 0, usage
