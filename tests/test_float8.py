"""layoutalg.atom.float8: the 256 values of e4m3 and e5m2 against their definitions, and
encoding against a brute-force nearest value (ties to the even code), torch's overflow rules,
signs and NaN."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutalg.atom import encode, round_to_type, storage_dtype
from layoutalg.atom.float8 import FLOAT8, float8_encode, float8_values

# largest finite values and the magnitudes from which a value overflows (torch's casts)
LARGEST = {"e4m3": 448.0, "e5m2": 57344.0}
OVERFLOW = {"e4m3": 464.0, "e5m2": 61440.0}


def definition(code, fmt):
    """A code's value written out from the format's fields."""
    ebits, mbits, bias = {"e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}[fmt]
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> mbits) & ((1 << ebits) - 1), code & ((1 << mbits) - 1)
    if fmt == "e4m3" and e == 15 and m == 7:
        return float("nan")
    if fmt == "e5m2" and e == 31:
        return sign * float("inf") if m == 0 else float("nan")
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - mbits)
    return sign * (1 + m / 2 ** mbits) * 2.0 ** (e - bias)


@pytest.mark.parametrize("fmt", FLOAT8)
def test_values_are_the_definitions(fmt):
    got = float8_values(fmt)
    want = np.array([definition(c, fmt) for c in range(256)])
    assert np.array_equal(got, want, equal_nan=True)
    assert np.nanmax(got[np.isfinite(got)]) == LARGEST[fmt]
    assert storage_dtype(fmt) == np.uint8


@pytest.mark.parametrize("fmt", FLOAT8)
def test_every_value_encodes_to_its_own_code(fmt):
    values = float8_values(fmt)
    codes = np.arange(256)[~np.isnan(values)]
    assert np.array_equal(float8_encode(values[codes], fmt), codes)


def nearest(x, fmt):
    """The code of the finite value nearest ``x`` by brute force, ties to the even code."""
    values = float8_values(fmt)
    codes = [c for c in range(256) if np.isfinite(values[c])
             and not (c == 0x80 and not np.signbit(x))
             and not (c == 0 and np.signbit(x))]
    d = [abs(values[c] - x) for c in codes]
    best = min(d)
    ties = [c for c, di in zip(codes, d) if di == best]
    return min(ties, key=lambda c: (c & 1, c))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FLOAT8), st.floats(-70000, 70000, allow_nan=False))
def test_encode_rounds_to_the_nearest_value(fmt, x):
    code = int(float8_encode(x, fmt))
    if abs(x) >= OVERFLOW[fmt]:
        value = float8_values(fmt)[code]
        assert np.isnan(value) if fmt == "e4m3" else value == np.copysign(np.inf, x)
    else:
        assert code == nearest(x, fmt), (x, code)


@pytest.mark.parametrize("fmt", FLOAT8)
def test_halfway_cases_and_specials(fmt):
    values = float8_values(fmt)
    one, above = values[0x38 if fmt == "e4m3" else 0x3C], values[0x39 if fmt == "e4m3" else 0x3D]
    # halfway between 1 and the next value: to 1 (its code is even)
    assert float8_encode((one + above) / 2, fmt) == float8_encode(1.0, fmt)
    assert np.isnan(values[float8_encode(np.nan, fmt)])
    assert float8_encode(-0.0, fmt) == 0x80 and float8_encode(0.0, fmt) == 0
    assert round_to_type([LARGEST[fmt] * 1.01], fmt)[0] == LARGEST[fmt]
    assert encode(np.array([2.0]), fmt).dtype == np.uint8


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="must be one of"):
        float8_values("e3m4")
