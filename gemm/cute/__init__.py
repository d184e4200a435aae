"""CuTe's vocabulary inside numba-cuda kernels: layouts as compile-time types (first step).

Importing this module teaches numba two things:

- a :class:`layoutalg.Layout` (integer shapes and strides) used in a ``@cuda.jit`` kernel, as
  a global, a closure variable or an argument, is a compile-time constant carried by its
  numba type (:class:`LayoutType`, no run-time data: MoYe's static layouts). ``L(i)``,
  ``L(i, j)`` and ``L((i, (j, k)))`` give the offset of an index or a coordinate as uint32
  arithmetic on constants: a power-of-two extent becomes a mask and a shift, any other a
  multiply by its reciprocal; ``size(L)`` and ``cosize(L)`` are constants.
- ``make_tensor(array, layout, offset=0)`` is a tensor: a 1-D array (global, shared or a
  register fragment of ``cuda.local.array``) viewed through a static layout from a run-time
  element ``offset``. ``T[crd]`` reads and ``T[crd] = x`` writes element ``offset + L(crd)``.

- a tensor's slice ``T[None, k]`` (None is CuTe's ``_``), ``local_tile(T, tiler, coord)``
  (the tiler a :func:`static` shape or a static layout) and ``local_partition(T,
  thr_layout, idx)`` are tensors too: their layouts are computed by layoutalg while numba
  types the kernel, their offsets are expressions of the run-time block and thread indices
  (:mod:`gemm.cute._numba` lowers them).

In numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the same kernel runs as Python:
layouts are the objects they are and ``make_tensor`` gives a :class:`layoutalg.Tensor` over
the array, so slicing, tiles and partitions are layoutalg's own functions and a kernel
written this way is checked on a CPU as the generated ones are.

>>> from layoutalg import Layout
>>> import numpy as np
>>> T = make_tensor(np.arange(16), Layout((4, 4), (4, 1)))       # row-major 4 x 4
>>> int(T[1, 2]), int(T[(3, 0)]), str(T[None, 1].layout)
(6, 12, '(4):(4)')
>>> str(local_tile(T, static((2, 2)), (1, None)).layout)
'(2,2,2):(4,1,2)'
>>> size(Layout((4, (2, 3)), (1, (4, 8)))), cosize(Layout((4, 2), (2, 1)))
(24, 8)

Also in kernels: ``make_shared_tensor(dtype, layout)`` (a shared array through a layout,
MoYe's ``MoYeSharedArray``; its loads and stores address shared memory explicitly; or
``make_shared_tensor(array, layout, offset)``, a view of the block's dynamic shared array),
``get_slice(tiled, t)`` and ``partition_S/D/A/B/C(thr, T)`` of a static
TiledCopy / TiledMMA, ``make_fragment_like(T, dtype)`` (a register tensor), ``fill``,
``copy(src, dst)``, ``copy(tiled_copy, src, dst)`` (cp.async for a cp.async atom, ldmatrix
into a ``retile_D``'d fragment for an ldmatrix atom), ``gemm(C, A, B)`` (UniversalFMA
fragments), ``gemm(tiled_mma, C, A, B)`` (mma.sync for the SM80 atoms of :data:`MMA_OPS`),
``axpby`` and ``transform(T, fn)`` (a device function on each element, compiled once), all
unrolled at compile time, and loops written out at compile time by
:func:`unrolled` (``for k in unroll(static_range(n))``; many values by groups, each a
loop NVVM unrolls: :func:`static_groups`); a loop over run-time counts is
``for k in dynamic_range(k_tiles)`` (one uint32 counter).

**Run-time shapes.** ``make_layout(shape, stride)`` in a kernel keeps its run-time integers
as run-time values (their symbols ``d0, d1, ..`` are in the layout's numba type, their values
in its data) and :func:`static` ints as constants, as C++ CuTe's ``make_shape(M, Int<8>{})``:
``make_tensor(A, make_layout((M, K), (static(1), lda)))`` is a global tensor of any size, and
its tiles and partitions keep static shapes with strides and offsets computed from M, K and
lda. ``make_identity_tensor(shape)``, partitioned like the data, gives each thread the
coordinates of its values; ``elem_less``, ``copy_if`` (cp.async zero-fills what its predicate
leaves out) and ``axpby(alpha, x, beta, y, coords, bound)`` predicate a partial tile.
``gemm.cute_kernels`` writes the seed's two kernels this way as ``gemm.matmul`` kernels.

**Hopper.** :mod:`gemm.cute.pipeline` (``from gemm.cute import pipeline``) is a ring of
shared slots guarded by mbarriers with CUTLASS's producer/consumer protocol, its state an
``(index, phase)`` value in the kernel. ``copy(tma, tensor_map, (mn, k), dst, bars, bar)``
loads one tile of a TMA copy (layoutalg's ``make_tma_copy``, a kernel constant; its tensor
map a kernel argument) into shared ``dst``, one ``cp.async.bulk.tensor`` per box, completing
on an mbarrier. A swizzled layout (``ComposedLayout(Swizzle, offset, layout)``, e.g. CuTe's GMMA
layout atoms tiled by ``tile_to_shape``, a kernel constant) makes a swizzled tensor: the
swizzle applies to the offset from the array's start, which ``make_shared_tensor`` aligns to
the swizzle's period, so the kernel's loads and stores, TMA and wgmma see the same places.
A thread's partition of a swizzled tensor at a constant offset swizzles its offset once and
each element is that XOR a constant (a swizzle is XOR-linear; this takes ``get_slice``'s
index in ``[0, size)``, its contract).
``gemm(tiled_mma, acc, tCsA, tCsB[, accumulate])`` with a tiled MMA of layoutalg's SM90 GMMA
atoms issues one wgmma per (k, m, n) block, its descriptors derived from the shared tensors'
layouts at compile time (:mod:`gemm.cute._gmma`), into a float32 register fragment of
``partition_C``; ``warpgroup_arrive()``, ``warpgroup_commit_batch()`` and
``warpgroup_wait(n)`` are its fence, commit and wait. Warp specialization's roles take
``named_barrier_sync(id, threads)``, ``warpgroup_reg_alloc(n)`` / ``warpgroup_reg_dealloc(n)``
(``setmaxnreg``), ``syncwarp()`` and ``make_warp_uniform(x)`` (the CuTe DSL's name: lane 0's
value in every lane, so that ptxas keeps what a warp's role derives from it, its loops
included, on the uniform datapath; the role's index, ``threadIdx.x // 128``, is one).
:mod:`gemm.cute.pallas` is Pallas'
``emit_pipeline`` and ``emit_pipeline_warp_specialized`` over these, with BlockSpecs whose
shared layouts are layoutalg layouts. :mod:`gemm.cute.divide` divides by a run-time value
with a multiplication (CUTLASS's ``FastDivmod``), for tile schedules and index maps.
"""

from __future__ import annotations

import ast
import copy as _copy
import inspect
import math
import textwrap
from typing import Any

from layoutalg import Layout  # noqa: F401 - re-exported (kernels name it from here)
# The vocabulary's objects are defined in gemm.cute._python, below the numba side that
# registers them (gemm.cute._numba, imported at the end): this module is their public face.
from gemm.cute._python import (MMA_OPS, Static, StaticInt, Tensor, axpby, copy,
                               copy_if, copy_instructions, cosize, dynamic_range,
                               elem_less, fill, gemm, get_slice, ldmatrix_shape, local_partition,
                               local_tile, make_fragment_like, make_identity_tensor,
                               make_layout, make_shared_tensor, make_tensor, mma_crd,
                               mma_shapes, partition_A, partition_B, partition_C,
                               partition_D, partition_S, retile_D, retile_S, size,
                               static, transform)
from gemm import arch
from gemm._env import simulator_active
from layoutalg.int_tuple import is_int

__all__ = ["make_tensor", "make_layout", "make_identity_tensor", "make_shared_tensor", "size",
           "cosize", "static", "Static", "StaticInt", "local_tile", "local_partition", "get_slice",
           "partition_S", "partition_D", "partition_A", "partition_B", "partition_C", "retile_S",
           "retile_D", "make_fragment_like", "fill", "copy", "copy_if", "axpby", "transform",
           "elem_less", "gemm", "MMA_OPS", "mma_shapes", "ldmatrix_shape", "static_range",
           "static_groups", "dynamic_range", "unroll", "unrolled", "LayoutType", "TensorType",
           "warpgroup_arrive", "warpgroup_commit_batch", "warpgroup_wait",
           "fence_view_async_shared", "tma_store_arrive", "tma_store_wait", "named_barrier_sync",
           "warpgroup_reg_alloc", "warpgroup_reg_dealloc", "syncwarp", "make_warp_uniform"]

# wgmma's steps around gemm(tiled_mma, acc, A, B) of an SM90 atom, by CuTe's names (gemm.arch's
# instructions: on a GPU the PTX, in the simulator the twins)
warpgroup_arrive = arch.wgmma_fence             # wgmma.fence: acc and shared A, B are ready
warpgroup_commit_batch = arch.wgmma_commit      # wgmma.commit_group: close the batch issued
warpgroup_wait = arch.wgmma_wait                # wgmma.wait_group n: at most n batches pending
# and around a TMA store, copy(tma, tensor_map, origin, src)
fence_view_async_shared = arch.fence_proxy_async    # shared stores, seen by TMA (and wgmma)
tma_store_arrive = arch.bulk_commit                 # close the thread's group of TMA stores
tma_store_wait = arch.bulk_wait_read                # at most n groups still read shared memory
# warp specialization's roles, by CUTLASS's names
named_barrier_sync = arch.named_barrier     # (id, threads): bar.sync id, threads (1..15)
warpgroup_reg_alloc = arch.setmaxnreg_inc   # (n): the warpgroup's registers raised to n
warpgroup_reg_dealloc = arch.setmaxnreg_dec     # (n): lowered to n (the producer's)
syncwarp = arch.syncwarp                    # (): the warp's lanes meet
make_warp_uniform = arch.warp_uniform       # (x): lane 0's x in every lane (shfl.sync.idx)


def static_range(n: int) -> tuple:
    """``(0, 1, .., n-1)``, for a loop that :func:`unrolled` writes out at compile time
    (MoYe's ``@loopinfo unroll for k in _1:n``)::

        K_BLOCKS = static_range(8)                  # outside the kernel
        ...
        @unrolled                                   # under @cuda.jit
        def kernel(...):
            for k_block in unroll(K_BLOCKS):        # 8 bodies, k_block a constant in each

    Each body sees its own constant, so a register fragment indexed by it (or by arithmetic
    on it) stays in registers. Without :func:`unrolled`, ``unroll`` is numba's
    ``literal_unroll`` (the identity in the simulator): an ordinary loop."""
    if not is_int(n) or n < 0:
        raise TypeError(f"static_range: expected a non-negative int, got {n!r}")
    return tuple(range(n))


def static_groups(n: int, size: int = 16) -> tuple:
    """``static_range(n)`` by groups of ``g = gcd(n, size)``: ``(starts, g)``, for a loop
    over many values that numba need not write out one by one::

        STARTS, G = static_groups(128)              # outside the kernel
        ...
        for s in unroll(STARTS):                    # written out: s a constant in each
            for i in range(G):                      # NVVM unrolls it: s + i a constant again
                acc[s + i] *= alpha

    A register fragment indexed by ``s + i`` stays in registers, and numba compiles
    ``n / g`` bodies instead of ``n`` (its passes grow faster than the function's length;
    LLVM unrolls a loop of few bodies, not of ``n``)."""
    if not (is_int(n) and is_int(size)) or n < 0 or size < 1:
        raise TypeError(f"static_groups: expected a count >= 0 and a group size >= 1, got "
                        f"{n!r} and {size!r}")
    g = math.gcd(n, size)
    return tuple(range(0, n, g)), g


def unrolled(fn: Any) -> Any:
    """Decorator (under ``cuda.jit``): every loop ``for x in unroll(STATIC):`` of ``fn``, where
    ``STATIC`` is a tuple of ints known before compiling (a global or closure name, or an
    expression of them, e.g. ``static_range(8)``), is written out once per value with ``x``
    bound to that constant: MoYe's ``@loopinfo unroll``. numba's ``literal_unroll`` alone
    keeps one loop whose bodies LLVM merges back into one with a run-time ``x``, so register
    fragments indexed by ``x`` went to local memory; written out, each index is a constant.
    In each copy, an ``if`` that ``x`` and the function's int constants decide (``if x == 0``,
    ``if x == LAST - 1 and ...``) keeps only the branch taken: numba would compile the other.
    The loop may not ``break``, ``continue`` or have an ``else``. In the simulator ``fn`` is
    returned as it is (``unroll`` is the identity there)."""
    if simulator_active():
        return fn
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
    fdef = tree.body[0]
    fdef.decorator_list = []
    env = dict(fn.__globals__)
    env.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
    stored = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)
              and not isinstance(n.ctx, ast.Load)} | {a.arg for a in ast.walk(fdef.args)
                                                       if isinstance(a, ast.arg)}
    constants = {k: v for k, v in env.items() if is_int(v) and not isinstance(v, bool)
                 and k not in stored}
    fdef.body = _unroll_statements(fdef.body, env, ast, constants)
    ast.fix_missing_locations(tree)
    local = {}
    exec(compile(tree, inspect.getsourcefile(fn) or "<unrolled>", "exec"), env, local)
    return local[fn.__name__]


def _unroll_statements(statements, env, ast, constants):
    """``statements`` with their ``for x in unroll(...)`` loops written out (see
    :func:`unrolled`); ``constants``: the int globals and closure values that the function
    never assigns."""
    out = []
    for st in statements:
        for field in ("body", "orelse", "finalbody"):
            if isinstance(getattr(st, field, None), list) and getattr(st, field):
                setattr(st, field, _unroll_statements(getattr(st, field), env, ast, constants))
        call = getattr(st, "iter", None)
        if not (isinstance(st, ast.For) and isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name) and call.func.id == "unroll"):
            out.append(st)
            continue
        where = f"line {st.lineno}"
        if st.orelse or any(isinstance(n, (ast.Break, ast.Continue)) for n in _same_loop(st, ast)):
            raise SyntaxError(f"unrolled: the unroll loop at {where} may not break, continue or "
                              "have an else")
        values = eval(compile(ast.Expression(call.args[0]), "<unroll>", "eval"), env)
        if not isinstance(values, tuple) or not all(is_int(v) for v in values):
            raise TypeError(f"unrolled: the unroll loop at {where} needs a tuple of ints, got "
                            f"{values!r}")
        for v in values:
            bind = ast.Assign(targets=[_copy.deepcopy(st.target)], value=ast.Constant(int(v)))
            out.append(ast.copy_location(bind, st))
            known = dict(constants)
            if isinstance(st.target, ast.Name) and not any(
                    isinstance(n, ast.Name) and n.id == st.target.id
                    and not isinstance(n.ctx, ast.Load) for b in st.body for n in ast.walk(b)):
                known[st.target.id] = int(v)
            out += _fold_ifs(_copy.deepcopy(st.body), known, ast)
    return out


def _fold_ifs(statements, known, ast):
    """``statements`` with each ``if`` whose test is decided by the unrolled loop's constant
    and the function's int constants (``known``: {name: value}) replaced by the branch it
    takes, and the decided terms of an ``and`` dropped: numba would type and lower the branch
    that never runs."""
    out = []
    for st in statements:
        if isinstance(st, ast.If):
            test = _decide(st.test, known, ast)
            if test is True or test is False:
                out += _fold_ifs(st.body if test else st.orelse, known, ast)
                continue
            st.test = test
            st.body = _fold_ifs(st.body, known, ast)
            st.orelse = _fold_ifs(st.orelse, known, ast)
        out.append(st)
    return out


def _decide(test, known, ast):
    """True or False where ``test`` depends only on ``known`` names and constants; else the
    test, less the decided (true) terms of an ``and``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        rest = []
        for term in test.values:
            value = _decide(term, known, ast)
            if value is False:
                return False
            if value is not True:
                rest.append(value)
        if not rest:
            return True
        return rest[0] if len(rest) == 1 else ast.BoolOp(op=ast.And(), values=rest)
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    if names and names <= set(known) and not any(
            isinstance(n, (ast.Call, ast.Attribute, ast.Subscript)) for n in ast.walk(test)):
        return bool(eval(compile(ast.Expression(test), "<unroll>", "eval"), {}, dict(known)))
    return test


def _same_loop(loop, ast):
    """The nodes of ``loop``'s body outside any loop nested in it."""
    todo = list(loop.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.For, ast.While, ast.FunctionDef)):
            todo.extend(ast.iter_child_nodes(node))


if simulator_active():
    LayoutType = TensorType = None      # the simulator runs kernels as Python: no numba types

    def unroll(container: Any) -> Any:
        """numba's ``literal_unroll``: in the simulator, the container itself."""
        return container
else:
    from numba.cuda import literal_unroll as unroll  # noqa: F401 - the pass knows this object
    # importing it registers the types, their typing and lowering with numba
    from gemm.cute._numba import LayoutType, TensorType  # noqa: E402
    from gemm.cute import _numba_derive, _numba_ops, _numba_range  # noqa: E402,F401
    from gemm.cute._inline import install as _install_inline  # noqa: E402
    _install_inline()       # inlined bodies copied once per scope (compile time)
