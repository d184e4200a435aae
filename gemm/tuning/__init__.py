"""Tuning: the configs ``gemm.matmul`` takes beyond the shape rules.

``gemm.tuning.autotune`` times candidate configs per problem and keeps the fastest in an
on-disk cache (``python -m gemm tune``); ``gemm.tuning.shape_table`` answers calls that were
never tuned from the shipped table of shapes tuned before (``shape_table.json``);
``gemm.tuning.precompile`` compiles kernel variants ahead of their first call
(``python -m gemm precompile``).

Nothing is imported here, so ``import gemm.tuning`` stays light.
"""
