"""How the benchmarks time GPU work: CUDA events around a loop of calls as users make them
(eager, the host's work included wherever it is not hidden behind the GPU's)."""

import argparse
import json
import statistics

import torch

__all__ = ["timed", "timed_together", "eager_arguments", "graph_of", "rotating_us", "kept",
           "table_main"]

CALLS = 5           # calls per timed loop


def _loop(fn, start, end):
    start.record()
    for _ in range(CALLS):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / CALLS


def timed(fn, reps):
    """Median over ``reps`` of the mean time of a loop of calls (ms), after one call."""
    return timed_together({"": fn}, reps)[""]


def timed_together(fns, reps):
    """``{name: ms}`` for ``fns`` (name -> function): each rep times every function's loop
    in turn, so that the GPU's clock and temperature drift alike over all of them; the
    median over ``reps`` of each (ms per call)."""
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            times[name].append(_loop(fn, start, end))
    return {name: statistics.median(t) for name, t in times.items()}


def graph_of(fn, calls):
    """The replay of a CUDA graph of ``calls`` calls of ``fn`` (captured after one call
    outside it): the GPU's time of the calls without the host's."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return g.replay


def rotating_us(fns, sets, calls, reps):
    """``{name: us a call}`` of ``fns`` (name -> ``fn(*operands)``): each one's ``calls``
    calls over the operand tuples ``sets`` in turn (so that an operand is not left in L2 by
    the call before) in a CUDA graph, the graphs timed in turn (:func:`timed_together`,
    median of ``reps``)."""
    def graphed(fn):
        def run():
            for i in range(calls):
                fn(*sets[i % len(sets)])
        return graph_of(run, 1)
    t = timed_together({name: graphed(fn) for name, fn in fns.items()}, reps)
    return {name: 1e3 * ms / calls for name, ms in t.items()}


def kept(outs, name, fn):
    """``fn`` with its result kept as ``outs[name]``: a baseline that makes its own out, as
    its users call it, timed without a copy into a given one (in a CUDA graph the kept
    tensor is the graph's, holding the last replay's result)."""
    def call(*operands):
        outs[name] = fn(*operands)
    return call


def eager_arguments(what, reps=7):
    """A benchmark's command line (``--reps``, default ``reps``; ``--json PATH``), parsed, and
    its header printed: the GPU, torch's version, and ``what`` the calls are."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--json")
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; eager calls, no out, "
          f"{what}, median of {args.reps}")
    return args


def table_main(case, cases, head, cells, what="", reps=None):
    """A benchmark's ``main``: its command line (``--json PATH``, and ``--reps`` with default
    ``reps`` where that is not None), ``case(*c)`` for each of ``cases`` (``case(*c,
    reps)`` with ``--reps``), then the GPU, torch's version and ``what``, and a markdown
    table: ``head`` (the column names) and ``cells(row)`` (a row's cells, as strings) per
    case; the rows written to ``--json`` where it is given. Returns the rows."""
    ap = argparse.ArgumentParser()
    if reps is not None:
        ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--json")
    args = ap.parse_args()
    more = () if reps is None else (args.reps,)
    rows = [case(*c, *more) for c in cases]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}"
          + (f"; {what}" if what else ""))
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(cells(r)) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows
