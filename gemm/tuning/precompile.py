"""Compile the named kernels for every operand major and copy width, in parallel processes.

A new kernel variant takes numba a few seconds to compile; its cubin is kept in
``gemm.call.binary.cache_dir()``, so a later call or process loads it in a
millisecond. ``python -m gemm precompile`` fills that cache using every core,
before tests or benchmarks that touch many variants: every SIMT variant, and on a GPU the
tensor-core kernel in its default configuration for each operand type and pair of majors
(with 16-byte-aligned operands, the usual case), and on a GPU of compute capability 9.x the
Hopper kernel's (:func:`hopper_variants`), which ``gemm.matmul`` runs there. Configurations
found by ``python -m gemm tune`` were compiled while tuning.

The workers are spawned, not forked: planning the tensor-core variants touches the GPU, and
a forked child of a process holding a CUDA context cannot use CUDA.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

import numpy as np

from gemm import api, hopper, simt, tensorcore as tc
from gemm._env import simulator_active
from gemm.arch.smem import DYNAMIC_SHARED_LIMIT
from gemm.tuning import autotune

__all__ = ["variants", "tensorcore_variants", "hopper_variants", "hopper_x3_variants",
           "precompile"]


def variants(names: Optional[Sequence[str]] = None) -> list:
    """(kernel name, A unit mode, B unit mode, A vector, B vector) for every distinct kernel."""
    out = set()
    for name in names or api.KERNELS:
        cfg = api.kernel_config(name)
        for a_unit in (0, 1):
            for b_unit in (0, 1):
                for va in (1, 2, 4):
                    for vb in (1, 2, 4):
                        out.add((name, a_unit, b_unit,
                                 simt.copy_vector(cfg, a_unit, cfg.bM, va),
                                 simt.copy_vector(cfg, b_unit, cfg.bN, vb)))
    return sorted(out)


# Device element types of each tensor-core dtype (bfloat16 as its bits: numba has no bfloat16).
_ELEMENT = {"bfloat16": "uint16", "float16": "float16", "tfloat32": "float32"}


def tensorcore_variants(dtypes: Optional[Sequence[str]] = None) -> list:
    """``gemm.tensorcore.plan_call`` of the default TensorCoreConfig for each dtype (default
    all of ``gemm.tensorcore.DTYPES``; one whose default config does not construct is left
    out) and each of the four (A, B) majors, on 64x64 operands (16-byte aligned, as large ones
    usually are). [] in the simulator: nothing to compile."""
    if simulator_active():
        return []
    from numba import cuda      # on a GPU only: importing this module does without numba
    out = []
    for dtype in dtypes or tc.DTYPES:
        if dtype not in _ELEMENT:
            raise ValueError(f"tensorcore_variants: no device element type for {dtype!r}")
        try:
            cfg = tc.TensorCoreConfig(dtype=dtype)
        except ValueError:          # no default configuration for this type
            continue
        square = cuda.device_array((64, 64), np.dtype(_ELEMENT[dtype]))
        for A in (square, square.T):
            for B in (square, square.T):
                out.append(tc.plan_call(A, B, config=cfg))
    return list(dict.fromkeys(out))


def hopper_variants(dtypes: Optional[Sequence[str]] = None) -> list:
    """On a GPU of compute capability 9.x, the default :class:`gemm.hopper.HopperConfig` of
    each dtype for every pair of majors it takes (tf32: K-major only), with a float32 out and
    one of the input type, in the default's tiles (gemm.hopper.default_config: 2 x 64 x 256
    and 2 x 64 x 128 with 3 slots, 2 x 64 x 128 with 6 and 2 x 64 x 64 with 8) and
    the swapped tiles of few rows (gemm.hopper.swapped_config: 64 columns, and for 16-bit
    types 8, 16 and 32 with a K-major Y, a row-major A), with and without split-K, and with
    two consumers unsplit, the unsplit default tiles with both epilogues (TMA stores; from
    registers for beta != 0); [] elsewhere and in the simulator."""
    if simulator_active():
        return []
    if not hopper.hopper_supported():
        return []
    out = []
    for dtype in dtypes or hopper.DTYPES:
        wide = hopper.kernel_config(hopper.HopperConfig(dtype=dtype))
        tf32 = dtype == "tfloat32"
        majors = [("K", "K")] if tf32 else [(a, b) for a in hopper.MAJORS for b in hopper.MAJORS]
        widths = [None] + ([] if tf32 else [8, 16, 32])
        swapped = [hopper.kernel_config(hopper.swapped_tiles(dtype, rows)) for rows in widths]
        two = [hopper.kernel_config(hopper.swapped_tiles(dtype, rows, consumers=2))
               for rows in widths]
        tiles = [wide, replace(wide, bN=128), replace(wide, bN=128, stages=6),
                 replace(wide, bN=64, stages=8)]
        for cfg, cols, splits in ([(t, False, True) for t in tiles]
                                  + [(t, True, True) for t in swapped]
                                  + [(t, True, False) for t in two]):
            kinds = ([(False, False)] + ([(True, False)] if splits else [])
                     + ([] if cols else [(False, True)]))
            for a, b in majors:
                if cfg.bN < 64 and b != "K":            # narrow tiles need a K-major Y
                    continue
                for out_dtype in ("float32",) if tf32 else ("float32", dtype):
                    for split, tma in kinds:        # (split-K, the TMA epilogue)
                        out.append(hopper.HopperVariant(cfg, a, b, out_dtype, not cols,
                                                        split, cols, tma))
    return out


def hopper_x3_variants() -> list:
    """On a GPU of compute capability 9.x, the tf32x3 variants (float32 in and out, A and B
    K-major) of the tiles the rules give (gemm.hopper.x3_tiles of the tf32 tiles of
    :func:`hopper_variants`, and of the swapped tiles for 8, 16, 32 and 64 rows), with and
    without split-K, the unswapped unsplit ones with both epilogues where the TMA stores'
    staging fits; [] elsewhere and in the simulator."""
    if simulator_active():
        return []
    if not hopper.hopper_supported():
        return []
    base = hopper.HopperConfig(dtype="tfloat32")
    unswapped = [hopper.x3_tiles(replace(base, bN=bn, stages=s), bn)
                 for bn, s in ((256, 3), (128, 6), (64, 8))]
    swapped = [hopper.x3_tiles(hopper.swapped_tiles("tfloat32"), rows)
               for rows in (8, 16, 32, 64)]
    out = []
    for cfg, cols in [(t, False) for t in unswapped] + [(t, True) for t in swapped]:
        cfg = hopper.kernel_config(cfg)
        for split, tma in [(False, False), (True, False)] + ([] if cols else [(False, True)]):
            v = hopper.HopperVariant(cfg, "K", "K", "float32", not cols, split, cols, tma)
            if v.block_shared_bytes <= DYNAMIC_SHARED_LIMIT:
                out.append(v)
    return out


def _compile(job):
    kind, variant = job
    if kind in ("tensorcore", "hopper"):
        (hopper if kind == "hopper" else tc).compile_variant(variant)
        return job
    name, a_unit, b_unit, va, vb = variant
    make = simt.simt_kernel if simulator_active() else simt.simt_binary
    make(api.kernel_config(name), a_unit, b_unit, va, vb)
    return job


def precompile(names: Optional[Sequence[str]] = None, workers: Optional[int] = None,
               progress: bool = True, tensorcore: bool = True) -> int:
    """Compile every variant of the named SIMT kernels (all by default) and, when
    ``tensorcore``, the :func:`tensorcore_variants`, :func:`hopper_variants` and
    :func:`hopper_x3_variants`; returns how many."""
    todo = [("simt", v) for v in variants(names)]
    if tensorcore:
        todo += [("tensorcore", v) for v in tensorcore_variants()]
        todo += [("hopper", v) for v in hopper_variants() + hopper_x3_variants()]
    failed = autotune._compile_all(todo, workers, progress, compile_fn=_compile)
    if failed:
        raise RuntimeError(f"precompile: {len(failed)} of {len(todo)} variants failed; first: "
                           f"{next(iter(failed.items()))}")
    return len(todo)
