"""GPU check of gemm.tensorcore: correctness against float64 and cuBLAS, then speed against cuBLAS.

Run on the GPU host from the project root (after the wheel line of ../shared/gpu/wheels.sh):

    python3 benchmarks/tensorcore_check.py [--json PATH] [--quick] [--no-correctness]
        [--no-timing] [--configs SPEC ...] [--dtype-configs SPEC ...] [--sizes N ...]
        [--sections bf16 tf32 f16] [--seed S] [--workers W]

A SPEC is ``bMxbNxbK:wmxwn:stages[:dD][:bB][:gG]`` (D: delay_release, B: min_blocks, G:
group_m), e.g. ``128x256x32:2x4:4:d1``, or ``default`` (config=None: the kernel's own
default).

1. Plans every call of the run (``plan_call``) and compiles the distinct variants in parallel
   processes (``compile_variant``, spawn; their cubin files hand them to this process).
   Running tests/test_tensorcore_gpu.py first leaves most of them in the cache.
2. Correctness: the cases of tests/test_tensorcore_gpu.py (defined here, below): the seed's
   bf16 TN cubes 64..4096 and 64x64x256 (also against cuBLAS), random shapes for every input
   dtype x A major x B major x out dtype, alpha/beta with column-major outputs, numba / CuPy /
   torch operands, every ring depth with delay_release 0 and 1. Outputs are NaN-poisoned and
   sit inside a NaN guard that must stay intact. Bounds: :func:`tolerances`.
3. Timing (TFLOP/s, median of CUDA-event times of single calls after a warm-up) at 4096^3 and
   8192^3: bf16 in, f32 out for every --configs SPEC and cuBLAS bf16 (torch.mm, f32 out where
   torch allows it, else bf16 out: the table says which); tf32 (float32 in and out) against
   cuBLAS with TF32 on; f16 in, f32 out against cuBLAS f16. cuBLAS is timed before and after
   the configs of a size and its samples pooled. Every timed config's result is also checked
   against float64. Calls rotate over 3 input sets: an H100 has 50 MB of L2, a 4096^2 bf16
   matrix is 32 MB (A and B together do not fit; with the rotation the previous call's
   inputs are mostly evicted), at 8192 one matrix is 128 MB.
4. Prints the tables last (markdown): bf16 per config, stages x delay_release for each of
   TABLE_TILES (the default tile, and the same with 64-byte K rows), tf32 and f16. ``--json``
   gets every number with its config (written after each phase, so a run cut short keeps
   what it measured).

The case helpers (:class:`Case`, the case lists, :func:`build`, :func:`check_case`,
:func:`error_ratio`, :func:`compile_all`) are shared with tests/test_tensorcore_gpu.py and
benchmarks/sanitize_tensorcore.py. This module imports only numpy at load time (torch, numba
and gemm.tensorcore when a function needs them), so it imports on a machine without a GPU.
"""

import argparse
import importlib.util
import itertools
import json
import math
import os
import statistics
import sys
import time
import zlib
from dataclasses import dataclass

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DTYPES = ("bfloat16", "float16", "tfloat32")       # input types (tfloat32: float32 operands)
OUT_DTYPES = ("float32", "bfloat16", "float16")
MAJORS = ("row", "col")
KINDS = ("torch", "cupy", "numba")
SHORT = {"bfloat16": "bf16", "float16": "f16", "tfloat32": "tf32", "float32": "f32"}


# --- error bounds ------------------------------------------------------------------------------

def tolerances(in_dtype, out_dtype, k):
    """(rel, unit, floor) of the bound |C - ref| <= rel * S + unit * |ref| + floor, where ref is
    the float64 result from the operands as stored and S = |alpha| |A| @ |B| + |beta| |C0|.

    - rel: f32 accumulation of exact bf16/f16 products, 2e-5 * sqrt(K / 64) (between the
      typical sqrt(K) 2^-24 and the worst case K 2^-24). tf32 adds 2^-9: each operand loses
      its low 13 mantissa bits (< 2^-10 relative when truncated, < 2^-11 when rounded).
    - unit: the rounding of a bf16 (2^-8) or f16 (2^-11) output; 0 for f32 (inside rel).
    - floor: half the f16 subnormal spacing (2^-25) for an f16 output, else 1e-30.
    """
    rel = 2e-5 * math.sqrt(max(1.0, k / 64))
    if in_dtype == "tfloat32":
        rel += 2.0 ** -9
    unit = {"float32": 0.0, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}[out_dtype]
    floor = 2.0 ** -25 if out_dtype == "float16" else 1e-30
    return rel, unit, floor


def reference(A, B, alpha=1.0, beta=0.0, C0=None):
    """(ref, S): alpha A @ B + beta C0 and |alpha| |A| @ |B| + |beta| |C0|, for float64 numpy
    arrays or torch tensors alike."""
    ref = alpha * (A @ B)
    scale = abs(alpha) * (abs(A) @ abs(B))
    if beta:
        ref = ref + beta * C0
        scale = scale + abs(beta) * abs(C0)
    return ref, scale


def ratio(C, ref, scale, bound):
    """max |C - ref| / (rel S + unit |ref| + floor) over all elements; a NaN counts as inf.
    <= 1 passes."""
    rel, unit, floor = bound
    r = float((abs(C - ref) / (rel * scale + unit * abs(ref) + floor)).max())
    return math.inf if math.isnan(r) else r


def error_ratio(C, A, B, in_dtype, out_dtype, alpha=1.0, beta=0.0, C0=None):
    """:func:`ratio` of ``C`` against the float64 reference (all arguments float64)."""
    ref, scale = reference(A, B, alpha, beta, C0)
    return ratio(C, ref, scale, tolerances(in_dtype, out_dtype, A.shape[1]))


# --- configs -----------------------------------------------------------------------------------

def parse_config(spec):
    """TensorCoreConfig keyword pairs of a SPEC (see the module docstring); ``default``: ()."""
    if spec == "default":
        return ()
    parts = spec.split(":")
    try:
        bm, bn, bk = (int(x) for x in parts[0].split("x"))
        wm, wn = (int(x) for x in parts[1].split("x"))
        kw = [("bM", bm), ("bN", bn), ("bK", bk), ("warps", (wm, wn)), ("stages", int(parts[2]))]
        for p in parts[3:]:
            if p.startswith("d"):
                kw.append(("delay_release", int(p[1:])))
            elif p.startswith("g"):
                kw.append(("group_m", int(p[1:])))
            else:
                kw.append(("min_blocks", int(p.lstrip("b"))))
    except (ValueError, IndexError):
        raise ValueError(f"bad config spec {spec!r}: expected "
                         "bMxbNxbK:wmxwn:stages[:dD][:bB][:gG] or default") from None
    return tuple(kw)


def make_config(pairs):
    """The TensorCoreConfig of keyword ``pairs`` (its dtype comes from the operands), or None
    for the default."""
    if not pairs:
        return None
    from gemm.tensorcore import TensorCoreConfig
    return TensorCoreConfig(**dict(pairs))


# --- cases -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One call ``out = alpha * A @ B + beta * out``: A (m, k), B (k, n), out (m, n).

    ``a_major``/``b_major``/``out_major``: "row" (row-major) or "col" (the .T of a row-major
    array); the seed's B_T (N, K) row-major is ``b_major="col"``. ``kind``: the array library
    the operands are passed as (bf16 as raw 16-bit bits for CuPy and numba). ``out_given``:
    False calls without ``out`` (a new array of ``out_dtype`` comes back). ``out_pad``: out's
    leading dimension padded to a multiple of 8 plus 8 (else tight). ``config``:
    TensorCoreConfig keyword pairs, () for config=None.
    """

    dtype: str
    m: int
    n: int
    k: int
    a_major: str = "row"
    b_major: str = "col"
    out_dtype: str = "float32"
    out_major: str = "row"
    alpha: float = 1.0
    beta: float = 0.0
    kind: str = "torch"
    out_given: bool = True
    out_pad: bool = False
    config: tuple = ()

    def key(self):
        """What the case tests, without its shape (stable pytest ids when shapes are random)."""
        out = f"{SHORT[self.out_dtype]}{self.out_major}" + ("pad" if self.out_pad else "")
        parts = [SHORT[self.dtype], f"A{self.a_major}", f"B{self.b_major}",
                 out if self.out_given else f"new{SHORT[self.out_dtype]}", self.kind]
        if self.beta or self.alpha != 1:
            parts.append("alphabeta")
        if self.config:
            parts.append("-".join(f"{k}{v}" for k, v in self.config))
        return "-".join(parts)

    def label(self):
        return (f"{self.m}x{self.n}x{self.k} {self.key()} alpha={self.alpha:g} "
                f"beta={self.beta:g}")


SHAPE_CLASSES = ("odd", "aligned", "any")


def random_shape(rng, cls):
    """(m, n, k) in 1..700: all odd (plain 2-byte copies), all multiples of 8 (16-byte
    cp.async, partial tiles still) or anything."""
    if cls == "odd":
        return tuple(int(2 * x + 1) for x in rng.integers(0, 350, 3))
    if cls == "aligned":
        return tuple(int(8 * x) for x in rng.integers(1, 88, 3))
    return tuple(int(x) for x in rng.integers(1, 701, 3))


def seed_cases():
    """The seed's matrix: A (M, K) bf16, B_T (N, K) bf16, D (M, N) f32, M = N = K."""
    cubes = [Case("bfloat16", s, s, s) for s in (64, 128, 256, 512, 1024, 2048, 4096)]
    return cubes + [Case("bfloat16", 64, 64, 256)]


def matrix_cases(rng):
    """One random shape for every input dtype x A major x B major x out dtype; the shape class
    cycles so that every (dtype, A, B) and every out dtype meets all three classes, and the
    out major alternates."""
    cases = []
    for t, (dt, am, bm) in enumerate(itertools.product(DTYPES, MAJORS, MAJORS)):
        for j, od in enumerate(OUT_DTYPES):
            cls = SHAPE_CLASSES[(t + j) % 3]
            cases.append(Case(dt, *random_shape(rng, cls), am, bm, od, MAJORS[(t + j) % 2],
                              out_pad=cls == "aligned"))
    return cases


def alpha_beta_cases(rng):
    """alpha/beta, mostly with column-major outputs."""
    return [Case("bfloat16", *random_shape(rng, "any"), "row", "col", "float32", "col",
                 alpha=-1.5, beta=0.25),
            Case("float16", *random_shape(rng, "aligned"), "col", "row", "float16", "col",
                 alpha=0.5, beta=-2.0, out_pad=True),
            Case("tfloat32", *random_shape(rng, "odd"), "row", "row", "bfloat16", "col",
                 alpha=2.0, beta=1.0),
            Case("bfloat16", *random_shape(rng, "aligned"), "col", "col", "bfloat16", "row",
                 alpha=1.0, beta=-1.0, out_pad=True)]


def kind_cases(rng):
    """Operands as torch, CuPy and numba arrays, without ``out`` (the result's kind and dtype
    are checked) and with one."""
    cases = [Case(dt, *random_shape(rng, "aligned"), kind=kind, out_given=False)
             for kind in KINDS for dt in DTYPES]
    return cases + [
        Case("float16", *random_shape(rng, "odd"), out_dtype="float16", kind="cupy"),
        Case("bfloat16", *random_shape(rng, "any"), "col", "col", "float16", "col",
             kind="numba"),
        Case("bfloat16", *random_shape(rng, "aligned"), out_dtype="bfloat16", out_given=False),
        Case("float16", *random_shape(rng, "aligned"), out_dtype="float16", out_given=False)]


STAGES = (2, 3, 4, 5, 6)
DELAYS = (0, 1)


def stage_cases():
    """Every ring depth with delay_release 0 and 1, on one shape with partial tiles (K a
    multiple of 8 so that the 16-byte copies run): the default tile up to 4 stages, 64-byte
    K rows for 5 and 6 (the default's would need more than 227 KiB of shared memory)."""
    return [Case("bfloat16", 517, 389, 1000 - 8 * s,
                 config=(("stages", s), ("delay_release", d)) + ((("bK", 32),) if s > 4 else ()))
            for s in STAGES for d in DELAYS]


def all_cases(seed, quick=False):
    """The named case lists of a run; random shapes drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    groups = {"seed": seed_cases(), "matrix": matrix_cases(rng),
              "alpha_beta": alpha_beta_cases(rng), "kinds": kind_cases(rng),
              "stages": stage_cases()}
    if quick:
        groups["seed"] = [c for c in groups["seed"] if c.m <= 1024]
        del groups["kinds"]
    return groups


def kind_available(kind):
    return kind != "cupy" or importlib.util.find_spec("cupy") is not None


# --- operands and one call ---------------------------------------------------------------------

GUARD = 64      # NaN elements before and after every output


def torch_dtype(name):
    import torch
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "tfloat32": torch.float32,
            "float32": torch.float32}[name]


def kind_of(x):
    mod = type(x).__module__
    return "torch" if mod.startswith("torch") else "cupy" if mod.startswith("cupy") else "numba"


def as_kind(x, kind):
    """Torch tensor ``x`` (not copied) as the array type ``kind``; bf16 as int16 bits."""
    if kind == "torch":
        return x
    import torch
    if x.dtype == torch.bfloat16:
        x = x.view(torch.int16)
    if kind == "cupy":
        import cupy
        return cupy.asarray(x)
    from numba import cuda
    return cuda.as_cuda_array(x)


def guarded_out(m, n, dtype, major, pad):
    """(flat, out): an (m, n) view of ``major`` inside a 1-D NaN buffer ``flat`` that has
    GUARD elements before and after it and, with ``pad``, 8-15 more per row (or column)."""
    import torch
    rows, cols = (m, n) if major == "row" else (n, m)
    ld = cols + (-cols) % 8 + 8 if pad else cols
    flat = torch.full((2 * GUARD + rows * ld,), math.nan, dtype=dtype, device="cuda")
    view = flat[GUARD:GUARD + rows * ld].view(rows, ld)[:, :cols]
    return flat, view if major == "row" else view.T


@dataclass
class Operands:
    a: object       # torch (m, k) in the input dtype (float32 for tfloat32)
    b: object       # torch (k, n)
    c0: object      # torch (m, n) in the out dtype, the initial out when beta != 0, or None
    flat: object    # the NaN buffer around out (None without out)
    out: object     # torch (m, n) view of flat (None without out)
    args: tuple     # (A, B, out) as the case's kind passes them


def case_seed(case, seed):
    return (zlib.crc32(case.label().encode()) ^ seed) & 0x7FFFFFFF


def build(case, seed=None):
    """The operands of ``case``: random normal data from ``seed`` and its label, rounded to the
    case's types; ``seed=None``: uninitialised (enough for :func:`plan`)."""
    import torch
    gen = None if seed is None else torch.Generator(device="cuda").manual_seed(
        case_seed(case, seed))

    def matrix(rows, cols, major, dtype):
        shape = (rows, cols) if major == "row" else (cols, rows)
        if gen is None:
            x = torch.empty(shape, dtype=dtype, device="cuda")
        else:
            x = torch.randn(shape, generator=gen, device="cuda").to(dtype)
        return x if major == "row" else x.T

    in_t, out_t = torch_dtype(case.dtype), torch_dtype(case.out_dtype)
    a = matrix(case.m, case.k, case.a_major, in_t)
    b = matrix(case.k, case.n, case.b_major, in_t)
    c0 = matrix(case.m, case.n, "row", out_t) if case.beta else None
    flat = out = None
    if case.out_given:
        flat, out = guarded_out(case.m, case.n, out_t, case.out_major, case.out_pad)
        if c0 is not None:
            out.copy_(c0)
    args = (as_kind(a, case.kind), as_kind(b, case.kind),
            None if out is None else as_kind(out, case.kind))
    return Operands(a, b, c0, flat, out, args)


def _new_out_dtype(case):
    return None if case.out_dtype == "float32" else case.out_dtype


def plan(case, ops):
    """The kernel variant the case's call needs."""
    from gemm.tensorcore import plan_call
    A, B, out = ops.args
    return plan_call(A, B, out, config=make_config(case.config),
                     out_dtype=None if case.out_given else _new_out_dtype(case))


def run(case, ops):
    """The case's call; returns what tensorcore_matmul returned."""
    from gemm.tensorcore import tensorcore_matmul
    A, B, out = ops.args
    kw = dict(alpha=case.alpha, beta=case.beta, config=make_config(case.config))
    if case.out_given:
        return tensorcore_matmul(A, B, out, **kw)
    return tensorcore_matmul(A, B, out_dtype=_new_out_dtype(case), **kw)


def cublas_mm(a, b):
    """torch.mm (cuBLAS) of 16-bit ``a``, ``b`` with an f32 output where torch allows it:
    (result, its dtype name)."""
    import torch
    try:
        return torch.mm(a, b, out_dtype=torch.float32), "float32"
    except (TypeError, RuntimeError):
        return torch.mm(a, b), str(a.dtype)[6:]


def check_case(case, seed, cublas=False):
    """Run ``case`` on data from ``seed``; a dict of what was checked, ``ok`` when all holds:
    ``err`` (:func:`error_ratio`, <= 1), ``guard`` (the NaN around out intact), ``same_out``
    (out returned), ``result`` (without out: the kind, dtype and shape that came back).
    ``cublas``: also cuBLAS's ``cublas_err`` (f32 out where torch allows it), which must pass
    its own bound too."""
    import torch
    ops = build(case, seed)
    res = run(case, ops)
    torch.cuda.synchronize()
    r = {"case": case.label(), "seed": seed}
    if case.out_given:
        r["same_out"] = res is ops.args[2]
        C = ops.out.clone()
        ops.out.fill_(math.nan)
        r["guard"] = bool(ops.flat.isnan().all())
    else:
        C = res if kind_of(res) == "torch" else torch.as_tensor(res, device="cuda")
        r["result"] = (kind_of(res) == case.kind and C.dtype == torch_dtype(case.out_dtype)
                       and tuple(C.shape) == (case.m, case.n))
        if not r["result"]:
            r["got"] = f"{type(res).__name__} {C.dtype} {tuple(C.shape)}"
            C = torch.full((case.m, case.n), math.nan, device="cuda")
    a, b = ops.a.double(), ops.b.double()
    c0 = None if ops.c0 is None else ops.c0.double()
    r["err"] = error_ratio(C.double(), a, b, case.dtype, case.out_dtype, case.alpha, case.beta,
                           c0)
    passed = r["err"] <= 1
    if cublas:
        D, d_dtype = cublas_mm(ops.a, ops.b)
        r["cublas_out"] = d_dtype
        r["cublas_err"] = error_ratio(D.double(), a, b, case.dtype, d_dtype)
        passed = passed and r["cublas_err"] <= 1
    r["ok"] = bool(passed and all(r.get(x, True) for x in ("same_out", "guard", "result")))
    return r


# --- compiling ---------------------------------------------------------------------------------

def plan_all(cases, log=print):
    """The distinct variants of ``cases`` (their calls planned on uninitialised operands).
    A case that cannot be planned is logged and left out: its own call reports the error."""
    variants = []
    for case in cases:
        try:
            variants.append(plan(case, build(case)))
        except Exception as e:  # noqa: BLE001 - reported when the case itself runs
            log(f"  cannot plan {case.label()}: {type(e).__name__}: {e}")
    return list(dict.fromkeys(variants))


def compile_all(variants, workers=None, log=print):
    """Compile ``variants`` into the kernel cache (gemm.call.binary) in parallel spawned
    processes (the autotuner's pool); returns {variant: error text} for those that failed (each
    is logged)."""
    from gemm.tuning.autotune import _compile_all
    t0 = time.time()
    failed = _compile_all(dict.fromkeys(variants), workers)
    for v, err in failed.items():
        log(f"  compile FAILED: {v}: {err}")
    log(f"compile phase: {time.time() - t0:.0f} s")
    return failed


# --- timing ------------------------------------------------------------------------------------

SECTIONS = {"bf16": "bfloat16", "tf32": "tfloat32", "f16": "float16"}
# The stages x delay_release tables: the default tile (128-byte K rows; 5 and 6 stages need
# more than the 227 KiB of shared memory a block can have) and the same tile with 64-byte rows.
TABLE_TILES = ("256x128x64:4x2", "256x128x32:4x2")


def _tile_fields(tile):
    dims, warps = tile.split(":")
    return (*(int(x) for x in dims.split("x")), tuple(int(x) for x in warps.split("x")))


DEFAULT_CONFIGS = ([f"{tile}:{s}:d{d}" for tile in TABLE_TILES for s in STAGES for d in DELAYS]
                   + ["128x128x64:2x2:3", "128x256x64:2x4:3", "256x128x64:4x2:3:g1000"])
QUICK_CONFIGS = [f"{TABLE_TILES[0]}:{s}:d{d}" for s in (3, 4) for d in DELAYS] + \
    ["128x256x64:2x4:3"]
DEFAULT_DTYPE_CONFIGS = ["default", f"{TABLE_TILES[1]}:3"]
SETS = 3


def timing_inputs(dtype, n, sets=SETS, fill=True):
    """``sets`` triples (A, B, out): A (n, n) row-major, B the .T of an (n, n) row-major
    matrix (the seed's TN), out f32 (uninitialised inputs when not ``fill``)."""
    import torch
    t = torch_dtype(dtype)

    def matrix():
        if fill:
            return torch.randn(n, n, device="cuda").to(t)
        return torch.empty(n, n, dtype=t, device="cuda")

    return [(matrix(), matrix().T, torch.empty(n, n, device="cuda")) for _ in range(sets)]


def event_times(fn, sets, reps, warmup=3):
    """CUDA-event milliseconds of ``reps`` single calls ``fn(i)`` (i: the input set), after
    ``warmup`` calls (at least one per set)."""
    import torch
    for i in range(max(warmup, sets)):
        fn(i % sets)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
    torch.cuda.synchronize()
    for i, (start, end) in enumerate(events):
        start.record()
        fn(i % sets)
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def _cublas_call(dtype, inputs):
    """(fn(i), label, out dtype) for cuBLAS on the same inputs."""
    import torch
    if dtype == "tfloat32":
        return (lambda i: torch.mm(inputs[i][0], inputs[i][1], out=inputs[i][2]),
                "cuBLAS tf32", "float32")
    _, out_dtype = cublas_mm(inputs[0][0][:8], inputs[0][1][:, :8])
    if out_dtype == "float32":
        fn = lambda i: torch.mm(inputs[i][0], inputs[i][1], out_dtype=torch.float32)  # noqa: E731
    else:
        fn = lambda i: torch.mm(inputs[i][0], inputs[i][1])  # noqa: E731
    return fn, f"cuBLAS {SHORT[dtype]} ({SHORT[out_dtype]} out)", out_dtype


def _timing_row(section, n, config, fields, out_dtype, ms, err, log):
    med = statistics.median(ms)
    r = {"section": section, "dtype": SECTIONS[section], "n": n, "config": config,
         "fields": fields, "out_dtype": out_dtype, "ms": med,
         "tflops": 2.0 * n ** 3 / (med * 1e-3) / 1e12, "reps": len(ms), "sets": SETS,
         "err": err, "ok": err <= 1}
    log(f"  {section} n={n} {config}: {r['tflops']:.1f} TFLOP/s ({med:.3f} ms), err {err:.2e}")
    return r


def time_section(section, sizes, specs, log=print):
    """Timing rows of one input dtype: cuBLAS and every config SPEC at every size."""
    import torch
    from gemm.tensorcore import tensorcore_matmul
    dtype = SECTIONS[section]
    rows = []
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tfloat32"
    try:
        for n in sizes:
            inputs = timing_inputs(dtype, n)
            reps = 40 if n <= 4096 else 15
            a, b = inputs[0][0].double(), inputs[0][1].double()
            ref, scale = reference(a, b)
            del a, b
            bound = tolerances(dtype, "float32", n)
            cublas, cublas_label, cublas_out = _cublas_call(dtype, inputs)
            cublas_ms = event_times(cublas, SETS, reps)

            for spec in specs:
                try:
                    cfg = make_config(parse_config(spec))
                    tensorcore_matmul(*inputs[0], config=cfg)   # a refused config raises here
                except (ValueError, TypeError) as e:
                    rows.append({"section": section, "dtype": dtype, "n": n, "config": spec,
                                 "error": f"{type(e).__name__}: {e}"})
                    log(f"  {section} n={n} {spec}: invalid: {e}")
                    continue

                def ours(i, cfg=cfg):
                    A, B, C = inputs[i]
                    tensorcore_matmul(A, B, C, config=cfg)

                ms = event_times(ours, SETS, reps)
                inputs[0][2].fill_(math.nan)
                ours(0)
                torch.cuda.synchronize()
                err = ratio(inputs[0][2].double(), ref, scale, bound)
                rows.append(_timing_row(section, n, spec, dict(parse_config(spec)), "float32",
                                        ms, err, log))
            cublas_ms += event_times(cublas, SETS, reps)
            D = cublas(0)
            torch.cuda.synchronize()
            err = ratio(D.double(), ref, scale, tolerances(dtype, cublas_out, n))
            base = _timing_row(section, n, cublas_label, {}, cublas_out, cublas_ms, err, log)
            for r in rows:
                if r["n"] == n and "tflops" in r:
                    r["vs_cublas"] = r["tflops"] / base["tflops"]
            rows.append(base)
            inputs = ref = scale = D = None     # free before the next size
            torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    return rows


# --- tables ------------------------------------------------------------------------------------

def _cell(r, base=None):
    if r is None:
        return ""
    if "error" in r:
        return "invalid"
    text = f"{r['tflops']:.0f}" + ("" if r["ok"] else " WRONG")
    if base:
        text += f" ({r['tflops'] / base['tflops']:.2f})"
    return text


def _stages_table(rows, tile, sizes):
    table = {}
    for r in rows:
        if r["section"] != "bf16" or "fields" not in r or not r["fields"]:
            continue
        f = r["fields"]
        if (f["bM"], f["bN"], f["bK"], tuple(f["warps"])) == _tile_fields(tile) and \
                f.get("min_blocks", 1) == 1 and f.get("group_m", 8) == 8:
            table[(f["stages"], f.get("delay_release", 0), r["n"])] = r
    if not table:
        return []
    head = [f"d{d} {n}" for n in sizes for d in DELAYS]
    lines = ["", f"bf16 {tile} (bMxbNxbK:warps), stages x delay_release: TFLOP/s", "",
             "| stages | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for s in STAGES:
        cells = [_cell(table.get((s, d, n))) for n in sizes for d in DELAYS]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return lines


def tables(rows):
    """The markdown tables of the timing rows (a list of lines)."""
    lines = []
    sizes = sorted({r["n"] for r in rows})
    at = {(r["section"], r["config"], r["n"]): r for r in rows}
    cublas = {(r["section"], r["n"]): r for r in rows if r["config"].startswith("cuBLAS")}
    for section in SECTIONS:
        configs = list(dict.fromkeys(r["config"] for r in rows if r["section"] == section))
        if not configs:
            continue
        lines += ["", f"{section} in, f32 out: TFLOP/s (ratio to cuBLAS, same run)", "",
                  "| config | " + " | ".join(str(n) for n in sizes) + " |",
                  "|---" * (len(sizes) + 1) + "|"]
        for config in sorted(configs, key=lambda c: not c.startswith("cuBLAS")):
            cells = []
            for n in sizes:
                r = at.get((section, config, n))
                base = None if config.startswith("cuBLAS") else cublas.get((section, n))
                cells.append(_cell(r, base))
            lines.append(f"| {config} | " + " | ".join(cells) + " |")
    for tile in TABLE_TILES:
        lines += _stages_table(rows, tile, sizes)
    return lines


# --- the run -----------------------------------------------------------------------------------

def _arguments(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", help="write every result to this path")
    p.add_argument("--quick", action="store_true",
                   help="fewer cases (cubes up to 1024, no array kinds), 4096 only, 5 configs")
    p.add_argument("--no-correctness", "--time-only", action="store_true")
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--configs", nargs="+", help="bf16 timing configs (SPEC or default)")
    p.add_argument("--dtype-configs", nargs="+", default=DEFAULT_DTYPE_CONFIGS,
                   help="tf32 and f16 timing configs")
    p.add_argument("--sizes", nargs="+", type=int)
    p.add_argument("--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS))
    p.add_argument("--seed", type=int, help="random shapes and data (default: fresh)")
    p.add_argument("--workers", type=int, help="compile processes (default: all cores)")
    args = p.parse_args(argv)
    if args.configs is None:
        args.configs = QUICK_CONFIGS if args.quick else DEFAULT_CONFIGS
    if args.sizes is None:
        args.sizes = [4096] if args.quick else [4096, 8192]
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "little")
    return args


def main(argv=None):
    args = _arguments(argv)
    t_start = time.time()
    import numba_cuda
    import torch
    from gemm.tensorcore import plan_call
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    log = lambda *a: print(*a, flush=True)  # noqa: E731
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "numba_cuda": numba_cuda.__version__, "seed": args.seed,
               "torch_flags": "bf16/f16 reduced-precision reduction off; tf32 on in tf32 only",
               "argv": sys.argv[1:] if argv is None else argv,
               "note": "H100 L2 is 50 MB: 4096^2 bf16 = 32 MB per matrix, calls rotate over "
                       f"{SETS} input sets", "correctness": [], "timing": []}

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1, default=str)

    log(f"seed {args.seed} (rerun with --seed {args.seed})")
    groups = {} if args.no_correctness else all_cases(args.seed, args.quick)
    cases = [c for g in groups.values() for c in g if kind_available(c.kind)]
    specs = {s: args.configs if s == "bf16" else args.dtype_configs for s in args.sections}
    variants = plan_all(cases, log)
    if not args.no_timing:
        for section, section_specs in specs.items():
            for n in args.sizes:
                A, B, C = timing_inputs(SECTIONS[section], n, sets=1, fill=False)[0]
                for spec in section_specs:
                    try:
                        variants.append(plan_call(A, B, C, config=make_config(parse_config(spec))))
                    except (ValueError, TypeError) as e:
                        log(f"  cannot plan {section} {spec}: {e}")
                del A, B, C
    failed = compile_all(variants, args.workers, log)
    results["compile_failed"] = {str(v): e for v, e in failed.items()}
    results["compile_s"] = time.time() - t_start
    save()

    failures = 0
    if cases:
        log("correctness (err: error / bound, <= 1 passes):")
        for name, group in groups.items():
            for case in group:
                if not kind_available(case.kind):
                    log(f"  skip {case.label()}: {case.kind} not installed")
                    continue
                try:
                    r = check_case(case, args.seed, cublas=name == "seed")
                except Exception as e:  # noqa: BLE001 - an invalid config or a crash: counted
                    r = {"case": case.label(), "ok": False, "error": f"{type(e).__name__}: {e}"}
                r["group"] = name
                failures += not r["ok"]
                results["correctness"].append(r)
                extra = {k: v for k, v in r.items() if k not in ("case", "seed", "ok", "group")}
                log(f"  {'ok  ' if r['ok'] else 'FAIL'} {name}: {r['case']}: {extra}")
        results["correctness_failures"] = failures
        save()

    if not args.no_timing:
        log("timing (TFLOP/s):")
        for section in args.sections:
            results["timing"] += time_section(section, args.sizes, specs[section], log)
            save()
    results["total_s"] = time.time() - t_start
    save()
    log(f"\ncorrectness failures: {failures}; compile {results['compile_s']:.0f} s; "
        f"total {results['total_s']:.0f} s; seed {args.seed}")
    for line in tables(results["timing"]):
        log(line)
    wrong = sum(1 for r in results["timing"] if r.get("ok") is False)
    return failures + wrong


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
