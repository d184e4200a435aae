"""``matmul``: ``out = alpha * A @ B + beta * out`` on CUDA arrays with the library's kernels.

float32 operands run by default on the Hopper kernel by 3xTF32 (about float32's accuracy)
where it can, else on the SIMT kernels (exact fp32 FMAs; ``precision="ieee"`` always, or
:func:`set_float32_precision`); bfloat16 and float16 operands, and
float32 ones when ``allow_tf32=True``, run on the tensor cores with the configuration tuned
for the problem (:mod:`gemm.tuning.autotune`) when the cache holds one: on a GPU of compute
capability 9.x the Hopper kernel (:mod:`gemm.hopper`: TMA, wgmma, warp specialization) when
TMA can read the operands (16-byte aligned rows; K-major tf32), else the SM80 mma.sync kernel
(:mod:`gemm.tensorcore`).

>>> import numpy as np, gemm                                  # doctest: +SKIP
>>> from numba import cuda                                    # doctest: +SKIP
>>> A = cuda.to_device(np.ones((3, 5), np.float32))           # doctest: +SKIP
>>> gemm.matmul(A, A.T).copy_to_host()[0, 0]                  # doctest: +SKIP
5.0
>>> route("bfloat16", "bfloat16")                            # which kernel a call runs
('tensorcore', 'tensorcore')
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Optional, Tuple

import numpy as np

from gemm import hopper, simt, skinny, splitk, tensorcore
from gemm._env import simulator_active
from gemm.epilogue import check_activation
from gemm.call import plan as callplan
from gemm.call.binary import sm_count
from gemm.call.launch import Launcher
from gemm.call.operands import (MAX_GRID_YZ, RAW16, batch_count, bias_operand, check_same_device,
                                check_spans, check_stream, kernel_buffer, new_like, operand,
                                output_operand, product_operands, stream_handle)
from gemm.tuning import autotune, shape_table

__all__ = ["matmul", "KERNELS", "TENSORCORE_KERNELS", "PRECISIONS", "kernel_config", "route",
           "precision_of", "float32_precision", "set_float32_precision"]

# Named kernels: MoYe's two pipelines in the seed's 128x128x8 configuration, and a tuned
# double-buffered variant (benchmarks/simt_variants.py): 128x128x16 tiles, threads owning runs
# of 4 M and 4 N values (128-bit shared loads), 2 blocks per SM.
# "small_m": 32-row tiles for calls of at most SMALL_M rows (the prefetch pipeline allows
# bM != bN), which an unnamed call of so few rows gets (benchmarks/RESULTS.md, "fp32 with
# few rows": faster than the 128-row tile there).
# All are written with gemm.cute (gemm.cute_kernels); "cute_prefetch" and "cute_double_buffer"
# name the seed's two as they did beside generated ones (ALIASES).
KERNELS = {
    "prefetch": simt.SimtConfig(pipeline="prefetch"),
    "double_buffer": simt.SimtConfig(pipeline="double_buffer"),
    "tuned": simt.SimtConfig(pipeline="double_buffer", bK=16, pad=4, vector_mn=4, min_blocks=2),
    "small_m": simt.SimtConfig(bM=32, bN=128, bK=8, mma_threads=(8, 16), pipeline="prefetch",
                               vector_mn=4, pad=4, min_blocks=4),
}
ALIASES = {"cute_prefetch": "prefetch", "cute_double_buffer": "double_buffer"}
DEFAULT_KERNEL = "tuned"
SMALL_M = 64
# Tensor-core choices by name: "tensorcore" is the tuned config from the autotune cache, else
# the default of the device's best kernel (Hopper's on 9.x when TMA can read the operands,
# SM80's otherwise); "autotune" tunes on a cache miss (gemm.tuning.autotune.tune); "hopper" and
# "sm80" ask for one kernel with its default config; "cute_hopper" is "hopper" (the Hopper kernel,
# written with gemm.cute: gemm.hopper.cute_gemm), the name it had beside a generated one.
TENSORCORE_KERNELS = ("tensorcore", "autotune", "hopper", "sm80", "cute_hopper")
_TC_CONFIGS = (tensorcore.TensorCoreConfig, hopper.HopperConfig)
# float32 products: "ieee" (fp32 FMAs on the CUDA cores), "tf32" (the tensor cores, 10-bit
# mantissas: allow_tf32=True), "tf32x3" (3xTF32 on the Hopper kernel: each operand the sum of
# two tf32 parts, three products; about float32's accuracy)
PRECISIONS = ("ieee", "tf32", "tf32x3")
# The precision of a float32 call that names none (no precision, allow_tf32 or kernel) and
# writes a float32 out: set_float32_precision. "tf32x3" runs where the Hopper kernel can (a
# 9.x GPU, A row-major and B column-major, or B row-major on a copy: _tf32x3_on_a_copy) and
# on the exact SIMT kernels elsewhere.
_float32_default = "tf32x3"
_TENSORCORE_INPUTS = ("bfloat16", "float16")


def _kernel_names():
    return sorted(KERNELS) + list(TENSORCORE_KERNELS)


def kernel_config(kernel: Any) -> simt.SimtConfig:
    """The SimtConfig named or given by ``kernel`` (None: the default)."""
    if kernel is None:
        kernel = DEFAULT_KERNEL
    if isinstance(kernel, simt.SimtConfig):
        return kernel
    if isinstance(kernel, str) and ALIASES.get(kernel, kernel) in KERNELS:
        return KERNELS[ALIASES.get(kernel, kernel)]
    if isinstance(kernel, str) or isinstance(kernel, _TC_CONFIGS):
        raise ValueError(f"matmul: unknown SIMT kernel {kernel!r}; use one of "
                         f"{sorted(KERNELS) + sorted(ALIASES)} or a gemm.simt.SimtConfig")
    raise TypeError(f"matmul: kernel must be a name, a SimtConfig, a TensorCoreConfig or a "
                    "HopperConfig, not "
                    f"{type(kernel).__name__}")


def _family(kernel):
    """"simt", "tensorcore", or None (matmul chooses by the operands' type)."""
    if kernel is None:
        return None
    if isinstance(kernel, (simt.SimtConfig,) + _TC_CONFIGS):
        return "simt" if isinstance(kernel, simt.SimtConfig) else "tensorcore"
    if isinstance(kernel, str):
        if kernel in KERNELS or kernel in ALIASES:
            return "simt"
        if kernel in TENSORCORE_KERNELS:
            return "tensorcore"
        raise ValueError(f"matmul: unknown kernel {kernel!r}; use one of {_kernel_names()}, a "
                         "gemm.simt.SimtConfig, gemm.tensorcore.TensorCoreConfig or "
                         "gemm.hopper.HopperConfig")
    raise TypeError(f"matmul: kernel must be None, a name ({_kernel_names()}), a "
                    f"gemm.simt.SimtConfig, gemm.tensorcore.TensorCoreConfig or "
                    f"gemm.hopper.HopperConfig, not "
                    f"{type(kernel).__name__} {kernel!r}")


def precision_of(precision: Optional[str], allow_tf32: bool = False,
                 default: str = "ieee") -> str:
    """The precision of a float32 call: ``precision`` (one of PRECISIONS), else "tf32" with
    ``allow_tf32``, else ``default`` (``matmul`` passes :func:`float32_precision` for a call
    that names no kernel and writes float32).

    >>> precision_of(None), precision_of(None, True), precision_of("tf32x3")
    ('ieee', 'tf32', 'tf32x3')
    >>> precision_of(None, default="tf32x3"), precision_of("ieee", default="tf32x3")
    ('tf32x3', 'ieee')
    """
    if precision is None:
        return "tf32" if allow_tf32 else default
    if precision not in PRECISIONS:
        raise ValueError(f"matmul: precision must be one of {PRECISIONS} or None, got "
                         f"{precision!r}")
    if allow_tf32 and precision != "tf32":
        raise ValueError(f"matmul: allow_tf32=True asks for precision 'tf32', not "
                         f"{precision!r}")
    return precision


def float32_precision() -> str:
    """The precision of float32 calls that name none (see :func:`set_float32_precision`).

    >>> float32_precision()
    'tf32x3'
    """
    return _float32_default


def set_float32_precision(precision: str) -> str:
    """Set the precision of the float32 calls that name no precision, ``allow_tf32`` or
    kernel and write a float32 out, as ``torch.set_float32_matmul_precision`` sets torch's:
    one of PRECISIONS. "tf32x3" at import (3xTF32 where the Hopper kernel can run the call,
    the exact SIMT kernels elsewhere); "ieee" gives the exact kernels everywhere. Returns the
    precision it replaces.

    >>> old = set_float32_precision("ieee"); old, float32_precision()
    ('tf32x3', 'ieee')
    >>> _ = set_float32_precision(old)
    >>> set_float32_precision("fp32")
    Traceback (most recent call last):
    ...
    ValueError: matmul: precision must be one of ('ieee', 'tf32', 'tf32x3') or None, got 'fp32'
    """
    global _float32_default
    if precision is None:
        raise ValueError(f"set_float32_precision: precision must be one of {PRECISIONS}")
    precision_of(precision)
    old, _float32_default = _float32_default, precision
    callplan.clear()                # the fast path's plans ran calls naming none the old way
    return old


def route(a_dtype: str, b_dtype: str, kernel: Any = None,
          allow_tf32: bool = False, precision: Optional[str] = None) -> Tuple[str, Any]:
    """Which kernel ``matmul`` runs for operands of these dtypes (numpy names):
    ``("simt", SimtConfig)`` or ``("tensorcore", choice)``, where choice is a TensorCoreConfig
    or HopperConfig, "tensorcore" (the tuned config from the cache, else the device's default),
    "autotune", "hopper" or "sm80".

    float32 runs on the SIMT kernels unless ``allow_tf32`` or ``precision`` "tf32" (then as
    tf32 on the tensor cores, unless ``kernel`` names a SIMT kernel) or "tf32x3" (then on the
    tensor cores by 3xTF32; a SIMT kernel named is an error). ``matmul`` passes float32's
    default (:func:`float32_precision`) for a call that names none; here None is "ieee".
    bfloat16 and float16 run on the tensor cores; raw 16-bit integers holding their bits
    only with a TensorCoreConfig or HopperConfig (its dtype says which).
    TypeError for unsupported or mixed dtypes, ValueError or TypeError for a bad ``kernel``.

    >>> route("float32", "float32")[0], route("float32", "float32", allow_tf32=True)[0]
    ('simt', 'tensorcore')
    >>> route("float16", "float16", "autotune")
    ('tensorcore', 'autotune')
    """
    family = _family(kernel)
    raw_ok = isinstance(kernel, _TC_CONFIGS)
    for name, dt in (("A", a_dtype), ("B", b_dtype)):
        if dt in ("float32",) + _TENSORCORE_INPUTS or (raw_ok and dt in tensorcore.RAW16):
            continue
        hint = (" (16-bit integer arrays holding bfloat16 or float16 bits need "
                "kernel=TensorCoreConfig(dtype=...))" if dt in tensorcore.RAW16 else "")
        raise TypeError(f"matmul: {name} has dtype {dt}; supported: float32, bfloat16, "
                        f"float16{hint}")
    if a_dtype != b_dtype:
        raise TypeError(f"matmul: A is {a_dtype} and B is {b_dtype}; they must match")
    precision = precision_of(precision, allow_tf32)
    if precision != "ieee" and a_dtype != "float32":
        raise TypeError(f"matmul: precision {precision!r} is for float32 operands, A and B "
                        f"are {a_dtype}")
    if precision == "tf32x3":
        if family == "simt" or isinstance(kernel, tensorcore.TensorCoreConfig) or \
                kernel == "sm80":
            raise ValueError(f"matmul: precision 'tf32x3' runs on the Hopper kernel, not "
                             f"{kernel!r}")
        return "tensorcore", kernel if family == "tensorcore" else "tensorcore"
    if family == "simt":
        if a_dtype != "float32":
            raise TypeError(f"matmul: the SIMT kernel {kernel!r} takes float32, A and B are "
                            f"{a_dtype}; {'/'.join(_TENSORCORE_INPUTS)} run on the tensor "
                            "cores (kernel=None, 'tensorcore', 'autotune' or a TensorCoreConfig)")
        return "simt", kernel_config(kernel)
    if a_dtype == "float32" and precision == "ieee":
        if family is None:
            return "simt", kernel_config(None)
        raise TypeError(f"matmul: kernel {kernel!r} runs float32 operands on the tensor cores: "
                        "pass precision='tf32x3' (3xTF32, about float32's accuracy) or "
                        "allow_tf32=True (tf32, a 10-bit mantissa), or use a SIMT kernel")
    return "tensorcore", kernel if family == "tensorcore" else "tensorcore"


_launchers = {}
_SCALARS = ("uint32",) * 14 + ("float32",) * 2


def _launcher(kernel, a_unit, b_unit, vec_a, vec_b):
    """(config, Launcher) for a kernel name or config and the operands' majors and vectors."""
    key = (kernel, a_unit, b_unit, vec_a, vec_b)
    entry = _launchers.get(key)
    if entry is None:
        cfg = kernel_config(kernel)
        va = simt.copy_vector(cfg, a_unit, cfg.bM, vec_a)
        vb = simt.copy_vector(cfg, b_unit, cfg.bN, vec_b)
        make = simt.simt_kernel if simulator_active() else simt.simt_binary
        kern = make(replace(cfg, split_k=1), a_unit, b_unit, va, vb)   # a run-time choice
        entry = _launchers[key] = (cfg, Launcher(kern, 3, 4, _SCALARS, free_scalars=2))
    return entry


def _vector(op):
    """Elements per cp.async the global operand allows: its address and leading dimension
    must be aligned to the vector (16, 8 or 4 bytes)."""
    ld = op.strides[1 - op.unit_mode]
    for v in (4, 2):
        if op.ptr % (4 * v) == 0 and ld % v == 0:
            return v
    return 1


def _dividing(vec, extent):
    """The largest power of two <= ``vec`` that divides ``extent``."""
    while extent % vec:
        vec //= 2
    return vec


# The fast path: the kept plans of earlier calls by their signature (gemm.call.plan), forgotten
# when the autotune cache's file changes (a tuned config may now choose another kernel).
_plans = callplan.PLANS
callplan.watch(lambda: autotune._signature(autotune.cache_path()))


def matmul(A: Any, B: Any, out: Any = None, *, alpha: float = 1.0, beta: float = 0.0,
           kernel: Any = None, allow_tf32: bool = False, out_dtype: Optional[str] = None,
           stream: Any = None, precision: Optional[str] = None, bias: Any = None,
           activation: Optional[str] = None) -> Any:
    """``out = alpha * A @ B + beta * out`` for an (M, K) ``A`` and a (K, N) ``B``, or for
    batches of them as ``torch.matmul``: (B, M, K) @ (B, K, N) gives (B, M, N), and a 2-D (or
    batch-of-1) operand is used by every product. A batch runs as one launch (the products
    along the grid's z, or in the Hopper kernel's persistent tile order); its matrices may be
    any distance apart (0 for a broadcast one).

    A and B are CUDA arrays (numba device arrays, CuPy arrays, torch tensors) of one type, each
    matrix row- or column-major (a transposed view is fine). ``out`` (M, N) or (B, M, N) on
    the same device, any strides with one unit stride in each matrix, its elements distinct;
    when None a new row-major array of A's kind is made, of
    ``out_dtype`` (default as ``torch.mm``: the inputs' type; float32 for raw 16-bit integer
    operands), and ``beta`` must be 0. An empty M or N gives an empty result, K = 0 gives
    ``beta * out`` (zeros when beta is 0), without a kernel. ``stream``: a torch, CuPy or
    numba stream or a raw handle (default: the caller's current stream for A's kind, numba's
    default stream for numba arrays). Returns ``out``.

    - float32 A and B: ``precision`` "ieee" runs a SIMT kernel (exact fp32); ``out``
      float32. ``kernel``: a name from ``KERNELS`` (or ``ALIASES``) or a
      ``gemm.simt.SimtConfig`` (default "tuned"; "small_m" for at most ``SMALL_M`` rows, and
      the small-M kernel ``gemm.skinny`` where ``skinny.fits``). ``precision="tf32x3"``:
      3xTF32 on the Hopper kernel (each operand split into two tf32 parts, three tensor-core
      products, each step's sum added on the CUDA cores: about float32's accuracy), its
      tiles and split-K by the shape (``kernel`` None, "tensorcore" or "autotune": no tuned
      config is used; "hopper" or a HopperConfig); where an unnamed call cannot run there
      (not a 9.x GPU;
      operands TMA cannot read: A must be row-major and B column-major, or for torch
      tensors and at least ``X3_COPY_ROWS`` rows row-major, then copied column-major
      first) the SIMT kernel runs it. With ``allow_tf32=True`` (or ``precision="tf32"``) and no SIMT kernel named,
      they run on the tensor cores as tf32 (10-bit mantissa). No precision, ``allow_tf32``
      or kernel named and a float32 out: :func:`float32_precision`, "tf32x3" unless
      :func:`set_float32_precision` said otherwise.
    - bfloat16 or float16 A and B (or float32 with ``allow_tf32``): a tensor-core kernel,
      f32 accumulate; ``out`` float32, bfloat16 or float16 (``out_dtype="float32"`` for the
      f32 result of 16-bit inputs). ``kernel``: None or "tensorcore"
      (the config tuned for this problem, see ``python -m gemm tune``, else the device's
      default: for 16-bit operands on compute capability 9.x the config tuned for the
      nearest shape of the shipped table ``gemm.tuning.shape_table`` where one is near enough, else
      the Hopper kernel's when TMA can read A and B (16-byte aligned rows, tf32 operands
      K-major), its tiles and split-K chosen from the shape by
      ``gemm.hopper.default_config``, else the SM80 kernel's), "autotune"
      (tune now on a cache miss: minutes), "hopper" or "sm80" (that kernel, its default
      config; the Hopper kernel is written with ``gemm.cute``), "cute_hopper" (the same as
      "hopper"), a ``gemm.hopper.HopperConfig`` or a
      ``gemm.tensorcore.TensorCoreConfig``. With
      a config, A and B may also be uint16/int16 arrays holding bfloat16 or float16 bits (the
      config's dtype says which).

    An epilogue, ``out = activation(alpha * A @ B + beta * out + bias)``
    (:mod:`gemm.epilogue`): ``bias`` a vector of bfloat16, float16 or float32 on A's device,
    one value per column of out (shape (N,) or (1, N)) or per row ((M, 1)), the same for
    every matrix of a batch; ``activation`` one of ``gemm.epilogue.ACTIVATIONS`` ("relu",
    "gelu", "gelu_tanh", "silu"). Fused, applied in float32 before out's rounding, where the
    Hopper kernel written with ``gemm.cute`` takes the call (``kernel`` None, "tensorcore",
    "hopper", "cute_hopper" (cooperative) or a HopperConfig (its tiles and schedule), no
    split-K or swap;
    a GPU of compute capability 9.x, 16-bit operands or float32 ones with ``allow_tf32``,
    rows TMA can read, M, N and K of at least 1); elsewhere the product runs on the kernel
    the call names or routes to and the epilogue follows as a second kernel on the stored
    out (:mod:`gemm.epilogue_kernel`: a 16-bit out is rounded before and after it). A bad
    bias or activation is refused with a ValueError or TypeError before anything runs.

    Mixed or unsupported types raise TypeError; see :func:`route` for the rules.
    """
    fused = bias is not None or activation is not None
    given = () if bias is None else (bias,)     # (signature's short path without a bias)
    sig = callplan.signature(A, B, out, (kernel, allow_tf32, out_dtype, precision, activation,
                                         bias is not None), *given)
    if sig is not None:
        plan = callplan.lookup(sig[0])
        if (plan is not None and type(alpha) in _REAL and type(beta) in _REAL
                and (beta == 0 or out is not None)):
            return plan(sig[1], out, stream, alpha, beta)
    args = (A, B, out, alpha, beta, kernel, allow_tf32, out_dtype, stream, precision)
    run = partial(_fused, bias=bias, activation=activation) if fused else _matmul
    device, guard = _device_guard(A)
    if guard is not None:
        with guard:
            result, launch = run(*args)
    else:
        result, launch = run(*args)
    if sig is not None and launch is not None:
        callplan.keep(sig[0], callplan.plan_for(launch, A, out, result, device,
                                                guard is not None))
    return result


_REAL = (float, int, np.float64, np.float32)   # alpha and beta the fast path passes on


def _device_guard(A):
    """``(A's device, a context manager making it current or None)`` for torch tensors on a
    device that is not torch's current one (the kernels run in the arrays' device's context);
    ``(None, None)`` for other kinds, whose arrays live on the current device."""
    if not type(A).__module__.startswith("torch") or not getattr(A, "is_cuda", False):
        return None, None
    import torch            # a torch tensor's call: torch is optional
    device = A.get_device()
    return device, (None if device == torch.cuda.current_device() else torch.cuda.device(device))


def _tf32x3(A, B, out, alpha, beta, choice, a, b, out_dtype, stream):
    """3xTF32 on the Hopper kernel: the config named, else the default's tiles. Returns
    (out, plan), or None where an unnamed call cannot run there (not a 9.x GPU, or operands
    TMA cannot read; a row-major B may run on a copy, :func:`_tf32x3_on_a_copy`)."""
    named = choice in ("hopper", "cute_hopper") or isinstance(choice, hopper.HopperConfig)
    if not named and (simulator_active() or not hopper.hopper_supported(a.device)):
        return None
    cfg = choice if isinstance(choice, hopper.HopperConfig) else None
    try:
        return hopper.launch_matmul(A, B, out, alpha, beta, cfg, out_dtype, "matmul", stream,
                                    tf32x3=True)
    except hopper.TmaUnfit:
        if named:
            raise
    return _tf32x3_on_a_copy(A, out, alpha, beta, a, b, out_dtype, stream)


# A row-major B runs 3xTF32 on a column-major copy (gemm.transpose) from this many rows of A
# up. The copy moves 8 N K bytes, the product 2 M N K flops, so the copy's share of the time
# falls as 1 / M; from this many rows it costs less than 3xTF32 gains over the exact kernel
# (the estimate and the timings: benchmarks/RESULTS.md, "3xTF32"). Not swept over M.
X3_COPY_ROWS = 512


def _tf32x3_on_a_copy(A, out, alpha, beta, a, b, out_dtype, stream):
    """3xTF32 for a row-major B: B copied column-major into a workspace of torch's caching
    allocator (CUDA graphs give it their pool), then the Hopper kernel reads the copy; its
    plan copies again each call. None where that does not pay or cannot run: not torch
    tensors, A not row-major, a batch, fewer than X3_COPY_ROWS rows, a B too large for the
    copy."""
    (m, k), n = a.shape, b.shape[1]
    if (a.kind != "torch" or b.kind != "torch" or a.unit_mode != 1 or b.unit_mode != 1
            or a.batched or b.batched or m < X3_COPY_ROWS):
        return None
    handle, device = stream_handle(stream, a), a.device
    ws, owner = splitk.workspace(4 * k * n, handle, device, "torch", use="copy")
    from gemm import transpose          # (numba: imported when a call first copies)
    try:
        copy = transpose.column_major_copy((b.ptr, b.span), (ws, k * n), (k, n),
                                           b.strides[0], handle)
        result, inner = hopper.launch_matmul(A, owner[:k * n].view(n, k).T, out, alpha, beta,
                                             None, out_dtype, "matmul", stream, tf32x3=True)
    except (ValueError, hopper.TmaUnfit):   # too large to copy; the copy's rows misaligned
        return None

    def plan(addresses, stream, alpha, beta):
        x, y, c = addresses
        w, keep = splitk.workspace(4 * k * n, stream, device, "torch", use="copy")
        copy((y, w), stream)
        inner((x, w, c), stream, alpha, beta)
        del keep                        # the launches are enqueued
    return result, plan


def _tensorcore(A, B, out, alpha, beta, choice, a, b, out_dtype, stream):
    """The tensor-core call on A's device (``a``, ``b``: A's and B's Operands): ``choice`` is
    a TensorCoreConfig or HopperConfig, or one of TENSORCORE_KERNELS. Returns (out, plan) as
    the kernels' launch_matmul. A batch runs with the config tuned for one of its products."""
    args = (A, B, out, alpha, beta)
    if choice in ("hopper", "cute_hopper") or isinstance(choice, hopper.HopperConfig):
        cfg = choice if isinstance(choice, hopper.HopperConfig) else None
        return hopper.launch_matmul(*args, cfg, out_dtype, "matmul", stream)
    cfg = choice if isinstance(choice, tensorcore.TensorCoreConfig) else None
    if choice in ("tensorcore", "autotune"):
        one = [X[0] if op.batched else X for X, op in ((A, a), (B, b))]
        tuned_out = None if out is None or a.batched or b.batched else out
        cfg = autotune.lookup(autotune.problem_key(*one, tuned_out, out_dtype, caller="matmul"))
        if cfg is None and choice == "autotune":
            cfg = autotune.tune(*one, tuned_out, out_dtype=out_dtype)
        if cfg is None:
            cfg = _shipped_config(a, b, out)
        if isinstance(cfg, hopper.HopperConfig) or (
                cfg is None and not simulator_active() and hopper.hopper_supported(a.device)):
            try:
                return hopper.launch_matmul(*args, cfg, out_dtype, "matmul", stream)
            except hopper.TmaUnfit:         # rows TMA cannot read: the SM80 kernel's default
                cfg = None
    # None: the kernel's default for the operands' type
    return tensorcore.launch_matmul(*args, cfg, out_dtype, "matmul", stream)


def _shipped_config(a, b, out):
    """The config of ``gemm.tuning.shape_table`` for a call never tuned: one product of 16-bit
    operands writing a row-major out on a 9.x GPU; else None."""
    if (simulator_active() or a.batched or b.batched or a.dtype != b.dtype
            or not hopper.hopper_supported(a.device)):
        return None
    if out is not None and operand(out, "out", False).unit_mode != 1:
        return None
    (m, k), n = a.shape, b.shape[1]
    return shape_table.lookup(a.dtype, m, n, k, sm_count(a.device), narrow=a.unit_mode == 1)


def _result_dtype(family, a_dtype, out, out_dtype, sim):
    """The out's dtype: ``out``'s when given (the kernels check ``out_dtype`` against it),
    else ``out_dtype``, else torch.mm's rule (the inputs' type; float32 for float32, tf32
    and raw 16-bit integer operands)."""
    if out is not None:
        return out_dtype
    if out_dtype is None:
        return a_dtype if a_dtype in _TENSORCORE_INPUTS else "float32"
    allowed = ("float32",) if family == "simt" else tensorcore.OUT_DTYPES
    if out_dtype not in allowed:
        raise TypeError(f"matmul: out_dtype={out_dtype!r}; this kernel writes "
                        f"{', '.join(allowed)}")
    return out_dtype


def _out_dtype(out, od, sim):
    """The type a call writes: ``od``, else ``out``'s."""
    return od or operand(out, "out", sim, batched=True).dtype


def _empty_result(A, a, out, shape, out_dtype, beta, k, sim):
    """matmul with a zero extent: an empty out, or ``beta * out`` (zeros for beta 0, as
    BLAS: out is not read) when K is 0. No kernel runs."""
    if out is None:
        if beta != 0:
            raise ValueError("matmul: beta != 0 needs an `out` to accumulate into")
        out = new_like(a, shape, out_dtype)
    c = operand(out, "out", sim, allow_empty=True, batched=len(shape) == 3)
    if c.dims != tuple(shape):
        raise ValueError(f"matmul: out has shape {c.dims}, expected {tuple(shape)}")
    if k or 0 in shape:
        return out
    if c.kind == "torch":
        out.zero_() if beta == 0 else out.mul_(beta)
    elif c.kind == "cupy":
        out.fill(0) if beta == 0 else out.__imul__(beta)
    else:                       # numba (or simulator) arrays: through the host
        host = out.copy_to_host()
        host[...] = 0 if beta == 0 else host * beta
        out.copy_to_device(host)
    return out


_MAX_BATCH = MAX_GRID_YZ        # products per launch (a larger batch is launched in parts)


def _fused(A, B, out, alpha, beta, kernel, allow_tf32, out_dtype, stream, precision, *,
           bias, activation):
    """matmul with an epilogue, ``(out, plan)`` (the plan takes the bias's address after
    out's): fused in the Hopper kernel written with gemm.cute where that kernel takes the
    call (kernel None, "tensorcore", "hopper", "cute_hopper" or a HopperConfig; 16-bit
    operands, or float32 ones as tf32; rows TMA can read; a GPU of compute capability 9.x),
    else the product by the kernel the call names or routes to and then the epilogue as a
    second kernel (:mod:`gemm.epilogue_kernel`). The bias is checked before anything runs."""
    check_activation(activation, "matmul")
    _family(kernel)
    check_stream(stream)
    sim = simulator_active()
    a, b, shape = product_operands("matmul", A, B, sim, allow_empty=True)
    (m, k), n = a.shape, b.shape[1]
    # raw 16-bit arrays (a config's dtype says which) hold the operands' type
    bits16 = a.dtype if a.dtype in ("bfloat16", "float16") else getattr(kernel, "dtype", None)
    bias_op, bias_rows = None, False
    if bias is not None:
        bias_op, bias_rows = bias_operand(bias, m, n, "matmul", sim, bits16)
    in_hopper = (kernel in (None, "tensorcore", "hopper", "cute_hopper")
                 or isinstance(kernel, hopper.HopperConfig))
    tensor_cores = a.dtype != "float32" or allow_tf32 or precision == "tf32"
    if (in_hopper and tensor_cores and min(m, n, k) > 0
            and (sim or hopper.hopper_supported(a.device))):
        cfg = kernel if isinstance(kernel, hopper.HopperConfig) else None
        family, _ = route(a.dtype, b.dtype, cfg or "hopper", a.dtype == "float32", None)
        od = _result_dtype(family, a.dtype, out, out_dtype, sim)
        try:
            return hopper.launch_matmul(A, B, out, alpha, beta, cfg, od, "matmul", stream,
                                        bias=bias, activation=activation)
        except hopper.TmaUnfit:         # rows TMA cannot read: the epilogue after
            pass
    result, launch = _matmul(A, B, out, alpha, beta, kernel, allow_tf32, out_dtype, stream,
                             precision)
    c = operand(result, "out", sim, allow_empty=True, batched=len(shape) == 3)
    if c.dtype in RAW16:
        c.dtype = out_dtype or bits16
    from gemm import epilogue_kernel            # (numba: imported when it runs)
    bound = epilogue_kernel.apply(c, bias_op, bias_rows, activation,
                                  0 if sim else stream_handle(stream, a))
    if launch is None or bound is None:
        return result, None

    def plan(addresses, stream, alpha, beta):
        launch(addresses[:3], stream, alpha, beta)
        bound((addresses[2], addresses[3] if bias is not None else addresses[2]), stream)
    return result, plan


def _matmul(A, B, out, alpha, beta, kernel, allow_tf32=False, out_dtype=None, stream=None,
            precision=None):
    """matmul with every check: ``(out, plan)``, where on a GPU ``plan(addresses, stream,
    alpha, beta)`` launches the same kernels again on arrays of the same signature (the fast
    path keeps it, so a later call keeps this call's kernel and config, the tuned one
    included); None where nothing is kept (the simulator, empty products, batches launched
    in parts)."""
    _family(kernel)                 # a bad kernel is reported before the operands' faults
    check_stream(stream)
    sim = simulator_active()
    a, b, shape = product_operands("matmul", A, B, sim, allow_empty=True)
    (m, k), n = a.shape, b.shape[1]
    if kernel is None and a.dtype == "float32":     # float32's default, for a float32 out
        writes = out_dtype or ("float32" if out is None else operand(
            out, "out", sim, allow_empty=True, batched=len(shape) == 3).dtype)
        if writes == "float32":
            precision = precision_of(precision, allow_tf32, _float32_default)
    family, choice = route(a.dtype, b.dtype, kernel, allow_tf32, precision)
    od = _result_dtype(family, a.dtype, out, out_dtype, sim)
    if 0 in shape or k == 0:
        return _empty_result(A, a, out, shape, od or operand(
            out, "out", sim, allow_empty=True, batched=len(shape) == 3).dtype, beta, k,
            sim), None
    nb = shape[0] if len(shape) == 3 else 1
    if nb > _MAX_BATCH:
        return _in_parts(A, B, out, a, b, shape, od, (alpha, beta, kernel, allow_tf32,
                                                     out_dtype, stream, precision)), None
    # few rows: a pass over B on the CUDA cores (gemm.skinny), where the SIMT rules on the
    # out's type hold too (a float32 product gives a float32 out)
    if (kernel is None and skinny.fits(a.dtype, m, n, k, nb, "n" if b.unit_mode == 1 else "k")
            and (family == "tensorcore" or _out_dtype(out, od, sim) == "float32")):
        return skinny.launch_matmul(A, B, out, alpha, beta, None, od, "matmul", stream)
    if family == "tensorcore":
        done = (_tf32x3(A, B, out, alpha, beta, choice, a, b, od, stream)
                if precision == "tf32x3" else
                _tensorcore(A, B, out, alpha, beta, choice, a, b, od, stream))
        if done is not None:
            return done
        family, kernel = "simt", None       # tf32x3 the Hopper kernel can't run: exact SIMT
    if od not in (None, "float32"):
        raise TypeError(f"matmul: float32 operands on the SIMT kernels give a float32 out, "
                        f"not {od}")
    out, c = output_operand("matmul", out, a, shape, sim, beta=beta)
    batch_count("matmul", a, b, c)
    named = (("A", a), ("B", b), ("out", c))
    check_same_device("matmul", named)
    check_spans("matmul", named)
    # The kernels see MoYe's operands: A as (M, K), B as (N, K), C as (M, N).
    b_unit = 1 - b.unit_mode
    simt_choice = kernel if kernel is not None else ("small_m" if m <= SMALL_M else None)
    # a predicate per vector (CUTLASS's alignment rule): it must divide the extent
    va = _dividing(_vector(a), m if a.unit_mode == 0 else 1)
    vb = _dividing(_vector(b), n if b_unit == 0 else 1)
    cfg, launch = _launcher(simt_choice, a.unit_mode, b_unit, va, vb)
    (sam, sak), (sbk, sbn), (scm, scn) = a.strides, b.strides, c.strides
    tiles = (m + cfg.bM - 1) // cfg.bM, (n + cfg.bN - 1) // cfg.bN
    k_tiles = -(-k // cfg.bK)
    split = cfg.split_k if kernel is not None or sim else simt_split(
        nb * tiles[0] * tiles[1], k_tiles, sm_count(c.device) * cfg.min_blocks)
    split, kps = splitk.ranges(k_tiles, min(split, MAX_GRID_YZ // nb))   # z: nb x ranges
    handle = 0 if sim else stream_handle(stream, a)
    buffers = (kernel_buffer(a), kernel_buffer(b), kernel_buffer(c))
    strides = (sam, sak, sbn, sbk)
    if split == 1:
        plan = launch(tiles + (nb,), (cfg.threads, 1, 1), handle, buffers,
                      (m, n, k) + strides + (scm, scn, a.bstride, b.bstride, c.bstride, nb,
                                             kps, alpha, beta))
    else:
        plan = _split_k(launch, cfg, tiles, buffers, (m, n, k) + strides, (a, b, c), nb,
                        split, kps, handle, alpha, beta)
    return out, plan


def simt_split(blocks, k_tiles, slots):
    """The split-K of a SIMT call without a named kernel: :func:`gemm.splitk.by_shape` over
    the GPU's block ``slots`` (SMs x blocks per SM), 2 ranges at least."""
    return splitk.by_shape(blocks, k_tiles, slots, least=2)


def _split_k(launch, cfg, tiles, buffers, scalars, ops, nb, split, kps, stream, alpha, beta):
    """The SIMT kernel writing ``split`` K ranges' partial products to a workspace in C's
    orientation (its unit stride along the workspace's rows), then gemm.splitk's reduction
    into C. Returns the plan (None in the simulator)."""
    a, b, c = ops
    rows, cols, ldw, sw, size, ldc = splitk.partials_layout(c, scalars[0], scalars[1],
                                                            split * nb, "matmul")
    w, owner = splitk.partials_buffer(size, stream, c)
    kernel_scalars = scalars + sw + (a.bstride, b.bstride, rows * ldw, nb, kps)
    kern = launch(tiles + (nb * split,), (cfg.threads, 1, 1), stream, buffers[:2] + (w,),
                  kernel_scalars + (1.0, 0.0))
    red = splitk.reduce_splits("float32", w, buffers[2], rows, cols, ldw, nb, split, ldc, 1,
                               c.bstride, alpha, beta, stream)
    del owner                           # the launches are enqueued
    return splitk.partials_plan(kern, red, size, c, 2)


def _in_parts(A, B, out, a, b, shape, out_dtype, rest):
    """A batch of more than ``_MAX_BATCH`` products: one call per part of the batch (an
    operand that every product shares is passed whole)."""
    if out is None:
        if rest[1] != 0:
            raise ValueError("matmul: beta != 0 needs an `out` to accumulate into")
        out = new_like(a, shape, out_dtype)
    for s in range(0, shape[0], _MAX_BATCH):
        part = slice(s, s + _MAX_BATCH)
        _matmul(A[part] if a.batch > 1 else A, B[part] if b.batch > 1 else B, out[part], *rest)
    return out
