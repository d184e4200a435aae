"""Faster ``inline="always"`` in numba-cuda: inlining without copying the callee's IR.

numba's inliner (``InlineWorker.inline_function``) runs the callee's untyped passes for the
call, then ``inline_ir`` deep-copies that fresh IR twice, block by block (once to mutate,
once to return an unmutated copy that the untyped inliner's caller never reads), a fresh
memo for each block; every variable refers to the function's one ``Scope``, which holds
every variable, so each block's copy copies the whole scope again: B blocks x V variables,
twice, at every level of inlining. gemm.cute's kernels inline large bodies through several
layers (a pipeline's body, the epilogue, index maps), so these copies were a large part of a
first compile (RESULTS.md, "The SM90 GEMM written with gemm.cute").

:func:`install` makes ``inline_function`` hand ``inline_ir`` its fresh IR without copies
(blocks "copied" in that call are the blocks themselves: nothing else holds them), and where
``inline_ir`` is called on IR kept elsewhere (the typed inliner) the blocks of one IR copy
share one copy of their scope, as the blocks being copied share the original: within
``inline_ir``, a ``FunctionIR.copy`` starts a new copy, and a scope copied again before the
next one is the copy already made. Nothing changes where the hooks are missing (another
numba-cuda): the patch is skipped.
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
    if "__deepcopy__" in vars(ir.Block) or not hasattr(worker, "run_untyped_passes"):
        return False

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

    def inline_function(self, caller_ir, block, i, function, arg_typs=None):
        callee_ir = self.run_untyped_passes(function)
        _state.fresh = True         # made for this call alone: inline_ir need not copy it
        try:
            return self.inline_ir(caller_ir, block, i, callee_ir,
                                  function.__code__.co_freevars, arg_typs=arg_typs)
        finally:
            _state.fresh = False

    def block_deepcopy(self, memo):
        if getattr(_state, "fresh", False):
            return self
        out = ir.Block.__new__(ir.Block)
        memo[id(self)] = out
        for name, value in self.__dict__.items():
            out.__dict__[name] = copy.deepcopy(value, memo)
        return out

    patched_inline_ir._shared_scope = True
    _originals.update({(worker, "inline_ir"): inline_ir, (ir.FunctionIR, "copy"): fir_copy,
                       (ir.Scope, "__deepcopy__"): None, (ir.Block, "__deepcopy__"): None,
                       (worker, "inline_function"): worker.inline_function})
    worker.inline_ir = patched_inline_ir
    worker.inline_function = inline_function
    ir.FunctionIR.copy = patched_copy
    ir.Scope.__deepcopy__ = scope_deepcopy
    ir.Block.__deepcopy__ = block_deepcopy
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
