"""FP8 products with scales (``gemm.scaled_matmul``, gemm.scaled) on the Hopper kernel written
with gemm.cute. In numba's CUDA simulator (this file as a script in a subprocess): fresh random
FP8 operands (e4m3 and e5m2, as uint8 bits with ``formats``), scales per tensor, per row and
per block (A's row- and column-major), promoted and fast accumulation, bias, fused activations,
f32 / bf16 / f16 outs, a column-major out (the kernel's X is then B), odd shapes over several
k-tiles (K a multiple of 16: TMA's rows), the out poisoned, against float64 of the dequantized
operands; bad input and variants that cannot run refused; the kernel's PTX for sm_90a without
local memory and with FP8 wgmma. On a GPU of compute capability 9.x with torch: float8 tensors
against float64 and beside ``torch._scaled_mm``'s error."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:      # run as a script by the simulator test
        sys.path.insert(0, str(p))

from layoutalg.atom.float8 import float8_encode, float8_values  # noqa: E402
from gemm.hopper import HopperConfig, HopperVariant, kernel_config  # noqa: E402

SMALL = dict(bM=64, bN=64, stages=2, consumers=1)
OUT_ROUNDING = {"float32": 0.0, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
# (config fields, m, n, k, case keywords)
CASES = [
    (SMALL, 70, 96, 400, dict(out_dtype="bfloat16")),                   # TMA epilogue
    (SMALL, 40, 72, 304, dict(formats=("e4m3", "e5m2"), scale="rows", fast=True)),
    (dict(SMALL, consumers=2), 130, 64, 144, dict(formats=("e5m2", "e4m3"), scale="rows",
                                                  bias="columns", out_dtype="float16",
                                                  activation="gelu")),
    (SMALL, 50, 40, 304, dict(col_out=True, scale="rows", bias="rows")),
    (dict(SMALL, bM=128), 136, 80, 144, dict(scale="rows", bias="rows", out_dtype="bfloat16",
                                             fast=True)),
    # DeepSeek's blocks: 1 x 128 of A (row-major, then column-major scales), 128 x 128 of B
    (SMALL, 70, 200, 400, dict(scale="blocks", out_dtype="bfloat16", bias="columns",
                               activation="silu")),
    # pingpong (8 tiles on 3 blocks): one group in flight with row scales; promoted with
    # block scales
    (dict(SMALL, consumers=2, schedule="pingpong", delay_release=1), 200, 72, 144,
     dict(scale="rows", bias="columns", out_dtype="bfloat16", fast=True)),
    (dict(SMALL, consumers=2, schedule="pingpong"), 200, 72, 272, dict(scale="blocks_mn",
                                                                         fast=True)),
]


def fp8(rng, shape, fmt):
    """(uint8 bits, their float64 values) of random normal values rounded to ``fmt``."""
    bits = float8_encode(rng.standard_normal(shape), fmt)
    return bits, float8_values(fmt)[bits]


def case(fields, m, n, k, seed, formats=("e4m3", "e4m3"), scale="tensor", fast=False,
         bias=None, out_dtype="float32", col_out=False, activation=None):
    """Error ratio of one scaled_matmul against float64 (<= 1 passes): max |got - ref| /
    (1e-5 |A| |B| (scaled) + the out's rounding of |ref|), the first term times 1.2 (the
    activations' slopes are below it) where an activation is applied."""
    from numba import cuda
    import gemm
    from activations64 import ACTIVATIONS64
    rng = np.random.default_rng(seed)
    a, a64 = fp8(rng, (m, k), formats[0])
    bt, bt64 = fp8(rng, (n, k), formats[1])
    kb, nb = -(-k // 128), -(-n // 128)
    if scale == "tensor":
        sa, sb = (rng.uniform(0.5, 2, (1,)).astype(np.float32) for _ in range(2))
    elif scale == "rows":
        sa = rng.uniform(0.5, 2, (m, 1)).astype(np.float32)
        sb = rng.uniform(0.5, 2, (1, n)).astype(np.float32)
    else:
        sa = rng.uniform(0.5, 2, (m, kb)).astype(np.float32)
        sb = rng.uniform(0.5, 2, (nb, kb)).astype(np.float32)
    vec, bias64 = None, 0.0
    if bias is not None:
        vec = rng.standard_normal((n,) if bias == "columns" else (m, 1)).astype(np.float32)
        bias64 = vec.astype(np.float64)
    stored = np.uint16 if out_dtype == "bfloat16" else np.dtype(out_dtype).type
    poison = np.full((m, n), 0x7FC0 if out_dtype == "bfloat16" else np.nan, stored)
    out = cuda.to_device(np.asfortranarray(poison) if col_out else poison)
    d = cuda.to_device
    SA = d(np.asfortranarray(sa)) if scale == "blocks_mn" else d(sa)     # (column-major)
    gemm.scaled_matmul(d(a), d(bt).T, SA, d(sb), out=out, out_dtype=out_dtype,
                       bias=None if vec is None else d(vec), use_fast_accum=fast,
                       formats=formats, config=HopperConfig(**fields), activation=activation)
    got = out.copy_to_host()
    got = ((got.astype(np.uint32) << 16).view(np.float32) if out_dtype == "bfloat16"
           else got).astype(np.float64)
    if scale.startswith("blocks"):          # each element's block's scale
        xa = a64 * np.repeat(sa.astype(np.float64), 128, axis=1)[:, :k]
        xb = bt64 * np.repeat(np.repeat(sb.astype(np.float64), 128, axis=0), 128, axis=1)[:n, :k]
    else:
        xa = a64 * sa.astype(np.float64).reshape(-1, 1)
        xb = bt64 * sb.astype(np.float64).reshape(-1, 1)
    ref = xa @ xb.T + bias64
    slope = 1.0
    if activation is not None:
        ref, slope = ACTIVATIONS64[activation](ref), 1.2
    tol = slope * 1e-5 * (np.abs(xa) @ np.abs(xb.T) + np.abs(bias64)) + \
        OUT_ROUNDING[out_dtype] * np.abs(ref) + 1e-30
    return float(np.nan_to_num(np.abs(got - ref) / tol, nan=np.inf).max())


def errors():
    from numba import cuda
    import gemm
    from simcase import outcomes
    d = cuda.to_device
    u8, s1 = np.zeros((16, 32), np.uint8), np.ones(1, np.float32)
    e4 = ("e4m3", "e4m3")

    def call(a=u8, bt=u8, sa=s1, sb=s1, **kw):
        kw.setdefault("formats", e4)
        return gemm.scaled_matmul(d(a), d(bt).T, d(sa), d(sb), **kw)
    cases = {
        "no formats": lambda: call(formats=None),
        "bad formats": lambda: call(formats=("e4m3", "e3m4")),
        "bf16 operands": lambda: call(np.zeros((16, 32), np.uint16), formats=None),
        "B row-major": lambda: gemm.scaled_matmul(d(u8), d(u8.T.copy()), d(s1), d(s1),
                                                  formats=e4),
        "scale dtype": lambda: call(sa=np.ones(1, np.float64)),
        "scale shape": lambda: call(sa=np.ones(3, np.float32)),
        "scale rows mixed": lambda: call(sa=np.ones((16, 1), np.float32),
                                         sb=np.ones((1, 3), np.float32)),
        "block scales of B column-major": lambda: call(np.zeros((16, 256), np.uint8),
                                                       np.zeros((256, 256), np.uint8),
                                                       np.ones((16, 2), np.float32),
                                                       np.ones((2, 2), np.float32).T),
        "out_dtype": lambda: call(out_dtype="float8_e4m3fn"),
        "block scales, column-major out": lambda: call(
            sa=np.ones((16, 1), np.float32), sb=np.ones((1, 1), np.float32),
            out=d(np.zeros((16, 16), np.float32, order="F")), out_dtype="float32"),
        "fast accum type": lambda: call(use_fast_accum=1),
        "promote config": lambda: call(config=HopperConfig(bN=256)),
        "bias length": lambda: call(bias=d(np.zeros(15, np.float32))),
        "activation": lambda: call(activation="tanh"),
    }
    return outcomes(cases)


EXPECTED_ERRORS = {
    "no formats": ("TypeError", "uint8 arrays of their bits, with formats="),
    "bad formats": ("TypeError", "formats must be a pair of 'e4m3' / 'e5m2'"),
    "bf16 operands": ("TypeError", "A has dtype uint16; an FP8 product takes"),
    "B row-major": ("ValueError", "FP8 operands must be K-major"),
    "scale dtype": ("TypeError", "scale_a must be float32, not float64"),
    "scale shape": ("ValueError", "scale_a must be one float32 value or of shape (16, 1)"),
    "scale rows mixed": ("ValueError", "got (16, 1) and (1, 3)"),
    "block scales of B column-major": ("ValueError", "scale_b must be contiguous, row-major"),
    "out_dtype": ("TypeError", "out_dtype must be one of"),
    "block scales, column-major out": ("ValueError", "block scales need a row-major out"),
    "fast accum type": ("TypeError", "use_fast_accum must be a bool"),
    "promote config": ("ValueError", "at most 64 accumulators per thread"),
    "bias length": ("ValueError", "bias of shape (15,) fits neither"),
    "activation": ("ValueError", "scaled_matmul: unknown activation 'tanh'"),
}


def run(which, seed):
    from simcase import switch_threads_often
    switch_threads_often()
    if which == "errors":
        return errors()
    return [case(fields, m, n, k, seed + i, **kw) for i, (fields, m, n, k, kw) in
            enumerate(CASES)]


def test_scaled_matmul_matches_float64_in_the_simulator():
    from simcase import simulator_report
    seed = int.from_bytes(os.urandom(3), "little")
    ratios = simulator_report(__file__, "cases", seed)
    assert len(ratios) == len(CASES) and all(r <= 1 for r in ratios), (seed, ratios)


def test_bad_fp8_input_gets_a_clear_error_in_the_simulator():
    from simcase import check_outcomes, simulator_report
    check_outcomes(simulator_report(__file__, "errors", 0), EXPECTED_ERRORS)


def test_a_block_past_the_shared_limit_with_its_mbarriers_is_refused_its_tma_epilogue():
    """A 128 x 128 FP8 tile of 6 slots with row scales and a bias per row: its dynamic bytes
    are the limit exactly, and the mbarriers (static) push the block past it (the driver
    refused the launch); the call stores from registers instead."""
    from gemm.arch.smem import DYNAMIC_SHARED_LIMIT
    cfg = HopperConfig(dtype="float8_e4m3fn", bN=128, stages=6)
    v = HopperVariant(kernel_config(cfg), "K", "K", "float16", True, tma_store=True,
                      scale="rows", bias="rows")
    assert v.shared_bytes == DYNAMIC_SHARED_LIMIT < v.block_shared_bytes


@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_promoted_row_scales_fit_in_five_slots_past_the_padded_mbarriers(out):
    """Promoted row scales on 2 x 64 x 128 tiles: 6 slots, the TMA epilogue's staging and
    vectors are 231936 dynamic bytes, under the limit, but the kernel's dynamic arrays are
    SWIZZLE_ALIGN-aligned, so its static mbarriers take SWIZZLE_ALIGN bytes before them and the
    block passes the limit (the driver refused the launch); in 5 slots it fits, which the
    default takes (gemm.hopper._Call: a slot fewer before the TMA epilogue is dropped)."""
    from gemm.arch.smem import DYNAMIC_SHARED_LIMIT
    from gemm.arch.smem import SWIZZLE_ALIGN
    for stages, fits in ((6, False), (5, True)):
        cfg = HopperConfig(dtype="float8_e4m3fn", bN=128, stages=stages)
        v = HopperVariant(kernel_config(cfg), "K", "K", out, True, tma_store=True,
                          scale="rows", promote=True)
        assert v.block_shared_bytes == v.shared_bytes + SWIZZLE_ALIGN
        assert (v.block_shared_bytes <= DYNAMIC_SHARED_LIMIT) == fits
        if stages == 6:
            assert v.shared_bytes == 231936 < DYNAMIC_SHARED_LIMIT


@pytest.mark.parametrize("m, n", [(4096, 4096), (2048, 14336), (129, 4096), (8192, 128),
                                  (128, 14336), (16, 4096), (64, 14336), (128, 8448)])
def test_fast_fp8_defaults_keep_the_tma_epilogue(m, n):
    """Without promotion an FP8 call of 128 columns or more runs pingpong 128 x 128 tiles;
    one of at most 128 rows (one product) whose 64 x 64 tiles fill at most two waves, one
    consumer on those tiles with 8 slots; with any out, row scales and a bias they fit the
    block's shared memory (else the TMA epilogue would be dropped); narrower tiles stay as
    the shape's default."""
    from gemm.arch.smem import DYNAMIC_SHARED_LIMIT
    from gemm.hopper import default_config, fp8_fast_config, fp8_few_rows
    few = fp8_few_rows(m, n, 1, 132)
    assert few == (m <= 128 and -(-m // 64) * -(-n // 64) <= 264)
    cfg = fp8_fast_config(default_config("float8_e4m3fn", m, n, 4096, 1, 132), few)
    if few:
        assert (cfg.schedule, cfg.consumers, cfg.bM, cfg.bN, cfg.stages, cfg.split_k) == (
            "cooperative", 1, 64, 64, 8, 1)
        assert not fp8_few_rows(m, n, 2, 132)                   # a batch: as before
    else:
        assert (cfg.schedule, cfg.bM, cfg.bN, cfg.delay_release) == ("pingpong", 128, 128, 1)
    for out in ("float32", "bfloat16"):
        for bias in ("rows", "columns"):
            v = HopperVariant(kernel_config(cfg), "K", "K", out, True, tma_store=True,
                              scale="rows", bias=bias)
            assert v.block_shared_bytes <= DYNAMIC_SHARED_LIMIT
    narrow = default_config("float8_e4m3fn", 4096, 64, 4096, 1, 132)
    assert fp8_fast_config(narrow) == narrow


@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_staged_block_scales_leave_room_for_the_tma_epilogue_in_five_slots(out):
    """Block scales staged in the slots (DeepGEMM's way) take a slot's rows and B's in each
    of the ring's slots: with promotion's 6 slots the block would lose its TMA epilogue, so
    the default takes 5 (gemm.hopper._Call), which fit with a bias of either kind."""
    from gemm.arch.smem import DYNAMIC_SHARED_LIMIT
    from gemm.hopper.config import STAGING_BYTES
    for stages, fits in ((6, False), (5, True)):
        cfg = HopperConfig(dtype="float8_e4m3fn", bN=128, stages=stages)
        for bias in ("none", "rows", "columns"):
            v = HopperVariant(kernel_config(cfg), "K", "K", out, True, tma_store=True,
                              scale="blocks", promote=True, scale_a_mn=True,
                              stage_scales=True, bias=bias)
            assert v.scale_floats == cfg.tile_m + 4
            # past the ring and the TMA epilogue's staging and vectors, which the
            # epilogue places there (gemm.hopper.cute_epilogue)
            assert v.scales_at == stages * cfg.slot_bytes + cfg.consumers * (
                STAGING_BYTES + 4 * v.vector_floats)
            assert (v.block_shared_bytes <= DYNAMIC_SHARED_LIMIT) == fits


@pytest.mark.parametrize("fields, config, text", [
    (dict(scale="blocks"), {}, "applied as each k-tile is promoted"),
    (dict(scale="blocks", promote=True, stage_scales=True), dict(bN=128),
     "copies MN-major block scales"),
    (dict(scale="blocks", promote=True), dict(bN=256, bM=64, consumers=1), "bN dividing 128"),
    (dict(scale="rows", scale_a_mn=True), {}, "scale_a_mn is of block scales"),
    (dict(scale="rows", promote=True), dict(bN=256), "at most 64 of each per thread"),
    (dict(scale="none"), {}, "scale one of"),
])
def test_fp8_variants_that_cannot_run_are_refused(fields, config, text):
    cfg = HopperConfig(dtype="float8_e4m3fn", **config)
    with pytest.raises(ValueError, match=text):
        HopperVariant(kernel_config(cfg), "K", "K", "bfloat16", True, **fields)


@pytest.mark.parametrize("formats, out, fields", [
    (("float8_e4m3fn", "float8_e4m3fn"), "bfloat16", dict(scale="tensor", promote=True)),
    (("float8_e4m3fn", "float8_e5m2"), "float32", dict(scale="rows", bias="columns")),
    # block scales staged in the slots by the producer: a bulk copy a k-tile
    (("float8_e5m2", "float8_e4m3fn"), "bfloat16", dict(scale="blocks", promote=True,
                                                         scale_a_mn=True, stage_scales=True)),
])
def test_fp8_kernel_compiles_to_fp8_wgmma_without_local_memory(formats, out, fields):
    from numba import cuda
    from gemm.hopper import hopper_function
    promote = fields.get("promote", False)
    cfg = HopperConfig(dtype=formats[0], bN=128 if promote else 256, stages=4)
    v = HopperVariant(kernel_config(cfg), "K", "K", out, True, tma_store=out != "float32",
                      b_dtype=formats[1], **fields)
    ptx, _ = cuda.compile_ptx(hopper_function(v), v.signature, cc=(9, 0, "a"),
                              launch_bounds=(cfg.threads, cfg.blocks_per_sm))
    a, b = (f[7:11] for f in formats)          # float8_e4m3fn -> e4m3
    assert ".local" not in ptx
    assert f"wgmma.mma_async.sync.aligned.m64n{cfg.bN}k32.f32.{a}.{b}" in ptx
    bulk = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
    assert (bulk in ptx) == v.stage_scales
    from test_hopper_cute import sign_extractions
    assert sign_extractions(ptx) <= 2           # no signed index wrapped around


def _dequantized(torch, m, n, k, formats, scales, seed):
    """Torch FP8 operands A (m, k) row-major and B (k, n) column-major, their scales, and
    float64 of A and B dequantized."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).to(getattr(torch, formats[0]))
    b = torch.randn(n, k, device="cuda", generator=g).to(getattr(torch, formats[1])).t()
    if scales == "tensor":
        sa, sb = (torch.rand((), device="cuda", generator=g) + 0.5 for _ in range(2))
    elif scales == "rows":
        sa = torch.rand(m, 1, device="cuda", generator=g) + 0.5
        sb = torch.rand(1, n, device="cuda", generator=g) + 0.5
    else:                                   # blocks: A's scales column-major (torch's)
        kb, nb = -(-k // 128), -(-n // 128)
        sa = (torch.rand(kb, m, device="cuda", generator=g) + 0.5).t()
        sb = torch.rand(nb, kb, device="cuda", generator=g) + 0.5
        xa = a.double() * sa.double().repeat_interleave(128, 1)[:, :k]
        xb = b.double() * sb.double().repeat_interleave(128, 0).repeat_interleave(128, 1)[
            :n, :k].t()
        return a, b, sa, sb, xa, xb
    return a, b, sa, sb, a.double() * sa.double(), b.double() * sb.double()


def _tolerance(xa, xb, k, fast, out_rounding, ref):
    """A bound on |got - ref|: the tensor cores keep about 14 bits of their sums (DeepSeek-V3's
    report), so each wgmma of K = 32 may lose 2**-14 of |A| |B|'s part so far; promoted, only
    within a k-tile of four, then float32 additions; plus the out's rounding."""
    bound = xa.abs() @ xb.abs()
    lost = (k / 32 if fast else 4) * 2.0 ** -14 + k * 2.0 ** -24
    return lost * bound + max(out_rounding, 2.0 ** -23) * ref.abs() + 1e-30


@pytest.mark.gpu
@pytest.mark.parametrize("shape, formats, scales, fast, out_dtype, bias, col_out, act", [
    ((300, 264, 512), ("float8_e4m3fn",) * 2, "tensor", False, "bfloat16", None, False, None),
    ((1000, 700, 4096), ("float8_e4m3fn", "float8_e5m2"), "rows", True, "float32", "columns",
     False, "relu"),
    ((130, 72, 1040), ("float8_e5m2", "float8_e4m3fn"), "rows", False, "float16", "rows",
     True, None),
    ((1, 1, 16), ("float8_e4m3fn",) * 2, "tensor", True, "bfloat16", None, False, None),
    # a decode step's default: one consumer on 64 x 64 tiles
    ((96, 4100, 1040), ("float8_e4m3fn",) * 2, "rows", True, "bfloat16", "columns", False,
     "gelu"),
    ((700, 300, 1040), ("float8_e4m3fn",) * 2, "blocks", False, "float32", "columns", False,
     "gelu_tanh"),
    # rows not a multiple of 4: A's scales read from global memory, not staged by bulk copies
    ((130, 264, 528), ("float8_e4m3fn",) * 2, "blocks", False, "bfloat16", None, False, None),
])
def test_scaled_matmul_matches_float64_on_a_hopper_gpu(shape, formats, scales, fast, out_dtype,
                                                        bias, col_out, act):
    torch = pytest.importorskip("torch")
    from gpucase import require_hopper
    from activations64 import ACTIVATIONS64
    import gemm
    require_hopper()
    m, n, k = shape
    a, b, sa, sb, xa, xb = _dequantized(torch, m, n, k, formats, scales, seed=m + k)
    od = getattr(torch, out_dtype)
    vec = None
    if bias is not None:
        vec = torch.randn(n if bias == "columns" else m, device="cuda").to(torch.bfloat16)
        vec = vec if bias == "columns" else vec[:, None]
    out = torch.full((m, n) if not col_out else (n, m), float("nan"), device="cuda",
                     dtype=od)
    out = out.T if col_out else out
    got = gemm.scaled_matmul(a, b, sa, sb, out=out, out_dtype=out_dtype, bias=vec,
                             use_fast_accum=fast, activation=act)
    ref = xa @ xb + (0 if vec is None else vec.double())
    tol = _tolerance(xa, xb, k, fast, OUT_ROUNDING[out_dtype], ref)
    if act is not None:         # slopes below 1.2
        ref = torch.tensor(ACTIVATIONS64[act](ref.cpu().numpy()), device="cuda")
        tol = 1.2 * tol + OUT_ROUNDING[out_dtype] * ref.abs()
    assert got is out and not torch.isnan(got).any()
    assert ((got.double() - ref).abs() <= tol).all()


@pytest.mark.gpu
def test_scaled_matmul_keeps_its_plan_on_a_hopper_gpu():
    """As an FP8 linear layer calls it (no out): the second and third calls take the kept
    plan with new operands and new scales."""
    torch = pytest.importorskip("torch")
    from gpucase import require_hopper
    import gemm
    require_hopper()
    for seed in range(3):
        a, b, sa, sb, xa, xb = _dequantized(torch, 256, 384, 1024, ("float8_e4m3fn",) * 2,
                                            "rows", seed)
        got = gemm.scaled_matmul(a, b, sa, sb)
        ref = xa @ xb
        assert got.dtype == torch.bfloat16 and got.shape == (256, 384)
        assert ((got.double() - ref).abs()
                <= _tolerance(xa, xb, 1024, False, 2.0 ** -8, ref)).all()


@pytest.mark.gpu
@pytest.mark.parametrize("fast", [False, True])
def test_scaled_matmul_error_is_no_worse_than_torch_on_a_hopper_gpu(fast):
    """Against float64 of the dequantized operands, with a float32 out over a long K, the
    largest error is at most torch._scaled_mm's (same use_fast_accum) with a margin of 25%."""
    torch = pytest.importorskip("torch")
    from gpucase import require_hopper
    import gemm
    require_hopper()
    a, b, sa, sb, xa, xb = _dequantized(torch, 512, 512, 16384, ("float8_e4m3fn",) * 2,
                                        "tensor", seed=5)
    ref = xa @ xb
    ours = gemm.scaled_matmul(a, b, sa, sb, out_dtype="float32", use_fast_accum=fast)
    theirs = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.float32, use_fast_accum=fast)
    err = [float((x.double() - ref).abs().max()) for x in (ours, theirs)]
    assert err[0] <= 1.25 * err[1], err


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], int(sys.argv[2]))))
