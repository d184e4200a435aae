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

import random
from dataclasses import dataclass

__all__ = ["TmaSpec", "PersistentGrid", "ComputeContext", "WarpSpecializedPipeline",
           "emit_pipeline_warp_specialized", "check_schedule", "ARCH_IMPORTS_SM90"]

# The gemm.arch.sm90 names the emitted code calls; a kernel module imports them.
ARCH_IMPORTS_SM90 = ("mbarrier_init", "fence_mbarrier_init", "mbarrier_wait",
                     "mbarrier_arrive", "mbarrier_arrive_expect_tx", "tma_load_2d",
                     "wgmma_fence", "wgmma_commit", "wgmma_wait", "setmaxnreg_inc",
                     "setmaxnreg_dec", "elect_one", "shared_offset_of")
SLOT_ALIGN = 1024           # bytes: a 128-byte swizzle repeats every 8 rows of 128 bytes
REGISTER_FILE = 65536       # 32-bit registers per SM (sm_90)


@dataclass(frozen=True)
class TmaSpec:
    """A pipeline input loaded by TMA: ``tensor_map`` (the kernel parameter holding the map),
    ``bytes`` per step, ``boxes``: ``(shared byte offset in the block, d0, d1)`` per TMA box
    (its coordinates relative to the block's), and ``index_map(coords, k)`` -> the block's
    coordinates as two code strings (contiguous dimension first) for the tile ``coords``
    (names the grid's ``coords`` wrote) and step ``k``."""

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
    steps)`` around each tile's steps (the epilogue). Each writes code; each may be None."""

    setup: object = None
    before_tile: object = None
    after_tile: object = None


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


class WarpSpecializedPipeline:
    """See the module. ``memory_registers``: the producer's registers per thread after
    ``setmaxnreg.dec`` (None: no setmaxnreg); the consumers take what is left of the
    register file (``compute_registers``), rounded down to a multiple of 8, at most 240."""

    def __init__(self, body, grid, in_specs, out_specs=(), max_concurrent_steps=2,
                 delay_release=0, num_compute_wgs=1, memory_registers=40,
                 compute_context=None, consumer_schedule="cooperative"):
        if out_specs:
            raise ValueError("emit_pipeline_warp_specialized: out_specs are not supported; "
                             "write outputs in the compute_context's after_tile (epilogue)")
        if not in_specs or not all(isinstance(s, TmaSpec) for s in in_specs):
            raise ValueError("emit_pipeline_warp_specialized: in_specs must be TmaSpecs")
        if not (isinstance(max_concurrent_steps, int) and max_concurrent_steps >= 2):
            raise ValueError("emit_pipeline_warp_specialized: max_concurrent_steps must be an "
                             f"int >= 2, got {max_concurrent_steps!r}")
        if delay_release not in (0, 1):
            raise ValueError("emit_pipeline_warp_specialized: delay_release must be 0 or 1 "
                             f"(wgmma groups kept in flight), got {delay_release!r}")
        if num_compute_wgs not in (1, 2, 3):
            raise ValueError("emit_pipeline_warp_specialized: num_compute_wgs must be 1, 2 or "
                             f"3, got {num_compute_wgs!r}")
        if consumer_schedule not in ("cooperative", "pingpong"):
            raise ValueError("emit_pipeline_warp_specialized: consumer_schedule must be "
                             f"'cooperative' or 'pingpong', got {consumer_schedule!r}")
        self.pingpong = consumer_schedule == "pingpong"
        self.body, self.grid, self.in_specs = body, grid, tuple(in_specs)
        self.stages, self.delay = max_concurrent_steps, delay_release
        self.consumers = num_compute_wgs
        self.context = compute_context or ComputeContext()
        self.memory_registers = memory_registers
        if memory_registers is not None:
            if not (isinstance(memory_registers, int) and 24 <= memory_registers <= 256
                    and memory_registers % 8 == 0):
                raise ValueError("emit_pipeline_warp_specialized: memory_registers must be a "
                                 f"multiple of 8 in 24..256, got {memory_registers!r}")
            left = REGISTER_FILE // 128 - memory_registers
            self.compute_registers = min(240, left // self.consumers // 8 * 8)
            if self.compute_registers < self.launch_registers:
                raise ValueError("emit_pipeline_warp_specialized: memory_registers="
                                 f"{memory_registers} leaves the consumers fewer registers "
                                 f"than the launch gives ({self.launch_registers})")
        else:
            self.compute_registers = None
        offsets, at = [], 0
        for spec in self.in_specs:
            offsets.append(at)
            at += _round_up(spec.bytes, SLOT_ALIGN)
        self.offsets, self.slot_bytes = tuple(offsets), at
        self.step_bytes = sum(s.bytes for s in self.in_specs)

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
        return min(255, REGISTER_FILE // self.threads) // 8 * 8

    @property
    def shared_bytes(self):
        """Dynamic shared memory to launch with: the ring, plus room to align it."""
        return self.stages * self.slot_bytes + SLOT_ALIGN

    # --- the plan, shared by the code and the schedule ------------------------------------

    def _consumer_step(self):
        """The consumer's actions per step: what it waits for, and what it releases."""
        return (("wait_full",), ("fence",), ("mma",), ("commit",), ("wgmma_wait", self.delay),
                ("release", "prev" if self.delay else "cur"))

    def _consumer_drain(self):
        return (("wgmma_wait", 0), ("release", "cur")) if self.delay else ()

    # --- code ------------------------------------------------------------------------------

    def emit(self, src, smem="sm", bars="bars"):
        """Write the pipeline into ``src`` inside a kernel whose dynamic shared array (bytes)
        is ``smem``; declares ``bars`` and the thread names ``t``, ``wg``, ``lane``."""
        S = self.stages
        src(f"{bars} = cuda.shared.array({self._barriers}, uint64, alignment=8)",
            "t = U(cuda.threadIdx.x)", "wg = t // U(128)", "lane = t % U(32)",
            f"pad = shared_offset_of({smem}, U({SLOT_ALIGN}))")
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

    def _slot(self, src):
        """``s`` and ``ph``: the slot and phase parity of sequence step ``it``."""
        S = self.stages
        src(f"s = it % U({S})", f"ph = (it // U({S})) & U(1)",
            f"slot = pad + s * U({self.slot_bytes})")

    def _emit_producer(self, src, smem, bars):
        S = self.stages
        src("it = U(0)", "tile = bx")
        with src.block("while tile < tiles:"):
            coords = self.grid.emit_coords(src, "tile")
            src("k = U(0)")
            with src.block("while k < steps:"):
                self._slot(src)
                src(f"mbarrier_wait({bars}, U({S}) + s, ph ^ U(1))",
                    f"mbarrier_arrive_expect_tx({bars}, s, U({self.step_bytes}))")
                for spec, off in zip(self.in_specs, self.offsets):
                    c0, c1 = spec.index_map(coords, "k")
                    for at, d0, d1 in spec.boxes:
                        src(f"tma_load_2d({smem}, slot + U({off + at}), {spec.tensor_map}, "
                            f"{c0} + U({d0}), {c1} + U({d1}), {bars}, s)")
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


def emit_pipeline_warp_specialized(body, grid, in_specs, out_specs=(), max_concurrent_steps=2,
                                   delay_release=0, num_compute_wgs=1, memory_registers=40,
                                   compute_context=None, consumer_schedule="cooperative"):
    """A :class:`WarpSpecializedPipeline` (Pallas' argument names, and CUTLASS's
    ``consumer_schedule``; see the module): call its ``emit(src)`` inside a kernel,
    ``schedule(tiles, steps)`` for its events."""
    return WarpSpecializedPipeline(body, grid, in_specs, out_specs, max_concurrent_steps,
                                   delay_release, num_compute_wgs, memory_registers,
                                   compute_context, consumer_schedule)


# --- the model -----------------------------------------------------------------------------

class _Barrier:
    """An mbarrier: ``count`` arrivals (and the expected transaction bytes) complete a phase;
    ``phase`` counts completed phases; a wait for parity P passes when the phase of parity P
    has completed, i.e. ``phase & 1 != P``."""

    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def arrive(self, tx=0):
        self.pending -= 1
        self.tx += tx
        self._complete()

    def land(self, nbytes):
        self.tx -= nbytes
        self._complete()

    def _complete(self):
        if self.pending < 0 or self.tx < 0:
            raise AssertionError("mbarrier: more arrivals or bytes than the phase expects")
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def passes(self, parity):
        return (self.phase & 1) != parity


def check_schedule(schedule, pipeline, interleavings=200, seed=0):
    """Run ``schedule`` (from :meth:`WarpSpecializedPipeline.schedule`) against the model
    under ``interleavings`` random orders of the roles and of TMA and wgmma completions (the
    first two eager: producer first, consumers first). AssertionError naming the first
    violation: a slot refilled while a consumer has not released it or a wgmma may still read
    it, a step read before its bytes landed or with another step's data, a release before the
    group reading the slot completed, a deadlock, a step not read or not released by every
    consumer."""
    S, consumers = pipeline.stages, pipeline.consumers
    loads = [e for e in schedule["producer"] if e[0] == "load"]
    total = len(loads)
    readers = {}                        # step -> the consumers that read it
    for c in range(consumers):
        for e in schedule[c]:
            if e[0] == "mma":
                readers.setdefault(e[1], set()).add(c)
    for run in range(interleavings):
        _run_once(schedule, S, consumers, pipeline.readers, readers, total,
                  random.Random(seed + run), run)
    kind = "pingpong" if pipeline.pingpong else "cooperative"
    return (f"ok: {total} steps, {consumers} {kind} consumers, {S} slots, delay_release "
            f"{pipeline.delay}, {interleavings} interleavings")


def _run_once(schedule, S, consumers, per_slot, step_readers, total, rng, run):
    bars = {"full": [_Barrier(1) for _ in range(S)],
            "empty": [_Barrier(4 * per_slot) for _ in range(S)],
            "order": [_Barrier(4) for _ in range(consumers)]}
    full, empty = bars["full"], bars["empty"]
    held = [None] * S                   # the step whose data a slot holds (None: not landed)
    readers = [set() for _ in range(S)]   # consumers that may still read the slot
    in_flight = {c: [] for c in range(consumers)}   # per consumer: (step, slot) of groups
    dma = []                            # TMA loads issued, not landed: (step, slot)
    pc = {role: 0 for role in schedule}
    read = {c: [] for c in range(consumers)}
    roles = list(schedule)

    def fail(what):
        raise AssertionError(f"interleaving {run}: {what}")

    def step(role):
        """Try the role's next event; False if it must wait."""
        ev = schedule[role][pc[role]]
        kind = ev[0]
        if kind == "wait":
            if not bars[ev[1]][ev[2]].passes(ev[3]):
                return False
        elif kind == "arrive":
            for _ in range(4):          # one arrival per warp
                bars[ev[1]][ev[2]].arrive()
        elif kind == "load":
            _, i, s = ev
            if readers[s]:
                fail(f"step {i} refills slot {s} while consumers {sorted(readers[s])} may "
                     "still read it")
            if any(s == sl for groups in in_flight.values() for _, sl in groups):
                fail(f"step {i} refills slot {s} while a wgmma group reads it")
            held[s] = None
            readers[s] = set(step_readers.get(i, ()))
            full[s].arrive(tx=1)
            dma.append((i, s))
        elif kind == "mma":
            _, i, s = ev
            if held[s] != i:
                fail(f"consumer {role} reads step {i} from slot {s} holding {held[s]}")
            in_flight[role].append((i, s))
            read[role].append(i)
        elif kind == "wgmma_wait":
            groups = in_flight[role]
            del groups[:max(0, len(groups) - ev[1])]
        elif kind == "release":
            _, i, s = ev
            if any(sl == s for _, sl in in_flight[role]):
                fail(f"consumer {role} releases slot {s} (step {i}) while its wgmma reads it")
            if role not in readers[s]:
                fail(f"consumer {role} releases slot {s} (step {i}) twice")
            readers[s].discard(role)
            for _ in range(4):          # one arrival per warp
                empty[s].arrive()
        pc[role] += 1
        return True

    policy = run % 3        # 0: producer eager, 1: consumers eager, 2: random
    while True:
        live = [r for r in roles if pc[r] < len(schedule[r])]
        if not live and not dma:
            break
        progressed = False
        # asynchronous completions: TMA bytes land, wgmma groups finish (at random times)
        if dma and (policy == 2 and rng.random() < 0.5 or policy != 2 and rng.random() < 0.3):
            i, s = dma.pop(0)
            held[s] = i
            full[s].land(1)
            progressed = True
        order = (sorted(live, key=lambda r: r != "producer") if policy == 0 else
                 sorted(live, key=lambda r: r == "producer") if policy == 1 else
                 rng.sample(live, len(live)))
        for role in order:
            if step(role):
                progressed = True
                break
        if not progressed and dma:
            i, s = dma.pop(0)
            held[s] = i
            full[s].land(1)
            progressed = True
        if not progressed:
            fail(f"deadlock: roles at {dict(pc)}")
    for s, who in enumerate(readers):
        if who:
            fail(f"slot {s} is never released by consumers {sorted(who)}")
    for c in range(consumers):
        mine = sorted(i for i, who in step_readers.items() if c in who)
        if read[c] != mine:
            fail(f"consumer {c} read steps {read[c]}, not {mine} in order")
    if sorted(step_readers) != list(range(total)) or any(
            len(who) != per_slot for who in step_readers.values()):
        fail(f"the steps are not each read by {per_slot} consumer(s): {step_readers}")
