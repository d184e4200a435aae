"""A torch user's training step through the torch operator: an MLP block in bf16,
``y = gelu(x @ W1^T) @ W2^T``, forward and backward (loss = mean of y^2), with
``gemm.torch.matmul`` against the same step with ``torch.matmul``, eager and under
``torch.compile``, in one process; and eager, the block written with ``gemm.torch.linear``
(``linear(linear(x, W1, activation="gelu"), W2)``: the gelu after the first product, its
input kept for the backward) against ``F.linear(F.gelu(F.linear(x, W1)), W2)``.

    python benchmarks/mlp_step.py [--shapes 256x1024 4096x4096 16384x4096] [--compile]
                                  [--steps 20] [--json PATH]

A shape is tokens x hidden; the intermediate width is 4 x hidden. Each step's time is the
median over ``steps`` steps (CUDA events around each, after 3 warm-up steps); the two
versions of a row run one after the other, the torch one first; speed is torch's time over
ours. The losses of the two are printed side by side.
"""

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from gemm import api
from gemm.hopper import tensor_maps
from gemm import torch as gt


def block(mm):
    def step(x, w1, w2):
        y = mm(F.gelu(mm(x, w1.T)), w2.T)
        loss = y.float().pow(2).mean()
        loss.backward()
        return loss
    return step


def linear_block(linear):
    def step(x, w1, w2):
        y = linear(linear(x, w1, "gelu"), w2, None)
        loss = y.float().pow(2).mean()
        loss.backward()
        return loss
    return step


def _torch_linear(x, w, activation):
    y = F.linear(x, w)
    return F.gelu(y) if activation == "gelu" else y


def _time(step, args, steps):
    for _ in range(3):
        step(*args)
    times = []
    for _ in range(steps):
        for p in args[1:]:
            p.grad = None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss = step(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times), float(loss)


class _CheckedCalls:
    """Counts the calls that take gemm.matmul's checked path (no kept plan) until stop()."""

    def __init__(self):
        self.calls, self.real = 0, api._matmul

        def counted(*a):
            self.calls += 1
            return self.real(*a)
        api._matmul = counted

    def stop(self):
        api._matmul = self.real
        return self.calls


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", default=["256x1024", "4096x4096", "16384x4096"])
    p.add_argument("--compile", action="store_true", help="also under torch.compile")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--json", default=None)
    p.add_argument("--profile", default=None, metavar="PATH",
                   help="write torch.profiler's tables of 10 eager steps of each at the "
                   "first shape")
    args = p.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d')}; median of {args.steps} steps (us)")
    print(f"{'tokens x hidden':<16} {'mode':<8} {'torch us':>9} {'ours us':>9} {'speed':>6} "
          f"{'loss torch':>11} {'loss ours':>11}")
    rows = []
    modes = ["eager"] + ["compile"] * args.compile
    for shape in args.shapes:
        t, h = (int(v) for v in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(t + h)
        x = torch.randn(t, h, device="cuda", generator=g).bfloat16()
        w1 = (torch.randn(4 * h, h, device="cuda", generator=g) / h ** 0.5).bfloat16()
        w2 = (torch.randn(h, 4 * h, device="cuda", generator=g) / (4 * h) ** 0.5).bfloat16()
        w1.requires_grad_()
        w2.requires_grad_()
        for mode in modes + ["linear"]:
            steps = {"torch": block(torch.matmul), "ours": block(gt.matmul)}
            if mode == "linear":
                steps = {"torch": linear_block(_torch_linear),
                         "ours": linear_block(lambda x, w, act: gt.linear(x, w, None, act))}
            if mode == "compile":
                torch._dynamo.reset()
                steps = {k: torch.compile(v) for k, v in steps.items()}
            tt, lt = _time(steps["torch"], (x, w1, w2), args.steps)
            checked = _CheckedCalls()
            to, lo = _time(steps["ours"], (x, w1, w2), args.steps)
            checked = checked.stop() / (args.steps + 3)
            maps = sum(len(s.maps) for s in tensor_maps._slots.values())
            rows.append(dict(shape=shape, mode=mode, torch_us=tt, ours_us=to,
                             loss_torch=lt, loss_ours=lo, tensor_maps=maps,
                             checked_calls_per_step=checked))
            print(f"{shape:<16} {mode:<8} {tt:9.1f} {to:9.1f} {tt / to:6.2f} {lt:11.5g} "
                  f"{lo:11.5g}  ({maps} tensor maps so far, {checked:.2f} checked calls a "
                  "step)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.profile:
        _profile(args.shapes[0], args.profile)


def _profile(shape, path):
    """torch.profiler of 10 eager steps of each version at ``shape``: the host's (CPU) and the
    GPU's time by operation, written to ``path`` and printed."""
    from torch.profiler import ProfilerActivity, profile
    t, h = (int(v) for v in shape.split("x"))
    x = torch.randn(t, h, device="cuda").bfloat16()
    w1 = torch.randn(4 * h, h, device="cuda").bfloat16().requires_grad_()
    w2 = torch.randn(h, 4 * h, device="cuda").bfloat16().requires_grad_()
    text = []
    for name, mm in (("torch.matmul", torch.matmul), ("gemm.torch.matmul", gt.matmul)):
        step = block(mm)
        _time(step, (x, w1, w2), 3)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                step(x, w1, w2)
            torch.cuda.synchronize()
        text.append(f"# {name}, 10 eager steps at {shape}\n"
                    + prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    with open(path, "w") as f:
        f.write("\n\n".join(text))
    print("\n\n".join(text))


if __name__ == "__main__":
    main()
