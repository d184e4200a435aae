"""Split-K's second step and its workspace.

A kernel run with ``split_k = S`` (:class:`gemm.hopper.HopperConfig`,
:class:`gemm.simt.SimtConfig`, or chosen by shape for a call without a config) cuts K into S
ranges of whole k-tiles; each (range, output tile) is a work unit that writes its f32 partial
tile, unscaled, to matrix ``s * NB + z`` of a workspace (``NB`` products of a batch, each
partial an (M, ldw) row-major matrix in the kernel's orientation). :func:`reduce_splits` then writes

    out = alpha * (partial_0 + partial_1 + ... + partial_{S-1}) + beta * out

adding the partials in order, so the result does not depend on which unit finished first
(deterministic), converted once to the out's type (float32, or bfloat16 / float16 bits).

The workspace (:func:`workspace`): for torch tensors a tensor of torch's caching allocator,
so that calls captured in a CUDA graph get memory of the graph's pool; otherwise device memory
of ours (``cuMemAlloc`` through ``cuda.bindings``), one per device and stream, grown when a
call needs more and kept, as cuBLAS keeps its workspace: two calls on one stream run in order,
so they can share it; calls on different streams do not.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Tuple

import numpy as np

from ._env import simulator_active
from .call import binary
from .call.launch import Launcher
from .codegen import load_module

__all__ = ["reduce_splits", "workspace", "by_shape", "ranges", "partials_layout",
           "partials_buffer", "partials_plan", "THREADS", "MAX_SPLIT_K", "MIN_RANGE_TILES"]

THREADS = 256
MAX_SPLIT_K = 64
MIN_RANGE_TILES = 8         # k-tiles per K range at least, when the split is chosen by shape


def by_shape(units: int, k_tiles: int, slots: int, least: int) -> int:
    """The K ranges a call without a configured split gets: as many as fill the GPU's
    ``slots`` with its ``units`` of work (output tiles), each of at least MIN_RANGE_TILES
    k-tiles (a range's pipeline fill, its partial tile's store and the reduction must pay
    off), at most MAX_SPLIT_K; 1 (no split) below ``least`` ranges."""
    split = min(slots // max(units, 1), k_tiles // MIN_RANGE_TILES, MAX_SPLIT_K)
    return split if split >= least else 1


def ranges(k_tiles: int, split: int) -> Tuple[int, int]:
    """``(ranges, k-tiles per range)`` for ``split`` asked over ``k_tiles``: the ranges are
    trimmed so that none is empty.

    >>> ranges(5, 4), ranges(64, 8), ranges(3, 64)
    ((3, 2), (8, 8), (3, 1))
    """
    per = -(-k_tiles // split)
    return -(-k_tiles // per), per


_SCALARS = ("uint32",) * 8 + ("float32",) * 2
# out dtype -> (numba type of the out's elements, load as float32, store from float32)
_OUT = {"float32": ("float32", "", ""),
        "bfloat16": ("uint16", "bf16_to_f32", "cvt_rn_bf16_f32"),
        "float16": ("uint16", "f16_to_f32", "cvt_rn_f16_f32")}
VEC = 4     # consecutive columns of one row per thread of the reduction (its a0 .. a3)
_SOURCE = '''\
import numpy as np
from numba import cuda, float32
from gemm.arch import bf16_to_f32, cvt_rn_bf16_f32, cvt_rn_f16_f32, f16_to_f32
U = np.uint32


@cuda.jit(device=True)
def finish(C, g, acc, alpha, beta):
    v = alpha * acc
    if beta != float32(0):
        v += beta * {load}(C[g])
    C[g] = {store}(v)


@cuda.jit("void(float32[::1], {ctype}[::1], uint32, uint32, uint32, uint32, uint32, uint32, "
          "uint32, uint32, float32, float32)"{cache})
def kernel(W, C, M, N, ldw, NB, S, ldc, cs, sCb, alpha, beta):
    # thread i: columns col .. col + {vec} - 1 of one row (those below N): {vec} loads in
    # flight per K range, two ranges per turn, each sum still taken in the ranges' order
    i = U(cuda.blockIdx.x) * U({threads}) + U(cuda.threadIdx.x)
    nq = (N + U({vec} - 1)) // U({vec})
    mq = M * nq
    if i >= NB * mq:
        return
    z = i // mq
    r = i - z * mq
    row = r // nq
    col = (r - row * nq) * U({vec})
    w = (z * M + row) * ldw + col
    step = NB * M * ldw
    g = z * sCb + row * ldc + col * cs
    if col + U({vec}) <= N:
        a0 = a1 = a2 = a3 = float32(0)
        s = U(0)
        while s + U(1) < S:
            p = w + s * step
            q = p + step
            x0, x1, x2, x3 = W[p], W[p + U(1)], W[p + U(2)], W[p + U(3)]
            y0, y1, y2, y3 = W[q], W[q + U(1)], W[q + U(2)], W[q + U(3)]
            a0 = (a0 + x0) + y0
            a1 = (a1 + x1) + y1
            a2 = (a2 + x2) + y2
            a3 = (a3 + x3) + y3
            s += U(2)
        if s < S:
            p = w + s * step
            a0 += W[p]
            a1 += W[p + U(1)]
            a2 += W[p + U(2)]
            a3 += W[p + U(3)]
        finish(C, g, a0, alpha, beta)
        finish(C, g + cs, a1, alpha, beta)
        finish(C, g + U(2) * cs, a2, alpha, beta)
        finish(C, g + U(3) * cs, a3, alpha, beta)
    else:                                   # the row's last columns, fewer than {vec}
        for j in range(N - col):
            acc = float32(0)
            for s in range(S):
                acc += W[w + U(j) + U(s) * step]
            finish(C, g + U(j) * cs, acc, alpha, beta)
'''


@lru_cache(maxsize=None)
def _launcher(out_dtype):
    ctype, load, store = _OUT[out_dtype]
    sim = simulator_active()
    source = _SOURCE.format(ctype=ctype, load=load, store=store, threads=THREADS, vec=VEC,
                            cache="" if sim else ", cache=True")
    kernel = load_module(source, "splitk").kernel
    return Launcher(kernel, 2, (4, 4 if ctype == "float32" else 2), _SCALARS, free_scalars=2)


def reduce_splits(out_dtype: str, workspace: Any, out: Any, m: int, n: int, ldw: int,
                  products: int, splits: int, ldc: int, col_step: int, out_stride: int,
                  alpha: float, beta: float, stream: int = 0) -> Any:
    """Launch the reduction of ``splits`` partials (``workspace``: (device address, elements),
    or a numpy float32 array in the simulator) into ``out`` (the same, of ``out_dtype``, the
    kernel's (m, n) orientation: element (row, col) of product z at ``z * out_stride + row *
    ldc + col * col_step``). Returns the launcher's bound launch (None in the simulator)."""
    grid = (-(-products * m * -(-n // VEC) // THREADS), 1, 1)
    return _launcher(out_dtype)(grid, (THREADS, 1, 1), stream, (workspace, out),
                                (m, n, ldw, products, splits, ldc, col_step, out_stride, alpha,
                                 beta))


_spaces = {}        # (device, stream) -> (device address, bytes)


def workspace(nbytes: int, stream: int, device: int, kind: str = "numba") -> Tuple[int, Any]:
    """``(device address, owner)`` of at least ``nbytes`` of workspace for a call on
    ``stream`` of ``device`` whose operands are of ``kind``. For torch tensors, a tensor from
    torch's caching allocator (``owner``; keep it until the call's launches are enqueued):
    it follows torch's stream and CUDA-graph rules, so a call captured in a graph gets
    memory of the graph's pool. Otherwise memory of ours (``owner`` None), kept per device and
    stream and grown, after the stream's work is done, when too small; RuntimeError where
    it must grow inside a CUDA graph capture."""
    if kind == "torch":
        import torch            # for torch's operands only: torch is optional
        t = torch.empty(-(-nbytes // 4), dtype=torch.float32, device=torch.device("cuda", device))
        if stream != torch._C._cuda_getCurrentRawStream(device):
            t.record_stream(torch.cuda.ExternalStream(stream, device=t.device))
        return t.data_ptr(), t
    key = (device, stream)
    got = _spaces.get(key)
    if got is not None and got[1] >= nbytes:
        return got[0], None
    binary._current_context()
    drv, check = binary._driver(), binary._check
    if binary.stream_capturing(stream):
        raise RuntimeError(                 # allocating would invalidate the capture
            f"gemm: a split-K call captured in a CUDA graph needs {nbytes} bytes of "
            "workspace, more than its stream has; workspace is allocated outside a capture "
            "only: run the call once on that stream before capturing")
    if got is not None:
        check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize")
        check(drv.cuMemFree(got[0]), "cuMemFree(split-K workspace)")
    size = max(nbytes, 1 << 20)
    ptr = int(check(drv.cuMemAlloc(size), "cuMemAlloc(split-K workspace)"))
    _spaces[key] = (ptr, size)
    return ptr, None


def partials_layout(c: Any, m: int, n: int, matrices: int, caller: str) -> Tuple:
    """Where a kernel of CUDA cores (the SIMT and small-M kernels) writes ``matrices``
    partial (m, n) products for the out ``c`` (an Operand): in the out's orientation, so
    that its unit stride runs along the workspace's rows (a column-major out: C^T).
    Returns ``(rows, cols, ldw, (row stride, column stride) of (m, n), elements, ldc)``;
    ValueError when the workspace would need 2**32 elements or more."""
    col = c.unit_mode == 0
    rows, cols = (n, m) if col else (m, n)
    ldw = cols + cols % 2
    size = matrices * rows * ldw
    if size >= 2 ** 32:
        raise ValueError(f"{caller}: {matrices} partial products need a workspace of {size} "
                         "floats; at most 2**32 - 1")
    ldc = c.strides[1] if col else c.strides[0]
    return rows, cols, ldw, ((1, ldw) if col else (ldw, 1)), size, ldc


def partials_buffer(size: int, stream: int, c: Any) -> Tuple[Any, Any]:
    """``(kernel buffer, owner)`` of ``size`` f32 partials for a call writing ``c``: a
    numpy array in the simulator, else :func:`workspace` (keep ``owner`` until the launches
    are enqueued)."""
    if c.kind == "sim":
        return np.zeros(size, np.float32), None
    ptr, owner = workspace(4 * size, stream, c.device, c.kind)
    return (ptr, size), owner


def partials_plan(kernel: Any, reduce: Any, size: int, c: Any, inputs: int) -> Any:
    """The plan of a split call: ``kernel`` (a bound launch taking the first ``inputs``
    addresses, then the workspace) on a workspace of ``size`` floats for each call, then
    ``reduce`` (the bound reduction) into the out (``addresses[2]``). None in the
    simulator."""
    if kernel is None:
        return None
    device, kind = c.device, c.kind

    def plan(addresses, stream, alpha, beta):
        ws, owner = workspace(4 * size, stream, device, kind)
        kernel((*addresses[:inputs], ws), stream, 1.0, 0.0)
        reduce((ws, addresses[2]), stream, alpha, beta)
        del owner                       # the launches are enqueued
    return plan
