"""The tensor-core GEMM: its configurations, its variants, and the call.

``out = alpha * A @ B + beta * out`` with A (M, K) and B (K, N) of either major (each with one
unit stride) and ``out`` (M, N) row- or column-major: bf16 / f16 / tf32 in, f32 accumulate,
f32 / bf16 / f16 out. The kernel sees two K-side operands X (MM, K) and Y (NN, K) and a
row-major C (MM, NN): X = A, Y = B^T for a row-major out, and X = B^T, Y = A (C^T = B^T A^T)
for a column-major one. Each of X and Y is "K"-major (K contiguous) or "MN"-major; a
:class:`Variant` names everything a compiled kernel depends on.

The kernel (SM80 mma.sync atoms, swizzled shared tiles, an N-stage cp.async ring) is written
with gemm.cute (:mod:`gemm.tensorcore.cute_gemm`, which also has its shared layouts,
``smem_layout``, and their bank conflicts, ``bank_conflicts``). numba compiles it only when
a variant is first needed: a process that finds the variant's compiled kernel on disk
(:func:`tensorcore_binary`) imports neither gemm.cute nor numba. The configuration
(:class:`TensorCoreConfig`, :class:`Variant`) is defined in :mod:`gemm.tensorcore.config`.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any, Optional

import numpy as np

from .._env import simulator_active
from ..arch.smem import STATIC_SHARED_LIMIT
from ..call.binary import binary_name, compiled_binary, load_or_compile
from ..call.launch import kept_launcher
from ..call.operands import MAX_GRID_YZ, kernel_buffer, product_operands, stream_handle
from ..dtypes import (DTYPES, MAJORS, OUT_DTYPES, RAW16, check_scalars,  # noqa: F401
                      checked_out, operand_dtype)
from .config import TensorCoreConfig, Variant, copy_grid, variant_of

__all__ = ["TensorCoreConfig", "Variant", "DTYPES", "OUT_DTYPES", "MAJORS",
           "tensorcore_function", "tensorcore_kernel", "tensorcore_matmul", "plan_call",
           "launch_matmul", "compile_variant", "RAW16", "copy_grid", "variant_of",
           "tensorcore_binary"]


def tensorcore_function(variant):
    """The variant's kernel as a plain Python function (for ``compile_ptx``), written with
    gemm.cute (:func:`gemm.tensorcore.cute_gemm.kernel_function`)."""
    from gemm.tensorcore import cute_gemm      # numba and gemm.cute: only to compile
    return cute_gemm.kernel_function(variant_of(variant))


@lru_cache(maxsize=None)
def tensorcore_kernel(variant):
    """The variant's numba ``cuda.jit`` kernel (compiled on its first launch or
    ``compile``; :func:`tensorcore_binary` keeps the compiled code)."""
    from numba import cuda      # only to compile: a loaded kernel does without numba
    v = variant_of(variant)
    fn = tensorcore_function(v)
    if simulator_active():
        return cuda.jit(v.signature)(fn)
    return cuda.jit(v.signature, launch_bounds=(v.config.threads, v.config.min_blocks))(fn)


@lru_cache(maxsize=None)
def tensorcore_binary(variant):
    """The variant's compiled kernel for the current device (a :class:`gemm.call.binary.Binary`):
    its cubin file when an earlier call or process compiled it, else compiled now (numba)."""
    v = variant_of(variant)
    name = binary_name("tensorcore", (v, False))
    return load_or_compile(name, lambda: compiled_binary(tensorcore_kernel(v), v.signature))


def compile_variant(variant):
    """Compile a variant (its cubin file, see :func:`tensorcore_binary`; nothing in the
    simulator); safe to call in a spawned child process, so a parent can compile many
    variants in parallel first."""
    if not simulator_active():
        tensorcore_binary(variant_of(variant))


# --- the call ----------------------------------------------------------------------------------

_SCALARS = ("uint32",) * 9 + ("float32",) * 2


# The kernel's arrays are 1-D C-contiguous: numba indexes them with the static element size
# of their type, so the Launcher's one (4-byte) itemsize field is harmless for 16-bit arrays.
_launchers = {}


def _launcher(v):
    nbytes = v.config.shared_bytes          # past the static 48 KiB the function must allow it
    return kept_launcher(_launchers, v, tensorcore_kernel, tensorcore_binary,
                         nbytes if nbytes > STATIC_SHARED_LIMIT else 0, 3, 4, _SCALARS,
                         free_scalars=2)


def _vector(op, ld, extent, elem_bytes, top):
    """Elements per copy along the operand's contiguous axis (of ``extent`` elements) that
    its address and leading dimension allow and that divide the extent: each copy's
    predicate is its first element's, so a copy is whole or left out (CUTLASS's alignment
    rule)."""
    for v in (8, 4, 2):
        if v <= top and op.ptr % (v * elem_bytes) == 0 and extent % v == 0 and ld % v == 0:
            return v
    return 1


def _leading(ld, lines, run):
    """The leading dimension the kernel gets: ``ld``, or for a matrix of one line (whose
    leading dimension is never stepped) ``run`` rounded up to 8, which leaves every copy
    width open."""
    return ld if lines > 1 else -(-run // 8) * 8


class _Call:
    """A checked call: the variant, the kernel's operands and scalars, and the grid."""

    def __init__(self, A, B, out, alpha, beta, config, out_dtype, caller):
        sim = self.sim = simulator_active()
        if config is not None and not isinstance(config, TensorCoreConfig):
            raise TypeError(f"{caller}: config must be a TensorCoreConfig, got {config!r}")
        check_scalars(alpha, beta, caller)
        a, b, shape = product_operands(caller, A, B, sim)
        (m, k), n = a.shape, b.shape[1]
        dtype = self._dtype(a, b, config or _with_dtype(None, "bfloat16"), caller)
        config = _with_dtype(config, dtype)
        out_dtype, self.out, c, nb = checked_out(caller, out, out_dtype, a, b, shape, beta, sim)
        # the kernel's X (MM, K) and Y (NN, K), each K-major (K the unit stride) or MN-major
        eb = config.element_bytes

        def side(op, k_mode, extent):
            kmajor = op.unit_mode == k_mode
            run, lines = (k, extent) if kmajor else (extent, k)  # the contiguous axis, its lines
            ld = _leading(op.strides[1 - op.unit_mode], lines, run)
            return "K" if kmajor else "MN", ld, _vector(op, ld, run, eb, 16 // eb)

        if c.unit_mode == 1:       # out row-major: C = A B
            (xmaj, ldx, vx), (ymaj, ldy, vy) = side(a, 1, m), side(b, 0, n)
            self.ops, self.swapped, mm, nn, ldc = (a, b, c), False, m, n, c.strides[0]
        else:                      # out column-major: C^T = B^T A^T
            (xmaj, ldx, vx), (ymaj, ldy, vy) = side(b, 0, n), side(a, 1, m)
            self.ops, self.swapped, mm, nn, ldc = (b, a, c), True, n, m, c.strides[1]
        ve = 4 if out_dtype == "float32" else 8
        ldc = _leading(ldc, mm, nn)
        vc = c.ptr % 16 == 0 and ldc % ve == 0
        self.variant = Variant(config, xmaj, ymaj, out_dtype, vx, vy, vc)
        x, y = self.ops[:2]
        self.scalars = (mm, nn, k, ldx, ldy, ldc, x.bstride, y.bstride, c.bstride,
                        float(alpha), float(beta))
        self.grid = (-(-mm // config.bM), -(-nn // config.bN), nb)
        for what, blocks in (("column blocks", self.grid[1]), ("products", nb)):
            if blocks > MAX_GRID_YZ:
                raise ValueError(f"{caller}: {blocks} {what} exceed the grid limit "
                                 f"({MAX_GRID_YZ}; gemm.matmul splits a larger batch)")
        self.stream_of = a

    @staticmethod
    def _dtype(a, b, config, caller):
        return operand_dtype(a, b, config.dtype, caller)


@lru_cache(maxsize=256)
def _with_dtype(config, dtype):
    """``config`` for operands of ``dtype`` (None: the default config); cached, since building
    a config checks every copy layout it allows."""
    return TensorCoreConfig(dtype=dtype) if config is None else replace(config, dtype=dtype)


def plan_call(A: Any, B: Any, out: Any = None, *, config: Optional[TensorCoreConfig] = None,
              out_dtype: Optional[str] = None) -> Variant:
    """The :class:`Variant` a call with these arguments compiles (hashable and picklable; see
    :func:`compile_variant`). Checks the arguments like :func:`tensorcore_matmul`."""
    return _Call(A, B, out, 1.0, 0.0, config, out_dtype, "plan_call").variant


def tensorcore_matmul(A: Any, B: Any, out: Any = None, *, alpha: float = 1.0,
                      beta: float = 0.0, config: Optional[TensorCoreConfig] = None,
                      out_dtype: Optional[str] = None, stream: Any = None) -> Any:
    """``out = alpha * A @ B + beta * out`` on the tensor cores.

    ``A`` (M, K) and ``B`` (K, N): CUDA arrays (numba device arrays, CuPy arrays, torch
    tensors), each with one unit stride (row- or column-major), of bfloat16 or float16, or
    raw 16-bit integer arrays holding their bits (then ``config.dtype`` says which), or
    float32 (multiplied as tf32: each operand rounded to 10 mantissa bits, f32 accumulate).
    ``out``: (M, N) float32, bfloat16 or float16, row- or column-major; None makes a
    row-major one of ``out_dtype`` (default float32; ``beta`` must then be 0). ``config``: a
    :class:`TensorCoreConfig` (None: ``TensorCoreConfig(dtype=<the operands' type>)``,
    256x128 tiles of 128-byte K rows, 4x2 warps, 3 stages; a config's dtype is replaced by
    the operands'). ``stream``: as :func:`gemm.matmul`'s. Returns ``out``.
    """
    return launch_matmul(A, B, out, alpha, beta, config, out_dtype, "tensorcore_matmul", stream)[0]


def launch_matmul(A, B, out, alpha, beta, config, out_dtype, caller, stream=None):
    """:func:`tensorcore_matmul` for callers that repeat a call: returns ``(out, plan)``, where
    ``plan(addresses, stream, alpha, beta)`` launches the same kernel again on operands of the
    same shapes, strides, types and 16-byte alignment at the device ``addresses`` of A, B and
    out (None in the simulator)."""
    call = _Call(A, B, out, alpha, beta, config, out_dtype, caller)
    v = call.variant
    launch = _launcher(v)
    x, y, c = call.ops
    ab = np.float32 if v.config.dtype == "tfloat32" else np.uint16
    cd = np.float32 if v.out_dtype == "float32" else np.uint16
    bound = launch(call.grid, (v.config.threads, 1, 1),
                   0 if call.sim else stream_handle(stream, call.stream_of, caller),
                   (kernel_buffer(x, ab), kernel_buffer(y, ab), kernel_buffer(c, cd)),
                   call.scalars, v.config.shared_bytes)
    if bound is None:
        return call.out, None
    if call.swapped:            # the kernel computes C^T = B^T A^T: X is B, Y is A
        def plan(addresses, stream, alpha, beta):
            a, b, c = addresses
            bound((b, a, c), stream, alpha, beta)
        return call.out, plan
    return call.out, bound
