"""``ReduceScatter(A @ B)``, the second half of a tensor-parallel MLP: each rank's partial
product of its K shard, its blocks of rows sent to the ranks they belong to while the next
block is computed, and each rank's D partials of its block added in rank order.

Rank ``r`` holds ``a_r`` (M, k_r), its columns of A (the K shard), and ``b_r`` (k_r, N), its
rows of B; the product ``A @ B = a_0 @ b_0 + ... + a_{D-1} @ b_{D-1}`` is cut by rows into D
blocks of M / D, and rank ``r`` gets block ``r``. Per :func:`gemm.collective.plan.scatter_plan`,
rank ``r`` computes the block of rank ``(r + i + 1) % D`` at step ``i`` and sends it (the
copy overlapping the next step's matmul), its own block last. Each partial is of the result's
type (as NCCL's reduce-scatter of cuBLAS's bf16 partials); the D partials are added in
float32 in rank order and rounded once (``gemm.splitk``'s reduction kernel), so the result does
not depend on the order in which they arrived, and it is the same on every run.

The paths are the all-gather's (:func:`gemm.collective.ring_path`): ``"peer"``, the blocks
pushed into the receiver's scratch through CUDA IPC with a flag each, by the copy engines or
the push kernel (``transfer``, :class:`PeerScatter`); ``"sendrecv"``, the blocks sent with ``torch.distributed``
send/recv (NCCL on GPUs, gloo on the CPU), each posted once its block is computed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from . import group as grp
from .peer import DEFAULT_TRANSFER, PeerExchange, check_transfer, wait_value
from .plan import scatter_plan

if TYPE_CHECKING:
    import torch

__all__ = ["matmul_reduce_scatter", "PeerScatter"]

CALLER = "matmul_reduce_scatter"


def matmul_reduce_scatter(a: torch.Tensor, b: torch.Tensor, group: Any = None,
                          out: Optional[torch.Tensor] = None, *,
                          out_dtype: Optional[torch.dtype] = None,
                          path: Optional[str] = None,
                          transfer: Optional[str] = None) -> torch.Tensor:
    """This rank's ``(M / D, N)`` block of rows of ``A @ B`` where ``a`` (M, k) is this
    rank's columns of A and ``b`` (k, N) its rows of B: rows ``r*M/D:(r+1)*M/D`` of
    ``sum over ranks q of a_q @ b_q``, for rank r of the D ranks of ``group`` (default: the
    world). Every rank calls it with the same M, N and types (k may differ); M must be a
    multiple of D.

    Torch tensors, float32 / bfloat16 / float16, on this rank's GPU (NCCL group, or any
    backend when the peer path runs) or on the CPU (gloo). ``out``: an ``(M / D, N)``
    tensor with a unit last stride to write into; ``out_dtype``: the result's type when
    ``out`` is None (default: the operands', as ``torch.mm``; ``torch.float32`` for 16-bit
    inputs). The partial products are of the result's type and are added in float32 in rank
    order. ``path``: ``"peer"`` or ``"sendrecv"`` to force one (default: what
    :func:`gemm.collective.ring_path` finds). ``transfer``: how the peer path moves a block,
    ``"copy_engine"`` or ``"sm"`` (as :func:`gemm.collective.all_gather_matmul`'s; each
    block goes to one rank, so ``"sm_fused"`` does not apply); default
    :data:`gemm.collective.DEFAULT_TRANSFER`. Asynchronous like any CUDA op: the result is
    ready on the caller's current stream. Returns the result.
    """
    dtype = grp.check_operands(a, b, out, out_dtype, None, CALLER, names=("a", "b"))
    g, rank, size = grp.group_info(group, CALLER)
    rows, n = a.shape[0], b.shape[1]
    if rows % size:
        raise ValueError(f"{CALLER}: a's {rows} rows do not split into {size} equal blocks "
                         f"(one per rank)")
    mb = rows // size
    out = grp.new_out(out, (mb, n), dtype, a.device, CALLER)
    grp.check_path(path, CALLER)
    transfer = DEFAULT_TRANSFER if transfer is None else transfer
    if transfer == "sm_fused":
        raise ValueError(f"{CALLER}: transfer 'sm_fused' pushes one block to every peer at "
                         f"once; the reduce-scatter sends each block to one rank: use "
                         f"'copy_engine' or 'sm'")
    check_transfer(transfer, "ring", CALLER)
    chosen = path or grp.ring_path(a, g)[0]
    grp.agree(g, rank, size, (rows, n), dtype, a.device, CALLER, what="products")
    if size == 1:
        grp.multiply(a, b, out)
        return out
    if chosen == "peer":
        if a.device.type != "cuda":
            raise ValueError(f"{CALLER}: the peer path needs CUDA tensors")
        ex = grp.kept((CALLER, g, rank, mb, n, dtype, str(a.device), transfer),
                      lambda: PeerScatter(g, rank, size, (mb, n), dtype, a.device, transfer))
        ex.run(a, b, out)
    else:
        _sendrecv(g, rank, size, a, b, out, mb)
    return out


def add_in_order(slots: torch.Tensor, out: torch.Tensor) -> None:
    """``out = slots[0] + ... + slots[D-1]``, added in float32 in that order and rounded
    once to out's type: on a GPU one launch of ``gemm.splitk``'s reduction kernel on the
    current stream, on the CPU torch's adds."""
    import torch
    if slots.device.type != "cuda":
        acc = slots[0].to(torch.float32, copy=True)
        for s in slots[1:]:
            acc += s.to(torch.float32)
        out.copy_(acc)
        return
    import contextlib
    from .. import splitk
    from ..api import _device_guard
    from ..call.operands import torch_dtype_name, torch_stream
    D, mb, n = slots.shape
    device, guard = _device_guard(out)
    with guard or contextlib.nullcontext():
        splitk.reduce_splits(torch_dtype_name(out.dtype), (slots.data_ptr(), slots.numel()),
                             (out.data_ptr(), (mb - 1) * out.stride(0) + n), mb, n, n, 1, D,
                             out.stride(0), 1, 0, 1.0, 0.0, torch_stream(device),
                             part_dtype=torch_dtype_name(slots.dtype))


class PeerScatter(PeerExchange):
    """The reduce-scatter on peer memory for one (M / D, N) block shape and result type on
    one device: D slots a set (slot q: rank q's partial of this rank's block, this rank's
    own in slot r), D - 1 staging buffers for the blocks it sends, and every other rank's
    scratch mapped here; the blocks moved by ``transfer`` ("copy_engine" or "sm")."""

    def __init__(self, group, rank, size, shape, dtype, device, transfer="copy_engine"):
        import torch
        self.plan = scatter_plan(size)[rank]
        super().__init__(group, rank, size, size, shape, dtype, device,
                         set(range(size)) - {rank}, transfer)
        self.staging = torch.empty((size - 1, *shape), dtype=dtype, device=device)

    def run(self, a, b, out):
        """``out`` = this rank's block of ``ReduceScatter(a @ b)`` on the current stream."""
        key = (a.data_ptr(), b.data_ptr(), out.data_ptr(), tuple(a.shape), tuple(a.stride()),
               tuple(b.stride()), tuple(out.stride()), a.dtype)
        self._call(key, lambda t: self._enqueue(t, a, b, out))

    def _enqueue(self, t, a, b, out):
        """One call in scratch set t: each block's matmul on the caller's stream, its copy
        to its rank on the comm stream once it is computed; then, once every partial of our
        block has arrived, their sum into out."""
        import torch
        cur = self._start()
        mb = out.shape[0]
        slots = self.scratch[t]
        for s in self.plan:
            rows = a[s.block * mb:(s.block + 1) * mb]
            if s.send_to is None:
                grp.multiply(rows, b, slots[self.rank])
                continue
            grp.multiply(rows, b, self.staging[s.step])
            computed = torch.cuda.Event()
            computed.record(cur)
            self.comm.wait_event(computed)
            self._push(t, s.send_to, s.dest_slot, self.staging[s.step].data_ptr())
        for q in range(self.size):
            if q != self.rank:
                wait_value(cur, self.flags.data_ptr() + self.flag(t, q), 1, self.flush)
        add_in_order(slots, out)
        self._finish(cur, t)


def _sendrecv(g, rank, size, a, b, out, mb):
    """The plan over torch.distributed: each block's send (and the matching receive from the
    rank sending to us at that step) posted once the block is computed, so it overlaps the
    next block's matmul; the sum once every receive is done."""
    import torch
    import torch.distributed as dist
    peer = {r: dist.get_global_rank(g, r) for r in range(size)}
    shape = (mb, b.shape[1])
    slots = torch.empty((size, *shape), dtype=out.dtype, device=out.device)
    staging = torch.empty((size - 1, *shape), dtype=out.dtype, device=out.device)
    reqs = []
    plan = scatter_plan(size)
    for s in plan[rank]:
        rows = a[s.block * mb:(s.block + 1) * mb]
        if s.send_to is None:
            grp.multiply(rows, b, slots[rank])
            continue
        grp.multiply(rows, b, staging[s.step])
        frm = next(q for q in range(size) if plan[q][s.step].send_to == rank)
        reqs += dist.batch_isend_irecv([
            dist.P2POp(dist.isend, staging[s.step], peer[s.send_to], group=g),
            dist.P2POp(dist.irecv, slots[frm], peer[frm], group=g)])
    for r in reqs:
        r.wait()
    add_in_order(slots, out)
