"""The SIMT kernels gemm.matmul runs for float32 ("tuned", its default, and "small_m", for
calls of few rows; both with runs of 4 rows a thread, ``vector_mn=4``; and the seed's two,
"prefetch" and "double_buffer", named kernels) written with
gemm.cute (``SimtConfig(cute=True)``, the defaults since 487616b) beside the same configs
generated as source text (``cute=False``), in one process (issue 34).

    python3 benchmarks/simt_cute.py [--reps R] [--json PATH]

Eager calls without an out, float32, row-major A and B (then column-major ones, a batch and
split-K, :data:`MORE`): ``gemm.matmul(a, b, kernel=replace(cfg, cute=False))`` and
``kernel=replace(cfg, cute=True)``, median of R loops between CUDA events, every rep
timing both in turn (benchmarks/timing.py's ``timed_together``); each result first checked
against float64 (max |out - ref| / max |ref|). Prints a row a case, then the geometric mean
of generated / gemm.cute (above 1: gemm.cute faster) with its lowest, per kernel and over
all.
"""

import json
import os
import sys
from dataclasses import replace
from statistics import geometric_mean

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

import gemm  # noqa: E402
from gemm import api  # noqa: E402
from benchmarks.timing import eager_arguments, timed_together  # noqa: E402

SHAPES = {"tuned": [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
                    (4095, 4097, 1000), (8192, 8192, 1024)],
          "small_m": [(16, 16384, 4096), (32, 4096, 4096), (64, 8192, 4096)],
          # the seed's two pipelines, MoYe's 128 x 128 x 8 configs (named kernels)
          "prefetch": [(1024, 1024, 1024), (2048, 2048, 2048), (4095, 4097, 1000)],
          "double_buffer": [(1024, 1024, 1024), (2048, 2048, 2048), (4095, 4097, 1000)]}
# (kernel, M x N x K, what else): column-major operands, a batch, split-K (named in the
# config: a named kernel's call keeps its config's split_k)
MORE = [("tuned", (2048, 2048, 2048), dict(a_col=True)),
        ("tuned", (2048, 2048, 2048), dict(b_col=True)),
        ("tuned", (1024, 1024, 1024), dict(batch=8)),
        ("tuned", (512, 512, 65536), dict(split_k=8)),
        ("small_m", (64, 8192, 4096), dict(b_col=True)),
        ("small_m", (32, 4096, 16384), dict(split_k=4))]


def operands(m, n, k, a_col=False, b_col=False, batch=None):
    """A (M, K) and B (K, N), row-major unless ``a_col`` / ``b_col``; ``batch`` of them."""
    lead = () if batch is None else (batch,)
    a = torch.randn(*lead, k, m, device="cuda").mT if a_col else torch.randn(
        *lead, m, k, device="cuda")
    b = torch.randn(*lead, n, k, device="cuda").mT if b_col else torch.randn(
        *lead, k, n, device="cuda")
    return a, b


def relative(got, ref):
    return ((got.double() - ref).abs().max() / ref.abs().max()).item()


def main():
    args = eager_arguments("float32; times in us; generated / gemm.cute")
    rows, ratios = [], []
    cases = [(name, shape, {}) for name, shapes in SHAPES.items() for shape in shapes] + MORE
    for name, (m, n, k), more in cases:
        more = dict(more)
        split = more.pop("split_k", 1)
        a, b = operands(m, n, k, **more)
        ref = a.double() @ b.double()
        cfg = replace(api.KERNELS[name], split_k=split)
        kernels = {"generated": replace(cfg, cute=False), "cute": replace(cfg, cute=True)}
        errors = {w: relative(gemm.matmul(a, b, kernel=cfg), ref)
                  for w, cfg in kernels.items()}
        t = timed_together({w: (lambda cfg=cfg: gemm.matmul(a, b, kernel=cfg))
                            for w, cfg in kernels.items()}, args.reps)
        r = t["generated"] / t["cute"]
        ratios.append(r)
        rows.append(dict(kernel=name, shape=(m, n, k), split_k=split, more=more,
                         errors=errors, **{w: ms * 1000 for w, ms in t.items()}))
        label = " ".join([f"{key}={v}" for key, v in more.items()]
                         + ([f"split_k={split}"] if split > 1 else []))
        print(f"{name:>8} {m}x{n}x{k} {label}: generated {t['generated'] * 1000:9.1f}  cute "
              f"{t['cute'] * 1000:9.1f}  {r:.3f}x  (errors {errors['generated']:.1e}, "
              f"{errors['cute']:.1e})", flush=True)
    for name in SHAPES:                                 # per family, then all of them
        mine = [row["generated"] / row["cute"] for row in rows if row["kernel"] == name]
        print(f"{name}: generated / gemm.cute {geometric_mean(mine):.3f}x (geometric mean "
              f"of {len(mine)}), lowest {min(mine):.3f}")
    print(f"generated / gemm.cute: {geometric_mean(ratios):.3f}x (geometric mean), "
          f"{min(ratios):.3f}-{max(ratios):.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
