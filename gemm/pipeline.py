"""A multi-buffered cp.async pipeline emitter, in the spirit of Pallas' ``emit_pipeline``.

Two levels, both writing numba source into a :class:`gemm.codegen.Source`:

- :func:`emit_ring`, the cp.async ring: ``stages`` shared slots that the copies of a sequence
  of steps go through, with callbacks that write the copies of a step (``issue``) and the
  compute of a step (``body``). The elementwise pipeline below is written by it (the
  tensor-core GEMM's main loop was, until that kernel was written with gemm.cute).
- :func:`emit_pipeline` / :class:`Pipeline`, Pallas' interface on top of it: each input is a
  :class:`BlockSpec` (a block shape, an ``index_map`` from the step's grid indices to block
  coordinates, a shared-memory layout, possibly swizzled); the pipeline writes the copies of
  the blocks into the ring's slots, hands ``body`` the tiles as :class:`SharedTile`, and
  writes output tiles back to global memory after each step.

The ring, with ``ahead = stages - 1 - delay_release`` steps in flight (``d = delay_release``)::

    prologue  for j < ahead:  [if j < steps: issue(j, slot j)]  commit
              wait(stages - 2 - d)  sync  prime(slot 0)
    step i    [if i + ahead < steps: issue(i + ahead, write slot)]  commit
              body(i, slot of i, ready_next)
                  ready_next():  wait(stages - 2 - d)  sync  -> slot of step i + 1
    end       wait(0)

Step ``s`` lives in slot ``s % stages``. One cp.async group is committed per issue point,
empty or not (an empty group completes at once), so when step ``i + 1`` is waited for, the
groups committed after its own are always the ``ahead - 1`` newest: every wait count is the
constant ``stages - 2 - d``, the drain included. (Keeping that count with no groups
committed in the drain is "the drain trap": ``wait_group`` would return with the last steps'
copies still in flight.)

``delay_release = d`` (Pallas' meaning): a slot is refilled only ``d`` steps after its step
ran, so the body of step ``i`` may read steps ``i - d .. i`` (``SharedTile.back``), and after
``ready_next()`` steps ``i + 1 - d .. i + 1``. It needs ``stages >= d + 2``.

The order is data as well: :func:`ring_schedule` walks the same plan as :func:`emit_ring`
and returns events, which :func:`check_ring` checks against a model of cp.async groups and
shared slots; :meth:`Pipeline.schedule` gives the events of a whole pipeline.

>>> p = emit_pipeline(lambda src, step, x: None, grid=(3,),
...                   in_specs=[BlockSpec((8, 32), lambda k: (0, k))], stages=2)
>>> for event in p.schedule(2): print(event)
('copy_in', 0, 0)
('commit',)
('wait', 0)
('sync',)
('copy_in', 1, 1)
('commit',)
('read', 0, 0)
('compute', 0, 0)
('wait', 0)
('sync',)
('commit',)
('read', 1, 1)
('compute', 1, 1)
('wait', 0)
('sync',)
('wait', 0)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

import sympy

from layoutalg import ComposedLayout, Layout, Swizzle
from .arch.smem import DYNAMIC_SHARED_LIMIT, STATIC_SHARED_LIMIT
from .codegen import align_arg, code, sym

__all__ = ["BlockSpec", "GlobalMatrix", "SharedTile", "Step", "Pipeline", "PipelineCode",
           "emit_pipeline", "emit_ring", "ring_schedule", "check_ring", "ARCH_IMPORTS"]

# The gemm.arch names that emitted code calls; a kernel module imports them.
ARCH_IMPORTS = ("cp_async_ca_zfill", "cp_async_cg_zfill", "cp_async_commit", "cp_async_wait",
                "ld_v4_f32", "st_v4_f32", "ld_v2_f32", "st_v2_f32",
                "ld_v4_b32", "st_v4_b32", "ld_v2_b32", "st_v2_b32")
_ITEMSIZE = {"float32": 4, "int32": 4, "uint32": 4, "float16": 2, "int16": 2, "uint16": 2,
             "float64": 8}
_VECTOR_SUFFIX = {"float32": "f32", "int32": "b32", "uint32": "b32"}


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


# --- the ring -----------------------------------------------------------------------------------

class _Ring:
    """The ring's operations in order, walked by :func:`emit_ring` (as code) and
    :func:`ring_schedule` (as events); see the module docstring.

    ``prologue`` runs for j = 0 .. ahead-1 with step j; ``start`` once; ``loop`` for each step
    i, its issue for step i + ahead; ``ready`` inside the body, when it calls ready_next;
    ``end`` once after the loop. Every ``wait`` retires all but the ``wait`` newest groups.
    """

    def __init__(self, stages, delay, caller):
        if not (_is_int(stages) and stages >= 2):
            raise ValueError(f"{caller}: stages must be an int >= 2, got {stages!r}")
        if not (_is_int(delay) and delay >= 0):
            raise ValueError(f"{caller}: delay_release must be an int >= 0, got {delay!r}")
        if stages < delay + 2:
            raise ValueError(f"{caller}: stages={stages} with delay_release={delay} leaves no "
                             "copy in flight: stages must be >= delay_release + 2")
        self.stages, self.delay = stages, delay
        self.ahead = stages - 1 - delay
        self.wait = stages - 2 - delay
        self.prologue = ("issue", "commit")
        self.start = ("wait", "sync", "prime")
        self.loop = ("issue", "commit", "body")
        self.ready = ("wait", "sync")
        self.end = ("wait_all",)

    def walk(self, run, each_step):
        """``run(op, step, phase)`` for every operation in order, ``phase`` one of "prologue"
        (``step`` = j), "start", "loop" (``step``: what ``each_step(fn)`` passes to ``fn``, once
        per step) and "end". (The body runs the "ready" operations itself.)"""
        for j in range(self.ahead):
            for op in self.prologue:
                run(op, j, "prologue")
        for op in self.start:
            run(op, None, "start")
        each_step(lambda i: [run(op, i, "loop") for op in self.loop])
        for op in self.end:
            run(op, None, "end")


class _ReadyOnce:
    """The ready_next callback given to a body: it must be called exactly once."""

    def __init__(self, caller, step, emit):
        self.caller, self.step, self.emit, self.calls = caller, step, emit, 0

    def __call__(self):
        self.calls += 1
        if self.calls > 1:
            raise ValueError(f"{self.caller}: the body of step {self.step} called ready_next() "
                             "twice; call it once, where the next step's slot is needed")
        return self.emit()

    def check(self):
        if self.calls != 1:
            raise ValueError(f"{self.caller}: the body never called ready_next(); it must, once, "
                             "at the point from which it reads the next step's slot")


def emit_ring(src: Any, *, stages: int, delay_release: int = 0, steps: str,
              issue: Callable, body: Callable, prime: Optional[Callable] = None) -> None:
    """Write a cp.async ring of ``stages`` slots over ``steps`` steps into ``src``.

    ``steps``: the name of a uint32 variable of the kernel, the number of steps (any value
    from 0 up, the same for every thread of the block). The callbacks write code into ``src``
    at its current indentation; they get names (strings) of uint32 expressions:

    - ``issue(step, slot)``: the cp.async copies of step ``step`` into ring slot ``slot``
      (``0 .. stages-1``; the caller turns it into shared offsets). It is emitted under
      ``if step < steps:``; the ring commits one group after each issue point, always.
    - ``body(step, slot, ready_next)``: the compute of step ``step``, reading ``slot`` (and,
      with ``delay_release = d``, the slots of the ``d`` steps before). It must call
      ``ready_next()`` exactly once, outside any emitted branch (every thread must reach the
      ``syncthreads`` it writes), at the point from which it reads the next step's slot; it
      returns the name of that slot. ``slot`` stays the current step's slot until the body
      ends.
    - ``prime(slot)`` (optional): emitted once after the prologue's wait and sync, before the
      loop, with step 0's slot (e.g. to load step 0's first k-block into registers).

    Every wait is ``cp_async_wait(stages - 2 - delay_release)``, and ``cp_async_wait(0)``
    after the loop. The ring's own names start with ``_rg_`` (the step of a body is
    ``_rg_i``); the module must define ``U = np.uint32`` and import ``cuda``,
    ``cp_async_commit`` and ``cp_async_wait``. Needs ``stages >= delay_release + 2``.
    """
    for name, fn in (("issue", issue), ("body", body)):
        if not callable(fn):
            raise TypeError(f"emit_ring: {name} must be callable, got {fn!r}")
    if prime is not None and not callable(prime):
        raise TypeError(f"emit_ring: prime must be callable or None, got {prime!r}")
    if not (isinstance(steps, str) and steps.isidentifier()):
        raise TypeError(f"emit_ring: steps must be the name of a uint32 variable, got {steps!r}")
    _emit_ring(src, _Ring(stages, delay_release, "emit_ring"), steps, issue, body, prime)


def _emit_ring(src, plan, steps, issue, body, prime):
    S = plan.stages

    def advance(name):
        return f"U({name} + U(1)) if {name} != U({S - 1}) else U(0)"

    def run(op, step, phase):
        if op == "issue":
            in_loop = phase == "loop"
            src(f"_rg_n = U(_rg_i + U({plan.ahead}))" if in_loop else f"_rg_n = U({step})")
            with src.block(f"if _rg_n < {steps}:"):
                issue("_rg_n", "_rg_ws" if in_loop else f"U({step % S})")
            if in_loop:
                src(f"_rg_ws = {advance('_rg_ws')}")
        elif op == "commit":
            src("cp_async_commit()")
        elif op == "wait":
            src(f"cp_async_wait({plan.wait})")
        elif op == "wait_all":
            src("cp_async_wait(0)")
        elif op == "sync":
            src("cuda.syncthreads()")
        elif op == "prime":
            src("_rg_rs = U(0)", f"_rg_ws = U({plan.ahead % S})")
            if prime is not None:
                prime("_rg_rs")
        elif op == "body":
            depth = src.depth

            def ready():
                if src.depth != depth:
                    raise ValueError("emit_ring: ready_next() was called inside an emitted "
                                     "branch; call it at the body's top level (every thread "
                                     "must reach its syncthreads)")
                for r in plan.ready:
                    run(r, None, "ready")
                src(f"_rg_nx = {advance('_rg_rs')}")
                return "_rg_nx"
            once = _ReadyOnce("emit_ring", "_rg_i", ready)
            body("_rg_i", "_rg_rs", once)
            once.check()
            src("_rg_rs = _rg_nx")
        else:
            raise ValueError(f"emit_ring: unknown ring operation {op!r}")

    def each_step(fn):
        src("_rg_i = U(0)")
        with src.block(f"while _rg_i < {steps}:"):
            fn("_rg_i")
            src("_rg_i = U(_rg_i + U(1))")      # U(): numba would widen the counter to 64 bits

    src(f"# cp.async ring: {S} stages, delay_release {plan.delay}, {plan.ahead} steps ahead")
    plan.walk(run, each_step)


def ring_schedule(stages: int, steps: int, delay_release: int = 0, *,
                  issue: Optional[Callable] = None, body: Optional[Callable] = None,
                  prime: Optional[Callable] = None) -> List[tuple]:
    """The events of :func:`emit_ring`'s code over ``steps`` steps, in one thread's program
    order, from the plan that emit_ring writes. The ring's own events are ("commit",),
    ("wait", n) and ("sync",); the callbacks model what emit_ring's callbacks write, by
    appending events to the list they get first:

    - ``issue(events, step, slot)``; default: ("copy_in", step, slot);
    - ``body(events, step, slot, ready)``; ``ready()`` appends the ring's wait and sync and
      returns the next step's slot. Default: ("read", k, k % stages) for the steps
      k = step-d .. step (d = delay_release), ``ready()``, then the reads of step+1-d ..
      step+1 (a body that prefetches the next step, as a GEMM's does);
    - ``prime(events, slot)``; default: nothing.

    >>> for e in ring_schedule(3, 2): print(e)
    ('copy_in', 0, 0)
    ('commit',)
    ('copy_in', 1, 1)
    ('commit',)
    ('wait', 1)
    ('sync',)
    ('commit',)
    ('read', 0, 0)
    ('wait', 1)
    ('sync',)
    ('read', 1, 1)
    ('commit',)
    ('read', 1, 1)
    ('wait', 1)
    ('sync',)
    ('read', 2, 2)
    ('wait', 0)
    """
    if not (_is_int(steps) and steps >= 0):
        raise ValueError(f"ring_schedule: steps must be an int >= 0, got {steps!r}")
    plan = _Ring(stages, delay_release, "ring_schedule")
    return _ring_events(plan, steps, issue, body, prime)


def _window_reads(events, step, stages, delay):
    for k in range(max(0, step - delay), step + 1):
        events.append(("read", k, k % stages))


def _ring_events(plan, steps, issue=None, body=None, prime=None):
    S, events = plan.stages, []
    if issue is None:
        def issue(ev, step, slot):
            ev.append(("copy_in", step, slot))
    if body is None:
        def body(ev, step, slot, ready):
            _window_reads(ev, step, S, plan.delay)
            ready()
            _window_reads(ev, step + 1, S, plan.delay)

    def run(op, step, phase):
        if op == "issue":
            n = step + plan.ahead if phase == "loop" else step
            if n < steps:
                issue(events, n, n % S)
        elif op == "commit":
            events.append(("commit",))
        elif op == "wait":
            events.append(("wait", plan.wait))
        elif op == "wait_all":
            events.append(("wait", 0))
        elif op == "sync":
            events.append(("sync",))
        elif op == "prime":
            if prime is not None:
                prime(events, 0)
        elif op == "body":
            def ready():
                for r in plan.ready:
                    run(r, None, "ready")
                return (step + 1) % S
            once = _ReadyOnce("ring_schedule", step, ready)
            body(events, step, step % S, once)
            once.check()
        else:
            raise ValueError(f"ring_schedule: unknown ring operation {op!r}")

    def each_step(fn):
        for i in range(steps):
            fn(i)

    plan.walk(run, each_step)
    return events


def check_ring(events: Sequence[tuple], steps: int) -> List[str]:
    """Violations of a ring's events (an empty list: none), from a model of cp.async and
    shared slots, for ``steps`` steps. Events: ("copy_in", step, slot), ("commit",),
    ("wait", n), ("sync",), ("read", step, slot); others are ignored.

    - ``wait n`` retires all committed groups but the newest n; a copy is visible to every
      thread after a wait that retires its group and a ``sync`` after it;
    - a read of a step needs its copies visible and its slot still holding it (a read of a
      step >= ``steps`` is a harmless read past the end and ignored);
    - a copy into a slot needs the slot's previous step retired and a sync after every read
      of it (other threads may still be reading until that sync);
    - every step is read, no copies are left uncommitted or in flight at the end.

    >>> check_ring(ring_schedule(4, 6), 6)
    []
    >>> bad = [("wait", e[1] + 1) if e[0] == "wait" else e for e in ring_schedule(4, 6)]
    >>> check_ring(bad, 6)[0]
    'event 10: step 0 read before a wait retired its copies and a sync made them visible'
    """
    bad = []
    pending, open_group = deque(), []
    landed, visible = set(), set()
    holder, last_read, last_sync = {}, {}, -1
    for at, e in enumerate(events):
        kind = e[0]
        if kind == "copy_in":
            _, step, slot = e
            prev = holder.get(slot)
            if prev is not None and prev != step:
                if prev not in landed:
                    bad.append(f"event {at}: step {step} copied into slot {slot} while step "
                               f"{prev}'s copies into it are in flight")
                if last_read.get(prev, -1) > last_sync:
                    bad.append(f"event {at}: step {step} overwrites slot {slot} of step {prev} "
                               "with no sync after its last read")
            holder[slot] = step
            open_group.append(step)
        elif kind == "commit":
            pending.append(open_group)
            open_group = []
        elif kind == "wait":
            while len(pending) > e[1]:
                landed.update(pending.popleft())
        elif kind == "sync":
            last_sync = at
            visible |= landed
        elif kind == "read":
            _, step, slot = e
            if step >= steps:
                continue
            if step not in visible:
                bad.append(f"event {at}: step {step} read before a wait retired its copies "
                           "and a sync made them visible")
            if holder.get(slot) != step:
                bad.append(f"event {at}: step {step} read from slot {slot}, which holds step "
                           f"{holder.get(slot)}")
            last_read[step] = at
    if open_group:
        bad.append(f"copies of steps {open_group} left in an uncommitted group")
    if any(pending):
        bad.append(f"copies still in flight at the end: {[g for g in pending if g]}")
    unread = [k for k in range(steps) if k not in last_read]
    if unread:
        bad.append(f"steps {unread} never read")
    return bad


# --- the pipeline: BlockSpecs on the ring ---------------------------------------------------

class BlockSpec:
    """A block of a global matrix, fetched for each pipeline step.

    ``block_shape``: (rows, cols). ``index_map(*grid_indices)``: the block coordinates
    (block row, block column) of a step, as ints or sympy expressions of the grid indices (and
    of any uint32 variable of the surrounding kernel, as ``gemm.codegen.sym`` symbols).
    ``smem_layout``: the (rows, cols) -> offset layout of the block in shared memory, a
    ``Layout`` or a ``ComposedLayout(Swizzle, offset, Layout)``; default compact row-major.

    >>> BlockSpec((16, 64), lambda k: (0, k)).smem_layout
    Layout((16, 64), (64, 1))
    """

    def __init__(self, block_shape, index_map, smem_layout=None):
        shape = tuple(block_shape) if isinstance(block_shape, (tuple, list)) else None
        if shape is None or len(shape) != 2 or not all(_is_int(s) and s > 0 for s in shape):
            raise ValueError(f"BlockSpec: block_shape must be two positive ints (rows, cols), "
                             f"got {block_shape!r}")
        if not callable(index_map):
            raise TypeError(f"BlockSpec: index_map must be callable, got {index_map!r}")
        if smem_layout is None:
            smem_layout = Layout(shape, (shape[1], 1))
        _check_smem_layout(smem_layout, shape)
        self.block_shape, self.index_map, self.smem_layout = shape, index_map, smem_layout

    def __repr__(self):
        return f"BlockSpec({self.block_shape}, {self.index_map!r}, {self.smem_layout})"


def _check_smem_layout(L, shape):
    swizzled = (isinstance(L, ComposedLayout) and isinstance(L.outer, Swizzle)
                and isinstance(L.inner, Layout))
    if not (isinstance(L, Layout) or swizzled):
        raise TypeError(f"BlockSpec: smem_layout must be a Layout or a ComposedLayout(Swizzle, "
                        f"offset, Layout), got {L!r}")
    if L.rank != 2 or (L[0].size, L[1].size) != shape:
        raise ValueError(f"BlockSpec: smem_layout {L} does not have the block's shape {shape}")
    offsets = [L((r, c)) for r in range(shape[0]) for c in range(shape[1])]
    if not all(_is_int(o) and o >= 0 for o in offsets):
        raise ValueError(f"BlockSpec: smem_layout {L} must map the block to integer offsets >= 0")
    if len(set(offsets)) != len(offsets):
        raise ValueError(f"BlockSpec: smem_layout {L} maps two elements of the block to one "
                         "offset (it must be injective)")


@dataclass(frozen=True)
class GlobalMatrix:
    """A global matrix argument of the generated kernel, by source names.

    ``array``: the 1-D kernel argument holding the matrix (element (0, 0) at index 0);
    ``rows``, ``cols``, ``ld``: names of uint32 variables (or ints) for the extents and the
    stride of the non-unit mode; ``unit_mode``: which mode has stride 1 (1: row-major, 0:
    column-major); ``dtype``: element type name; ``vector``: elements per access that the
    caller guarantees aligned (the array's address and ``ld`` are multiples of it).
    """

    array: str
    rows: object
    cols: object
    ld: object
    unit_mode: int = 1
    dtype: str = "float32"
    vector: int = 1

    def __post_init__(self):
        if self.unit_mode not in (0, 1):
            raise ValueError(f"GlobalMatrix {self.array}: unit_mode must be 0 or 1")
        if self.dtype not in _ITEMSIZE:
            raise ValueError(f"GlobalMatrix {self.array}: unsupported dtype {self.dtype!r}; "
                             f"use one of {sorted(_ITEMSIZE)}")
        if not (_is_int(self.vector) and self.vector >= 1):
            raise ValueError(f"GlobalMatrix {self.array}: vector must be an int >= 1")

    @property
    def itemsize(self):
        return _ITEMSIZE[self.dtype]


@dataclass(frozen=True)
class Step:
    """What ``body`` knows of the current step: source names of its linear index, its grid
    indices, and the number of steps."""

    index: str
    grid: tuple
    num_steps: str


@dataclass(frozen=True)
class SharedTile:
    """A block in shared memory as ``body`` sees it: element (r, c) is
    ``array[offset(r, c)]``. ``origin``: names of the block's first global row and column."""

    array: str
    base: str
    layout: object
    shape: tuple
    origin: tuple
    dtype: str
    _ring: tuple = None       # (slot name, stages, slot elements, delay, first element) of inputs

    def offset(self, r, c):
        """Source of the shared index of element (r, c) (ints or sympy expressions)."""
        return f"({self.base} + {_smem_offset(self.layout, (r, c))})"

    def back(self, k):
        """The tile of the step ``k`` steps before this one (``k <= delay_release``; valid only
        when that step exists, i.e. the step index is >= k)."""
        if self._ring is None:
            raise ValueError("SharedTile.back: only input tiles keep earlier steps")
        slot, stages, elems, delay, first = self._ring
        if not (_is_int(k) and 0 <= k <= delay):
            raise ValueError(f"SharedTile.back({k}): a pipeline with delay_release={delay} keeps "
                             f"steps i-{delay}..i only")
        base = _slot_base(first, f"(({slot} + U({stages - k})) % U({stages}))", elems)
        return SharedTile(self.array, base, self.layout, self.shape, None, self.dtype,
                          self._ring)


def _slot_base(first, slot, elems):
    """Source of the first element of ring slot ``slot`` (a name) of an operand whose ring
    starts at element ``first`` and whose slots are ``elems`` elements."""
    return f"({slot} * U({elems}))" if first == 0 else f"(U({first}) + {slot} * U({elems}))"


@dataclass(frozen=True)
class PipelineCode:
    """What :meth:`Pipeline.emit` wrote: shared arrays, slot sizes (elements), the vector
    width of each input's and output's copies, the shared bytes used, and whether they are
    dynamic shared memory (then the launch must pass ``shared_bytes``)."""

    in_arrays: tuple
    out_arrays: tuple
    slot_elems: tuple
    in_vectors: tuple
    out_vectors: tuple
    shared_bytes: int
    dynamic: bool = False


class Pipeline:
    """A planned pipeline; see the module docstring and :func:`emit_pipeline`."""

    def __init__(self, body, grid, in_specs, out_specs=(), stages=2, delay_release=0):
        if not callable(body):
            raise TypeError(f"emit_pipeline: body must be callable, got {body!r}")
        grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        if not grid:
            raise ValueError("emit_pipeline: grid must have at least one dimension")
        for g in grid:
            if _is_int(g) and g < 0:
                raise ValueError(f"emit_pipeline: grid extents must be >= 0, got {grid}")
            if not (_is_int(g) or isinstance(g, (str, sympy.Expr))):
                raise TypeError(f"emit_pipeline: a grid extent is an int, a variable name or a "
                                f"sympy expression, not {g!r}")
        in_specs, out_specs = list(in_specs), list(out_specs)
        if not in_specs:
            raise ValueError("emit_pipeline: at least one in_spec is needed")
        for s in in_specs + out_specs:
            if not isinstance(s, BlockSpec):
                raise TypeError(f"emit_pipeline: specs must be BlockSpecs, got {s!r}")
        self._plan = _Ring(stages, delay_release, "emit_pipeline")
        self.body, self.grid = body, grid
        self.in_specs, self.out_specs = in_specs, out_specs
        self.stages, self.delay_release = stages, delay_release

    # --- the plan as data -----------------------------------------------------------------
    def schedule(self, num_steps):
        """The events of a run over ``num_steps`` steps, in one thread's program order (see
        :func:`ring_schedule`): ("copy_in", step, slot) for the copies of all inputs of a
        step, ("commit",), ("wait", n), ("sync",), ("read", k, slot) for each input step the
        body may read (k = step - delay_release .. step), ("compute", step, slot) and, with
        outputs, ("sync",), ("copy_out", step)."""
        if not (_is_int(num_steps) and num_steps >= 0):
            raise ValueError(f"schedule: num_steps must be an int >= 0, got {num_steps!r}")
        plan, outputs = self._plan, bool(self.out_specs)

        def body(events, step, slot, ready):
            _window_reads(events, step, plan.stages, plan.delay)
            events.append(("compute", step, slot))
            if outputs:
                events.extend([("sync",), ("copy_out", step)])
            ready()
        return _ring_events(plan, num_steps, body=body)

    # --- the plan as code -----------------------------------------------------------------
    def emit(self, src, inputs, outputs=(), *, threads, tid="t", simulator=False,
             shared="static"):
        """Write the pipeline into ``src`` (inside a kernel whose thread index, a uint32, is
        named ``tid``, with ``threads`` threads). ``inputs``/``outputs``: one
        :class:`GlobalMatrix` per spec. ``shared``: "static" (one shared array per operand, at
        most 48 KiB in all) or "dynamic" (the operands at offsets of the block's dynamic shared
        memory, up to 227 KiB: the launch must pass ``PipelineCode.shared_bytes`` and, above
        48 KiB, opt in with ``gemm.arch.smem.allow_dynamic_shared``). The module must define
        ``U = np.uint32``, import ``cuda`` and numpy as ``np``, and import
        :data:`ARCH_IMPORTS` from ``gemm.arch``. Names starting with ``_pl_`` and ``_rg_`` are
        the emitter's. Returns a :class:`PipelineCode`."""
        inputs, outputs = list(inputs), list(outputs)
        if len(inputs) != len(self.in_specs) or len(outputs) != len(self.out_specs):
            raise ValueError(f"Pipeline.emit: {len(self.in_specs)} inputs and "
                             f"{len(self.out_specs)} outputs expected, got {len(inputs)} and "
                             f"{len(outputs)}")
        for g in inputs + outputs:
            if not isinstance(g, GlobalMatrix):
                raise TypeError(f"Pipeline.emit: operands must be GlobalMatrix, got {g!r}")
        if not (_is_int(threads) and threads >= 1):
            raise ValueError(f"Pipeline.emit: threads must be an int >= 1, got {threads!r}")
        if shared not in ("static", "dynamic"):
            raise ValueError(f"Pipeline.emit: shared must be 'static' or 'dynamic', "
                             f"got {shared!r}")
        plan, t, dynamic = self._plan, sym(tid), shared == "dynamic"
        ins = [_Operand(f"_pl_in{p}", s, g, t, threads, plan.stages)
               for p, (s, g) in enumerate(zip(self.in_specs, inputs))]
        outs = [_Operand(f"_pl_out{p}", s, g, t, threads, 1)
                for p, (s, g) in enumerate(zip(self.out_specs, outputs))]
        total = 0
        for op in ins + outs:             # each a multiple of 16 bytes: offsets stay aligned
            op.first = total // op.itemsize if dynamic else 0
            total += op.nbytes
        limit = DYNAMIC_SHARED_LIMIT if dynamic else STATIC_SHARED_LIMIT
        if total > limit:
            hint = ("; use shared='dynamic'" if not dynamic and total <= DYNAMIC_SHARED_LIMIT
                    else "")
            raise ValueError(f"Pipeline.emit: {total} bytes of shared memory exceed the {limit} "
                             f"bytes of {shared} shared memory of a block; use smaller blocks or "
                             f"fewer stages{hint}")
        align = align_arg(16, simulator)
        src(f"# pipeline: {plan.stages} stages, delay_release {plan.delay}, grid {self.grid}, "
            f"{total} bytes of {shared} shared memory")
        for op in ins + outs:
            count = 0 if dynamic else op.nbytes // op.itemsize
            # numba's simulator sizes a dynamic array by dtype.itemsize: give it a np.dtype
            dtype = f"np.dtype(np.{op.g.dtype})" if simulator and dynamic else f"np.{op.g.dtype}"
            src(f"{op.name} = cuda.shared.array({count}, {dtype}{align})")
        src(f"_pl_N = {_expr(src, sympy.Mul(*[_extent(g) for g in self.grid]), '_pl_n')}")

        def issue(step, slot):
            idx = self._grid_indices(src, step, "_pl_w")
            cache = {}
            for o in ins:
                o.copy_in(src, idx, slot, cache)

        def body(step, slot, ready_next):
            idx = self._grid_indices(src, step, "_pl_r")
            cache = {}
            tiles = [o.tile(src, idx, slot, plan, cache) for o in ins + outs]
            step_info = Step(step, tuple(f"_pl_r{k}" for k in range(len(self.grid))), "_pl_N")
            src("# --- body ---")
            self.body(src, step_info, *tiles)
            src("# --- end of body ---")
            if outs:
                src("cuda.syncthreads()")
                for o in outs:
                    o.copy_out(src)
            ready_next()

        _emit_ring(src, plan, "_pl_N", issue, body, None)
        return PipelineCode(tuple(o.name for o in ins), tuple(o.name for o in outs),
                            tuple(o.slot for o in ins), tuple(o.vec for o in ins),
                            tuple(o.vec for o in outs), total, dynamic)

    def _grid_indices(self, src, step, prefix):
        """Emit the grid indices of linear ``step`` (last index fastest) as ``prefix0..``."""
        names = [f"{prefix}{k}" for k in range(len(self.grid))]
        rest = step
        for k in range(len(self.grid) - 1, 0, -1):
            ext = _expr(src, _extent(self.grid[k]), f"{prefix}e{k}")
            src(f"{names[k]} = ({rest}) % ({ext})")
            src(f"{prefix}q{k} = ({rest}) // ({ext})")
            rest = f"{prefix}q{k}"
        src(f"{names[0]} = {rest}")
        return [sym(n) for n in names]


def emit_pipeline(body: Callable, grid: Sequence[Any], in_specs: Sequence[Any],
                  out_specs: Sequence[Any] = (), stages: int = 2,
                  delay_release: int = 0) -> Pipeline:
    """A :class:`Pipeline` running ``body(src, step, *in_tiles, *out_tiles)`` over the steps
    of ``grid`` (a tuple of ints, variable names or sympy expressions; its product is the
    number of steps, the last index running fastest). ``body`` writes the code of one step into
    ``src``; the tiles are :class:`SharedTile`. ``stages`` (Pallas' max_concurrent_steps):
    slots per input, >= 2; ``delay_release``: steps a slot stays readable after its step.
    Output tiles are single-buffered and written to global memory after every step."""
    return Pipeline(body, grid, in_specs, out_specs, stages, delay_release)


# --- operands ---------------------------------------------------------------------------------

class _Operand:
    """One spec bound to its global matrix: vector width, slot size (elements, a multiple of
    16 bytes), ``slots`` of them (the ring of an input, one for an output), the first element
    of the first slot in its shared array (``first``, set by the emitter) and the per-thread
    copies."""

    def __init__(self, name, spec, g, t, threads, slots):
        self.name, self.spec, self.g = name, spec, g
        self.role = "in" if slots > 1 else "out"
        self.itemsize = g.itemsize
        self.vec = _vector_width(spec, g, self.role)
        granule = max(1, 16 // self.itemsize)
        self.slot = -(-spec.smem_layout.cosize // granule) * granule
        self.nbytes = slots * self.slot * self.itemsize
        self.first = 0
        self.copies = _thread_copies(spec.block_shape, g.unit_mode, self.vec, threads, t)

    def _origin(self, src, idx, tag, cache):
        """Names of the block's first global row and column for the step whose grid indices
        are ``idx``; specs with the same index map and block shape share them (``cache``)."""
        key = (self.spec.index_map, self.spec.block_shape)
        if key in cache:
            return cache[key]
        try:
            bi, bj = self.spec.index_map(*idx)
        except (TypeError, ValueError) as e:
            raise ValueError(f"BlockSpec index_map of {self.g.array} must take "
                             f"{len(idx)} grid indices and return (block row, block column): "
                             f"{e}") from None
        R, C = self.spec.block_shape
        r0 = _expr(src, sympy.sympify(bi) * R, f"{self.name}_{tag}r")
        c0 = _expr(src, sympy.sympify(bj) * C, f"{self.name}_{tag}c")
        src(f"{self.name}_{tag}r0 = {r0}", f"{self.name}_{tag}c0 = {c0}")
        cache[key] = (f"{self.name}_{tag}r0", f"{self.name}_{tag}c0")
        return cache[key]

    def _global(self, r0, c0, rc):
        """Lines setting _pl_g, _pl_h (global row, col) of one vector, and its global index
        source; the vector runs along the unit mode."""
        g = self.g
        lines = [f"_pl_g = {r0} + {code(rc[0])}", f"_pl_h = {c0} + {code(rc[1])}"]
        index = (f"_pl_g * {_name(g.ld)} + _pl_h" if g.unit_mode == 1
                 else f"_pl_g + _pl_h * {_name(g.ld)}")
        return lines, index

    def copy_in(self, src, idx, slot, cache):
        g, v = self.g, self.vec
        r0, c0 = self._origin(src, idx, "w", cache)
        nbytes = v * self.itemsize
        kind = "cg" if nbytes == 16 else "ca"
        # along: the unit mode's position and extent; across: the other one
        along, ext = ("_pl_h", _name(g.cols)) if g.unit_mode == 1 else ("_pl_g", _name(g.rows))
        across, ext2 = ("_pl_g", _name(g.rows)) if g.unit_mode == 1 else ("_pl_h", _name(g.cols))
        for rc, guard in self.copies:
            lines, index = self._global(r0, c0, rc)
            lines += [
                f"_pl_nb = (min(U({v}), {ext} - min({along}, {ext})) * U({self.itemsize})) "
                f"if {across} < {ext2} else U(0)",
                f"_pl_si = ({index}) if _pl_nb != U(0) else U(0)",
                f"cp_async_{kind}_zfill({self.name}, {_slot_base(self.first, slot, self.slot)}"
                f" + {_smem_offset(self.spec.smem_layout, rc)}, {g.array}, _pl_si, {nbytes}, "
                "_pl_nb)"]
            _guarded(src, guard, lines)

    def tile(self, src, idx, slot, plan, cache):
        origin = self._origin(src, idx, "r", cache)
        self.origin = origin
        if self.role == "in":
            base = f"{self.name}_b"
            src(f"{base} = {_slot_base(self.first, slot, self.slot)}")
            ring = (slot, plan.stages, self.slot, plan.delay, self.first)
        else:
            base, ring = f"U({self.first})", None
        return SharedTile(self.name, base, self.spec.smem_layout, self.spec.block_shape,
                          origin, self.g.dtype, ring)

    def copy_out(self, src):
        g, v = self.g, self.vec
        r0, c0 = self.origin
        along, ext = ("_pl_h", _name(g.cols)) if g.unit_mode == 1 else ("_pl_g", _name(g.rows))
        suffix = _VECTOR_SUFFIX.get(g.dtype)
        for rc, guard in self.copies:
            lines, index = self._global(r0, c0, rc)
            soff = _smem_offset(self.spec.smem_layout, rc)
            lines += [f"_pl_gi = {index}", f"_pl_so = U({self.first}) + {soff}",
                      f"if _pl_g < {_name(g.rows)} and _pl_h < {_name(g.cols)}:"]
            if v == 1:
                lines.append(f"    {g.array}[_pl_gi] = {self.name}[_pl_so]")
            else:
                regs = ", ".join(f"_pl_x{e}" for e in range(v))
                lines += [f"    if {along} + U({v}) <= {ext}:",
                          f"        {regs} = ld_v{v}_{suffix}({self.name}, _pl_so)",
                          f"        st_v{v}_{suffix}({g.array}, _pl_gi, {regs})",
                          "    else:",
                          f"        {g.array}[_pl_gi] = {self.name}[_pl_so]"]
                for e in range(1, v):
                    lines += [f"        if {along} + U({e}) < {ext}:",
                              f"            {g.array}[_pl_gi + U({e})] = "
                              f"{self.name}[_pl_so + U({e})]"]
            _guarded(src, guard, lines)


def _guarded(src, guard, lines):
    if guard is None:
        src(*lines)
    else:
        with src.block(f"if {guard}:"):
            src(*lines)


def _vector_width(spec, g, role):
    """The widest access (elements) that the global alignment, the block extent along the unit
    mode and the shared layout all allow; cp.async moves 4, 8 or 16 bytes, vector stores
    exist for 32-bit elements."""
    isz, unit = g.itemsize, g.unit_mode
    extent = spec.block_shape[unit]
    if role == "in":
        candidates = [b // isz for b in (16, 8, 4) if b >= isz]
    else:
        candidates = [4, 2, 1] if g.dtype in _VECTOR_SUFFIX else [1]
    for v in candidates:
        if v <= g.vector and extent % v == 0 and _contiguous(spec.smem_layout,
                                                             spec.block_shape, unit, v):
            return v
    raise ValueError(f"pipeline: no cp.async of 4, 8 or 16 bytes fits the {g.dtype} matrix "
                     f"{g.array} (aligned to {g.vector} elements) and block {spec.block_shape} "
                     f"with shared layout {spec.smem_layout}")


def _contiguous(L, shape, unit, v):
    """Every run of v elements along mode ``unit`` (starting at multiples of v) is v
    consecutive, v-aligned shared offsets."""
    if v == 1:
        return True
    R, C = shape
    for r in range(R):
        for c in range(C):
            if (c if unit == 1 else r) % v:
                continue
            first = L((r, c))
            run = [L((r, c + e)) if unit == 1 else L((r + e, c)) for e in range(v)]
            if first % v or run != list(range(first, first + v)):
                return False
    return True


def _thread_copies(shape, unit, v, threads, t):
    """The vectors of a block one thread moves: [((row, col) of the vector's first element as
    sympy expressions of t, guard or None)]. Vectors run along the unit mode, consecutive
    threads take consecutive vectors (coalesced)."""
    R, C = shape
    along = shape[unit] // v
    total = R * C // v
    out = []
    for k in range(-(-total // threads)):
        q = t + threads * k
        a, b = v * sympy.Mod(q, along), sympy.floor(q / along)
        live = total - threads * k
        out.append(((b, a) if unit == 1 else (a, b), None if live >= threads
                    else f"{t} < U({live})"))
    return out


def _smem_offset(L, rc):
    """Source of a shared layout's offset of coordinate ``rc`` (sympy or ints)."""
    if isinstance(L, Layout):
        return code(L(tuple(rc)))
    lin = code(L.inner(tuple(rc)) + L.offset)
    sw = L.outer
    shifted = (f">> U({sw.shift})" if sw.shift >= 0 else f"<< U({-sw.shift})")
    return f"({lin} ^ (({lin} & U({sw.yyy_mask})) {shifted}))"


def _extent(g):
    return sym(g) if isinstance(g, str) else sympy.sympify(g)


def _name(x):
    return f"U({x})" if _is_int(x) else str(x)


def _expr(src, expr, prefix):
    """Source for a non-negative integer expression; a division by a run-time value (which
    ``code`` refuses) is emitted first as a variable named from ``prefix``."""
    counter = [0]

    def hoist(e):
        if e.is_Atom:
            return e
        args = [hoist(a) for a in e.args]
        if any(a is not b for a, b in zip(args, e.args)):
            e = e.func(*args)
        if isinstance(e, sympy.floor):
            num, den = e.args[0].as_numer_denom()
            if not den.is_Integer:
                name = f"{prefix}d{counter[0]}"
                counter[0] += 1
                src(f"{name} = {code(num)} // {code(den)}")
                return sym(name)
        return e

    return code(hoist(sympy.sympify(expr)))
