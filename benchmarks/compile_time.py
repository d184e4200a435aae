"""Time to first result: where a new kernel variant's compile time goes, cold and warm.

    python benchmarks/compile_time.py [--kernels simt tensorcore hopper]
                                      [--tree PATH] [--json OUT]

For each kernel (``simt``: the default SIMT kernel, fp32 row-major A and B; ``tensorcore``:
the default tensor-core kernel, bf16 ``a @ w.T``; ``hopper`` (or its other name
``cute_hopper``): the Hopper kernel, written with gemm.cute, bf16 ``a @ w.T`` (without a GPU:
the default 64 x 256 tiles, bf16 out, the TMA epilogue)) two fresh processes run with empty caches
(``LAYOUTALG_CACHE`` and ``NUMBA_CACHE_DIR`` in a new temporary folder), the second after
the first has filled them:

- with a GPU, each process times its first ``gemm.matmul`` call (torch operands made before,
  module load and the wait for the result included) and splits it into phases by wrapping
  numba-cuda's own steps: the kernel's making (a generator's source, or the Python function of
  a kernel written with gemm.cute, its layouts computed), numba typing and
  lowering (``compile_cuda``), NVVM (``nvvm.compile_ir``), ptxas (the linker, PTX -> cubin,
  NVVM excluded), numba's disk cache lookup, module load; "other" is the rest of the call;
- without one, the cold process compiles the same kernel to PTX (``compile_ptx`` for sm_90a)
  and assembles it with the ptxas binary of the nvcc wheel; a warm process needs a GPU (numba
  keeps cubins).

It also counts the distinct kernels ``gemm.matmul`` can compile, and how many a typical
session meets (a list of calls a notebook user makes, replayed in the simulator without
running the kernels). ``--tree`` runs the children on another checkout of the package (to
time a baseline in the same run).
"""

import argparse
import importlib.abc
import importlib.machinery
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KERNELS = ("simt", "tensorcore")       # the default; also "hopper", "cute_hopper"
HOPPER = ("hopper", "cute_hopper")
PHASES = ("source", "frontend", "nvvm", "ptxas", "cache_load", "module_load")


# --- the child: one process, one kernel ---------------------------------------------------------

class _Phases:
    """Wall time spent in wrapped functions, outermost calls only, per phase."""

    def __init__(self):
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.active = []

    def reset(self):
        self.seconds = dict.fromkeys(PHASES, 0.0)

    def timed(self, phase, original):
        def timed(*args, **kwargs):
            if phase in self.active:           # nested call of the same phase
                return original(*args, **kwargs)
            self.active.append(phase)
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                dt = time.perf_counter() - t0
                self.active.pop()
                self.seconds[phase] += dt
                for outer in self.active:       # an outer phase excludes its inner ones
                    self.seconds[outer] -= dt
        return timed

    def wrap(self, owner, name, phase):
        original = getattr(owner, name, None)
        if original is not None:
            setattr(owner, name, self.timed(phase, original))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``callbacks[name](module)`` once module ``name`` has executed, so that the steps
    of numba are wrapped without importing numba before the timed call (a warm call of a
    tree that loads cubins itself never imports it)."""

    def __init__(self, callbacks):
        self.callbacks = dict(callbacks)

    def find_spec(self, name, path, target=None):
        callback = self.callbacks.pop(name, None)
        if callback is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            callback(module)
        spec.loader.exec_module = exec_module
        return spec


def _instrument():
    """Wrap the phases' functions as their modules are imported; returns the _Phases."""
    phases = _Phases()

    def on_dispatcher(dispatcher):
        phases.wrap(dispatcher, "compile_cuda", "frontend")
        if hasattr(dispatcher, "CUDACache"):
            phases.wrap(dispatcher.CUDACache, "load_overload", "cache_load")

    callbacks = {
        "numba.cuda.compiler": lambda m: phases.wrap(m, "compile_cuda", "frontend"),
        "numba.cuda.dispatcher": on_dispatcher,
        "numba.cuda.cudadrv.nvvm": lambda m: phases.wrap(m, "compile_ir", "nvvm"),
        "numba.cuda.codegen": lambda m: phases.wrap(m.CUDACodeLibrary, "get_cubin", "ptxas"),
        "numba.cuda.cudadrv.driver": lambda m: phases.wrap(m.Context, "create_module_image",
                                                           "module_load"),
        "gemm.call.binary": lambda m: phases.wrap(m.Binary, "_loaded", "module_load"),
        "gemm.cute_kernels": lambda m: phases.wrap(m, "kernel_function", "source"),
        "gemm.tensorcore.cute_gemm": lambda m: phases.wrap(m, "kernel_function", "source"),
    }
    for name in [n for n in callbacks if n in sys.modules]:
        callbacks.pop(name)(sys.modules[name])
    sys.meta_path.insert(0, _AfterImport(callbacks))
    return phases


def _calls(kernel, n):
    """(first call, second call of another variant, reference of the first) for ``kernel``."""
    import torch
    import gemm
    torch.manual_seed(0)
    if kernel == "simt":
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        return (lambda: gemm.matmul(a, b), lambda: gemm.matmul(a, b.T),        # B col-major
                a.double() @ b.double())
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    named = {"kernel": kernel} if kernel in HOPPER else {}
    return (lambda: gemm.matmul(a, w.T, **named),
            lambda: gemm.matmul(a, w, **named),                                 # B N-major
            a.double() @ w.double().T)


def _timed(call):
    import torch
    t0 = time.perf_counter()
    out = call()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def _child_gpu(kernel, n, phases, imports):
    """The first call (and, when cold, a second variant's first call in the same process)."""
    import torch
    first, other, ref = _calls(kernel, n)
    torch.cuda.synchronize()
    phases.reset()
    out, t_first = _timed(first)
    row = dict(first_call=t_first, imports=imports, **phases.seconds)
    row["numba_imported"] = "numba" in sys.modules
    row["rel_err"] = float(((out.double() - ref).abs().max() / ref.abs().max()).item())
    row["again"] = _timed(first)[1]
    phases.reset()
    _, t_next = _timed(other)
    nxt = dict(first_call=t_next, imports=0.0, **phases.seconds)
    return {"first": row, "next": nxt}


def _child_cpu(kernel, phases, imports):
    from numba import cuda
    from gemm import api, simt, tensorcore
    from gemm.arch.inspect import find_ptxas
    phases.reset()
    t0 = time.perf_counter()
    if kernel == "simt":
        cfg = api.KERNELS[api.DEFAULT_KERNEL]
        # fp32 row-major A (M, K) and B (K, N): A's unit stride along K (mode 1), B's along N
        fn, sig = simt.simt_function(cfg, 1, 0, 4, 4), simt.SIGNATURE
    elif kernel in HOPPER:
        from gemm.hopper import HopperConfig, HopperVariant, hopper_function, kernel_config
        cfg = HopperConfig(dtype="bfloat16")
        v = HopperVariant(kernel_config(cfg), "K", "K", "bfloat16", True, tma_store=True)
        fn, sig, bounds = hopper_function(v), v.signature, (cfg.threads, cfg.blocks_per_sm)
    else:
        v = tensorcore.Variant(tensorcore.TensorCoreConfig())
        fn, sig = tensorcore.tensorcore_function(v), v.signature
    ptx, _ = cuda.compile_ptx(fn, sig, cc=(9, 0, "a"),
                              **({"launch_bounds": bounds} if kernel in HOPPER else {}))
    total = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        t1 = time.perf_counter()
        subprocess.run([find_ptxas(), "-arch=sm_90a", path, "-o", os.path.join(tmp, "k.cubin")],
                       check=True, capture_output=True)
        phases.seconds["ptxas"] = time.perf_counter() - t1
    row = dict(first_call=total + phases.seconds["ptxas"], ptx_lines=ptx.count("\n"),
               imports=imports, **phases.seconds)
    return {"first": row}


def _child(kernel, gpu, n):
    phases = _instrument()
    t_start = time.perf_counter()
    if gpu:
        import torch                            # the user's own import, not timed
        torch.zeros(1, device="cuda")
        t_start = time.perf_counter()
    import gemm.api  # noqa: F401  (what the first matmul loads)
    imports = time.perf_counter() - t_start
    result = _child_gpu(kernel, n, phases, imports) if gpu else \
        _child_cpu(kernel, phases, imports)
    print("RESULT " + json.dumps(result), flush=True)


# --- counting variants --------------------------------------------------------------------------

def _typical_session():
    """Replay, in the simulator without running kernels, the calls a notebook user makes;
    returns the number of distinct kernels they compile."""
    import numpy as np
    from numba import cuda
    from gemm.call import launch
    import gemm
    made = []                               # a Launcher per distinct kernel compiled
    init = launch.Launcher.__init__

    def counting(self, *args, **kwargs):
        made.append(self)
        init(self, *args, **kwargs)
    launch.Launcher.__init__ = counting
    launch.Launcher.__call__ = lambda self, *a, **k: None        # compile, do not run

    def dev(shape, dtype, transpose=False):
        x = cuda.to_device(np.zeros(shape[::-1] if transpose else shape, dtype))
        return x.T if transpose else x
    f32, bf16 = np.float32, np.uint16
    from gemm.tensorcore import TensorCoreConfig
    bf = TensorCoreConfig(dtype="bfloat16")
    calls = [
        (dev((512, 512), f32), dev((512, 512), f32), {}),                       # fp32 A @ B
        (dev((512, 512), f32), dev((512, 512), f32, True), {}),                 # fp32 A @ W.T
        (dev((512, 512), bf16), dev((512, 512), bf16, True), {"kernel": bf}),   # bf16 x @ w.T
        (dev((512, 512), bf16), dev((512, 512), bf16), {"kernel": bf}),         # bf16 x @ w
        (dev((100, 300), f32), dev((300, 70), f32), {}),                        # odd fp32
        (dev((100, 300), bf16), dev((300, 70), bf16, True), {"kernel": bf}),    # odd bf16
        (dev((512, 512), f32), dev((512, 512), f32), {"allow_tf32": True}),     # tf32
    ]
    for A, B, kw in calls:
        gemm.matmul(A, B, **kw)
    return len(made)


def _count_all():
    """Distinct kernels ``gemm.matmul`` can compile: SIMT variants of the named kernels and
    tensor-core variants of each dtype's default config (majors, output types, copy widths)."""
    import itertools
    from gemm import tensorcore as tc
    from gemm.tuning import precompile
    simt_n = len(precompile.variants())
    tc_n = 0
    for dtype in tc.DTYPES:
        top = 16 // tc.TensorCoreConfig(dtype=dtype).element_bytes
        vecs = [v for v in (1, 2, 4, 8) if v <= top]
        tc_n += len(list(itertools.product(tc.MAJORS, tc.MAJORS, tc.OUT_DTYPES, vecs, vecs,
                                           (True, False))))
    return {"simt": simt_n, "tensorcore_default_configs": tc_n}


def _child_count():
    out = _count_all()
    out["typical_session"] = _typical_session()
    print("RESULT " + json.dumps({"first": out}), flush=True)


# --- the parent -----------------------------------------------------------------------------------

def _run_child(args, env, tree, code=None):
    env = dict(os.environ, **env)
    env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")])
    command = ["-c", code] if code else [os.path.abspath(__file__), *args]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *command], env=env, capture_output=True, text=True,
                          cwd=tree)
    wall = time.perf_counter() - t0
    if code:
        return proc.returncode
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"child {args} failed (rc {proc.returncode}):\n{proc.stdout}\n"
                           f"{proc.stderr[-4000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    result["first"]["process_wall"] = wall
    return result


def _gpu_present():
    probe = "from numba import cuda; import sys; sys.exit(0 if cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS),
                        choices=KERNELS + HOPPER)
    parser.add_argument("--tree", default=ROOT, help="checkout whose gemm package is timed")
    parser.add_argument("--size", type=int, default=2048, help="M = N = K of the GPU call")
    parser.add_argument("--json", default=None)
    parser.add_argument("--no-bytecode", action="store_true",
                        help="leave Python's bytecode caching as the environment sets it")
    parser.add_argument("--child", nargs=2, metavar=("KERNEL", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kernel, mode = args.child
        if kernel == "count":
            return _child_count()
        return _child(kernel, mode == "gpu", args.size)

    tree = os.path.abspath(args.tree)
    gpu = _gpu_present()
    mode = "gpu" if gpu else "cpu"
    results = {"tree": tree, "mode": mode}
    with tempfile.TemporaryDirectory() as pyc:
        base_env = {"NUMBA_ENABLE_CUDASIM": "0"}
        if not args.no_bytecode:    # libraries' bytecode cached, as pip installs them
            base_env.update(PYTHONDONTWRITEBYTECODE="", PYTHONPYCACHEPREFIX=pyc)
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
            _run_child(None, base_env, tree, code="import sympy, numba.cuda, layoutalg.tiled, "
                       "gemm.api, gemm.cute_kernels, "
                       "gemm.tensorcore.cute_gemm" + (", torch" if gpu else ""))
        results["bytecode_cached"] = not args.no_bytecode
        for kernel in args.kernels:
            with tempfile.TemporaryDirectory() as tmp:
                env = dict(base_env, LAYOUTALG_CACHE=os.path.join(tmp, "layoutalg"),
                           NUMBA_CACHE_DIR=os.path.join(tmp, "numba"),
                           GEMM_AUTOTUNE_CACHE=os.path.join(tmp, "autotune.json"))
                child = ["--child", kernel, mode, "--size", str(args.size)]
                cold = _run_child(child, env, tree)
                results[kernel] = {"cold": cold["first"]}
                if gpu:
                    results[kernel]["next"] = cold["next"]
                    results[kernel]["warm"] = _run_child(child, env, tree)["first"]
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(base_env, LAYOUTALG_CACHE=tmp, NUMBA_ENABLE_CUDASIM="1")
            results["variants"] = _run_child(["--child", "count", "sim"], env, tree)

    cols = ("imports",) + PHASES + ("other", "first_call", "process_wall")
    print(f"compile time, {mode} ({'first gemm.matmul call' if gpu else 'compile_ptx + ptxas'}"
          f"), tree {tree}, library bytecode {'cached' if not args.no_bytecode else 'as set'}; "
          "seconds")
    print(f"{'kernel':>11} {'cache':>5} " + " ".join(f"{c:>11}" for c in cols))
    for kernel in args.kernels:
        for state, r in results[kernel].items():
            r["other"] = max(0.0, r["first_call"] - sum(r[p] for p in PHASES))
            print(f"{kernel:>11} {state:>5} "
                  + " ".join(f"{r.get(c, float('nan')):11.3f}" for c in cols))
    v = results["variants"]["first"]
    print(f"distinct kernels gemm.matmul can compile: {v['simt']} SIMT (named kernels), "
          f"{v['tensorcore_default_configs']} tensor-core (default config of each dtype); "
          f"a typical session compiles {v['typical_session']}")
    if gpu:
        for kernel in args.kernels:
            r = results[kernel]["cold"]
            print(f"{kernel}: result rel. error {r['rel_err']:.1e}; the same call again "
                  f"{1e3 * r['again']:.1f} ms; numba imported by a warm first call: "
                  f"{results[kernel]['warm']['numba_imported']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
