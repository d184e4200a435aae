"""Kept plans of ``gemm.matmul`` calls: a repeat call does only what cannot be kept.

A call's *signature* decides every check ``matmul`` makes and every launch parameter it
chooses: the options (kernel, precision, ``allow_tf32``, ``out_dtype``), and for A, B and out
(or no out) the array kind, shape, strides, dtype, device and address modulo 16 (the
widest copy's alignment), with where the call runs (the current device for torch and CuPy
arrays, whose libraries use each device's primary context; the current CUDA context for
numba's). The first call of a signature runs every check; on a GPU the launches it made are
kept as a :class:`CallPlan` under the signature, and a later call of the same signature reads
its arrays' addresses, makes the out where none is given (with the arrays' own allocator),
finds the stream and launches.

Plans are kept per process, at most ``MAX_PLANS`` (past that the table starts afresh), and
forgotten when what chose their kernels changes: :func:`clear` (``set_float32_precision``
calls it), and the autotune cache's file, looked at once a second (:func:`watch`).
Dictionary reads and writes are atomic under the GIL and each bound launch holds a lock while
it fills its parameters (:mod:`gemm.call.launch`), so threads may share plans.

Array kinds join the fast path when :func:`signature` first meets them
(:func:`learn_kind`): torch tensors (and ``nn.Parameter``), CuPy arrays and numba device
arrays. Any other kind takes the checked path on every call.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional, Tuple

from .launch import current_context
from .operands import stream_handle

__all__ = ["PLANS", "MAX_PLANS", "CallPlan", "signature", "lookup", "keep", "clear", "watch",
           "learn_kind", "plan_for"]

MAX_PLANS = 4096
PLANS: Dict[Any, "CallPlan"] = {}
_KINDS: Dict[type, "_Kind"] = {}        # array type -> how to read it
_watched: Optional[Callable[[], Any]] = None
_seen_state = None
_next_look = 0.0


class _Kind:
    """How the fast path reads an array kind: ``describe(x) -> (key, address)``,
    ``address(x)``, ``stream(device) -> raw handle`` of the caller's current stream,
    ``allocator(out) -> (() -> a new array like out)``, ``where() ->`` where a call now runs
    (a device or a CUDA context: its kernels are bound there); ``guard(device)``: a context
    manager making ``device`` current, or None when the kind's arrays always live on the
    current device."""

    def __init__(self, describe, address, stream, allocator, where, guard=None):
        self.describe, self.address, self.stream = describe, address, stream
        self.allocator, self.where, self.guard = allocator, where, guard


def _torch_kind(torch):
    raw_stream, current_device = torch._C._cuda_getCurrentRawStream, torch._C._cuda_getDevice

    def describe(x):
        ptr = x.data_ptr()
        return (x.shape, x.stride(), x.dtype, x.get_device(), ptr & 15), ptr

    def allocator(out):
        # the extents as separate ints: torch parses them faster than one tuple
        shape, dtype, device = tuple(out.shape), out.dtype, out.device
        return lambda: torch.empty(*shape, dtype=dtype, device=device)

    def where():
        try:
            return current_device()
        except RuntimeError:        # no usable CUDA (CPU tensors): the checked path reports it
            return -1

    return _Kind(describe, torch.Tensor.data_ptr, raw_stream, allocator, where,
                 torch.cuda.device)


def _cupy_kind(cupy):
    def describe(x):
        ptr = x.data.ptr
        return (x.shape, x.strides, x.dtype, x.data.device_id, ptr & 15), ptr

    def allocator(out):
        shape, dtype, device = out.shape, out.dtype, cupy.cuda.Device(out.data.device_id)

        def make():
            with device:
                return cupy.empty(shape, dtype)
        return make

    return _Kind(describe, lambda x: x.data.ptr,
                 lambda device: cupy.cuda.get_current_stream().ptr, allocator,
                 cupy.cuda.runtime.getDevice)


def _numba_kind(cuda):
    def describe(x):
        ptr = x.device_ctypes_pointer.value or 0
        return (x.shape, x.strides, x.dtype, ptr & 15), ptr

    def allocator(out):
        shape, dtype = out.shape, out.dtype
        return lambda: cuda.device_array(shape, dtype)

    return _Kind(describe, lambda x: x.device_ctypes_pointer.value or 0,
                 lambda device: 0, allocator, current_context)


def learn_kind(x: Any) -> None:
    """Let arrays of ``x``'s type take the fast path (torch tensors, CuPy arrays, numba device
    arrays; other types are left to the checked path)."""
    t = type(x)
    if t in _KINDS:
        return
    mod = t.__module__
    if mod.startswith("torch"):
        import torch                # the array's library: imported for its arrays only
        if not hasattr(torch._C, "_cuda_getCurrentRawStream") or \
                not hasattr(torch._C, "_cuda_getDevice"):
            return
        kind = _torch_kind(torch)
        for known in (torch.Tensor, torch.nn.Parameter):
            _KINDS[known] = kind
    elif mod.startswith("cupy"):
        import cupy                 # (as torch above)
        _KINDS[t] = _cupy_kind(cupy)
    elif mod.startswith("numba") and hasattr(x, "device_ctypes_pointer"):
        from numba import cuda      # (as torch above)
        _KINDS[t] = _numba_kind(cuda)


def signature(A: Any, B: Any, out: Any, options: tuple,
              *extra: Any) -> Optional[Tuple[Any, tuple]]:
    """``(key, (A's, B's, out's addresses))`` of a call, out's 0 when None, and after them
    the addresses of the ``extra`` arrays that are not None (a bias, scales: ``options``
    must say which are given); None where the arrays are not of one kind the fast path
    reads."""
    kind = _KINDS.get(type(A))
    if kind is None:
        learn_kind(A)
        kind = _KINDS.get(type(A))
    if kind is None or _KINDS.get(type(B)) is not kind:
        return None
    ka, pa = kind.describe(A)
    kb, pb = kind.describe(B)
    if out is None:
        kc, pc = None, 0
    elif _KINDS.get(type(out)) is kind:
        kc, pc = kind.describe(out)
    else:
        return None
    if not extra:
        return (options, ka, kb, kc, kind.where()), (pa, pb, pc)
    keys, addresses = [options, ka, kb, kc, kind.where()], [pa, pb, pc]
    for x in extra:
        if x is None:
            continue
        if _KINDS.get(type(x)) is not kind:
            return None
        kx, px = kind.describe(x)
        keys.append(kx)
        addresses.append(px)
    return tuple(keys), tuple(addresses)


def lookup(key: Any) -> Optional["CallPlan"]:
    """The plan kept under ``key``, or None (also for an unhashable key: an unhashable
    option is the checked path's to report)."""
    if _watched is not None and time.monotonic() >= _next_look:
        _look()
    try:
        return PLANS.get(key)
    except TypeError:
        return None


def keep(key: Any, plan: "CallPlan") -> None:
    """Keep ``plan`` under ``key`` (the table starts afresh past MAX_PLANS)."""
    try:
        hash(key)
    except TypeError:
        return
    if len(PLANS) >= MAX_PLANS:
        PLANS.clear()
    PLANS[key] = plan


def clear() -> None:
    """Forget every plan: what chose their kernels has changed."""
    PLANS.clear()


def watch(state: Callable[[], Any]) -> None:
    """Forget every plan whenever ``state()`` (e.g. the autotune cache file's stat) changes;
    it is asked at most once a second, from :func:`lookup`."""
    global _watched, _seen_state
    _watched, _seen_state = state, state()


def _look():
    global _next_look, _seen_state
    _next_look = time.monotonic() + 1.0
    now = _watched()
    if now != _seen_state:
        _seen_state = now
        PLANS.clear()


class CallPlan:
    """A kept call: ``launch(addresses, stream, alpha, beta)`` (the kernels' plans) on arrays
    of one kind on ``device``; ``allocate()`` makes the out of a call that gave none.
    ``guarded``: the call ran with another device current, so each launch makes ``device``
    current (its kernels are bound in that device's context)."""

    __slots__ = ("launch", "kind", "allocate", "device", "guarded")

    def __init__(self, launch, kind, allocate, device, guarded=False):
        self.launch, self.kind, self.allocate = launch, kind, allocate
        self.device, self.guarded = device, guarded

    def __call__(self, addresses, out, stream, alpha, beta):
        if self.guarded:
            with self.kind.guard(self.device):
                return self._run(addresses, out, stream, alpha, beta)
        return self._run(addresses, out, stream, alpha, beta)

    def _run(self, addresses, out, stream, alpha, beta):
        if out is None:
            out = self.allocate()
            addresses = addresses[:2] + (self.kind.address(out),) + addresses[3:]
        if stream is None:
            stream = self.kind.stream(self.device)
        elif type(stream) is not int or stream < 0:
            stream = stream_handle(stream, None)        # (checked: TypeError if bad)
        self.launch(addresses, stream, alpha, beta)
        return out


def plan_for(launch: Optional[Callable], A: Any, out_given: Any, result: Any, device: int,
             guarded: bool = False) -> Optional[CallPlan]:
    """The CallPlan of a checked call on ``device`` whose kernels' plan is ``launch``, on
    arrays of A's kind, with an allocator like ``result`` where the caller gave no out
    (``out_given`` None); None without a launch or for a kind the fast path does not read."""
    kind = _KINDS.get(type(A))
    if kind is None or launch is None:
        return None
    allocate = None if out_given is not None else kind.allocator(result)
    return CallPlan(launch, kind, allocate, device, guarded)
