"""gemm.collective (issues 16, 36): the ring's schedule on the CPU (every rank computes every
shard once; no scratch slot is overwritten before it is read, within a call and across calls,
under the plan's flags and REUSE_RULE, with the copies one after another or the direct
schedule's fused into one push), the SM push kernel (gemm.collective.push) in numba's
simulator, its PTX and its refusals, and all_gather_matmul run by several processes: the
send/recv ring with gloo on the CPU, the peer ring through CUDA IPC with every process on one
GPU, and both paths with one process per GPU where there are several, the peer path by every
transfer (see collective_cases.py)."""

import itertools
import json
import os
import subprocess
import sys

import pytest

from gemm.collective import SCHEDULES, TRANSFERS, peer, push, ring_plan, scatter_plan
from simcase import simulator_report

HERE = os.path.dirname(__file__)


# --- the schedule ------------------------------------------------------------------------------

@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("D", [1, 2, 3, 4, 5, 8])
def test_every_rank_computes_every_shard_once(D, schedule):
    plan = ring_plan(D, schedule)
    assert len(plan) == D
    for r, steps in enumerate(plan):
        assert [s.step for s in steps] == list(range(D))
        assert sorted(s.compute for s in steps) == list(range(D))
        assert steps[0].source is None and steps[0].compute == r      # its own shard first
        assert all(s.send_to is None for s in steps[D - 1:])          # nothing goes back home
        # every other rank gets something from it once (the ring: its neighbour D - 1 times)
        to = [s.send_to for s in steps[:D - 1]]
        assert to == ([(r - 1) % D] * (D - 1) if schedule == "ring"
                      else [(r - i - 1) % D for i in range(D - 1)])
    for i in range(D - 1):                  # each step a permutation: one send, one receive
        assert sorted(plan[r][i].send_to for r in range(D)) == list(range(D))


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("D", [2, 3, 4, 8])
def test_what_arrives_in_a_slot_is_what_is_computed_from_it(D, schedule):
    plan = ring_plan(D, schedule)
    for r, steps in enumerate(plan):
        held = {None: r}                    # slot -> the shard in it (None: our own)
        for s in steps:
            if s.source is not None:        # a slot is read after it was written
                assert s.source in held
            assert held[s.source] == s.compute
            if s.send is not None:
                assert held[s.send_from] == s.send
            recv_of = [(t.send, t.dest_slot) for q in plan for t in q if t.send_to == r
                       and t.dest_slot == s.step]
            if s.step < D - 1:              # slot i arrives during step i, from one rank
                assert len(recv_of) == 1
                held[s.step] = recv_of[0][0]
            if s.send_to is None:
                continue
            recv = plan[s.send_to]
            user = [t for t in recv if t.source == s.dest_slot]
            assert len(user) == 1 and user[0].compute == s.send


def _events(plan, calls, fused=False, chunks=1):
    """The happens-before graph of ``calls`` consecutive calls as the peer ring enqueues them:
    {event: set of events it must follow}. Events: ("mm", c, r, i) the matmul of step i,
    ("cp", c, r, i, j) the copy of piece j of step i's shard (``chunks`` pieces), ("fl", c,
    r, i, j) the arrival flag it sets (after the copy, on its stream; the next copy follows
    the copy alone), ("end", c, r) the call's end, when rank r clears its arrival flags. A
    wait for a piece's arrival flag follows the flag's write in the same call (a 1 left
    from an earlier call in the same scratch set is cleared at that call's end, which every
    read follows: checked in _overwrites); a forwarded piece waits for its own flag, a
    matmul for every piece of its shard. Nothing else links the ranks: no acknowledgement.
    ``fused`` (transfer "sm_fused", the direct schedule): a rank's copies are one kernel,
    each following the call's start alone, and every flag follows all of them."""
    D = len(plan)
    pieces = range(chunks)
    deps = {}
    signal_of = {}                   # (c, receiver, slot, piece) -> the flag write of its copy
    for c, r in itertools.product(range(calls), range(D)):
        for s in plan[r]:
            if s.send_to is not None:
                for j in pieces:
                    signal_of[(c, s.send_to, s.dest_slot, j)] = ("fl", c, r, s.step, j)
    for c, r in itertools.product(range(calls), range(D)):
        start = {("end", c - 1, r)} if c else set()            # the caller's stream
        prev_mm = set(start)
        prev_cp = set(start)
        flags = set()
        copies = {("cp", c, r, s.step, j) for s in plan[r] if s.send_to is not None
                  for j in pieces}
        for s in plan[r]:
            arrived = ({signal_of[(c, r, s.source, j)] for j in pieces}
                       if s.source is not None else set())
            deps[("mm", c, r, s.step)] = prev_mm | arrived
            prev_mm = {("mm", c, r, s.step)}
            if s.send_to is None:
                continue
            for j in pieces:
                sent = ({signal_of[(c, r, s.send_from, j)]} if s.send_from is not None
                        else set())
                assert not (fused and sent), "only a rank's own shard is pushed fused"
                deps[("cp", c, r, s.step, j)] = (set(start) if fused else prev_cp) | sent
                prev_cp = {("cp", c, r, s.step, j)}
                deps[("fl", c, r, s.step, j)] = copies if fused else {("cp", c, r, s.step, j)}
                flags.add(("fl", c, r, s.step, j))
        deps[("end", c, r)] = prev_mm | flags
    return deps


def _before(deps):
    """The transitive closure: {event: every event that happens before it}."""
    memo = {}

    def walk(e):
        if e not in memo:
            memo[e] = set()
            for d in deps[e]:
                memo[e] |= {d} | walk(d)
        return memo[e]
    for e in deps:
        walk(e)
    return memo


def _overwrites(plan, calls, sets, fused=False, chunks=1):
    """With ``sets`` scratch sets taken in turn (call c writes set c % sets, which call
    c - sets wrote before): piece writes that do not follow every read of the piece's
    previous contents, reads that do not follow the write of what they read or could see a
    flag left from call c - sets, and flags set before that call's clearing could erase
    them."""
    before = _before(_events(plan, calls, fused, chunks))
    D = len(plan)
    bad = []
    for c, r, j in itertools.product(range(calls), range(D), range(chunks)):
        for s in plan[r]:
            if s.send_to is None:
                continue
            write = ("cp", c, r, s.step, j)             # into slot s.dest_slot of s.send_to
            recv = s.send_to
            if c >= sets and ("end", c - sets, recv) not in before[("fl", c, r, s.step, j)]:
                bad.append(("flag set before the last call cleared it", write))
            readers = [("mm", c, recv, t.step) for t in plan[recv] if t.source == s.dest_slot]
            readers += [("cp", c, recv, t.step, j) for t in plan[recv]
                        if t.send is not None and t.send_from == s.dest_slot]
            for rd in readers:
                if c >= sets and ("end", c - sets, recv) not in before[rd]:
                    bad.append(("a stale flag could let it read", rd))
                if write not in before[rd]:
                    bad.append(("read before write", rd, write))
                if c + sets < calls:
                    nxt = ("cp", c + sets, r, s.step, j)
                    if rd not in before[nxt]:
                        bad.append(("overwritten before read", rd, nxt))
    return bad


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("D", [2, 3, 4, 5, 8])
def test_no_slot_is_overwritten_before_it_is_read(D, schedule):
    # REUSE_RULE: two sets, no acknowledgement (peer.SETS); the ring's copies in pieces too
    assert peer.SETS == 2
    for chunks in {1, peer.ring_chunks(schedule, D, 2 ** 20, 3)}:
        assert _overwrites(ring_plan(D, schedule), calls=6, sets=2, chunks=chunks) == []


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("D", [2, 3, 4])
def test_one_set_without_an_ack_would_be_overwritten(D, schedule):
    # the check can fail: with one set, the next call's copies race the receiver's reads
    for chunks in (1, 2):
        bad = _overwrites(ring_plan(D, schedule), calls=3, sets=1, chunks=chunks)
        assert any(b[0] == "overwritten before read" for b in bad), bad
        assert any(b[0] == "flag set before the last call cleared it" for b in bad), bad


@pytest.mark.parametrize("D", [2, 3, 4, 5, 8])
def test_fused_pushes_keep_the_reuse_rule(D):
    # transfer "sm_fused": the direct schedule's copies at once, their flags after all
    plan = ring_plan(D, "direct")
    assert _overwrites(plan, calls=6, sets=2, fused=True) == []
    bad = _overwrites(plan, calls=3, sets=1, fused=True)          # (the check can fail)
    assert any(b[0] == "overwritten before read" for b in bad), bad
    if D > 2:       # a fused flag follows the later copies too: the graph has that edge
        events = _events(plan, calls=1, fused=True)
        assert ("cp", 0, 0, 1, 0) in events[("fl", 0, 0, 0, 0)]
        assert ("cp", 0, 0, 0, 0) not in events[("cp", 0, 0, 1, 0)]


def test_transfers_are_checked():
    assert set(TRANSFERS) == {"copy_engine", "sm", "sm_fused"}
    for schedule in SCHEDULES:
        peer.check_transfer(peer.DEFAULT_TRANSFER, schedule, "f")
        peer.check_transfer("sm", schedule, "f")
    peer.check_transfer("sm_fused", "direct", "f")
    with pytest.raises(ValueError, match="f: transfer must be one of"):
        peer.check_transfer("nvls", "ring", "f")
    with pytest.raises(ValueError, match="the direct schedule alone"):
        peer.check_transfer("sm_fused", "ring", "f")


def test_ring_pieces_are_checked():
    assert peer.ring_chunks("ring", 3, 1000, 3) == 3
    assert peer.ring_chunks("ring", 3, 513, 3) == 3 and peer.ring_chunks("ring", 3, 512, 3) == 2
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="ring chunks must be a positive int"):
            peer.ring_chunks("ring", 4, 2 ** 20, bad)


# --- the SM push kernel --------------------------------------------------------------------------

PUSH_CASES = [      # (words, destinations, blocks)
    (2 * push.TILE + 4 * 37, 3, 2),     # a partial third tile; block 0 takes tiles 0 and 2
    (8, 1, 1),                          # two 16-byte groups of the first tile
    (push.TILE, 2, 5),                  # one whole tile; four blocks find none
]


def _push_child():
    """In the simulator: each PUSH_CASES push of fresh random words into destinations
    poisoned beyond them too; per case, per destination, [the words equal, the rest
    untouched], and the source unchanged."""
    import numpy as np
    rng = np.random.default_rng(36)
    out = {}
    for words, peers, blocks in PUSH_CASES:
        src = rng.integers(0, 2 ** 32, words + 12, dtype=np.uint32)
        kept = src.copy()
        dsts = [np.full(words + 12 + 4 * p, 0xDEADBEEF, np.uint32) for p in range(peers)]
        push.push(0, src, dsts, 4 * words, blocks)
        out[f"{words} {peers} {blocks}"] = [
            [bool(np.array_equal(d[:words], kept[:words])), bool((d[words:] == 0xDEADBEEF).all())]
            for d in dsts] + [bool(np.array_equal(src, kept))]
    print(json.dumps(out))


def test_push_kernel_in_the_simulator():
    got = simulator_report(os.path.abspath(__file__))
    assert got == {f"{w} {p} {b}": [[True, True]] * p + [True] for w, p, b in PUSH_CASES}, got


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                    reason="PTX is compiled outside the simulator")
@pytest.mark.parametrize("peers", [1, 3])
def test_push_kernel_ptx_loads_once_and_stores_to_each_peer(peers):
    """The kernel's PTX: UNROLL 16-byte loads a tile and UNROLL 16-byte stores per peer, no
    narrower global access, no local memory; its parameters are the Launcher's: the source
    and each peer an array of seven (address in the fifth), then the two counts."""
    import re
    from numba import cuda
    ptx, _ = cuda.compile_ptx(push._kernel(peers), push._signature(peers), cc=(9, 0))
    count = {op: len(re.findall(rf"\b{re.escape(op)}\b", ptx))
             for op in ("ld.global.v4.u32", "st.global.v4.u32", "ld.global.u32",
                        "st.global.u32")}
    assert count == {"ld.global.v4.u32": push.UNROLL, "st.global.v4.u32": push.UNROLL * peers,
                     "ld.global.u32": 0, "st.global.u32": 0}, count
    assert ".local" not in ptx
    params = re.findall(r"\.param \.(\w+) \S+_param_(\d+)", ptx)
    assert len(params) == 7 * (1 + peers) + 2
    assert [t for t, _ in params[-2:]] == ["u32", "u32"]
    read = {int(i) for i in re.findall(r"ld\.param\.\w+\s+%\w+,\s*\[\S+_param_(\d+)\]", ptx)}
    assert read == {7 * i + 4 for i in range(1 + peers)} | {7 * (1 + peers), 7 * (1 + peers) + 1}


def test_push_refuses_what_it_cannot_copy():
    assert push.fits(0x7f0000000200, [0x7f0000400000, 0x7f0000800010], 2 ** 23)
    assert not push.fits(0x7f0000000200, [0x7f0000400008], 2 ** 23)     # a peer's address
    assert not push.fits(0x7f0000000204, [0x7f0000400000], 2 ** 23)     # the source's
    assert not push.fits(0x7f0000000200, [0x7f0000400000], 30)          # the size
    assert not push.fits(0x7f0000000200, [0x7f0000400000], 0)
    assert not push.fits(0, [0], 2 ** 36)                                # past uint32 words
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return      # (the simulator takes arrays: the calls below are a GPU's)
    bad = [(16, [], ValueError, "1 to 7 destinations"),
           (16, [32] * 8, ValueError, "not 8"),
           (24, [32], ValueError, "multiples of 16 bytes"),
           (16.0, [32], TypeError, "nbytes must be an int"),
           (16, ["0x20"], TypeError, "device addresses")]
    for nbytes, dsts, kind, words in bad:
        with pytest.raises(kind, match=words):
            push.push(0, 0x1000, dsts, nbytes)
    for blocks, kind in ((0, ValueError), (65536, ValueError), (True, TypeError),
                         (2.0, TypeError)):
        with pytest.raises(kind, match="blocks"):
            push.push(0, 0x1000, [0x2000], 16, blocks)



def _scatter_overwrites(plan, calls, sets):
    """The reduce-scatter as the peer path enqueues it, ``calls`` calls with ``sets`` scratch
    sets taken in turn: copies into a slot that do not follow the receiver's sum of what the
    slot held ``sets`` calls before, flags set before that call's clearing could erase them,
    and sums that do not follow the copies they add. Events: ("mm", c, r, i), ("cp", c, r,
    i) (its flag set after it on the same stream), ("sum", c, r) after r's last matmul and
    the copies into its slots, ("end", c, r) after its sum and its own copies (then it
    clears its flags); call c + 1 of a rank follows its call c's end."""
    D = len(plan)
    deps = {}
    for c, r in itertools.product(range(calls), range(D)):
        prev_mm = prev_cp = {("end", c - 1, r)} if c else set()
        for s in plan[r]:
            deps[("mm", c, r, s.step)] = prev_mm
            prev_mm = {("mm", c, r, s.step)}
            if s.send_to is not None:
                deps[("cp", c, r, s.step)] = prev_cp | prev_mm
                prev_cp = {("cp", c, r, s.step)}
        into = {("cp", c, q, t.step) for q in range(D) for t in plan[q] if t.send_to == r}
        deps[("sum", c, r)] = prev_mm | into
        deps[("end", c, r)] = {("sum", c, r)} | prev_cp
    before = _before(deps)
    bad = []
    for c, q in itertools.product(range(calls), range(D)):
        for s in plan[q]:
            if s.send_to is None:
                continue
            cp, r = ("cp", c, q, s.step), s.send_to
            if cp not in before[("sum", c, r)]:
                bad.append(("summed before it arrived", cp))
            if c >= sets and ("sum", c - sets, r) not in before[cp]:
                bad.append(("overwritten before it was summed", cp))
            if c >= sets and ("end", c - sets, r) not in before[cp]:
                bad.append(("flag set before the last call cleared it", cp))
    return bad


@pytest.mark.parametrize("D", [1, 2, 3, 4, 8])
def test_scatter_plan_sends_every_block_once_to_its_rank(D):
    plan = scatter_plan(D)
    for r, steps in enumerate(plan):
        assert sorted(s.block for s in steps) == list(range(D))
        assert steps[-1].block == r and steps[-1].send_to is None       # its own block last
        assert all(s.send_to == s.block != r and s.dest_slot == r for s in steps[:-1])
    for i in range(D - 1):                  # each step a permutation: one send, one receive
        assert sorted(plan[r][i].send_to for r in range(D)) == list(range(D))
    assert _scatter_overwrites(plan, calls=5, sets=2) == []      # peer.SETS, no ack


@pytest.mark.parametrize("D", [2, 3, 4])
def test_one_scatter_set_without_an_ack_would_be_overwritten(D):
    bad = _scatter_overwrites(scatter_plan(D), calls=3, sets=1)
    assert any(b[0] == "overwritten before it was summed" for b in bad), bad


def test_ring_plan_takes_devices_or_a_count():
    assert ring_plan(["cuda:0", "cuda:1"])[1][0].device == "cuda:1"
    assert ring_plan(2) == ring_plan(range(2))
    with pytest.raises(ValueError, match="at least one rank"):
        ring_plan([])
    with pytest.raises(ValueError, match="schedule must be one of"):
        ring_plan(2, "tree")
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="scatter_plan"):
            scatter_plan(bad)
    for bad in (2.0, "cuda:0", None, True):
        with pytest.raises(TypeError, match="ring_plan"):
            ring_plan(bad)


# --- several processes --------------------------------------------------------------------------

def _run(mode, nprocs):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE),
                                                       os.environ.get("PYTHONPATH", "")]),
               NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "collective_cases.py"), mode,
                           str(nprocs)], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


EXPECTED_ERRORS = {
    "inner dims": ("ValueError", "inner dimensions"), "mixed types": ("TypeError", "float32"),
    "3-D": ("ValueError", "2-D"), "int": ("TypeError", "int32"),
    "out shape": ("ValueError", "out must be"), "out_dtype": ("TypeError", "bfloat16"),
    "path": ("ValueError", "path must be"), "numpy": ("TypeError", "torch tensor"),
    "schedule": ("ValueError", "schedule must be"),
    "transfer": ("ValueError", "transfer must be one of"),
    "sm_fused in the ring": ("ValueError", "the direct schedule alone"),
    "shards differ": ("ValueError", "rank 0: (5, 8)"),
}


RS_EXPECTED_ERRORS = {
    "inner dims": ("ValueError", "inner dimensions"), "mixed types": ("TypeError", "float32"),
    "rows": ("ValueError", "equal blocks"), "out shape": ("ValueError", "out must be"),
    "out_dtype": ("TypeError", "bfloat16"), "path": ("ValueError", "path must be"),
    "numpy": ("TypeError", "torch tensor"), "products differ": ("ValueError", "rank 0: ("),
    "transfer": ("ValueError", "transfer must be one of"),
    "sm_fused": ("ValueError", "sends each block to one rank"),
}


GROUP_ERRORS = {      # (the last rank's: outside the subgroup of rank 0)
    "not a group, all-gather": ("TypeError", "process group"),
    "not a group, reduce-scatter": ("TypeError", "process group"),
    "outside the group, all-gather": ("ValueError", "not a member"),
    "outside the group, reduce-scatter": ("ValueError", "not a member"),
}


def _check(got, path):
    assert any(key.startswith("path") and value.startswith(path) for key, value in got.items())
    errors = {k: v for k, v in got.items() if isinstance(v, float)}
    assert errors, "no case ran"
    assert all(v <= 1.0 for v in errors.values()), errors
    assert sum("reduce-scatter" in k for k in errors) >= 6, errors
    assert sum("gelu" in k for k in errors) >= 2, errors
    assert "group of one on rank 0" in errors, errors
    for table, expected in (("errors", EXPECTED_ERRORS), ("rs errors", RS_EXPECTED_ERRORS),
                            ("group errors", GROUP_ERRORS)):
        for name, (etype, words) in expected.items():
            assert got[table][name][0] == etype and words in got[table][name][1], \
                (table, name, got[table][name])


def _torch():
    return pytest.importorskip("torch", reason="all_gather_matmul needs torch (not installed)")


def test_sendrecv_ring_with_gloo_on_the_cpu():
    torch = _torch()
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    _check(_run("cpu", 3), "sendrecv")


@pytest.mark.gpu
def test_peer_ring_with_processes_sharing_one_gpu():
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    got = _run("gpu_shared", 3)
    _check(got, "peer")
    graphs, errors = got["peer graphs"]        # calls on the same tensors replayed graphs
    assert graphs >= 1 and not errors, got["peer graphs"]
    _check_pushes(got)


def _check_pushes(got):
    """The SM transfers' cases ran the push kernel (the copy engines' none), their products
    planned for the SMs it leaves; every transfer was tried on the peer path."""
    pushes = got["push kernels"]
    assert set(pushes) == set(TRANSFERS), pushes
    # the products beside a push kernel left its blocks' SMs free (collective_cases sets
    # PUSH_CARVEOUT); the copy engines' none
    blocks = [peer.PUSH_BLOCKS]
    assert got["carveouts"] == {"copy_engine": [0], "sm": blocks, "sm_fused": blocks,
                                "rs copy_engine": [0], "rs sm": blocks}, got["carveouts"]
    assert pushes["copy_engine"] == 0 and pushes["sm"] > 0 and pushes["sm_fused"] > 0, pushes
    for tr in TRANSFERS:
        assert any(k.startswith("peer") and f" {tr} " in k for k in got), tr
    rs_pushes = got["rs push kernels"]          # the reduce-scatter's: no "sm_fused"
    assert set(rs_pushes) == {"copy_engine", "sm"}, rs_pushes
    assert rs_pushes["copy_engine"] == 0 and rs_pushes["sm"] > 0, rs_pushes
    for tr in ("copy_engine", "sm"):
        assert any(k.startswith(f"peer {tr} reduce-scatter") for k in got), tr
    # the ring's copies in pieces where D > 2: 96x64 bf16 (12288 bytes) in 3, 5x3 in 1
    pieces = {tuple(p) for p in got["ring pieces"]}     # (transfer, shard bytes, pieces)
    for tr in ("copy_engine", "sm"):
        assert (tr, 12288, 3 if got["ranks"] > 2 else 1) in pieces, pieces
        assert {p for p in pieces if p[:2] == (tr, 30)} == {(tr, 30, 1)}, pieces
        assert any(k.startswith(f"peer ring {tr} in pieces") for k in got), tr


@pytest.mark.gpu
def test_both_rings_with_one_process_per_gpu():
    torch = _torch()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 or more GPUs")
    got = _run("gpu", torch.cuda.device_count())
    _check(got, "peer")
    for name, (etype, message) in got["cpu tensors, nccl"].items():
        assert etype == "ValueError" and "need a group with gloo" in message, (name, message)
    graphs, errors = got["peer graphs"]
    assert graphs >= 1 and not errors, got["peer graphs"]
    assert any(k.startswith("sendrecv") for k in got)
    _check_pushes(got)


if __name__ == "__main__":
    _push_child()
