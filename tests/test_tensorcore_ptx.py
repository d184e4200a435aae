"""The tensor-core kernel compiled to PTX on the CPU (no GPU needed): mma.sync, ldmatrix and
cp.async present, no local memory, no 64-bit division, and ptxas reports no spills, for the
default configuration (bf16), compiled for sm_80 (and assembled for sm_80 and sm_90) and for
sm_90 (numba compiles for the GPU that runs it), and with B MN-major (ldmatrix .trans)."""

import os

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1":
    pytest.skip("PTX is compiled outside the simulator", allow_module_level=True)

from gemm.arch.inspect import compile_ptx, local_memory_ops, ptxas_usage  # noqa: E402
from gemm.tensorcore import TensorCoreConfig, Variant, tensorcore_function  # noqa: E402

CFG = TensorCoreConfig(dtype="bfloat16")          # the default kernel
KERNELS = {"sm_80": (Variant(CFG), (8, 0)), "sm_90": (Variant(CFG), (9, 0)),
           "B MN-major": (Variant(CFG, b_major="MN"), (9, 0))}


@pytest.fixture(scope="module", params=list(KERNELS))
def compiled(request):
    """(name, PTX, the architectures its ptxas usage is checked for)."""
    v, cc = KERNELS[request.param]
    ptx = compile_ptx(tensorcore_function(v), v.signature, cc=cc,
                      launch_bounds=(CFG.threads, 1))
    return request.param, ptx, [cc] if cc == (9, 0) else [(8, 0), (9, 0)]


def test_instructions(compiled):
    name, ptx, _ = compiled
    kb = CFG.bK // 16
    wm, wn = CFG.warps
    # per k-block: (bM / 16 wm) x (bN / 8 wn) m16n8k16 MMAs per warp, in the body of each of
    # the two main loops (blocks inside the matrix, and the rest)
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == \
        2 * kb * (CFG.bM // (16 * wm)) * (CFG.bN // (8 * wn))
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx) == (name == "B MN-major")
    assert "cp.async.cg.shared.global" in ptx and "cp.async.commit_group" in ptx
    assert "st.global.v4.f32" in ptx and "st.shared.v2.f32" in ptx   # the staged epilogue
    assert f"cp.async.wait_group {CFG.stages - 2}" in ptx
    assert not local_memory_ops(ptx), local_memory_ops(ptx)[:5]
    for op in ("div.s64", "rem.s64", "div.u64", "rem.u64"):
        assert op not in ptx, op


def test_no_spills(compiled):
    name, ptx, archs = compiled
    for cc in archs:
        (usage,) = ptxas_usage(ptx, cc)
        assert usage.spill_stores == 0 and usage.spill_loads == 0 and usage.local == 0, (
            name, usage)
        assert usage.registers <= 255
