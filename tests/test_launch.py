"""The parameter block of gemm.call.launch matches numba's kernel ABI, without a GPU.

numba passes a 1-D array argument as seven parameters (meminfo, parent, nitems, itemsize,
data, shape[0], strides[0], each 8 bytes) and a uint32/float32 scalar as 4 bytes, each at its
own alignment; the launch hands the driver one buffer of them (``extra``:
CU_LAUNCH_PARAM_BUFFER_POINTER, the buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, its size, END),
through cuLaunchKernelEx (a launch config) or cuLaunchKernel. The arguments are read back
here as the driver would read them.
"""

import ctypes
import struct

import pytest

from gemm.call import launch
from gemm.call.launch import BoundLaunch, Launcher

SCALARS = ("uint32", "uint32", "int32", "float32", "float32")
SIZES = [8] * 14 + [4] * 5


def _launcher(record, by_config=True):
    launcher = Launcher(kernel=None, n_arrays=2, itemsize=4, scalar_types=SCALARS)
    launcher._funcs[0] = 0xF00D      # the function of a compiled kernel in context 0 (none here)
    # Like the driver, read the parameters during the call.
    launcher._launch = lambda *args: record.append(_arguments(args)) or 0
    launcher._describe, launcher._by_config = None, by_config
    return launcher


def _arguments(args):
    """The launch's function, grid, block, shared bytes, stream, kernelParams and extra as
    the driver reads them, and the parameter bytes: from cuLaunchKernelEx's four arguments
    (a launch config without attributes, the function, kernelParams, extra) or
    cuLaunchKernel's eleven (the function, grid, block, shared bytes, stream, kernelParams,
    extra)."""
    if len(args) == 4:
        config = args[0]._obj           # (what ctypes.byref points to)
        assert isinstance(config, launch.LaunchConfig)
        assert (config.attrs, config.num_attrs) == (None, 0)
        head = (args[1].value, *(getattr(config, name) for name, _ in config._fields_[:7]),
                config.stream)
        pointers, extra = args[2], args[3]
    else:
        assert len(args) == 11
        assert all(isinstance(a, (ctypes.c_void_p, ctypes.c_uint)) for a in args[:9])
        head, pointers, extra = tuple(a.value for a in args[:9]), args[9], args[10]
    extra = (ctypes.c_void_p * 5).from_address(extra.value)
    return (*head, pointers, extra, _parameters(extra))


def _parameters(extra):
    """The bytes the driver would read from a launch's ``extra`` list."""
    assert (extra[0], extra[2], extra[4]) == (1, 2, None)
    size = ctypes.c_size_t.from_address(extra[3]).value
    assert size == sum(SIZES)
    return ctypes.string_at(extra[1], size)


@pytest.mark.parametrize("by_config", [True, False])
def test_bound_launch_passes_numba_abi_parameters(by_config):
    """Every call's addresses, stream and free scalars reach the driver, through either
    entry point; a stream met again and scalars not given keep what the earlier calls
    set."""
    record = []
    launcher = _launcher(record, by_config)
    launcher.free_scalars = 2
    bound = BoundLaunch(launcher, 0xF00D, (3, 2, 1), (256, 1, 1), [100, 7],
                        (5, 6, -7, 1.5, 0.0), shared_bytes=1024)
    calls = [((4096, 8192), 11, (), (1.5, 0.0)), ((64, 128), 12, (-2.0, 0.25), (-2.0, 0.25)),
             ((64, 8), 11, (), (-2.0, 0.25)), ((64, 8), 12, (-2.0, 0.25), (-2.0, 0.25)),
             ((1, 2), 11, (1.5, 0.0), (1.5, 0.0))]
    for addresses, stream, last, (alpha, beta) in calls:
        bound(addresses, stream, *last)
        *fixed, got_stream, pointers, _, parameters = record[-1]
        assert fixed == [0xF00D, 3, 2, 1, 256, 1, 1, 1024]
        assert (got_stream, pointers) == (stream, None)
        assert parameters == struct.pack("<7q7qIIiff", 0, 0, 100, 4, addresses[0], 100, 4,
                                         0, 0, 7, 4, addresses[1], 7, 4, 5, 6, -7, alpha, beta)


def test_bound_launch_refuses_wrong_counts():
    """One address per array, and the free scalars all or none: anything else is an error,
    not a launch with a stale address or scalar."""
    record = []
    launcher = _launcher(record)
    launcher.free_scalars = 2
    bound = BoundLaunch(launcher, 0xF00D, (1, 1, 1), (1, 1, 1), [1, 1], (1, 2, 3, 0.5, 2.0), 0)
    for addresses in ((1,), (1, 2, 3)):
        with pytest.raises(ValueError):
            bound(addresses, 0)
    with pytest.raises(ValueError, match="expected 2 free scalars or none, got 1"):
        bound((1, 2), 0, 3.0)
    assert not record


def test_launcher_keeps_one_bound_launch_per_shape(monkeypatch):
    """Calls of one launch shape reuse one parameter block, and only the free scalars (here
    the last two) may differ without a new one; every call's parameters reach the driver."""
    monkeypatch.setattr(launch, "current_context", lambda: 0)      # context 0, as on a CPU
    record = []
    launcher = _launcher(record)
    launcher.free_scalars = 2
    calls = [((640, 1280), (1, 2, 3, 0.5, 2.0)), ((64, 128), (1, 2, 3, -1.0, 0.0)),
             ((64, 128), (1, 2, 4, -1.0, 0.0))]
    bounds = [launcher((1, 1, 1), (32, 1, 1), 5, [(p, n) for p, n in zip(ptrs, (9, 3))],
                       scalars) for ptrs, scalars in calls]
    assert bounds[0] is bounds[1] and bounds[2] is not bounds[0]
    for (ptrs, scalars), got in zip(calls, record):
        assert got[-1] == struct.pack("<7q7qIIiff", 0, 0, 9, 4, ptrs[0], 9, 4,
                                      0, 0, 3, 4, ptrs[1], 3, 4, *scalars)


def test_wrong_argument_counts_are_refused():
    with pytest.raises(ValueError, match="expected 2 arrays and 5 scalars"):
        BoundLaunch(_launcher([]), 0xF00D, (1, 1, 1), (1, 1, 1), [1], (1, 2, 3, 0.5, 2.0), 0)


def test_driver_error_is_reported():
    launcher = _launcher([], by_config=False)
    launcher._launch = lambda *args: 1

    def describe(err, out):
        ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = b"CUDA_ERROR_INVALID_VALUE"
    launcher._describe = describe
    bound = BoundLaunch(launcher, 0xF00D, (1, 1, 1), (1, 1, 1), [1, 1], (1, 2, 3, 0.5, 2.0), 0)
    with pytest.raises(RuntimeError, match="cuLaunchKernel failed .1.: b'CUDA_ERROR_INVALID"):
        bound((0, 0), 0)


class _FakeBinary:
    """A compiled kernel's stand-in: records the dynamic shared memory it is allowed."""

    def __init__(self, variant):
        self.variant, self.allowed = variant, []

    def allow_dynamic_shared(self, nbytes):
        self.allowed.append(nbytes)


@pytest.mark.parametrize("sim", [False, True])
def test_kept_launcher_makes_one_launcher_per_variant(monkeypatch, sim):
    """kept_launcher (the SM80 and SM90 families' launchers): one Launcher per variant, of
    the compiled binary on a GPU (allowed its dynamic shared memory once, none for 0) and of
    the cuda.jit kernel in the simulator."""
    monkeypatch.setattr(launch, "simulator_active", lambda: sim)
    made = []

    def binary(v):
        made.append(_FakeBinary(v))
        return made[-1]

    def kernel(v):
        return f"cuda.jit kernel of {v}"
    kept = {}
    first, again = (launch.kept_launcher(kept, "v1", kernel, binary, 100_000, 2, 4, SCALARS,
                                         free_scalars=2) for _ in range(2))
    other = launch.kept_launcher(kept, "v2", kernel, binary, 0, 2, 4, SCALARS)
    assert first is again and other is not first and list(kept) == ["v1", "v2"]
    assert (first.n_arrays, first.scalar_types, first.free_scalars) == (2, SCALARS, 2)
    if sim:
        assert not made and first.kernel == "cuda.jit kernel of v1"
    else:
        assert [b.variant for b in made] == ["v1", "v2"] and first.kernel is made[0]
        assert [b.allowed for b in made] == [[100_000], []]
