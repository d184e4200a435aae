"""The tensor-core kernels' type rules, shared by the SM80 (:mod:`gemm.tensorcore`), SM90
(:mod:`gemm.hopper`) and small-M (:mod:`gemm.skinny`) kernels: the operand types they compute
with, the output types they write, the operand majors, and the checks of a call's scalars,
operands and out against them.

>>> DTYPES, OUT_DTYPES, MAJORS
(('bfloat16', 'float16', 'tfloat32'), ('float32', 'bfloat16', 'float16'), ('K', 'MN'))
"""

from __future__ import annotations

import numpy as np

from .call.operands import (RAW16, batch_count, check_same_device, check_spans, operand,
                            output_operand)

__all__ = ["DTYPES", "OUT_DTYPES", "MAJORS", "RAW16", "check_scalars", "out_dtype_of",
           "checked_out", "operand_dtype", "check_variant", "FP8_DTYPES", "fp8_dtypes",
           "STORAGE"]

DTYPES = ("bfloat16", "float16", "tfloat32")
OUT_DTYPES = ("float32", "bfloat16", "float16")
MAJORS = ("K", "MN")
# how a kernel's signature holds an out's (or a bias's) elements: 16-bit values as their bits
STORAGE = {"float32": "float32", "bfloat16": "uint16", "float16": "uint16"}
_TYPED = {"bfloat16": "bfloat16", "float16": "float16", "float32": "tfloat32"}


def check_scalars(alpha, beta, caller):
    """TypeError unless ``alpha`` and ``beta`` are real numbers (bools refused)."""
    for name, x in (("alpha", alpha), ("beta", beta)):
        if not isinstance(x, (int, float, np.floating, np.integer)) or isinstance(x, bool):
            raise TypeError(f"{caller}: {name} must be a real number, got {x!r}")


def out_dtype_of(out, out_dtype, caller, simulator=False):
    """``(out_dtype, the stored dtype of out or None)`` of a tensor-core call: ``out``'s type,
    which ``out_dtype`` must match unless out is 16-bit integers holding ``out_dtype``'s
    bits; float32 when neither is given. TypeError for a type the kernels cannot write."""
    stored = None
    if out is not None:         # a 16-bit integer out holds the bits of out_dtype
        stored = operand(out, "out", simulator, caller, batched=True).dtype
        if not (stored in RAW16 and out_dtype in ("bfloat16", "float16")):
            if out_dtype is not None and out_dtype != stored:
                raise ValueError(f"{caller}: out_dtype={out_dtype!r} but out is {stored}")
            out_dtype = stored
    out_dtype = out_dtype or "float32"
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"{caller}: out has dtype {out_dtype}; supported: "
                        f"{', '.join(OUT_DTYPES)} (or 16-bit integers with out_dtype)")
    return out_dtype, stored


def checked_out(caller, out, out_dtype, a, b, shape, beta, simulator=False):
    """The out of a tensor-core call (SM80's and SM90's) on the checked operands ``a`` and
    ``b`` (``shape``: the result's, as ``product_operands`` gives it): its type
    (:func:`out_dtype_of`), the array (``out``, or a new one when None), the number of
    products the three agree on, one device for all, and each spanning fewer than 2**31
    elements. Returns ``(out_dtype, the array the call returns, its Operand, products)``."""
    out_dtype, stored = out_dtype_of(out, out_dtype, caller, simulator)
    result, c = output_operand(caller, out, a, shape, simulator, dtype=stored or out_dtype,
                               beta=beta)
    nb = batch_count(caller, a, b, c)
    named = (("A", a), ("B", b), ("out", c))
    check_same_device(caller, named)
    check_spans(caller, named, limit=2 ** 31)
    return out_dtype, result, c, nb


def operand_dtype(a, b, raw16, caller):
    """What the tensor cores compute operands ``a`` and ``b`` (gemm.call.operands) with:
    "bfloat16", "float16" or "tfloat32" (float32), both the same; 16-bit integer operands hold
    the bits of ``raw16`` (a config's dtype). TypeError otherwise."""
    typed = set()
    for name, op in (("A", a), ("B", b)):
        if op.dtype in _TYPED:
            typed.add(_TYPED[op.dtype])
        elif op.dtype not in RAW16:
            raise TypeError(f"{caller}: {name} has dtype {op.dtype}; supported: bfloat16, "
                            "float16, float32 (as tf32), or 16-bit integers holding "
                            "bfloat16/float16 bits")
    if len(typed) > 1 or (typed == {"tfloat32"} and {a.dtype, b.dtype} & set(RAW16)):
        raise TypeError(f"{caller}: A is {a.dtype} and B is {b.dtype}; they must match")
    if typed:
        return typed.pop()
    if raw16 == "tfloat32":
        raise TypeError(f"{caller}: 16-bit integer operands hold bfloat16 or float16 bits; "
                        "config.dtype is tfloat32")
    return raw16


FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
_FP8_FORMATS = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def fp8_dtypes(a, b, formats, caller):
    """The FP8 types ("float8_e4m3fn" or "float8_e5m2") of operands ``a`` and ``b``
    (gemm.call.operands): torch's float8 tensors name their own; uint8 arrays hold the bits
    of ``formats`` (a pair of "e4m3" / "e5m2", A's first). TypeError otherwise."""
    given = None
    if formats is not None:
        if not (isinstance(formats, (tuple, list)) and len(formats) == 2
                and all(f in _FP8_FORMATS for f in formats)):
            raise TypeError(f"{caller}: formats must be a pair of 'e4m3' / 'e5m2' (A's, B's), "
                            f"got {formats!r}")
        given = [_FP8_FORMATS[f] for f in formats]
    got = []
    for i, (name, op) in enumerate((("A", a), ("B", b))):
        if op.dtype in FP8_DTYPES:
            if given is not None and given[i] != op.dtype:
                raise TypeError(f"{caller}: {name} is {op.dtype} but formats names "
                                f"{formats[i]!r}")
            got.append(op.dtype)
        elif op.dtype in ("uint8", "int8") and given is not None:
            got.append(given[i])
        else:
            raise TypeError(f"{caller}: {name} has dtype {op.dtype}; an FP8 product takes "
                            "float8_e4m3fn or float8_e5m2 (or uint8 arrays of their bits, "
                            "with formats=)")
    return tuple(got)


def check_variant(variant, what, config_type):
    """The checks a kernel variant (:class:`Variant`, ``gemm.hopper.config.HopperVariant``)
    shares: its config is a ``config_type``, the majors of X and Y and the output type are
    known; TypeError or ValueError naming ``what`` otherwise."""
    if not isinstance(variant.config, config_type):
        raise TypeError(f"{what}: config must be a {config_type.__name__}, got "
                        f"{variant.config!r}")
    for name in ("a_major", "b_major"):
        if getattr(variant, name) not in MAJORS:
            raise ValueError(f"{what}: {name} must be one of {MAJORS}")
    if variant.out_dtype not in OUT_DTYPES:
        raise ValueError(f"{what}: out_dtype must be one of {OUT_DTYPES}")
