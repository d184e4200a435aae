"""How fast one rank's shard reaches its ring neighbour, timed alone: the copies that
``gemm.collective``'s peer ring makes, without its matmuls. One process per GPU:

    NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node D benchmarks/p2p_copy.py [--mb 8] [--json F]

Every rank pushes ``--mb`` MB to rank - 1 at the same time (as in a ring step) through a CUDA
IPC mapping of that rank's buffer, ``--iters`` times between CUDA events; a method's time is
the slowest rank's. Methods:

- ``ce xP``: ``cuMemcpyAsync`` by the copy engines, the bytes in P equal pieces on P streams;
- ``ce pull xP``: the same, issued by the receiver from its sender's buffer;
- ``sm pull G``: ``gemm.collective.push``'s copy kernel (G blocks of 512 threads, 16-byte
  loads and stores, written with ``gemm.cute``) reading the peer's buffer into this rank's
  (in a CUDA graph, as every ``(graph)`` row);
- ``to P peers``: every rank sends its bytes to ranks r - 1, ..., r - P at once (P from 1 to
  D - 1; P = D - 1 is every peer, what the direct schedule sends): ``ce serial``, one
  ``cuMemcpyAsync`` per peer one after another on one stream (as the collective's comm
  stream); ``ce streams``, one per peer on a stream each, at once; ``sm push G``, one launch
  of the push kernel with G blocks writing all P peers (for P = 1: the SM push of one copy);
  GB/s counts what one rank sends in all, and ``per peer`` divides it by P;
- ``sm push G beside matmul``: the push to rank - 1 while this rank's matmul runs (as ``ce
  xP beside matmul``);
- ``ce x1, one sender``: rank 0 alone pushes;
- ``ce xP beside matmul``: the copies while this rank's ring-step matmul (``--shape``) runs on
  another stream; the matmul's own time is reported too, but its loop of calls from Python
  is bound by their launches, not the GPU (graph it to compare the GPU times);
- ``ce to every peer``: every rank pushes its bytes to each of the D - 1 others at once, one
  stream per destination (GB/s: what one rank sends in all);
- ``(graph)``: the same calls captured once as a CUDA graph and replayed;
- ``flag hop``: a counter bounced between ranks 0 and 1, one hop's latency: written into the
  peer's flag by ``cuStreamWriteValue32`` or by a one-thread kernel, waited for by
  ``cuStreamWaitValue32`` or by a one-thread kernel spinning on it; eager or in a graph.

Each copied buffer is checked against its source after the timings.
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

from benchmarks.collective import slowest_us  # noqa: E402
import gemm  # noqa: E402
from gemm.collective import peer, push  # noqa: E402
from gemm.collective.peer import copy_async, wait_value, write_value  # noqa: E402


def _as_numba(ptr, nbytes, typestr="<u4"):
    from numba import cuda
    return cuda.from_cuda_array_interface(
        {"shape": (nbytes // 4,), "typestr": typestr, "data": (ptr, False), "version": 3,
         "strides": None}, owner=None, sync=False)


_flag_kernels = []


def _flag_kernel(name):
    """``wait``: spin until flags[i] >= value (one thread; atomic reads see the peer's
    writes), then a system fence; ``set``: a system fence, then flags[i] := value (an atomic
    store into the peer's memory)."""
    from numba import cuda
    if not _flag_kernels:
        @cuda.jit
        def wait(flags, i, value):
            while cuda.atomic.add(flags, i, 0) < value:
                pass
            cuda.threadfence_system()

        @cuda.jit
        def set_(flags, i, value):
            cuda.threadfence_system()
            cuda.atomic.exch(flags, i, value)
        _flag_kernels.extend([wait, set_])
    return _flag_kernels[0 if name == "wait" else 1]


def _hops(rank, flags, peer_flags, i, how, graph, hops=200):
    """us per one-way hop of a counter bounced between ranks 0 and 1 through flag i:
    ``how`` says who writes (a stream write or a kernel) and who waits."""
    from numba import cuda
    mine, theirs = cuda.as_cuda_array(flags), _as_numba(peer_flags, 16, "<i4")

    def write(s, v):
        if how == "kernel write, kernel wait":
            _flag_kernel("set")[1, 1, cuda.external_stream(s.cuda_stream)](theirs, i, v)
        else:
            write_value(s, peer_flags + 4 * i, v)

    def wait(s, v):
        if how == "stream":
            wait_value(s, flags.data_ptr() + 4 * i, v)
        else:
            _flag_kernel("wait")[1, 1, cuda.external_stream(s.cuda_stream)](mine, i, v)

    def bounce(base):
        s = torch.cuda.current_stream()
        for v in range(base + 1, base + hops + 1):
            if rank == 0:
                write(s, v)
                wait(s, v)
            else:
                wait(s, v)
                write(s, v)

    if how != "stream":                        # compile the kernels outside the capture
        _flag_kernel("wait")[1, 1](cuda.as_cuda_array(torch.ones(1, dtype=torch.int32,
                                                                 device="cuda")), 0, 0)
        _flag_kernel("set")[1, 1](cuda.as_cuda_array(torch.zeros(1, dtype=torch.int32,
                                                                device="cuda")), 0, 0)
    torch.cuda.synchronize()
    run = lambda: bounce(0)  # noqa: E731
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            bounce(0)
        run = g.replay
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    run()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) * 1e3 / (2 * hops)


def _split_copy(streams, dst, src, nbytes):
    """dst <- src in len(streams) pieces, one per stream, forked from and joined to the
    current stream."""
    cur = torch.cuda.current_stream()
    piece = -(-nbytes // len(streams) // 256) * 256
    fork = torch.cuda.Event()
    fork.record(cur)
    for i, s in enumerate(streams):
        lo = i * piece
        if lo >= nbytes:
            break
        s.wait_event(fork)
        copy_async(s, dst + lo, src + lo, min(piece, nbytes - lo))
        join = torch.cuda.Event()
        join.record(s)
        cur.wait_event(join)


def _timed(fn, iters, stream=None):
    """us per call of fn (enqueued on ``stream``), the slowest rank's, after one call."""
    return slowest_us(fn, iters, warmup=1, stream=stream)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, nargs="+", default=[8.0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--shape", default="1024,4096,1024", help="the matmul beside the copies")
    ap.add_argument("--json", default=None)
    ap.add_argument("--blocks", type=int, nargs="+", default=[4, 8, 16, 32, 66, 132],
                    help="grids of the SM push kernel to time")
    args = ap.parse_args()
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    D = dist.get_world_size()
    to, frm = (rank - 1) % D, (rank + 1) % D
    nmax = int(max(args.mb) * 2**20)
    src = torch.randint(-2**31, 2**31 - 1, (nmax // 4,), dtype=torch.int32, device="cuda")
    recv = torch.zeros(nmax // 4, dtype=torch.int32, device="cuda")
    flags = torch.zeros(4, dtype=torch.int32, device="cuda")
    recv_all = torch.zeros((max(D - 1, 1), nmax // 4), dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    mine = (peer.export(recv), peer.export(src), peer.export(flags), peer.export(recv_all))
    everyone = [None] * D
    dist.all_gather_object(everyone, mine)
    opened = [peer._Opened(everyone[to][0]), peer._Opened(everyone[frm][1]),
              peer._Opened(everyone[to][2])]
    # rank q's recv_all[j] is for rank (q + j + 1) % D; with every peer's src to check it
    to_all = {q: peer._Opened(everyone[q][3]) for q in range(D) if q != rank}
    src_all = {q: peer._Opened(everyone[q][1]) for q in range(D) if q != rank}
    dest, pull_src, dest_flags = (o.ptr for o in opened)
    dist.barrier()
    streams = [torch.cuda.Stream() for _ in range(8)]
    m, k, n = map(int, args.shape.split(","))
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    mm_stream = torch.cuda.Stream()
    t_mm = _timed(lambda: gemm.matmul(a, b, c), args.iters, mm_stream)
    rows = []

    def record(name, mb, us, peers=1, **extra):
        row = {"method": name, "peers": peers, "MB": mb, "us": us,
               "GB/s": mb * 2**20 / (us * 1e-6) / 1e9, **extra}
        row["GB/s per peer"] = row["GB/s"] / peers
        rows.append(row)
        if rank == 0:
            print(json.dumps(row), flush=True)

    def check(name, ptr_src):
        """recv (written by the sender) equals the sender's src; a wrong copy raises."""
        torch.cuda.synchronize()
        dist.barrier()
        expect = torch.empty_like(src)
        copy_async(torch.cuda.current_stream(), expect.data_ptr(), ptr_src, nbytes)
        torch.cuda.synchronize()
        if not torch.equal(recv[:nbytes // 4], expect[:nbytes // 4]):
            raise AssertionError(f"{name}: rank {rank}'s received bytes differ from its "
                                 f"sender's")
        recv.zero_()
        torch.cuda.synchronize()
        dist.barrier()

    def to_peers(P, nbytes, how):
        """Every rank's src to ranks r - 1, ..., r - P (into slot i - 1 of rank r - i's
        recv_all): ``how`` "ce serial", "ce streams" or an int, the push kernel's grid."""
        cur = torch.cuda.current_stream()
        dsts = [to_all[(rank - i) % D].ptr + (i - 1) * (nmax // 4) * 4 for i in range(1, P + 1)]
        if isinstance(how, int):
            push.push(cur.cuda_stream, src.data_ptr(), dsts, nbytes, how)
            return
        if how == "ce serial":
            for d in dsts:
                copy_async(cur, d, src.data_ptr(), nbytes)
            return
        fork = torch.cuda.Event()
        fork.record(cur)
        for st, d in zip(streams, dsts):
            st.wait_event(fork)
            copy_async(st, d, src.data_ptr(), nbytes)
            join = torch.cuda.Event()
            join.record(st)
            cur.wait_event(join)

    def check_peers(name, P, nbytes):
        """recv_all's slots 0..P-1 (from ranks r + 1, ..., r + P) equal those ranks' src."""
        torch.cuda.synchronize()
        dist.barrier()
        expect = torch.empty_like(src)
        for j in range(P):
            q = (rank + j + 1) % D
            copy_async(torch.cuda.current_stream(), expect.data_ptr(), src_all[q].ptr, nbytes)
            torch.cuda.synchronize()
            if not torch.equal(recv_all[j, :nbytes // 4], expect[:nbytes // 4]):
                raise AssertionError(f"{name}: rank {rank}'s bytes from rank {q} differ")
        recv_all.zero_()
        torch.cuda.synchronize()
        dist.barrier()

    def graphed(fn):
        """fn x iters captured as one CUDA graph: a call that replays it once."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(args.iters):
                fn()
        return g.replay

    for mb in args.mb:
        nbytes = int(mb * 2**20)
        for P in range(1, D):
            for how in ["ce serial"] + ["ce streams"] * (P > 1) + list(args.blocks):
                name = f"to {P} peers: " + (how if isinstance(how, str) else f"sm push {how}")
                us = _timed(graphed(lambda: to_peers(P, nbytes, how)), 1) / args.iters
                record(name + " (graph)", mb * P, us, peers=P)
                check_peers(name, P, nbytes)
        us = _timed(graphed(lambda: _split_copy(streams[:1], dest, src.data_ptr(), nbytes)), 1)
        record("ce x1 (graph)", mb, us / args.iters)
        check("ce x1 (graph)", pull_src)
        for P in (1, 2, 4, 8):
            us = _timed(lambda: _split_copy(streams[:P], dest, src.data_ptr(), nbytes),
                        args.iters)
            record(f"ce x{P}", mb, us)
            check(f"ce x{P}", pull_src)
        for P in (1, 4):
            us = _timed(lambda: _split_copy(streams[:P], recv.data_ptr(), pull_src, nbytes),
                        args.iters)
            record(f"ce pull x{P}", mb, us)
            check(f"ce pull x{P}", pull_src)
        def alone():
            if rank == 0:
                _split_copy(streams[:1], dest, src.data_ptr(), nbytes)
        record("ce x1, one sender", mb, _timed(alone, args.iters))
        torch.cuda.synchronize()
        recv.zero_()
        for G in args.blocks:
            us = _timed(graphed(lambda: push.push(torch.cuda.current_stream().cuda_stream,
                                                  pull_src, [recv.data_ptr()], nbytes, G)), 1)
            record(f"sm pull {G} (graph)", mb, us / args.iters)
            check(f"sm pull {G}", pull_src)
        for P in (1, 4, "sm 16", "sm 32"):
            cs = torch.cuda.Stream()
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            torch.cuda.synchronize()
            dist.barrier()
            ev[0].record(mm_stream)
            for _ in range(args.iters):
                with torch.cuda.stream(mm_stream):
                    gemm.matmul(a, b, c)
            ev[1].record(mm_stream)
            with torch.cuda.stream(cs):
                ev[2].record(cs)
                for _ in range(args.iters):
                    if isinstance(P, int):
                        _split_copy(streams[:P], dest, src.data_ptr(), nbytes)
                    else:
                        push.push(cs.cuda_stream, src.data_ptr(), [dest], nbytes,
                                  int(P.split()[1]))
                ev[3].record(cs)
            torch.cuda.synchronize()
            t = torch.tensor([ev[2].elapsed_time(ev[3]), ev[0].elapsed_time(ev[1])],
                             device="cuda") * (1e3 / args.iters)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            name = f"ce x{P}" if isinstance(P, int) else P.replace("sm", "sm push")
            record(f"{name} beside matmul", mb, t[0].item(), matmul_us=t[1].item(),
                   matmul_alone_us=t_mm)
            check(f"{name} beside matmul", pull_src)
    # one flag hop: ranks 0 and 1 bounce a counter, each variant on a flag of its own
    if D >= 2 and rank in (0, 1):
        other = 1 - rank
        peer_flags = (dest_flags if other == to else peer._Opened(everyone[other][2]).ptr)
    torch.cuda.synchronize()
    dist.barrier()
    if D >= 2 and rank in (0, 1):
        for i, (how, graph) in enumerate([("stream", False), ("stream", True),
                                          ("stream write, kernel wait", True),
                                          ("kernel write, kernel wait", True)]):
            hop = _hops(rank, flags, peer_flags, i, how, graph)
            if rank == 0:
                rows.append({"method": f"flag hop: {how}{' (graph)' if graph else ''}",
                             "us": hop})
                print(json.dumps(rows[-1]), flush=True)
    dist.barrier()
    if rank == 0:
        head = {"host": socket.gethostname(), "gpu": torch.cuda.get_device_name(), "D": D,
                "matmul": args.shape, "matmul_alone_us": t_mm, "date": time.strftime("%Y-%m-%d")}
        print(json.dumps(head))
        print(f"\nD={D}: every rank sends at once (slowest rank; {args.iters} calls)\n"
              f"| method | peers | MB | us | GB/s | GB/s per peer | note |\n"
              f"|---|---|---|---|---|---|---|")
        for r in rows:
            if "MB" in r:
                note = (f"matmul {r['matmul_us']:.1f} us beside, {r['matmul_alone_us']:.1f} "
                        f"alone" if "matmul_us" in r else "")
                print(f"| {r['method']} | {r['peers']} | {r['MB']:g} | {r['us']:.1f} | "
                      f"{r['GB/s']:.0f} | {r['GB/s per peer']:.0f} | {note} |")
            else:
                print(f"| {r['method']} | | | {r['us']:.2f} | | | one flag write + wait |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"head": head, "rows": rows}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
