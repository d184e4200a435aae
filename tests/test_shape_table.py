"""gemm.tuning.shape_table (the shipped configs tuned on the shapes suite) and
benchmarks/shape_table.py (which writes it); CPU only."""

import json
from dataclasses import replace
import os
import sys
from types import SimpleNamespace

import pytest

from gemm import api, hopper, tensorcore
from gemm.tuning import shape_table

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from benchmarks import shape_table as writer  # noqa: E402


def _table(tmp_path, shapes_configs, sms=132):
    path = tmp_path / f"table{len(list(tmp_path.iterdir()))}.json"   # entries() caches by path
    entries = [dict(m=m, n=n, k=k, config=cfg.__dict__) for (m, n, k), cfg in shapes_configs]
    path.write_text(json.dumps(dict(device="x", sms=sms, entries=entries)))
    return str(path)


A = hopper.HopperConfig(bM=64, bN=128, stages=6, consumers=1)
B = tensorcore.TensorCoreConfig(bM=64, bN=64, bK=64, warps=(2, 2), stages=3)


def test_near_enough_in_octaves():
    assert shape_table.near((16, 4096, 4096), (16, 4096, 4096)) == 0
    assert shape_table.near((8, 4096, 4096), (16, 4096, 4096)) == 1         # few rows: M free
    assert shape_table.near((7, 4096, 4096), (16, 4096, 4096)) is None      # > 1 octave
    assert shape_table.near((16, 6000, 6000), (16, 4096, 4096)) > 1         # sum 1.1
    assert shape_table.near((16, 8000, 8000), (16, 4096, 4096)) is None     # sum 1.9
    assert shape_table.near((1024, 4096, 4096), (512, 4096, 4096)) is None  # M sets the waves
    assert shape_table.near((700, 4096, 4096), (512, 4096, 4096)) < 0.5


def test_lookup_takes_the_nearest_recorded_shape(tmp_path):
    path = _table(tmp_path, [((16, 4096, 4096), A), ((65536, 64, 4096), B)])
    assert shape_table.lookup("bfloat16", 16, 4096, 4096, 132, path) == A
    assert shape_table.lookup("bfloat16", 9, 5000, 4096, 132, path) == A
    assert shape_table.lookup("bfloat16", 50000, 64, 4096, 130, path) == B
    assert shape_table.lookup("bfloat16", 40000, 64, 4096, 132, path) is None
    assert shape_table.lookup("bfloat16", 7, 4096, 4096, 132, path) is None
    assert shape_table.lookup("float16", 16, 4096, 4096, 132, path) == replace(
        A, dtype="float16")
    assert shape_table.lookup("tfloat32", 16, 4096, 4096, 132, path) is None
    assert shape_table.lookup("bfloat16", 16, 4096, 4096, 114, path) is None  # other GPU


def test_the_nearer_of_two_shapes_wins(tmp_path):
    other = hopper.HopperConfig(bM=64, bN=64, stages=8)
    path = _table(tmp_path, [((16, 8192, 4096), other), ((16, 4096, 4096), A)])
    assert shape_table.lookup("bfloat16", 16, 7000, 4096, 132, path) == other
    assert shape_table.lookup("bfloat16", 16, 5000, 4096, 132, path) == A


def test_a_one_tile_row_config_is_not_used_for_more_rows(tmp_path):
    narrow = hopper.HopperConfig(bM=64, bN=64, stages=8)           # 128-row tiles
    path = _table(tmp_path, [((128, 4096, 4096), narrow), ((512, 4096, 4096), A)])
    assert shape_table.lookup("bfloat16", 100, 4096, 4096, 132, path) == narrow
    assert shape_table.lookup("bfloat16", 129, 4096, 4096, 132, path) is None
    path = _table(tmp_path, [((1024, 1024, 1024), narrow)])       # 8 tile rows: any count
    assert shape_table.lookup("bfloat16", 768, 1024, 1024, 132, path) == narrow


def test_a_one_wave_config_is_not_used_for_more_waves(tmp_path):
    narrow = hopper.HopperConfig(bM=64, bN=64, stages=8)
    path = _table(tmp_path, [((1024, 1024, 1024), narrow)])       # 128 tiles, 132 SMs
    assert shape_table.lookup("bfloat16", 900, 900, 900, 132, path) == narrow     # 120
    assert shape_table.lookup("bfloat16", 1152, 1152, 1152, 132, path) is None   # 162


def test_split_k_keeps_the_recorded_work_units(tmp_path):
    split = hopper.HopperConfig(bM=64, bN=128, split_k=32)          # 128 x 128 tiles
    path = _table(tmp_path, [((256, 256, 65536), split)])           # 4 tiles x 32 ranges
    assert shape_table.lookup("bfloat16", 256, 256, 65536, 132, path) == split
    assert shape_table.lookup("bfloat16", 320, 320, 49152, 132, path).split_k == 14  # 9 tiles
    assert shape_table.lookup("bfloat16", 200, 200, 40000, 132, path).split_k == 32
    path = _table(tmp_path, [((256, 256, 2048), split)])            # 32 k-tiles
    assert shape_table.lookup("bfloat16", 200, 256, 2048, 132, path).split_k == 8  # >= 4 each


def test_shipped_table_loads_and_answers_its_own_shapes():
    with open(shape_table.TABLE_PATH) as f:
        raw = json.load(f)
    sms, rows = shape_table.entries()
    assert sms == raw["sms"] and len(rows) == len(raw["entries"]) > 0
    for m, n, k, cfg in rows:
        assert isinstance(cfg, (hopper.HopperConfig, tensorcore.TensorCoreConfig))
        if (m, n, k) not in shape_table.swap_faster():
            assert shape_table.lookup("bfloat16", m, n, k, sms) == cfg
    assert all(e["gain"] >= raw["min_gain"] for e in raw["entries"])


def test_route_asks_the_table_only_for_single_16_bit_products(monkeypatch):
    monkeypatch.setattr(api, "simulator_active", lambda: False)
    monkeypatch.setattr(hopper, "hopper_supported", lambda device: True)
    monkeypatch.setattr(api, "sm_count", lambda device: 132)
    _, rows = shape_table.entries()
    m, n, k, cfg = rows[0]

    def op(dtype, shape, batched=False, unit_mode=0):
        return SimpleNamespace(dtype=dtype, shape=shape, batched=batched, device=0,
                               unit_mode=unit_mode)
    a, b = op("bfloat16", (m, k)), op("bfloat16", (k, n))
    assert api._shipped_config(a, b, None) == cfg
    assert m <= 32      # a row-major A of so few rows swaps onto narrow tiles: no entry
    assert api._shipped_config(op("bfloat16", (m, k), unit_mode=1), b, None) is None
    assert api._shipped_config(op("float32", (m, k)), op("float32", (k, n)), None) is None
    assert api._shipped_config(op("bfloat16", (m, k), True), b, None) is None
    monkeypatch.setattr(hopper, "hopper_supported", lambda device: False)
    assert api._shipped_config(a, b, None) is None


def test_entries_the_swapped_rules_beat_are_left_to_them_where_they_swap(monkeypatch):
    assert (64, 4096, 4096) in shape_table.swap_faster()
    _, rows = shape_table.entries()
    cfg = next(c for m, n, k, c in rows if (m, n, k) == (64, 4096, 4096))
    assert hopper.swaps(64, 4096, 132)
    assert shape_table.lookup("bfloat16", 64, 4096, 4096, 132) is None
    monkeypatch.setattr(hopper, "swaps", lambda m, n, sms, narrow=False: False)  # no swap
    assert shape_table.lookup("bfloat16", 64, 4096, 4096, 132) == cfg


def test_no_entry_where_the_rules_swap_onto_narrow_tiles(tmp_path):
    # up to 32 rows of a row-major A the narrow swapped tiles beat the entries near them
    for m, n, k in ((16, 4096, 4096), (1, 14336, 4096), (32, 11008, 4096)):
        assert shape_table.lookup("bfloat16", m, n, k, 132) is not None
        assert shape_table.lookup("bfloat16", m, n, k, 132, narrow=True) is None
    # above 32 rows the swapped tiles are 64 wide: an entry near them still applies (the
    # shipped table has none there, so a table of one)
    path = _table(tmp_path, [((64, 14336, 4096), A)])
    assert hopper.swaps(48, 14336, 132, narrow=True)
    assert shape_table.lookup("bfloat16", 48, 14336, 4096, 132, path, narrow=True) == A


def test_writer_marks_entries_a_recheck_timed_slower_than_the_swapped_rules():
    check = _run([dict(m=64, n=4096, k=4096, rules_us=17.0, table_us=21.0),
                  dict(m=16, n=4096, k=4096, rules_us=19.4, table_us=19.2)])
    out = writer.table([_run([_row(16, 10.0, 9.0), _row(64, 20.0, 10.0)])], 1.08, [check])
    assert [e.get("swap_faster", False) for e in out["entries"]] == [False, True]


def test_prune_removes_entries_a_check_timed_slower_than_the_rules():
    shipped = dict(device="NVIDIA H100 80GB HBM3", sms=132, min_gain=1.08,
                   entries=[dict(m=m, n=4096, k=4096, config={}) for m in (16, 64, 128)]
                   + [dict(m=32, n=4096, k=4096, config={}, swap_faster=True)])
    check = _run([dict(m=16, n=4096, k=4096, ours_us=19.0, rules_us=18.0, table_us=19.0),
                  dict(m=64, n=4096, k=4096, ours_us=19.0, rules_us=15.0),
                  dict(m=128, n=4096, k=4096, ours_us=18.0, rules_us=32.0),
                  dict(m=32, n=4096, k=4096, ours_us=19.0, rules_us=18.0)])
    out, gone = writer.prune(shipped, [check])
    assert gone == [(64, 4096, 4096)]      # where the rules swap, swap_faster decides
    assert [e["m"] for e in out["entries"]] == [16, 128, 32] and out["sms"] == 132


def _run(rows, device="NVIDIA H100 80GB HBM3"):
    return dict(device=device, rows=rows)


def _row(m, ours, tuned, cfg=A):
    return dict(m=m, n=4096, k=4096, ours_us=ours, tuned_us=tuned, tuned="label",
                tuned_config=cfg.__dict__)


def test_writer_keeps_shapes_the_tuner_won_by_the_margin():
    out = writer.table([_run([_row(1, 10.0, 9.5), _row(16, 10.0, 9.0)]),
                        _run([_row(64, 20.0, 10.0, B)])], 1.08)
    assert [e["m"] for e in out["entries"]] == [16, 64] and out["sms"] == 132
    assert out["entries"][1]["config"] == B.__dict__
    with pytest.raises(SystemExit, match="one known device"):
        writer.table([_run([]), _run([], "NVIDIA A100")], 1.08)
    with pytest.raises(SystemExit, match="not tuned"):
        writer.table([_run([dict(m=1, n=2, k=3)])], 1.08)


def test_add_joins_tuned_winners_to_the_shipped_table():
    shipped = dict(device="NVIDIA H100 80GB HBM3", sms=132, min_gain=1.08,
                   entries=[dict(m=m, n=4096, k=4096, config={}, gain=1.5) for m in (16, 64)])
    out, added = writer.add(shipped, [_run([_row(64, 20.0, 10.0, B), _row(128, 10.0, 9.9),
                                            _row(256, 30.0, 20.0)])], 1.08)
    assert added == [(64, 4096, 4096), (256, 4096, 4096)]     # 128: below the margin
    assert [(e["m"], e["gain"]) for e in out["entries"]] == [(16, 1.5), (64, 2.0), (256, 1.5)]
    assert out["entries"][1]["config"] == B.__dict__ and out["sms"] == 132
    with pytest.raises(SystemExit, match="the runs are of"):
        writer.add(dict(shipped, device="NVIDIA H200"), [_run([_row(64, 20.0, 10.0)])], 1.08)
