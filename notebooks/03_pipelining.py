# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3. Pipelining: MoYe's two SIMT pipelines, a schedule, and its bubbles
#
# A GEMM block walks K one tile at a time: copy the A and B tiles from global to shared
# memory, load them into registers, multiply. Pipelining overlaps the copy of the *next*
# tile with the arithmetic on this one. This notebook
#
# 1. runs MoYe.jl's two pipelines (`prefetch` and `double_buffer`, gemm.matmul's kernels
#    written with `gemm.cute` in `gemm.cute_kernels`) and shows the shape of their main loops;
# 2. draws a timeline of copies and compute per stage from the schedule of a cp.async ring
#    (`gemm.pipeline.ring_schedule`);
# 3. redoes the bubble arithmetic of the Pallas pipelining guide on that timeline.
#
# **GPU or simulator.** numba chooses its CUDA simulator once, when `numba.cuda` is first
# imported, from `NUMBA_ENABLE_CUDASIM`. So the first cell decides, before anything imports
# numba: it asks a child process whether a GPU is usable (as `python -m gemm` does) and, if
# not, sets `NUMBA_ENABLE_CUDASIM=1`. On a GPU the kernels run at 2048^3 and are timed; in
# the simulator they run at a small size with partial tiles (a 32x32x8 tile on 8x8 threads,
# every thread a Python thread) and are only checked, not timed.

# %%
from gemm._env import use_simulator_without_gpu     # imports no numba

SIMULATOR = use_simulator_without_gpu()     # before anything imports numba
print("numba's CUDA simulator (small sizes, no timings)" if SIMULATOR
      else "a CUDA GPU (real kernels, timed)")

# %%
import numpy as np
from numba import cuda

import gemm
from gemm.pipeline import ring_schedule
from gemm import cute_kernels
from gemm.simt import SimtConfig
from layoutalg.viz import svg_timeline

# %% [markdown]
# ## MoYe's two pipelines
#
# Both use 128x128x8 tiles on 16x16 threads on a GPU (MoYe's configuration); the simulator
# uses 32x32x8 tiles on 8x8 threads, the same kernels on a smaller block.
#
# - **prefetch**: one shared buffer per operand. Each k-tile: wait for its `cp.async`
#   group, `syncthreads`, load the whole tile shared -> registers, `syncthreads` (everybody
#   is done reading the buffer), issue the `cp.async` copy of the *next* k-tile into the
#   same buffer, then the FMAs of this tile from registers.
# - **double_buffer**: two shared buffers (a stage mode `(bM, bK, 2)`) and two register
#   k-blocks. While k-block `kb` is multiplied, `kb + 1` is loaded from shared memory; at
#   k-block 0 the next k-tile is issued into the other buffer. One `syncthreads` per tile,
#   and the shared -> register loads hide behind the FMAs.
#
# The cell below prints the *shape* of each main loop as `gemm.cute_kernels` writes it: its
# statements classified (a tiled copy or a `gemm` call is one statement, unrolled when the
# kernel is compiled) and runs of the same kind collapsed.

# %%
import inspect


def config(pipeline):
    if SIMULATOR:
        return SimtConfig(bM=32, bN=32, bK=8, mma_threads=(8, 8), pipeline=pipeline)
    return SimtConfig(pipeline=pipeline)


def loop_shape(source):
    """The main loop of a kernel of gemm.cute_kernels as runs of: cp.async copies (a
    predicated tiled copy), shared -> register loads (a tiled copy into a register
    fragment), FMAs (a ``gemm`` call), waits and barriers."""
    body = source[source.index("while k"):source.index("# Epilogue")]
    kinds = []
    for line in body.splitlines():
        s = line.strip()
        kind = ("cp.async gmem->smem" if s.startswith("copy_if(COPY_") else
                "wait" if s.startswith("cp_async_wait") else
                "syncthreads" if "syncthreads" in s else
                "FMA" if s.startswith("gemm(") else
                "load smem->reg" if s.startswith("copy(S2R_") else
                "for each k-block:" if s.startswith("for k_block in") else
                "if next tile:" if s.startswith("if") and "< k_tile_max" in s else None)
        if kind is None:
            continue
        if kinds and kinds[-1][0] == kind:
            kinds[-1][1] += 1
        else:
            kinds.append([kind, 1])
    return kinds


for pipeline, write in (("prefetch", cute_kernels._prefetch),
                        ("double_buffer", cute_kernels._double_buffer)):
    cfg = config(pipeline)
    src = inspect.getsource(write)
    print(f"{pipeline}: {cfg.threads} threads, shared stages = {cfg.stages}; main loop:")
    for kind, count in loop_shape(src):
        print(f"    {kind}" + (f" x{count}" if count > 1 else ""))
    shape = [k for k, _ in loop_shape(src)]
    assert "cp.async gmem->smem" in shape and "FMA" in shape
    # prefetch issues the next tile only after a barrier that follows all its loads
    if pipeline == "prefetch":
        assert shape.index("if next tile:") > shape.index("load smem->reg")

# %% [markdown]
# Now run both, checked element by element against numpy in float64 (and, on a GPU, timed
# with CUDA events).

# %%
def run(pipeline, m, n, k, reps=0):
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((m, k), dtype=np.float32))
    b = np.asfortranarray(rng.standard_normal((k, n), dtype=np.float32))
    A, B = cuda.to_device(a), cuda.to_device(b)
    C = cuda.to_device(np.full((m, n), np.nan, np.float32))
    gemm.matmul(A, B, C, kernel=config(pipeline))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    err = float(np.max(np.abs(C.copy_to_host() - ref) / (1e-5 * bound + 1e-30)))
    ms = None
    if reps:
        start, stop = cuda.event(), cuda.event()
        cuda.synchronize()
        start.record()
        for _ in range(reps):
            gemm.matmul(A, B, C, kernel=config(pipeline))
        stop.record()
        stop.synchronize()
        ms = cuda.event_elapsed_time(start, stop) / reps
    return err, ms


size = (40, 36, 24) if SIMULATOR else (2048, 2048, 2048)      # partial tiles in the simulator
for pipeline in ("prefetch", "double_buffer"):
    err, ms = run(pipeline, *size, reps=0 if SIMULATOR else 10)
    m, n, k = size
    timing = "" if ms is None else f", {ms:.3f} ms = {2 * m * n * k / ms / 1e9:.2f} TFLOP/s"
    print(f"{pipeline:14s} {m}x{n}x{k}: max error / tolerance = {err:.3f}{timing}")
    assert err <= 1.0

# %% [markdown]
# ## The schedule of a pipeline, as data
#
# `gemm.pipeline` holds the general form of this loop (Pallas' `emit_pipeline` on a cp.async
# ring, as `gemm.elementwise`'s add runs it): `stages` ring-buffer slots per input, a
# prologue that issues the first `stages - 1` copies, and a loop that issues the copy of step
# `i + stages - 1` into the slot step `i - 1` released, computes step `i`, then waits for step
# `i + 1`'s copy. Every issue point commits one `cp.async` group, empty past the last step,
# so every wait is `wait(stages - 2)` (`stages - 2 - delay_release` with a `delay_release`,
# below). `ring_schedule(stages, steps)` returns that plan as events; the add kernel's own
# copies, waits and barriers are checked against it in numba's simulator.
#
# In those terms both of MoYe's kernels fetch **one k-tile ahead** (`stages = 2`): for
# `prefetch` the second buffer is the registers (the tile is copied out of shared memory
# before the next copy may overwrite it), for `double_buffer` it is the second shared
# buffer. What double buffering adds is inside a tile: the shared -> register loads of
# k-block `kb + 1` overlap the FMAs of `kb`, and one barrier per tile goes away.

# %%
def schedule(stages, steps, delay_release=0):
    """The ring's events for ``steps`` k-tiles, each step's body one compute on its slot."""
    def body(events, step, slot, ready):
        events.append(("compute", step, slot))
        ready()
    return ring_schedule(stages, steps, delay_release, body=body)


events = schedule(2, 4)
for e in events:
    print(e)
assert [e for e in events if e[0] == "compute"] == [("compute", s, s % 2) for s in range(4)]

# %% [markdown]
# ## A timeline from the schedule
#
# To draw the schedule we give each event a duration, a deliberately simple model (one
# block; `syncthreads` and issuing a copy cost nothing):
#
# - a copy of a step's tiles takes `copy` time units from its issue, and copies in flight
#   overlap (the cost is latency, `alpha + X / beta` in the Pallas guide);
# - `wait(n)` blocks until every committed group but the newest `n` has landed;
# - `compute` takes `compute` units (`Y / F`) and occupies the threads.
#
# Each slot of the ring buffer is a lane (the copy into it, then the compute reading it);
# the last lane is the arithmetic.

# %%
def timeline(events, copy, compute):
    """{lane: [(start, end, label, key)]} and the total time of a schedule's events."""
    t, groups, group, lanes = 0, [], [], {}
    for e in events:
        kind = e[0]
        if kind == "copy_in":
            _, step, slot = e
            lanes.setdefault(f"slot {slot} copy", []).append((t, t + copy, f"k{step}", step))
            group.append(t + copy)
        elif kind == "commit":              # a group lands with its last copy; empty: at once
            groups.append(max(group, default=t))
            group = []
        elif kind == "wait":                # all groups but the newest n have landed
            n = e[1]
            if len(groups) > n:
                t = max([t] + groups[:len(groups) - n])
        elif kind == "compute":
            _, step, slot = e
            lanes.setdefault("compute", []).append((t, t + compute, f"k{step}", step))
            t += compute
    order = sorted(k for k in lanes if k != "compute") + ["compute"]
    return [(k, lanes[k]) for k in order], t


def picture(stages, copy, compute, steps=6, delay_release=0):
    lanes, total = timeline(schedule(stages, steps, delay_release), copy, compute)
    busy = steps * compute
    title = (f"stages={stages}, delay_release={delay_release}: copy {copy}, compute {compute};"
             f" total {total}, compute busy {busy}/{total} = {busy / total:.0%}")
    return svg_timeline(lanes, title=title, unit=14), total


svg, total = picture(stages=2, copy=3, compute=4)
svg

# %% [markdown]
# With the copy (3) shorter than a compute step (4), two stages are enough: after the first
# copy every copy hides behind the compute of the previous step. The only bubble is the
# first copy, the *prologue*: total = `copy + steps * compute`.
#
# When the copy takes longer than a step's compute (latency bound), two stages leave a gap
# before every step: each step waits for its own copy, total = `steps * copy + compute`
# (the guide's memory-bound `alpha + N * X / beta`, plus the last compute). A third stage
# keeps two copies in flight and closes the gap:

# %%
slow2, total2 = picture(stages=2, copy=6, compute=4)
slow3, total3 = picture(stages=3, copy=6, compute=4)
print(f"copy 6, compute 4, 6 steps: 2 stages {total2}, 3 stages {total3}")
assert total2 == 6 * 6 + 4          # every step waits for its own copy: copy-bound
assert total3 == 6 + 6 * 4          # copy + steps * compute: compute-bound again
from layoutalg.viz import side_by_side  # noqa: E402

side_by_side(slow2, slow3)

# %% [markdown]
# `delay_release = d` (as in Pallas / Mosaic GPU) lets the body keep reading a step's tiles
# for `d` more steps (e.g. an asynchronous MMA still in flight), so a slot is refilled `d`
# steps later: with the same 3 stages only one copy is ahead again, and the latency-bound
# gap comes back. It needs `stages >= d + 2`.

# %%
delayed, total_d = picture(stages=3, copy=6, compute=4, delay_release=1)
assert total_d == total2
delayed

# %% [markdown]
# ## The bubble arithmetic
#
# The Pallas guide (seed 002): with `N` steps, a copy latency `alpha + X / beta` and a
# compute time `Y / F` per step, a compute-bound pipeline takes
#
# `T = (alpha + X / beta) + N * (Y / F)`,
#
# the first term the bubble while the pipeline fills (twice that with a bubble at the end,
# for a pipeline that also copies results out). Its idealised figure has three stages of
# one time slot each (copy in, compute, copy out): `N` iterations take `N + 2` slots, and
# compute is busy in `N` of them, `6/8 = 75%` for `N = 6`. In general the utilisation is
# `N / (N + S - 1)` for `S` one-slot stages, which tends to 1 as `N` grows: the bubble is
# a fixed cost per block, paid once per K loop.
#
# We check both statements against the timelines above, and compute what the bubble costs
# a 128x128x8-tiled GEMM block whose K loop has `K / 8` steps.

# %%
copy, compute = 3, 4
for steps in (1, 4, 16, 64):
    _, t = timeline(schedule(2, steps), copy, compute)
    assert t == copy + steps * compute                 # T = (alpha + X/beta) + N * Y/F
    print(f"N = {steps:3d}: T = {t:4d}, utilisation {steps * compute / t:.1%}")

S, N = 3, 6
slots = N + S - 1
assert (N, slots) == (6, 8) and N / slots == 0.75      # the guide's 6/8 = 75%
for K in (256, 1024, 4096):
    N = K // 8
    print(f"K = {K:4d}: {N:3d} k-tiles, one prologue copy of {copy} units vs "
          f"{N * compute} units of compute: {N * compute / (copy + N * compute):.1%} busy")
