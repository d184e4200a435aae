"""Collective matmul: ``AllGather(A) @ B`` over a ``torch.distributed`` group, as a ring that
overlaps the gathering of A with the matmuls.

A is sharded by rows (data parallel: rank ``r`` holds ``A_r``, ``m`` x ``k``), B by columns
(tensor parallel: rank ``r`` holds ``B_r``, ``k`` x ``n``); each rank wants the
``(D * m, n)`` product ``[A_0; ...; A_{D-1}] @ B_r``. Instead of gathering A first, the ring
(:func:`ring_plan`) multiplies the shard a rank holds while the next one arrives. Two
schedules (:data:`SCHEDULES`): ``"ring"``, the seed's, forwards each shard to the neighbour
(D - 1 hops, each copy waiting for the one before to arrive); ``"direct"`` has each rank push
its own shard to every other rank in turn, one permutation per step, no copy waiting for
another. The ring is the default: the two measured alike, the copies being bound by
bandwidth, not by the ring's chain of arrivals (benchmarks/RESULTS.md, "Collective matmul"). Two paths run either plan:

- ``"peer"``: every rank on one host and every pair of GPUs able to reach each other (or
  ranks sharing a GPU): the shards move by the copy engines into the neighbour's scratch
  through CUDA IPC, with a remote flag per step (:mod:`gemm.collective.peer`);
- ``"sendrecv"``: elsewhere (or on CPU tensors with gloo), the ring over
  ``torch.distributed`` send/recv (NCCL on GPUs), each step's exchange overlapped with that
  step's matmul.

The per-shard matmuls on GPUs are the project's kernels (:func:`gemm.matmul`: the Hopper
kernel on compute capability 9.x); on CPU tensors (the gloo test path) they are torch's.
:func:`ring_path` says which path a call takes and why. Launch one process per GPU with
``torchrun``; see ``benchmarks/collective.py``.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Any, Optional, Tuple

import gemm
from .peer import PeerRing
from .plan import REUSE_RULE, SCHEDULES, RingStep, ring_plan

# torch is imported inside the functions that use it: importing this module (the docs, the
# schedule in .plan) needs no torch.

__all__ = ["all_gather_matmul", "ring_plan", "ring_path", "RingStep", "REUSE_RULE",
           "SCHEDULES", "release"]

if TYPE_CHECKING:
    import torch

log = logging.getLogger("gemm.collective")

PATHS = ("peer", "sendrecv")
_rings = {}      # (group, rank, m, k, dtype, device, schedule) -> PeerRing
_paths = {}      # (group, device) -> (path, reason)
_agreed = set()  # (group, rank, m, k, dtype, device) that every rank of the group called with


def _dist():
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("all_gather_matmul: torch.distributed is not initialized "
                         "(start the processes with torchrun and call init_process_group)")
    return dist


def _group_info(group):
    dist = _dist()
    g = group if group is not None else dist.group.WORLD
    return g, dist.get_rank(g), dist.get_world_size(g)


def ring_path(a_shard: torch.Tensor, group: Any = None) -> Tuple[str, str]:
    """``(path, reason)``: the path :func:`all_gather_matmul` takes for tensors on
    ``a_shard``'s device in ``group`` (collective: every rank calls it; the answer is kept
    per group and device)."""
    import torch
    g, rank, size = _group_info(group)
    key = (g, str(a_shard.device))
    if key in _paths:
        return _paths[key]
    dist = _dist()
    if a_shard.device.type != "cuda":
        found = ("sendrecv", f"{a_shard.device.type} tensors: the ring over "
                 f"{dist.get_backend(g)} send/recv, torch's matmul per shard")
    else:
        dev = a_shard.device.index
        me = (socket.gethostname(), dev, str(torch.cuda.get_device_properties(dev).uuid))
        everyone = [None] * size
        dist.all_gather_object(everyone, me, group=g)
        why = _peer_problem(me, everyone, torch)
        verdicts = [None] * size
        dist.all_gather_object(verdicts, why, group=g)
        problems = [w for w in verdicts if w]
        if not problems:
            shared = len({e[2] for e in everyone}) < size
            found = ("peer", "every rank on one host, every GPU reaches its peers"
                     + (" (some ranks share a GPU)" if shared else "")
                     + ": copies over peer memory with CUDA IPC, a flag per step")
        elif dist.get_backend(g) != "nccl":
            raise ValueError(f"all_gather_matmul: peer memory is out ({problems[0]}) and the "
                             f"group's backend is {dist.get_backend(g)}, not nccl, which the "
                             f"send/recv path needs for CUDA tensors")
        else:
            found = ("sendrecv", f"{problems[0]}: the ring over NCCL send/recv")
    _paths[key] = found
    log.info("all_gather_matmul on %s: %s (%s)", key[1], *found)
    return found


def _peer_problem(me, everyone, torch):
    """Why this rank cannot reach every other rank's GPU by peer memory (None if it can)."""
    host, dev, _ = me
    for rank, (h, d, uuid) in enumerate(everyone):
        if h != host:
            return f"rank {rank} is on host {h}, not {host}"
        if d >= torch.cuda.device_count() or str(
                torch.cuda.get_device_properties(d).uuid) != uuid:
            return f"rank {rank}'s GPU {d} is not GPU {d} here (CUDA_VISIBLE_DEVICES differ)"
        if d != dev and not torch.cuda.can_device_access_peer(dev, d):
            return f"GPU {dev} cannot reach GPU {d} by peer access"
    return None


def _check(a, b, out, out_dtype, torch):
    if out is not None and not isinstance(out, torch.Tensor):
        raise TypeError(f"all_gather_matmul: out must be a torch tensor, not "
                        f"{type(out).__name__}")
    for name, t in (("a_shard", a), ("b_shard", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"all_gather_matmul: {name} must be a torch tensor, not "
                            f"{type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"all_gather_matmul: {name} must be 2-D, got shape "
                             f"{tuple(t.shape)}")
    if a.dtype != b.dtype:
        raise TypeError(f"all_gather_matmul: a_shard is {a.dtype} but b_shard is {b.dtype}")
    if a.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"all_gather_matmul: {a.dtype} operands; float32, bfloat16 or "
                        f"float16 are supported")
    if a.device != b.device:
        raise ValueError(f"all_gather_matmul: a_shard is on {a.device}, b_shard on {b.device}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"all_gather_matmul: inner dimensions differ: a_shard is "
                         f"{tuple(a.shape)}, b_shard is {tuple(b.shape)}")
    allowed = (torch.float32,) if a.dtype == torch.float32 else (a.dtype, torch.float32)
    dtype = out_dtype if out_dtype is not None else (out.dtype if out is not None else a.dtype)
    if dtype not in allowed:
        raise TypeError(f"all_gather_matmul: the result of {a.dtype} operands can be "
                        f"{' or '.join(map(str, allowed))}, not {dtype}")
    if out is not None and out_dtype is not None and out.dtype != out_dtype:
        raise TypeError(f"all_gather_matmul: out is {out.dtype} but out_dtype is {out_dtype}")
    return dtype


def all_gather_matmul(a_shard: torch.Tensor, b_shard: torch.Tensor, group: Any = None,
                      out: Optional[torch.Tensor] = None, *,
                      out_dtype: Optional[torch.dtype] = None,
                      path: Optional[str] = None,
                      schedule: str = "ring") -> torch.Tensor:
    """This rank's ``(D * m, n)`` block of ``AllGather(A) @ B``: ``a_shard`` (m, k) is this
    rank's rows of A, ``b_shard`` (k, n) its columns of B, the D ranks of ``group`` (default:
    the world) each call it with the same m, k and dtype. Rows ``j*m:(j+1)*m`` of the result
    are ``A_j @ b_shard``.

    Torch tensors, float32 / bfloat16 / float16, on this rank's GPU (NCCL group, or any
    backend when the peer path runs) or on the CPU (gloo). ``out``: a ``(D * m, n)`` tensor
    with a unit last stride to write into; ``out_dtype``: the result's type when ``out`` is
    None (default: the operands', as ``torch.mm``; ``torch.float32`` for the f32 result of
    16-bit inputs). ``path``: ``"peer"`` or ``"sendrecv"`` to force one (default: what
    :func:`ring_path` finds). ``schedule``: ``"ring"`` (the default) or ``"direct"``
    (:func:`ring_plan`). Asynchronous like any CUDA op: the result is ready on the
    caller's current stream. Returns the result.
    """
    import torch
    dtype = _check(a_shard, b_shard, out, out_dtype, torch)
    g, rank, size = _group_info(group)
    m, k = a_shard.shape
    n = b_shard.shape[1]
    if out is None:
        out = torch.empty((size * m, n), dtype=dtype, device=a_shard.device)
    elif not isinstance(out, torch.Tensor) or tuple(out.shape) != (size * m, n) \
            or out.device != a_shard.device or out.stride(1) != 1:
        raise ValueError(f"all_gather_matmul: out must be a ({size * m}, {n}) tensor on "
                         f"{a_shard.device} with a unit last stride, got "
                         f"{getattr(out, 'shape', out)}")
    if path is not None and path not in PATHS:
        raise ValueError(f"all_gather_matmul: path must be one of {PATHS} or None, "
                         f"not {path!r}")
    if schedule not in SCHEDULES:
        raise ValueError(f"all_gather_matmul: schedule must be one of {SCHEDULES}, "
                         f"not {schedule!r}")
    a = a_shard.contiguous()
    chosen = path or ring_path(a, g)[0]
    _agree(g, rank, size, a)
    multiply = _multiply_cpu if a.device.type != "cuda" else _multiply_gpu
    if size == 1:
        multiply(a, b_shard, out)
        return out
    if chosen == "peer":
        if a.device.type != "cuda":
            raise ValueError("all_gather_matmul: the peer path needs CUDA tensors")
        key = (g, rank, m, k, a.dtype, str(a.device), schedule)
        if key not in _rings:
            _rings[key] = PeerRing(g, rank, size, (m, k), a.dtype, a.device, schedule)
        _rings[key].run(a, b_shard, out, m, multiply)
    else:
        _sendrecv(g, rank, size, a, b_shard, out, m, multiply, schedule)
    return out


def _agree(g, rank, size, a):
    """ValueError on every rank unless every rank's A shard has this one's (m, k) and type
    (the ring's slots are sized by it). Collective, once per group and shape."""
    key = (g, rank, *a.shape, a.dtype, str(a.device))
    if key in _agreed:
        return
    mine = (tuple(a.shape), str(a.dtype))
    everyone = [None] * size
    _dist().all_gather_object(everyone, mine, group=g)
    if any(e != mine for e in everyone):
        raise ValueError("all_gather_matmul: the ranks' A shards differ (every rank needs the "
                         "same (m, k) and type): " + ", ".join(
                             f"rank {r}: {e[0]} {e[1]}" for r, e in enumerate(everyone)))
    _agreed.add(key)


def _multiply_gpu(src, b, out_rows):
    gemm.matmul(src, b, out_rows)


def _multiply_cpu(src, b, out_rows):
    import torch
    out_rows.copy_(torch.mm(src.to(torch.float64), b.to(torch.float64)))


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


def release(group: Any = None) -> None:
    """Close the peer buffers kept for ``group`` (every rank calls it); the next call makes
    them again."""
    g = group
    if g is None:
        g = _dist().group.WORLD
    for key in [key for key in _rings if key[0] is g]:
        _rings.pop(key).close()
    for key in [key for key in _paths if key[0] is g]:
        _paths.pop(key)
    _agreed.difference_update({key for key in _agreed if key[0] is g})
