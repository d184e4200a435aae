"""What both collective matmuls share: the process group (its rank and size, the path a call
takes, the ranks' agreement on the shapes), the operands' checks, the per-shard product, and
what is kept per group between calls (:func:`release` forgets it).

torch is imported inside the functions that use it: importing this module needs no torch.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Any, Tuple

import gemm
from ..epilogue import check_activation, in_torch

if TYPE_CHECKING:
    import torch

__all__ = ["ring_path", "release", "PATHS"]

log = logging.getLogger("gemm.collective")

PATHS = ("peer", "sendrecv")
rings = {}       # (caller, group, rank, shape, dtype, device, ...) -> a peer exchange
paths = {}       # (group, device) -> (path, reason)
agreed = set()   # (caller, group, rank, shape, dtype, device) every rank of the group called with


def dist(caller):
    import torch.distributed as d
    if not d.is_available() or not d.is_initialized():
        raise ValueError(f"{caller}: torch.distributed is not initialized (start the "
                         f"processes with torchrun and call init_process_group)")
    return d


def group_info(group, caller):
    """(group, this rank in it, its size); ``group`` None is the world. ValueError when this
    process is not in ``group``, TypeError when it is not a process group."""
    d = dist(caller)
    if group is d.GroupMember.NON_GROUP_MEMBER:
        raise ValueError(f"{caller}: this process is not a member of the group (every rank "
                         f"of the group calls it, and only they)")
    if group is not None and not isinstance(group, d.ProcessGroup):
        raise TypeError(f"{caller}: group must be a torch.distributed process group or None "
                        f"(the world), not {type(group).__name__}")
    g = group if group is not None else d.group.WORLD
    return g, d.get_rank(g), d.get_world_size(g)


def ring_path(a_shard: torch.Tensor, group: Any = None) -> Tuple[str, str]:
    """``(path, reason)``: the path :func:`gemm.collective.all_gather_matmul` and
    :func:`gemm.collective.matmul_reduce_scatter` take for tensors on ``a_shard``'s device in
    ``group`` (collective: every rank calls it; the answer is kept per group and device)."""
    import torch
    g, rank, size = group_info(group, "ring_path")
    key = (g, str(a_shard.device))
    if key in paths:
        return paths[key]
    d = dist("ring_path")
    if a_shard.device.type != "cuda":
        if "gloo" not in str(d.get_backend(g)):
            raise ValueError(f"ring_path: {a_shard.device.type} tensors need a group with "
                             f"gloo (its backend is {d.get_backend(g)}); move them to this "
                             f"rank's GPU, or make a gloo group for them")
        found = ("sendrecv", f"{a_shard.device.type} tensors: the ring over "
                 f"{d.get_backend(g)} send/recv, torch's matmul per shard")
    else:
        dev = a_shard.device.index
        me = (socket.gethostname(), dev, str(torch.cuda.get_device_properties(dev).uuid))
        everyone = [None] * size
        d.all_gather_object(everyone, me, group=g)
        why = _peer_problem(me, everyone, torch)
        verdicts = [None] * size
        d.all_gather_object(verdicts, why, group=g)
        problems = [w for w in verdicts if w]
        if not problems:
            shared = len({e[2] for e in everyone}) < size
            found = ("peer", "every rank on one host, every GPU reaches its peers"
                     + (" (some ranks share a GPU)" if shared else "")
                     + ": copies over peer memory with CUDA IPC, a flag per step")
        elif d.get_backend(g) != "nccl":
            raise ValueError(f"ring_path: peer memory is out ({problems[0]}) and the "
                             f"group's backend is {d.get_backend(g)}, not nccl, which the "
                             f"send/recv path needs for CUDA tensors")
        else:
            found = ("sendrecv", f"{problems[0]}: the ring over NCCL send/recv")
    paths[key] = found
    log.info("collective matmuls on %s: %s (%s)", key[1], *found)
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


def check_operands(a, b, out, out_dtype, activation, caller, names=("a_shard", "b_shard")):
    """The result's torch dtype, after TypeError / ValueError for operands ``a`` (m, k) and
    ``b`` (k, n) that are not 2-D torch tensors of one supported type on one device, with
    matching inner dimensions, an ``out`` / ``out_dtype`` the product cannot have, or an
    unknown ``activation``."""
    import torch
    if out is not None and not isinstance(out, torch.Tensor):
        raise TypeError(f"{caller}: out must be a torch tensor, not {type(out).__name__}")
    for name, t in zip(names, (a, b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{caller}: {name} must be a torch tensor, not "
                            f"{type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{caller}: {name} must be 2-D, got shape {tuple(t.shape)}")
    if a.dtype != b.dtype:
        raise TypeError(f"{caller}: {names[0]} is {a.dtype} but {names[1]} is {b.dtype}")
    if a.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"{caller}: {a.dtype} operands; float32, bfloat16 or float16 are "
                        f"supported")
    if a.device != b.device:
        raise ValueError(f"{caller}: {names[0]} is on {a.device}, {names[1]} on {b.device}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{caller}: inner dimensions differ: {names[0]} is "
                         f"{tuple(a.shape)}, {names[1]} is {tuple(b.shape)}")
    allowed = (torch.float32,) if a.dtype == torch.float32 else (a.dtype, torch.float32)
    dtype = out_dtype if out_dtype is not None else (out.dtype if out is not None else a.dtype)
    if dtype not in allowed:
        raise TypeError(f"{caller}: the result of {a.dtype} operands can be "
                        f"{' or '.join(map(str, allowed))}, not {dtype}")
    if out is not None and out_dtype is not None and out.dtype != out_dtype:
        raise TypeError(f"{caller}: out is {out.dtype} but out_dtype is {out_dtype}")
    check_activation(activation, caller)
    return dtype


def check_path(path, caller):
    if path is not None and path not in PATHS:
        raise ValueError(f"{caller}: path must be one of {PATHS} or None, not {path!r}")


def agree(g, rank, size, shape, dtype, device, caller, what="A shards"):
    """ValueError on every rank unless every rank passed this one's ``shape`` and ``dtype``
    (the scratch is sized by them). Collective, once per caller, group and shape."""
    key = (caller, g, rank, *shape, dtype, str(device))
    if key in agreed:
        return
    mine = (tuple(shape), str(dtype))
    everyone = [None] * size
    dist(caller).all_gather_object(everyone, mine, group=g)
    if any(e != mine for e in everyone):
        raise ValueError(f"{caller}: the ranks' {what} differ (every rank needs the same "
                         f"shape and type): " + ", ".join(
                             f"rank {r}: {e[0]} {e[1]}" for r, e in enumerate(everyone)))
    agreed.add(key)


def multiply(src, b, out_rows, activation=None):
    """``out_rows = activation(src @ b)``: the project's kernel on GPUs, torch's in float64
    on the CPU (the gloo test path)."""
    if src.device.type == "cuda":
        gemm.matmul(src, b, out_rows, activation=activation)
        return
    import torch
    out_rows.copy_(in_torch(torch.mm(src.to(torch.float64), b.to(torch.float64)),
                            activation))


def release(group: Any = None) -> None:
    """Close the peer buffers kept for ``group`` (every rank calls it); the next call makes
    them again."""
    g = group
    if g is None:
        g = dist("release").group.WORLD
    for key in [key for key in rings if key[1] is g]:
        rings.pop(key).close()
    for key in [key for key in paths if key[0] is g]:
        paths.pop(key)
    agreed.difference_update({key for key in agreed if key[1] is g})


def new_out(out, shape, dtype, device, caller):
    """``out``, after a ValueError unless it is a tensor of ``shape`` on ``device`` with a
    unit last stride; a new tensor when None."""
    import torch
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != shape \
            or out.device != device or out.stride(1) != 1:
        raise ValueError(f"{caller}: out must be a {shape} tensor on {device} with a unit "
                         f"last stride, got {getattr(out, 'shape', out)}")
    return out


def kept(key, make):
    """The exchange kept under ``key``, made by ``make()`` the first time."""
    if key not in rings:
        rings[key] = make()
    return rings[key]
