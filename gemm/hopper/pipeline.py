"""Hopper's warp-specialized pipeline, in the spirit of Pallas' ``emit_pipeline_warp_specialized``:
one producer warpgroup issues TMA loads into a ring of ``max_concurrent_steps`` shared slots,
``num_compute_wgs`` consumer warpgroups run wgmma on them, and mbarriers say when a slot is
full (its bytes have landed) and when it is free again (every consumer is done reading it).

The code is written into a :class:`gemm.codegen.Source` by :meth:`WarpSpecializedPipeline.emit`;
the kernel around it supplies the grid (a persistent loop over output tiles, each a sequence
of pipeline steps), the TMA inputs (:class:`TmaSpec`), the ``body`` of a step (the wgmma it
issues) and a :class:`ComputeContext` (the consumers' set-up, and what they do before and
after each tile: the epilogue). Per ring slot ``s`` there are two mbarriers, ``full[s]``
(one arrival: the producer's ``arrive.expect_tx`` with the slot's bytes, completed by TMA) and
``empty[s]`` (one arrival per warp of the consumers that read the slot). A step ``i`` of the
block's whole sequence (its tiles x steps, in order) uses slot ``i % stages`` in phase
``i // stages``::

    producer  for each step i:  wait empty[s] parity (phase(i) + 1) & 1   (a fresh barrier
                                passes parity 1: the first lap does not wait)
                                arrive.expect_tx full[s], bytes;  TMA loads -> slot s
    consumer  for each of its tiles:  before_tile
              for each step i:  wait full[s] parity phase(i) & 1
                                wgmma.fence; body(step); wgmma.commit_group
                                wgmma.wait_group delay_release
                                release: empty[slot of i - d] (d = delay_release; not at a
                                tile's first step when d = 1)
              after the steps:  [d = 1: wgmma.wait_group 0; release the last slot]  after_tile

Two ways to share the tiles among the consumers (``consumer_schedule``, CUTLASS's names):
"cooperative", every consumer reads every step (each computes its rows of the block's tile;
``empty[s]`` waits for all of them), and "pingpong", consumer ``c`` takes every
``num_compute_wgs``-th tile of the block alone (``empty[s]`` waits for one warpgroup): the
ring holds only a few steps, so one consumer's main loop runs while the other stores its
tile, and the epilogue is hidden. The main loops take turns through one more mbarrier per
consumer, ``order[c]``: consumer ``c`` starts a tile's steps once consumer ``c - 1`` has
passed all its waits for the previous tile, and then signals ``order[c + 1]``. Without it a
consumer could wait for a slot's phase two fills ahead, and a parity wait cannot tell that
phase from the one two before it: it would read a slot before its bytes land.

The plain pipeline (:class:`WgmmaPipeline`, Pallas' ``emit_pipeline``) is the same ring
without warp specialization: one warpgroup waits for a slot, multiplies, and after a
``wgmma.wait_group`` and a block barrier its thread 0 refills the freed slot; it is what
warp specialization is measured against (benchmarks/RESULTS.md).

``delay_release = 1`` (Pallas' meaning, the seed's wgmma pipeline) keeps one wgmma group in
flight while the next step's loads are waited for: a slot is released only once the group
that read it has completed. The same plan is data: :meth:`WarpSpecializedPipeline.schedule`
lists each role's events, and :func:`check_schedule` runs them against a model of mbarriers,
TMA and wgmma groups under many interleavings, checking that no slot is overwritten while a
consumer or an in-flight wgmma may still read it, that each step is read after its bytes
landed, and that nothing deadlocks.

>>> p = WarpSpecializedPipeline(lambda src, step: None, PersistentGrid("T", "K"),
...                             [TmaSpec("map_a", 16384, ((0, 0, 0),), lambda c, k: ("k", "m"))],
...                             max_concurrent_steps=3, delay_release=1, num_compute_wgs=2)
>>> p.threads, p.slot_bytes, p.shared_bytes
(384, 16384, 50176)
>>> check_schedule(p.schedule(tiles=2, steps=4), p)
'ok: 8 steps, 2 cooperative consumers, 3 slots, delay_release 1, 200 interleavings'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from ..arch.smem import SWIZZLE_ALIGN
from ..codegen import align_arg
from ..arch.registers import consumer_registers, launch_registers
from .pipeline_model import check_schedule

__all__ = ["TmaSpec", "PersistentGrid", "ComputeContext", "WarpSpecializedPipeline",
           "emit_pipeline_warp_specialized", "WgmmaPipeline", "emit_pipeline",
           "check_schedule", "ARCH_IMPORTS_SM90"]

# The gemm.arch.sm90 names the emitted code calls; a kernel module imports them.
ARCH_IMPORTS_SM90 = ("mbarrier_init", "fence_mbarrier_init", "mbarrier_wait",
                     "mbarrier_arrive", "mbarrier_arrive_expect_tx", "tma_load_2d", "tma_load_3d",
                     "wgmma_fence", "wgmma_commit", "wgmma_wait", "setmaxnreg_inc",
                     "setmaxnreg_dec", "elect_one", "shared_offset_of")


@dataclass(frozen=True)
class TmaSpec:
    """A pipeline input loaded by TMA: ``tensor_map`` (the kernel parameter holding the map),
    ``bytes`` per step, ``boxes``: ``(shared byte offset in the block, d0, d1)`` per TMA box
    (its coordinates relative to the block's), and ``index_map(coords, k)`` -> the block's
    coordinates as two code strings (contiguous dimension first) for the tile ``coords``
    (names the grid's ``coords`` wrote) and step ``k``, and a third for a 3-D map (which
    matrix of a batch)."""

    tensor_map: str
    bytes: int
    boxes: tuple
    index_map: object


@dataclass(frozen=True)
class PersistentGrid:
    """The pipeline's iteration space: ``tiles`` output tiles (a code expression), each of
    ``steps`` pipeline steps, taken by the blocks in turn (block ``bx`` runs tiles ``bx``,
    ``bx + gridDim.x``, ...). ``coords(src, tile)`` writes the code that decodes tile index
    ``tile`` and returns the names it bound (e.g. the tile's row and column); None: the tile
    index itself."""

    tiles: str
    steps: str
    coords: object = None

    def emit_coords(self, src, tile):
        return (tile,) if self.coords is None else tuple(self.coords(src, tile))


@dataclass(frozen=True)
class ComputeContext:
    """What the consumer warpgroups do around the steps: ``setup(src, wg)`` once (``wg``
    names the consumer index), ``before_tile(src, coords)`` and ``after_tile(src, coords,
    steps)`` around each tile's steps (the epilogue), ``teardown(src)`` after the last tile.
    Each writes code; each may be None."""

    setup: object = None
    before_tile: object = None
    after_tile: object = None
    teardown: object = None


@dataclass(frozen=True)
class Step:
    """What ``body`` sees: ``k`` (the step index in the tile, a code name), ``slot`` (the
    slot's byte offset in the shared array, a code name), ``offsets`` (each input's byte
    offset in the slot), ``first`` (code: true at a tile's first step), ``wg`` (the consumer
    index, a code name)."""

    k: str
    slot: str
    offsets: tuple
    first: str
    wg: str


def _round_up(x, m):
    return -(-x // m) * m


class _Ring:
    """What both pipelines share: a ring of ``stages`` slots, each holding one step's TMA
    inputs (each at a 1 KiB-aligned offset of the slot), the grid, the body and the compute
    context; ``fn`` names the caller in errors."""

    kind = None

    def __init__(self, fn, body, grid, in_specs, out_specs, max_concurrent_steps,
                 delay_release, compute_context):
        if out_specs:
            raise ValueError(f"{fn}: out_specs are not supported; write outputs in the "
                             "compute_context's after_tile (epilogue)")
        if not in_specs or not all(isinstance(s, TmaSpec) for s in in_specs):
            raise ValueError(f"{fn}: in_specs must be TmaSpecs")
        if not (isinstance(max_concurrent_steps, int) and max_concurrent_steps >= 2):
            raise ValueError(f"{fn}: max_concurrent_steps must be an int >= 2, got "
                             f"{max_concurrent_steps!r}")
        if delay_release not in (0, 1):
            raise ValueError(f"{fn}: delay_release must be 0 or 1 (wgmma groups kept in "
                             f"flight), got {delay_release!r}")
        self.body, self.grid, self.in_specs = body, grid, tuple(in_specs)
        self.stages, self.delay = max_concurrent_steps, delay_release
        self.context = compute_context or ComputeContext()
        offsets, at = [], 0
        for spec in self.in_specs:
            offsets.append(at)
            at += _round_up(spec.bytes, SWIZZLE_ALIGN)
        self.offsets, self.slot_bytes = tuple(offsets), at
        self.step_bytes = sum(s.bytes for s in self.in_specs)

    @property
    def shared_bytes(self):
        """Dynamic shared memory to launch with: the ring, plus room to align it."""
        return self.stages * self.slot_bytes + SWIZZLE_ALIGN

    def _slot(self, src, it="it", s="s", ph="ph", slot="slot"):
        """``s``, ``ph`` and ``slot``: the slot, phase parity and slot offset of step ``it``
        of the block's sequence."""
        S = self.stages
        src(f"{s} = {it} % U({S})", f"{ph} = ({it} // U({S})) & U(1)",
            f"{slot} = pad + {s} * U({self.slot_bytes})")

    def _emit_load(self, src, smem, bars, coords, k, slot, s):
        """Arrive on ``full[s]`` expecting the step's bytes, and issue its TMA loads (tile
        ``coords``, step ``k``) into the slot at ``slot``."""
        src(f"mbarrier_arrive_expect_tx({bars}, {s}, U({self.step_bytes}))")
        for spec, off in zip(self.in_specs, self.offsets):
            c0, c1, *batch = spec.index_map(coords, k)
            for at, d0, d1 in spec.boxes:
                where = ", ".join([f"{c0} + U({d0})", f"{c1} + U({d1})"] + batch)
                src(f"tma_load_{2 + len(batch)}d({smem}, {slot} + U({off + at}), "
                    f"{spec.tensor_map}, {where}, {bars}, {s})")


class WarpSpecializedPipeline(_Ring):
    """See the module. ``memory_registers``: the producer's registers per thread after
    ``setmaxnreg.dec`` (None: no setmaxnreg); the consumers take what is left of the
    register file (``compute_registers``), rounded down to a multiple of 8, at most 240."""

    def __init__(self, body, grid, in_specs, out_specs=(), max_concurrent_steps=2,
                 delay_release=0, num_compute_wgs=1, memory_registers=40,
                 compute_context=None, consumer_schedule="cooperative"):
        fn = "emit_pipeline_warp_specialized"
        super().__init__(fn, body, grid, in_specs, out_specs, max_concurrent_steps,
                         delay_release, compute_context)
        if num_compute_wgs not in (1, 2, 3):
            raise ValueError(f"{fn}: num_compute_wgs must be 1, 2 or 3, got "
                             f"{num_compute_wgs!r}")
        if consumer_schedule not in ("cooperative", "pingpong"):
            raise ValueError(f"{fn}: consumer_schedule must be 'cooperative' or 'pingpong', "
                             f"got {consumer_schedule!r}")
        self.kind = consumer_schedule
        self.pingpong = consumer_schedule == "pingpong"
        self.consumers = num_compute_wgs
        self.memory_registers = memory_registers
        if memory_registers is not None:
            if not (isinstance(memory_registers, int) and 24 <= memory_registers <= 256
                    and memory_registers % 8 == 0):
                raise ValueError(f"{fn}: memory_registers must be a multiple of 8 in "
                                 f"24..256, got {memory_registers!r}")
            self.compute_registers = consumer_registers(memory_registers, self.consumers)
            if self.compute_registers < self.launch_registers:
                raise ValueError(f"{fn}: memory_registers={memory_registers} leaves the "
                                 "consumers fewer registers than the launch gives "
                                 f"({self.launch_registers})")
        else:
            self.compute_registers = None

    @property
    def readers(self):
        """Consumer warpgroups that read each step (and release its slot)."""
        return 1 if self.pingpong else self.consumers

    @property
    def threads(self):
        return 128 * (1 + self.consumers)

    @property
    def launch_registers(self):
        """Registers per thread a one-block-per-SM launch allows (ptxas rounds to 8)."""
        return launch_registers(self.threads)

    # --- the plan, shared by the code and the schedule ------------------------------------

    def _consumer_step(self):
        """The consumer's actions per step: what it waits for, and what it releases."""
        return (("wait_full",), ("fence",), ("mma",), ("commit",), ("wgmma_wait", self.delay),
                ("release", "prev" if self.delay else "cur"))

    def _consumer_drain(self):
        return (("wgmma_wait", 0), ("release", "cur")) if self.delay else ()

    # --- code ------------------------------------------------------------------------------

    def emit(self, src, smem="sm", bars="bars", simulator=False):
        """Write the pipeline into ``src`` inside a kernel whose dynamic shared array (bytes)
        is ``smem``; declares ``bars`` and the thread names ``t``, ``wg``, ``lane``
        (``simulator``: for numba's simulator, which takes no shared-array alignment)."""
        S = self.stages
        src(f"{bars} = cuda.shared.array({self._barriers}, uint64{align_arg(8, simulator)})",
            "t = U(cuda.threadIdx.x)", "wg = t // U(128)", "lane = t % U(32)",
            f"pad = shared_offset_of({smem}, U({SWIZZLE_ALIGN}))")
        with src.block("if t == U(0):"):
            with src.block(f"for i in range({S}):"):
                src(f"mbarrier_init({bars}, U(i), U(1))",
                    f"mbarrier_init({bars}, U({S}) + U(i), U({4 * self.readers}))")
            if self.pingpong:
                with src.block(f"for i in range({self.consumers}):"):
                    src(f"mbarrier_init({bars}, U({2 * S}) + U(i), U(4))")
            src("fence_mbarrier_init()")
        src("cuda.syncthreads()", "bx = U(cuda.blockIdx.x)", "gx = U(cuda.gridDim.x)",
            f"tiles = {self.grid.tiles}", f"steps = {self.grid.steps}")
        with src.block("if wg == U(0):"):
            if self.memory_registers is not None:
                src(f"setmaxnreg_dec({self.memory_registers})")
            with src.block("if t < U(32):"):
                with src.block("if elect_one():"):
                    self._emit_producer(src, smem, bars)
        with src.block("else:"):
            if self.compute_registers is not None:
                src(f"setmaxnreg_inc({self.compute_registers})")
            src("cw = wg - U(1)")
            if self.context.setup:
                self.context.setup(src, "cw")
            self._emit_consumer(src, bars)

    @property
    def _barriers(self):
        """full[stages], empty[stages], and order[consumers] when pingpong."""
        return 2 * self.stages + (self.consumers if self.pingpong else 0)

    def _emit_producer(self, src, smem, bars):
        S = self.stages
        src("it = U(0)", "tile = bx")
        with src.block("while tile < tiles:"):
            coords = self.grid.emit_coords(src, "tile")
            src("k = U(0)")
            with src.block("while k < steps:"):
                self._slot(src)
                src(f"mbarrier_wait({bars}, U({S}) + s, ph ^ U(1))")
                self._emit_load(src, smem, bars, coords, "k", "slot", "s")
                src("it += U(1)", "k += U(1)")
            src("tile += gx")

    def _release(self, src, bars, slot, guard=None):
        cond = "lane == U(0)" if guard is None else f"{guard} and lane == U(0)"
        with src.block(f"if {cond}:"):
            src(f"mbarrier_arrive({bars}, U({self.stages}) + {slot})")

    def _emit_consumer(self, src, bars):
        """Cooperative: every consumer runs every tile of the block. Pingpong: consumer
        ``cw`` runs the block's tiles cw, cw + n, ... (n consumers) and skips the steps of
        the others in the ring's sequence."""
        ctx = self.context
        order = 2 * self.stages
        if self.pingpong:
            src("it = cw * steps", "tile = bx + cw * gx", "j = U(0)")
        else:
            src("it = U(0)", "tile = bx")
        src("prev = U(0)")
        with src.block("while tile < tiles:"):
            coords = self.grid.emit_coords(src, "tile")
            if ctx.before_tile:
                ctx.before_tile(src, coords)
            if self.pingpong:       # the previous tile's consumer has passed its waits
                with src.block("if cw > U(0):"):
                    src(f"mbarrier_wait({bars}, U({order}) + cw, j & U(1))")
                with src.block("elif j > U(0):"):
                    src(f"mbarrier_wait({bars}, U({order}), (j - U(1)) & U(1))")
            src("k = U(0)")
            with src.block("while k < steps:"):
                for action in self._consumer_step():
                    kind = action[0]
                    if kind == "wait_full":
                        self._slot(src)
                        src(f"mbarrier_wait({bars}, s, ph)")
                    elif kind == "fence":
                        src("wgmma_fence()")
                    elif kind == "mma":
                        self.body(src, Step("k", "slot", self.offsets, "k == U(0)", "cw"))
                    elif kind == "commit":
                        src("wgmma_commit()")
                    elif kind == "wgmma_wait":
                        src(f"wgmma_wait({action[1]})")
                    elif action[1] == "prev":
                        self._release(src, bars, "prev", "k > U(0)")
                    else:
                        self._release(src, bars, "s")
                src("prev = s", "it += U(1)", "k += U(1)")
            if self.pingpong:       # the next tile's consumer may start its steps
                with src.block("if lane == U(0):"):
                    src(f"mbarrier_arrive({bars}, U({order}) + (cw + U(1)) % "
                        f"U({self.consumers}))")
            for action in self._consumer_drain():
                if action[0] == "wgmma_wait":
                    src(f"wgmma_wait({action[1]})")
                else:       # the tile's last step: its slot is ``prev``
                    self._release(src, bars, "prev", "steps > U(0)")
            if ctx.after_tile:
                ctx.after_tile(src, coords, "steps")
            if self.pingpong:
                src(f"it += U({self.consumers - 1}) * steps",
                    f"tile += U({self.consumers}) * gx", "j += U(1)")
            else:
                src("tile += gx")
        if ctx.teardown:
            ctx.teardown(src)

    # --- the schedule as data ----------------------------------------------------------------

    def schedule(self, tiles, steps):
        """Each role's events for a block running ``tiles`` tiles of ``steps`` steps:
        ``{"producer": [...], 0: [...], 1: [...]}`` (consumer warpgroups by index). Events:
        ``("wait", barrier, slot, parity)`` (barrier "full" or "empty"), ``("load", step,
        slot)`` (arrive.expect_tx and the TMA loads), ``("mma", step, slot)`` (a wgmma group
        reading the slot, committed), ``("wgmma_wait", n)``, ``("release", step, slot)``,
        and for pingpong ``("wait", "order", c, parity)`` / ``("arrive", "order", c)``."""
        S, total = self.stages, tiles * steps
        producer = []
        for i in range(total):
            s, phase = i % S, i // S
            producer += [("wait", "empty", s, (phase + 1) & 1), ("load", i, s)]
        out = {"producer": producer}
        for c in range(self.consumers):
            ev = []
            mine = range(c, tiles, self.consumers) if self.pingpong else range(tiles)
            for j, tile in enumerate(mine):
                if self.pingpong and (c > 0 or j > 0):
                    ev.append(("wait", "order", c, (j - (c == 0)) & 1))
                for k in range(steps):
                    i = tile * steps + k
                    s, phase = i % S, i // S
                    for action in self._consumer_step():
                        kind = action[0]
                        if kind == "wait_full":
                            ev.append(("wait", "full", s, phase & 1))
                        elif kind == "mma":
                            ev.append(("mma", i, s))
                        elif kind == "wgmma_wait":
                            ev.append(("wgmma_wait", action[1]))
                        elif kind == "release":
                            if action[1] == "cur":
                                ev.append(("release", i, s))
                            elif k > 0:
                                ev.append(("release", i - 1, (i - 1) % S))
                if self.pingpong:
                    ev.append(("arrive", "order", (c + 1) % self.consumers))
                if steps:
                    last = tile * steps + steps - 1
                    for action in self._consumer_drain():
                        ev.append(("wgmma_wait", 0) if action[0] == "wgmma_wait"
                                  else ("release", last, last % S))
            out[c] = ev
        return out


def emit_pipeline_warp_specialized(
        body: Callable, grid: PersistentGrid, in_specs: Sequence[TmaSpec],
        out_specs: Sequence[Any] = (), max_concurrent_steps: int = 2, delay_release: int = 0,
        num_compute_wgs: int = 1, memory_registers: Optional[int] = 40,
        compute_context: Optional[ComputeContext] = None,
        consumer_schedule: str = "cooperative") -> WarpSpecializedPipeline:
    """A :class:`WarpSpecializedPipeline` (Pallas' argument names, and CUTLASS's
    ``consumer_schedule``; see the module): call its ``emit(src)`` inside a kernel,
    ``schedule(tiles, steps)`` for its events."""
    return WarpSpecializedPipeline(body, grid, in_specs, out_specs, max_concurrent_steps,
                                   delay_release, num_compute_wgs, memory_registers,
                                   compute_context, consumer_schedule)


class WgmmaPipeline(_Ring):
    """The plain (not warp-specialized) wgmma pipeline, Pallas' ``emit_pipeline``: one
    warpgroup both loads and multiplies. Thread 0 fills the ring's ``stages`` slots ahead
    (the first ``stages`` steps of the block's sequence); at each step every thread waits for
    ``full[s]``, issues the body's wgmma group and waits until at most ``delay_release``
    groups are pending; then the warpgroup synchronizes (every warp's group reading the freed
    slot has completed) and thread 0 refills the freed slot (of this step with delay_release
    0, of the one before with 1) with the step ``stages`` later. No empty barriers: one
    warpgroup orders its own reads and writes. A tile's last step is waited for before the
    epilogue (its accumulators must be complete)."""

    kind = "plain"
    consumers = 1
    readers = 1
    threads = 128

    def __init__(self, body, grid, in_specs, out_specs=(), max_concurrent_steps=2,
                 delay_release=0, compute_context=None):
        super().__init__("emit_pipeline", body, grid, in_specs, out_specs,
                         max_concurrent_steps, delay_release, compute_context)

    def emit(self, src, smem="sm", bars="bars", simulator=False):
        """Write the pipeline into ``src`` inside a kernel of 128 threads whose dynamic
        shared array (bytes) is ``smem``; declares ``bars`` and ``t``, ``wg``, ``lane``,
        ``cw`` (0: the consumer index the context sees); ``simulator`` as the other's."""
        S, ctx = self.stages, self.context
        src(f"{bars} = cuda.shared.array({S}, uint64{align_arg(8, simulator)})",
            "t = U(cuda.threadIdx.x)", "wg = U(0)", "cw = U(0)", "lane = t % U(32)",
            f"pad = shared_offset_of({smem}, U({SWIZZLE_ALIGN}))")
        with src.block("if t == U(0):"):
            with src.block(f"for i in range({S}):"):
                src(f"mbarrier_init({bars}, U(i), U(1))")
            src("fence_mbarrier_init()")
        src("cuda.syncthreads()", "bx = U(cuda.blockIdx.x)", "gx = U(cuda.gridDim.x)",
            f"tiles = {self.grid.tiles}", f"steps = {self.grid.steps}",
            "total = U(0)")
        with src.block("if bx < tiles:"):
            src("total = (tiles - bx + gx - U(1)) // gx * steps")
        if ctx.setup:
            ctx.setup(src, "cw")
        with src.block("if t == U(0):"):           # the first lap of the ring
            src("g = U(0)")
            with src.block(f"while g < total and g < U({S}):"):
                self._emit_refill(src, smem, bars, "g")
                src("g += U(1)")
        src("it = U(0)", "tile = bx")
        with src.block("while tile < tiles:"):
            if ctx.before_tile:
                ctx.before_tile(src, self.grid.emit_coords(src, "tile"))
            src("k = U(0)")
            with src.block("while k < steps:"):
                self._slot(src)
                src(f"mbarrier_wait({bars}, s, ph)", "wgmma_fence()")
                self.body(src, Step("k", "slot", self.offsets, "k == U(0)", "cw"))
                src("wgmma_commit()", f"wgmma_wait({self.delay})")
                if self.delay:
                    with src.block("if k > U(0):"):
                        self._emit_free(src, smem, bars, "it - U(1)")
                else:
                    self._emit_free(src, smem, bars, "it")
                src("it += U(1)", "k += U(1)")
            if self.delay:
                src("wgmma_wait(0)")
                with src.block("if steps > U(0):"):
                    self._emit_free(src, smem, bars, "it - U(1)")
            coords = self.grid.emit_coords(src, "tile")
            if ctx.after_tile:
                ctx.after_tile(src, coords, "steps")
            src("tile += gx")
        if ctx.teardown:
            ctx.teardown(src)

    def _emit_free(self, src, smem, bars, done):
        """Step ``done``'s groups have completed in every warp: thread 0 refills its slot."""
        src("cuda.syncthreads()")
        with src.block(f"if t == U(0) and {done} + U({self.stages}) < total:"):
            self._emit_refill(src, smem, bars, f"{done} + U({self.stages})")

    def _emit_refill(self, src, smem, bars, g):
        """Load step ``g`` of the block's sequence (tile ``g // steps`` of the block) into its
        slot (the names bound here are the load's own: ``ls``, ``lslot``, ``lk``, and the
        grid's coordinate names, rebound before the epilogue)."""
        src(f"lt = bx + ({g}) // steps * gx", f"lk = ({g}) % steps")
        coords = self.grid.emit_coords(src, "lt")
        self._slot(src, it=f"({g})", s="ls", ph="lph", slot="lslot")
        self._emit_load(src, smem, bars, coords, "lk", "lslot", "ls")

    def schedule(self, tiles, steps):
        """The warpgroup's events (role 0; no producer role) for a block running ``tiles``
        tiles of ``steps`` steps; ``release`` marks the synchronization after which the
        slot is no longer read (see :func:`check_schedule`)."""
        S, total = self.stages, tiles * steps
        ev = [("load", g, g % S) for g in range(min(S, total))]

        def free(i):
            ev.append(("release", i, i % S))
            if i + S < total:
                ev.append(("load", i + S, (i + S) % S))
        for tile in range(tiles):
            for k in range(steps):
                i = tile * steps + k
                ev += [("wait", "full", i % S, (i // S) & 1), ("mma", i, i % S),
                       ("wgmma_wait", self.delay)]
                if not self.delay:
                    free(i)
                elif k > 0:
                    free(i - 1)
            if self.delay and steps:
                ev.append(("wgmma_wait", 0))
                free(tile * steps + steps - 1)
        return {"producer": [], 0: ev}


def emit_pipeline(body: Callable, grid: PersistentGrid, in_specs: Sequence[TmaSpec],
                  out_specs: Sequence[Any] = (), max_concurrent_steps: int = 2,
                  delay_release: int = 0,
                  compute_context: Optional[ComputeContext] = None) -> WgmmaPipeline:
    """A :class:`WgmmaPipeline` (Pallas' ``emit_pipeline`` arguments): one warpgroup loading
    and multiplying; ``emit(src)`` inside a kernel of 128 threads, ``schedule(tiles, steps)``
    for its events."""
    return WgmmaPipeline(body, grid, in_specs, out_specs, max_concurrent_steps, delay_release,
                         compute_context)
