"""The SIMT kernels (written with gemm.cute) compiled to PTX on the CPU (no GPU needed):
cp.async present, no local memory, no 64-bit division, ptxas reports no spills, and main
loops as lean as the generated kernels' they replaced; split-K's reduction in 16-byte
loads."""

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
def test_kernel_ptx(name, a_unit, b_unit, cc):
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


# The main loop of the generated kernels these replaced (in git history until 5ad8225), 128 x
# 128 x 8 tiles: (pipeline, vector_mn) -> (shared loads, other instructions than FMAs and
# loads), from their PTX's hot block for sm_90.
GENERATED = {("prefetch", 1): (0, 2), ("double_buffer", 1): (96, 4), ("double_buffer", 4): (28, 8)}


@pytest.mark.parametrize("pipeline, vector_mn", list(GENERATED))
def test_main_loop_as_lean_as_the_generated_kernels(pipeline, vector_mn):
    """The SIMT kernels' main loop has a k-tile's FMAs (8 x 8 x 8 a thread), no more shared
    loads than the generated kernels it replaced and at most 8 other instructions more: a
    view's constant offset (a k-block of a double buffer's stage) folds into the loads'
    immediate offsets (gemm.cute keeps tensor offsets in 64 bits; with uint32 offsets the
    double buffer's loop had 56 more: an add, a widening multiply and a 64-bit add per view).
    With runs of 4 rows a thread (vector_mn 4, the default "tuned" kernel's), shared memory
    is read by 128-bit loads alone."""
    from gemm.simt.config import SimtConfig
    cfg = SimtConfig(bM=128, bN=128, bK=8, pipeline=pipeline, vector_mn=vector_mn,
                     pad=4 if vector_mn > 1 else None)
    ptx = compile_ptx(simt_function(cfg, 0, 1), SIGNATURE, cc=(9, 0))
    ops = _hot_block(ptx)
    loads, others = GENERATED[pipeline, vector_mn]
    assert ops.get("fma") == 8 * 8 * 8 and ops.get("ld", 0) <= loads, ops
    assert sum(v for k, v in ops.items() if k not in ("fma", "ld")) <= others + 8, ops
    if vector_mn > 1:
        assert "ld.shared.v4.f32" in ptx and "ld.shared.f32" not in ptx


@pytest.mark.parametrize("out_dtype, part_dtype, vector_load",
                         [("bfloat16", "bfloat16", "ld.global.v4.u32"),
                          ("float32", "float32", "ld.global.v4.f32")])
def test_split_reduction_reads_16_bytes_a_load(out_dtype, part_dtype, vector_load):
    """Split-K's reduction in its vector form: the partials and the out's tile in 16-byte
    loads and stores (a row's last columns aside), no local memory."""
    from gemm import splitk_kernel as sk
    ptx = compile_ptx(sk._reduce_function(out_dtype, part_dtype, vector=True),
                      sk.signature(out_dtype, part_dtype), cc=(9, 0))
    assert ptx.count(vector_load) >= 3, ptx.count(vector_load)   # two ranges a turn, a third
    assert "st.global.v4" in ptx
    assert not local_memory_ops(ptx), local_memory_ops(ptx)[:5]
