"""The SM90 GEMM written with gemm.cute (gemm.hopper.cute_gemm, ``kernel="hopper"`` and its
other name ``"cute_hopper"``). In
numba's CUDA simulator (this file as a script in a subprocess), through the Hopper kernel's
host path on fresh random data against float64 (tests/sim_hopper_cases.py's bound): the TMA
epilogue and the one from registers (beta != 0, an unaligned out), split-K, swapped operands
on narrow tiles, both majors, a batch, alpha, bf16 / f16 / tf32 inputs, f32 / bf16 outs, a
column-major out, odd shapes, one and two consumers, the three schedules, 3xTF32 with infs
and NaNs, the default config over a batch sharing B, a grid planned for fewer SMs
(``sm_carveout``). Compiled to PTX
for sm_90a on the CPU: no local memory, one wgmma per block and k-block in each copy of the
loop, TMA loads and stores. What it does not run is refused clearly; and on a GPU of compute
capability 9.x, ``gemm.matmul(kernel="cute_hopper")`` against float64 on poisoned outputs."""

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:      # run as a script by the simulator test
        sys.path.insert(0, str(p))

from gemm.hopper import HopperConfig, HopperVariant, kernel_config  # noqa: E402

SMALL = dict(bM=64, bN=64, stages=2, consumers=1)
# (config fields, m, n, k, case keywords)
CASES = [
    (SMALL, 70, 96, 100, dict(out_dtype="bfloat16")),                  # TMA epilogue
    # pingpong: 8 tiles on 3 blocks (3, 3, 2), consumers skipping each other's 3 k-tiles
    # (laps of 2 slots); one group in flight; the bias and activation in its TMA epilogue
    (dict(bM=64, bN=64, stages=2, consumers=2, schedule="pingpong", delay_release=1), 200,
     100, 136, dict(a_col=True, b_kmajor=False, alpha=0.5, out_dtype="bfloat16",
                    bias="columns", activation="gelu_tanh")),
    (dict(SMALL, dtype="tfloat32", bM=128), 150, 72, 40, dict(batch=2)),
    # split-K: 7 k-tiles in 3 ranges of 3 (the last past K), the reduction's alpha and beta
    (dict(SMALL, split_k=3), 70, 90, 400, dict(alpha=0.5, beta=0.5)),
    # swapped operands (C^T stored by columns) on 16-column tiles, the bias per column of C
    # on the kernel's rows
    (dict(SMALL, bN=16, swap_ab=True), 5, 130, 256, dict(out_dtype="bfloat16",
                                                       bias="columns", activation="silu")),
    (dict(SMALL, consumers=2, stages=3, dtype="float16"), 130, 72, 64,
     dict(a_col=True, b_kmajor=False, alpha=0.5, beta=0.5, out_dtype="bfloat16")),
    (SMALL, 40, 24, 136, dict(col_out=True, beta=-1.0)),
    # fused epilogues: a bias per column into the TMA epilogue, per row with beta, per
    # column of a column-major out (the kernel's rows), over a batch
    (SMALL, 70, 96, 104, dict(out_dtype="bfloat16", bias="columns", activation="gelu")),
    (SMALL, 70, 90, 100, dict(beta=0.5, bias="rows", bias_dtype="bfloat16",
                              activation="silu")),
    (dict(SMALL, dtype="float16"), 40, 24, 136, dict(col_out=True, bias="columns",
                                                     bias_dtype="float16", activation="relu")),
    (dict(SMALL, bM=128), 72, 64, 64, dict(batch=2, bias="columns", activation="gelu_tanh",
                                           out_dtype="bfloat16")),
    # 3xTF32: pingpong consumers each splitting into a buffer of its own, the TMA epilogue's
    # staging past the buffers
    (dict(SMALL, dtype="tfloat32", tf32x3=True, consumers=2, schedule="pingpong"), 130, 40, 72,
     dict(out_dtype="bfloat16")),
    # the plain schedule: 4 tiles on 3 blocks of 3 k-tiles, 2 slots (refills past a tile's
    # end), the tile inside the matrix stored by pairs; one group in flight over split-K's
    # 2 ranges of 2 k-tiles
    (dict(SMALL, schedule="plain"), 70, 70, 136, dict(alpha=0.5, out_dtype="bfloat16")),
    (dict(SMALL, schedule="plain", delay_release=1, split_k=2), 70, 64, 200, {}),
    # the plain schedule on 16-column tiles, leading dimensions padded past K
    (dict(SMALL, schedule="plain", bN=16), 70, 80, 99, dict(pad=8)),
    # swapped operands on 8-column tiles in 2 K ranges
    (dict(SMALL, swap_ab=True, split_k=2, stages=3, bN=8), 5, 130, 128,
     dict(out_dtype="bfloat16")),
    # a batch of 3 sharing B, the default config (None)
    (None, 20, 70, 64, dict(batch=3)),
    # 2 of the simulator's 3 SMs left free (gemm.hopper.sm_carveout): one block, 6 tiles
    (SMALL, 130, 70, 64, dict(carveout=2, out_dtype="bfloat16")),
]
# 3xTF32 with an inf and a NaN in A and a -inf in B (sim_hopper_cases.specials_case): two
# consumers splitting each slot (a partial last round), the slot's infs and NaNs cleared;
# the plain schedule's one warpgroup doing the same between its refills
SPECIALS = [(dict(SMALL, dtype="tfloat32", bN=16, consumers=2, tf32x3=True), 70, 20, 40),
            (dict(SMALL, dtype="tfloat32", bN=16, tf32x3=True, schedule="plain"), 70, 20, 72)]


def run_cases(seed, half):
    """The error ratio (<= 1: within the bound of its types) of every other case from
    ``half`` (0 or 1) of CASES then SPECIALS (two processes, which pytest-xdist runs side by
    side)."""
    from sim_hopper_cases import case, specials_case
    runs = [lambda i=i, c=c: case(c[0] and HopperConfig(**c[0]), *c[1:4], seed=seed + i,
                                  **c[4]) for i, c in enumerate(CASES)]
    runs += [lambda c=c: specials_case(HopperConfig(**c[0]), *c[1:], seed=seed)
             for c in SPECIALS]
    return [run() for run in runs[half::2]]


@pytest.mark.parametrize("half", [0, 1])
def test_cute_hopper_matches_float64_in_the_simulator(half):
    from simcase import simulator_report
    seed = int.from_bytes(os.urandom(3), "little")
    ratios = simulator_report(__file__, seed, half)
    cases = len(CASES) + len(SPECIALS)
    assert len(ratios) == (cases + 1 - half) // 2 and all(r <= 1 for r in ratios), \
        (seed, ratios)


def sign_extractions(ptx):
    """The 64-bit sign extractions (``shr.s64 x, y, 63``) in ``ptx``: numba's wrap-around of
    a signed array index, and Python's floor division of a signed integer, each take one or
    two. The Hopper kernel has one floor division (its warpgroup, ``threadIdx.x // 128``):
    two; its epilogues' and block scales' indices, unsigned, none (signed, they took 6-32)."""
    import re
    return len(re.findall(r"shr\.s64\s+[^,]+,\s*[^,]+,\s*63;", ptx))


@pytest.mark.parametrize("dtype, majors, out, tma, fields", [
    ("bfloat16", ("K", "K"), "bfloat16", True, {}),
    ("float16", ("MN", "MN"), "float32", False, {}),
    ("bfloat16", ("K", "MN"), "float16", True, {}),
    ("float16", ("K", "K"), "float32", True, dict(bM=128, bN=128, consumers=1)),
    ("bfloat16", ("K", "K"), "bfloat16", True, dict(bias="columns", activation="gelu")),
    ("float16", ("K", "MN"), "float32", False, dict(bias="rows", bias_dtype="float16",
                                                    activation="silu")),
    ("bfloat16", ("K", "K"), "bfloat16", False, dict(split_k=True)),
    ("bfloat16", ("K", "K"), "bfloat16", True, dict(schedule="pingpong", delay_release=1,
                                                    bM=128, bN=128, stages=4)),
    ("tfloat32", ("K", "K"), "float32", True, dict(tf32x3=True, bN=128, consumers=2)),
    ("tfloat32", ("K", "K"), "float32", False, dict(tf32x3=True, bN=128, consumers=1,
                                                    schedule="plain", stages=3))])
def test_cute_hopper_compiles_without_local_memory(dtype, majors, out, tma, fields):
    from numba import cuda
    from gemm.hopper import hopper_function
    epilogue = {k: fields.pop(k) for k in ("bias", "bias_dtype", "activation", "split_k")
                if k in fields}
    cfg = HopperConfig(dtype=dtype, **fields)
    v = HopperVariant(kernel_config(cfg), *majors, out, True, tma_store=tma,
                      **epilogue)
    ptx, _ = cuda.compile_ptx(hopper_function(v), v.signature, cc=(9, 0, "a"),
                              launch_bounds=(cfg.threads, cfg.blocks_per_sm))
    assert ".local" not in ptx
    blocks = cfg.bK // 16 * cfg.bM // 64            # a k-step's wgmma (LLVM may copy the loop)
    assert ptx.count("wgmma.mma_async") % blocks == 0 < ptx.count("wgmma.mma_async")
    assert "cp.async.bulk.tensor.3d.shared::cluster.global" in ptx           # TMA loads
    assert ("cp.async.bulk.tensor.3d.global.shared::cta" in ptx) == tma     # TMA stores
    assert sign_extractions(ptx) <= 2


@pytest.mark.parametrize("variant, text", [
    (dict(config=kernel_config(HopperConfig(schedule="plain", consumers=1, bN=64,
                                            dtype="float8_e4m3fn")),
          b_dtype="float8_e4m3fn", scale="tensor", promote=True),
     "plain schedule with FP8's promotion"),
    (dict(split_k=True, bias="columns"), "split-K with a fused epilogue"),
])
def test_cute_hopper_refuses_what_it_does_not_run(variant, text):
    from gemm.hopper.cute_gemm import kernel_function
    v = HopperVariant(**dict(dict(vec_c=False), **variant))
    with pytest.raises(ValueError, match=text):
        kernel_function(v)


@pytest.mark.parametrize("tiles_m, tiles_n, nb, group, sk", [
    (5, 3, 1, 2, 1), (7, 4, 2, 8, 1), (3, 5, 2, 2, 3), (16, 1, 1, 8, 2), (1, 9, 3, 4, 1)])
def test_tile_decoder_visits_units_in_grouped_order(tiles_m, tiles_n, nb, group, sk):
    """tile_coords (its Python function) against the order written as loops: K ranges,
    then matrices, then sweeps of ``group`` tile rows (the last one shorter), column by
    column, down a sweep's rows."""
    import numpy as np
    from gemm.cute.scheduler import grouped_tile
    from gemm.hopper.cute_gemm import tile_decoder
    want = [(g0 + r, tn, bz, ks) for ks in range(sk) for bz in range(nb)
            for g0 in range(0, tiles_m, group) for tn in range(tiles_n)
            for r in range(min(group, tiles_m - g0))]
    decode = tile_decoder(group, sk > 1, grouped_tile.py_func).py_func
    u32 = np.uint32
    got = [tuple(int(c) for c in decode(u32(u), u32(tiles_m), u32(tiles_n), u32(nb)))
           for u in range(len(want))]
    assert got == want


def test_matmul_routes_cute_hopper_with_3xtf32():
    from gemm.api import route
    assert route("bfloat16", "bfloat16", "cute_hopper") == ("tensorcore", "cute_hopper")
    assert route("float32", "float32", "cute_hopper", precision="tf32x3") == \
        ("tensorcore", "cute_hopper")
    with pytest.raises(ValueError, match="sm80"):
        route("float32", "float32", "sm80", precision="tf32x3")


@pytest.mark.gpu
@pytest.mark.parametrize("shape, dtype, a_col, b_row, alpha, beta, out_dtype, batch, config", [
    ((1000, 500, 3000), "bfloat16", False, False, 1.0, 0.0, None, 0, None),
    ((336, 129, 104), "float16", True, False, 1.0, 0.5, None, 0, None),
    ((64, 256, 4096), "bfloat16", False, True, 0.5, 0.0, "bfloat16", 0, None),
    ((3000, 2104, 200), "float16", True, True, 1.0, 0.0, "float16", 0, None),
    ((129, 300, 520), "bfloat16", False, False, 2.0, -1.0, None, 3, None),
    ((1, 1, 64), "bfloat16", False, False, 1.0, 0.0, None, 0, None),
    # configs: split-K (its reduction's alpha and beta), swapped operands on narrow tiles,
    # pingpong with a group in flight
    ((129, 296, 4104), "bfloat16", False, True, 0.5, 0.5, None, 2, dict(split_k=3)),
    ((8, 4096, 4096), "bfloat16", False, False, 1.0, 0.0, "bfloat16", 0,
     dict(bN=16, stages=8, swap_ab=True, split_k=4)),
    ((2056, 2000, 1032), "float16", True, False, 1.0, 0.0, "float16", 0,
     dict(bM=128, bN=128, stages=4, schedule="pingpong", delay_release=1)),
    # the plain schedule, one group in flight and none, over a batch with beta
    ((1030, 704, 1000), "bfloat16", False, True, 1.0, 0.0, "bfloat16", 0,
     dict(bM=128, bN=128, stages=4, consumers=1, schedule="plain", delay_release=1)),
    ((304, 260, 520), "float16", True, False, 0.5, 0.5, None, 2,
     dict(bM=64, bN=128, stages=3, consumers=1, schedule="plain")),
    # float32 by 3xTF32, a pingpong 3xTF32 config with beta, and the plain schedule's
    ((1000, 500, 3000), "float32", False, False, 1.0, 0.0, None, 0, None),
    ((300, 200, 520), "float32", False, False, 1.0, 0.5, None, 0,
     dict(dtype="tfloat32", tf32x3=True, bN=128, consumers=2, schedule="pingpong")),
    ((500, 300, 1000), "float32", False, False, 1.0, 0.5, None, 2,
     dict(dtype="tfloat32", tf32x3=True, bN=128, stages=3, consumers=1, schedule="plain")),
])
def test_cute_hopper_matches_float64_on_a_hopper_gpu(shape, dtype, a_col, b_row, alpha, beta,
                                                     out_dtype, batch, config):
    torch = pytest.importorskip("torch")
    from gpucase import require_gpu
    import gemm
    require_gpu()
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs a GPU of compute capability 9.x")
    (m, n, k), dt = shape, getattr(torch, dtype)
    lead = (batch,) if batch else ()
    a = torch.randn(*lead, m, k, device="cuda").to(dt)
    if a_col:
        a = a.transpose(-1, -2).contiguous().transpose(-1, -2)
    b = torch.randn(k, n, device="cuda").to(dt)
    if not b_row:
        b = b.T.contiguous().T
    od = getattr(torch, out_dtype) if out_dtype else torch.float32
    c0 = torch.randn(*lead, m, n, device="cuda").to(od)
    out = c0.clone() if beta else torch.full_like(c0, float("nan"))
    if config is None:
        prec = dict(precision="tf32x3") if dt == torch.float32 else {}
        got = gemm.matmul(a, b, out=out, alpha=alpha, beta=beta, kernel="cute_hopper", **prec)
    else:
        from gemm.hopper import hopper_matmul
        got = hopper_matmul(a, b, out, alpha=alpha, beta=beta, config=HopperConfig(**config))
    ref = alpha * (a.double() @ b.double()) + beta * c0.double()
    bound = abs(alpha) * (a.double().abs() @ b.double().abs()) + abs(beta) * c0.double().abs()
    tol = 2 ** -7 if od != torch.float32 else 1e-5 if dt == torch.float32 else 2 ** -12
    assert got is out and not torch.isnan(got).any()
    assert ((got.double() - ref).abs() <= tol * bound + 1e-30).all()


@pytest.mark.gpu
@pytest.mark.parametrize("shape, dtype, bias, bias_dtype, activation, out_dtype, beta, col_out", [
    ((4096, 4096, 4096), "bfloat16", "columns", "bfloat16", "gelu", "bfloat16", 0.0, False),
    ((1000, 520, 264), "float16", "rows", "float32", "silu", "float32", 0.5, False),
    ((130, 136, 104), "bfloat16", "columns", "float32", "gelu_tanh", "float32", 0.0, True),
    ((257, 384, 512), "bfloat16", "rows", "bfloat16", "relu", "bfloat16", 0.0, False),
    ((130, 136, 104), "float16", "columns", "float16", "gelu_tanh", "float16", 0.0, False)])
def test_cute_hopper_fused_epilogue_on_a_hopper_gpu(shape, dtype, bias, bias_dtype, activation,
                                                    out_dtype, beta, col_out):
    torch = pytest.importorskip("torch")
    from gpucase import require_hopper
    from gemm.hopper import hopper_matmul
    require_hopper()
    F = torch.nn.functional
    (m, n, k), dt, od = shape, getattr(torch, dtype), getattr(torch, out_dtype)
    a = torch.randn(m, k, device="cuda").to(dt)
    b = torch.randn(n, k, device="cuda").to(dt).T
    vec = torch.randn(n if bias == "columns" else m, device="cuda").to(getattr(torch,
                                                                                bias_dtype))
    vec = vec if bias == "columns" else vec[:, None]
    c0 = torch.randn(m, n, device="cuda").to(od)
    if col_out:
        c0 = c0.T.contiguous().T
    out = c0.clone() if beta else torch.full_like(c0, float("nan"))
    got = hopper_matmul(a, b, out, beta=beta, bias=vec, activation=activation)
    pre = a.double() @ b.double() + beta * c0.double() + vec.double()
    act = {"gelu": F.gelu, "silu": F.silu, "relu": F.relu,
           "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}[activation]
    ref = act(pre)
    bound = a.double().abs() @ b.double().abs() + abs(beta) * c0.double().abs() \
        + vec.double().abs()
    rounding = 2 ** -8 if od != torch.float32 else 0.0
    approx = 2 ** -12 if od != torch.float32 else 1e-6  # tanh.approx for 16-bit outs
    tol = 1.2 * k * 2 ** -24 * bound + approx * pre.abs() + rounding * ref.abs() + 1e-30
    assert got is out and not torch.isnan(got).any()
    assert ((got.double() - ref).abs() <= tol).all()


@pytest.mark.gpu
@pytest.mark.parametrize("activation", ["gelu", None])
def test_matmul_fused_epilogue_keeps_its_plan_on_a_hopper_gpu(activation):
    """gemm.matmul with a bias (and an activation) as a linear layer calls it: no out; the
    second and third calls take the kept plan with new operands and a new bias."""
    torch = pytest.importorskip("torch")
    from gpucase import require_hopper
    import gemm
    require_hopper()
    F = torch.nn.functional
    for _ in range(3):
        x = torch.randn(300, 512, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(264, 512, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(264, device="cuda", dtype=torch.bfloat16)
        got = gemm.matmul(x, w.T, bias=b, activation=activation)
        pre = x.double() @ w.double().T + b.double()
        ref = F.gelu(pre) if activation else pre
        bound = x.double().abs() @ w.double().abs().T + b.double().abs()
        assert got.dtype == torch.bfloat16 and got.shape == (300, 264)
        assert ((got.double() - ref).abs() <= 1.2 * 512 * 2 ** -24 * bound
                + 1e-6 * pre.abs() + 2 ** -8 * ref.abs() + 1e-30).all()


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(128, 4096, 14336), (16, 1024, 16384)])
def test_cute_hopper_keeps_its_plan_with_the_rules_split_on_a_hopper_gpu(m, n, k):
    """kernel="cute_hopper" takes the rules (gemm.hopper.rules): split-K (and at 16 rows
    swapped operands) on these shapes of a 132-SM GPU; the second and third calls take the
    kept plan, which launches the kernel with its bias and scales arrays and then the
    reduction."""
    torch = pytest.importorskip("torch")
    from gpucase import require_hopper
    import gemm
    from gemm.hopper import plan_call
    require_hopper()
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    assert plan_call(x, w.T).split_k
    for _ in range(3):
        x.normal_()
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        got = gemm.matmul(x, w.T, out=out, kernel="cute_hopper")
        ref = x.double() @ w.double().T
        bound = x.double().abs() @ w.double().abs().T
        assert got is out and ((got.double() - ref).abs() <= 2 ** -7 * bound + 1e-30).all()


@pytest.mark.gpu
def test_matmul_refuses_a_strided_torch_bias_on_a_hopper_gpu():
    """A strided bias is refused, not copied (a kept plan would read the copy's place)."""
    torch = pytest.importorskip("torch")
    from gpucase import require_hopper
    import gemm
    require_hopper()
    x = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(128, device="cuda", dtype=torch.bfloat16)[::2]
    with pytest.raises(ValueError, match="bias must be contiguous"):
        gemm.matmul(x, x.T, bias=b)


if __name__ == "__main__":
    from simcase import switch_threads_often
    switch_threads_often()
    print(json.dumps(run_cases(int(sys.argv[1]), int(sys.argv[2]))))
