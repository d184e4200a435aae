"""Cases of gemm.collective.all_gather_matmul and matmul_reduce_scatter run by D processes (a
script that the tests run in a child process: torch.distributed is initialised only there).

    python tests/collective_cases.py MODE NPROCS

MODE: ``cpu`` (gloo, CPU tensors: the send/recv ring), ``gpu_shared`` (gloo group, every
process on GPU 0: the peer ring through CUDA IPC within one GPU), ``gpu`` (one process per GPU,
NCCL: both paths), each path in both schedules, the peer path by each transfer
(``collective.TRANSFERS``: the copy engines, the SM push kernel, the fused push of the direct
schedule). Each rank checks its result against float64
``cat(all_gather(A)) @ B_r`` (the reduce-scatter: its rows of ``sum_q a_q @ b_q``, each rank's
k different) on fresh random data, the output poisoned with NaN first; rank 0
prints one JSON line ``{case: max error / tolerance}`` (over the ranks) and ``{"path ...":
reason}``.
"""

import functools
import itertools
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gemm import collective, hopper  # noqa: E402

TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}


def _case(rank, size, device, dtype, m, k, n, path, out_dtype=None, calls=1, seed=0,
          reuse=False, schedule="ring", transfer=None):
    """Max over calls of max |got - ref| / (TOL * max |ref|) for this rank (the operands are
    exact in float64, so the error is the f32 accumulation's and the out's rounding).
    ``reuse``: every call refills the same tensors (from the second call on, the peer ring
    replays a CUDA graph)."""
    worst = 0.0
    kept = None
    for call in range(calls):
        g = torch.Generator().manual_seed(1000 * seed + 10 * call + rank)
        a = torch.randn(m, k, generator=g).to(dtype)
        b = torch.randn(k, n, generator=g).to(dtype)
        shards = [torch.zeros_like(a) for _ in range(size)]
        _gather_cpu(shards, a)
        ref = torch.cat(shards).double() @ b.double()
        out_t = out_dtype or dtype
        if kept is None or not reuse:
            kept = (torch.empty_like(a, device=device), torch.empty_like(b, device=device),
                    torch.empty((size * m, n), dtype=out_t, device=device))
        da, db, out = kept
        da.copy_(a)
        db.copy_(b)
        out.fill_(float("nan"))
        got = collective.all_gather_matmul(da, db, out=out, path=path, schedule=schedule,
                                           transfer=transfer)
        assert got is out
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        err = (got.double().cpu() - ref).abs().max().item()
        tol = max(TOL[dtype], TOL[out_t]) * ref.abs().max().item()
        worst = max(worst, err / tol if err == err else float("inf"))
    return worst


def _rs_case(rank, size, device, dtype, m_block, k, n, path, out_dtype=None, calls=1, seed=0,
             reuse=False, transfer=None):
    """The reduce-scatter's max over calls of max |got - ref| / tol for this rank, ref its
    block of float64 ``sum_q a_q @ b_q`` (rank q's k is ``k + 8 q``) and tol ``TOL`` times
    (max |ref| + the sum over q of max |a_q @ b_q| in the block): each partial is rounded
    to the out's type before the float32 sum."""
    worst = 0.0
    kept = None
    rows = size * m_block
    for call in range(calls):
        g = torch.Generator().manual_seed(1000 * seed + 10 * call + rank)
        a = torch.randn(rows, k + 8 * rank, generator=g).to(dtype)
        b = torch.randn(k + 8 * rank, n, generator=g).to(dtype)
        everyone = [None] * size
        dist.all_gather_object(everyone, (a, b))
        block = slice(rank * m_block, (rank + 1) * m_block)
        parts = [aq.double()[block] @ bq.double() for aq, bq in everyone]
        ref = sum(parts)
        out_t = out_dtype or dtype
        if kept is None or not reuse:
            kept = (torch.empty_like(a, device=device), torch.empty_like(b, device=device),
                    torch.empty((m_block, n), dtype=out_t, device=device))
        da, db, out = kept
        da.copy_(a)
        db.copy_(b)
        out.fill_(float("nan"))
        got = collective.matmul_reduce_scatter(da, db, out=out, path=path, transfer=transfer)
        assert got is out
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        err = (got.double().cpu() - ref).abs().max().item()
        tol = max(TOL[dtype], TOL[out_t]) * (ref.abs().max().item()
                                             + sum(p.abs().max().item() for p in parts))
        worst = max(worst, err / tol if err == err else float("inf"))
    return worst


def _pieces_cases(rank, size, device):
    """The peer ring's cases with each copy cut into 3 pieces (``peer.RING_CHUNKS``; one where
    D = 2 or a shard is under 3 x 256 bytes), by the copy engines and the push kernel."""
    results = {}
    before, collective.peer.RING_CHUNKS = collective.peer.RING_CHUNKS, 3
    try:
        for tr in ("copy_engine", "sm"):
            name = f"peer ring {tr} in pieces"
            run = functools.partial(_case, rank, size, device, path="peer", schedule="ring",
                                    transfer=tr)
            results[f"{name} bf16 96x64x40"] = run(torch.bfloat16, 96, 64, 40, seed=7)
            results[f"{name} bf16 5x3x7"] = run(torch.bfloat16, 5, 3, 7, seed=8)
            results[f"{name} f16 5 calls in a row 128x256x64"] = run(
                torch.float16, 128, 256, 64, calls=5, seed=9)
            results[f"{name} bf16 6 calls on the same tensors 64x128x32"] = run(
                torch.bfloat16, 64, 128, 32, calls=6, seed=10, reuse=True)
    finally:
        collective.peer.RING_CHUNKS = before
    return results


def _gather_cpu(shards, a):
    """all_gather of CPU copies through the group (gloo or nccl alike, via objects)."""
    objs = [None] * len(shards)
    dist.all_gather_object(objs, a)
    for s, o in zip(shards, objs):
        s.copy_(o)


def _record_carveouts():
    """A list that gets ``gemm.hopper``'s SM carveout at each per-shard product the
    collectives make from now on (``gemm.collective.group.multiply``, wrapped)."""
    seen, multiply = [], collective.group.multiply

    def recorded(*args, **kw):
        seen.append(hopper._carveout)
        return multiply(*args, **kw)
    collective.group.multiply = recorded
    return seen


def _worker(rank, size, mode, init, queue):
    backend = "nccl" if mode == "gpu" else "gloo"
    if mode == "cpu":
        device = torch.device("cpu")
    else:
        device = torch.device("cuda", rank if mode == "gpu" else 0)
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=size)
    results = {}
    # the push kernel's SMs left free by the products beside it (off by default): the cases
    # check the products under the carveout, and record that they ran under it
    collective.peer.PUSH_CARVEOUT = True
    carveouts, seen = {}, _record_carveouts()
    try:
        path, reason = collective.ring_path(torch.empty(1, device=device))
        results[f"path {mode}"] = f"{path}: {reason}"
        results["ranks"] = size
        paths = [path] if mode != "gpu" else ["peer", "sendrecv"] if path == "peer" \
            else ["sendrecv"]
        for p, sched in itertools.product(paths, collective.SCHEDULES):
            # the peer path by each transfer the schedule takes (the send/recv path has none)
            for tr in ([t for t in collective.TRANSFERS if t != "sm_fused" or sched == "direct"]
                       if p == "peer" else [None]):
                name = f"{p} {sched}" + (f" {tr}" if tr else "")
                run = functools.partial(_case, rank, size, device, path=p, schedule=sched,
                                        transfer=tr)
                start = len(seen)
                for dtype in (torch.bfloat16, torch.float16, torch.float32):
                    results[f"{name} {dtype} 96x64x40"] = run(dtype, 96, 64, 40, seed=1)
                results[f"{name} bf16 37x48x19, f32 out"] = run(
                    torch.bfloat16, 37, 48, 19, out_dtype=torch.float32, seed=2)
                # 30-byte shards: no 16-byte vectors (the SM transfers copy by the engines)
                results[f"{name} bf16 5x3x7"] = run(torch.bfloat16, 5, 3, 7, seed=6)
                results[f"{name} f16 5 calls in a row 128x256x64"] = run(
                    torch.float16, 128, 256, 64, calls=5, seed=3)
                results[f"{name} bf16 6 calls on the same tensors 64x128x32"] = run(
                    torch.bfloat16, 64, 128, 32, calls=6, seed=4, reuse=True)
                results[f"{name} bf16 gelu 48x64x40"] = _gelu_case(rank, size, device, p,
                                                                   sched, tr)
                if tr:
                    carveouts.setdefault(tr, set()).update(seen[start:])
            if p == "peer" and sched == "ring":         # each copy in 3 pieces
                results.update(_pieces_cases(rank, size, device))
            # the reduce-scatter (one schedule), on the peer path by each transfer it takes
            for tr in (("copy_engine", "sm") if p == "peer" and sched == "ring" else
                       (None,) if sched == "ring" else ()):
                name = f"{p}" + (f" {tr}" if tr else "")
                rs = functools.partial(_rs_case, rank, size, device, path=p, transfer=tr)
                start = len(seen)
                for dtype in (torch.bfloat16, torch.float16, torch.float32):
                    results[f"{name} reduce-scatter {dtype} 32x64x40 a block"] = rs(
                        dtype, 32, 64, 40, seed=11)
                results[f"{name} reduce-scatter bf16 f32 out 8x40x24"] = rs(
                    torch.bfloat16, 8, 40, 24, out_dtype=torch.float32, seed=12)
                results[f"{name} reduce-scatter f16 4 calls in a row 64x128x72"] = rs(
                    torch.float16, 64, 128, 72, calls=4, seed=13)
                results[f"{name} reduce-scatter bf16 5 calls on the same tensors 16x96x32"] = \
                    rs(torch.bfloat16, 16, 96, 32, calls=5, seed=14, reuse=True)
                if tr:
                    carveouts.setdefault(f"rs {tr}", set()).update(seen[start:])
        # {transfer: the SM carveouts the per-shard products ran under}
        results["carveouts"] = {tr: sorted(c) for tr, c in carveouts.items()}
        rings = list(collective.group.rings.values())
        if rings:
            results["peer graphs"] = (sum(len(r.graphs) for r in rings),
                                      [r.graph_error for r in rings if r.graph_error])
            # {transfer: push kernels enqueued} of the all-gather's rings and of the
            # reduce-scatter's exchanges
            pushes, rs_pushes = {}, {}
            for key, r in collective.group.rings.items():
                which = pushes if key[0] == "all_gather_matmul" else rs_pushes
                which[r.transfer] = which.get(r.transfer, 0) + r.kernel_pushes
            results["push kernels"], results["rs push kernels"] = pushes, rs_pushes
            # (transfer, shard bytes, pieces a copy) of the all-gather's ring schedules
            results["ring pieces"] = sorted({
                (r.transfer, r.slot_bytes, r.chunks) for key, r in collective.group.rings.items()
                if key[0] == "all_gather_matmul" and key[7] == "ring"})
        results["errors"] = _errors(device)
        results["errors"]["shards differ"] = _shards_differ(rank, device)
        results["rs errors"] = _rs_errors(device, size)
        results["rs errors"]["products differ"] = _products_differ(rank, device, size)
        results["group errors"], results["group of one on rank 0"] = _group_errors(rank,
                                                                                   device)
        if mode == "gpu":           # an NCCL group: CPU tensors are refused
            a, b = torch.ones(4, 8), torch.ones(8, 6)
            results["cpu tensors, nccl"] = _outcomes({
                "all-gather": lambda: collective.all_gather_matmul(a, b),
                "reduce-scatter": lambda: collective.matmul_reduce_scatter(a, b)})
        results["release"] = _release_and_again(rank, size, device)
        if "peer" in paths:
            results["peer bf16 4 calls on two streams, no sync between 64x96x40"] = \
                _two_streams(rank, size, device)
            results["peer gelu 4 calls, then none 4 calls, on the same tensors"] = \
                _activation_then_none(rank, size, device)
    finally:
        gathered = [None] * size
        dist.all_gather_object(gathered, results)
        dist.destroy_process_group()
    if rank == 0:
        merged = {}
        for r in gathered:
            for key, v in r.items():
                merged[key] = max(merged.get(key, v), v) if isinstance(v, float) else v
        queue.put(merged)           # (a SimpleQueue: written by the time put returns)
    # The results are in: leave without the interpreter's teardown, where gloo's threads
    # sometimes abort the process ("terminate called without an active exception", torch
    # 2.13 on the CPU), which would fail the run after every case passed.
    os._exit(0)


def _errors(device):
    """{bad call: (error type, message)} for malformed arguments (nothing is sent)."""
    a = torch.ones(4, 8, device=device, dtype=torch.float16)
    b = torch.ones(8, 6, device=device, dtype=torch.float16)
    calls = {
        "inner dims": lambda: collective.all_gather_matmul(a, b.T),
        "mixed types": lambda: collective.all_gather_matmul(a, b.float()),
        "3-D": lambda: collective.all_gather_matmul(a[None], b),
        "int": lambda: collective.all_gather_matmul(a.int(), b.int()),
        "out shape": lambda: collective.all_gather_matmul(a, b, out=torch.empty(
            4, 6, device=device, dtype=torch.float16)),
        "out_dtype": lambda: collective.all_gather_matmul(a, b, out_dtype=torch.bfloat16),
        "path": lambda: collective.all_gather_matmul(a, b, path="ring"),
        "schedule": lambda: collective.all_gather_matmul(a, b, schedule="tree"),
        "transfer": lambda: collective.all_gather_matmul(a, b, transfer="nvls"),
        "sm_fused in the ring": lambda: collective.all_gather_matmul(a, b,
                                                                     transfer="sm_fused"),
        "numpy": lambda: collective.all_gather_matmul(a.cpu().numpy(), b),
    }
    return _outcomes(calls)


def _gelu_case(rank, size, device, path, schedule, transfer=None):
    """all_gather_matmul with activation="gelu" against float64 gelu of the gathered product:
    max error / tolerance."""
    g = torch.Generator().manual_seed(900 + rank)
    a = torch.randn(48, 64, generator=g).to(torch.bfloat16)
    b = torch.randn(64, 40, generator=g).to(torch.bfloat16)
    shards = [torch.zeros_like(a) for _ in range(size)]
    _gather_cpu(shards, a)
    ref = torch.nn.functional.gelu(torch.cat(shards).double() @ b.double())
    out = torch.full((size * 48, 40), float("nan"), dtype=torch.bfloat16, device=device)
    collective.all_gather_matmul(a.to(device), b.to(device), out=out, path=path,
                                 schedule=schedule, activation="gelu", transfer=transfer)
    err = (out.double().cpu() - ref).abs().max().item()
    return err / (TOL[torch.bfloat16] * ref.abs().max().item()) if err == err else float("inf")


def _rs_errors(device, size):
    """{bad call of matmul_reduce_scatter: (error type, message)}."""
    a = torch.ones(4 * size, 8, device=device, dtype=torch.float16)
    b = torch.ones(8, 6, device=device, dtype=torch.float16)
    mrs = collective.matmul_reduce_scatter
    calls = {
        "inner dims": lambda: mrs(a, b.T),
        "mixed types": lambda: mrs(a, b.float()),
        "rows": lambda: mrs(a[:4 * size - 1], b),
        "out shape": lambda: mrs(a, b, out=torch.empty(4 * size, 6, device=device,
                                                       dtype=torch.float16)),
        "out_dtype": lambda: mrs(a, b, out_dtype=torch.bfloat16),
        "path": lambda: mrs(a, b, path="ring"),
        "numpy": lambda: mrs(a, b.cpu().numpy()),
        "transfer": lambda: mrs(a, b, transfer="nvls"),
        "sm_fused": lambda: mrs(a, b, transfer="sm_fused"),
    }
    return _outcomes(calls)


def _products_differ(rank, device, size):
    """Rank 0's B has one more column than the others': every rank gets a ValueError."""
    a = torch.ones(2 * size, 8, device=device, dtype=torch.float16)
    b = torch.ones(8, 6 + (rank == 0), device=device, dtype=torch.float16)
    return _outcomes({"": lambda: collective.matmul_reduce_scatter(a, b)})[""]


def _group_errors(rank, device):
    """({bad call: (error type, message)}, error / tolerance of rank 0's calls): both
    functions called with a group that is not one, and, by ranks other than 0, with a
    subgroup of rank 0 alone, which rank 0 runs as a group of one (checked: 0 elsewhere)."""
    a = torch.ones(4, 8, device=device, dtype=torch.float16)
    b = torch.ones(8, 6, device=device, dtype=torch.float16)
    alone = dist.new_group([0])
    calls = {"not a group, all-gather": lambda: collective.all_gather_matmul(a, b, "world"),
             "not a group, reduce-scatter": lambda: collective.matmul_reduce_scatter(a, b, 0)}
    if rank != 0:
        calls["outside the group, all-gather"] = lambda: collective.all_gather_matmul(
            a, b, alone)
        calls["outside the group, reduce-scatter"] = lambda: collective.matmul_reduce_scatter(
            a, b, alone)
        return _outcomes(calls), 0.0
    ag = collective.all_gather_matmul(a, b, alone)
    rs = collective.matmul_reduce_scatter(a, b, alone)
    err = max((t.double().cpu() - 8.0).abs().max().item() for t in (ag, rs))
    ok = ag.shape == rs.shape == (4, 6)
    collective.release(alone)
    return _outcomes(calls), (err if ok else float("inf"))


def _outcomes(calls):
    got = {}
    for name, call in calls.items():
        try:
            call()
            got[name] = ("no error", "")
        except Exception as e:     # noqa: BLE001  (the test checks the type)
            got[name] = (type(e).__name__, str(e))
    return got


def _shards_differ(rank, device):
    """Rank 0's shard has one more row than the others': every rank gets a ValueError."""
    a = torch.ones(4 + (rank == 0), 8, device=device, dtype=torch.float16)
    b = torch.ones(8, 6, device=device, dtype=torch.float16)
    return _outcomes({"": lambda: collective.all_gather_matmul(a, b)})[""]


def _release_and_again(rank, size, device):
    """release() forgets the group's rings and paths (closing the peer mappings); a call after
    it makes them again and is still right: its max error / tolerance."""
    dist.barrier()
    collective.release()
    kept = collective.group
    assert not kept.rings and not kept.paths and not kept.agreed
    return _case(rank, size, device, torch.bfloat16, 64, 128, 32, None, seed=5)


def _activation_then_none(rank, size, device):
    """all_gather_matmul on the same tensors 4 times with gelu, then 4 times without (the
    graphs of the first calls must not replay for the last): the last result's max error /
    tolerance against the plain product."""
    g = torch.Generator().manual_seed(8100 + rank)
    a = torch.randn(32, 64, generator=g).to(torch.bfloat16)
    b = torch.randn(64, 24, generator=g).to(torch.bfloat16)
    shards = [torch.zeros_like(a) for _ in range(size)]
    _gather_cpu(shards, a)
    ref = torch.cat(shards).double() @ b.double()
    da, db = a.to(device), b.to(device)
    out = torch.empty((size * 32, 24), dtype=torch.bfloat16, device=device)
    for activation in ["gelu"] * 4 + [None] * 4:
        out.fill_(float("nan"))
        collective.all_gather_matmul(da, db, out=out, path="peer", activation=activation)
    torch.cuda.synchronize(device)
    err = (out.double().cpu() - ref).abs().max().item()
    return err / (TOL[torch.bfloat16] * ref.abs().max().item()) if err == err else float("inf")


def _two_streams(rank, size, device, calls=4):
    """``calls`` calls enqueued on two streams in turn with no synchronization between them
    (the ring orders them: each waits for the one before), then each result checked: the
    max error / tolerance."""
    m, k, n = 64, 96, 40
    dtype = torch.bfloat16
    host, dev = [], []
    for call in range(calls):
        g = torch.Generator().manual_seed(7000 + 10 * call + rank)
        a, b = torch.randn(m, k, generator=g).to(dtype), torch.randn(k, n, generator=g).to(dtype)
        shards = [torch.zeros_like(a) for _ in range(size)]
        _gather_cpu(shards, a)
        host.append(torch.cat(shards).double() @ b.double())
        dev.append((a.to(device), b.to(device),
                    torch.full((size * m, n), float("nan"), dtype=dtype, device=device)))
    torch.cuda.synchronize(device)
    streams = [torch.cuda.Stream(device), torch.cuda.Stream(device)]
    for call, (a, b, out) in enumerate(dev):
        with torch.cuda.stream(streams[call % 2]):
            collective.all_gather_matmul(a, b, out=out, path="peer")
    torch.cuda.synchronize(device)
    errs = [(out.double().cpu() - ref).abs().max().item()
            / (TOL[dtype] * ref.abs().max().item()) for (_, _, out), ref in zip(dev, host)]
    return max(e if e == e else float("inf") for e in errs)


def main(mode, size):
    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{tmp}/store"
        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        mp.start_processes(_worker, args=(size, mode, init, queue), nprocs=size,
                           start_method="spawn")
        print(json.dumps(queue.get()))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
