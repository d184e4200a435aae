"""The Hopper GEMM without a GPU: its configs and shape rules, what it reads off layoutalg
(TMA boxes, the accumulator fragment), and the kernel's PTX for sm_90a (wgmma, TMA,
mbarriers, setmaxnreg; no local memory, no spills)."""

import os
import re
from dataclasses import replace

import pytest

from gemm.hopper import HopperConfig, HopperVariant, kernel_config

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1"


@pytest.mark.parametrize("kw, match", [
    (dict(bM=96), "bM must be 64 or 128"),
    (dict(bN=96), "bN must be a multiple of 64"),
    (dict(bN=320), "bN must be a multiple of 64"),
    (dict(bN=20), "or of 8 below 64"),
    (dict(bK=32), "bK must be 64"),
    (dict(consumers=3), "consumers must be 1 or 2"),
    (dict(stages=1), "stages must be in 2..8"),
    (dict(delay_release=2), "delay_release"),
    (dict(bM=128, bN=256), "256 accumulators"),
    (dict(stages=6), "shared memory"),
    (dict(memory_registers=20), "memory_registers"),
    (dict(dtype="float32"), "dtype"),
    (dict(schedule="stream-k"), "schedule"),
    (dict(schedule="plain", consumers=2), "consumers must be 1"),
    (dict(split_k=0), "split_k must be a positive int"),
    (dict(split_k=65), "split_k must be at most 64"),
    (dict(tf32x3=True), "tf32x3 takes dtype 'tfloat32'"),
    (dict(tf32x3=True, dtype="tfloat32", bN=128, delay_release=1), "delay_release 0"),
    (dict(tf32x3=True, dtype="tfloat32"), "at most 64 accumulators"),
    (dict(tf32x3=1, dtype="tfloat32", bN=128), "tf32x3 must be a bool"),
])
def test_bad_configs_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        HopperConfig(**kw)


def test_config_defaults():
    cfg = HopperConfig()
    assert (cfg.tile_m, cfg.bN, cfg.bK, cfg.threads) == (128, 256, 64, 384)
    assert HopperConfig(dtype="tfloat32").bK == 32
    assert HopperConfig(consumers=1).memory_registers is None     # nothing to split
    with pytest.raises(ValueError, match="K-major"):
        HopperVariant(HopperConfig(dtype="tfloat32"), "K", "MN")


def ptx_d_fragment(thread, i):
    """Row and column of accumulator i of a warpgroup thread, from the PTX ISA's wgmma D
    fragment (written out here independently of layoutalg)."""
    w, lane = divmod(thread, 32)
    g, t = divmod(lane, 4)
    j, e = divmod(i, 4)
    return 16 * w + g + 8 * (e // 2), 8 * j + 2 * t + e % 2


@pytest.mark.parametrize("bn", [256, 128, 64, 16])
def test_wgmma_accumulators_are_the_ptx_fragment(bn):
    """The atom's accumulator layout, (thread, value) -> m + 64 n, against the PTX ISA's
    wgmma D fragment."""
    from layoutalg.tensor import layout_offsets
    from gemm.hopper.plan import atom_of
    lc = atom_of(HopperVariant(HopperConfig(bN=bn, consumers=1)), bn).layout_C
    table = layout_offsets(lc).reshape(-1, lc[0].size).T        # [thread, value]
    assert table.shape == (128, bn // 2)
    for t in range(128):
        for i in range(bn // 2):
            assert (table[t, i] % 64, table[t, i] // 64) == ptx_d_fragment(t, i)


@pytest.mark.parametrize("dtype, a_major, b_major", [
    ("bfloat16", "K", "K"), ("bfloat16", "MN", "MN"), ("float16", "K", "MN"),
    ("tfloat32", "K", "K")])
def test_tma_boxes(dtype, a_major, b_major):
    from gemm.hopper.plan import BITS, hopper_copies
    cfg = HopperConfig(dtype=dtype)
    p = hopper_copies(HopperVariant(cfg, a_major, b_major, tma_store=True))
    assert p.copy_x.bytes == cfg.tile_m * 128 and p.copy_y.bytes == cfg.bN * 128
    assert p.copy_x.swizzle == p.copy_y.swizzle == p.copy_c.swizzle == 128
    assert p.copy_c.bytes == 64 * 128                   # a piece of C: 64 rows of 128 bytes
    # one box per 128 bytes of rows (K-major) or of columns (MN-major), each bK deep: an
    # MN-major block tiled MN first takes one box per 8 rows of K, bK / 8 times as many
    # copies (benchmarks/RESULTS.md, "The plain `a @ b`")
    for copy, rows, major in ((p.copy_x, cfg.tile_m, a_major), (p.copy_y, cfg.bN, b_major)):
        columns = rows * BITS[dtype] // 8 // 128 if major == "MN" else 1
        assert len(copy.boxes) == columns, (major, copy.boxes)


needs_ptx = pytest.mark.skipif(SIM, reason="PTX is compiled outside the simulator")


@needs_ptx
@pytest.mark.parametrize("kw, n, k, regs, wait", [
    (dict(), 256, 16, (40, 232), 0),
    (dict(config=HopperConfig(bM=128, bN=128, stages=4, delay_release=1, epilogue="tma")), 128,
     16, (40, 232), 1),
    (dict(dtype="tfloat32", out_dtype="bfloat16"), 256, 8, (40, 232), 0),
    (dict(config=HopperConfig(split_k=4), out_dtype="bfloat16"), 256, 16, (40, 232), 0),
    (dict(config=HopperConfig(bM=64, bN=256, consumers=1, delay_release=1), a_major="MN",
          b_major="MN", out_dtype="float16"), 256, 16, None, 1),
    (dict(config=HopperConfig(bM=128, bN=128, schedule="pingpong", stages=6, delay_release=1,
                              epilogue="tma"), dtype="float16", out_dtype="bfloat16"), 128, 16,
     (40, 232), 1),
    (dict(config=HopperConfig(bM=128, bN=128, stages=3, consumers=1, schedule="plain",
                              delay_release=1), out_dtype="bfloat16"), 128, 16, None, 1),
    (dict(config=HopperConfig(bM=64, bN=16, stages=8, consumers=1, swap_ab=True),
          out_dtype="bfloat16"), 16, 16, None, 0),
])
def test_kernel_ptx_for_sm90a(kw, n, k, regs, wait):
    from gemm.arch.inspect import local_memory_ops, ptxas_usage
    from gemm.hopper import ptx
    text = ptx(**kw)
    assert ".target sm_90a" in text
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k{k}" in text
    assert "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier" in text
    assert "mbarrier.try_wait.parity" in text and "mbarrier.arrive.expect_tx" in text
    assert f"wgmma.wait_group.sync.aligned {wait}" in text
    cfg = kw.get("config") or HopperConfig()
    tma_store = (cfg.epilogue == "tma" and cfg.split_k == 1 and not cfg.swap_ab
                 and cfg.schedule != "plain")
    assert ("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group" in text) == tma_store
    assert ("cp.async.bulk.wait_group.read 1" in text) == tma_store
    assert ("fence.proxy.async" in text) == tma_store
    assert bool(re.search(r"bar\.sync\s+%r\d+, 128;", text)) == tma_store   # a consumer's own
    # each descriptor reaches wgmma as two 32-bit halves (gemm.arch.sm90.wgmma_tile)
    assert "mov.b64 da, {" in text and "mov.b64 db, {" in text
    if regs:
        assert f"setmaxnreg.dec.sync.aligned.u32 {regs[0]}" in text
        assert f"setmaxnreg.inc.sync.aligned.u32 {regs[1]}" in text
    else:
        assert "setmaxnreg" not in text
    assert not local_memory_ops(text), local_memory_ops(text)[:5]
    (usage,) = ptxas_usage(text, (9, 0, "a"))
    assert usage.spills == 0 and usage.local == 0, usage


@needs_ptx
def test_precompile_takes_the_hopper_defaults_on_9x(monkeypatch):
    from gemm import hopper
    from gemm.tuning import precompile
    monkeypatch.setattr(hopper, "hopper_supported", lambda device=0: True)
    got = precompile.hopper_variants()
    # bf16, f16: 4 majors x 2 outs; tf32: 1; each in the default's 4 tiles and the swapped
    # tiles, with and without split-K, the unswapped unsplit ones with both epilogues; bf16,
    # f16: the narrow swapped tiles (3 widths) with a K-major Y (2 majors x 2 outs), with and
    # without split-K; all swapped tiles with two consumers, unsplit
    narrow = 2 * 3 * 4 * 2
    two = (8 + 8 + 1) + narrow // 2
    assert len(got) == len(set(got)) == 14 * (8 + 8 + 1) + narrow + two
    assert sum(v.split_k for v in got) == 5 * (8 + 8 + 1) + narrow // 2
    assert sum(v.c_columns for v in got) == 2 * (8 + 8 + 1) + narrow + two
    assert sum(v.tma_store for v in got) == 4 * (8 + 8 + 1)
    swapped = [HopperConfig(bM=64, bN=bn, consumers=c, stages=8) for bn in (64, 32, 16, 8)
               for c in (1, 2)]
    assert all(replace(v.config, dtype="bfloat16", bK=None) in (
        kernel_config(HopperConfig()), kernel_config(HopperConfig(bN=128)),
        kernel_config(HopperConfig(bN=128, stages=6)), *map(kernel_config, swapped))
        for v in got)
    assert all(v.c_columns != v.vec_c and (v.c_columns or v.config.bN >= 64) for v in got)
    assert all(v.b_major == "K" for v in got if v.config.bN < 64)
    assert {(v.a_major, v.b_major, v.out_dtype) for v in got
            if v.config.dtype == "tfloat32"} == {("K", "K", "float32")}
    monkeypatch.setattr(hopper, "hopper_supported", lambda device=0: False)
    assert precompile.hopper_variants() == []


def test_precompile_takes_the_tf32x3_rules_tiles_on_9x(monkeypatch):
    from gemm import hopper
    from gemm.tuning import precompile
    monkeypatch.setattr(hopper, "hopper_supported", lambda device=0: True)
    got = precompile.hopper_x3_variants()
    # 2 x 64 x 128 with 4 and 6 slots, 2 x 64 x 64 with 8: unsplit, split, and TMA stores
    # where the staging fits (4 slots only); swapped 2 x 64 x 8 .. 64: unsplit and split
    assert len(got) == len(set(got)) == 3 + 2 + 2 + 4 * 2
    assert all(v.config.tf32x3 and v.config.consumers == 2 for v in got)
    assert {(v.config.bN, v.config.stages) for v in got if not v.c_columns} == {
        (128, 4), (128, 6), (64, 8)}
    assert {v.config.bN for v in got if v.c_columns} == {8, 16, 32, 64}
    assert [v.config.stages for v in got if v.tma_store] == [4]
    called = set()
    for m, n, k in ((4096, 4096, 4096), (64, 4096, 4096), (16, 4096, 4096), (3, 8192, 4096),
                    (1024, 1024, 16384), (128, 4096, 4096), (65536, 64, 4096)):
        cols = hopper.x3_swaps(m, n)
        mm, nn = (n, m) if cols else (m, n)
        rules = (hopper.swapped_config("tfloat32", mm, nn, k, 1, 132) if cols
                 else hopper.default_config("tfloat32", mm, nn, k, 1, 132))
        cfg = hopper.x3_default(rules, mm, nn, k, 1, 132)
        called.add((kernel_config(cfg), cols, cfg.split_k > 1))
    assert called <= {(v.config, v.c_columns, v.split_k) for v in got}
    monkeypatch.setattr(hopper, "hopper_supported", lambda device=0: False)
    assert precompile.hopper_x3_variants() == []


def test_the_plain_schedule_runs_two_blocks_per_sm_where_they_fit():
    small = HopperConfig(bM=128, bN=128, stages=3, consumers=1, schedule="plain")
    big = HopperConfig(bM=128, bN=128, stages=4, consumers=1, schedule="plain")
    assert (small.threads, small.blocks_per_sm, big.blocks_per_sm) == (128, 2, 1)
    assert HopperConfig().blocks_per_sm == 1


def test_default_split_fills_the_sms_only_where_tiles_are_few():
    from gemm.hopper import MAX_SPLIT_K, MIN_SPLIT_TILES, default_split
    assert default_split(132, 1000, 132) == 1 and default_split(45, 1000, 132) == 1
    assert default_split(32, 256, 132) == 4             # 1024 x 1024 x 16384 bf16
    assert default_split(16, 64, 132) == 8              # a decode step: 16 x 4096 x 4096
    assert default_split(16, 3 * MIN_SPLIT_TILES, 132) == 3     # short K: long enough ranges
    assert default_split(16, 2 * MIN_SPLIT_TILES, 132) == 1     # never 2 ranges
    assert default_split(1, 10 ** 6, 132) == MAX_SPLIT_K


def test_few_rows_swap_a_and_b_with_narrow_tiles():
    from gemm.hopper import swapped_config, swaps
    assert swaps(1, 4096, 132) and swaps(64, 1024, 132) and swaps(16, 16896, 132)
    assert not swaps(65, 4096, 132) and not swaps(64, 1000, 132)
    assert not swaps(1, 16897, 132)                  # more than two waves of 64-row tiles

    def pick(m_kernel, n_kernel, k):
        cfg = swapped_config("bfloat16", m_kernel, n_kernel, k, 1, 132)
        assert (cfg.bM, cfg.bN, cfg.stages, cfg.swap_ab) == (64, 64, 8, True)
        return cfg.split_k
    assert pick(4096, 1, 4096) == 2                # 64 tiles: split in 2 to fill the SMs
    assert pick(4096, 16, 4096) == 2
    assert pick(4096, 64, 4096) == 1               # 64 rows: 2 ranges cost more than they gain
    assert pick(4096, 64, 8192) == 1
    assert pick(4096, 64, 14336) == 2              # but not at long K: 2 ranges of 112 k-tiles
    assert pick(1536, 32, 12288) == 5              # 24 tiles: 3 ranges or more pay
    assert pick(14336, 1, 4096) == 1               # 224 tiles (112 blocks of 2) fill the SMs


def test_few_rows_of_a_row_major_a_take_tiles_as_narrow_as_a():
    from gemm.hopper import swapped_config, swapped_tiles, swaps
    assert swaps(1, 128256, 132, narrow=True) and not swaps(1, 128256, 132)
    assert not swaps(33, 128256, 132, narrow=True)          # 64-column tiles: two waves

    def pick(m_kernel, n_kernel, k):
        cfg = swapped_config("bfloat16", m_kernel, n_kernel, k, 1, 132, narrow=True)
        assert (cfg.bM, cfg.consumers, cfg.stages, cfg.swap_ab) == (64, 1, 8, True)
        return cfg.bN, cfg.split_k
    assert pick(4096, 1, 4096) == (8, 1)           # 64 tiles, K too short for 2 ranges
    assert pick(4096, 16, 14336) == (16, 2)        # 2 ranges of 112 k-tiles
    assert pick(4096, 17, 4096) == (32, 1)
    assert pick(128256, 1, 4096) == (8, 1)         # many tiles: unsplit
    assert pick(4096, 33, 14336) == (64, 2)        # above NARROW_ROWS: the 64-column tiles
    assert pick(4096, 33, 4096) == (24, 1)         # (but two narrow ones at shorter K)
    assert swapped_tiles("float16", 9).bN == 16 and swapped_tiles("float16").bN == 64


def test_few_rows_take_two_narrow_tiles_where_64_row_tiles_leave_half_the_sms():
    """33-96 rows of a row-major 16-bit A against a weight of at most 64 x SMs / 2 rows at
    K below LONG_SWAP_TILES k-tiles: swapped, A's rows in two tiles of half their number
    rounded up to 8, unsplit, one consumer; the call's rules take it (not the table)."""
    from gemm.hopper import PAIR_ROWS, pairs, swapped_config
    from gemm.hopper.rules import LONG_SWAP_TILES
    from gemm.tuning import shape_table
    assert pairs(33, 4096, 4096, 132, True) and pairs(PAIR_ROWS, 4224, 4096, 132, True)
    assert not pairs(32, 4096, 4096, 132, True)             # narrow tiles of A's rows
    assert not pairs(PAIR_ROWS + 1, 4096, 4096, 132, True)
    assert not pairs(80, 4096, 4096, 132, False)            # a column-major A or tf32
    assert not pairs(80, 4225, 4096, 132, True)             # 67 tiles: more than half
    assert not pairs(80, 1000, 4096, 132, True)             # fewer than SWAP_COLUMNS
    assert pairs(80, 4096, 64 * (LONG_SWAP_TILES - 1), 132, True)      # 191 k-tiles
    assert not pairs(80, 4096, 64 * (LONG_SWAP_TILES - 1) + 1, 132, True)

    def pick(m, n, k, products=1):
        cfg = swapped_config("bfloat16", n, m, k, products, 132, narrow=True)
        return cfg.bN, cfg.split_k, cfg.consumers, cfg.stages, cfg.swap_ab
    assert pick(80, 4096, 4096) == (40, 1, 1, 8, True)
    assert pick(96, 4096, 4096) == (48, 1, 1, 8, True)
    assert pick(64, 4096, 4096) == (32, 1, 1, 8, True)
    assert pick(33, 4096, 4096) == (24, 1, 1, 8, True)
    assert pick(64, 4096, 4096, products=2)[0] == 64        # a batch: the tiles as before
    # 96 rows: the table's entry near them (of 128 rows) where A is not row-major, else none
    assert shape_table.lookup("bfloat16", 96, 4096, 4096, 132) is not None
    assert shape_table.lookup("bfloat16", 96, 4096, 4096, 132, narrow=True) is None


@pytest.mark.parametrize("narrow", [False, True])
def test_swapped_tiles_take_two_consumers_where_that_fits_one_wave(narrow):
    from gemm.hopper import swapped_config

    def consumers(m_kernel, n_kernel):
        cfg = swapped_config("bfloat16", m_kernel, n_kernel, 4096, 1, 132, narrow=narrow)
        assert cfg.memory_registers == (40 if cfg.consumers == 2 else None)
        return cfg.consumers
    assert consumers(4096, 48) == 1                # 64 tiles: one wave already
    assert consumers(11008, 48) == 2               # 172 tiles -> 86
    assert consumers(14336, 16) == 2               # 224 -> 112
    assert consumers(17000, 48) == 1               # 266 -> 133: two waves either way


def test_swap_ab_stores_c_by_columns_without_pairs():
    from gemm.hopper import _variant
    v = _variant(HopperConfig(bM=64, bN=64, consumers=1, stages=8, swap_ab=True, split_k=2))
    assert v.c_columns and v.split_k and not v.vec_c and v.config.swap_ab is False
    with pytest.raises(ValueError, match="column by column"):
        HopperVariant(HopperConfig(), c_columns=True)
    with pytest.raises(ValueError, match="swap_ab must be a bool"):
        HopperConfig(swap_ab=1)


def test_default_config_splits_k_or_narrows_tiles_by_shape():
    from gemm.hopper import default_config

    def pick(dtype, m, n, k, nb=1):
        cfg = default_config(dtype, m, n, k, nb, 132)
        return cfg.bN, cfg.split_k
    assert pick("bfloat16", 4096, 4096, 4096) == (256, 1)          # 512 tiles
    assert pick("bfloat16", 16, 4096, 4096) == (256, 8)            # decode: 16 tiles
    # K-heavy: 32 tiles would take 4 ranges; 2 x 64 x 128 tiles fill the SMs in 2 long ones
    assert pick("bfloat16", 1024, 1024, 16384) == (128, 2)
    assert pick("bfloat16", 256, 256, 65536) == (64, 16)           # 64-wide ranges hold 64
    assert pick("bfloat16", 256, 192, 65536) == (64, 22)           # none do: fewest ranges
    assert pick("bfloat16", 80, 4096, 4096) == (64, 2)
    assert pick("bfloat16", 512, 4096, 4096) == (128, 1)           # 64 tiles, K too short
    assert pick("float16", 1024, 1024, 1024) == (128, 1)           # to split in 3
    assert pick("bfloat16", 16, 14336, 4096) == (256, 1)           # few rows: not narrower
    assert pick("bfloat16", 2048, 2048, 2048) == (256, 1)          # 128 tiles: one wave
    assert pick("tfloat32", 512, 512, 4096, nb=8) == (128, 1)      # 8 x 4 x 4 narrow tiles
    assert pick("bfloat16", 65536, 64, 4096) == (64, 1)            # narrow N: N's width
    assert pick("bfloat16", 65536, 100, 4096) == (128, 1)
    assert pick("bfloat16", 256, 64, 65536) == (64, 64)            # 2 tiles: split to fill
    assert default_config("bfloat16", 65536, 64, 4096, 1, 132).stages == 8
    # tiles of 192 columns where their whole waves take 5% less: 448 tiles of 256 are 4
    # waves, 608 of 192 five of three quarters the work; not where 256's fill one wave
    assert pick("bfloat16", 2048, 7168, 4096) == (192, 1)
    assert pick("float16", 3000, 3000, 3000) == (192, 1)
    assert pick("bfloat16", 8192, 8192, 8192) == (256, 1)          # 21 x 192 against 16 x 256
    assert pick("bfloat16", 1024, 4096, 4096) == (256, 1)          # 128 tiles: one wave
    assert pick("tfloat32", 2048, 7168, 4096)[0] == 256            # (16-bit types only)


def test_tiles_narrower_than_64_need_a_k_major_y():
    from gemm.hopper.plan import hopper_copies
    v = HopperVariant(HopperConfig(bN=16, consumers=1), b_major="K")
    assert hopper_copies(v).copy_y.bytes == 16 * 128
    with pytest.raises(ValueError, match="need a K-major Y"):
        HopperVariant(HopperConfig(bN=16), b_major="MN")


def test_tf32x3_configs():
    """x3_config: at most X3_ACCUMULATORS accumulators and room for the buffer of small
    parts; x3_default: the rules' tiles on two consumers, split to fill the SMs; x3_swaps:
    few rows swap at any width."""
    from gemm.arch.smem import DYNAMIC_SHARED_LIMIT
    from gemm.hopper import (X3_ACCUMULATORS, default_config, swapped_config,
                                       x3_config, x3_default, x3_swaps)
    x3 = x3_config(HopperConfig(dtype="tfloat32"))
    assert (x3.bM, x3.bN, x3.stages, x3.tf32x3, x3.split_buffers) == (64, 128, 3, True, 1)
    assert x3.shared_bytes == 4 * (128 + 128) * 128 + 1024
    deep = x3_config(HopperConfig(dtype="tfloat32", bN=128, stages=6))
    assert deep.stages == 6 and deep.shared_bytes <= DYNAMIC_SHARED_LIMIT   # 7 slots fit
    pp = x3_config(HopperConfig(dtype="tfloat32", bM=128, bN=128, schedule="pingpong"))
    assert pp.bM * pp.bN // 128 == X3_ACCUMULATORS and pp.split_buffers == 2
    assert x3_swaps(64, 128256) and x3_swaps(1, 1024) and not x3_swaps(65, 4096)
    assert not x3_swaps(16, 1000)

    def rules(m, n, k):
        if x3_swaps(m, n):
            m, n = n, m
            cfg = swapped_config("tfloat32", m, n, k, 1, 132)
        else:
            cfg = default_config("tfloat32", m, n, k, 1, 132)
        x3 = x3_default(cfg, m, n, k, 1, 132)
        assert x3.tf32x3 and x3.consumers == 2 and x3.schedule == "cooperative"
        assert x3.stages >= 4 and x3.shared_bytes <= DYNAMIC_SHARED_LIMIT
        return x3.bN, x3.swap_ab, x3.split_k
    assert rules(4096, 4096, 4096) == (128, False, 1)
    assert rules(64, 4096, 4096) == (64, True, 4)       # 32 tiles of 128 rows: 4 ranges
    assert rules(16, 4096, 4096) == (16, True, 4)       # as narrow as A's rows
    assert rules(16, 128256, 4096) == (16, True, 1)
    assert rules(1024, 1024, 16384) == (128, False, 2)


@needs_ptx
def test_tf32x3_kernel_ptx():
    """The 3xTF32 kernel: per atom and k-block three wgmma, each slot split by the
    consumers (16-byte shared loads and stores) behind an OR-reducing named barrier, each
    step's products added on the CUDA cores; no local memory, no spills."""
    from gemm.arch.inspect import local_memory_ops, ptxas_usage
    from gemm.hopper import ptx, x3_config
    cfg = x3_config(HopperConfig(dtype="tfloat32"))             # 2 x 64 x 128, 4 k-blocks
    text = ptx(cfg, dtype="tfloat32")
    assert text.count("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32") == 3 * 4
    assert text.count("ld.shared.v4.b32") == 2 * (128 + 128) * 128 // 16 // 256   # + clear
    assert "bar.red.or.pred" in text and "fence.proxy.async" in text
    assert not local_memory_ops(text), local_memory_ops(text)[:5]
    (usage,) = ptxas_usage(text, (9, 0, "a"))
    assert usage.spills == 0 and usage.local == 0, usage


def test_sm_carveout_is_scoped_and_forgets_kept_plans():
    """``sm_carveout`` sets the SMs the Hopper kernel's calls leave free for its block and
    restores the count after it (an error inside included); where it changes the count,
    gemm.matmul's kept plans (grids planned for the other count) are forgotten, and where it
    does not, they stay. A count that is not an int >= 0 is refused."""
    from gemm import hopper
    from gemm.call import plan as callplan
    callplan.PLANS["before"] = None
    with hopper.sm_carveout(16):
        assert hopper._carveout == 16 and "before" not in callplan.PLANS
        callplan.PLANS["inside"] = None
        with hopper.sm_carveout(16):
            assert "inside" in callplan.PLANS
        assert "inside" in callplan.PLANS and hopper._carveout == 16
    assert hopper._carveout == 0 and "inside" not in callplan.PLANS
    with pytest.raises(RuntimeError, match="inside"), hopper.sm_carveout(8):
        raise RuntimeError("inside")
    assert hopper._carveout == 0
    for bad in (-1, 1.5, True, "16"):
        with pytest.raises(ValueError, match="sm_carveout: sms must be an int >= 0"):
            with hopper.sm_carveout(bad):
                pass
