"""What ``python -m gemm`` prints: each kernel checked against a reference and timed.

The reference is cuBLAS through torch (TF32 off) or CuPy when either is installed, else numpy
in float64 on the host. Outputs are poisoned with NaN before every checked run, and every
element is compared with ``|C - ref| <= tol * (|A| @ |B|)``.
"""

import json

import numpy as np
from tqdm import tqdm

from gemm import api
from gemm._env import simulator_active

__all__ = ["run", "bench", "check", "Backend", "overhead", "per_call_us"]

TOL = {"float32": 1e-4}


class Backend:
    """Random device matrices, a reference product and a timer, through torch, CuPy or
    numba + numpy (in that order of preference)."""

    def __init__(self):
        self.name = "numba"
        if not simulator_active():
            for name in ("torch", "cupy"):
                try:
                    self.lib = __import__(name)
                    if name == "torch" and not self.lib.cuda.is_available():
                        continue
                    self.name = name
                    break
                except ImportError:
                    continue
        if self.name == "torch":
            self.lib.backends.cuda.matmul.allow_tf32 = False
        self.rng = np.random.default_rng(0)

    def random(self, shape, order="C"):
        host = self.rng.standard_normal(shape, dtype=np.float32)
        host = np.asfortranarray(host) if order == "F" else host
        return self.to_device(host)

    def to_device(self, host):
        if self.name == "torch":
            t = self.lib.from_numpy(np.ascontiguousarray(host.T if host.flags.f_contiguous
                                                         and not host.flags.c_contiguous
                                                         else host)).cuda()
            return t.T if host.flags.f_contiguous and not host.flags.c_contiguous else t
        if self.name == "cupy":
            return self.lib.asarray(host, order="K")
        from numba import cuda
        return cuda.to_device(host)

    def to_host(self, x):
        if self.name == "torch":
            return x.cpu().numpy()
        if self.name == "cupy":
            return self.lib.asnumpy(x)
        return x.copy_to_host()

    def empty_nan(self, shape):
        host = np.full(shape, np.nan, np.float32)
        return self.to_device(host)

    def reference(self, A, B):
        """(A @ B, |A| @ |B|) on the host, float64 for numba, cuBLAS fp32 otherwise."""
        if self.name == "numba":
            a = self.to_host(A).astype(np.float64)
            b = self.to_host(B).astype(np.float64)
            return a @ b, np.abs(a) @ np.abs(b)
        if self.name == "torch":
            return self.to_host(A @ B), self.to_host(A.abs() @ B.abs())
        return self.to_host(A @ B), self.to_host(abs(A) @ abs(B))

    def cublas(self, A, B, out):
        if self.name == "torch":
            return self.lib.mm(A, B, out=out)
        if self.name == "cupy":
            return self.lib.matmul(A, B, out=out)
        raise RuntimeError("no cuBLAS without torch or CuPy")

    def time_ms(self, fn, reps=20, warmup=3):
        """Mean milliseconds per call of ``fn`` over ``reps`` calls, after ``warmup`` calls."""
        from numba import cuda
        for _ in range(warmup):
            fn()
        start, stop = cuda.event(), cuda.event()
        sync = self.lib.cuda.synchronize if self.name == "torch" else cuda.synchronize
        sync()
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        return cuda.event_elapsed_time(start, stop) / reps


def check(backend, C, A, B, alpha=1.0, beta=0.0, C0=None):
    """Max error of C against ``alpha * A @ B + beta * C0`` relative to the tolerance bound;
    <= 1 passes. NaN (an element never written) fails."""
    ref, bound = backend.reference(A, B)
    ref = alpha * ref + (beta * C0 if C0 is not None else 0)
    got = backend.to_host(C).astype(np.float64)
    bound = abs(alpha) * bound + (abs(beta * C0) if C0 is not None else 0) + 1e-30
    ratio = np.abs(got - ref) / (TOL["float32"] * bound)
    return float(np.nan_to_num(ratio, nan=np.inf).max())


def run(size=4096):
    backend = Backend()
    if simulator_active():
        return _run_simulator(backend)
    m = n = k = size
    A, B = backend.random((m, k)), backend.random((k, n))
    rows = []
    kernels = list(api.KERNELS)
    flop = 2.0 * m * n * k
    for name in tqdm(kernels + ["cuBLAS"], desc="kernels", unit="kernel"):
        C = backend.empty_nan((m, n))
        if name == "cuBLAS":
            if backend.name == "numba":
                continue
            fn = lambda: backend.cublas(A, B, C)  # noqa: E731
        else:
            fn = lambda name=name: api.matmul(A, B, C, kernel=name)  # noqa: E731
        fn()
        err = check(backend, C, A, B)
        ms = backend.time_ms(fn)
        rows.append((name, ms, flop / ms / 1e9, err))
    ref = next((r[2] for r in rows if r[0] == "cuBLAS"), None)
    print(f"\nfp32 GEMM {m}x{n}x{k}, reference {backend.name}"
          f"{' (cuBLAS, TF32 off)' if backend.name == 'torch' else ''}")
    print(f"{'kernel':>14} {'ms':>9} {'TFLOP/s':>8} {'x cuBLAS':>9} {'err/tol':>8}  ok")
    ok = True
    for name, ms, tf, err in rows:
        ratio = f"{tf / ref:9.2f}" if ref else f"{'-':>9}"
        ok &= err <= 1
        print(f"{name:>14} {ms:9.3f} {tf:8.2f} {ratio} {err:8.3f}  {'yes' if err <= 1 else 'NO'}")
    return 0 if ok else 1


def _run_simulator(backend):
    m, n, k = 150, 136, 19
    print(f"CUDA simulator (NUMBA_ENABLE_CUDASIM=1): no timings; each kernel on a small "
          f"{m}x{n}x{k} problem with partial tiles, checked against numpy float64.")
    A, B = backend.random((m, k)), backend.random((k, n), order="F")
    ok = True
    for name in tqdm(list(api.KERNELS), desc="kernels (simulated)", unit="kernel"):
        C = backend.empty_nan((m, n))
        api.matmul(A, B, C, kernel=name)
        err = check(backend, C, A, B)
        ok &= err <= 1
        tqdm.write(f"{name:>14}: err/tol {err:.3f}  {'ok' if err <= 1 else 'WRONG'}")
    return 0 if ok else 1


def per_call_us(fn, calls=2000, warmup=50):
    """Wall-clock microseconds per call of ``fn`` over ``calls`` calls (torch synchronized
    before and after, so queued GPU work is counted once at the end)."""
    import time
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def overhead(n=64, calls=2000):
    """Host microseconds per call of ``gemm.matmul`` and ``torch.mm`` on n x n torch tensors
    (launch-bound: the kernels take a few microseconds), measured over ``calls`` calls."""
    import torch
    A = torch.randn(n, n, device="cuda")
    B = torch.randn(n, n, device="cuda")
    C = torch.empty(n, n, device="cuda")
    out = {name: per_call_us(fn, calls)
           for name, fn in (("gemm.matmul", lambda: api.matmul(A, B, C)),
                            ("torch.mm", lambda: torch.mm(A, B, out=C)))}
    for name, us in out.items():
        print(f"{name:>12}: {us:6.1f} us per call ({n}x{n}x{n}, {calls} calls)")
    return out


def bench(sizes, kernels, json_path, plot_path):
    if simulator_active():
        print("bench needs a GPU; in the simulator nothing is timed.")
        return 1
    backend = Backend()
    kernels = kernels or list(api.KERNELS)
    results = {"backend": backend.name, "sizes": sizes, "tflops": {}}
    for name in kernels + ["cuBLAS"]:
        results["tflops"][name] = []
    for s in tqdm(sizes, desc="sizes"):
        A, B = backend.random((s, s)), backend.random((s, s))
        C = backend.empty_nan((s, s))
        for name in kernels + ["cuBLAS"]:
            if name == "cuBLAS":
                fn = lambda: backend.cublas(A, B, C)  # noqa: E731
            else:
                fn = lambda name=name: api.matmul(A, B, C, kernel=name)  # noqa: E731
            ms = backend.time_ms(fn, reps=10)
            results["tflops"][name].append(2.0 * s ** 3 / ms / 1e9)
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1)
    print(json.dumps(results["tflops"], indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install '.[bench]'): no plot written")
        return 0
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, ys in results["tflops"].items():
        ax.plot(sizes, ys, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOP/s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(plot_path, dpi=120)
    print(f"wrote {json_path} and {plot_path}")
    return 0
