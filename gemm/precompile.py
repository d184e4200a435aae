"""Compile the named kernels for every operand major and copy width, in parallel processes.

A generated kernel takes numba 10-30 s to compile; the result is kept in numba's on-disk cache
(``cache=True`` over the generated module in ``gemm.codegen.cache_dir()``), so a later process
loads it in a fraction of a second. ``python -m gemm precompile`` fills that cache using every
core, before tests or benchmarks that touch many variants.
"""

import os
from concurrent.futures import ProcessPoolExecutor

__all__ = ["variants", "precompile"]


def variants(names=None):
    """(kernel name, A unit mode, B unit mode, A vector, B vector) for every distinct kernel."""
    from gemm import api, simt
    out = set()
    for name in names or api.KERNELS:
        cfg = api.KERNELS[name]
        for a_unit in (0, 1):
            for b_unit in (0, 1):
                for va in (1, 2, 4):
                    for vb in (1, 2, 4):
                        out.add((name, a_unit, b_unit,
                                 simt.copy_vector(cfg, a_unit, cfg.bM, va),
                                 simt.copy_vector(cfg, b_unit, cfg.bN, vb)))
    return sorted(out)


def _compile(variant):
    from gemm import api, simt
    name, a_unit, b_unit, va, vb = variant
    simt.simt_kernel(api.KERNELS[name], a_unit, b_unit, va, vb)
    return variant


def precompile(names=None, workers=None, progress=True):
    """Compile every variant of the named kernels (all by default); returns how many."""
    todo = variants(names)
    workers = workers or min(len(todo), os.cpu_count() or 1)
    with ProcessPoolExecutor(workers) as pool:
        done = pool.map(_compile, todo)
        if progress:
            from tqdm import tqdm
            done = tqdm(done, total=len(todo), desc="compiling kernels", unit="kernel")
        for _ in done:
            pass
    return len(todo)
