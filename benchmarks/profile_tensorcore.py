"""Look inside tensor-core kernel variants on the GPU host: registers and the SASS instruction
mix of the whole kernel and of its hottest loop (timings: benchmarks/tensorcore_check.py).

    python3 benchmarks/profile_tensorcore.py OUTDIR CONFIG [CONFIG ...]

A CONFIG is ``bMxbNxbK:wmxwn:stages[:min_blocks]`` (bf16, K-major operands, f32 out).
Writes ``OUTDIR/sass_<config>.txt`` (numba's ``inspect_sass``, needs nvdisasm) and prints one
line per config: registers, then opcode counts inside the loop (the longest backward branch).
"""

import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse(text):
    from gemm.tensorcore import TensorCoreConfig, Variant
    parts = text.split(":")
    bm, bn, bk = (int(x) for x in parts[0].split("x"))
    wm, wn = (int(x) for x in parts[1].split("x"))
    return Variant(TensorCoreConfig(bm, bn, bk, (wm, wn), int(parts[2]), "bfloat16",
                                    int(parts[3]) if len(parts) > 3 else 1))


def loop_mix(sass):
    """Opcode counts of the instructions between the target and the source of the longest
    backward branch (the main loop), and the loop's length."""
    insts, labels = [], {}
    for line in sass.splitlines():
        m = re.match(r"\s*\.(L_x_\d+):", line)
        if m:
            labels[m.group(1)] = len(insts)
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m:
            insts.append(m.group(1).strip())
    best = (0, 0)
    for i, text in enumerate(insts):
        m = re.search(r"BRA\s+`?\(?\.(L_x_\d+)", text)
        if m and labels.get(m.group(1), i) < i and i - labels[m.group(1)] > best[1] - best[0]:
            best = (labels[m.group(1)], i)
    mix = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0]
                              for t in insts[best[0]:best[1] + 1])
    return mix, best[1] - best[0] + 1


def main(out, configs):
    from gemm.tensorcore import tensorcore_kernel
    os.makedirs(out, exist_ok=True)
    from gemm.tuning.autotune import _compile_all
    failed = _compile_all([parse(text) for text in configs])
    if failed:
        raise RuntimeError(f"compile failed: {failed}")
    for text in configs:
        v = parse(text)
        k = tensorcore_kernel(v)
        k.compile(v.signature)
        sass = next(iter(k.inspect_sass().values()))
        regs = k.get_regs_per_thread()
        regs = next(iter(regs.values())) if isinstance(regs, dict) else regs
        with open(os.path.join(out, f"sass_{text.replace(':', '_')}.txt"), "w") as f:
            f.write(sass)
        mix, length = loop_mix(sass)
        print(f"{text}: {regs} registers; loop of {length} instructions:",
              dict(mix.most_common(14)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
