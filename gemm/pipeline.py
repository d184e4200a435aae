"""A generic multi-buffered cp.async pipeline emitter, in the spirit of Pallas' ``emit_pipeline``.

A pipeline runs ``body`` once per step of a sequential ``grid``. Each input is described by a
:class:`BlockSpec`: a block shape, an ``index_map`` from the step's grid indices to block
coordinates, and optionally the shared-memory layout of the block (a layoutalg layout, possibly
a swizzled ``ComposedLayout``). The emitter writes, into a :class:`gemm.codegen.Source`:

- ring buffers of ``stages`` slots per input (step ``s`` lives in slot ``s % stages``);
- the prologue: the copies of the first ``stages - 1 - delay_release`` steps, one
  ``cp.async`` commit group per step;
- the loop over steps ``i``: ``cp_async_wait(n)`` so that step ``i``'s group has landed,
  ``syncthreads``, the copies of step ``i + stages - 1 - delay_release`` into the slot that
  step ``i - 1 - delay_release`` released, ``body``, and for outputs a ``syncthreads`` and the
  copy of the shared out tile to global memory (16-byte vector stores where alignment allows).

The wait count is ``n = min(stages - 2 - delay_release, steps - 1 - i)``: the number of groups
committed after step ``i``'s. In the steady state it is constant; in the drain, when no new
groups are committed, it decreases to 0. (Keeping the steady-state count there is "the drain
trap": ``wait_group`` would return with the last steps' copies still in flight.)

``delay_release = d`` (Pallas' meaning): a slot is refilled only ``d`` steps after its step ran,
so ``body`` may keep reading step ``i``'s tiles until step ``i + d`` (see ``SharedTile.back``).
It needs ``stages >= d + 2`` so that at least one copy is in flight during each step.

:meth:`Pipeline.schedule` gives the same plan as data (events in time order), and
:meth:`Pipeline.emit` writes it as code; both walk one plan (``_Plan``).

>>> p = emit_pipeline(lambda src, step, x: None, grid=(3,),
...                   in_specs=[BlockSpec((8, 32), lambda k: (0, k))], stages=2)
>>> for event in p.schedule(3): print(event)
('copy_in', 0, 0)
('commit', 0)
('wait', 0)
('sync',)
('copy_in', 1, 1)
('commit', 1)
('compute', 0, 0)
('wait', 0)
('sync',)
('release', 0, 0)
('copy_in', 2, 0)
('commit', 2)
('compute', 1, 1)
('wait', 0)
('sync',)
('release', 1, 1)
('compute', 2, 0)
"""

from dataclasses import dataclass

import sympy

from layoutalg import ComposedLayout, Layout, Swizzle
from .codegen import code, sym

__all__ = ["BlockSpec", "GlobalMatrix", "SharedTile", "Step", "Pipeline", "PipelineCode",
           "emit_pipeline", "ARCH_IMPORTS"]

# The gemm.arch names that emitted code calls; a kernel module imports them.
ARCH_IMPORTS = ("cp_async_ca_zfill", "cp_async_cg_zfill", "cp_async_commit", "cp_async_wait",
                "ld_v4_f32", "st_v4_f32", "ld_v2_f32", "st_v2_f32",
                "ld_v4_b32", "st_v4_b32", "ld_v2_b32", "st_v2_b32")
_ITEMSIZE = {"float32": 4, "int32": 4, "uint32": 4, "float16": 2, "int16": 2, "uint16": 2,
             "float64": 8}
_VECTOR_SUFFIX = {"float32": "f32", "int32": "b32", "uint32": "b32"}
_STATIC_SHARED_LIMIT = 48 * 1024


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


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
    _ring: tuple = None       # (step, stages, slot_elems, delay) for inputs

    def offset(self, r, c):
        """Source of the shared index of element (r, c) (ints or sympy expressions)."""
        return f"({self.base} + {_smem_offset(self.layout, (r, c))})"

    def back(self, k):
        """The tile of the step ``k`` steps before this one (``k <= delay_release``; valid only
        when that step exists, i.e. the step index is >= k)."""
        if self._ring is None:
            raise ValueError("SharedTile.back: only input tiles keep earlier steps")
        step, stages, slot, delay = self._ring
        if not (_is_int(k) and 0 <= k <= delay):
            raise ValueError(f"SharedTile.back({k}): a pipeline with delay_release={delay} keeps "
                             f"steps i-{delay}..i only")
        base = f"((({step} + U({stages - k})) % U({stages})) * U({slot}))"
        return SharedTile(self.array, base, self.layout, self.shape, None, self.dtype,
                          self._ring)


@dataclass(frozen=True)
class PipelineCode:
    """What :meth:`Pipeline.emit` wrote: shared arrays, slot sizes (elements), the vector
    width of each input's and output's copies, and the shared bytes used."""

    in_arrays: tuple
    out_arrays: tuple
    slot_elems: tuple
    in_vectors: tuple
    out_vectors: tuple
    shared_bytes: int


class _Plan:
    """The pipeline as one list of operations, walked by both ``schedule`` and ``emit``.

    Prologue operations run for j = 0 .. ahead-1 with the step ``j + offset``; loop operations
    run for each step i with the step ``i + offset``. ``issue`` (the copies of a step and their
    commit) happens only for steps that exist, ``release`` only for steps >= 0.
    """

    def __init__(self, stages, delay, has_outputs):
        self.stages, self.delay = stages, delay
        self.ahead = stages - 1 - delay           # steps in flight during a compute
        self.prologue = [("issue", 0)]
        self.loop = [("wait",), ("sync",), ("release", -1 - delay), ("issue", self.ahead),
                     ("compute", 0)]
        if has_outputs:
            self.loop += [("sync",), ("copy_out", 0)]

    def slot(self, step):
        return step % self.stages

    def wait_count(self, remaining):
        """Groups that may stay pending when step i computes: those committed after step i's,
        with ``remaining = steps - 1 - i`` steps after it."""
        return min(self.ahead - 1, remaining)


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
        if not (_is_int(stages) and stages >= 2):
            raise ValueError(f"emit_pipeline: stages must be an int >= 2, got {stages!r}")
        if not (_is_int(delay_release) and delay_release >= 0):
            raise ValueError(f"emit_pipeline: delay_release must be an int >= 0, "
                             f"got {delay_release!r}")
        if stages < delay_release + 2:
            raise ValueError(f"emit_pipeline: stages={stages} with delay_release={delay_release} "
                             f"leaves no copy in flight: stages must be >= delay_release + 2")
        self.body, self.grid = body, grid
        self.in_specs, self.out_specs = in_specs, out_specs
        self.stages, self.delay_release = stages, delay_release
        self._plan = _Plan(stages, delay_release, bool(out_specs))

    # --- the plan as data -----------------------------------------------------------------
    def schedule(self, num_steps):
        """The events of a run over ``num_steps`` steps, in time order: ("copy_in", step,
        slot), ("commit", step), ("wait", n), ("sync",), ("release", step, slot),
        ("compute", step, slot), ("copy_out", step)."""
        if not (_is_int(num_steps) and num_steps >= 0):
            raise ValueError(f"schedule: num_steps must be an int >= 0, got {num_steps!r}")
        plan, events = self._plan, []

        def run(op, step, i):
            kind = op[0]
            if kind == "issue":
                if step < num_steps:
                    events.extend([("copy_in", step, plan.slot(step)), ("commit", step)])
            elif kind == "wait":
                events.append(("wait", plan.wait_count(num_steps - 1 - i)))
            elif kind == "sync":
                events.append(("sync",))
            elif kind == "release":
                if step >= 0:
                    events.append(("release", step, plan.slot(step)))
            elif kind == "compute":
                events.append(("compute", step, plan.slot(step)))
            else:
                events.append(("copy_out", step))

        for j in range(plan.ahead):
            for op in plan.prologue:
                run(op, j + op[1], None)
        for i in range(num_steps):
            for op in plan.loop:
                run(op, i + (op[1] if len(op) > 1 else 0), i)
        return events

    # --- the plan as code -----------------------------------------------------------------
    def emit(self, src, inputs, outputs=(), *, threads, tid="t", simulator=False):
        """Write the pipeline into ``src`` (inside a kernel whose thread index, a uint32, is
        named ``tid``, with ``threads`` threads). ``inputs``/``outputs``: one
        :class:`GlobalMatrix` per spec. The module must define ``U = np.uint32``, import
        ``cuda`` and numpy as ``np``, and import :data:`ARCH_IMPORTS` from ``gemm.arch``.
        Names starting with ``_pl_`` are the emitter's. Returns a :class:`PipelineCode`."""
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
        plan, t = self._plan, sym(tid)
        ins = [_Operand(f"_pl_in{p}", s, g, t, threads, "in")
               for p, (s, g) in enumerate(zip(self.in_specs, inputs))]
        outs = [_Operand(f"_pl_out{p}", s, g, t, threads, "out")
                for p, (s, g) in enumerate(zip(self.out_specs, outputs))]
        shared = sum(op.itemsize * op.slot * (plan.stages if op.role == "in" else 1)
                     for op in ins + outs)
        if shared > _STATIC_SHARED_LIMIT:
            raise ValueError(f"Pipeline.emit: {shared} bytes of shared memory exceed the "
                             f"{_STATIC_SHARED_LIMIT} bytes of static shared arrays; use "
                             "smaller blocks or fewer stages")
        align = "" if simulator else ", alignment=16"
        src(f"# pipeline: {plan.stages} stages, delay_release {plan.delay}, grid {self.grid}")
        for op in ins + outs:
            count = op.slot * (plan.stages if op.role == "in" else 1)
            src(f"{op.name} = cuda.shared.array({count}, np.{op.g.dtype}{align})")
        src(f"_pl_N = {_expr(src, sympy.Mul(*[_extent(g) for g in self.grid]), '_pl_n')}")

        def run(op, step):
            kind = op[0]
            if kind == "issue":
                with src.block(f"if {step} < _pl_N:"):
                    src(f"_pl_ws = ({step}) % U({plan.stages})")
                    idx = self._grid_indices(src, step, "_pl_w")
                    cache = {}
                    for o in ins:
                        o.copy_in(src, idx, "_pl_ws", cache)
                    src("cp_async_commit()")
            elif kind == "wait":
                self._emit_wait(src)
            elif kind == "sync":
                src("cuda.syncthreads()")
            elif kind == "release":
                src(f"# step i{op[1]:+d} released: its slot is refilled next")
            elif kind == "compute":
                src(f"_pl_rs = _pl_i % U({plan.stages})")
                idx = self._grid_indices(src, "_pl_i", "_pl_r")
                cache = {}
                tiles = [o.tile(src, idx, "_pl_rs", "_pl_i", plan, cache) for o in ins + outs]
                step_info = Step("_pl_i", tuple(f"_pl_r{k}" for k in range(len(self.grid))),
                                 "_pl_N")
                src("# --- body ---")
                self.body(src, step_info, *tiles)
                src("# --- end of body ---")
            else:
                for o in outs:
                    o.copy_out(src)

        for j in range(plan.ahead):
            for op in plan.prologue:
                run(op, f"U({j + op[1]})")
        src("_pl_i = U(0)")
        with src.block("while _pl_i < _pl_N:"):
            for op in plan.loop:
                off = op[1] if len(op) > 1 else 0
                step = "_pl_i" if off == 0 else f"_pl_i + U({off})" if off > 0 else None
                run(op, step)
            src("_pl_i += U(1)")
        return PipelineCode(tuple(o.name for o in ins), tuple(o.name for o in outs),
                            tuple(o.slot for o in ins), tuple(o.vec for o in ins),
                            tuple(o.vec for o in outs), shared)

    def _emit_wait(self, src):
        """cp_async_wait with plan.wait_count(steps - 1 - i) as a literal: a branch per value
        the drain can take, the steady-state value for every larger remainder."""
        plan = self._plan
        steady = plan.wait_count(plan.ahead - 1)
        if all(plan.wait_count(r) == steady for r in range(plan.ahead)):
            src(f"cp_async_wait({steady})")
            return
        src("_pl_rem = _pl_N - U(1) - _pl_i")
        with src.block(f"if _pl_rem >= U({plan.ahead - 1}):"):
            src(f"cp_async_wait({steady})")
        for r in range(plan.ahead - 2, 0, -1):
            with src.block(f"elif _pl_rem == U({r}):"):
                src(f"cp_async_wait({plan.wait_count(r)})")
        with src.block("else:"):
            src(f"cp_async_wait({plan.wait_count(0)})")

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


def emit_pipeline(body, grid, in_specs, out_specs=(), stages=2, delay_release=0):
    """A :class:`Pipeline` running ``body(src, step, *in_tiles, *out_tiles)`` over the steps
    of ``grid`` (a tuple of ints, variable names or sympy expressions; its product is the
    number of steps, the last index running fastest). ``body`` writes the code of one step into
    ``src``; the tiles are :class:`SharedTile`. ``stages`` (Pallas' max_concurrent_steps):
    slots per input, >= 2; ``delay_release``: steps a slot stays readable after its step.
    Output tiles are single-buffered and written to global memory after every step."""
    return Pipeline(body, grid, in_specs, out_specs, stages, delay_release)


# --- operands ---------------------------------------------------------------------------------

class _Operand:
    """One spec bound to its global matrix: vector width, slot size and the per-thread copies."""

    def __init__(self, name, spec, g, t, threads, role):
        self.name, self.spec, self.g, self.role = name, spec, g, role
        self.itemsize = g.itemsize
        self.vec = _vector_width(spec, g, role)
        granule = max(1, 16 // self.itemsize)
        self.slot = -(-spec.smem_layout.cosize // granule) * granule
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
                f"cp_async_{kind}_zfill({self.name}, {slot} * U({self.slot}) + "
                f"{_smem_offset(self.spec.smem_layout, rc)}, {g.array}, _pl_si, {nbytes}, _pl_nb)"]
            _guarded(src, guard, lines)

    def tile(self, src, idx, slot, step, plan, cache):
        origin = self._origin(src, idx, "r", cache)
        self.origin = origin
        if self.role == "in":
            base = f"{self.name}_b"
            src(f"{base} = {slot} * U({self.slot})")
            ring = (step, plan.stages, self.slot, plan.delay)
        else:
            base, ring = "U(0)", None
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
            lines += [f"_pl_gi = {index}", f"_pl_so = {soff}",
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
