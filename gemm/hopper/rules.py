"""The Hopper GEMM's shape rules: the :class:`HopperConfig` a call without one gets from its
shape, dtype and SM count (tiles, split-K, swapping A and B for few rows, and the 3xTF32
configs), chosen from benchmarks/shapes.py's runs (benchmarks/RESULTS.md)."""

from __future__ import annotations

from dataclasses import replace

from .. import splitk
from ..arch.smem import DYNAMIC_SHARED_LIMIT
from .config import MAX_SPLIT_K, X3_ACCUMULATORS, HopperConfig

__all__ = ["default_config", "default_split", "fp8_fast_config", "fp8_few_rows", "swaps",
           "swaps_narrow", "pairs", "swapped_tiles", "swapped_config", "x3_config", "x3_tiles",
           "x3_default", "x3_swaps"]

LONG_RANGE_TILES = 64   # k-tiles per K range at least where narrower tiles take fewer ranges
SWAP_ROWS, SWAP_COLUMNS = 64, 1024
NARROW_ROWS = 32            # up to this many rows a swapped call's tiles are as narrow as A
NARROW_RANGE_TILES = 96     # k-tiles per K range at least, for those narrow tiles
LONG_SWAP_TILES = 192       # k-tiles at least where a swapped call of over 16 rows splits in 2
PAIR_ROWS = 96              # up to this many rows a swapped call may take two narrow tiles
FP8_FEW_ROWS = 128          # up to this many rows a fast FP8 call takes 1 x 64 x 64 tiles
WAVE_GAIN = 0.95        # 192-column tiles where their waves take this much of 256's or less


def default_config(dtype, m, n, k, products, sms):
    """The config a call without one gets, from its shape (the kernel's (m, n), k, the
    products of a batch) and the GPU's SM count: the default tiles (2 x 64 x 256), or for
    n <= 128 tiles of n's width rounded up to 64 with a deeper ring (2 x 64 x 64, 8 slots;
    2 x 64 x 128, 6 slots); split-K (:func:`default_split`) where they leave most SMs idle
    and K is long enough, on narrower tiles where those need fewer K ranges
    (:func:`_fewer_ranges`); else, where they fill at most half the SMs and narrower tiles
    (2 x 64 x 128) fit in one wave, those (neither narrowing for m < 64: there the rows are
    mostly padding and the narrow tiles were slower); for 16-bit types, 2 x 64 x 192 tiles
    where their whole waves take :data:`WAVE_GAIN` less (:func:`_fuller_waves`). Chosen from
    benchmarks/shapes.py's runs (benchmarks/RESULTS.md, "Every shape", "A shipped table" and
    "Tiles that fill the waves")."""
    cfg = HopperConfig(dtype=dtype)
    if n <= 128:            # a 256-wide wgmma would multiply mostly padding
        cfg = replace(cfg, bN=64, stages=8) if n <= 64 else replace(cfg, bN=128, stages=6)
    k_tiles = -(-k // cfg.bK)
    tiles = products * -(-m // cfg.tile_m) * -(-n // cfg.bN)
    split = default_split(tiles, k_tiles, sms)
    if split > 1:
        return _fewer_ranges(cfg, m, n, k_tiles, products, sms, split) if m >= 64 else \
            replace(cfg, split_k=split)
    if cfg.bN > 128 and 2 * tiles <= sms and m >= 64 and \
            products * -(-m // cfg.tile_m) * -(-n // 128) <= sms:
        return replace(cfg, bN=128)
    if dtype in ("bfloat16", "float16") and cfg.bN == 256 and m >= 64:
        return _fuller_waves(cfg, tiles, m, n, products, sms)
    return cfg


def _fuller_waves(cfg, tiles, m, n, products, sms):
    """``cfg`` (its ``tiles`` of 2 x 64 x 256, no split) or 192 columns a tile where those
    take :data:`WAVE_GAIN` less of the GPU's time in whole waves of tiles (waves x columns):
    448 tiles of 256 columns are 4 waves of 132 SMs, 3.39 of work (2048 x 7168); 608 of 192
    are 5 waves of three quarters the work. Where the tiles fit one wave, wider stays."""
    wide = -(-tiles // sms)
    narrow = -(-products * -(-m // cfg.tile_m) * -(-n // 192) // sms)
    if wide >= 2 and narrow * 192 <= WAVE_GAIN * wide * 256:
        return replace(cfg, bN=192)
    return cfg


def fp8_few_rows(m, n, products, sms):
    """Whether a fast FP8 call (``use_fast_accum=True``) of ``m`` rows and ``n`` columns takes
    one consumer on 64 x 64 tiles (:func:`fp8_fast_config`): at most FP8_FEW_ROWS rows of one
    product (a decode step), in at most two waves of those tiles on ``sms`` SMs.

    >>> fp8_few_rows(16, 14336, 1, 132), fp8_few_rows(128, 14336, 1, 132)
    (True, False)
    """
    return m <= FP8_FEW_ROWS and products == 1 and -(-m // 64) * -(-n // 64) <= 2 * sms


def fp8_fast_config(cfg, few_rows=False):
    """An FP8 call's default without promotion (``use_fast_accum=True``), from ``cfg``, its
    shape's default: where :func:`fp8_few_rows` holds (``few_rows``), one consumer on 64 x 64
    tiles with 8 slots, twice the blocks or more streaming the weight (benchmarks/RESULTS.md,
    "FP8 decode steps"); else for tiles of 128 columns or more, pingpong consumers on 128 x
    128 tiles of their own, 5 slots, one wgmma group in flight (one consumer's epilogue, with
    its row and column scales, runs while the other multiplies), ahead of the cooperative 2 x
    64 x 256 tiles on every LLM shape timed ("FP8 products with scales"); narrower tiles as
    they are."""
    if few_rows:
        return HopperConfig(dtype=cfg.dtype, bM=64, bN=64, stages=8, consumers=1)
    if cfg.bN < 128:
        return cfg
    return replace(cfg, bM=128, bN=128, stages=5, schedule="pingpong", delay_release=1)


def _fewer_ranges(cfg, m, n, k_tiles, products, sms, split):
    """``cfg`` in ``split`` K ranges, or narrower tiles that fill the SMs with fewer ranges:
    2 x 64 x 128 (6 slots), then 2 x 64 x 64 (8 slots), the first whose ranges hold at least
    LONG_RANGE_TILES k-tiles; where none does, the one with the fewest ranges. Fewer ranges
    mean fewer partial tiles to store and add and longer ranges over which to fill the
    pipeline; wider tiles multiply faster where the ranges stay long (the timings behind
    this: benchmarks/RESULTS.md, "K-heavy shapes")."""
    best = (split, cfg)
    for bn, stages in ((128, 6), (64, 8)):
        if bn >= cfg.bN:
            continue
        narrow = replace(cfg, bN=bn, stages=stages)
        tiles = products * -(-m // narrow.tile_m) * -(-n // bn)
        fewer = splitk.by_shape(tiles, k_tiles, sms, least=2)
        if 2 <= fewer < split and k_tiles // fewer >= LONG_RANGE_TILES:
            return replace(narrow, split_k=fewer)
        if 2 <= fewer < best[0]:
            best = (fewer, narrow)
    return replace(best[1], split_k=best[0])


def swaps(m, n, sms, narrow=False):
    """Whether a call without a config of ``m`` rows and ``n`` columns (one product, a
    row-major out) swaps A and B (:class:`HopperConfig`'s ``swap_ab``): at most
    SWAP_ROWS rows against at least SWAP_COLUMNS columns (a decode step against a weight),
    and at most two waves of 64-column tiles on ``sms`` SMs. The weight's rows then fill the
    wgmma's 64 rows and the few rows of A its N, instead of A's rows padding 64; over more
    tiles the unswapped 64-column tiles were faster (benchmarks/RESULTS.md, "Few rows: A and
    B swapped"). ``narrow``: A is row-major and 16-bit, so that up to NARROW_ROWS rows the
    tiles can be as narrow as A's rows (:func:`swapped_config`); those swap at any number
    of columns (RESULTS.md, "Narrow tiles")."""
    if not (m <= SWAP_ROWS and SWAP_COLUMNS <= n):
        return False
    return n <= 2 * sms * 64 or (narrow and m <= NARROW_ROWS)


def x3_swaps(m, n):
    """Whether a tf32x3 call without a config swaps A and B: at most SWAP_ROWS rows against
    at least SWAP_COLUMNS columns, at any number of columns (its steps cost three wgmma, so
    an unswapped tile's padding rows cost more than for :func:`swaps`;
    benchmarks/RESULTS.md, "3xTF32")."""
    return m <= SWAP_ROWS and SWAP_COLUMNS <= n


def swaps_narrow(m, n, k, sms, narrow):
    """Whether such a call (depth ``k``) swaps onto narrow tiles (:func:`swapped_config`):
    ``narrow`` (A row-major, 16-bit) and either at most NARROW_ROWS rows and :func:`swaps`
    (tiles as narrow as A's rows) or :func:`pairs` (two narrow tiles of its rows)."""
    return narrow and (m <= NARROW_ROWS and swaps(m, n, sms, narrow)
                       or pairs(m, n, k, sms, narrow))


def pairs(m, n, k, sms, narrow):
    """Whether a call without a config of ``m`` rows, ``n`` columns and depth ``k`` (one
    product, a row-major out, 16-bit operands) swaps A and B onto two narrow tiles of its
    rows (:func:`swapped_config`): ``narrow`` (A row-major), NARROW_ROWS < m <= PAIR_ROWS,
    at least SWAP_COLUMNS columns whose 64-row tiles leave half the SMs idle, and fewer
    than LONG_SWAP_TILES k-tiles of 64 (at longer K, one tile of 64 columns in 2 K ranges
    is the rule). Twice the blocks, each streaming its 64 rows of the weight:
    benchmarks/RESULTS.md, "Few rows: 2 K ranges at long K, and two narrow tiles of the
    rows".

    >>> pairs(80, 4096, 4096, 132, True), pairs(64, 4096, 14336, 132, True)
    (True, False)
    >>> pairs(64, 14336, 4096, 132, True), pairs(128, 4096, 4096, 132, True)
    (False, False)
    """
    return (narrow and NARROW_ROWS < m <= PAIR_ROWS and SWAP_COLUMNS <= n
            and 2 * -(-n // 64) <= sms and -(-k // 64) < LONG_SWAP_TILES)


def narrow_columns(rows):
    """The columns of a narrow swapped tile for ``rows`` of A: the narrowest power of two of
    at least 8 that holds them.

    >>> [narrow_columns(r) for r in (1, 8, 9, 16, 17, 33)]
    [8, 8, 16, 16, 32, 64]
    """
    return max(8, 1 << (rows - 1).bit_length())


def swapped_tiles(dtype, rows=None, consumers=1):
    """The tiles of a swapped call: ``consumers`` x 64 x 64 with 8 slots, unsplit; for
    ``rows`` of A up to NARROW_ROWS, ``consumers`` x 64 x (8, 16 or 32: the narrowest that
    holds them)."""
    bn = 64 if rows is None or rows > NARROW_ROWS else narrow_columns(rows)
    return HopperConfig(dtype=dtype, bM=64, bN=bn, consumers=consumers, stages=8, swap_ab=True)


def swapped_config(dtype, m, n, k, products, sms, narrow=False):
    """The config of a swapped call (the kernel's ``m`` = the out's columns, ``n`` its rows;
    ``products`` as :func:`default_config`, 1 where the rules swap):

    - ``narrow`` (A row-major, 16-bit) and n <= NARROW_ROWS: tiles as narrow as A's rows
      (1 x 64 x 8, 16 or 32, 8 slots); split-K only where the tiles leave half the SMs idle,
      in ranges of at least NARROW_RANGE_TILES k-tiles (RESULTS.md, "Narrow tiles");
    - else 1 x 64 x 64 tiles with 8 slots; split-K where the tiles leave SMs idle
      (gemm.splitk.by_shape) in at least 2 ranges for up to 16 rows, 3 above (more rows make
      the partials cost more), but 2 where K holds LONG_SWAP_TILES k-tiles or more (ranges
      of 96 and more: benchmarks/RESULTS.md, "Few rows: 2 K ranges at long K").

    Where one consumer's tiles need more than one wave and two consumers' (128 rows a
    block) fit in one, two consumers (RESULTS.md, "Few rows: A and B swapped"). Where
    :func:`pairs` holds (one product), A's rows in two tiles of half their number rounded up
    to 8 (1 x 64 x 24 to 48, 8 slots, unsplit)."""
    if products == 1 and pairs(n, m, k, sms, narrow):
        return replace(swapped_tiles(dtype), bN=-(-n // 16) * 8)
    rows = n if narrow else None
    cfg = swapped_tiles(dtype, rows)
    tiles = products * -(-m // cfg.tile_m) * -(-n // cfg.bN)
    if tiles > sms >= -(-tiles // 2):
        cfg = swapped_tiles(dtype, rows, consumers=2)
        tiles = -(-tiles // 2)
    if cfg.bN < 64:
        split = min(sms // tiles, -(-k // cfg.bK) // NARROW_RANGE_TILES, MAX_SPLIT_K)
        return replace(cfg, split_k=split if split >= 2 else 1)
    k_tiles = -(-k // cfg.bK)
    least = 2 if n <= 16 or k_tiles >= LONG_SWAP_TILES else 3
    return replace(cfg, split_k=splitk.by_shape(tiles, k_tiles, sms, least=least))


def default_split(tiles, k_tiles, sms):
    """The split-K of :func:`default_config` (:func:`gemm.splitk.by_shape` over the SMs);
    none below 3 ranges (2 ranges were slower than 1 where they were timed: RESULTS.md,
    "K-heavy shapes")."""
    return splitk.by_shape(tiles, k_tiles, sms, least=3)


def x3_config(cfg):
    """``cfg`` (a tfloat32 config) for 3xTF32: ``tf32x3`` on, delay_release 0, at most
    ``X3_ACCUMULATORS`` accumulators per thread (fewer columns: each thread also keeps the
    tile's sum), and as many of its slots as leave room for the buffer of small parts."""
    bn = min(cfg.bN, X3_ACCUMULATORS * 128 // cfg.bM)
    for stages in range(cfg.stages, 1, -1):
        x3 = replace(cfg, tf32x3=True, delay_release=0, stages=stages, bN=bn)
        if x3.shared_bytes <= DYNAMIC_SHARED_LIMIT:
            return x3
    raise ValueError(f"{cfg} leaves no room for tf32x3's buffer")


def x3_tiles(cfg, n):
    """The tf32x3 tiles of the rules' tf32 config ``cfg`` for the kernel's ``n`` columns: as
    narrow as n below 64 (8, 16 or 32: a swapped decode step's rows), on two cooperative
    consumers with at least 4 slots (:func:`x3_config`), unsplit."""
    bn = narrow_columns(n) if n < min(64, cfg.bN) else cfg.bN
    return x3_config(replace(cfg, consumers=2, schedule="cooperative", memory_registers=40,
                             stages=max(cfg.stages, 4), split_k=1, bN=bn))


def x3_default(cfg, m, n, k, products, sms):
    """The tf32x3 config of a call without one, from the rules' tf32 config ``cfg`` (the
    kernel's (m, n), k, products, SMs): :func:`x3_tiles`, in as many K ranges as fill the
    SMs (each step costs 3 wgmma, so filling the SMs pays more than for one; the timings
    behind the tiles, consumers and slots: benchmarks/RESULTS.md, "3xTF32")."""
    x3 = x3_tiles(cfg, n)
    tiles = products * -(-m // x3.tile_m) * -(-n // x3.bN)
    return replace(x3, split_k=splitk.by_shape(tiles, -(-k // x3.bK), sms, least=2))
