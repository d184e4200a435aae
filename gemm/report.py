"""What ``python -m gemm`` prints: each kernel checked against a reference and timed.

SIMT kernels (fp32): the reference is cuBLAS through torch (TF32 off) or CuPy when either is
installed, else numpy in float64 on the host. Tensor-core kernel (bf16, f16, and tf32 on
float32 inputs): the reference is float64 on the same inputs (after their rounding to
bf16/f16), computed on the GPU through torch or CuPy when installed; cuBLAS on the same
operands is checked and timed beside it. Outputs are poisoned with NaN before every checked
run, and every element is compared with ``|C - ref| <= tol * (|A| @ |B|)``.
"""

import json
import math
import sys
import time

import numpy as np
from tqdm import tqdm

from gemm import api
from gemm.tuning import autotune
from gemm._env import simulator_active
from gemm.hopper import HopperConfig, hopper_supported
from gemm.tensorcore import TensorCoreConfig

# numba, torch and matplotlib are imported inside the functions that use them: importing
# this module loads none of them (torch and matplotlib are optional).

__all__ = ["run", "bench", "tune", "check", "check64", "Backend", "overhead", "per_call_us",
           "bfloat16_bits", "tensorcore_tol", "TENSORCORE_DTYPES"]

TOL = {"float32": 1e-4}
TENSORCORE_DTYPES = ("bfloat16", "float16", "tfloat32")


def bfloat16_bits(x):
    """float32 array -> (its bfloat16 bit patterns as uint16, rounded to nearest even; their
    exact values as float64).

    >>> bfloat16_bits(np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8], np.float32))[1].tolist()
    [1.0, 1.0, 1.015625]
    """
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def tensorcore_tol(dtype, k):
    """Error bound relative to ``|A| @ |B|`` for the tensor-core kernel against float64 on
    the same inputs: bf16/f16 inputs are exact, so only the f32 accumulation errs (it grows
    like sqrt(K)); tf32 rounds each float32 input to a 10-bit mantissa (at most 2^-10
    relative, truncated), so a product may be off by 2^-9."""
    if dtype == "tfloat32":
        return 2.5e-3
    return 2e-5 * math.sqrt(max(1.0, k / 64))


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

    def random_typed(self, shape, dtype):
        """(a random row-major device matrix of ``dtype``, its exact values as float64 on the
        host). "bfloat16": a torch bfloat16 tensor, with CuPy and numba (which have no
        bfloat16) its bits as uint16; "float16"; "tfloat32": float32 data."""
        x = self.rng.standard_normal(shape, dtype=np.float32)
        if dtype == "float16":
            h = x.astype(np.float16)
            return self.to_device(h), h.astype(np.float64)
        if dtype == "tfloat32":
            return self.to_device(x), x.astype(np.float64)
        if dtype != "bfloat16":
            raise ValueError(f"random_typed: unknown dtype {dtype!r}")
        bits, exact = bfloat16_bits(x)
        if self.name == "torch":
            return self.lib.from_numpy(bits.view(np.int16)).cuda().view(self.lib.bfloat16), exact
        return self.to_device(bits), exact

    def reference64(self, a64, b64):
        """(a64 @ b64, |a64| @ |b64|) in float64 as host arrays, computed on the GPU through
        torch or CuPy when there is one."""
        if self.name == "torch":
            a, b = self.lib.from_numpy(a64).cuda(), self.lib.from_numpy(b64).cuda()
            return (a @ b).cpu().numpy(), (a.abs() @ b.abs()).cpu().numpy()
        if self.name == "cupy":
            a, b = self.lib.asarray(a64), self.lib.asarray(b64)
            return self.lib.asnumpy(a @ b), self.lib.asnumpy(abs(a) @ abs(b))
        return a64 @ b64, np.abs(a64) @ np.abs(b64)

    def cublas_typed(self, A, B, dtype):
        """(label, a call of cuBLAS on the tensor-core operands A and B) or None where this
        backend has none: torch.mm (f32 out where torch allows it) and for tf32 torch.mm with
        TF32 allowed (see :meth:`tf32`); CuPy for float16."""
        if self.name == "torch":
            torch = self.lib
            if dtype == "tfloat32":
                C = torch.empty(A.shape[0], B.shape[1], device=A.device)
                return "cuBLAS tf32", lambda: torch.mm(A, B, out=C)
            try:
                torch.mm(A[:1], B[:, :1], out_dtype=torch.float32)
                return "cuBLAS (f32 out)", lambda: torch.mm(A, B, out_dtype=torch.float32)
            except (TypeError, RuntimeError):
                return f"cuBLAS ({dtype} out)", lambda: torch.mm(A, B)
        if self.name == "cupy" and dtype == "float16":
            return "cuBLAS (f16 out)", lambda: self.lib.matmul(A, B)
        return None

    def tf32(self, allowed):
        """Let torch's cuBLAS use TF32 (or not); returns the previous setting."""
        if self.name != "torch":
            return False
        previous = self.lib.backends.cuda.matmul.allow_tf32
        self.lib.backends.cuda.matmul.allow_tf32 = allowed
        return previous

    def to_host(self, x):
        if self.name == "torch":
            return (x.float() if x.dtype == self.lib.bfloat16 else x).cpu().numpy()
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
    bound = abs(alpha) * bound + (abs(beta * C0) if C0 is not None else 0)
    return check64(backend, C, ref, bound, TOL["float32"])


def check64(backend, C, ref, bound, tol):
    """max |C - ref| / (tol * bound) over the elements, NaN counted as infinite: <= 1 passes.

    >>> check64(None, np.array([1.0, 2.5]), np.array([1.0, 2.0]), np.array([1.0, 1.0]), 1)
    0.5
    """
    got = C if isinstance(C, np.ndarray) else backend.to_host(C)
    ratio = np.abs(got.astype(np.float64) - ref) / (tol * bound + 1e-30)
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
    tc_rows = _run_tensorcore(backend, m, n, k)
    ref = next((r[2] for r in rows if r[0] == "cuBLAS"), None)
    print(f"\nfp32 GEMM {m}x{n}x{k}, reference {backend.name}"
          f"{' (cuBLAS, TF32 off)' if backend.name == 'torch' else ''}")
    print(f"{'kernel':>14} {'ms':>9} {'TFLOP/s':>8} {'x cuBLAS':>9} {'err/tol':>8}  ok")
    ok = True
    for name, ms, tf, err in rows:
        ratio = f"{tf / ref:9.2f}" if ref else f"{'-':>9}"
        ok &= err <= 1
        print(f"{name:>14} {ms:9.3f} {tf:8.2f} {ratio} {err:8.3f}  {'yes' if err <= 1 else 'NO'}")
    ok &= _print_tensorcore(tc_rows, m, n, k, flop)
    return 0 if ok else 1


def _tensorcore_operands(backend, m, n, k, dtype):
    """(A, B, their exact values) for the tensor-core check: A (M, K) row-major and B (K, N)
    K-major, the .T of an (N, K) row-major matrix (the layout of torch's Linear weights)."""
    A, a64 = backend.random_typed((m, k), dtype)
    Bt, bt64 = backend.random_typed((n, k), dtype)
    return A, Bt.T, a64, bt64.T


def _hopper_device():
    from numba import cuda
    return hopper_supported(cuda.get_current_device().id)


def _tensorcore_choices(backend, A, B, C, dtype):
    """[(matmul keywords, label)] of the tensor-core calls to show: matmul's own choice (the
    tuned config, else the device's default: the Hopper kernel on 9.x) and, on a 9.x GPU,
    the SM80 mma.sync kernel beside it; bf16 bits (no torch) need explicit configs."""
    sm80 = TensorCoreConfig(dtype=dtype)
    hopper = not simulator_active() and _hopper_device()
    default = HopperConfig(dtype=dtype) if hopper else sm80
    kw = {"allow_tf32": True} if dtype == "tfloat32" else {}
    if dtype == "bfloat16" and backend.name != "torch":
        out = [({"kernel": default}, f"default {autotune.config_label(default)} (bits)")]
    else:
        tuned = autotune.tuned_config(A, B, C)
        label = f"tuned {autotune.config_label(tuned)}" if tuned is not None else \
            f"default {autotune.config_label(default)}"
        out = [(kw, label)]
    if hopper:
        out.append((dict(kw, kernel=sm80), f"sm80 mma.sync {autotune.config_label(sm80)}"))
    return out


def _check_tensorcore(backend, dtype, m, n, k):
    """One dtype: (operands, reference, bound, tol, rows) with a row = (dtype, label, ms or
    None, err or None, ok) per call of :func:`_tensorcore_choices`; an exception of a
    kernel makes a failed row, not a crash."""
    A, B, a64, b64 = _tensorcore_operands(backend, m, n, k, dtype)
    ref, bound = backend.reference64(a64, b64)
    tol = tensorcore_tol(dtype, k)
    rows = []
    for kw, label in _tensorcore_choices(backend, A, B, backend.empty_nan((m, n)), dtype):
        C = backend.empty_nan((m, n))
        fn = lambda: api.matmul(A, B, C, **kw)  # noqa: E731
        try:
            fn()
            err = check64(backend, C, ref, bound, tol)
            ms = None if simulator_active() else backend.time_ms(fn)
            rows.append((dtype, label, ms, err, err <= 1))
        except Exception as e:  # noqa: BLE001 - reported as a failed row
            tqdm.write(f"{dtype} {label}: {type(e).__name__}: {e}")
            rows.append((dtype, label, None, None, False))
    return (A, B), (ref, bound, tol), rows


def _run_tensorcore(backend, m, n, k):
    """Rows of the tensor-core kernel and of cuBLAS on the same operands, per dtype."""
    rows = []
    for dtype in tqdm(TENSORCORE_DTYPES, desc="tensor-core kernels", unit="dtype"):
        (A, B), (ref, bound, tol), kernel_rows = _check_tensorcore(backend, dtype, m, n, k)
        rows += kernel_rows
        cublas = backend.cublas_typed(A, B, dtype)
        if cublas is None:
            continue
        name, call = cublas
        previous = backend.tf32(dtype == "tfloat32")
        try:
            err = check64(backend, call(), ref, bound, tol)
            rows.append((dtype, name, backend.time_ms(call), err, None))
        finally:
            backend.tf32(previous)
    return rows


def _print_tensorcore(rows, m, n, k, flop):
    """Print the tensor-core table; True when every kernel row passed."""
    print(f"\ntensor-core GEMM {m}x{n}x{k}: A row-major, B K-major, f32 accumulate, f32 out; "
          "err/tol against float64 on the same (rounded) inputs, tol per dtype")
    print(f"{'dtype':>9} {'kernel':<32} {'ms':>9} {'TFLOP/s':>8} {'x cuBLAS':>9} {'err/tol':>8}"
          "  ok")
    best = {r[0]: flop / r[2] / 1e9 for r in rows if r[4] is None}
    ok = True
    for dtype, label, ms, err, passed in rows:
        tf = flop / ms / 1e9 if ms else None
        cols = [f"{ms:9.3f}" if ms else f"{'-':>9}", f"{tf:8.2f}" if tf else f"{'-':>8}",
                f"{tf / best[dtype]:9.2f}" if tf and dtype in best else f"{'-':>9}",
                f"{err:8.3f}" if err is not None else f"{'error':>8}",
                "-" if passed is None else ("yes" if passed else "NO")]
        ok &= passed is not False
        print(f"{dtype:>9} {label:<32} " + " ".join(cols[:4]) + "  " + cols[4])
    return ok


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
    # The tensor-core kernel: one block of its default 128x128x32 tile, partial in M, N, K.
    m, n, k = 40, 24, 40
    print(f"Tensor-core kernel on {m}x{n}x{k} (A row-major, B K-major), checked against numpy "
          "float64 on the same rounded inputs.")
    # its warps meet at collectives that wait on locks, where a waiting thread runs again at
    # Python's next thread switch: a shorter interval than the default 5 ms runs them faster
    # (the SIMT kernels above, which meet at syncthreads, ran slower with it)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        for dtype in tqdm(TENSORCORE_DTYPES, desc="tensor-core (simulated)", unit="dtype"):
            for dtype, label, _, err, passed in _check_tensorcore(backend, dtype, m, n, k)[2]:
                ok &= passed
                text = f"{err:.3f}" if err is not None else "error"
                tqdm.write(f"{dtype:>9} {label}: err/tol {text}  {'ok' if passed else 'WRONG'}")
    finally:
        sys.setswitchinterval(interval)
    return 0 if ok else 1


def tune(sizes, dtype="bfloat16", a_major="K", b_major="K", out_dtype="float32", reps=20,
         workers=None, force=False):
    """``python -m gemm tune``: tune the tensor-core kernel for M = N = K = each size (A
    row-major when ``a_major`` is "K", else column-major; B likewise with "K" or "N"), unless
    the cache has the problem already (``force`` tunes again). Prints each winner and the
    fastest candidates; returns an exit status."""
    if simulator_active():
        print("tune needs a GPU; in the simulator nothing is timed.")
        return 1
    backend = Backend()
    if dtype == "bfloat16" and backend.name != "torch":
        print("tune for bfloat16 needs torch (numba and CuPy arrays have no bfloat16 type).")
        return 1
    if a_major not in ("K", "M") or b_major not in ("K", "N"):
        raise ValueError(f"tune: a_major must be K or M and b_major K or N, got {a_major!r}, "
                         f"{b_major!r}")
    for s in sizes:
        A, _ = backend.random_typed((s, s), dtype)
        B, _ = backend.random_typed((s, s), dtype)
        A, B = (A if a_major == "K" else A.T), (B.T if b_major == "K" else B)
        key = autotune.problem_key(A, B, None, out_dtype, caller="tune")
        cfg = None if force else autotune.lookup(key)
        if cfg is not None:
            print(f"{key}: cached {autotune.config_label(cfg)} (--force tunes again)")
            continue
        cfg = autotune.tune(A, B, out_dtype=out_dtype, reps=reps, workers=workers)
        entry = autotune.load_cache().get(key, {})
        print(f"{key}: {autotune.config_label(cfg)}")
        for t in entry.get("timings_ms", [])[:5]:
            print(f"    {t['label']:<24} {t['ms']:8.3f} ms {2.0 * s ** 3 / t['ms'] / 1e9:8.1f} "
                  "TFLOP/s")
    return 0


def per_call_us(fn, calls=2000, warmup=50):
    """Wall-clock microseconds per call of ``fn`` over ``calls`` calls (torch synchronized
    before and after, so queued GPU work is counted once at the end)."""
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
