"""add_matrices on a real GPU (marked ``gpu``; skipped without one).

Fresh random data every run (the seed is printed on failure), outputs poisoned with NaN, every
element compared for exact equality with ``x + y`` (one fp32 addition per element), over odd
shapes, row- and column-major operands and outputs, numba / CuPy / torch arrays, and pipeline
configurations in static and dynamic shared memory (above 48 KiB too).
"""

import os

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

from gpucase import require_gpu  # noqa: E402

require_gpu()

from numba import cuda  # noqa: E402

from gemm.elementwise import AddConfig, add_matrices  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")
CONFIGS = [
    dict(),                                                     # (8, 128), 3 stages, static
    dict(block=(8, 128), stages=4, delay_release=1),
    dict(block=(4, 32), stages=2, threads=32, shared="dynamic"),  # dynamic below 48 KiB
    dict(block=(16, 128), stages=4, threads=256),               # 72 KiB dynamic
    dict(block=(32, 128), stages=4, delay_release=2, threads=512),  # 144 KiB dynamic
    dict(block=(3, 20), stages=3, threads=64),                  # odd block: 4-element rows
]
SHAPES = [(1, 1), (1, 1000), (1000, 1), (7, 9), (129, 257), (1023, 1025), (2048, 2048)]


def _id(config):
    return ",".join(f"{k}={v}" for k, v in sorted(config.items())) or "default"


def _shapes(rng):
    return SHAPES + [tuple(int(v) for v in rng.integers(1, 1500, 2)) for _ in range(3)]


def _host(rng, shape, order):
    return np.asarray(rng.standard_normal(shape), np.float32, order=order)


def test_configs_cover_dynamic_shared_memory():
    kinds = {AddConfig(**c).dynamic for c in CONFIGS}
    big = [c for c in CONFIGS if AddConfig(**c).shared_bytes > 48 * 1024]
    assert kinds == {False, True} and big


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_exact_on_odd_shapes_numba_arrays(config):
    """Row-major (C) and column-major (F) x, y and out; every mix for the default config
    (each mix and alignment is a kernel variant to compile)."""
    rng = np.random.default_rng(SEED)
    mixes = ("CCC", "FCC", "CFF", "FFC") if not config else ("CCC", "FCF")
    for shape in _shapes(rng):
        for orders in mixes:
            x, y = _host(rng, shape, orders[0]), _host(rng, shape, orders[1])
            out = cuda.to_device(np.full(shape, np.nan, np.float32, order=orders[2]))
            got = add_matrices(cuda.to_device(x), cuda.to_device(y), out, **config)
            assert got is out
            assert np.array_equal(out.copy_to_host(), x + y), (SEED, config, shape, orders)


@pytest.mark.parametrize("config", CONFIGS[:1] + CONFIGS[3:5], ids=_id)
def test_exact_with_torch_tensors_and_views(config):
    torch = pytest.importorskip("torch")
    gen = torch.Generator(device="cuda").manual_seed(SEED)
    for m, n in ((4096, 4096), (777, 1500), (33, 4097)):
        x = torch.randn(m, n, device="cuda", generator=gen)
        y = torch.randn(n, m, device="cuda", generator=gen).T      # a column-major view
        out = torch.full((m, n), float("nan"), device="cuda")
        assert add_matrices(x, y, out, **config) is out
        assert torch.equal(out, x + y), (SEED, config, m, n)
        made = add_matrices(x, y, **config)                      # a new row-major out
        assert isinstance(made, torch.Tensor) and torch.equal(made, x + y)
        add_matrices(x, y, x, **config)                          # in place
        assert torch.equal(x, made)


def test_torch_side_stream():
    """The add runs on the caller's current stream: a result read on that stream after a
    long queue of work is complete."""
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    x = torch.randn(2048, 2048, device="cuda")
    y = torch.randn(2048, 2048, device="cuda")
    with torch.cuda.stream(side):
        side.wait_stream(torch.cuda.default_stream())
        out = torch.full_like(x, float("nan"))
        for _ in range(20):
            add_matrices(x, y, out, block=(16, 128), stages=4, threads=256)
        ok = torch.equal(out, x + y)
    assert ok


@pytest.mark.parametrize("config", CONFIGS[:1] + CONFIGS[4:5], ids=_id)
def test_exact_with_cupy_arrays(config):
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(SEED + 1)
    for shape in ((513, 1031), (2048, 64)):
        x, y = _host(rng, shape, "C"), _host(rng, shape, "F")
        out = cupy.full(shape, np.nan, np.float32)
        got = add_matrices(cupy.asarray(x), cupy.asarray(y), out, **config)
        assert got is out
        assert np.array_equal(cupy.asnumpy(out), x + y), (SEED, config, shape)


def test_more_blocks_than_the_gpu_holds_and_one_block():
    rng = np.random.default_rng(SEED + 2)
    x, y = _host(rng, (300, 700), "C"), _host(rng, (300, 700), "C")
    for num_blocks in (1, 5, 10_000):
        out = add_matrices(cuda.to_device(x), cuda.to_device(y), num_blocks=num_blocks,
                           block=(16, 128), stages=4, threads=256)
        assert np.array_equal(out.copy_to_host(), x + y), (SEED, num_blocks)
