"""``gemm.scaled_matmul``: FP8 products with scales, ``torch._scaled_mm``'s meaning, on the
Hopper kernel written with :mod:`gemm.cute` (:mod:`gemm.hopper.cute_gemm`).

``out = activation((scale_a * A) @ (scale_b * B) + bias)``: A (M, K) and B (K, N) of
float8_e4m3fn or float8_e5m2 (either mix), A row-major and B column-major, as wgmma reads 8-bit
operands (K-major; a transposing copy would cost a pass over the operand, so other majors are
refused, as torch does); float32 scales per tensor (one value each) or per row of A and column
of B ((M, 1) and (1, N)), applied to the float32 sum in the epilogue, or DeepSeek-V3's blocks:
one per 1 x 128 block of A, (M, ceil(K / 128)) row- or column-major, and per 128 x 128 block of
B, (ceil(N / 128), ceil(K / 128)) row-major, applied to each k-tile's products on the CUDA
cores. Each k-tile of 128 elements is four wgmma of K = 32; with ``use_fast_accum=False`` (the
default) the tensor cores' partial sum of each k-tile is added to a float32 sum on the CUDA
cores (the kernel's promotion interval: 128 elements of K, as cuBLAS's and CUTLASS's default),
with ``use_fast_accum=True`` the tensor cores accumulate the whole of K themselves (their
accumulator keeps fewer bits than float32's: DeepSeek-V3's report measured about 14); block
scales are always promoted (each k-tile scaled). The sum needs registers beside the
accumulators, so a promoted call runs cooperative 128 x 128 tiles (two consumers of 64 rows);
a fast one runs pingpong consumers on 128 x 128 tiles of their own where the shape's default
tiles are 128 columns or wider, and one consumer on 64 x 64 tiles for at most 128 rows where
those fill at most two waves (a decode step; ``gemm.hopper.fp8_fast_config``).
"""

from __future__ import annotations

from typing import Any, Optional

from . import hopper
from ._env import simulator_active
from .api import _device_guard
from .call import plan as callplan
from .call.operands import check_stream, operand

__all__ = ["scaled_matmul"]


def scaled_matmul(a: Any, b: Any, scale_a: Any, scale_b: Any, *,
                  out_dtype: str = "bfloat16", bias: Any = None, out: Any = None,
                  use_fast_accum: bool = False, formats: Optional[tuple] = None,
                  config: Optional[hopper.HopperConfig] = None, stream: Any = None,
                  activation: Optional[str] = None) -> Any:
    """``out = activation((scale_a * a) @ (scale_b * b) + bias)`` in FP8 on a GPU of compute
    capability 9.x (module docstring); returns ``out``.

    ``a`` (M, K) row-major and ``b`` (K, N) column-major (``w.t()`` of a row-major (N, K)
    weight): torch float8_e4m3fn / float8_e5m2 tensors, or uint8 device arrays holding their
    bits with ``formats`` naming them (("e4m3", "e5m2"): A's, B's). ``scale_a``, ``scale_b``:
    float32 on the operands' device, one value each, (M, 1) and (1, N), or block scales (M,
    ceil(K / 128)) and (ceil(N / 128), ceil(K / 128)) (row-major out). ``out_dtype``
    "bfloat16", "float16" or "float32"; ``out`` (M, N) of that type, else a new row-major array
    of A's kind. ``bias``: as :func:`gemm.matmul`'s, (N,) / (1, N) per column or (M, 1) per
    row, bfloat16, float16 or float32, added after the scales. ``activation``: None or one of
    ``gemm.epilogue.ACTIVATIONS`` ("relu", "gelu", "gelu_tanh", "silu"), applied in float32
    before the out's rounding (fused, as :func:`gemm.matmul`'s). ``use_fast_accum``: see the
    module. ``config``: a :class:`gemm.hopper.HopperConfig` (None: the default for the shape;
    its dtype is replaced by the operands'; promoted, at most ``PROMOTE_ACCUMULATORS``
    accumulators per thread). Bad input raises TypeError or ValueError before anything runs.
    """
    if not isinstance(use_fast_accum, bool):
        raise TypeError(f"scaled_matmul: use_fast_accum must be a bool, got {use_fast_accum!r}")
    sig = callplan.signature(a, b, out, ("scaled_matmul", out_dtype, use_fast_accum, formats,
                                         config, bias is not None, activation), bias, scale_a,
                             scale_b)
    if sig is not None:
        plan = callplan.lookup(sig[0])
        if plan is not None:
            return plan(sig[1], out, stream, 1.0, 0.0)
    device, guard = _device_guard(a)
    if guard is not None:
        with guard:
            result, launch = _scaled(a, b, scale_a, scale_b, out_dtype, bias, out,
                                     use_fast_accum, formats, config, stream, activation)
    else:
        result, launch = _scaled(a, b, scale_a, scale_b, out_dtype, bias, out, use_fast_accum,
                                 formats, config, stream, activation)
    if sig is not None and launch is not None:
        callplan.keep(sig[0], callplan.plan_for(launch, a, out, result, device,
                                                guard is not None))
    return result


def _scaled(a, b, scale_a, scale_b, out_dtype, bias, out, use_fast_accum, formats, config,
            stream, activation):
    """The checked call: ``(out, plan)`` (plan None in the simulator)."""
    check_stream(stream, "scaled_matmul")
    sim = simulator_active()
    if out_dtype not in hopper.OUT_DTYPES:
        raise TypeError(f"scaled_matmul: out_dtype must be one of {hopper.OUT_DTYPES}, got "
                        f"{out_dtype!r}")
    if not sim and not hopper.hopper_supported(operand(a, "A", sim, "scaled_matmul",
                                                       batched=True).device):
        raise ValueError("scaled_matmul: FP8 products run on the Hopper kernel, which needs a "
                         "GPU of compute capability 9.x")
    return hopper.launch_matmul(a, b, out, 1.0, 0.0, config, out_dtype, "scaled_matmul", stream,
                                bias=bias, activation=activation,
                                scaled=(scale_a, scale_b, not use_fast_accum, formats))
