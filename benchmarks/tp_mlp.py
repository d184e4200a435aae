"""The second half of tensor parallelism and the whole block: gemm.collective's
matmul_reduce_scatter against cuBLAS + NCCL reduce-scatter and torch's
fused_matmul_reduce_scatter, and a tensor-parallel MLP block (all-gather matmul with gelu,
then matmul reduce-scatter) against the unfused NCCL + cuBLAS block and torch's
symmetric-memory fused ops, one process per GPU:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \\
        torchrun --nproc_per_node D benchmarks/tp_mlp.py [--json FILE] [--iters N]
        [--shapes TxHxI ...] [--dtype bfloat16] [--weights linear|in_out]

A shape is tokens T, hidden H, intermediate I. Rank r holds x_r (T / D, H) and the weights
as ``nn.Linear`` stores them, W1_r (I / D, H) and W2_r (H, I / D) (``--weights in_out``: stored
transposed, (H, I / D) and (I / D, H) row-major, so the B operands are N-major); the block is
``y_r =
ReduceScatter(gelu(AllGather(x) @ W1_r.T) @ W2_r.T)`` (T / D, H). The reduce-scatter alone is
the block's second matmul: (T, I / D) @ W2_r.T on every rank, each rank's (T / D, H) rows of
the sum.

Each method's time is the slowest rank's mean over ``--iters`` eager calls between CUDA
events after 6 calls of warm-up and a barrier (benchmarks/collective.py's ``slowest_us``; the
peer path replays its own CUDA graph from the third call on, as a user's loop does). "lower
bound": the local matmuls alone, ours, replayed as a CUDA graph (no communication). Every
method's result is compared with the unfused NCCL + cuBLAS one on every rank (max |diff| /
max |ref|, the largest over the ranks), and ours with float64 at the first shape. Rank 0
prints a table.
"""

import argparse
import importlib
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gemm  # noqa: E402
from gemm import collective  # noqa: E402
from collective import (graphed, report, slowest_us,  # noqa: E402  (benchmarks/collective.py)
                        without_graphs)

SHAPES = [(4096, 4096, 14336), (8192, 4096, 14336), (16384, 8192, 28672)]


def _symm_ops(group):
    """(torch.ops.symm_mem, the group's name): the ops exist once torch's symmetric-memory
    module is imported."""
    importlib.import_module("torch.distributed._symmetric_memory")     # registers the ops
    return torch.ops.symm_mem, group.group_name


def reduce_scatter_methods(h, w2, D, group):
    """``w2``: the (k, H) B, W2_r.T."""
    T, H = h.shape[0], w2.shape[1]
    y = torch.empty((T // D, H), dtype=h.dtype, device=h.device)
    part = torch.empty((T, H), dtype=h.dtype, device=h.device)

    def nccl_cublas():
        torch.mm(h, w2, out=part)
        dist.reduce_scatter_tensor(y, part, group=group)
        return y
    def torch_fused():
        ops, name = _symm_ops(group)
        return ops.fused_matmul_reduce_scatter(h, w2, "sum", 0, name)
    ours = lambda: collective.matmul_reduce_scatter(h, w2, group, y)    # noqa: E731
    return {
        "ours (auto path)": ours,
        "ours (peer, no graph)": without_graphs(ours),
        "ours (sendrecv)": lambda: collective.matmul_reduce_scatter(h, w2, group, y,
                                                                   path="sendrecv"),
        "cuBLAS + NCCL reduce-scatter": nccl_cublas,
        "torch fused_matmul_reduce_scatter": torch_fused,
    }, nccl_cublas, (lambda: gemm.matmul(h, w2, part))


def block_methods(x, w1, w2, D, group):
    """``w1``, ``w2``: the B operands, W1_r.T (H, I / D) and W2_r.T (I / D, H)."""
    m, H = x.shape
    T = D * m
    xg = torch.empty((T, H), dtype=x.dtype, device=x.device)
    h = torch.empty((T, w1.shape[1]), dtype=x.dtype, device=x.device)
    part = torch.empty((T, H), dtype=x.dtype, device=x.device)
    y = torch.empty((m, H), dtype=x.dtype, device=x.device)

    def unfused():
        dist.all_gather_into_tensor(xg, x, group=group)
        hh = F.gelu(torch.mm(xg, w1))
        torch.mm(hh, w2, out=part)
        dist.reduce_scatter_tensor(y, part, group=group)
        return y

    def ours():
        collective.all_gather_matmul(x, w1, group, h, activation="gelu")
        return collective.matmul_reduce_scatter(h, w2, group, y)

    def torch_fused():
        ops, name = _symm_ops(group)
        hh = ops.fused_all_gather_matmul(x, [w1], gather_dim=0, group_name=name)[1][0]
        return ops.fused_matmul_reduce_scatter(F.gelu(hh), w2, "sum", 0, name)

    def local():
        gemm.matmul(xg, w1, h, activation="gelu")
        gemm.matmul(h, w2, part)
    return {"ours (auto path)": ours, "ours (peer, no graph)": without_graphs(ours),
            "unfused NCCL + cuBLAS": unfused, "torch fused (symm_mem)": torch_fused}, \
        unfused, local


def _rel_diff(got, ref):
    err = torch.tensor([((got.float() - ref.float()).abs().max()
                         / ref.float().abs().max()).item()], device="cuda")
    dist.all_reduce(err, op=dist.ReduceOp.MAX)
    return err.item()


def run_methods(methods, reference, local, iters, flops, rank, label):
    ref = reference().clone()
    row = {"lower bound us": slowest_us(graphed(local), iters)}
    for name, fn in methods.items():
        try:
            t = slowest_us(fn, iters)
            got = fn()
            got.fill_(float("nan"))                  # poisoned: the next call rewrites it
            got = fn().clone()
        except Exception as e:     # noqa: BLE001  (reported in the table)
            row[name] = f"did not run: {type(e).__name__}: {e}"[:200]
            if rank == 0:
                print(f"  {label} {name}: {row[name]}", flush=True)
            continue
        row[name] = {"us": t, "TFLOP/s": flops / (t * 1e-6) / 1e12,
                     "max rel diff vs unfused": _rel_diff(got, ref)}
        if rank == 0:
            diff = row[name]["max rel diff vs unfused"]
            print(f"  {label} {name}: {t:.1f} us, max rel diff {diff:.2e}", flush=True)
    return row


def weights(H, I, D, dtype, g, in_out):
    """The B operands W1_r.T (H, I / D) and W2_r.T (I / D, H): views of ``nn.Linear``'s
    weights (K-major), or with ``in_out`` row-major matrices (N-major)."""
    if in_out:
        return (torch.randn(H, I // D, device="cuda", dtype=dtype, generator=g) / H ** 0.5,
                torch.randn(I // D, H, device="cuda", dtype=dtype, generator=g) / I ** 0.5)
    return ((torch.randn(I // D, H, device="cuda", dtype=dtype, generator=g) / H ** 0.5).T,
            (torch.randn(H, I // D, device="cuda", dtype=dtype, generator=g) / I ** 0.5).T)


def float64_check(D, rank, group, dtype, in_out):
    """Errors against float64 of the gathered operands, max |err| / max |ref| (the largest
    over the ranks), at 128 rows a rank: the block (ours), and the reduce-scatter alone,
    ours and cuBLAS + NCCL reduce-scatter (partials of the operands' type in both)."""
    g = torch.Generator(device="cuda").manual_seed(11 + rank)
    m, H, I = 128, 256, 512 * D
    x = torch.randn(m, H, device="cuda", dtype=dtype, generator=g)
    w1, w2 = weights(H, I, D, dtype, g, in_out)
    h = collective.all_gather_matmul(x, w1, group, activation="gelu")
    y = collective.matmul_reduce_scatter(h, w2, group)
    y_rs = torch.empty_like(y)
    dist.reduce_scatter_tensor(y_rs, torch.mm(h, w2), group=group)
    hs, w1s, w2s = ([torch.empty_like(t) for _ in range(D)] for t in (h, w1, w2))
    xs = [torch.empty_like(x) for _ in range(D)]
    for parts, t in ((xs, x), (hs, h), (w1s, w1.contiguous()), (w2s, w2.contiguous())):
        dist.all_gather(parts, t, group=group)
    rows = slice(rank * m, (rank + 1) * m)
    xg = torch.cat(xs).double()
    block = sum(F.gelu(xg @ a.double()) @ b.double() for a, b in zip(w1s, w2s))[rows]
    rs = sum(a.double() @ b.double() for a, b in zip(hs, w2s))[rows]
    return {"block, ours": _rel_diff(y.double(), block),
            "reduce-scatter, ours": _rel_diff(y.double(), rs),
            "reduce-scatter, cuBLAS + NCCL": _rel_diff(y_rs.double(), rs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--shapes", nargs="+", default=None, metavar="TxHxI")
    ap.add_argument("--weights", default="linear", choices=["linear", "in_out"],
                    help="the weights as nn.Linear stores them (B K-major), or (in, out)")
    args = ap.parse_args()
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    group, D = dist.group.WORLD, dist.get_world_size()
    dtype = getattr(torch, args.dtype)
    path, reason = collective.ring_path(torch.empty(1, device="cuda"), group)
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes] if args.shapes else SHAPES
    f64 = float64_check(D, rank, group, dtype, args.weights == "in_out")
    if rank == 0:
        errors = ", ".join(f"{k} {v:.2e}" for k, v in f64.items())
        print(f"D={D} {path}: {reason}\nweights: {args.weights}\nagainst float64 (128 rows a "
              f"rank), max |err| / max |ref|: {errors}", flush=True)
    rows = []
    for T, H, I in shapes:
        g = torch.Generator(device="cuda").manual_seed(rank * 7 + T + H + I)
        x = torch.randn(T // D, H, device="cuda", dtype=dtype, generator=g)
        w1, w2 = weights(H, I, D, dtype, g, args.weights == "in_out")
        h = torch.randn(T, I // D, device="cuda", dtype=dtype, generator=g)
        rs_flops = 2.0 * T * (I // D) * H
        row = {"D": D, "T": T, "H": H, "I": I, "dtype": args.dtype}
        row["reduce-scatter"] = run_methods(*reduce_scatter_methods(h, w2, D, group),
                                            args.iters, rs_flops, rank, "rs")
        row["block"] = run_methods(*block_methods(x, w1, w2, D, group), args.iters,
                                   2 * rs_flops, rank, "block")
        rows.append(row)
        if rank == 0:
            print(json.dumps(row), flush=True)
    if rank == 0:
        report(rows, D, path, reason, _table, args.json, **{"float64 check": f64})
    dist.destroy_process_group()


def _cell(v):
    return f"{v['us']:9.1f}" if isinstance(v, dict) else "      n/a"


def _table(rows, D):
    for part, base, names in (
            ("reduce-scatter", "cuBLAS + NCCL reduce-scatter",
             ["ours (auto path)", "ours (peer, no graph)", "ours (sendrecv)",
              "cuBLAS + NCCL reduce-scatter", "torch fused_matmul_reduce_scatter"]),
            ("block", "unfused NCCL + cuBLAS",
             ["ours (auto path)", "ours (peer, no graph)", "unfused NCCL + cuBLAS",
              "torch fused (symm_mem)"])):
        print(f"\nD={D} {part}, us: shape TxHxI | " + " | ".join(names)
              + f" | lower bound | ours vs {base} | ours vs torch fused | lower bound / ours")
        for r in rows:
            c = r[part]
            ours = c["ours (auto path)"]
            fused = c[names[-1]]
            ratio = (f"{c[base]['us'] / ours['us']:.2f}x" if isinstance(ours, dict)
                     and isinstance(c[base], dict) else "n/a")
            vs_fused = (f"{fused['us'] / ours['us']:.2f}x" if isinstance(ours, dict)
                        and isinstance(fused, dict) else "n/a")
            bound = (f"{c['lower bound us'] / ours['us']:.2f}" if isinstance(ours, dict)
                     else "n/a")
            print(f"  {r['T']}x{r['H']}x{r['I']} | " + " | ".join(_cell(c[n]) for n in names)
                  + f" | {c['lower bound us']:9.1f} | {ratio} | {vs_fused} | {bound}")


if __name__ == "__main__":
    main()
