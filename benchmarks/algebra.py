"""Time a standard mix of layout-algebra calls over GEMM tiling layouts, against pycute.

    python benchmarks/algebra.py [--repeat N]

The mix: coalesce, composition (plain and by-mode), logical/zipped/tiled divides, complement,
right/left inverses, logical/zipped/tiled products, on the layouts a 128x128x8 GEMM builds:
(M,K) matrices cut into 128x8 tiles, (32,8) thread layouts, thread-value (TV) layouts of the
SM80 16x8x16 MMA, shared-memory tiles (the 8x64 atom of a 128-byte-swizzled 128x64 tile).
pycute (from the ``nvidia-cutlass`` wheel) runs the same calls in the same process; only
inputs both libraries accept are timed, and every result is checked equal (same layout, or
failing that the same function on its domain) before timing.

Cold: the caches of ``layoutalg`` are cleared before every pass, so each call computes its
result. Warm: the caches hold every result (the case of a kernel generator that asks for the
same tilings many times). pycute has no caches: cold and warm are the same for it.
"""

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # run from a checkout

import layoutalg as la  # noqa: E402
from layoutalg.algebra import clear_caches  # noqa: E402

try:
    import pycute as pc
except ImportError:          # pragma: no cover - benchmark-only dependency
    sys.exit("pycute is needed: pip install nvidia-cutlass")


def mix():
    """The standard mix: (name, function name, argument builder) with arguments as nested
    ('L', shape, stride) records, built into each library's own objects."""
    L = lambda shape, stride=None: ("L", shape, stride)
    M, K = 4096, 4096
    mk = L((M, K))                                   # column-major A
    km = L((M, K), (K, 1))                           # row-major A
    tile = L((128, 8))                               # a CTA tile of A
    thr = L((32, 8), (8, 1))                         # 256 threads, row-major
    thr_c = L((32, 8))                               # 256 threads, column-major
    tv_a = L(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))   # SM80 16x8x16 A: (T32,V8) -> (m,k)
    tv_c = L(((4, 8), (2, 2)), ((32, 1), (16, 8)))           # SM80 16x8 C: (T32,V4) -> (m,n)
    smem = L((128, 64), (64, 1))                     # a 128x64 bf16 smem tile, row-major
    atom = L((8, 64), (64, 1))                       # its 128-byte swizzle atom (inner layout)
    val = L((4, 1))
    return [
        ("coalesce", "coalesce", (L(((32, 4), 8), ((8, 256), 1)),)),
        ("coalesce", "coalesce", (L((2, (1, 6)), (1, (6, 2))),)),
        ("coalesce", "coalesce", (tv_a,)),
        ("coalesce", "coalesce", (L(((2, 2), (2, 2), 8), ((1, 2), (4, 8), 16)),)),
        ("composition", "composition", (L((6, 2), (8, 2)), L((4, 3), (3, 1)))),
        ("composition", "composition", (tile, tv_a)),
        ("composition", "composition", (tile, thr)),
        ("composition", "composition", (smem, L((16, 8), (64, 1)))),
        ("composition", "composition", (L((128, 128)), tv_c)),
        ("composition by mode", "composition", (mk, (L(128), L(8)))),
        ("composition by mode", "composition", (km, (L(128), L(8)))),
        ("logical_divide", "logical_divide", (mk, (L(128), L(8)))),
        ("logical_divide", "logical_divide", (L((4, 2, 3), (2, 1, 8)), L(4, 2))),
        ("logical_divide", "logical_divide", (tile, thr_c)),
        ("zipped_divide", "zipped_divide", (mk, (L(128), L(8)))),
        ("zipped_divide", "zipped_divide", (smem, (L(8), L(64)))),
        ("zipped_divide", "zipped_divide", (L((128, 128)), (L(16), L(8)))),
        ("tiled_divide", "tiled_divide", (km, (L(128), L(8)))),
        ("tiled_divide", "tiled_divide", (tile, (L(32), L(8)))),
        ("complement", "complement", (thr, 1024)),
        ("complement", "complement", (L(4, 2), 24)),
        ("complement", "complement", (tv_c, 128)),
        ("complement", "complement", (L((2, 2), (1, 6)), 24)),
        ("right_inverse", "right_inverse", (thr,)),
        ("right_inverse", "right_inverse", (tv_a,)),
        ("left_inverse", "left_inverse", (tv_c,)),
        ("left_inverse", "left_inverse", (L((4, 8), (8, 1)),)),
        ("logical_product", "logical_product", (val, thr_c)),
        ("logical_product", "logical_product", (L((2, 2), (4, 1)), L(6, 1))),
        ("logical_product", "logical_product", (atom, L((16, 1)))),
        ("zipped_product", "zipped_product", (L((2, 4)), (L(32), L(8)))),
        ("tiled_product", "tiled_product", (L((8, 1)), (L(16), L(2)))),
    ]


def build(lib, x):
    if isinstance(x, tuple) and x and x[0] == "L":
        return lib.Layout(x[1], x[2]) if x[2] is not None else lib.Layout(x[1])
    if isinstance(x, tuple):
        return tuple(build(lib, y) for y in x)
    return x


def same(ours, theirs):
    """Equal layouts (same shape and stride), or failing that the same function and size."""
    if (ours.shape, ours.stride) == (theirs.shape, theirs.stride):
        return True
    n = la.size(ours)
    return n == pc.size(theirs) and all(ours(i) == theirs(i) for i in range(n))


def calls(lib, ops):
    out = []
    for _, fname, args in ops:
        out.append((getattr(lib, fname), tuple(build(lib, a) for a in args)))
    return out


def run_pass(cs):
    for f, args in cs:
        f(*args)


def best_times(ops, repeat):
    """Best, over ``repeat`` rounds, of the time of one pass of the mix for pycute,
    layoutalg cold and layoutalg warm. The three passes of a round run back to back, so a
    load that comes and goes on the machine slows all three alike. Cold passes start from
    fresh input objects and empty caches (both made outside the timed region); the warm
    passes reuse one set of inputs whose results are cached after the first round."""
    best = [float("inf")] * 3
    theirs, warm = calls(pc, ops), calls(la, ops)
    for _ in range(repeat):
        clear_caches()
        cold = calls(la, ops)
        for k, cs in enumerate((theirs, cold, warm)):
            t0 = time.perf_counter()
            run_pass(cs)
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def check(ops):
    ours, theirs = calls(la, ops), calls(pc, ops)
    structural = 0
    for (name, _, _), (f, a), (g, b) in zip(ops, ours, theirs):
        r, s = f(*a), g(*b)
        if not same(r, s):
            raise SystemExit(f"{name}{a}: layoutalg gives {r}, pycute {s}")
        structural += (r.shape, r.stride) == (s.shape, s.stride)
    return structural


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200, help="passes per measurement (best of)")
    args = ap.parse_args(argv)
    ops = mix()
    structural = check(ops)
    print(f"layout-algebra mix: {len(ops)} calls; results equal to pycute's "
          f"({structural} identical layouts, {len(ops) - structural} equal as functions)")
    print(f"python {platform.python_version()}, {cpu_model()}")
    t_pc, t_cold, t_warm = best_times(ops, args.repeat)
    per = lambda t: f"{t * 1e6:9.1f} us/mix  {t * 1e6 / len(ops):7.2f} us/call"
    print(f"pycute            {per(t_pc)}")
    print(f"layoutalg (cold)  {per(t_cold)}   {t_pc / t_cold:5.2f}x pycute")
    print(f"layoutalg (warm)  {per(t_warm)}   {t_pc / t_warm:5.2f}x pycute")
    print("per operation (cold, us per call): layoutalg / pycute")
    by_op = {}
    for op in ops:
        by_op.setdefault(op[0], []).append(op)
    reps = max(20, args.repeat // 4)
    for name, sub in by_op.items():
        b, a, _ = (t / len(sub) for t in best_times(sub, reps))
        print(f"  {name:20s} {a * 1e6:8.2f} / {b * 1e6:8.2f}   {b / a:5.2f}x")
    return t_pc / t_cold, t_pc / t_warm


if __name__ == "__main__":
    main()
