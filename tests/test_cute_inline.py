"""gemm.cute._inline: numba's inliner with one copy of a callee's scope per IR copy. A kernel
of nested inlined device functions (a pipeline of gemm.cute.pallas with its body, index maps
and views) compiles to the same PTX with and without the patch, and the patch is installed
when gemm.cute is imported for compiling."""

import re
import sys
from pathlib import Path

from numba import cuda

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm.cute import _inline  # noqa: E402
from test_cute_pallas import EW_SIG, MM_SIG, ew_kernel, mm_kernel  # noqa: E402


def _ptx(fn, sig):
    ptx = cuda.compile_ptx(fn, sig, cc=(9, 0))[0]
    ptx = re.sub(r"//.*", "", ptx)          # comments name the compiler's temporaries
    # and numba numbers its functions and shared arrays as it compiles them: by order
    for pattern in (r"B\d+v\d+B", r"_cudapy_smem_\d+"):
        names = list(dict.fromkeys(re.findall(pattern, ptx)))
        ptx = re.sub(pattern, lambda m: f"<{names.index(m.group(0))}>", ptx)
    return ptx


def test_inlined_kernels_compile_to_the_same_ptx_without_the_patch():
    from numba.cuda.core.inline_closurecall import InlineWorker
    assert getattr(InlineWorker.inline_ir, "_shared_scope", False)
    for fn, sig in ((ew_kernel, EW_SIG), (mm_kernel, MM_SIG)):
        patched = _ptx(fn, sig)
        with _inline.unpatched():
            assert not getattr(InlineWorker.inline_ir, "_shared_scope", False)
            plain = _ptx(fn, sig)
        assert patched == plain
    assert getattr(InlineWorker.inline_ir, "_shared_scope", False)
