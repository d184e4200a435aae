"""GPU benchmark of gemm.elementwise.add_matrices against a device-to-device copy.

Run on the GPU host from the project root (after the wheel line of ../shared/gpu/wheels.sh):

    python3 benchmarks/elementwise.py [--sizes 4096 8192] [--reps 15]

Goal (issue 5): ``out = x + y`` on two n x n float32 matrices at >= 0.85x the bandwidth of a
device-to-device copy measured in the same run. Bytes counted: a copy reads and writes
n*n*4 bytes each (``dst.copy_(src)`` in torch: 2 * n*n*4); the add reads two matrices and
writes one (3 * n*n*4). Bandwidth = bytes / median time.

1. Compiles every configuration in parallel spawned processes (their cubins land in the
   disk cache of gemm.call.binary, where this process finds them).
2. For each size: random x and y, the copy's time, torch.add's time (for reference), then for
   each configuration: the result on a NaN-poisoned out must equal ``x + y`` exactly (both
   are one IEEE fp32 addition per element), then the time. Timing: CUDA events around
   ``INNER`` launches after a warm-up, median over ``--reps`` such batches; the launches go
   through ``prepare_add``'s planned launch, a few microseconds of host time each, so the GPU
   never waits for the host.
3. Prints a markdown table last.

Which configurations, and why. An H100 SXM has 132 SMs with 228 KiB of shared memory (227
KiB per block, 1 KiB reserved per resident block), 2048 threads and 32 blocks each; a copy
runs at roughly 3 TB/s. What an elementwise add needs to reach that:

- 16-byte accesses: cp.async.cg of 16 bytes for x and y, st.global.v4 for out (the matrices
  are 16-byte aligned with a leading dimension that is a multiple of 4);
- enough bytes in flight: by Little's law ~3 TB/s times ~1 us of loaded DRAM latency is
  ~3 MB, ~23 KB per SM, of which two thirds are reads. The pipeline keeps ``stages - 1 -
  delay_release`` steps of x and y tiles in flight per block, so per SM
  ``blocks/SM * (stages - 1 - d) * 2 * tile bytes``: the configurations below keep 96..160
  KiB in flight, a wide margin for the latency growing under load (their registers, 32-40
  per thread, never limit the blocks per SM);
- a grid that fills all SMs: ``add_matrices`` launches (resident blocks per SM) x 132 blocks,
  each walking every gridDim-th block of the matrix, so there is one wave and the tail is at
  most one step per block;
- several resident blocks per SM, so that one block's ``syncthreads`` (three per step: after
  the wait, before and after the copy of the out tile) do not leave the SM idle; the
  one-block-per-SM configuration shows the cost of that.

So: the default 4 KiB tiles with 3 and 4 stages in static shared memory (6-7 blocks/SM),
8 KiB tiles (16x128, 8x256) with 3 and 4 stages in dynamic shared memory above 48 KiB (3-4
blocks/SM), 16 KiB tiles (32x128) with 3 and 4 stages (2 and 1 blocks/SM), a delay_release
of 1 (one step less in flight), and small 2 KiB tiles with 6 stages (many small blocks).
"""

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (block, stages, delay_release, threads)
CONFIGS = [
    ((8, 128), 3, 0, 128),      # the default: 28 KiB static, 7 blocks/SM
    ((8, 128), 4, 0, 128),      # 36 KiB static, 6 blocks/SM
    ((8, 128), 4, 1, 128),      # the same ring with one step less in flight
    ((4, 128), 6, 0, 128),      # 26 KiB static, 2 KiB tiles, 5 in flight
    ((16, 128), 3, 0, 256),     # 56 KiB dynamic, 3 blocks/SM
    ((16, 128), 4, 0, 256),     # 72 KiB dynamic, 3 blocks/SM
    ((16, 128), 4, 1, 256),
    ((8, 256), 4, 0, 256),      # 72 KiB dynamic, rows of 1 KiB
    ((32, 128), 3, 0, 256),     # 112 KiB dynamic, 2 blocks/SM
    ((32, 128), 4, 0, 512),     # 144 KiB dynamic, 1 block/SM
]
INNER = {4096: 10, 8192: 4}     # launches per timed batch


def _compile(config):
    t0 = time.time()
    from gemm.elementwise import AddConfig, launcher      # the cubin lands in the disk cache
    block, stages, delay, threads = config
    launcher(AddConfig(block, stages, delay, threads))
    return config, time.time() - t0


def label(config):
    (bm, bn), stages, delay, threads = config
    return f"{bm}x{bn}, {stages} stages" + (f", delay {delay}" if delay else "") \
        + f", {threads} thr"


def time_batches(fn, inner, reps):
    """Median seconds per call of ``fn`` over ``reps`` batches of ``inner`` calls (events)."""
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        for _ in range(inner):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3 / inner)
    return statistics.median(times)


def bench_size(n, reps, failed):
    """Table rows (n, kernel, shared and grid, seconds, bytes/s, x copy, exact) for n x n."""
    import torch
    from gemm.elementwise import AddConfig, _default_blocks, prepare_add
    gen = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(n, n, device="cuda", generator=gen)
    y = torch.randn(n, n, device="cuda", generator=gen)
    out = torch.empty_like(x)
    want = x + y
    inner, nbytes = INNER.get(n, 4), n * n * 4
    t_copy = time_batches(lambda: out.copy_(x), inner, reps)
    copy_bw = 2 * nbytes / t_copy
    print(f"n={n}: copy {t_copy * 1e6:.1f} us, {copy_bw / 1e9:.0f} GB/s", flush=True)
    t_add = time_batches(lambda: torch.add(x, y, out=out), inner, reps)
    rows = [(n, "D2D copy (torch copy_)", "", t_copy, copy_bw, 1.0, "-"),
            (n, "torch.add", "", t_add, 3 * nbytes / t_add, 3 * nbytes / t_add / copy_bw, "-")]
    for c in CONFIGS:
        if c in failed:
            rows.append((n, label(c), "", None, None, None, failed[c]))
            continue
        try:
            cfg = AddConfig(*c)
            out.fill_(float("nan"))
            _, launch = prepare_add(x, y, out, block=c[0], stages=c[1], delay_release=c[2],
                                    threads=c[3])
            launch()
            torch.cuda.synchronize()
            exact = bool(torch.equal(out, want))
            t = time_batches(launch, inner, reps) if exact else None
            blocks = _default_blocks(cfg, -(-n // c[0][0]) * -(-n // c[0][1]))
            where = (f"{cfg.shared_bytes // 1024} KiB {'dyn' if cfg.dynamic else 'static'}, "
                     f"{blocks} blocks")
            bw = 3 * nbytes / t if t else None
            rows.append((n, label(c), where, t, bw, bw / copy_bw if bw else None,
                         "yes" if exact else "NO"))
            print(f"  {label(c)} ({where}): exact={exact}"
                  + (f", {t * 1e6:.1f} us, {bw / 1e9:.0f} GB/s, {bw / copy_bw:.3f}x copy"
                     if t else ""), flush=True)
        except Exception as e:  # noqa: BLE001 - reported in the table
            rows.append((n, label(c), "", None, None, None, f"{type(e).__name__}: {e}"))
            print(f"  {label(c)}: FAILED {type(e).__name__}: {e}", flush=True)
    return rows


def main(sizes, reps):
    import torch
    t_start = time.time()
    workers = min(len(CONFIGS), os.cpu_count() or 4)
    print(f"compiling {len(CONFIGS)} configurations in {workers} processes ...", flush=True)
    failed = {}
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
        futures = {c: ex.submit(_compile, c) for c in CONFIGS}
        for c, f in futures.items():
            try:
                _, dt = f.result()
                print(f"  {label(c)}: {dt:.0f} s", flush=True)
            except Exception as e:  # noqa: BLE001 - reported in the table
                failed[c] = f"compile: {type(e).__name__}: {e}"
                print(f"  {label(c)}: FAILED {failed[c]}", flush=True)
    print(f"compile phase: {time.time() - t_start:.0f} s", flush=True)

    from numba import cuda
    import numba_cuda
    dev = torch.cuda.get_device_properties(0)
    print(f"{dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}, "
          f"numba-cuda {numba_cuda.__version__}", flush=True)
    rows = []
    for n in sizes:
        rows += bench_size(n, reps, failed)
    cuda.synchronize()

    print(f"\ntotal {time.time() - t_start:.0f} s\n")
    print("| n | kernel | shared, grid | us | GB/s | x copy | exact |")
    print("|---|---|---|---|---|---|---|")
    for n, name, where, t, bw, ratio, ok in rows:
        us = f"{t * 1e6:.1f}" if t else "-"
        gbs = f"{bw / 1e9:.0f}" if bw else "-"
        r = f"{ratio:.3f}" if ratio else "-"
        print(f"| {n} | {name} | {where} | {us} | {gbs} | {r} | {ok} |")
    for n in sizes:
        best = max((r for r in rows if r[0] == n and r[5] and r[6] == "yes"),
                   key=lambda r: r[5], default=None)
        if best:
            verdict = "met" if best[5] >= 0.85 else "NOT met"
            print(f"\nn={n}: best {best[1]}: {best[5]:.3f}x copy, goal 0.85x {verdict}")
    return 0 if all(r[6] in ("yes", "-") for r in rows) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    sys.exit(main(args.sizes, args.reps))
