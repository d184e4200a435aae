"""Split-K's second step and its workspace.

A kernel run with ``split_k = S`` (:class:`gemm.hopper.HopperConfig`,
:class:`gemm.simt.SimtConfig`, or chosen by shape for a call without a config) cuts K into S
ranges of whole k-tiles; each (range, output tile) is a work unit that writes its f32 partial
tile, unscaled, to matrix ``s * NB + z`` of a workspace (``NB`` products of a batch, each
partial an (M, ldw) row-major matrix in the kernel's orientation). :func:`reduce_splits` then writes

    out = alpha * (partial_0 + partial_1 + ... + partial_{S-1}) + beta * out

adding the partials in order, so the result does not depend on which unit finished first
(deterministic), converted once to the out's type (float32, or bfloat16 / float16 bits), by
the kernel of :mod:`gemm.splitk_kernel`.

The workspace (:func:`workspace`): for torch tensors a tensor of torch's caching allocator,
so that calls captured in a CUDA graph get memory of the graph's pool; otherwise device memory
of ours (``cuMemAlloc`` through ``cuda.bindings``), one per device and stream, grown when a
call needs more and kept, as cuBLAS keeps its workspace: two calls on one stream run in order,
so they can share it; calls on different streams do not.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from .call import binary

__all__ = ["reduce_splits", "workspace", "by_shape", "ranges", "partials_layout",
           "partials_buffer", "partials_plan", "MAX_SPLIT_K", "MIN_RANGE_TILES"]

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


def reduce_splits(out_dtype: str, workspace: Any, out: Any, m: int, n: int, ldw: int,
                  products: int, splits: int, ldc: int, col_step: int, out_stride: int,
                  alpha: float, beta: float, stream: int = 0,
                  part_dtype: str = "float32") -> Any:
    """Launch the reduction of ``splits`` partials (``workspace``: (device address, elements),
    or a numpy array in the simulator, of ``part_dtype``; 16-bit types as their bits) into
    ``out`` (the same, of ``out_dtype``, the kernel's (m, n) orientation: element (row, col)
    of product z at ``z * out_stride + row * ldc + col * col_step``): in 16-byte loads where
    the rows and both addresses allow it (:func:`gemm.splitk_kernel.vector_fits`), so a
    bound launch is for addresses of the same alignment (a kept call plan's are: its
    signature holds them modulo 16). Returns the launcher's bound launch (None in the
    simulator)."""
    from gemm import splitk_kernel as kernel    # (numba: imported when a split first reduces)
    vector = kernel.vector_fits(part_dtype, out_dtype, ldw, ldc, col_step, out_stride,
                                [_address(workspace), _address(out)])
    grid = (-(-products * m * -(-n // kernel.columns(part_dtype, vector)) // kernel.THREADS),
            1, 1)
    launch = kernel.launcher(out_dtype, part_dtype, vector)
    return launch(grid, (kernel.THREADS, 1, 1), stream, (workspace, out),
                  (m, n, ldw, products, splits, ldc, col_step, out_stride, alpha, beta))


def _address(buffer):
    """A kernel buffer's device address ((address, elements)); None for a simulator's array
    (its element offsets alone matter there)."""
    return buffer[0] if isinstance(buffer, tuple) else None


_spaces = {}        # (device, stream) -> (device address, bytes)


KEEP_BYTES = 64 << 20    # torch workspaces up to this size are kept per device, stream and use
_torch_spaces = {}       # (device, stream, use) -> a torch tensor kept for reuse


def workspace(nbytes: int, stream: int, device: int, kind: str = "numba",
              use: str = "partials") -> Tuple[int, Any]:
    """``(device address, owner)`` of at least ``nbytes`` of workspace for a call on
    ``stream`` of ``device`` whose operands are of ``kind``; ``use`` names what it is for,
    so that one call's workspaces of different uses are distinct ("partials": split-K's;
    "copy": the copy of an operand). For torch tensors, a tensor from torch's caching
    allocator (``owner``; keep it until the call's launches are enqueued): it follows torch's
    stream and CUDA-graph rules, so a call captured in a graph gets memory of the graph's
    pool; on torch's current stream outside a capture, one of at most ``KEEP_BYTES`` is kept
    per device, stream and use and reused by the next calls there (the stream orders them),
    which saves an allocation a call. Otherwise memory of ours (``owner`` None), kept per
    device and stream and grown, after the stream's work is done, when too small;
    RuntimeError where it must grow inside a CUDA graph capture."""
    if kind == "torch":
        import torch            # for torch's operands only: torch is optional
        current = (stream == torch._C._cuda_getCurrentRawStream(device)
                   and device == torch._C._cuda_getDevice())
        def new():
            return torch.empty(-(-nbytes // 4), dtype=torch.float32,
                               device=torch.device("cuda", device))
        if current and nbytes <= KEEP_BYTES and not torch._C._cuda_isCurrentStreamCapturing():
            key = (device, stream, use)
            kept = _torch_spaces.get(key)
            if kept is None or 4 * kept.numel() < nbytes:
                kept = _torch_spaces[key] = new()
            return kept.data_ptr(), kept
        t = new()
        if not current:
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
