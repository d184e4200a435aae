"""The static plans of the tile-level instructions (:mod:`gemm.arch.tile`), checked the same way
for the PTX intrinsics and their simulator twins. Pure Python.

A plan is a tuple of entries, each a tuple of ints (and tuples of ints) fixed when a kernel is
generated: register indices into ``cuda.local.array`` fragments, element offsets, and for
shared memory an offset *mode* saying how the entry's constant ``c`` combines with the thread's
base offset. With ``sw`` the thread's swizzled base and ``raw`` the same base unswizzled:

- ``ADD``: ``sw + c`` (the swizzle commutes with adding ``c`` for every thread),
- ``XOR``: ``sw ^ c`` (it commutes with XOR-ing ``c``),
- ``SWIZZLE``: ``S(raw + c)`` with ``S(x) = x ^ ((x & mask) >> shift)``, the swizzle given as
  ``(mask, shift)`` (CuTe's ``Swizzle<B, M, S>``: mask = ((1 << B) - 1) << (M + S)).

>>> shared_offset(SWIZZLE, 16, 0, 8, (448, 3))   # S(24) = 24 ^ ((24 & 448) >> 3)
24
>>> check_plan("fma_tile", ((0, 1, 2), (3, 1, 4)), ("int", "int", "int"))
((0, 1, 2), (3, 1, 4))
"""

__all__ = ["ADD", "XOR", "SWIZZLE", "MODES", "MMA_FORMS", "LOAD_OPS", "CP_ASYNC_SIZES",
           "shared_offset", "check_plan", "check_store_plan", "check_op", "check_cp_async",
           "check_zfill", "check_swizzle", "WGMMA_TYPES", "WGMMA_BITS", "wgmma_op", "wgmma_types",
           "check_wgmma", "chunk_offsets"]

ADD, XOR, SWIZZLE = 0, 1, 2
MODES = (ADD, XOR, SWIZZLE)
_MASK32 = 0xFFFFFFFF

# The instructions, as data the PTX layer and the simulator twins share.
# mma op -> (shape, A/B type, accumulator type, A, B and C registers)
MMA_FORMS = {
    "mma_m16n8k16_f32_bf16": ("m16n8k16", "bf16", "f32", 4, 2, 4),
    "mma_m16n8k16_f32_f16": ("m16n8k16", "f16", "f32", 4, 2, 4),
    "mma_m16n8k16_f16_f16": ("m16n8k16", "f16", "f16", 4, 2, 2),
    "mma_m16n8k8_f16_f16": ("m16n8k8", "f16", "f16", 2, 1, 2),
    "mma_m16n8k8_f32_tf32": ("m16n8k8", "tf32", "f32", 4, 2, 4),
}
# load_tile op -> (registers per instruction, shared element bytes, fragment element kind)
LOAD_OPS = {
    "ldmatrix_x1": (1, 2, "int"), "ldmatrix_x2": (2, 2, "int"), "ldmatrix_x4": (4, 2, "int"),
    "ldmatrix_x1_trans": (1, 2, "int"), "ldmatrix_x2_trans": (2, 2, "int"),
    "ldmatrix_x4_trans": (4, 2, "int"),
    "ld_f32": (1, 4, "float"), "ld_v2_f32": (2, 4, "float"), "ld_v4_f32": (4, 4, "float"),
    "ld_tf32": (1, 4, "int"),
}
# cp.async kind -> its copy sizes in bytes
CP_ASYNC_SIZES = {"ca": (4, 8, 16), "cg": (16,)}


def shared_offset(mode, c, sw, raw, swizzle):
    """The shared element offset of a plan entry (uint32 arithmetic, as on the GPU)."""
    if mode == ADD:
        return (sw + c) & _MASK32
    if mode == XOR:
        return (sw ^ c) & _MASK32
    mask, shift = swizzle
    x = (raw + c) & _MASK32
    return x ^ ((x & mask) >> shift)


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _check_field(op, k, j, kind, value):
    where = f"{op}: plan entry {k}, field {j}"
    if kind == "int" or kind == "uint":
        if not _is_int(value) or (kind == "uint" and value < 0):
            raise ValueError(f"{where} must be a{' non-negative' if kind == 'uint' else 'n'} "
                             f"int, got {value!r}")
    elif kind == "mode":
        if value not in MODES:
            raise ValueError(f"{where} must be an offset mode (ADD=0, XOR=1, SWIZZLE=2), "
                             f"got {value!r}")
    else:                                        # ("regs", n): n register indices
        n = kind[1]
        if not (isinstance(value, tuple) and len(value) == n
                and all(_is_int(r) and r >= 0 for r in value)):
            raise ValueError(f"{where} must be a tuple of {n} register indices, got {value!r}")


def check_plan(op, plan, fields):
    """``plan`` as a tuple of entries whose fields have the kinds ``fields`` ("int", "uint",
    "mode" or ("regs", n)); ValueError naming the entry and field otherwise."""
    if not isinstance(plan, tuple) or not plan:
        raise ValueError(f"{op}: the plan must be a non-empty tuple of entries, got {plan!r}")
    for k, entry in enumerate(plan):
        if not isinstance(entry, tuple) or len(entry) != len(fields):
            raise ValueError(f"{op}: plan entry {k} must be a tuple of {len(fields)} fields, "
                             f"got {entry!r}")
        for j, (kind, value) in enumerate(zip(fields, entry)):
            _check_field(op, k, j, kind, value)
    return plan


def check_store_plan(op, plan):
    """A plan of ``(c, regs)`` entries with 1, 2 or 4 registers each (all the same); returns
    the width."""
    if not (isinstance(plan, tuple) and plan and isinstance(plan[0], tuple)
            and len(plan[0]) == 2 and isinstance(plan[0][1], tuple)):
        raise ValueError(f"{op}: the plan must be a tuple of (c, regs) entries, got {plan!r}")
    width = len(plan[0][1])
    if width not in (1, 2, 4):
        raise ValueError(f"{op}: entries store 1, 2 or 4 registers, got {width}")
    check_plan(op, plan, ("uint", ("regs", width)))
    return width


def check_cp_async(op, kind, nbytes, plan, fields):
    """A cp.async ``kind`` of ``nbytes`` that exists, and a plan of ``fields``."""
    if kind not in CP_ASYNC_SIZES or nbytes not in CP_ASYNC_SIZES[kind]:
        raise ValueError(f"{op}: cp.async.{kind} of {nbytes} bytes does not exist "
                         f"(ca: 4, 8, 16; cg: 16)")
    return check_plan(op, plan, fields)


def check_zfill(op, kind, nbytes, esize, along, plan):
    """The arguments of cp_async_zfill_tile checked; returns the elements per copy."""
    check_cp_async(op, kind, nbytes, plan, ("mode",) + ("uint",) * 5)
    if esize not in (1, 2, 4, 8, 16) or nbytes % esize:
        raise ValueError(f"{op}: element size {esize!r} must divide {nbytes} bytes")
    if along not in (0, 1):
        raise ValueError(f"{op}: along must be 0 (the mn axis) or 1 (the k axis), got "
                         f"{along!r}")
    return nbytes // esize


def check_op(op, name, table):
    """``name`` as a key of ``table``; ValueError listing the keys otherwise."""
    if name not in table:
        raise ValueError(f"{op}: op must be one of {sorted(table)}, got {name!r}")
    return name


def check_swizzle(op, plan, swizzle):
    """``swizzle`` as (mask, shift) ints, required when an entry uses SWIZZLE mode."""
    if swizzle is None:
        if any(entry[0] == SWIZZLE for entry in plan):
            raise ValueError(f"{op}: an entry uses SWIZZLE mode but no swizzle was given")
        return None
    if not (isinstance(swizzle, tuple) and len(swizzle) == 2
            and all(_is_int(x) and x >= 0 for x in swizzle)):
        raise ValueError(f"{op}: swizzle must be a (mask, shift) pair of ints, got {swizzle!r}")
    return swizzle


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
