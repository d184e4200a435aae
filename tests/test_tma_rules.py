"""cuTensorMapEncodeTiled's rules (gemm.tma.check_encodable) and the Hopper router held to them.

In this process: each rule of the CUDA driver API's cuTensorMapEncodeTiled (tiled maps, no
interleave) on its own, a legal map passing and each broken rule refused by name, by
check_encodable and by the simulator's twin (gemm.arch.sim_sm90.sim_tensor_map). In numba's
CUDA simulator (this file as a script in a subprocess with NUMBA_ENABLE_CUDASIM=1):
hypothesis draws calls (shapes with single rows and columns, row- and column-major, padded
leading dimensions, byte offsets of the base address, batches, bf16 / f16 / tf32, out types)
and the router (gemm.hopper._Call) must take for TMA exactly the calls whose operands TMA can
read, with every map it makes within the rules and addressing the operand's elements; and
1x1, 1xN and Nx1 products run through gemm.matmul on the Hopper kernel against numpy.
"""

import json
import re
import sys
import traceback
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:   # run as a script by the simulator tests
    sys.path.insert(0, str(ROOT))

from gemm.tma import check_encodable  # noqa: E402

# a legal map: a K-major bf16 operand's tile over a batch of 3 padded matrices
LEGAL = dict(dims=(70, 50, 3), strides=(160, 8000), box=(64, 128), element_bytes=2,
             address=0x7F0000001000, swizzle=128)


def test_a_legal_map_passes():
    check_encodable(**LEGAL)
    check_encodable(**dict(LEGAL, box=(64, 128, 1), element_strides=(1, 8, 1)))
    check_encodable(**dict(LEGAL, dims=(1, 1, 1), strides=(16, 16)))     # 1x1: boxes past it
    check_encodable(**dict(LEGAL, dims=(2 ** 32, 1), strides=(2 ** 40 - 16,), box=(8,),
                           swizzle=0))
    check_encodable(dims=(5,), strides=(), box=(4,), element_bytes=4)      # rank 1
    check_encodable(dims=(256,) * 3, strides=(256, 65536), box=(16, 256, 57), element_bytes=1)
    check_encodable(**dict(LEGAL, box=(64, 256, 16), element_strides=(1, 1, 8)))  # 64 KiB
    # the driver counts floor(box / step) elements a dimension (the ceiling would be 400 KiB):
    # it encoded this map on an H200
    check_encodable(dims=(256,) * 5, strides=(256, 2 ** 16, 2 ** 24, 2 ** 32),
                    box=(16, 3, 64, 200, 8), element_bytes=1, element_strides=(1, 2, 1, 1, 8))


@pytest.mark.parametrize("change, rule", [
    (dict(dims=()), "tensorRank must be in 1..5"),
    (dict(dims=(8,) * 6, strides=(16,) * 5), "tensorRank must be in 1..5"),
    (dict(strides=(160,)), "globalStrides must have tensorRank - 1 = 2 entries"),
    (dict(box=(64, 128, 1, 1)), "boxDim must have at most tensorRank"),
    (dict(element_strides=(1, 1)), "elementStrides must have tensorRank = 3 entries"),
    (dict(dims=(70, 50.5, 3)), "globalDim[1] must be an integer"),
    (dict(element_bytes=3), "the element size must be 1, 2, 4 or 8"),
    (dict(address=0x7F0000001008), "globalAddress must be 16-byte aligned"),
    (dict(dims=(0, 50, 3)), "globalDim[0] must be in [1, 2**32]"),
    (dict(dims=(70, 50, 2 ** 32 + 1)), "globalDim[2] must be in [1, 2**32]"),
    (dict(strides=(2, 8000)), "globalStrides[0] must be a multiple of 16"),     # the bug
    (dict(strides=(160, 8008)), "globalStrides[1] must be a multiple of 16"),
    (dict(strides=(-16, 8000)), "globalStrides[0] must be a multiple of 16"),
    (dict(strides=(160, 2 ** 40)), "globalStrides[1] must be less than 2**40"),
    (dict(box=(64, 0)), "boxDim[1] must be in [1, 256]"),
    (dict(box=(64, 256, 8)), "the box must load at most 233472 bytes, got 262144"),
    (dict(box=(64, 257)), "boxDim[1] must be in [1, 256]"),
    (dict(box=(60, 128), swizzle=0), "boxDim[0] * element size must be a multiple of 16"),
    (dict(swizzle=16), "swizzle must be one of [0, 32, 64, 128]"),
    (dict(box=(128, 64)), "with a 128-byte swizzle, boxDim[0] * element size must be at "
                          "most 128"),
    (dict(box=(32, 64), swizzle=32), "with a 32-byte swizzle"),
    (dict(box=(64, 64), swizzle=64, element_bytes=4), "with a 64-byte swizzle"),
    (dict(element_strides=(1, 9, 1)), "elementStrides[1] must be in [1, 8]"),
    (dict(element_strides=(0, 1, 1)), "elementStrides[0] must be in [1, 8]"),
])
def test_each_broken_rule_is_named(change, rule):
    with pytest.raises(ValueError, match="^cuTensorMapEncodeTiled: " + re.escape(rule)):
        check_encodable(**dict(LEGAL, **change))


def test_the_simulators_tensor_map_refuses_what_the_driver_would():
    """sim_tensor_map refuses the (1, 1) bf16 map the router once sent (a 2-byte stride), and
    a misaligned base, and takes the same map with a 16-byte stride."""
    from gemm.arch import sim_sm90 as sm
    from gemm.hopper.plan import tma_copy
    copy = tma_copy("K", 64, 64, 16)
    buf = np.zeros(64, np.uint8)
    skip = -buf.__array_interface__["data"][0] % 16
    buf = buf[skip:skip + 32]                                   # 16-byte aligned
    with pytest.raises(ValueError, match="globalStrides.0. must be a multiple of 16"):
        sm.sim_tensor_map(buf, 0, replace(copy, dims=(1, 1, 1), strides=(2, 16)), 2)
    with pytest.raises(ValueError, match="globalAddress must be 16-byte aligned"):
        sm.sim_tensor_map(buf, 2, replace(copy, dims=(1, 1, 1), strides=(16, 16)), 2)
    words = sm.sim_tensor_map(buf, 0, replace(copy, dims=(1, 1, 1), strides=(16, 16)), 2)
    assert words.shape == (16,)


def test_tensor_map_refuses_before_calling_the_driver(monkeypatch):
    drv = pytest.importorskip("cuda.bindings.driver")
    from gemm.hopper.plan import tma_copy
    from gemm.tma import tensor_map

    def driver(*args):
        raise AssertionError("the driver was called")
    monkeypatch.setattr(drv, "cuTensorMapEncodeTiled", driver)
    copy = replace(tma_copy("K", 64, 64, 16), dims=(1, 1, 1), strides=(2, 16))
    with pytest.raises(ValueError, match="^tensor_map: globalStrides.0. must be a multiple"):
        tensor_map(0x7F0000001000, copy, "bf16")
    with pytest.raises(ValueError, match="^tensor_map: globalAddress must be 16-byte"):
        tensor_map(0x7F0000001002, replace(copy, strides=(16, 16)), "bf16")


# --- on a GPU of compute capability 9.x ----------------------------------------------------

def _hopper():
    """Skip unless numba sees a GPU of compute capability 9.x (the simulator off)."""
    from gpucase import require_hopper
    require_hopper()
    from numba import cuda
    return cuda


@pytest.mark.gpu
def test_the_driver_encodes_exactly_what_check_encodable_takes():
    """cuTensorMapEncodeTiled itself over legal maps changed in one to three places (edge
    values of every parameter): it refuses exactly the maps check_encodable refuses."""
    cuda = _hopper()
    from cuda.bindings import driver as drv
    base = cuda.device_array(1 << 16, np.uint8).__cuda_array_interface__["data"][0]
    kinds = {1: "UINT8", 2: "BFLOAT16", 4: "FLOAT32", 8: "FLOAT64"}
    swizzles = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
    edges = {
        "dims": [0, 1, 2, 7, 70, 2 ** 31, 2 ** 32, 2 ** 32 + 1],
        "strides": [0, 2, 8, 16, 32, 48, 96, 144, 160, 8000, 8008, 2 ** 40 - 16, 2 ** 40],
        "box": [0, 1, 8, 16, 32, 63, 64, 128, 255, 256, 257],
        "steps": [0, 1, 2, 8, 9],
    }
    rng = np.random.default_rng(0)
    wrong = []
    boxes = [(16, 228, 64), (16, 229, 64), (16, 256, 57), (16, 256, 58), (16, 64, 4, 4, 14),
             (16, 64, 4, 4, 15)]                  # u8 boxes about 228 KiB
    for i in range(4000 + len(boxes)):
        rank = int(rng.integers(1, 6))
        spec = dict(dims=[70, 50, 3, 2, 2][:rank], strides=[160, 8000, 24000, 48000][:rank - 1],
                    box=[64, 128, 1, 2, 1][:rank], element_bytes=2, address=base,
                    swizzle=128, element_strides=[1] * rank)
        if i < len(boxes):
            rank = len(boxes[i])
            spec = dict(dims=[256] * rank, strides=[256 << (8 * j) for j in range(rank - 1)],
                        box=list(boxes[i]), element_bytes=1, address=base, swizzle=0,
                        element_strides=[1] * rank)
        for _ in range(int(rng.integers(1, 4)) * (i >= len(boxes))):
            what = rng.choice(["dims", "strides", "box", "steps", "bytes", "swizzle",
                               "address"])
            key = {"steps": "element_strides"}.get(what, what)
            if what in edges and spec[key]:
                spec[key][int(rng.integers(len(spec[key])))] = int(rng.choice(edges[what]))
            elif what == "bytes":
                spec["element_bytes"] = int(rng.choice([1, 2, 4, 8]))
            elif what == "swizzle":
                spec["swizzle"] = int(rng.choice([0, 32, 64, 128]))
            elif what == "address":
                spec["address"] = base + int(rng.choice([2, 8, 16, 32, 48]))
        try:
            check_encodable(**spec)
            ours = True
        except ValueError:
            ours = False
        err, _ = drv.cuTensorMapEncodeTiled(
            getattr(drv.CUtensorMapDataType,
                    f"CU_TENSOR_MAP_DATA_TYPE_{kinds[spec['element_bytes']]}"),
            rank, spec["address"], [drv.cuuint64_t(d) for d in spec["dims"]],
            # rank 1: a placeholder (an empty list is refused, though the driver reads none)
            [drv.cuuint64_t(x) for x in spec["strides"] or [16]],
            [drv.cuuint32_t(b) for b in spec["box"]],
            [drv.cuuint32_t(e) for e in spec["element_strides"]],
            drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(drv.CUtensorMapSwizzle,
                    f"CU_TENSOR_MAP_SWIZZLE_{swizzles[spec['swizzle']]}"),
            drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        if (int(err) == 0) != ours:
            wrong.append((dict(spec, address=spec["address"] - base), int(err)))
    assert not wrong, f"{len(wrong)} disagree, e.g. {wrong[:10]}"


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [None, "hopper"])
def test_one_row_and_one_column_products_on_the_gpu(kernel):
    """gemm.matmul of torch bf16 / f16 products with a single row or column (a 1x1 one
    raised from cuTensorMapEncodeTiled) against float64, the out poisoned."""
    _hopper()
    torch = pytest.importorskip("torch")
    import gemm
    gen = torch.Generator(device="cuda").manual_seed(0)
    for dt in (torch.bfloat16, torch.float16):
        # the operands of more than one line have 16-byte aligned lines (K or N of 8)
        for m, n, k in [(1, 1, 1), (1, 13, 8), (7, 1, 8), (1, 1, 40), (3, 1, 1), (1, 64, 8)]:
            a = torch.randn(m, k, device="cuda", dtype=dt, generator=gen)
            b = torch.randn(n, k, device="cuda", dtype=dt, generator=gen).T
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
            gemm.matmul(a, b, out, kernel=kernel)
            ref = a.double() @ b.double()
            bound = a.double().abs() @ b.double().abs()
            assert ((out.double() - ref).abs() <= 1e-5 * bound).all(), (dt, m, n, k, out, ref)


# --- in the simulator -----------------------------------------------------------------------

@pytest.mark.parametrize("which", ["router", "matmul"])
def test_in_simulator(which):
    from simcase import simulator_report
    got = simulator_report(__file__, which)
    bad = {name: v for name, v in got.items() if v != "ok"}
    assert got and not bad, "\n".join(f"{k}:\n{v}" for k, v in bad.items())


_VT_BYTES = {"bf16": 2, "f16": 2, "f32": 4}


def _array(draw, st, shape, dtype, batch):
    """A simulator device array of ``shape`` ((batch,) + shape when ``batch``) in a buffer
    64-byte aligned: drawn major, leading-dimension padding, batch stride (0: broadcast) and
    base offset in elements."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    r, c = shape
    isz = np.dtype(dtype).itemsize
    col = draw(st.booleans())
    line, lines = (r, c) if col else (c, r)
    per16 = 16 // isz                               # elements in 16 bytes
    aligned = -(-line // per16) * per16
    ld = draw(st.sampled_from([line, aligned, aligned, aligned + per16,
                               line + draw(st.integers(1, 5))]))
    one = lines * ld
    if batch:
        whole = -(-one // per16) * per16
        bstride = draw(st.sampled_from([0, one, whole, whole, whole + per16, one + 1]))
    offset = draw(st.sampled_from([0, 0, 0, 0, per16, 2 * per16, 1, 3]))
    span = offset + one + (batch - 1) * bstride if batch else offset + one
    raw = np.zeros(span * isz + 64, np.uint8)
    skip = -raw.__array_interface__["data"][0] % 64
    buf = raw[skip:skip + span * isz].view(dtype)
    buf[:] = np.arange(span) % 7
    strides = (isz, ld * isz) if col else (ld * isz, isz)
    full = (r, c)
    if batch:
        full, strides = (batch,) + full, (bstride * isz,) + strides
    return FakeCUDAArray(np.lib.stride_tricks.as_strided(buf[offset:], full, strides))


def _expected_unfit(a, b, eb, dtype):
    """Whether TMA cannot read A or B (gemm.hopper's rules, stated here): an address or a
    used stride (between lines when there are several, between matrices when there are
    several) not a multiple of 16 bytes, or tf32 not K-major (A row-major, B column-major)."""
    for op in (a, b):
        if op.ptr % 16:
            return True
        if op.shape[1 - op.unit_mode] > 1 and (op.strides[1 - op.unit_mode] * eb) % 16:
            return True
        if op.batch > 1 and (op.bstride * eb) % 16:
            return True
    return dtype == "tfloat32" and not (a.unit_mode == 1 and b.unit_mode == 0)


def _check_maps(call, eb, ob):
    """Every map of ``call`` within the driver's rules (and the simulator's twin), and
    addressing its operand: a used stride is the operand's."""
    from gemm.arch.sim_sm90 import sim_tensor_map
    from gemm.call.operands import kernel_buffer
    ops = call.ops + (call.c,)
    assert len(call.map_specs) == 2 + call.variant.tma_store
    for (copy, dims, strides, vt), op, size in zip(call.map_specs, ops, (eb, eb, ob)):
        assert _VT_BYTES[vt] == size
        check_encodable(dims, strides, copy.box, size, op.ptr, copy.swizzle)
        sim_tensor_map(kernel_buffer(op, np.uint8), 0, replace(copy, dims=dims,
                                                               strides=strides), size)
        if dims[1] > 1:
            assert strides[0] == op.strides[1 - op.unit_mode] * size, (dims, strides)
        if dims[2] > 1:
            assert strides[1] == op.bstride * size, (dims, strides)
        assert dims[0] == op.shape[op.unit_mode] and dims[1] == op.shape[1 - op.unit_mode]


def router_property():
    """hypothesis: the router takes for TMA exactly the calls TMA can read, and every map
    it makes encodes."""
    from hypothesis import HealthCheck, Phase, given, settings, strategies as st

    from gemm.hopper import HopperConfig, TmaUnfit, _Call
    from gemm.call.operands import operand

    extent = st.one_of(st.just(1), st.integers(1, 9), st.integers(1, 140))
    kinds = {  # name -> (numpy type of A and B, dtype, out types and out_dtype)
        "bf16": (np.uint16, "bfloat16", [(np.float32, None), (np.uint16, "bfloat16")]),
        "f16": (np.float16, "float16", [(np.float32, None), (np.float16, None)]),
        "tf32": (np.float32, "tfloat32", [(np.float32, None)]),
    }

    seen = {"TMA": 0, "TMA, a single line": 0, "TMA stores": 0, "TmaUnfit": 0, "other": 0}

    @settings(max_examples=200, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck),
              phases=(Phase.explicit, Phase.generate, Phase.shrink))
    @given(st.data())
    def prop(data):
        draw = data.draw
        kind = draw(st.sampled_from(sorted(kinds)))
        np_in, dtype, outs = kinds[kind]
        np_out, out_dtype = draw(st.sampled_from(outs))
        m, n, k = draw(extent), draw(extent), draw(extent)
        batched = draw(st.sampled_from([0, 0, 1, 2, 3]))
        a_batch = batched if batched and draw(st.booleans()) else 0
        b_batch = batched if batched and (not a_batch or draw(st.booleans())) else 0
        nb = max(a_batch, b_batch)
        A = _array(draw, st, (m, k), np_in, a_batch)
        B = _array(draw, st, (k, n), np_in, b_batch)
        out = _array(draw, st, (m, n), np_out, nb if batched else 0)
        config = draw(st.sampled_from([None, None, HopperConfig(dtype=dtype, epilogue="tma"),
                                       HopperConfig(bM=64, bN=64, stages=2, consumers=1,
                                                    dtype=dtype, epilogue="tma")]))
        tf32x3 = dtype == "tfloat32" and config is None and draw(st.booleans())
        eb = np.dtype(np_in).itemsize
        ob = np.dtype(np_out).itemsize
        a = operand(A, "A", True, batched=True)
        b = operand(B, "B", True, batched=True)
        try:
            call = _Call(A, B, out, 1.0, 0.0, config, out_dtype, "prop", tf32x3)
        except TmaUnfit:
            assert _expected_unfit(a, b, eb, dtype), (a.strides, b.strides, a.ptr % 16)
            seen["TmaUnfit"] += 1
            return
        except ValueError as e:     # the config's own limits (narrow tiles, overlapping out)
            assert any(s in str(e) for s in ("contiguous along K", "overlap")), e
            seen["other"] += 1
            return
        assert not _expected_unfit(a, b, eb, dtype)
        _check_maps(call, eb, ob)
        seen["TMA"] += 1
        seen["TMA, a single line"] += any(spec[1][1] == 1 for spec in call.map_specs)
        seen["TMA stores"] += call.variant.tma_store

    prop()
    return seen


def _bf16(x):
    from sim_tensorcore_cases import to_operand
    return to_operand(x, "bfloat16")


def matmul_runs():
    """1x1, 1xN and Nx1 products through gemm.matmul on the Hopper kernel (the out poisoned
    with NaN) against numpy float64; {name: "ok" or the failure}."""
    from numba import cuda

    import gemm
    from gemm.hopper import HopperConfig
    from simcase import switch_threads_often
    switch_threads_often()
    rng = np.random.default_rng(0)
    report = {}

    def padded(x, ld):
        """``x`` on the device, row-major with rows ``ld`` elements apart."""
        full = np.zeros((x.shape[0], ld), x.dtype)
        full[:, :x.shape[1]] = x
        return cuda.to_device(full)[:, :x.shape[1]]

    def run(name, m, n, k, kind, kernel, out_type=np.float32, lda=None, ldb=None):
        try:
            x, y = rng.standard_normal((m, k)), rng.standard_normal((k, n))
            if kind == "bf16":
                (a, a64), (b, b64) = _bf16(x), _bf16(y)
            else:
                a, b = x.astype(np.float16), y.astype(np.float16)
                a64, b64 = a.astype(np.float64), b.astype(np.float64)
            out = cuda.to_device(np.full((m, n), np.nan, out_type))
            gemm.matmul(padded(a, lda or k), padded(b, ldb or n), out, kernel=kernel)
            got = out.copy_to_host().astype(np.float64)
            ref = a64 @ b64
            tol = 1e-5 * (np.abs(a64) @ np.abs(b64)) + (2 ** -11 if out_type == np.float16
                                                        else 0) * np.abs(ref) + 1e-30
            ok = np.all(np.abs(got - ref) <= tol)
            report[name] = "ok" if ok else f"got {got.ravel()[:8]}, want {ref.ravel()[:8]}"
        except Exception:  # noqa: BLE001 - reported
            report[name] = traceback.format_exc(limit=6)

    # each has an operand or out of one row or column, its stride (2, 10, 26 bytes...)
    # never used by TMA
    small = HopperConfig(bM=64, bN=64, stages=2, consumers=1, epilogue="tma")
    run("bf16 1x1 @ 1x1, default config", 1, 1, 1, "bf16", HopperConfig())
    run("bf16 1x1 @ 1x1, 64x64 tiles, TMA stores", 1, 1, 1, "bf16", small)
    run("f16 1x1 @ 1x1, kernel='hopper'", 1, 1, 1, "f16", "hopper")
    run("f16 1x5 @ 5x13 (1xN), kernel='hopper'", 1, 13, 5, "f16", "hopper", ldb=16)
    run("f16 7x5 @ 5x1 (Nx1), kernel='hopper'", 7, 1, 5, "f16", "hopper", lda=8)
    run("f16 1x5 @ 5x13, f16 out, 64x64 tiles, TMA stores", 1, 13, 5, "f16",
        replace(small, dtype="float16"), out_type=np.float16, ldb=16)
    return report


def main(which):
    report = {}
    if which == "router":
        try:
            seen = router_property()
            report["router property"] = "ok"
            # the draws reach each outcome (a rule not drawn is not tested)
            seen.pop("other")
            report["router outcomes"] = "ok" if min(seen.values()) >= 5 else str(seen)
        except Exception:  # noqa: BLE001 - reported
            report["router property"] = traceback.format_exc(limit=8)
    else:
        report = matmul_runs()
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
