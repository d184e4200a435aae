"""The activations of gemm.epilogue in float64, written from their definitions (torch's
formulas), not from the kernels' code: the references of the epilogue's tests (numpy arrays
or Python floats)."""

import math

import numpy as np


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


ACTIVATIONS64 = {
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": _gelu,
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi)
                                                  * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1 + np.exp(-x)),
}
