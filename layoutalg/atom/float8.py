"""The two 8-bit floating types of SM90's FP8 wgmma, as PTX names them: ``e4m3`` (torch's
``float8_e4m3fn``: 4 exponent bits, bias 7, 3 mantissa bits, no infinities, NaN at
``S.1111.111``, largest 448) and ``e5m2`` (``float8_e5m2``: IEEE-like, bias 15, 2 mantissa
bits, infinities at ``S.11111.00``, largest 57344). Values are held as their bits in uint8.

>>> float8_values("e4m3")[[0x38, 0x7E, 0x01]].tolist()      # 1, the largest, the smallest
[1.0, 448.0, 0.001953125]
>>> float8_encode([1.0, 300.0, -0.1], "e4m3").tolist()
[56, 121, 157]
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["FLOAT8", "float8_values", "float8_encode", "float8_max"]

FLOAT8 = ("e4m3", "e5m2")
_FORMS = {"e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}     # exponent bits, mantissa bits, bias


def _check(fmt):
    if fmt not in _FORMS:
        raise ValueError(f"float8: the format must be one of {FLOAT8}, not {fmt!r}")


@lru_cache(maxsize=None)
def _table(fmt):
    ebits, mbits, bias = _FORMS[fmt]
    code = np.arange(256)
    sign = np.where(code & 0x80, -1.0, 1.0)
    e, m = (code >> mbits) & ((1 << ebits) - 1), code & ((1 << mbits) - 1)
    mag = np.where(e == 0, m / 2.0 ** mbits * 2.0 ** (1 - bias),
                   (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))
    top = e == (1 << ebits) - 1
    if fmt == "e4m3":
        mag = np.where(top & (m == 7), np.nan, mag)
    else:
        mag = np.where(top, np.where(m == 0, np.inf, np.nan), mag)
    values = sign * mag
    values.setflags(write=False)
    return values


def float8_values(fmt: str) -> np.ndarray:
    """The 256 values of format ``fmt`` by their bits (float64, read-only)."""
    _check(fmt)
    return _table(fmt)


_TOP_CODE = {"e4m3": 0x7E, "e5m2": 0x7B}       # the largest finite value's bits


def float8_max(fmt: str) -> float:
    """The largest finite value of format ``fmt`` (448 for e4m3, 57344 for e5m2)."""
    _check(fmt)
    return float(_table(fmt)[_TOP_CODE[fmt]])


def float8_encode(x: Any, fmt: str) -> np.ndarray:
    """Numbers -> the bits (uint8) of format ``fmt``, rounded to nearest, ties to even, as
    torch's conversion does: a magnitude of at least the largest value plus half its step
    becomes NaN (e4m3, which has no infinity) or infinity (e5m2); NaN stays NaN."""
    _check(fmt)
    x = np.asarray(x, dtype=np.float64)
    table = _table(fmt)
    top = _TOP_CODE[fmt]
    finite = table[:top + 1]                    # 0 .. the largest, increasing
    mag = np.abs(x)
    hi = np.clip(np.searchsorted(finite, mag), 1, top)
    lo = hi - 1
    up = (mag - finite[lo] > finite[hi] - mag) | ((mag - finite[lo] == finite[hi] - mag)
                                                  & (hi % 2 == 0))
    code = np.where(up, hi, lo)
    limit = finite[top] + (finite[top] - finite[top - 1]) / 2
    code = np.where(mag >= limit, 0x7F if fmt == "e4m3" else 0x7C, code)
    code = np.where(np.isnan(x), 0x7F, code)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)
