"""gemm.call.plan's rules without a GPU, on a stand-in array kind: what a signature holds, the
bounded table, forgetting plans when what chose them changes, and a plan making the out of a
call that gave none."""

import pytest

from gemm.call import plan as callplan


class Arr:
    """A stand-in device array: shape, strides, dtype and address."""

    def __init__(self, shape, strides, dtype="bfloat16", ptr=0x1000):
        self.shape, self.strides, self.dtype, self.ptr = shape, strides, dtype, ptr


class Stand(Arr):
    pass


@pytest.fixture
def kind(monkeypatch):
    made = []

    def describe(x):
        return (x.shape, x.strides, x.dtype, x.ptr & 15), x.ptr

    def allocator(out):
        shape, dtype = out.shape, out.dtype

        def make():
            made.append(Arr(shape, (shape[1], 1), dtype, 0x9000 + 0x100 * len(made)))
            return made[-1]
        return make

    k = callplan._Kind(describe, lambda x: x.ptr, lambda device: 77, allocator,
                       lambda: k.place)
    k.place = 5                         # where calls run (a device or context)
    monkeypatch.setitem(callplan._KINDS, Arr, k)
    monkeypatch.setattr(callplan, "PLANS", {})
    k.made = made
    return k


def test_a_signature_holds_options_layouts_alignment_and_the_out(kind):
    a, b = Arr((8, 4), (4, 1)), Arr((4, 6), (1, 4), ptr=0x2000)
    key, addresses = callplan.signature(a, b, None, ("opts",))
    assert addresses == (0x1000, 0x2000, 0)
    same = callplan.signature(Arr((8, 4), (4, 1), ptr=0x5000), Arr((4, 6), (1, 4)), None,
                              ("opts",))[0]
    assert same == key                              # other addresses of the same class
    others = [
        callplan.signature(a, b, None, ("other",))[0],
        callplan.signature(Arr((8, 4), (4, 1), ptr=0x1008), b, None, ("opts",))[0],
        callplan.signature(Arr((8, 4), (8, 1)), b, None, ("opts",))[0],
        callplan.signature(a, Arr((4, 6), (6, 1)), None, ("opts",))[0],
        callplan.signature(a, b, Arr((8, 6), (6, 1), ptr=0x3000), ("opts",))[0],
        callplan.signature(a, Arr((4, 6), (1, 4), "float16"), None, ("opts",))[0],
    ]
    assert all(o != key for o in others) and len(set(others)) == len(others)
    kind.place = 6                      # another device (or context) current
    assert callplan.signature(a, b, None, ("opts",))[0] not in others + [key]


def test_mixed_or_unknown_kinds_take_the_checked_path(kind):
    a = Arr((8, 4), (4, 1))
    assert callplan.signature(a, Stand((4, 6), (6, 1)), None, ()) is None
    assert callplan.signature(a, a, Stand((8, 6), (6, 1)), ()) is None
    assert callplan.signature(object(), a, None, ()) is None


def test_the_table_is_bounded_and_forgets(kind, monkeypatch):
    monkeypatch.setattr(callplan, "MAX_PLANS", 3)
    for i in range(3):
        callplan.keep(("k", i), f"plan{i}")
    assert callplan.lookup(("k", 2)) == "plan2" and len(callplan.PLANS) == 3
    callplan.keep(("k", 3), "plan3")                # past the bound: afresh
    assert len(callplan.PLANS) == 1 and callplan.lookup(("k", 0)) is None
    callplan.keep(([],), "unhashable")              # an unhashable option is not kept
    assert callplan.lookup(([],)) is None and len(callplan.PLANS) == 1
    callplan.clear()
    assert callplan.lookup(("k", 3)) is None


def test_plans_are_forgotten_when_the_watched_state_changes(kind, monkeypatch):
    state = {"v": 1}
    clock = {"t": 100.0}
    monkeypatch.setattr(callplan.time, "monotonic", lambda: clock["t"])
    monkeypatch.setattr(callplan, "_next_look", 0.0)
    callplan.watch(lambda: state["v"])
    try:
        callplan.keep("k", "plan")
        assert callplan.lookup("k") == "plan"
        state["v"] = 2                              # changed, but not looked at yet
        clock["t"] += 0.5
        assert callplan.lookup("k") == "plan"
        clock["t"] += 0.6                           # a second on: looked at, forgotten
        assert callplan.lookup("k") is None
        callplan.keep("k", "plan")
        clock["t"] += 2
        assert callplan.lookup("k") == "plan"       # unchanged since
    finally:
        monkeypatch.setattr(callplan, "_watched", None)


def test_a_plan_makes_the_out_and_finds_the_stream(kind):
    launches = []

    def launch(addresses, stream, alpha, beta):
        launches.append((addresses, stream, alpha, beta))

    a = Arr((8, 4), (4, 1))
    first = Arr((8, 6), (6, 1), ptr=0x4000)
    plan = callplan.plan_for(launch, a, None, first, device=0)
    out = plan((0x1000, 0x2000, 0), None, None, 1.0, 0.0)
    assert out is kind.made[-1] and (out.shape, out.dtype) == ((8, 6), "bfloat16")
    assert launches[-1] == ((0x1000, 0x2000, 0x9000), 77, 1.0, 0.0)
    out2 = plan((0x1000, 0x2000, 0), None, 12, 2.0, 0.0)
    assert out2 is not out and launches[-1] == ((0x1000, 0x2000, 0x9100), 12, 2.0, 0.0)
    given = Arr((8, 6), (6, 1), ptr=0x7000)
    planned = callplan.plan_for(launch, a, given, given, device=0)
    assert planned((0x1000, 0x2000, 0x7000), given, None, 1.0, 0.5) is given
    assert launches[-1] == ((0x1000, 0x2000, 0x7000), 77, 1.0, 0.5)
    assert callplan.plan_for(None, a, None, first, 0) is None       # nothing to keep
    assert callplan.plan_for(launch, object(), None, first, 0) is None
