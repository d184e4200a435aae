"""Time gemm.collective.all_gather_matmul against NCCL all-gather + cuBLAS, torch's
fused_all_gather_matmul (symmetric memory) where it runs, and the lower bound, one process
per GPU:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --nproc_per_node D benchmarks/collective.py [--json FILE] [--iters N] \\
        [--transfer copy_engine,sm,sm_fused] [--push-blocks G] [--push-priority P] \\
        [--pieces P ...]

Per shape (m_shard, k, n_shard) and dtype, each method's time is the slowest rank's mean over
``--iters`` calls between CUDA events, after 6 calls of warm-up (the peer ring captures its
graphs in them) and a barrier. ``lower bound``: D x this rank's local (m_shard, k) @
(k, n_shard) matmul with our kernel, replayed as a CUDA graph (its GPU time alone; no
communication at all); ``ours, copies only``: the peer ring with no matmuls (its copies and
flags alone), in each schedule. ``ours (auto path)`` takes the path ``all_gather_matmul``
picks (said in the header line), the ring schedule and the default transfer; ``ours (peer,
S, T)`` the peer path in schedule S (``direct``: each rank pushes its own shard to every
peer in turn) moving the shards by transfer T (``--transfer``, any of
``gemm.collective.TRANSFERS``: ``copy_engine``, ``sm``, the push kernel of ``--push-blocks``
blocks per copy, ``sm_fused``, one such kernel to every peer at once, direct only; whether
the matmuls beside a push kernel leave its SMs free is ``gemm.collective.peer.PUSH_CARVEOUT``,
and the "carveout" or "no carveout" rows time the other setting); ``ours, copies only (S,
T)`` the same with no matmuls; ``(peer, ring, T, P pieces)`` (D > 2) the ring with each
copy cut into P pieces, each with its flag (``gemm.collective.peer.RING_CHUNKS``,
a forwarded piece waiting for itself alone). Tensor-core utilisation: a rank's useful flops
(2 D m k n) over its time and the dense peak (989 TFLOP/s for f16 / bf16 on an H100 SXM; the
H200 has the same). Every method's result (its out poisoned with NaN first) is compared
with NCCL all-gather + torch.mm on every rank (max |diff| / max |ref|), and the local matmuls,
ours and cuBLAS's, with float64. Rank 0 prints a table: each method's time and its speedup
over NCCL all-gather + cuBLAS (how many times faster), per shape.
"""

import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gemm  # noqa: E402
from gemm import collective  # noqa: E402
from gemm.collective import peer  # noqa: E402

PEAK = {torch.float16: 989e12, torch.bfloat16: 989e12}
SHAPES = [(1024, 4096, 1024), (1024, 4096, 4096), (4096, 8192, 8192)]


def slowest_us(fn, iters, warmup=6, stream=None):
    """us per call of ``fn`` (enqueued on ``stream``, default the current one): the mean of
    ``iters`` calls between CUDA events after ``warmup`` calls and a barrier, the slowest
    rank's. (The peer ring captures a graph per scratch set on its third and fourth calls.)"""
    stream = stream or torch.cuda.current_stream()
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
    torch.cuda.synchronize()
    t = torch.tensor([start.elapsed_time(end) / iters * 1e3], device="cuda")   # us
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def _methods(a, b, D, group, transfers, pieces=()):
    m, k = a.shape
    gathered = torch.empty((D * m, k), dtype=a.dtype, device=a.device)
    out = torch.empty((D * m, b.shape[1]), dtype=a.dtype, device=a.device)

    def nccl_cublas():
        dist.all_gather_into_tensor(gathered, a, group=group)
        return torch.mm(gathered, b, out=out)

    def ours(**kw):
        return lambda: collective.all_gather_matmul(a, b, group, out, **kw)

    methods = {"ours (auto path)": ours()}
    peer_runs = [(s, t) for t in transfers for s in collective.SCHEDULES
                 if t != "sm_fused" or s == "direct"]
    for schedule, transfer in peer_runs:
        methods[f"ours (peer, {schedule}, {transfer})"] = ours(path="peer", schedule=schedule,
                                                               transfer=transfer)
        if transfer != "copy_engine":   # the other way round from the default
            other = not peer.PUSH_CARVEOUT
            methods[f"ours (peer, {schedule}, {transfer}, "
                    f"{'carveout' if other else 'no carveout'})"] = _with(
                "PUSH_CARVEOUT", other, ours(path="peer", schedule=schedule,
                                             transfer=transfer))
    # the ring's copies in pieces (D > 2: the ring forwards), with and without the matmuls
    in_parts = [(t, p) for t in transfers if D > 2 and t != "sm_fused" for p in pieces]
    for transfer, p in in_parts:
        methods[f"ours (peer, ring, {transfer}, {p} pieces)"] = in_pieces(
            p, ours(path="peer", schedule="ring", transfer=transfer))
    methods["ours (peer, no graph)"] = without_graphs(ours(path="peer"))
    methods["ours (sendrecv)"] = ours(path="sendrecv")
    methods["NCCL all-gather + cuBLAS"] = nccl_cublas
    for schedule, transfer in peer_runs:
        methods[f"ours, copies only ({schedule}, {transfer})"] = _copies_only(
            a, b, group, out, schedule, transfer)
    for transfer, p in in_parts:
        methods[f"ours, copies only (ring, {transfer}, {p} pieces)"] = in_pieces(
            p, _copies_only(a, b, group, out, "ring", transfer))
    methods["torch fused_all_gather_matmul"] = lambda: _fused(a, b, group)
    return methods, nccl_cublas, out


def _copies_only(a, b, group, out, schedule, transfer):
    """The peer ring of ``schedule`` and ``transfer`` with no matmul at all: its copies and
    flags alone, into an out of its own. It returns None: a time, no result."""
    spare = torch.full_like(out, float("nan"))

    def call():
        chunks = peer.ring_chunks(schedule, dist.get_world_size(group),
                                  a.numel() * a.element_size())
        rings = [r for key, r in collective.group.rings.items()
                 if key[0] == "all_gather_matmul" and key[3:6] == (*a.shape, a.dtype)
                 and key[7:10] == (schedule, transfer, chunks)]
        if not rings:                              # make the ring (one call into out)
            collective.all_gather_matmul(a, b, group, out, path="peer", schedule=schedule,
                                         transfer=transfer)
            return call()
        rings[0].run(a, b, spare, a.shape[0], lambda *_: None, tag="copies only")
        return None
    return call


def _with(name, value, fn):
    """``fn`` with ``gemm.collective.peer``'s setting ``name`` at ``value`` for its calls."""
    def call():
        before = getattr(peer, name)
        setattr(peer, name, value)
        try:
            return fn()
        finally:
            setattr(peer, name, before)
    return call


def in_pieces(chunks, fn):
    """``fn`` with the ring's copies cut into ``chunks`` pieces (``peer.RING_CHUNKS``)."""
    return _with("RING_CHUNKS", chunks, fn)


def without_graphs(fn):
    """``fn`` with the peer path's graph replay off: every call enqueued."""
    return _with("GRAPHS", False, fn)


def graphed(fn):
    """``fn`` captured once as a CUDA graph: its GPU time without the host's launch cost."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def _fused(a, b, group):
    """torch's symmetric-memory fused all-gather matmul (last of the methods: a rank that
    cannot run it raises, and so do the others, the same way)."""
    from torch.distributed import _symmetric_memory as symm
    symm.enable_symm_mem_for_group(group.group_name)
    return torch.ops.symm_mem.fused_all_gather_matmul(a, [b], gather_dim=0,
                                                      group_name=group.group_name)[1][0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--transfer", default=",".join(collective.TRANSFERS),
                    help="the peer path's transfers to time, comma-separated (of "
                         f"{', '.join(collective.TRANSFERS)})")
    ap.add_argument("--push-blocks", type=int, default=peer.PUSH_BLOCKS,
                    help="the SM push kernel's grid")
    ap.add_argument("--push-priority", type=int, default=peer.PUSH_PRIORITY,
                    help="the comm stream's priority where a kernel pushes (-1 high, 0 normal)")
    ap.add_argument("--pieces", type=int, nargs="*", default=[2, 4],
                    help="also time the ring (D > 2) with each copy cut into this many pieces")
    args = ap.parse_args()
    transfers = args.transfer.split(",")
    for t in transfers:
        if t not in collective.TRANSFERS:
            ap.error(f"--transfer: {t!r} is none of {collective.TRANSFERS}")
    peer.PUSH_BLOCKS, peer.PUSH_PRIORITY = args.push_blocks, args.push_priority
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    group, D = dist.group.WORLD, dist.get_world_size()
    path, reason = collective.ring_path(torch.empty(1, device="cuda"), group)
    rows = []
    for dtype in (getattr(torch, d) for d in args.dtypes.split(",")):
        for m, k, n in SHAPES:
            g = torch.Generator(device="cuda").manual_seed(rank * 7 + m + k + n)
            a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
            b = torch.randn(k, n, device="cuda", dtype=dtype, generator=g)
            methods, reference, out = _methods(a, b, D, group, transfers, args.pieces)
            ref = reference().clone()
            flops = 2.0 * D * m * k * n
            local_out = torch.empty((m, n), device="cuda", dtype=dtype)
            t_eager = slowest_us(lambda: gemm.matmul(a, b, local_out), args.iters)
            t_local = slowest_us(graphed(lambda: gemm.matmul(a, b, local_out)), args.iters)
            t_cublas = slowest_us(lambda: torch.mm(a, b), args.iters)
            local_out.fill_(float("nan"))
            gemm.matmul(a, b, local_out)
            local_ref = a.double() @ b.double()
            local_err = {"ours": (local_out.double() - local_ref).abs().max().item(),
                         "cuBLAS": (torch.mm(a, b).double() - local_ref).abs().max().item(),
                         "ours vs cuBLAS": (local_out.double() - torch.mm(a, b).double())
                         .abs().max().item()}
            row = {"D": D, "dtype": str(dtype).split(".")[-1], "m_shard": m, "k": k,
                   "n_shard": n, "local ours us": t_local, "local ours eager us": t_eager,
                   "local cuBLAS us": t_cublas, "lower bound us": D * t_local,
                   "local max abs error vs float64": local_err}
            for name, fn in methods.items():
                try:
                    t = slowest_us(fn, args.iters)
                    out.fill_(float("nan"))     # every method writes this out: poison it
                    got = fn()                  # after warm-up: a graph replay where graphed
                except Exception as e:     # noqa: BLE001  (reported in the table)
                    row[name] = f"did not run: {type(e).__name__}: {e}"[:200]
                    continue
                if got is None:                 # copies only: a time, no result
                    row[name] = {"us": t, "tc util": 0.0}
                    if rank == 0:
                        print(f"  {name}: {t:.1f} us", flush=True)
                    continue
                got = got.clone()
                err = torch.tensor([((got.float() - ref.float()).abs().max()
                                     / ref.float().abs().max()).item()], device="cuda")
                dist.all_reduce(err, op=dist.ReduceOp.MAX)
                row[name] = {"us": t, "tc util": flops / (t * 1e-6) / PEAK[dtype],
                             "max rel diff vs NCCL+cuBLAS": err.item()}
                if rank == 0:
                    print(f"  {name}: {t:.1f} us, max rel diff {err.item():.2e}", flush=True)
            row["lower bound tc util"] = flops / (D * t_local * 1e-6) / PEAK[dtype]
            rows.append(row)
            if rank == 0:
                print(json.dumps(row), flush=True)
    if rank == 0:
        report(rows, D, path, reason, _table, args.json, transfers=transfers,
               push_blocks=args.push_blocks, push_priority=args.push_priority,
               ring_chunks=peer.RING_CHUNKS, push_carveout=peer.PUSH_CARVEOUT,
               default_transfer=collective.DEFAULT_TRANSFER)
    dist.destroy_process_group()


def report(rows, D, path, reason, table, json_path, **more):
    """Rank 0's ending: the run's head line (host, GPU, D, path, torch, date, ``more``),
    ``table(rows, D)``, and both written to ``json_path`` where one is given."""
    head = {"host": socket.gethostname(), "gpu": torch.cuda.get_device_name(), "D": D,
            "path": path, "reason": reason, "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d"), **more}
    print(json.dumps(head))
    table(rows, D)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"head": head, "rows": rows}, f, indent=1)


def _table(rows, D):
    """One line per method, one column per shape and dtype: the time (us) and the speedup over
    NCCL all-gather + cuBLAS (its time / the method's; the lower bound's too)."""
    names = [n for n in rows[0] if isinstance(rows[0][n], (dict, str)) and n.startswith(
        ("ours", "NCCL", "torch"))] if rows else []
    heads = [f"({r['m_shard']},{r['k']},{r['n_shard']}) {r['dtype']}" for r in rows]
    print(f"\nD={D}: us (speedup over NCCL all-gather + cuBLAS)\n| method | "
          + " | ".join(heads) + " |\n|---|" + "---|" * len(rows))

    def cell(us, r):
        ref = r["NCCL all-gather + cuBLAS"]
        if not isinstance(ref, dict):
            return f"{us:.1f}"
        return f"{us:.1f} ({ref['us'] / us:.2f}x)"
    for n in names:
        print(f"| {n} | " + " | ".join(cell(r[n]["us"], r) if isinstance(r[n], dict)
                                      else "n/a" for r in rows) + " |")
    print("| lower bound | " + " | ".join(cell(r["lower bound us"], r) for r in rows) + " |")


if __name__ == "__main__":
    main()
