"""The Hopper (sm_90a) GEMM: TMA loads, wgmma, mbarriers and a warp-specialized pipeline.

The SM90 family in one package: this module (the kernel's calls: compile, launch, plans),
:mod:`gemm.hopper.config` (``HopperConfig`` and its checks), :mod:`gemm.hopper.rules` (the
config a shape gets), :mod:`gemm.hopper.cute_gemm` (the kernel, written with
:mod:`gemm.cute`, its epilogues, 3xTF32 and FP8's promotion beside it), :mod:`gemm.hopper.plan`
(the wgmma atoms, slot layouts and TMA copies it is planned with) and
:mod:`gemm.hopper.tensor_maps` (the TMA tensor maps in device memory).

``out = alpha * A @ B + beta * out`` like :mod:`gemm.tensorcore` (bf16 / f16 / tf32 in, f32
accumulate, f32 / bf16 / f16 out, the same operands X (MM, K), Y (NN, K) and row-major C), on
a GPU of compute capability 9.x. A persistent kernel (one block per SM, output tiles in
grouped order): a producer warpgroup issues TMA loads into a ring of ``stages`` shared slots,
``consumers`` warpgroups each multiply ``bM`` rows of the block's tile by its ``bN`` columns
with wgmma, and store their accumulators. The kernel is written with :mod:`gemm.cute`
(:mod:`gemm.hopper.cute_gemm`); its configuration is :mod:`gemm.hopper.config`'s, and a call
without one gets :mod:`gemm.hopper.rules`' by its shape. ``tf32x3=True`` runs float32
operands by 3xTF32 (about float32's accuracy; ``HopperConfig.tf32x3``).

What TMA needs, and what the kernel does otherwise:

- each operand's leading dimension in bytes a multiple of 16 (unless it has one row or
  column) and its address 16-byte aligned, every map within the driver's rules
  (``gemm.tma.check_encodable``; else :class:`TmaUnfit`, a ValueError, here; ``gemm.matmul``
  runs such calls on the SM80 kernel);
- tf32 operands K-major (wgmma transposes only 16-bit types): TmaUnfit here for an MN-major
  float32 operand; ``gemm.matmul`` runs those on the SM80 kernel (tf32x3 ones on the SIMT
  kernel);
- any M, N, K: boxes past the edges are zero-filled, the epilogue is predicated.

In numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) the same kernel runs on the twins
of ``gemm.arch.sim_sm90`` (TMA over maps of ``sim_tensor_map``, mbarriers, wgmma), planned for
``SIM_SMS`` SMs.

>>> HopperConfig().threads, HopperConfig().shared_bytes
(384, 148480)
>>> "wgmma.mma_async" in ptx()                                     # doctest: +SKIP
True
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from functools import lru_cache
from typing import Any, Optional

import numpy as np

from .. import splitk
from .._env import simulator_active
from ..arch.smem import DYNAMIC_SHARED_LIMIT
from ..call.binary import (binary_name, compiled_binary, device_properties, load_or_compile,
                           sm_count)
from ..call import plan as callplan
from ..call.launch import kept_launcher
from ..call.operands import (bias_operand, check_same_device, kernel_buffer,
                             product_operands, scale_operands, stream_handle)
from ..dtypes import (DTYPES, MAJORS, OUT_DTYPES, check_scalars, checked_out, fp8_dtypes,
                      operand_dtype)
from ..epilogue import check_activation
from ..tma import check_encodable
from .config import (_ELEMENT_BYTES, EPILOGUES, MAX_SPLIT_K, MIN_SPLIT_TILES,
                     BLOCK, PROMOTE_ACCUMULATORS, SCHEDULES, SM_SHARED, STAGING_BYTES,
                     X3_ACCUMULATORS, HopperConfig, HopperVariant)
from .plan import hopper_copies
from .rules import (LONG_RANGE_TILES, NARROW_RANGE_TILES, NARROW_ROWS, PAIR_ROWS, SWAP_COLUMNS,
                    SWAP_ROWS, default_config, default_split, fp8_fast_config, fp8_few_rows,
                    pairs, swapped_config, swapped_tiles, swaps, swaps_narrow, x3_config,
                    x3_default, x3_swaps, x3_tiles)
from .tensor_maps import device_map

__all__ = ["HopperConfig", "HopperVariant", "TmaUnfit", "ptx", "hopper_kernel", "hopper_binary",
           "hopper_matmul", "launch_matmul", "plan_call", "hopper_supported", "compile_variant",
           "sm_carveout",
           # re-exported: the config (gemm.hopper.config), the shape rules (gemm.hopper.rules)
           # and the types (gemm.dtypes)
           "DTYPES", "MAJORS", "OUT_DTYPES", "SCHEDULES", "EPILOGUES", "STAGING_BYTES",
           "X3_ACCUMULATORS", "SM_SHARED", "MAX_SPLIT_K", "MIN_SPLIT_TILES", "LONG_RANGE_TILES",
           "SWAP_ROWS", "SWAP_COLUMNS", "NARROW_ROWS", "NARROW_RANGE_TILES", "PAIR_ROWS",
           "default_config", "fp8_fast_config", "fp8_few_rows", "default_split",
           "swapped_config", "swapped_tiles", "swaps", "swaps_narrow", "pairs", "x3_config",
           "x3_default", "x3_swaps", "x3_tiles"]

_OUT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
SIM_SMS = 3                 # the SMs a call in the simulator plans for (its blocks loop)
_carveout = 0               # the SMs calls leave free (sm_carveout)


@contextmanager
def sm_carveout(sms: int):
    """Within it, the Hopper kernel's calls are planned for ``sms`` fewer SMs than the GPU
    has (at least one): the persistent grid and the rules' waves (as cuBLASLt's SM count
    target leaves SMs to a collective beside a matmul). A kernel launched beside them on
    another stream (:mod:`gemm.collective.push`'s) then finds SMs free at once instead of
    waiting for matmul blocks to end. Process-wide, not per thread; ``gemm.matmul``'s kept
    plans are forgotten where it changes the count, so that no call reuses a grid planned
    for another."""
    global _carveout
    if isinstance(sms, bool) or not isinstance(sms, int) or sms < 0:
        raise ValueError(f"sm_carveout: sms must be an int >= 0, not {sms!r}")
    before = _carveout
    if sms != before:
        callplan.clear()
        _carveout = sms
    try:
        yield
    finally:
        if _carveout != before:
            callplan.clear()
            _carveout = before


class TmaUnfit(ValueError):
    """TMA cannot read these operands for wgmma (unaligned rows, or MN-major tf32); the
    SM80 kernel (gemm.tensorcore) can."""


def _variant(config=None, dtype="bfloat16", a_major="K", b_major="K", out_dtype="float32",
             vec_c=True):
    cfg = config or HopperConfig(dtype=dtype)
    if cfg.dtype != dtype:
        cfg = replace(cfg, dtype=dtype, bK=None)
    return HopperVariant(kernel_config(cfg), a_major, b_major, out_dtype,
                         vec_c and not cfg.swap_ab, cfg.split_k > 1, cfg.swap_ab,
                         _tma_epilogue(cfg, cfg.split_k, cfg.swap_ab))


def _tma_epilogue(cfg, split, columns):
    """Whether a call of ``cfg`` in ``split`` K ranges, its C stored by ``columns`` or not,
    takes the TMA epilogue (where TMA can write its out; its pieces are 32 or 64 columns, so
    not for tiles narrower than 64)."""
    return (cfg.epilogue == "tma" and split == 1 and not columns and cfg.schedule != "plain"
            and cfg.bN >= 64)


def kernel_config(cfg):
    """``cfg`` with the fields that are not the compiled kernel's at their defaults: the
    number of K ranges (a run-time argument), swap_ab (the variant's ``c_columns``) and the
    epilogue (its ``tma_store``)."""
    return replace(cfg, split_k=1, swap_ab=False, epilogue="registers")


def hopper_function(variant):
    """The variant's kernel as a Python function for ``cuda.jit``
    (:func:`gemm.hopper.cute_gemm.kernel_function`)."""
    from .cute_gemm import kernel_function      # gemm.cute: imported when a kernel is made
    return kernel_function(variant)


@lru_cache(maxsize=None)
def hopper_kernel(variant):
    """The variant's numba ``cuda.jit`` kernel (launch bounds: its threads and blocks per
    SM; none in the simulator)."""
    from numba import cuda      # only to compile: a loaded kernel does without numba
    cfg = variant.config
    if simulator_active():
        return cuda.jit(variant.signature)(hopper_function(variant))
    return cuda.jit(variant.signature, launch_bounds=(cfg.threads, cfg.blocks_per_sm))(
        hopper_function(variant))


def ptx(config=None, dtype="bfloat16", a_major="K", b_major="K", out_dtype="float32"):
    """The kernel's PTX for sm_90a (no GPU needed): ``config`` a :class:`HopperConfig` (None:
    the default for ``dtype``; its split_k > 1: the split-K kernel), ``dtype`` "bfloat16",
    "float16" or "tfloat32", the majors of X and Y ("K" or "MN"), ``out_dtype`` "float32",
    "bfloat16" or "float16"."""
    from numba import cuda      # (as in hopper_kernel)
    v = _variant(config, dtype, a_major, b_major, out_dtype)
    text, _ = cuda.compile_ptx(hopper_function(v), v.signature, cc=(9, 0, "a"),
                               launch_bounds=(v.config.threads, v.config.blocks_per_sm))
    return text


@lru_cache(maxsize=None)
def hopper_binary(variant):
    """The variant's compiled kernel for the current device (its cubin file when an earlier
    call or process compiled it)."""
    name = binary_name("hopper", (variant, False))
    return load_or_compile(name, lambda: compiled_binary(hopper_kernel(variant),
                                                         variant.signature))


def compile_variant(variant):
    """Compile a variant (its cubin file), e.g. in a child process before tuning."""
    hopper_binary(variant)


def hopper_supported(device: int = 0) -> bool:
    """Whether device ``device`` runs this kernel (compute capability 9.x)."""
    return device_properties(device or 0)[1][0] == 9


# --- the call ------------------------------------------------------------------------------

_SCALARS = ("uint32",) * 10 + ("float32",) * 2
_launchers = {}


def _launcher(v):
    # arrays: the three maps, C, the workspace, the bias (which the kernel indexes as an
    # array: its elements' size is its stride) and FP8's scales of X and Y
    sizes = (4,) * 5 + (4 if v.bias_dtype == "float32" else 2, 4, 4)
    return kept_launcher(_launchers, v, hopper_kernel, hopper_binary, v.shared_bytes,
                         len(sizes), sizes, _SCALARS, free_scalars=2)


class _Call:
    """A checked call: the variant, the tensor maps, the scalars and the grid. ``scaled``:
    an FP8 product's ``(scale_a, scale_b, promote, formats)`` (:mod:`gemm.scaled`); its
    scales' Operands are ``scales`` (A's, B's: the kernel's Y's and X's where ``swapped``)."""

    def __init__(self, A, B, out, alpha, beta, config, out_dtype, caller, tf32x3=False,
                 bias=None, activation=None, scaled=None):
        sim = simulator_active()
        activation = check_activation(activation, caller)
        fused = bias is not None or activation is not None or scaled is not None
        if config is not None and not isinstance(config, HopperConfig):
            raise TypeError(f"{caller}: config must be a HopperConfig, got {config!r}")
        check_scalars(alpha, beta, caller)
        a, b, shape = product_operands(caller, A, B, sim)
        (m, k), n = a.shape, b.shape[1]
        self.scales = None
        if scaled is not None:      # FP8: both K-major, as wgmma reads 8-bit operands
            types = fp8_dtypes(a, b, scaled[3], caller)
            dtype = types[0]
            if (a.unit_mode, b.unit_mode) != (1, 0):
                raise ValueError(f"{caller}: FP8 operands must be K-major: A row-major and B "
                                 "column-major (e.g. the transpose of a row-major (N, K) "
                                 "matrix); wgmma transposes no 8-bit operand")
            scale, *self.scales = scale_operands(scaled[0], scaled[1], m, n, k, BLOCK, caller,
                                                 sim)
        else:
            dtype = operand_dtype(a, b, (config or HopperConfig()).dtype, caller)
        out_dtype, self.out, c, nb = checked_out(caller, out, out_dtype, a, b, shape, beta, sim)
        eb = _ELEMENT_BYTES[dtype]
        sms = max(1, (SIM_SMS if sim else sm_count(c.device)) - _carveout)
        # swapped, A (row-major: K-major) is the kernel's Y, which narrow tiles need
        narrow = a.unit_mode == 1 and dtype != "tfloat32"
        if config is not None:      # (FP8's kernel takes no swapped operands)
            cols = config.swap_ab and scaled is None
        elif fused and eb != 2:     # (FP8's kernel swaps nothing; tf32's fused swaps untimed)
            cols = False
        else:                       # few rows (a decode step): B's columns on the tile's rows
            cols = (c.unit_mode == 1 and nb == 1
                    and (x3_swaps(m, n) if tf32x3
                         else swaps(m, n, sms, narrow) or pairs(m, n, k, sms, narrow))
                    and (dtype != "tfloat32" or (a.unit_mode, b.unit_mode) == (1, 0)))
        ldc = c.strides[0] if c.unit_mode == 1 else c.strides[1]
        if (c.unit_mode == 1) != cols:      # C = A B, X = A, Y = B^T
            x, y, mm, nn = a, b, m, n
            xk, yk = a.unit_mode == 1, b.unit_mode == 0
        else:                               # C^T = B^T A^T, X = B^T, Y = A
            x, y, mm, nn = b, a, n, m
            xk, yk = b.unit_mode == 0, a.unit_mode == 1
        majors = ("K" if xk else "MN", "K" if yk else "MN")
        for name, op in (("A", a), ("B", b)):
            ld = op.strides[1 - op.unit_mode]
            if op.ptr % 16 or (ld * eb) % 16 and op.shape[1 - op.unit_mode] > 1:
                raise TmaUnfit(f"{caller}: TMA needs {name}'s address and leading dimension "
                                 f"({ld} elements) to be multiples of 16 bytes")
            if (op.bstride * eb) % 16:
                raise TmaUnfit(f"{caller}: TMA needs {name}'s matrices to be a multiple of 16 "
                               f"bytes apart, not {op.bstride} elements")
        if dtype == "tfloat32" and "MN" in majors:
            raise TmaUnfit(f"{caller}: float32 (tf32) operands must be K-major for wgmma: "
                             "A row-major and B column-major (for a row-major out)")
        pair = 1 if out_dtype == "float32" else 2       # 8- or 4-byte stores need even ldc
        vec = (c.ptr % (8 // pair) == 0 and (ldc % 2 == 0 or mm == 1) and not cols
               and c.bstride % 2 == 0)          # (each matrix of a batch aligned too)
        if tf32x3 and dtype != "tfloat32":
            raise TypeError(f"{caller}: tf32x3 takes float32 operands, not {dtype}")
        if config is None:
            cfg = (swapped_config(dtype, mm, nn, k, nb, sms, narrow) if cols
                   else default_config(dtype, mm, nn, k, nb, sms))
            if tf32x3:
                cfg = x3_default(cfg, mm, nn, k, nb, sms)
        else:
            cfg = replace(config, dtype=dtype, bK=None) if config.dtype != dtype else config
            if tf32x3 and not cfg.tf32x3:
                cfg = x3_config(cfg)
        if fused:                   # split-K's reduction adds no bias, activation or scales
            cfg = replace(cfg, split_k=1)
            if config is None:      # the default's tiles, cooperative
                cfg = replace(cfg, schedule="cooperative", delay_release=0)
        fp8 = {}
        if scaled is not None:      # X's type first; promotion needs room for the sum
            blocks = scale == "blocks"          # (applied as each k-tile is promoted)
            if blocks and x is not a:
                raise ValueError(f"{caller}: block scales need a row-major out")
            mn = blocks and self.scales[0].unit_mode == 0 and m > 1
            fp8 = dict(b_dtype=types[1] if x is a else types[0], scale=scale,
                       promote=bool(scaled[2]) or blocks, scale_a_mn=mn,
                       # (the producer copies a slot's A scales: 16-byte aligned runs)
                       stage_scales=mn and m % 4 == 0 and self.scales[0].ptr % 16 == 0)
            cfg = replace(cfg, dtype=types[0] if x is a else types[1])
            if blocks and BLOCK % cfg.bN:       # a tile inside one block of B's columns
                if config is not None:
                    raise ValueError(f"{caller}: block scales need tiles inside one "
                                     f"{BLOCK}-column block of B (bN dividing {BLOCK}), not "
                                     f"bN={cfg.bN}")
                cfg = replace(cfg, bN=BLOCK, stages=6)
            if fp8["promote"] and cfg.bM * cfg.bN // 128 > PROMOTE_ACCUMULATORS:
                if config is not None:
                    raise ValueError(f"{caller}: promoted sums (use_fast_accum=False) take "
                                     f"at most {PROMOTE_ACCUMULATORS} accumulators per thread "
                                     f"(bM x bN / 128); the config has {cfg.bM} x {cfg.bN}")
                cfg = replace(cfg, bN=PROMOTE_ACCUMULATORS * 128 // cfg.bM, stages=6)
            if not fp8["promote"] and config is None:
                cfg = fp8_fast_config(cfg, fp8_few_rows(mm, nn, nb, sms))
            if fp8["stage_scales"] and config is None:
                # a slot fewer than promotion's 6 leaves room for the TMA epilogue beside
                # the staged scales (from registers it ran 10-25% slower: RESULTS.md)
                cfg = replace(cfg, stages=min(cfg.stages, 5))
        if cfg.bN < 64 and not yk:
            raise ValueError(
                f"{caller}: tiles of {cfg.bN} columns need {'B' if y is b else 'A'}, the "
                f"operand on the tile's columns, contiguous along K")
        tiles = nb * -(-mm // cfg.tile_m) * -(-nn // cfg.bN)
        k_tiles = -(-k // cfg.bK)
        split, _ = splitk.ranges(k_tiles, cfg.split_k)
        self.split, self.ldw = split, nn + nn % 2             # even ldw: paired f32 stores
        if split > 1 and split * nb * mm * self.ldw >= 2 ** 31:
            raise ValueError(f"{caller}: split_k={split} needs a workspace of "
                             f"{split * nb * mm * self.ldw} floats; at most 2**31 - 1")
        ob = _OUT_BYTES[out_dtype]
        tma = (_tma_epilogue(cfg, split, cols) and c.ptr % 16 == 0
               and ((ldc * ob) % 16 == 0 or mm == 1) and (c.bstride * ob) % 16 == 0)
        self.bias = None
        bias_of_rows = False                # a bias per row of the kernel's C
        if bias is not None:
            self.bias, per_row = bias_operand(bias, m, n, caller, sim,
                                              dtype if eb == 2 else None)
            check_same_device(caller, (("A", a), ("bias", self.bias)))
            bias_of_rows = per_row == (x is a)      # C^T's rows are C's columns
        epilogue = dict(bias="none" if bias is None else "rows" if bias_of_rows else "columns",
                        bias_dtype=self.bias.dtype if bias is not None else "float32",
                        activation=activation or "none")
        v = HopperVariant(kernel_config(cfg), *majors, out_dtype, vec, split > 1, cols, tma,
                          **epilogue, **fp8)
        while (config is None and v.tma_store and cfg.stages > 4
               and v.block_shared_bytes > DYNAMIC_SHARED_LIMIT):
            # a slot fewer leaves room for the TMA epilogue's staging (from registers the
            # epilogue ran 10-25% slower: benchmarks/RESULTS.md, "FP8 products with scales")
            cfg = replace(cfg, stages=cfg.stages - 1)
            v = replace(v, config=kernel_config(cfg))
        if v.block_shared_bytes > DYNAMIC_SHARED_LIMIT:  # no room for the staging
            v = replace(v, tma_store=False)
        self.variant = v
        plan = hopper_copies(v)
        vt = {"bfloat16": "bf16", "float16": "f16", "tfloat32": "f32", "float32": "f32",
              "float8_e4m3fn": "u8", "float8_e5m2": "u8"}
        # per operand: (copy, dims, byte strides, value type); the maps are made per address.
        # 3-D: (contiguous, other, matrices); one matrix for an operand the products share.
        self.map_specs = tuple(
            (copy, ((k, ext) if kmaj else (ext, k)) + (op.batch if op.bstride else 1,),
             _byte_strides(op, ext if kmaj else k, eb), vt[dtype])
            for copy, op, ext, kmaj in ((plan.copy_x, x, mm, xk), (plan.copy_y, y, nn, yk)))
        for spec, op in zip(self.map_specs, (x, y)):     # what TMA takes, the driver encodes
            try:
                _check_spec(spec, op.ptr, eb, caller)
            except ValueError as e:
                raise TmaUnfit(f"{caller}: TMA cannot read {'A' if op is a else 'B'}: "
                               f"{e}") from None
        if v.tma_store:             # C's map, (columns, rows, matrices), for the TMA stores
            spec = (plan.copy_c, (nn, mm, nb), _byte_strides(c, mm, ob), vt[out_dtype])
            try:
                _check_spec(spec, c.ptr, ob, caller)
                self.map_specs += (spec,)
            except ValueError:      # stores from registers
                self.variant = v = replace(v, tma_store=False)
        self.swapped = (c.unit_mode == 1) == cols        # X is B^T
        self.ops = (x, y)
        self.c = c
        self.shape = (mm, nn, ldc, nb, c.bstride)
        self.scalars = (mm, nn, k, ldc, self.ldw, nb, c.bstride, int(x.bstride > 0),
                        int(y.bstride > 0), split, float(alpha), float(beta))
        self.grid = (max(1, min(tiles * split, sms * cfg.blocks_per_sm)), 1, 1)
        self.stream_of = a


def _byte_strides(op, lines, eb):
    """A 3-D tensor map's byte strides for operand ``op`` whose contiguous axis has ``lines``
    lines: between lines (for a single line, never used, its bytes rounded up to 16), and
    between matrices (for a single matrix any multiple of 16 bytes past its end: the map has
    one matrix)."""
    if lines == 1:
        ld = -(-(op.shape[op.unit_mode] * eb) // 16) * 16
    else:
        ld = op.strides[1 - op.unit_mode] * eb
    return ld, op.bstride * eb if op.bstride else -(-(ld * lines) // 16) * 16


def _check_spec(spec, address, element_bytes, caller):
    """ValueError unless the driver encodes the map of ``spec`` ((copy, dims, byte strides,
    value type), as ``_Call.map_specs``) at ``address`` (:func:`gemm.tma.check_encodable`)."""
    copy, dims, strides, _ = spec
    check_encodable(dims, strides, copy.box, element_bytes, address, copy.swizzle,
                    caller=caller)


def plan_call(A: Any, B: Any, out: Any = None, *, config: Optional[HopperConfig] = None,
              out_dtype: Optional[str] = None, tf32x3: bool = False,
              bias: Any = None, activation: Optional[str] = None) -> HopperVariant:
    """The :class:`HopperVariant` a call with these arguments compiles."""
    return _Call(A, B, out, 1.0, 0.0, config, out_dtype, "plan_call", tf32x3, bias,
                 activation).variant


def hopper_matmul(A: Any, B: Any, out: Any = None, *, alpha: float = 1.0, beta: float = 0.0,
                  config: Optional[HopperConfig] = None, out_dtype: Optional[str] = None,
                  stream: Any = None, tf32x3: bool = False,
                  bias: Any = None, activation: Optional[str] = None) -> Any:
    """``out = activation(alpha * A @ B + beta * out + bias)`` with the Hopper kernel
    (compute capability 9.x).

    Arguments as :func:`gemm.tensorcore.tensorcore_matmul`; ``config`` a
    :class:`HopperConfig` (None: the default; its dtype is replaced by the operands'). TMA's
    rules (16-byte aligned addresses and leading dimensions; K-major tf32) raise ValueError.
    ``tf32x3``: float32 operands by 3xTF32 (about float32's accuracy; the config's tiles, or
    the default's, through :func:`x3_config`). The config's tiles, ring, consumers,
    epilogue, split-K, swap_ab and schedule, the default's chosen by :mod:`gemm.hopper.rules`;
    with a fused epilogue or FP8, no split-K, and by default the default's tiles cooperative,
    but FP8's fast calls (:func:`fp8_fast_config`); FP8 and tf32 fused calls do not swap A
    and B, 16-bit fused calls as the rules swap calls without an epilogue. A fused
    epilogue (:mod:`gemm.epilogue`) runs on that kernel: ``bias`` a vector of bfloat16,
    float16 or float32 on A's device, one value per column of out (shape (N,) or (1, N)) or
    per row ((M, 1)), added to every matrix of a batch; ``activation`` one of
    ``gemm.epilogue.ACTIVATIONS`` (None: none), applied last, in float32, before out's
    rounding.
    """
    return launch_matmul(A, B, out, alpha, beta, config, out_dtype, "hopper_matmul", stream,
                         tf32x3, bias, activation)[0]


def launch_matmul(A, B, out, alpha, beta, config, out_dtype, caller, stream=None,
                  tf32x3=False, bias=None, activation=None, scaled=None):
    """:func:`hopper_matmul` returning ``(out, plan)``: ``plan(addresses, stream, alpha,
    beta)`` launches again on operands at the same addresses (the tensor maps hold them):
    A's, B's and C's, the bias's after them where the call has one, and an FP8 product's
    two scales' last (``scaled``: :class:`_Call`'s). A plan keeps its launches bound and
    the tensor maps of the addresses it has seen, so a repeated call does little host
    work."""
    call = _Call(A, B, out, alpha, beta, config, out_dtype, caller, tf32x3, bias,
                 activation, scaled)
    if simulator_active():
        _simulate(call, float(alpha), float(beta))
        return call.out, None
    v = call.variant
    specs = call.map_specs
    seen = {}                       # (X, Y, C addresses) -> their tensor maps' addresses

    def maps(key, stream):
        """The kernel's three maps of ``key`` (X's, Y's and, with the TMA epilogue, C's
        address): X's, Y's and C's (X's again without the TMA epilogue). Kept for later
        calls once written outside a CUDA graph capture."""
        made = [device_map(copy, ptr, dims, strides, vt, stream)
                for (copy, dims, strides, vt), ptr in zip(specs, key)]
        got = tuple(ptr for ptr, _ in made)
        got = got + got[:3 - len(got)]
        if all(ready for _, ready in made):
            if len(seen) >= 64:
                seen.clear()
            seen[key] = got
        return got

    # what the plan needs of the call (the call itself holds the caller's arrays)
    mm, nn, ldc, nb, sc = call.shape
    split, ldw, grid, scalars = call.split, call.ldw, call.grid, call.scalars
    size = split * nb * mm * ldw                  # the split-K workspace's floats
    device, kind, span = call.c.device, call.c.kind, call.c.span
    tma_store, swapped, result = v.tma_store, call.swapped, call.out
    has_bias, has_scales = call.bias is not None, call.scales is not None
    bias_span = call.bias.span if has_bias else span
    scale_spans = (span, span)      # X's, Y's
    if has_scales:
        scale_spans = tuple(op.span for op in call.scales[::-1 if swapped else 1])

    def first(key, c, bias, scales, stream, alpha, beta, u):
        """Bind the launches of variant ``u`` (kernel, and with split-K the reduction) with a
        first call."""
        m = [(ptr, 16) for ptr in seen.get(key) or maps(key, stream)]
        out = (c, span)
        w, owner = out, None
        if split > 1:
            ptr, owner = splitk.workspace(4 * size, stream, device, kind)
            w = (ptr, size)
        arrays = [*m, out, w, (bias, bias_span), *zip(scales, scale_spans)]
        kernel = _launcher(u)(grid, (u.config.threads, 1, 1), stream, arrays,
                              scalars[:-2] + (alpha, beta), u.shared_bytes)
        reduce = None
        if split > 1:
            steps = (1, ldc) if u.c_columns else (ldc, 1)
            reduce = splitk.reduce_splits(u.out_dtype, w, out, mm, nn, ldw, nb, split,
                                          *steps, sc, alpha, beta, stream)
        del owner                   # the launches are enqueued
        return kernel, reduce

    bound = {}                      # beta != 0 -> the variant's (kernel, reduce), bound once
    with_beta = _with_beta(v) if tma_store else v     # the variant of calls with beta != 0

    def plan(addresses, stream, alpha, beta):
        a, b, c = addresses[:3]
        bias = addresses[3] if has_bias else c      # (a kernel without one is handed C)
        scales = addresses[-2:] if has_scales else (c, c)
        x, y = (b, a) if swapped else (a, b)
        if swapped:
            scales = scales[::-1]
        key = (x, y, c) if tma_store else (x, y)
        reads_c = beta != 0
        got = bound.get(reads_c)
        if got is None:
            bound[reads_c] = first(key, c, bias, scales, stream, alpha, beta,
                                   with_beta if reads_c else v)
            return
        kernel, reduce = got
        m = seen.get(key) or maps(key, stream)
        more = (bias, *scales)
        if reduce is None:
            kernel((*m, c, c, *more), stream, alpha, beta)
            return
        w, owner = splitk.workspace(4 * size, stream, device, kind)
        kernel((*m, c, w, *more), stream, alpha, beta)
        reduce((w, c), stream, alpha, beta)
        del owner                   # the launches are enqueued

    x, y = (op.ptr for op in call.ops)
    plan(((y, x, call.c.ptr) if swapped else (x, y, call.c.ptr))
         + ((call.bias.ptr,) if has_bias else ())
         + (tuple(op.ptr for op in call.scales) if has_scales else ()),
         stream_handle(stream, call.stream_of, caller), float(alpha), float(beta))
    del call
    return result, plan


def _with_beta(v):
    """The variant a call of ``v`` with beta != 0 runs: the TMA epilogue stages alpha * acc
    only, so such calls store from registers (reading C)."""
    return replace(v, tma_store=False)


def _simulate(call, alpha, beta):
    """Run a checked call in numba's simulator: its tensor maps made by
    ``gemm.arch.sim_sm90.sim_tensor_map`` over the operands' host bytes, the kernel's
    dynamic shared memory as on the GPU, then (split-K) the reduction."""
    from ..arch.sim_sm90 import sim_tensor_map     # the simulator's twins: only in the simulator
    v = call.variant
    if beta != 0 and v.tma_store:
        v = _with_beta(v)
    sizes = (_ELEMENT_BYTES[v.config.dtype],) * 2 + (_OUT_BYTES[v.out_dtype],)
    maps = [sim_tensor_map(kernel_buffer(op, np.uint8), 0, replace(copy, dims=dims,
                                                                     strides=strides), size)
            for (copy, dims, strides, _), op, size in zip(call.map_specs,
                                                          call.ops + (call.c,), sizes)]
    maps += maps[:3 - len(maps)]
    # C as the simulator's device array over the out's memory: a numpy argument would be
    # copied in and back, undoing the TMA stores (which write the out's memory directly)
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray    # (as sim_tensor_map)
    c = FakeCUDAArray(kernel_buffer(call.c, np.float32 if v.out_dtype == "float32"
                                    else np.uint16))
    mm, nn, ldc, nb, sc = call.shape
    w = np.zeros(max(1, call.split * nb * mm * call.ldw), np.float32)
    # the bias (the kernel reads a 16-bit one as its bits), and the scales of X and Y
    extra = [np.zeros(1, np.float32) if call.bias is None else kernel_buffer(
        call.bias, np.float32 if v.bias_dtype == "float32" else np.uint16)]
    if call.scales is None:
        extra += [np.zeros(1, np.float32)] * 2
    else:
        extra += [kernel_buffer(op, np.float32)
                  for op in call.scales[::-1 if call.swapped else 1]]
    _launcher(v)(call.grid, (v.config.threads, 1, 1), 0, [*maps, c, w, *extra],
                 call.scalars[:-2] + (alpha, beta), v.shared_bytes)
    if call.split > 1:
        steps = (1, ldc) if v.c_columns else (ldc, 1)
        splitk.reduce_splits(v.out_dtype, w, c, mm, nn, call.ldw, nb, call.split, *steps, sc,
                             alpha, beta)
