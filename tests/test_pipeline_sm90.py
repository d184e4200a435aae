"""The warp-specialized and the plain wgmma pipelines' schedules (gemm.hopper.pipeline) against
the model of mbarriers, TMA and wgmma groups: right for every ring depth, delay_release,
consumer count and step count, and each kind of broken schedule is caught."""

import pytest

from gemm.hopper.pipeline import (PersistentGrid, TmaSpec, WarpSpecializedPipeline,
                                          check_schedule, emit_pipeline,
                                          emit_pipeline_warp_specialized)
from gemm.codegen import Source

SPEC = TmaSpec("m", 4096, ((0, 0, 0),), lambda coords, k: ("k", "m"))


def pipeline(stages=3, delay=1, consumers=2, schedule="cooperative"):
    return WarpSpecializedPipeline(lambda src, step: None, PersistentGrid("T", "K"), [SPEC],
                                   max_concurrent_steps=stages, delay_release=delay,
                                   num_compute_wgs=consumers, memory_registers=None,
                                   consumer_schedule=schedule)


@pytest.mark.parametrize("stages", [2, 3, 4, 6])
@pytest.mark.parametrize("delay", [0, 1])
@pytest.mark.parametrize("consumers", [1, 2, 3])
@pytest.mark.parametrize("schedule", ["cooperative", "pingpong"])
def test_schedule_is_right(stages, delay, consumers, schedule):
    p = pipeline(stages, delay, consumers, schedule)
    for tiles, steps in ((1, 1), (1, stages - 1), (2, stages), (3, 2 * stages + 1), (2, 0)):
        check_schedule(p.schedule(tiles, steps), p, interleavings=24)


def _mutated(p, role, edit, tiles=2, steps=5):
    sched = p.schedule(tiles, steps)
    sched[role] = edit(list(sched[role]))
    return sched


def test_a_producer_that_does_not_wait_overwrites_a_slot():
    p = pipeline(3, 1, 2)
    s = _mutated(p, "producer", lambda ev: [e for e in ev if e[:2] != ("wait", "empty")])
    with pytest.raises(AssertionError, match="refills slot"):
        check_schedule(s, p, interleavings=6)


def test_releasing_before_the_wgmma_wait_is_caught():
    p = pipeline(3, 1, 1)

    def swap(ev):          # each release moved before the wgmma_wait that precedes it
        for i in range(1, len(ev)):
            if ev[i][0] == "release" and ev[i - 1][0] == "wgmma_wait":
                ev[i - 1], ev[i] = ev[i], ev[i - 1]
        return ev
    with pytest.raises(AssertionError, match="while its wgmma reads it"):
        check_schedule(_mutated(p, 0, swap), p, interleavings=6)


def test_pingpong_without_turns_reads_a_slot_before_its_bytes_land():
    p = pipeline(2, 1, 2, "pingpong")
    s = p.schedule(4, 3)
    for c in (0, 1):
        s[c] = [e for e in s[c] if e[1:2] != ("order",)]
    with pytest.raises(AssertionError, match="reads step"):
        check_schedule(s, p, interleavings=30)


def test_a_wrong_parity_reads_stale_data_or_hangs():
    p = pipeline(2, 0, 1)

    def flip(ev):
        return [("wait", "full", e[2], 1 - e[3]) if e[:2] == ("wait", "full") else e
                for e in ev]
    with pytest.raises(AssertionError, match="reads step|deadlock"):
        check_schedule(_mutated(p, 0, flip), p, interleavings=6)


@pytest.mark.parametrize("step, match", [(3, "deadlock"), (9, "never released")])
def test_a_missing_release_is_caught(step, match):
    p = pipeline(2, 1, 2)
    s = _mutated(p, 1, lambda ev: [e for e in ev if e != ("release", step, step % 2)])
    with pytest.raises(AssertionError, match=match):
        check_schedule(s, p, interleavings=6)


def test_sizes_and_registers():
    p = emit_pipeline_warp_specialized(lambda src, step: None, PersistentGrid("T", "K"),
                                       [SPEC, TmaSpec("n", 3000, (), lambda c, k: ("0", "0"))],
                                       max_concurrent_steps=4, num_compute_wgs=2,
                                       memory_registers=40)
    assert p.offsets == (0, 4096) and p.slot_bytes == 4096 + 3072
    assert p.shared_bytes == 4 * p.slot_bytes + 1024
    assert (p.threads, p.launch_registers, p.compute_registers) == (384, 168, 232)


@pytest.mark.parametrize("kw, match", [
    (dict(max_concurrent_steps=1), "max_concurrent_steps"),
    (dict(delay_release=2), "delay_release"),
    (dict(num_compute_wgs=4), "num_compute_wgs"),
    (dict(memory_registers=20), "memory_registers"),
    (dict(memory_registers=256, num_compute_wgs=2), "fewer registers"),
    (dict(out_specs=[SPEC]), "out_specs"),
    (dict(consumer_schedule="stream-k"), "consumer_schedule"),
])
def test_bad_arguments_are_refused(kw, match):
    args = dict(max_concurrent_steps=2, delay_release=0, num_compute_wgs=1)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        emit_pipeline_warp_specialized(lambda src, step: None, PersistentGrid("T", "K"),
                                       [SPEC], **args)


def plain(stages=3, delay=1):
    return emit_pipeline(lambda src, step: src("body()"), PersistentGrid("T", "K"), [SPEC],
                         max_concurrent_steps=stages, delay_release=delay)


@pytest.mark.parametrize("stages", [2, 3, 4, 6])
@pytest.mark.parametrize("delay", [0, 1])
def test_plain_schedule_is_right(stages, delay):
    p = plain(stages, delay)
    for tiles, steps in ((1, 1), (1, stages - 1), (2, stages), (3, 2 * stages + 1), (2, 0)):
        got = check_schedule(p.schedule(tiles, steps), p, interleavings=12)
        assert got.startswith(f"ok: {tiles * steps} steps, 1 plain consumers")


def test_plain_refill_before_the_wgmma_wait_is_caught():
    p = plain(3, 1)

    def early(ev):          # each refill moved before the wgmma_wait (and sync) ahead of it
        for i in range(2, len(ev)):
            if ev[i][0] == "load" and ev[i - 1][0] == "release" and ev[i - 2][0] == "wgmma_wait":
                ev[i - 2], ev[i - 1], ev[i] = ev[i], ev[i - 2], ev[i - 1]
        return ev
    with pytest.raises(AssertionError, match="refills slot"):
        check_schedule(_mutated(p, 0, early), p, interleavings=6)


def test_plain_code_refills_after_the_sync():
    src = Source()
    plain(3, 1).emit(src)
    text = src.text()
    assert "setmaxnreg" not in text and "mbarrier_arrive(" not in text      # no empty barriers
    body = text[text.index("body()"):]
    wait, sync, load = (body.index(x) for x in ("wgmma_wait(1)", "cuda.syncthreads()",
                                                "tma_load_2d("))
    assert wait < sync < load
    assert plain(3, 1).threads == 128 and plain(3, 1).kind == "plain"
