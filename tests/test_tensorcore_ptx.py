"""The tensor-core kernel compiled to PTX on the CPU (no GPU needed): mma.sync, ldmatrix and
cp.async present, no local memory, no 64-bit division, and ptxas reports no spills for sm_80
and sm_90.

One NVVM compile of the default configuration (bf16)
takes about 40 s on a 2-core machine, so it is compiled once and assembled for both
architectures (PTX for sm_80 runs on sm_90)."""

import os

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1":
    pytest.skip("PTX is compiled outside the simulator", allow_module_level=True)

from gemm.arch.inspect import compile_ptx, local_memory_ops, ptxas_usage  # noqa: E402
from gemm.tensorcore import TensorCoreConfig, Variant, tensorcore_function  # noqa: E402

CFG = TensorCoreConfig(dtype="bfloat16")          # the default kernel


@pytest.fixture(scope="module")
def ptx():
    fn = tensorcore_function(CFG)
    return compile_ptx(fn, Variant(CFG).signature, cc=(8, 0), launch_bounds=(CFG.threads, 1))


def test_instructions(ptx):
    kb = CFG.bK // 16
    wm, wn = CFG.warps
    # per k-block: (bM / 16 wm) x (bN / 8 wn) m16n8k16 MMAs per warp, in the body of each of
    # the two main loops (blocks inside the matrix, and the rest)
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == \
        2 * kb * (CFG.bM // (16 * wm)) * (CFG.bN // (8 * wn))
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "cp.async.cg.shared.global" in ptx and "cp.async.commit_group" in ptx
    assert "st.global.v4.f32" in ptx and "st.shared.v2.f32" in ptx   # the staged epilogue
    assert f"cp.async.wait_group {CFG.stages - 2}" in ptx
    assert not local_memory_ops(ptx), local_memory_ops(ptx)[:5]
    for op in ("div.s64", "rem.s64", "div.u64", "rem.u64"):
        assert op not in ptx, op


@pytest.mark.parametrize("cc", [(8, 0), (9, 0)])
def test_no_spills(ptx, cc):
    (usage,) = ptxas_usage(ptx, cc)
    assert usage.spill_stores == 0 and usage.spill_loads == 0 and usage.local == 0, usage
    assert usage.registers <= 255
