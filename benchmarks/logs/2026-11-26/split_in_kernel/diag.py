"""Scratch: which part of the in-kernel split-K reduction costs the time."""
import os
import sys
import torch
flavour = sys.argv[1]
os.environ["LAYOUTALG_CACHE"] = f"/tmp/cache_{flavour}"
from benchmarks import shapes  # noqa: E402 - the suite's CUDA-graph timer (the run used a copy)
from layoutalg import gemm
from layoutalg.gemm import hopper_gen
from layoutalg.gemm.hopper import HopperConfig

orig = hopper_gen._emit_fixup


def emit(src, p, bz, where, fns):
    if flavour == "acqrel":
        return orig(src, p, bz, where, fns)
    store, add, zero = fns
    warp = "cw * U(4) + (t % U(128)) // U(32)"
    if flavour == "relaxed":
        src("cuda.syncwarp()", "last = U(0)")
        with src.block("if lane == U(0):"):
            src(f"last = cuda.atomic.add(Q, tq * U(8) + {warp}, U(1))")
        src("last = U(cuda.shfl_sync(U(0xFFFFFFFF), np.int32(last), 0))", "cuda.syncwarp()")
    elif flavour == "noatomic":
        src("last = ks")
    elif flavour == "nothing":
        src("last = SK")
    with src.block("if last == SK - U(1):"):
        with src.block("if lane == U(0):"):
            src(f"Q[tq * U(8) + {warp}] = U(0)")
        src(f"{zero}(acc, float32(0))", "s = U(0)")
        with src.block("while s < SK:"):
            src(f"{add}(W[(s * NB + {bz}) * M * ldw:], acc, {where}, ldw)", "s += U(1)")
        src(f"{store}(C[{bz} * sCb:], acc, alpha, beta, {where}, ldc)")


hopper_gen._emit_fixup = emit


def graph_us(fn, reps=20, calls=10):
    return shapes.graph_us(fn, [()], reps, calls)


for m, cfg in ((1, HopperConfig(bN=256, consumers=1, stages=5, split_k=8)),
               (16, HopperConfig(bM=64, bN=128, consumers=1, stages=6, split_k=4))):
    a = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16).T
    out = torch.empty(m, 4096, device="cuda", dtype=torch.bfloat16)
    row = []
    for how in ("in_kernel", "second_kernel"):
        c = HopperConfig(**{**cfg.__dict__, "split_reduce": how})
        t = graph_us(lambda: gemm.matmul(a, b, out, kernel=c))
        ok = torch.allclose(out.float(), (a.float() @ b.float()), rtol=2e-2, atol=2e-1)
        row.append(f"{how} {t:.1f} us ok={ok}")
    print(flavour, m, " | ".join(row), flush=True)
