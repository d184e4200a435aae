"""The shipped table: configs tuned on the suite of ``benchmarks/shapes.py``, for calls that
were never tuned.

``gemm.matmul`` on bfloat16 or float16 operands without a config of the autotune cache asks
:func:`lookup` before ``gemm.hopper.default_config``'s rules: a single product on a GPU of
compute capability 9.x, with about the SM count the table was recorded with, writing a
row-major out, gets the config tuned for the nearest recorded shape when it is near
enough; otherwise nothing. A/B majors are not matched: the tiles are chosen for the shape.

- **Near enough** (:func:`near`), in octaves, ``|log2|`` of the ratio of each extent to
  the recorded one: each at most 1, their sum at most 1.5, and M's at most 0.5 where either
  M exceeds 64 (up to 64 rows one tile row holds all of M; above, M sets how many tile rows
  fill the SMs). The nearest is the smallest sum.
- **One tile row stays one, one wave stays one.** A config tuned where all rows fit one
  of its tile rows (B streamed once), or where its work units (output tiles x K ranges)
  fit one wave of the SMs, is not used where the rows or the work units need more.
- **Split-K keeps its work units.** A config that splits K gets, for the new shape, the
  number of ranges that keeps the recorded count of work units (output tiles x ranges),
  with at least 4 k-tiles per range.
- **Where the rules swap A and B** (few rows, ``gemm.hopper.swaps``), an entry marked
  ``swap_faster`` (its shape ran faster swapped than on its config, in a later run) is not
  used; for the shapes around it that do not swap it still is. Where they swap onto tiles
  as narrow as A's rows (a row-major A of at most ``gemm.hopper.NARROW_ROWS`` rows), no
  entry is used: those tiles beat or matched the entries near such shapes where both were
  timed (benchmarks/RESULTS.md, "Narrow tiles"; one held-out shape lost 8% until swapped
  tiles took two consumers where that fits one wave); nor where they take two narrow tiles
  of the rows (``gemm.hopper.pairs``: 33-96 rows against a weight of at most 64 x SMs / 2
  rows, short K).

These rules were set from runs on shapes beside the suite (``--held-out``): with "each
extent within a factor of 2" alone, 1024x4096x11008, 512x512x32768 and 2048^3 took configs
of shapes 2-3 octaves away and lost 12-39% to the rules (first set); with the octave
limits, 160 rows took the one-tile-row config of 128 rows (12% lost) and 320x320x49152 the
32 ranges of 256x256x65536 (34% lost; second set); 600x4096x16384 and 1152^3 took configs
filling one wave at 512x4096x14336 and 1024^3 in two (10-15% lost; third set). A fourth
set checked the result.

The table (``shape_table.json``) holds only the shapes where the tuned config beat the rules
by at least 8% in the suite's own timing, so the rules stay where they are as good. It is
written by ``benchmarks/shape_table.py`` from the logs of ``python3 benchmarks/shapes.py
--dtypes bf16 --tune`` (benchmarks/RESULTS.md, "Every shape"), checked on shapes beside
the suite (``--held-out``), and pruned of entries that a later untuned run timed slower than
the rules (``--prune``; the TMA epilogue made the rules beat both SM80 entries). Shapes
beside the suite join it from their own tuned runs (``--add``): the collective matmul's
per-step product at the seed's shape, 1024x1024x4096, and its neighbours.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import replace
from typing import Any

from gemm import hopper
from gemm.tuning.autotune import config_from_dict

__all__ = ["lookup", "near", "entries", "swap_faster", "TABLE_PATH", "DTYPES"]

TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shape_table.json")
DTYPES = ("bfloat16", "float16")        # recorded for bfloat16; float16 runs alike


@functools.lru_cache(maxsize=None)
def _load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@functools.lru_cache(maxsize=None)
def entries(path: str = TABLE_PATH) -> tuple:
    """(SM count, ((m, n, k, config), ...)) of the table at ``path``."""
    table = _load(path)
    rows = tuple((e["m"], e["n"], e["k"], config_from_dict(e["config"]))
                 for e in table["entries"])
    return table["sms"], tuple(r for r in rows if r[3] is not None)


@functools.lru_cache(maxsize=None)
def swap_faster(path: str = TABLE_PATH) -> frozenset:
    """The (m, n, k) of the entries marked ``swap_faster``."""
    return frozenset((e["m"], e["n"], e["k"]) for e in _load(path)["entries"]
                     if e.get("swap_faster"))


def lookup(dtype: str, m: int, n: int, k: int, sms: int, path: str = TABLE_PATH,
           narrow: bool = False) -> Any:
    """The tuned config (a HopperConfig or TensorCoreConfig, of ``dtype``) of the recorded
    shape nearest to (m, n, k), its split-K re-derived for this shape; None where none is
    near enough or keeps its tile rows, the dtype is not 16-bit, or ``sms`` differs from the
    table's by more than 1/8; entries marked swap_faster left out where the rules swap A and B,
    and None where they swap onto narrow tiles or two narrow tiles of the rows (``narrow``:
    A is row-major; see the module's doc)."""
    table_sms, rows = entries(path)
    if dtype not in DTYPES or abs(sms - table_sms) * 8 > table_sms or min(m, n, k) < 1:
        return None
    if hopper.swaps_narrow(m, n, k, sms, narrow):
        return None
    skip = swap_faster(path) if hopper.swaps(m, n, sms, narrow) else ()
    best, config = None, None
    for rm, rn, rk, cfg in rows:
        if (rm, rn, rk) in skip:
            continue
        gap = near((m, n, k), (rm, rn, rk))
        if gap is None or (best is not None and gap >= best):
            continue
        split = getattr(cfg, "split_k", 1)
        units = _tiles(cfg, rm, rn) * split
        if split > 1:
            split = max(1, min(round(units / _tiles(cfg, m, n)), -(-k // cfg.bK) // 4))
        grows = (_tiles(cfg, rm, 1) == 1 < _tiles(cfg, m, 1)
                 or units <= table_sms < _tiles(cfg, m, n) * split)
        if not grows:
            best, config = gap, cfg if split == getattr(cfg, "split_k", 1) else replace(
                cfg, split_k=split)
    return None if config is None else replace(config, dtype=dtype)


def _tiles(cfg, m, n):
    """Output tiles of ``cfg`` over an m x n out."""
    return -(-m // getattr(cfg, "tile_m", cfg.bM)) * -(-n // cfg.bN)


def near(shape, recorded):
    """The distance in octaves from (m, n, k) ``shape`` to a ``recorded`` one (the sum of
    ``|log2|`` ratios), or None where it is too far for the recorded config (see the module's
    doc)."""
    gaps = [abs(math.log2(x / r)) for x, r in zip(shape, recorded)]
    if max(gaps) > 1 or sum(gaps) > 1.5 or (gaps[0] > 0.5 and max(shape[0], recorded[0]) > 64):
        return None
    return sum(gaps)
