"""The tile-level MMA: one call in a kernel issues a whole plan of ``mma.sync`` instructions.

Written as one numba call each, every instruction is a handful of numba IR statements that
numba types, rewrites to SSA and lowers one by one; the generated kernels this module served
took 13-25 s per kernel in numba's front-end that way. ``mma_tile`` is *one* intrinsic made
for a static plan (tuples of ints; see :mod:`gemm.arch.tile_plan`), whose codegen unrolls
the plan straight into LLVM IR. Register fragments are ``cuda.local.array``s that the plan
indexes only with constants, so NVVM keeps them in registers. (gemm.cute's ``gemm`` lowers
mma.sync itself; its Python twin runs a gemm call's MMAs through this one's twin, in
:mod:`gemm.arch.sim_tile`.)

- ``mma_tile(op, plan)(acc, fa, fb)``: per entry ``(c, a, b)`` (register index tuples), the
  mma.sync ``op`` (a key of ``gemm.arch.tile_plan.MMA_FORMS``) on ``fa[a], fb[b], acc[c]`` into
  ``acc[c]``.

The factory is cached by its arguments and returns the intrinsic; ``gemm.arch`` exports it on
a GPU and the twin of ``gemm.arch.sim_tile`` in the simulator.
"""

from functools import lru_cache

from llvmlite import ir
from numba.cuda import types
from numba.cuda.extending import intrinsic

from gemm.arch._lowering import I64, TypingError, array_data, asm, check_array, unpack
from gemm.arch.ptx import mma_asm
from gemm.arch.tile_plan import MMA_FORMS, check_op, check_plan

__all__ = ["mma_tile"]


def _reg(builder, data, i):
    return builder.gep(data, [ir.Constant(I64, i)])


def _load(builder, data, i):
    return builder.load(_reg(builder, data, i))


def _store(builder, data, i, value):
    builder.store(value, _reg(builder, data, i))


def _check_frag(op, name, ty, kind):
    """A register fragment: a 1-D C-contiguous local array of 32-bit ints or floats."""
    check_array(op, name, ty, itemsizes=(4,))
    if ty.ndim != 1 or ty.layout != "C":
        raise TypingError(f"{op}: {name} must be a 1-D C-contiguous array "
                          f"(a cuda.local.array), got {ty}")
    if (kind == "float") != isinstance(ty.dtype, types.Float):
        raise TypingError(f"{op}: {name} must hold {'float32' if kind == 'float' else 'uint32'}"
                          f", got {ty.dtype}")


def _named(op, impl):
    impl.__name__ = impl.__qualname__ = op
    return intrinsic(impl)


@lru_cache(maxsize=None)
def mma_tile(op, plan):
    """The intrinsic ``f(acc, fa, fb)`` issuing the plan's mma.sync instructions."""
    _, _, acc_kind, na, nb, nc = MMA_FORMS[check_op("mma_tile", op, MMA_FORMS)]
    check_plan("mma_tile", plan, (("regs", nc), ("regs", na), ("regs", nb)))
    text, constraints, ret = mma_asm(op)
    kind = "float" if acc_kind == "f32" else "int"

    def impl(typingctx, acc, fa, fb):
        _check_frag(op, "acc", acc, kind)
        _check_frag(op, "fa", fa, "int")
        _check_frag(op, "fb", fb, "int")

        def codegen(context, builder, sig, args):
            c, a, b = (array_data(context, builder, t, x) for t, x in zip(sig.args, args))
            for cs, as_, bs in plan:
                ops = ([_load(builder, a, i) for i in as_] + [_load(builder, b, i) for i in bs]
                       + [_load(builder, c, i) for i in cs])
                out = asm(builder, ret, text, constraints, ops, attrs=("convergent", "readnone"))
                for i, v in zip(cs, unpack(builder, out, nc)):
                    _store(builder, c, i, v)
            return context.get_dummy_value()
        return types.none(acc, fa, fb), codegen
    return _named(f"mma_tile_{op}", impl)
