"""Host and wall microseconds per call of every public call form of ``gemm.matmul`` and of
the torch operator (``gt.matmul`` and ``gt.linear``), each beside the torch call a user would
write instead, in one process.

    python benchmarks/overhead.py [--calls 200] [--reps 5] [--only SUBSTRING] [--json PATH]

Host us/call: ``calls`` calls enqueued with no synchronisation in the loop (the GPU work is
waited for after the clock stops), the median of ``reps`` such loops: what the caller's
thread pays. Wall us/call: the same loop with the wait inside the clock. Each row's own
baseline (``torch.mm``, or ``torch.matmul`` for batches, with the same out / out_dtype / tf32
setting; ``F.linear``, then ``F.gelu``, for the linear rows) is timed in the same run, right
beside it. Then the parts of one call, and the
torch operator's registrations: ``torch.library.custom_op`` (the one shipped), the low-level
``torch.library.Library`` with the same autograd, and ``gemm.torch.matmul``'s eager path.
"""

import argparse
import json
import statistics
import time
from types import SimpleNamespace
from typing import Optional

import torch
import torch.nn.functional as F

import gemm
from gemm import torch as gt

BF16, F32 = torch.bfloat16, torch.float32


def _loop(fn, calls, wait_inside):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    if wait_inside:
        torch.cuda.synchronize()
    t = time.perf_counter() - t0
    torch.cuda.synchronize()
    return t / calls * 1e6


def timed(fn, calls, reps):
    """(host us/call, wall us/call): medians over ``reps`` loops of ``calls`` calls (fewer
    where the GPU work makes a loop longer than ~20 ms, 20 at the least)."""
    for _ in range(3):
        fn()
    calls = max(20, min(calls, int(20e3 / max(_loop(fn, 5, True), 1.0))))
    host = statistics.median(_loop(fn, calls, False) for _ in range(reps))
    wall = statistics.median(_loop(fn, calls, True) for _ in range(reps))
    return host, wall


def _mats(m, n, k, dtype, batch=None):
    g = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
    lead = (batch,) if batch else ()
    a = torch.randn(lead + (m, k), device="cuda", generator=g).to(dtype)
    w = torch.randn(lead + (n, k), device="cuda", generator=g).to(dtype)
    return a, w


def cases():
    """(name, shape label, ours, baseline) of every call form."""
    rows = []
    for m, n, k in ((64, 64, 64), (1, 4096, 4096), (4096, 4096, 4096)):
        a, w = _mats(m, n, k, BF16)
        out = torch.empty(m, n, device="cuda", dtype=BF16)
        out32 = torch.empty(m, n, device="cuda", dtype=F32)
        label = f"{m}x{n}x{k} bf16"
        rows += [
            ("matmul(a, w.T)", label, lambda a=a, w=w: gemm.matmul(a, w.T),
             lambda a=a, w=w: torch.mm(a, w.T)),
            ("matmul(a, w.T, out)", label, lambda a=a, w=w, o=out: gemm.matmul(a, w.T, o),
             lambda a=a, w=w, o=out: torch.mm(a, w.T, out=o)),
            ("matmul(a, w.T, out_dtype=f32)", label,
             lambda a=a, w=w: gemm.matmul(a, w.T, out_dtype="float32"),
             lambda a=a, w=w: torch.mm(a, w.T, out_dtype=F32)),
            ("matmul(a, w.T, out32)", label, lambda a=a, w=w, o=out32: gemm.matmul(a, w.T, o),
             lambda a=a, w=w, o=out32: torch.mm(a, w.T, out_dtype=F32, out=o)),
            ("matmul(a, w.T, kernel='hopper')", label,
             lambda a=a, w=w: gemm.matmul(a, w.T, kernel="hopper"),
             lambda a=a, w=w: torch.mm(a, w.T)),
            ("torch op gt.matmul(a, w.T)", label, lambda a=a, w=w: gt.matmul(a, w.T),
             lambda a=a, w=w: torch.mm(a, w.T)),
            ("torch.ops.layoutalg.matmul", label,
             lambda a=a, w=w: torch.ops.layoutalg.matmul(a, w.T),
             lambda a=a, w=w: torch.mm(a, w.T)),
        ]
        # a linear layer: x (rows, K) or (batch, T, K), a bias, and with a GELU
        bias = torch.randn(n, device="cuda", dtype=BF16)
        x3 = a.view(m // 2, 2, k) if m > 1 else a.view(1, 1, k)
        rows += [
            ("torch op gt.linear(x, w, b)", label, lambda a=a, w=w, b=bias: gt.linear(a, w, b),
             lambda a=a, w=w, b=bias: F.linear(a, w, b)),
            ("gt.linear(x, w, b, 'gelu')", label,
             lambda a=a, w=w, b=bias: gt.linear(a, w, b, "gelu"),
             lambda a=a, w=w, b=bias: F.gelu(F.linear(a, w, b))),
            ("gt.linear(x3, w, b), 3-D x", label, lambda x=x3, w=w, b=bias: gt.linear(x, w, b),
             lambda x=x3, w=w, b=bias: F.linear(x, w, b)),
        ]
    a, w = _mats(1024, 1024, 16384, BF16)               # split-K by default
    rows.append(("matmul(a, w.T) split-K", "1024x1024x16384 bf16",
                 lambda a=a, w=w: gemm.matmul(a, w.T), lambda a=a, w=w: torch.mm(a, w.T)))
    a3, w3 = _mats(512, 512, 512, BF16, batch=8)
    b3, b2 = w3.transpose(1, 2), w3[0].T
    rows.append(("matmul batched", "8x512x512x512 bf16",
                 lambda: gemm.matmul(a3, b3), lambda: torch.matmul(a3, b3)))
    rows.append(("matmul broadcast B", "8x512x512x512 bf16",
                 lambda: gemm.matmul(a3, b2), lambda: torch.matmul(a3, b2)))
    for m, n, k in ((256, 256, 256), (4096, 4096, 4096)):
        a, w = _mats(m, n, k, F32)
        b = w.T.contiguous()                            # row-major B: 3xTF32 on a copy
        out = torch.empty(m, n, device="cuda")
        label = f"{m}x{n}x{k} fp32"
        rows += [
            ("fp32 default matmul(a, w.T)", label, lambda a=a, w=w: gemm.matmul(a, w.T),
             lambda a=a, w=w: torch.mm(a, w.T)),
            ("fp32 default matmul(a, b)", label, lambda a=a, b=b: gemm.matmul(a, b),
             lambda a=a, b=b: torch.mm(a, b)),
            ("fp32 precision='ieee'", label,
             lambda a=a, w=w: gemm.matmul(a, w.T, precision="ieee"),
             lambda a=a, w=w: torch.mm(a, w.T)),
            ("fp32 allow_tf32=True, out", label,
             lambda a=a, w=w, o=out: gemm.matmul(a, w.T, o, allow_tf32=True),
             lambda a=a, w=w, o=out: _tf32(lambda: torch.mm(a, w.T, out=o))),
        ]
    return rows


def _tf32(fn):
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return fn()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def other_kinds(calls, reps):
    """numba and CuPy arrays, no out, beside torch.mm on torch tensors of the same data."""
    from numba import cuda
    rows = []
    a, w = _mats(64, 64, 64, F32)
    na, nwt = cuda.as_cuda_array(a), cuda.as_cuda_array(w.T)     # (numba's .T copies)
    rows.append(("numba arrays matmul(a, w.T)", "64x64x64 fp32",
                 lambda: gemm.matmul(na, nwt), lambda: torch.mm(a, w.T)))
    try:
        import cupy
        ca, cw = cupy.asarray(a), cupy.asarray(w)
        rows.append(("CuPy arrays matmul(a, w.T)", "64x64x64 fp32",
                     lambda: gemm.matmul(ca, cw.T), lambda: torch.mm(a, w.T)))
    except ImportError:
        pass
    return rows


def registrations(calls, reps):
    """The torch operator's registrations: the shipped one (torch.library.Library with its
    own Autograd kernel), torch.library.custom_op and the Library with register_autograd
    (both with the same forward and backward), and gt.matmul's eager path; forward without
    and with grad, and a forward + backward step, at 64x64x64 bf16, beside torch.mm."""
    @torch.library.custom_op("layoutalg_bench::custom", mutates_args=(),
                             device_types="cuda")
    def custom(a: torch.Tensor, b: torch.Tensor, out_dtype: Optional[torch.dtype] = None
               ) -> torch.Tensor:
        return gt._direct(a, b, out_dtype)
    custom.register_fake(gt._fake)
    custom.register_autograd(gt._backward, setup_context=gt._setup_context)
    lib = torch.library.Library("layoutalg_bench", "FRAGMENT")
    lib.define("mm(Tensor a, Tensor b, ScalarType? out_dtype=None) -> Tensor")
    lib.impl("mm", gt._direct, "CUDA")
    torch.library.register_fake("layoutalg_bench::mm", gt._fake, lib=lib)
    torch.library.register_autograd("layoutalg_bench::mm", gt._backward,
                                    setup_context=gt._setup_context, lib=lib)
    a, w = _mats(64, 64, 64, BF16)
    ag, wg = a.clone().requires_grad_(), w.clone().requires_grad_()
    forms = {"shipped: torch.ops.layoutalg.matmul": gt._op,
             "custom_op + register_autograd": torch.ops.layoutalg_bench.custom.default,
             "Library + register_autograd": torch.ops.layoutalg_bench.mm.default,
             "gt.matmul eager path": gt.matmul,
             "torch.mm": lambda x, y, d=None: torch.mm(x, y)}
    rows = []
    for name, f in forms.items():
        h0 = timed(lambda f=f: f(a, w.T, None), calls, reps)[0]
        h1 = timed(lambda f=f: f(ag, wg.T, None), calls, reps)[0]
        h2, w2 = timed(lambda f=f: f(ag, wg.T, None).sum().backward(), calls, reps)
        rows.append((name, h0, h1, h2, w2))
    return rows


def parts(calls, reps):
    """Where a planned no-out bf16 call's host time goes (64x64x64, the Hopper kernel), and
    the torch operator's backward's."""
    import ctypes
    from dataclasses import replace

    from gemm import hopper, tma
    from gemm.call import launch, plan as callplan
    from gemm.hopper import tensor_maps
    a, w = _mats(64, 64, 64, BF16)
    wt = w.T
    callplan.clear()
    gemm.matmul(a, wt, kernel="hopper")
    (key,) = callplan.PLANS                     # the call's key, as gemm.matmul made it
    opts = key[0]
    ptrs = callplan.signature(a, wt, None, opts)[1]
    plan = callplan.lookup(key)
    c = torch.empty(64, 64, device="cuda", dtype=BF16)
    stream = torch._C._cuda_getCurrentRawStream(0)
    bound = next(b for lau in hopper._launchers.values() for b in lau._bound.values())
    addresses = list(bound._words[bound._data_words])
    params, kind = bound._params, type(bound._params)
    pointers = (ctypes.c_void_p * len(kind._fields_))(       # one pointer per parameter
        *(ctypes.addressof(params) + getattr(kind, n).offset for n, _ in kind._fields_))
    legacy = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    head = (bound._func, *(ctypes.c_uint(v) for v in bound._dims), ctypes.c_void_p(stream))
    by_pointers = (*head, pointers, None)
    by_buffer = (*head, None, bound._extra_pointer)
    as_bound = bound._with_stream(stream)       # cuLaunchKernelEx's, where the driver has it

    def raw(launch_fn, args):
        """The driver's launch alone (ctypes objects made beforehand), its code checked."""
        err = launch_fn(*args)
        if err:
            raise RuntimeError(f"launch failed ({err})")
    new_address = iter(range(1 << 40, 1 << 41, 1 << 12))
    # A's tensor map: (the TMA copy, dims, byte strides, value type)
    tmap_copy, dims, strides, vt = hopper._Call(a, wt, None, 1.0, 0.0, None, None,
                                                "parts").map_specs[0]
    tmap_copy = replace(tmap_copy, dims=dims, strides=strides)
    dev = a.device
    rows = [
        ("torch.mm(a, w.T)", lambda: torch.mm(a, wt)),
        ("gemm.matmul(a, w.T, kernel='hopper')", lambda: gemm.matmul(a, wt, kernel="hopper")),
        ("callplan.signature", lambda: callplan.signature(a, wt, None, opts)),
        ("callplan.lookup", lambda: callplan.lookup(key)),
        ("launch.current_context", launch.current_context),
        ("torch.empty(device=torch.device)", lambda: torch.empty((64, 64), dtype=BF16,
                                                                 device=dev)),
        ("torch.empty(device=int)", lambda: torch.empty((64, 64), dtype=BF16, device=0)),
        ("torch.empty(*shape) (the allocator's)", lambda: torch.empty(64, 64, dtype=BF16,
                                                                      device=dev)),
        ("a.new_empty", lambda: a.new_empty((64, 64))),
        ("kernels' plan (no allocation)", lambda: plan.launch((ptrs[0], ptrs[1],
                                                               c.data_ptr()), stream, 1.0, 0.0)),
        ("BoundLaunch call", lambda: bound(addresses, stream, 1.0, 0.0)),
        ("raw cuLaunchKernel (param pointers)", lambda: raw(legacy, by_pointers)),
        ("raw cuLaunchKernel (param buffer)", lambda: raw(legacy, by_buffer)),
        ("raw driver launch as BoundLaunch calls it", lambda: raw(bound._launch, as_bound)),
        ("tma.tensor_map (encode one map)", lambda: tma.tensor_map(ptrs[0], tmap_copy, vt)),
        ("device_map of a new address", lambda: tensor_maps.device_map(
            tmap_copy, next(new_address), dims, strides, vt, stream)),
    ]
    # the torch operator's backward: the engine's whole round, and our products alone
    ag, wg = a.clone().requires_grad_(), w.clone().requires_grad_()
    dy = torch.randn(64, 64, device="cuda", dtype=BF16)
    ctx = SimpleNamespace(saved_tensors=(a, wt), needs_input_grad=(True, True, False))
    rows += [
        ("torch.mm forward with grad", lambda: torch.mm(ag, wg.T)),
        ("gt.matmul forward with grad", lambda: gt.matmul(ag, wg.T)),
        ("torch.mm forward + autograd.grad", lambda: torch.autograd.grad(
            torch.mm(ag, wg.T), (ag, wg), dy)),
        ("gt.matmul forward + autograd.grad", lambda: torch.autograd.grad(
            gt.matmul(ag, wg.T), (ag, wg), dy)),
        ("gt.matmul's backward called directly", lambda: gt._backward(ctx, dy)),
        ("torch.mm's two products called directly", lambda: (torch.mm(dy, w),
                                                             torch.mm(dy.T, a))),
    ]
    return [(name, timed(fn, calls, reps)[0]) for name, fn in rows]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--only", default="")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d')}; {args.calls} calls a loop, median of {args.reps}")
    results = []
    print(f"{'form':<34} {'shape':<22} {'host us':>8} {'base':>7} {'ratio':>6} "
          f"{'wall us':>8} {'base':>7} {'ratio':>6}")
    for name, label, ours, base in cases() + other_kinds(args.calls, args.reps):
        if args.only not in name + label:
            continue
        # the baseline first, ours, then the baseline again: the faster baseline counts
        try:
            b1 = timed(base, args.calls, args.reps)
            o = timed(ours, args.calls, args.reps)
            b2 = timed(base, args.calls, args.reps)
        except Exception as e:          # noqa: BLE001 - reported, the others go on
            print(f"{name:<34} {label:<22} failed: {type(e).__name__}: {e}", flush=True)
            continue
        b = (min(b1[0], b2[0]), min(b1[1], b2[1]))
        results.append(dict(form=name, shape=label, host_us=o[0], host_base_us=b[0],
                            wall_us=o[1], wall_base_us=b[1]))
        print(f"{name:<34} {label:<22} {o[0]:8.1f} {b[0]:7.1f} {o[0] / b[0]:6.2f} "
              f"{o[1]:8.1f} {b[1]:7.1f} {o[1] / b[1]:6.2f}", flush=True)
    if not args.only:
        print("\n# the torch operator's registrations, 64x64x64 bf16, host us/call")
        print(f"{'registration':<40} {'fwd':>7} {'fwd+grad':>9} {'fwd+bwd':>8} {'wall':>7}")
        for name, h0, h1, h2, w2 in registrations(args.calls, args.reps):
            results.append(dict(form="registration: " + name, fwd=h0, fwd_grad=h1,
                                fwd_bwd=h2, fwd_bwd_wall=w2))
            print(f"{name:<40} {h0:7.1f} {h1:9.1f} {h2:8.1f} {w2:7.1f}")
        print("\n# parts of a planned no-out call and of the operator's backward, 64x64x64 "
              "bf16, host us/call")
        for name, us in parts(args.calls, args.reps):
            results.append(dict(form="part: " + name, host_us=us))
            print(f"{name:<40} {us:7.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
