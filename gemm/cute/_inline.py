"""Faster ``inline="always"`` in numba-cuda: one copy of the callee's scope per inlining.

numba's inliner (``InlineWorker.inline_ir``) copies the callee's IR block by block with
``copy.deepcopy``, a fresh memo for each block; every variable refers to the function's one
``Scope``, which holds every variable, so each block's copy copies the whole scope again:
B blocks x V variables. gemm.cute's kernels inline large bodies (unrolled loops, the epilogue,
a pipeline's body through several inlined layers), so these copies are a large part of a
first compile (RESULTS.md, "The SM90 GEMM written with gemm.cute").

:func:`install` makes the blocks of one IR copy share one copy of their scope, as the blocks
of the IR being copied share the original: the copies are the same IR, made once per scope
instead of once per block. Within the inliner only (``inline_ir``), a ``FunctionIR.copy``
starts a new copy, and a scope copied again before the next one is the copy already made.
Nothing changes where the hooks are missing (another numba-cuda): the patch is skipped.
"""

import contextlib
import copy
import threading

__all__ = ["install", "unpatched"]

_state = threading.local()
_originals = {}             # what install replaced: (owner, name) -> the original


def install():
    """Patch numba-cuda's inliner as the module says (once; False where it cannot)."""
    try:
        from numba.cuda.core import inline_closurecall, ir
    except ImportError:             # another numba-cuda layout: leave it as it is
        return False
    worker = getattr(inline_closurecall, "InlineWorker", None)
    if worker is None or getattr(worker.inline_ir, "_shared_scope", False):
        return worker is not None
    if "__deepcopy__" in vars(ir.Scope) or not hasattr(ir.FunctionIR, "copy"):
        return False
    inline_ir, fir_copy = worker.inline_ir, ir.FunctionIR.copy

    def patched_inline_ir(self, *args, **kwargs):
        depth = getattr(_state, "depth", 0)
        _state.depth = depth + 1
        try:
            return inline_ir(self, *args, **kwargs)
        finally:
            _state.depth = depth
            _state.copies = None

    def patched_copy(self):
        if getattr(_state, "depth", 0):
            _state.copies = {}      # a new copy of an IR: its scopes are copied afresh
        return fir_copy(self)

    def scope_deepcopy(self, memo):
        copies = getattr(_state, "copies", None)
        if copies is not None and id(self) in copies:
            return copies[id(self)]
        out = ir.Scope.__new__(ir.Scope)
        memo[id(self)] = out
        if copies is not None:
            copies[id(self)] = out
        for name, value in self.__dict__.items():
            out.__dict__[name] = copy.deepcopy(value, memo)
        return out

    patched_inline_ir._shared_scope = True
    _originals.update({(worker, "inline_ir"): inline_ir, (ir.FunctionIR, "copy"): fir_copy,
                       (ir.Scope, "__deepcopy__"): None})
    worker.inline_ir = patched_inline_ir
    ir.FunctionIR.copy = patched_copy
    ir.Scope.__deepcopy__ = scope_deepcopy
    return True


@contextlib.contextmanager
def unpatched():
    """numba's own inliner while the block runs (to compare the two: tests)."""
    patched = {key: getattr(*key) for key in _originals}
    for (owner, name), original in _originals.items():
        if original is None:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    try:
        yield
    finally:
        for (owner, name), value in patched.items():
            setattr(owner, name, value)
