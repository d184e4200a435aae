"""gemm.arch: the instruction layer (CuTe's ``arch/``), one name per PTX operation.

On a GPU (or when compiling PTX on a CPU) every name is a numba-cuda intrinsic from
``gemm.arch.ptx`` emitting inline PTX; with ``NUMBA_ENABLE_CUDASIM=1`` it is the pure-Python
twin of the same name from ``gemm.arch.sim``, with the same signature and semantics, so a kernel
written against ``gemm.arch`` runs in both. ``IMPLEMENTATION`` says which was picked
("ptx" or "sim"); the choice is made once, at import, as numba makes its own.

The operations (see ``gemm.arch.ptx`` for the exact semantics of each):

- cp.async: ``cp_async_ca(dst, di, src, si, nbytes)`` (4/8/16 B), ``cp_async_cg`` (16 B), the
  zero-fill forms ``cp_async_ca_zfill`` / ``cp_async_cg_zfill(..., src_bytes)``,
  ``cp_async_commit()``, ``cp_async_wait(n)``, ``cp_async_wait_all()``;
- ``ldmatrix_x1/x2/x4[_trans](smem, idx)`` -> tuple of uint32 registers;
- ``mma_m16n8k16_f32_bf16``, ``mma_m16n8k16_f32_f16``, ``mma_m16n8k16_f16_f16``,
  ``mma_m16n8k8_f16_f16``, ``mma_m16n8k8_f32_tf32`` -> tuple of accumulators;
- 128/64-bit vector access: ``ld_v4_b32/f32``, ``st_v4_b32/f32``, ``ld_v2_*``, ``st_v2_*``;
- ``shfl_xor_f32(x, lane_mask)``: a butterfly shuffle over the full warp; ``warp_uniform(x)``:
  lane 0's integer in every lane (ptxas then treats it as warp-uniform); ``syncwarp()``;
  ``tanh_approx_f32(x)``, ``ex2_approx_f32(x)``, ``rcp_approx_f32(x)`` (``tanh.approx.f32``,
  ``ex2.approx.ftz.f32``, ``rcp.approx.ftz.f32``);
- a tile-level instruction (one call, a whole plan of mma.sync instructions, unrolled from a
  static plan; see ``gemm.arch.tile``): ``mma_tile``;
- conversions: ``pack_b16x2`` (= ``pack_bf16x2`` = ``pack_f16x2``), ``unpack_b16x2``,
  ``cvt_rn_bf16x2_f32(lo, hi)``, ``cvt_rn_f16x2_f32(lo, hi)``, ``cvt_rn_bf16_f32``,
  ``cvt_rn_f16_f32``, ``cvt_rna_tf32_f32``, ``bf16_to_f32``, ``f16_to_f32``,
  ``bf16x2_to_f32``, ``f16x2_to_f32``, ``float_as_uint32``, ``uint32_as_float``,
  ``cvt_rn_satfinite_e4m3x2_f32(lo, hi)``, ``cvt_rn_satfinite_e5m2x2_f32(lo, hi)`` (two FP8
  in a uint16, sm_89).

Files: ``ptx`` (cp.async, ldmatrix, mma, vector access, shuffles), ``ptx_convert``
(conversions, re-exported by ``ptx``), ``tile`` (tile-level instructions), ``tile_plan``
(their plans and the instruction tables, pure Python), ``_lowering`` (typing checks,
addresses, inline asm), ``sim`` and ``sim_tile`` (the twins).
- Hopper's (``gemm.arch.sm90``, twins in ``gemm.arch.sim_sm90``, ``SM90_NAMES``):
  ``wgmma_tile``, ``smem_desc``, ``wgmma_fence/commit/wait``, ``mbarrier_init/arrive/
  arrive_expect_tx/wait``, ``fence_mbarrier_init``, ``fence_proxy_async``,
  ``tma_load_2d/3d``, ``tma_store_2d/3d``, ``bulk_load``, ``bulk_commit``,
  ``bulk_wait_read``, ``bulk_wait``, ``named_barrier``, ``setmaxnreg_inc/dec``, ``elect_one``,
  ``shared_offset_of``, ``split_tf32_tile``, ``clear_nonfinite_tile`` and
  ``named_barrier_or`` (3xTF32's split).

Tools beside them:
``gemm.arch.inspect`` (PTX and ``ptxas -v`` resource usage without a GPU) and
``gemm.arch.smem`` (opting a kernel into more than 48 KiB of dynamic shared memory).

>>> IMPLEMENTATION in ("ptx", "sim") and len(__all__) > 40
True
"""

from gemm._env import simulator_active
from gemm.arch import sim as _sim, sim_tile as _sim_tile     # pure Python: the names

IMPLEMENTATION = "sim" if simulator_active() else "ptx"
if IMPLEMENTATION == "sim":     # the simulator's blocks driven by events, not by polling
    from gemm.arch.sim_threads import install as _install_sim_threads
    _install_sim_threads()
# gemm.arch.sm90's names (it imports numba: named here, imported on first use)
SM90_NAMES = ("wgmma_fence", "wgmma_commit", "wgmma_wait", "fence_proxy_async", "smem_desc",
              "wgmma_tile", "WGMMA_TYPES", "fence_mbarrier_init", "mbarrier_init",
              "mbarrier_arrive", "mbarrier_arrive_expect_tx", "mbarrier_wait", "tma_load_2d",
              "tma_load_3d", "tma_store_2d", "tma_store_3d", "bulk_load", "bulk_commit",
              "bulk_wait_read", "bulk_wait", "named_barrier", "setmaxnreg_inc",
              "setmaxnreg_dec", "elect_one", "shared_offset_of", "split_tf32_tile",
              "clear_nonfinite_tile", "named_barrier_or")
__all__ = list(_sim.__all__) + list(_sim_tile.__all__) + list(SM90_NAMES)


def __getattr__(name):
    # The instructions are imported on first use: the PTX layer imports numba, which a process
    # that only launches compiled kernels (gemm.call.binary) does without.
    if name not in __all__:
        raise AttributeError(f"module 'gemm.arch' has no attribute {name!r}")
    if IMPLEMENTATION == "sim":
        from gemm.arch import sim_sm90 as sm90
        impl, tile = _sim, _sim_tile
    else:
        from gemm.arch import ptx as impl, sm90, tile
    globals().update({n: getattr(impl, n) for n in impl.__all__})
    globals().update({n: getattr(tile, n) for n in tile.__all__})
    globals().update({n: getattr(sm90, n) for n in SM90_NAMES})
    return globals()[name]
