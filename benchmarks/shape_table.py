"""Write gemm's shipped table (``gemm/tuning/shape_table.json``, see gemm.tuning.shape_table)
from the JSON of tuned suite runs. No GPU needed.

    python3 benchmarks/shape_table.py RUN.json [RUN.json ...] [--min-gain 1.08]
        [--recheck CHECK.json ...] [--out PATH]
    python3 benchmarks/shape_table.py --prune CHECK.json [CHECK.json ...] [--out PATH]
    python3 benchmarks/shape_table.py --add RUN.json [RUN.json ...] [--min-gain 1.08] [--out PATH]

Each RUN.json is written by ``python3 benchmarks/shapes.py --dtypes bf16 --tune --json
RUN.json``: per shape the untuned time ("ours", the rules of gemm.hopper.default_config; in
later runs also timed again after the tuning, beside the tuned config, which is the one
used), the tuned time and the tuned config. A shape enters the table where the tuned config
was at least ``--min-gain`` times faster than the rules in that run's own timing. A CHECK.json
(``shapes.py`` untuned, after the rules began to swap A and B for few rows) that timed a
shape's table config ("table") and the swapped rules ("rules") side by side marks the entry
``swap_faster`` where the rules were faster: gemm.tuning.shape_table then leaves it to the rules
where they swap.

``--prune`` edits the shipped table instead: an entry goes where an untuned ``shapes.py`` run
(CHECK.json, after a change to the kernels) timed the rules ("rules") faster than the
entry's config ("ours", which is the table's config at the table's own shapes) and the rules
do not swap there (an entry marked ``swap_faster`` stays: its own shape ran the rules). Its
reason is the table's own: entries are kept only where the tuned config beats the rules.

``--add`` also edits the shipped table: the shapes of tuned runs (as RUN.json) that pass
``--min-gain`` join it, replacing an entry of the same shape; the other entries stay.
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "gemm", "tuning", "shape_table.json")
SMS = {"NVIDIA H100 80GB HBM3": 132, "NVIDIA H200": 132}


def table(runs, min_gain, rechecks=()):
    """The table's dict from the runs' dicts (one device), the shapes where a recheck run
    timed the swapped rules faster than the table's config marked."""
    devices = {run["device"] for run in runs}
    if len(devices) != 1 or not devices <= SMS.keys():
        raise SystemExit(f"shape_table: runs of one known device expected, got {devices}")
    device = devices.pop()
    beaten = {(r["m"], r["n"], r["k"]) for run in rechecks for r in run["rows"]
              if "table_us" in r and r["rules_us"] < r["table_us"]}
    chosen = []
    for run in runs:
        for r in run["rows"]:
            if "tuned_config" not in r:
                raise SystemExit(f"shape_table: {r['m']}x{r['n']}x{r['k']} was not tuned "
                                 "(run shapes.py with --tune)")
            gain = r.get("ours_after_tune_us", r["ours_us"]) / r["tuned_us"]
            if gain >= min_gain:
                chosen.append(dict(m=r["m"], n=r["n"], k=r["k"], gain=round(gain, 3),
                                   label=r["tuned"], config=r["tuned_config"]))
                if (r["m"], r["n"], r["k"]) in beaten:
                    chosen[-1]["swap_faster"] = True
    return dict(device=device, sms=SMS[device], min_gain=min_gain, entries=chosen)


def add(shipped, runs, min_gain):
    """``shipped`` with the entries :func:`table` makes of ``runs`` (same device) added, an
    entry of the same shape replaced; returns (table, added shapes)."""
    new = table(runs, min_gain)
    if new["device"] != shipped["device"]:
        raise SystemExit(f"shape_table: the runs are of {new['device']}, the table of "
                         f"{shipped['device']}")
    shapes = {(e["m"], e["n"], e["k"]) for e in new["entries"]}
    kept = [e for e in shipped["entries"] if (e["m"], e["n"], e["k"]) not in shapes]
    return dict(shipped, entries=kept + new["entries"]), sorted(shapes)


def prune(shipped, checks):
    """``shipped`` (the table's dict) without the entries a check run timed slower than the
    rules (rows without "table_us": the rules do not swap there); returns (table, pruned
    shapes)."""
    slower = {(r["m"], r["n"], r["k"]) for run in checks for r in run["rows"]
              if "table_us" not in r and "rules_us" in r and r["rules_us"] < r["ours_us"]}
    kept = [e for e in shipped["entries"]   # swap_faster: its own shape ran the rules
            if e.get("swap_faster") or (e["m"], e["n"], e["k"]) not in slower]
    gone = [(e["m"], e["n"], e["k"]) for e in shipped["entries"] if e not in kept]
    return dict(shipped, entries=kept), gone


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--min-gain", type=float, default=1.08)
    ap.add_argument("--recheck", nargs="*", default=[])
    ap.add_argument("--prune", nargs="*", default=[])
    ap.add_argument("--add", nargs="*", default=[])
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()

    def load(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    if args.prune:
        out, gone = prune(load(DEFAULT_OUT), [load(p) for p in args.prune])
        for m, n, k in gone:
            print(f"{m}x{n}x{k}: the rules were faster; entry removed")
    elif args.add:
        out, added = add(load(DEFAULT_OUT), [load(p) for p in args.add], args.min_gain)
        for m, n, k in added:
            print(f"{m}x{n}x{k}: the tuned config beat the rules; entry added")
    elif args.runs:
        out = table([load(p) for p in args.runs], args.min_gain,
                    [load(p) for p in args.recheck])
    else:
        raise SystemExit("shape_table: give tuned runs, --add RUN.json or --prune CHECK.json")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for e in out["entries"]:
        print(f"{e['m']}x{e['n']}x{e['k']}: {e['label']} ({e['gain']:.2f}x the rules)"
              + (", swapped faster" if e.get("swap_faster") else ""))
    print(f"{len(out['entries'])} shapes -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
