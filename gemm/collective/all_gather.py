"""``AllGather(A) @ B``: the ring that overlaps the gathering of A with the matmuls (see
:mod:`gemm.collective`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from . import group as grp
from .peer import DEFAULT_TRANSFER, PeerRing, check_transfer, ring_chunks
from .plan import SCHEDULES, ring_plan

if TYPE_CHECKING:
    import torch

__all__ = ["all_gather_matmul"]

CALLER = "all_gather_matmul"


def all_gather_matmul(a_shard: torch.Tensor, b_shard: torch.Tensor, group: Any = None,
                      out: Optional[torch.Tensor] = None, *,
                      out_dtype: Optional[torch.dtype] = None,
                      path: Optional[str] = None,
                      schedule: str = "ring",
                      activation: Optional[str] = None,
                      transfer: Optional[str] = None) -> torch.Tensor:
    """This rank's ``(D * m, n)`` block of ``AllGather(A) @ B``: ``a_shard`` (m, k) is this
    rank's rows of A, ``b_shard`` (k, n) its columns of B, the D ranks of ``group`` (default:
    the world) each call it with the same m, k and dtype. Rows ``j*m:(j+1)*m`` of the result
    are ``A_j @ b_shard``.

    Torch tensors, float32 / bfloat16 / float16, on this rank's GPU (NCCL group, or any
    backend when the peer path runs) or on the CPU (gloo). ``out``: a ``(D * m, n)`` tensor
    with a unit last stride to write into; ``out_dtype``: the result's type when ``out`` is
    None (default: the operands', as ``torch.mm``; ``torch.float32`` for the f32 result of
    16-bit inputs). ``path``: ``"peer"`` or ``"sendrecv"`` to force one (default: what
    :func:`gemm.collective.ring_path` finds). ``schedule``: ``"ring"`` (the default) or
    ``"direct"`` (:func:`gemm.collective.ring_plan`). ``activation``: one of
    :data:`gemm.epilogue.ACTIVATIONS`, applied to each shard's product in its matmul's
    epilogue (the first layer of a tensor-parallel MLP). ``transfer``: how the peer path moves
    a shard (:data:`gemm.collective.TRANSFERS`): ``"copy_engine"`` (``cuMemcpyAsync``),
    ``"sm"`` (a copy kernel of a few blocks, :mod:`gemm.collective.push`) or, with the direct
    schedule, ``"sm_fused"`` (one such kernel pushing the rank's shard to every peer at
    once); default :data:`gemm.collective.DEFAULT_TRANSFER`. Asynchronous like any CUDA
    op: the result is ready on the caller's current stream. Returns the result.
    """
    dtype = grp.check_operands(a_shard, b_shard, out, out_dtype, activation, CALLER)
    g, rank, size = grp.group_info(group, CALLER)
    m, k = a_shard.shape
    n = b_shard.shape[1]
    out = grp.new_out(out, (size * m, n), dtype, a_shard.device, CALLER)
    grp.check_path(path, CALLER)
    if schedule not in SCHEDULES:
        raise ValueError(f"{CALLER}: schedule must be one of {SCHEDULES}, not {schedule!r}")
    transfer = DEFAULT_TRANSFER if transfer is None else transfer
    check_transfer(transfer, schedule, CALLER)
    a = a_shard.contiguous()
    chosen = path or grp.ring_path(a, g)[0]
    grp.agree(g, rank, size, a.shape, a.dtype, a.device, CALLER)

    def multiply(src, b, out_rows):
        grp.multiply(src, b, out_rows, activation)
    if size == 1:
        multiply(a, b_shard, out)
        return out
    if chosen == "peer":
        if a.device.type != "cuda":
            raise ValueError(f"{CALLER}: the peer path needs CUDA tensors")
        chunks = ring_chunks(schedule, size, a.numel() * a.element_size())
        ring = grp.kept((CALLER, g, rank, m, k, a.dtype, str(a.device), schedule, transfer,
                         chunks),
                        lambda: PeerRing(g, rank, size, (m, k), a.dtype, a.device, schedule,
                                         transfer, chunks))
        ring.run(a, b_shard, out, m, multiply, tag=activation)
    else:
        _sendrecv(g, rank, size, a, b_shard, out, m, multiply, schedule)
    return out


def _sendrecv(g, rank, size, a, b, out, m, multiply, schedule):
    """The plan over torch.distributed: at each step the exchange (send this step's shard,
    receive into slot ``step``) is posted before the matmul, so it overlaps it; two receive
    buffers alternate (slot j's is reused for slot j + 2, posted after the matmul and send
    that read slot j were)."""
    import torch
    import torch.distributed as dist
    plan = ring_plan(size, schedule)
    peer = {r: dist.get_global_rank(g, r) for r in range(size)}
    bufs = [torch.empty_like(a), torch.empty_like(a)]

    def held(slot):
        return a if slot is None else bufs[slot % 2]
    for s in plan[rank]:
        reqs = []
        if s.send_to is not None:
            frm = next(q for q in range(size) if plan[q][s.step].send_to == rank)
            reqs = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, held(s.send_from), peer[s.send_to], group=g),
                dist.P2POp(dist.irecv, held(s.step), peer[frm], group=g)])
        multiply(held(s.source), b, out[s.compute * m:(s.compute + 1) * m])
        for r in reqs:
            r.wait()
