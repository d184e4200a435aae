"""What the Hopper kernel is planned from, read off layoutalg: its wgmma atom, the swizzled
layouts of a ring slot's blocks, and the TMA copies whose tensor maps the host makes
(:mod:`gemm.hopper`) and the kernel issues (:mod:`gemm.hopper.cute_gemm`).

>>> from gemm.hopper import HopperVariant
>>> copies = hopper_copies(HopperVariant(tma_store=True))
>>> copies.copy_x.bytes, copies.copy_y.bytes, copies.copy_c.bytes      # rows of 128 bytes
(16384, 32768, 8192)
"""

from collections import namedtuple
from functools import lru_cache

from layoutalg import tile_to_shape
from layoutalg.atom import (SM90_FP8_ATOMS, SM90_64xNx8_F32TF32TF32_SS,
                            SM90_64xNx16_F32BF16BF16_SS, SM90_64xNx16_F32F16F16_SS)
from layoutalg.atom.gmma import gmma_layout_atom
from layoutalg.atom.tma import make_tma_copy

from .config import FP8_TYPES

__all__ = ["BITS", "ATOMS", "SWIZZLE", "atom_of", "stage_layout", "tma_copy", "Copies",
           "hopper_copies"]

BITS = {"bfloat16": 16, "float16": 16, "tfloat32": 32, "float8_e4m3fn": 8, "float8_e5m2": 8}
OUT_BITS = {"float32": 32, "bfloat16": 16, "float16": 16}
ATOMS = {"bfloat16": SM90_64xNx16_F32BF16BF16_SS, "float16": SM90_64xNx16_F32F16F16_SS,
         "tfloat32": SM90_64xNx8_F32TF32TF32_SS}
SWIZZLE = 128

# X's and Y's blocks of a ring slot; with the TMA epilogue, a 64-row x 128-byte piece of C
Copies = namedtuple("Copies", "copy_x copy_y copy_c")


def atom_of(v, n):
    """The wgmma atom of variant ``v``'s operand types and majors, ``n`` columns wide."""
    dtype = v.config.dtype
    if dtype in FP8_TYPES:
        return SM90_FP8_ATOMS[FP8_TYPES[dtype], FP8_TYPES[v.b_dtype]](n)
    return ATOMS[dtype](n, v.a_major, v.b_major)


def stage_layout(major, rows, bk, bits):
    """One operand's block of a ring slot: (rows, bk) tiled with the 128-byte-swizzle atom,
    the atoms of an MN-major block K first, so that each 128-byte column of rows is one
    TMA box of ``bk`` rows (MN first, each box would be the atom's 8 rows: ``bk / 8`` times
    as many copies).

    >>> print(stage_layout("MN", 128, 64, 16))
    Sw<3,3,3> o 0 o ((64,2),64):((1,4096),64)
    """
    order = (2, 1) if major == "MN" else None
    return tile_to_shape(gmma_layout_atom(major, SWIZZLE, bits), (rows, bk), order)


def tma_copy(major, rows, bk, bits):
    """The TMA copy of a block (its box, swizzle and boxes; the global extents and strides
    here are placeholders that gemm.hopper replaces per call)."""
    strides = (bk, 1) if major == "K" else (1, rows)
    return make_tma_copy((rows, bk), strides, stage_layout(major, rows, bk, bits), bits)


@lru_cache(maxsize=None)
def hopper_copies(v):
    """Variant ``v``'s TMA copies (:data:`Copies`): X's ``tile_m`` rows and Y's ``bN`` of a
    slot, ``bK`` deep, and (the TMA epilogue, else None) C's pieces of 64 rows x 128 bytes
    of columns, each one box."""
    cfg, bits = v.config, BITS[v.config.dtype]
    copy_c = None
    if v.tma_store:
        out_bits = OUT_BITS[v.out_dtype]
        copy_c = tma_copy("K", 64, 1024 // out_bits, out_bits)
        if [b.smem_offset for b in copy_c.boxes] != [0]:
            raise AssertionError("a staged piece of C is not one TMA box")
    return Copies(tma_copy(v.a_major, cfg.tile_m, cfg.bK, bits),
                  tma_copy(v.b_major, cfg.bN, cfg.bK, bits), copy_c)
