"""The static plans of the tile-level instructions (:mod:`gemm.arch.tile`'s ``mma_tile`` and
:mod:`gemm.arch.sm90`'s wgmma), checked the same way for the PTX intrinsics and their
simulator twins, and the tables of the instructions they issue. Pure Python.

A plan is a tuple of entries, each a tuple of ints (and tuples of ints) fixed when a kernel is
built: register indices into ``cuda.local.array`` fragments.

>>> check_plan("mma_tile", (((0, 1, 2, 3), (0, 1, 2, 3), (0, 1)),),
...            (("regs", 4), ("regs", 4), ("regs", 2)))
(((0, 1, 2, 3), (0, 1, 2, 3), (0, 1)),)
"""

__all__ = ["MMA_FORMS", "CP_ASYNC_SIZES", "check_plan", "check_op", "WGMMA_TYPES", "WGMMA_BITS",
           "wgmma_op", "wgmma_types", "check_wgmma", "chunk_offsets"]

# The instructions, as data the PTX layer and the simulator twins share.
# mma op -> (shape, A/B type, accumulator type, A, B and C registers)
MMA_FORMS = {
    "mma_m16n8k16_f32_bf16": ("m16n8k16", "bf16", "f32", 4, 2, 4),
    "mma_m16n8k16_f32_f16": ("m16n8k16", "f16", "f32", 4, 2, 4),
    "mma_m16n8k16_f16_f16": ("m16n8k16", "f16", "f16", 4, 2, 2),
    "mma_m16n8k8_f16_f16": ("m16n8k8", "f16", "f16", 2, 1, 2),
    "mma_m16n8k8_f32_tf32": ("m16n8k8", "tf32", "f32", 4, 2, 4),
}
# cp.async kind -> its copy sizes in bytes
CP_ASYNC_SIZES = {"ca": (4, 8, 16), "cg": (16,)}


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _check_field(op, k, j, kind, value):
    where = f"{op}: plan entry {k}, field {j}"
    if kind == "int" or kind == "uint":
        if not _is_int(value) or (kind == "uint" and value < 0):
            raise ValueError(f"{where} must be a{' non-negative' if kind == 'uint' else 'n'} "
                             f"int, got {value!r}")
    else:                                        # ("regs", n): n register indices
        n = kind[1]
        if not (isinstance(value, tuple) and len(value) == n
                and all(_is_int(r) and r >= 0 for r in value)):
            raise ValueError(f"{where} must be a tuple of {n} register indices, got {value!r}")


def check_plan(op, plan, fields):
    """``plan`` as a tuple of entries whose fields have the kinds ``fields`` ("int", "uint"
    or ("regs", n)); ValueError naming the entry and field otherwise."""
    if not isinstance(plan, tuple) or not plan:
        raise ValueError(f"{op}: the plan must be a non-empty tuple of entries, got {plan!r}")
    for k, entry in enumerate(plan):
        if not isinstance(entry, tuple) or len(entry) != len(fields):
            raise ValueError(f"{op}: plan entry {k} must be a tuple of {len(fields)} fields, "
                             f"got {entry!r}")
        for j, (kind, value) in enumerate(zip(fields, entry)):
            _check_field(op, k, j, kind, value)
    return plan


def check_op(op, name, table):
    """``name`` as a key of ``table``; ValueError listing the keys otherwise."""
    if name not in table:
        raise ValueError(f"{op}: op must be one of {sorted(table)}, got {name!r}")
    return name


# wgmma op -> k of one instruction (m64n{n}k{k}); 16-bit types, or tf32 in 32 bits
# wgmma op -> the k of one instruction; an op names A's and B's type, "a.b" where they differ
WGMMA_TYPES = {"bf16": 16, "f16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "e4m3.e5m2": 32,
               "e5m2.e4m3": 32}
WGMMA_BITS = {"bf16": 16, "f16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8}     # per element type


def wgmma_op(a_type, b_type):
    """The wgmma op of A's and B's element types (PTX names)."""
    return a_type if a_type == b_type else f"{a_type}.{b_type}"


def wgmma_types(op):
    """(A's type, B's type) of a wgmma op."""
    a, _, b = op.partition(".")
    return a, b or a


def check_wgmma(op, n, trans_a, trans_b, first):
    """The arguments of ``wgmma_tile`` (PTX layer and twin) checked: ValueError naming the
    bad one."""
    if op not in WGMMA_TYPES:
        raise ValueError(f"wgmma_tile: op must be one of {sorted(WGMMA_TYPES)}, got {op!r}")
    if not (isinstance(n, int) and 8 <= n <= 256 and n % 8 == 0):
        raise ValueError(f"wgmma_tile: n must be a multiple of 8 in 8..256, got {n!r}")
    if WGMMA_BITS[wgmma_types(op)[0]] != 16 and (trans_a or trans_b):
        raise ValueError(f"wgmma_tile: {op} operands must be K-major (wgmma transposes only "
                         "16-bit types)")
    if not (isinstance(first, int) and first >= 0):
        raise ValueError(f"wgmma_tile: first must be a non-negative int, got {first!r}")


def chunk_offsets(op, chunks, step):
    """The byte offsets of ``chunks`` 16-byte chunks ``step`` bytes apart (3xTF32's
    ``split_tf32_tile`` and ``clear_nonfinite_tile``, PTX layer and twin); ValueError
    unless chunks is a positive int and step a multiple of 16."""
    if not (isinstance(chunks, int) and chunks >= 1 and isinstance(step, int) and step >= 16
            and step % 16 == 0):
        raise ValueError(f"{op}: chunks must be a positive int and step a multiple of 16, "
                         f"got {chunks!r}, {step!r}")
    return [c * step for c in range(chunks)]
