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


def _hot_block(ptx):
    """{instruction: count} of the basic block with the most FMAs (the main loop's)."""
    import re
    blocks, cur = [], []
    for line in ptx.splitlines():
        if re.match(r"^\$\w+:", line):
            blocks.append(cur)
            cur = []
        else:
            cur.append(line)
    blocks.append(cur)
    best = max(blocks, key=lambda b: sum("fma.rn.f32" in x for x in b))
    ops = {}
    for line in best:
        m = re.match(r"\s+(?:@%p\d+ )?([a-z]+)", line)
        if m:
            ops[m.group(1)] = ops.get(m.group(1), 0) + 1
    return ops


@pytest.mark.parametrize("pipeline, vector_mn", [("prefetch", 1), ("double_buffer", 1),
                                                 ("double_buffer", 4)])
def test_cute_kernel_main_loop_as_lean_as_the_generated(pipeline, vector_mn):
    """The gemm.cute SIMT kernels' main loop has the generated kernel's FMAs, no more shared
    loads and at most 8 other instructions more: a view's constant offset (a k-block of a
    double buffer's stage) folds into the loads' immediate offsets (gemm.cute keeps tensor
    offsets in 64 bits; with uint32 offsets the double buffer's loop had 56 more: an add, a
    widening multiply and a 64-bit add per view). With runs of 4 rows a thread (vector_mn 4,
    the default "tuned" kernel's), shared memory is read by 128-bit loads alone."""
    from dataclasses import replace
    from gemm.simt.config import SimtConfig
    cfg = SimtConfig(bM=128, bN=128, bK=8, pipeline=pipeline, vector_mn=vector_mn,
                     pad=4 if vector_mn > 1 else None)
    ptx = [compile_ptx(simt_function(replace(cfg, cute=c), 0, 1), SIGNATURE, cc=(9, 0))
           for c in (False, True)]
    gen, cute = (_hot_block(p) for p in ptx)
    assert cute.get("fma") == gen.get("fma") and cute.get("ld", 0) <= gen.get("ld", 0), (gen, cute)
    others = [sum(v for k, v in ops.items() if k not in ("fma", "ld")) for ops in (gen, cute)]
    assert others[1] <= others[0] + 8, (gen, cute)
    if vector_mn > 1:
        assert "ld.shared.v4.f32" in ptx[1] and "ld.shared.f32" not in ptx[1]
