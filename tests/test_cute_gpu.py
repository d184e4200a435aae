"""gemm.cute's kernels (tests/cute_kernels.py) on a GPU (marked ``gpu``): fresh random data,
outputs poisoned with NaN, against numpy."""

import os

import pytest

pytestmark = pytest.mark.gpu

from gpucase import require_gpu  # noqa: E402

require_gpu()

import cute_kernels  # noqa: E402

SEED = int.from_bytes(os.urandom(4), "little")


def test_transpose():
    err, odd_ok = cute_kernels.run_transpose(SEED)
    assert err == 0.0 and odd_ok, SEED


def test_small_gemm():
    assert cute_kernels.run_small_gemm(SEED) < 1e-4, SEED


def test_tiled_copy():
    assert cute_kernels.run_tiled_copy(SEED) == 0.0, SEED


@pytest.mark.parametrize("cp_async", [False, True])
@pytest.mark.parametrize("shape", [(256, 384, 64), (128, 128, 8)])
def test_moye_prefetch_seed_configuration(shape, cp_async):
    assert cute_kernels.run_moye_prefetch(SEED, *shape, cp_async=cp_async) < 1e-5, \
        (SEED, shape, cp_async)


@pytest.mark.parametrize("shape", [(256, 384, 64), (128, 128, 8)])
def test_moye_double_buffer_seed_configuration(shape):
    assert cute_kernels.run_moye_double_buffer(SEED, *shape) < 1e-5, (SEED, shape)


@pytest.mark.parametrize("shape", [(37, 21), (16, 8), (1, 1), (200, 9)])
def test_any_shape_copy(shape):
    assert cute_kernels.run_any_shape_copy(SEED, *shape) == (True, True), (SEED, shape)


@pytest.mark.parametrize("kind", ["tf32", "bf16", "f16"])
def test_mma_tile_on_the_tensor_cores(kind):
    tol = 2e-3 if kind == "tf32" else 1e-5         # tf32 rounds the operands: 2^-11 each
    assert cute_kernels.run_mma_tile(SEED, kind) < tol, (SEED, kind)


@pytest.mark.parametrize("kind", ["bf16", "f16"])
def test_ldmatrix_tile_on_the_tensor_cores(kind):
    assert cute_kernels.run_ldmatrix_tile(SEED, kind) < 1e-5, (SEED, kind)


@pytest.mark.parametrize("kind", ["bf16", "f16"])
@pytest.mark.parametrize("shape", [(300, 257, 136), (128, 128, 32), (1, 9, 8), (1024, 512, 2048)])
def test_sm80_gemm_written_with_cute(kind, shape):
    assert cute_kernels.run_sm80_gemm(SEED, *shape, kind) < 1e-4, (SEED, kind, shape)


def test_sm80_gemm_in_groups_of_tile_rows():
    assert cute_kernels.run_sm80_gemm(SEED, 700, 300, 64, "bf16", group_m=4) < 1e-4, SEED


@pytest.mark.parametrize("row_tile", [0, 1])
def test_swizzled_stores_land_as_in_python(row_tile):
    """A thread's pairs through its share of a swizzled shared tile: the known-offset form
    (the offset's one swizzle XOR each element's) and the run-time one agree with the
    Python twin."""
    got, want = cute_kernels.run_swizzled_stores(row_tile)
    assert (got == want).all()


def test_dynamic_range_loops_as_python_ranges():
    """Its uint32 counter: empty ranges, steps past the stop, sums that would wrap past
    2**32 (the loop ends there), against Python's range."""
    got, want = cute_kernels.run_ranges()
    assert (got == want).all(), (got, want)
