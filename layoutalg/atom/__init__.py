"""Atoms: one instruction described as layouts (CuTe's MMA_Traits and Copy_Traits).

An MMA atom says which thread holds which element of its A, B and C tiles; a copy atom
says which bits each thread moves. ``layoutalg.tiled`` tiles atoms over threads and data.
``layoutalg.atom.gmma`` has the shared-memory layouts and matrix descriptors of SM90 wgmma.
"""

from .mma import (
    MMAAtom, SM80_16x8x8_F16F16F16F16_TN, SM80_16x8x8_F32TF32TF32F32_TN,
    SM80_16x8x16_F16F16F16F16_TN, SM80_16x8x16_F32BF16BF16F32_TN,
    SM80_16x8x16_F32F16F16F32_TN, SM90_64xNx8_F32TF32TF32_SS, SM90_64xNx16_F32BF16BF16_SS,
    SM90_64xNx16_F32F16F16_SS, SM90_64xNx32_F32E4M3E4M3_SS_TN, SM90_64xNx32_F32E4M3E5M2_SS_TN,
    SM90_64xNx32_F32E5M2E4M3_SS_TN, SM90_64xNx32_F32E5M2E5M2_SS_TN, SM90_FP8_ATOMS,
    UniversalFMA, decode, encode, round_to_type, storage_dtype,
)
from .copy import (
    CopyAtom, SM75_U16x2_LDSM_T, SM75_U16x4_LDSM_T, SM75_U16x8_LDSM_T, SM75_U32x1_LDSM_N,
    SM75_U32x2_LDSM_N, SM75_U32x4_LDSM_N, SM80_CP_ASYNC_CACHEALWAYS,
    SM80_CP_ASYNC_CACHEGLOBAL, UniversalCopy, type_bits,
)

__all__ = [
    "MMAAtom", "UniversalFMA", "SM80_16x8x16_F32BF16BF16F32_TN", "SM80_16x8x16_F32F16F16F32_TN",
    "SM80_16x8x16_F16F16F16F16_TN", "SM80_16x8x8_F16F16F16F16_TN",
    "SM80_16x8x8_F32TF32TF32F32_TN", "SM90_64xNx16_F32BF16BF16_SS",
    "SM90_64xNx16_F32F16F16_SS", "SM90_64xNx8_F32TF32TF32_SS", "SM90_64xNx32_F32E4M3E4M3_SS_TN",
    "SM90_64xNx32_F32E4M3E5M2_SS_TN", "SM90_64xNx32_F32E5M2E4M3_SS_TN",
    "SM90_64xNx32_F32E5M2E5M2_SS_TN", "SM90_FP8_ATOMS", "round_to_type", "storage_dtype",
    "encode", "decode",
    "CopyAtom", "UniversalCopy", "SM80_CP_ASYNC_CACHEALWAYS", "SM80_CP_ASYNC_CACHEGLOBAL",
    "SM75_U32x1_LDSM_N", "SM75_U32x2_LDSM_N", "SM75_U32x4_LDSM_N", "SM75_U16x2_LDSM_T",
    "SM75_U16x4_LDSM_T", "SM75_U16x8_LDSM_T", "type_bits",
]
