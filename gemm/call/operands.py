"""The caller's matrices, seen uniformly: device address, shape, strides in elements, dtype.

``matmul`` takes numba device arrays, CuPy arrays and torch tensors (anything with
``__cuda_array_interface__``), and in the CUDA simulator the simulator's device arrays. Host
arrays are refused with a TypeError. A matrix must have one unit stride: row-major,
column-major, or a transposed view of either; any other strided view is refused with a
ValueError (make it contiguous first, e.g. ``.contiguous()`` or ``cupy.ascontiguousarray``).

Where a caller allows it (``batched=True``), an operand may also be a batch of such matrices,
``(batch, rows, cols)`` with any batch stride (0 for a broadcast one, as ``torch.expand``
makes): the Operand then describes the first matrix and says how many there are and how far
apart (:func:`batch_count` checks that a call's batches agree).
"""

import numpy as np

from gemm._env import simulator_active

# numba, torch and CuPy are imported inside the functions that use them, for the arrays of
# each: a process needs only the libraries of the arrays it passes.

__all__ = ["Operand", "operand", "output_operand", "check_same_device", "check_spans",
           "new_like", "kernel_buffer", "current_stream", "batch_count", "product_operands",
           "bias_operand", "scale_operands", "MAX_GRID_YZ", "RAW16"]

MAX_GRID_YZ = 65535     # a launch's most blocks along y and z (batches are launched along z)
_TYPESTR = {"<f4": "float32", "<f2": "float16", "<f8": "float64", "|u1": "uint8",
            "|i1": "int8"}
# 16-bit integer arrays holding bfloat16/float16 bits (CuPy and numba name them by typestr)
RAW16 = ("uint16", "int16", "<u2", "<i2")


class Operand:
    """One matrix argument. ``obj`` is the caller's object; ``host`` the numpy array behind a
    simulator device array (None on a GPU). ``strides`` are in elements (one of them 1:
    ``unit_mode`` says which, 1 for row-major); ``span`` is the number of elements from the
    first to one past the last, the 1-D buffer a kernel is given (every matrix of a batch).
    A batch of ``batch`` matrices ``bstride`` elements apart (0 when ``batch`` is 1) is
    described by its first matrix; ``batched`` says whether the argument had a batch mode."""

    __slots__ = ("obj", "kind", "ptr", "shape", "strides", "dtype", "device", "host",
                 "unit_mode", "span", "batch", "bstride", "batched")

    def __init__(self, obj, kind, ptr, shape, strides, dtype, device, host=None, batch=None):
        self.obj, self.kind, self.ptr, self.shape, self.strides = obj, kind, ptr, shape, strides
        self.dtype, self.device, self.host = dtype, device, host
        self.unit_mode = 1 if strides[1] == 1 else 0
        self.batched = batch is not None
        self.batch, self.bstride = batch or (1, 0)
        self.span = (1 + (shape[0] - 1) * strides[0] + (shape[1] - 1) * strides[1]
                     + (self.batch - 1) * self.bstride)

    @property
    def dims(self):
        """The argument's shape: ``(batch, rows, cols)`` for a batch, else ``(rows, cols)``."""
        return (self.batch,) + self.shape if self.batched else self.shape

    @property
    def itemsize(self):
        return _ITEMSIZE.get(self.dtype, 2)


_ITEMSIZE = {"float32": 4, "float64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1, "uint8": 1,
             "int8": 1}


def _normal_strides(shape, strides, name):
    """Strides with one unit stride, choosing it for size-1 modes; ValueError if impossible."""
    (r, c), (sr, sc) = shape, strides
    if r == 0 or c == 0:            # nothing to address: nominally row-major
        return max(c, 1), 1
    if r == 1:
        sr = c if sc == 1 else 1
    if c == 1:
        sc = r if sr == 1 and r > 1 else 1
    if sc == 1 and sr >= c:
        return sr, sc
    if sr == 1 and sc >= r:
        return sr, sc
    raise ValueError(f"{name} of shape {shape} has element strides {strides}: one "
                     "stride must be 1 (row- or column-major, or a transposed view); make it "
                     "contiguous first")


def _from_cai(x, name):
    cai = x.__cuda_array_interface__
    typestr = cai["typestr"]
    dtype = _TYPESTR.get(typestr, typestr)
    isz = int(typestr[2:])
    shape = tuple(int(s) for s in cai["shape"])
    strides = cai.get("strides")
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1:])) * isz for i in range(len(shape)))
    if any(s % isz for s in strides):
        raise ValueError(f"{name} has byte strides {strides} that are not a multiple "
                         f"of its element size {isz}")
    return shape, tuple(s // isz for s in strides), dtype, cai["data"][0]


def _device_of(x, kind):
    if kind == "torch":
        if not x.is_cuda:
            raise TypeError(f"a torch tensor on {x.device} is not on the GPU; "
                            "move it with .cuda() first")
        return x.device.index
    if kind == "cupy":
        return x.device.id
    from numba import cuda
    return cuda.get_current_device().id


def operand(x, name, simulator=None, caller="matmul", allow_empty=False, batched=False):
    """Describe argument ``x``; errors name ``caller`` and the argument ``name``. A matrix
    with a zero extent is refused unless ``allow_empty`` (no kernel runs on it); a 3-D batch
    of matrices unless ``batched``."""
    try:
        return _describe(x, name, simulator, allow_empty, batched)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{caller}: {e}") from None


def _describe(x, name, simulator, allow_empty=False, batched=False):
    mod = type(x).__module__
    if mod.startswith("torch"):
        return _torch_operand(x, name, allow_empty, batched)
    kind = "cupy" if mod.startswith("cupy") else "numba"
    if simulator_active() if simulator is None else simulator:
        if hasattr(x, "copy_to_host"):
            host = x._ary if hasattr(x, "_ary") else np.asarray(x)
            isz = host.dtype.itemsize
            strides = tuple(s // isz for s in host.strides)
            return _matrix(x, "sim", host.__array_interface__["data"][0], host.shape, strides,
                           host.dtype.name, 0, name, allow_empty, batched, host)
    if isinstance(x, np.ndarray):
        raise TypeError(f"{name} is a numpy array on the host; pass a device array "
                        "(numba.cuda.to_device, cupy.asarray or a CUDA torch tensor)")
    if not hasattr(x, "__cuda_array_interface__"):
        raise TypeError(f"{name} is a {type(x).__name__}, not a CUDA array")
    shape, strides, dtype, ptr = _from_cai(x, name)
    return _matrix(x, kind, ptr, shape, strides, dtype, None, name, allow_empty, batched)


_torch_dtypes = {}


def torch_dtype_name(dtype):
    """The library's name of a torch dtype, numpy's: "float32" of ``torch.float32``."""
    name = _torch_dtypes.get(dtype)
    if name is None:
        name = _torch_dtypes[dtype] = str(dtype).removeprefix("torch.")
    return name


def _torch_operand(x, name, allow_empty=False, batched=False):
    """Read a tensor's fields directly (its ``__cuda_array_interface__`` is slow to build)."""
    device = x.get_device()
    if device < 0:
        _device_of(x, "torch")
    return _matrix(x, "torch", x.data_ptr(), tuple(x.shape), x.stride(),
                   torch_dtype_name(x.dtype), device, name, allow_empty, batched)


def _matrix(x, kind, ptr, shape, strides, dtype, device, name, allow_empty, batched,
            host=None):
    """The Operand of a 2-D matrix or, when ``batched``, of a 3-D batch of them."""
    shape = tuple(shape)
    if len(shape) != 2 and not (batched and len(shape) == 3):
        raise ValueError(f"{name} must be a 2-D matrix{' or a 3-D batch of them' * batched}, "
                         f"not of shape {shape}")
    if 0 in shape and not allow_empty:
        raise ValueError(f"{name} is empty (shape {shape}); every extent must be >= 1")
    batch = None
    if len(shape) == 3:
        batch = (shape[0], strides[0] if shape[0] > 1 else 0)
        if batch[1] < 0:
            raise ValueError(f"{name} has the batch stride {strides[0]}: it must be >= 0 "
                             "(a reversed batch is not supported; make it contiguous first)")
        shape, strides = shape[1:], strides[1:]
    if device is None:
        device = _device_of(x, kind)
    return Operand(x, kind, ptr, shape, _normal_strides(shape, strides, name), dtype, device,
                   host, batch)


def new_like(op, shape, dtype=None):
    """A new uninitialised row-major device matrix of the kind and device of ``op``, of
    ``dtype`` (a numpy dtype name; default: ``op``'s dtype)."""
    if op.kind == "torch":
        import torch
        kind = getattr(torch, dtype) if dtype else op.obj.dtype
        return torch.empty(shape, dtype=kind, device=op.obj.device)
    if op.kind == "cupy":
        import cupy
        with cupy.cuda.Device(op.device):
            return cupy.empty(shape, dtype=dtype or op.obj.dtype)
    from numba import cuda
    return cuda.device_array(shape, dtype=np.dtype(dtype or op.dtype))


def output_operand(caller, out, like, shape, simulator, dtype="float32", beta=0.0):
    """``(out, its Operand)`` for ``caller``'s output: ``out`` checked to have ``shape`` (2-D,
    or 3-D for a batch) and ``dtype``; when None, a new row-major array of ``like``'s kind and
    device (``beta`` must then be 0; bfloat16 as its bits in uint16 where the kind has no
    bfloat16: all but torch). The device is for :func:`check_same_device`."""
    shape = tuple(shape)
    bits16 = False
    if out is None:
        if beta != 0:
            raise ValueError(f"{caller}: beta != 0 needs an `out` to accumulate into")
        bits16 = dtype == "bfloat16" and like.kind != "torch"
        out = new_like(like, shape, "uint16" if bits16 else dtype)
    c = operand(out, "out", simulator, caller, batched=len(shape) == 3)
    if bits16:
        c.dtype = dtype
    got = (c.batch,) + c.shape if c.batched else c.shape
    if got != shape:
        raise ValueError(f"{caller}: out has shape {got}, expected {shape}")
    if c.dtype != dtype:
        raise TypeError(f"{caller}: out has dtype {c.dtype}; supported: {dtype}")
    return out, c


def product_operands(caller, A, B, simulator=None, allow_empty=False):
    """``(a, b, out_shape)`` for ``A @ B``: their Operands (each a matrix or a batch of them)
    and the shape of the product, ``(batch, M, N)`` when either is a batch, else ``(M, N)``.
    ValueError when the inner dimensions or the batches disagree (:func:`batch_count`)."""
    a = operand(A, "A", simulator, caller, allow_empty, batched=True)
    b = operand(B, "B", simulator, caller, allow_empty, batched=True)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{caller}: inner dimensions differ: A is {a.dims}, B is {b.dims}")
    nb = batch_count(caller, a, b)
    return a, b, (nb,) * (a.batched or b.batched) + (a.shape[0], b.shape[1])


def batch_count(caller, a, b, out=None):
    """The number of products a call computes: A's and B's batches agree, or one of them is a
    single matrix (2-D, or a batch of 1) used for every product, as ``torch.matmul``
    broadcasts. ``out`` (an Operand), when given, must be a batch of that many matrices (a
    matrix when neither A nor B is batched) whose elements do not overlap. ValueError
    otherwise."""
    nb = max(a.batch, b.batch)
    if min(a.batch, b.batch) not in (1, nb):
        raise ValueError(f"{caller}: A has a batch of {a.batch} matrices and B of {b.batch}; "
                         "they must agree, or one of them be a single matrix")
    if out is not None:
        if out.batched != (a.batched or b.batched) or out.batch != nb:
            want = f"a batch of {nb} matrices" if a.batched or b.batched else "a 2-D matrix"
            got = (f"a batch of {out.batch} matrices" if out.batched else "a 2-D matrix")
            raise ValueError(f"{caller}: out must be {want}, got {got}")
        if nb > 1:
            modes = sorted(((out.bstride, nb),) + tuple(zip(out.strides, out.shape)))
            reach = 1               # elements the smaller-stride modes span
            for stride, extent in modes:
                if extent == 1:
                    continue
                if stride < reach:
                    raise ValueError(f"{caller}: out's matrices overlap (batch stride "
                                     f"{out.bstride}, strides {out.strides}); each output "
                                     "element must have its own place")
                reach += stride * (extent - 1)
    return nb


def check_same_device(caller, named):
    """ValueError unless every operand of ``named`` ((name, Operand) pairs) is on the device of
    the first."""
    (first, op0), *rest = named
    for name, op in rest:
        if op.device != op0.device:
            raise ValueError(f"{caller}: {name} is on device {op.device} and {first} on device "
                             f"{op0.device}")


def check_spans(caller, named, limit=2 ** 32):
    """ValueError if an operand of ``named`` spans ``limit`` elements or more (the kernels
    index with 32-bit unsigned offsets)."""
    for name, op in named:
        if op.span >= limit:
            raise ValueError(f"{caller}: {name} spans {op.span} elements; the kernel indexes "
                             f"with 32 bits (at most {limit - 1})")


_BIAS_DTYPES = ("float32", "bfloat16", "float16")


def bias_operand(x, m, n, caller, simulator=None, bits16=None):
    """``(Operand, per_row)`` of a bias vector for an (m, n) out, described as a 1 x L or
    L x 1 matrix: shape (n,) or (1, n) holds one value per column, (m, 1) one per row, its
    elements contiguous; dtype float32, bfloat16 or float16 (16-bit integers hold ``bits16``
    bits, the operands' 16-bit type, where given). TypeError or ValueError naming
    ``caller`` otherwise."""
    shape = tuple(getattr(x, "shape", ()))
    if len(shape) == 1 and hasattr(x, "reshape"):
        if shape[0] > 1 and _element_step(x) != 1:     # (a reshape would copy it)
            raise ValueError(f"{caller}: bias must be contiguous (its stride is "
                             f"{_element_step(x)} elements)")
        x = x.reshape(1, shape[0])
    elif len(shape) != 2:
        raise ValueError(f"{caller}: bias must be a vector of shape ({n},), (1, {n}) or "
                         f"({m}, 1), not of shape {shape}")
    op = operand(x, "bias", simulator, caller)
    per_row = op.shape == (m, 1) and op.shape != (1, n)
    if op.shape != (1, n) and not per_row:
        raise ValueError(f"{caller}: bias of shape {shape} fits neither out's columns (({n},) "
                         f"or (1, {n})) nor its rows (({m}, 1))")
    if op.span != max(op.shape):
        raise ValueError(f"{caller}: bias must be contiguous (its strides are "
                         f"{op.strides} elements)")
    if op.dtype in RAW16 and bits16 is not None:
        op.dtype = bits16
    if op.dtype not in _BIAS_DTYPES:
        raise TypeError(f"{caller}: bias must be float32, bfloat16 or float16, not "
                        f"{op.dtype}")
    return op, per_row


def scale_operands(scale_a, scale_b, m, n, k, block, caller, simulator=None):
    """``(mode, Operand of scale_a, Operand of scale_b)`` of an FP8 product's float32 scales
    for an (m, n) out of (m, k) and (k, n) operands: one value each ("tensor"; any shape of
    one element); one per row of A, shape (m, 1), and per column of B, (1, n) ("rows"); or
    one per ``block`` elements of a row of A, (m, kb), and per ``block`` x ``block`` block of
    B, (nb, kb), with kb = ceil(k / block) and nb = ceil(n / block) ("blocks", DeepSeek-V3's:
    A's row- or column-major, B's row-major). TypeError or ValueError naming ``caller``
    otherwise."""
    kb, nb = -(-k // block), -(-n // block)
    ops = []
    for name, x, want in (("scale_a", scale_a, (m, 1)), ("scale_b", scale_b, (1, n))):
        shape = tuple(getattr(x, "shape", ()))
        if len(shape) < 2 and hasattr(x, "reshape") and int(np.prod(shape)) == 1:
            x = x.reshape(1, 1)
        elif len(shape) != 2:
            raise ValueError(f"{caller}: {name} must be one float32 value or of shape {want}, "
                             f"not of shape {shape}")
        op = operand(x, name, simulator, caller)
        if op.dtype != "float32":
            raise TypeError(f"{caller}: {name} must be float32, not {op.dtype}")
        ops.append(op)
    shapes = (ops[0].shape, ops[1].shape)
    if shapes == ((1, 1), (1, 1)):
        mode = "tensor"
    elif shapes == ((m, 1), (1, n)):
        mode = "rows"
    elif shapes == ((m, kb), (nb, kb)):
        mode = "blocks"
    else:
        raise ValueError(f"{caller}: scale_a and scale_b must both be one value (per tensor), "
                         f"of shapes ({m}, 1) and (1, {n}) (per row of A and column of B), or "
                         f"({m}, {kb}) and ({nb}, {kb}) (per 1 x {block} block of A and "
                         f"{block} x {block} block of B); got {shapes[0]} and {shapes[1]}")
    for name, op, majors in (("scale_a", ops[0], "row- or column-major"),
                             ("scale_b", ops[1], "row-major")):
        if op.span != op.shape[0] * op.shape[1] or (name == "scale_b" and op.shape[1] > 1
                                                    and op.unit_mode != 1):
            raise ValueError(f"{caller}: {name} must be contiguous, {majors} (its strides are "
                             f"{op.strides} elements)")
    return (mode, *ops)


def _element_step(x):
    """The element stride of a 1-D array (torch's, or any with byte ``strides``)."""
    if type(x).__module__.startswith("torch"):
        return x.stride()[0]
    return x.strides[0] // x.dtype.itemsize


def kernel_buffer(op, dtype=None):
    """The kernel's view of an operand: (device address, elements), or in the simulator a 1-D
    numpy view of the host array (reinterpreted as ``dtype`` if given)."""
    if op.kind == "sim":
        view = np.lib.stride_tricks.as_strided(op.host, (op.span,), (op.itemsize,))
        return view.view(dtype) if dtype else view
    return op.ptr, op.span


def stream_handle(stream, op, caller="matmul"):
    """The raw CUDA stream handle to launch on: ``stream`` (a torch.cuda.Stream, a CuPy
    stream, a numba stream, or a raw handle as an int), or when None the caller's current
    stream for the operand's kind (:func:`current_stream`)."""
    if stream is None:
        return current_stream(op)
    check_stream(stream, caller)
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):             # torch, CuPy
        handle = getattr(stream, attr, None)
        if isinstance(handle, int):
            return handle
    handle = stream.handle                           # numba: a CUstream or a c_void_p
    return int(getattr(handle, "value", handle) or 0)


def check_stream(stream, caller="matmul"):
    """TypeError unless ``stream`` is None, a non-negative int, or a stream object (torch's
    ``cuda_stream``, CuPy's ``ptr``, numba's ``handle``)."""
    if stream is None or (isinstance(stream, int) and not isinstance(stream, bool)
                          and stream >= 0):
        return
    if isinstance(getattr(stream, "cuda_stream", None), int) or isinstance(
            getattr(stream, "ptr", None), int):
        return
    if type(stream).__module__.startswith("numba"):  # numba's (and the simulator's) streams
        return
    raise TypeError(f"{caller}: stream must be a torch, CuPy or numba stream or a raw handle "
                    f"(a non-negative int), not {stream!r}")


def torch_stream(device):
    """The handle of torch's current stream on ``device``."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw else torch.cuda.current_stream(device).cuda_stream


def current_stream(op):
    """The handle of the caller's current stream on the operand's device: torch's or CuPy's
    current stream, numba's default stream (0) otherwise."""
    if op.kind == "torch":
        return torch_stream(op.device)
    if op.kind == "cupy":
        import cupy
        return cupy.cuda.get_current_stream().ptr
    return 0
