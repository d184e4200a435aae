"""gemm.epilogue: the activations' names are checked; their device functions compute in
float32 (no float64 instruction in the PTX), the tanh form takes ``tanh.approx.f32`` only when
asked (16-bit outs), and as Python functions they match the float64 definitions of
tests/activations64.py on values across their range."""

import math

import numpy as np
import pytest
from numba import cuda

from activations64 import ACTIVATIONS64
from gemm.epilogue import ACTIVATIONS, activation_function, check_activation


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations_match_their_float64_definitions(name):
    fn = activation_function(name).py_func
    for x in np.linspace(-8, 8, 161, dtype=np.float32):
        got, want = float(fn(np.float32(x))), float(ACTIVATIONS64[name](float(x)))
        assert abs(got - want) <= 1e-6 * max(1.0, abs(want)), (name, x, got, want)
    assert math.isnan(float(activation_function("relu").py_func(np.float32("nan"))))


@pytest.mark.parametrize("name, fast", [(n, False) for n in ACTIVATIONS] + [("gelu_tanh", True)])
def test_activations_compile_to_float32(name, fast):
    act = activation_function(name, fast)

    def kernel(x):
        x[0] = act(x[0])

    ptx = cuda.compile_ptx(kernel, "void(float32[::1])", cc=(9, 0))[0]
    assert ".f64" not in ptx
    assert ("tanh.approx.f32" in ptx) == fast


def test_bad_activations_are_refused():
    assert check_activation(None, "f") is None and check_activation("silu", "f") == "silu"
    with pytest.raises(ValueError, match="f: unknown activation 'swish'"):
        check_activation("swish", "f")
    with pytest.raises(TypeError, match="f: activation must be None or one of"):
        check_activation(len, "f")
