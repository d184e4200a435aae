"""A CPU executor for tiled copies and MMAs, and a GEMM built only from the layer.

``run_copy(tiled_copy, src, dst)`` and ``run_mma(tiled_mma, A, B, C)`` execute what every
thread of a block would do: each operand is either a tile tensor (partitioned per thread by
``partition_S/D`` or ``partition_A/B/C``, exactly as a kernel does) or a
:class:`RegisterFile` (every thread's register fragment, seen through ``retile_S/D`` by
copies). Each atom runs with its own semantics: a copy atom moves the bits its source layout
gives into the positions of its destination layout (so ldmatrix shuffles rows between the 32
threads of a warp), an MMA atom assembles its A, B, C tiles from the fragments of its threads
through ``layout_A/B/C`` and computes ``A @ B^T + C`` in its types. Threads are vectorized
with numpy.

``cpu_gemm`` is a GEMM written like a kernel: ``local_tile`` of the block's tiles, tiled
copies global -> shared (predicated through identity tensors for partial tiles, zero-filled
like cp.async) and shared -> registers, the tiled MMA, and a predicated tiled copy of C.

>>> import numpy as np
>>> A = np.arange(30 * 20).reshape(30, 20) % 7
>>> B = np.arange(25 * 20).reshape(25, 20) % 5
>>> C = cpu_gemm(A, B, moye_config("prefetch", dtype=np.int64, tile=(16, 16, 8),
...                                copy_threads=(8, 8), mma_threads=(8, 8)))
>>> bool((C == A @ B.T).all())
True
"""

from dataclasses import dataclass

import numpy as np

from .atom import (
    SM75_U16x4_LDSM_T, SM75_U16x8_LDSM_T, SM75_U32x2_LDSM_N, SM75_U32x4_LDSM_N,
    SM80_CP_ASYNC_CACHEALWAYS, SM80_CP_ASYNC_CACHEGLOBAL, UniversalCopy, UniversalFMA,
    encode, type_bits,
)
from .atom.mma import MMAAtom
from .errors import LayoutError, LayoutIndexError
from .int_tuple import _crd2idx, check_int_tuple, is_int
from .layout import Layout, _as_layout, _modes, slice_and_offset
from .tensor import ArrayEngine, Tensor, elem_less, layout_offsets, local_tile, make_identity_tensor, \
    make_tensor, _flat_index
from .tiled import (
    TiledCopy, TiledMMA, make_tiled_copy, make_tiled_copy_A, make_tiled_copy_B,
    make_tiled_copy_C, make_tiled_mma, max_vector_bits,
)

__all__ = ["RegisterFile", "run_copy", "run_mma", "predicate", "GemmConfig", "moye_config",
           "sm80_config", "cpu_gemm"]


_MAX_REGISTERS = 1 << 32      # all threads' registers together; more is a mistake


class RegisterFile:
    """The same register tensor in every thread: ``data[t]`` is thread t's storage, indexed
    by ``layout`` from ``offset``. ``rf[crd]`` with None slices every thread's tensor alike;
    ``rf.thread(t)`` is thread t's :class:`Tensor` (a view)."""

    def __init__(self, layout, nthreads, dtype, data=None, offset=0):
        layout = _as_layout(layout, "RegisterFile", shapes=False)
        for name, v in (("nthreads", nthreads), ("offset", offset)):
            if not is_int(v):
                raise TypeError(f"RegisterFile: {name} must be an int, not {v!r}")
        if nthreads <= 0 or offset < 0:
            raise LayoutError(f"RegisterFile: {nthreads} threads at offset {offset}: the "
                              f"threads must be positive and the offset >= 0")
        if data is None:
            cosize = layout.cosize
            if not is_int(cosize):
                raise LayoutError(f"RegisterFile: {layout} needs integer strides")
            if nthreads * cosize > _MAX_REGISTERS:
                raise LayoutError(f"RegisterFile: {nthreads} threads of {cosize} registers are "
                                  f"more than the {_MAX_REGISTERS} registers it holds here")
            data = np.zeros((nthreads, cosize), dtype)
        elif not (isinstance(data, np.ndarray) and data.ndim == 2 and data.shape[0] == nthreads):
            raise ValueError(f"RegisterFile: data must be a 2-D numpy array with a row for each "
                             f"of the {nthreads} threads, not {data!r}")
        self.layout, self.offset = layout, offset
        self.data = data

    @classmethod
    def like(cls, fragment, nthreads):
        """Registers shaped like one thread's fragment (e.g. ``partition_fragment_C``)."""
        return cls(fragment.layout, nthreads, fragment.dtype)

    @property
    def nthreads(self):
        return self.data.shape[0]

    shape = property(lambda self: self.layout.shape)

    def thread(self, t):
        return Tensor(ArrayEngine(self.data[t], self.offset), self.layout)

    def __getitem__(self, crd):
        sub, off = slice_and_offset(crd, self.layout)
        return RegisterFile(sub, self.nthreads, None, self.data, self.offset + off)

    def fill(self, value):
        idx = self.offset + layout_offsets(self.layout)
        self.data[:, idx] = value

    def _flat(self):
        """(storage, indices[thread, element]) of all threads' elements."""
        idx = self.offset + layout_offsets(self.layout)
        cols = self.data.shape[1]
        return self.data.reshape(-1), np.arange(self.nthreads)[:, None] * cols + idx[None, :]


# --- operands: (storage, indices[thread, element], per-thread layout) ---------------------
_PART_CACHE = {}


def _thread_parts(tiled, method, tensor, check=True):
    """``tiled.get_slice(t).method(tensor)`` for every thread t: the shared per-thread layout
    and each thread's storage indices. The partitions are computed once per tensor layout on
    a zero engine (offset bookkeeping only), then thread 0's is redone on the real tensor so
    that its base offset is checked too. ``check=False`` skips the vector checks (for
    predicate tensors, which are not what the atom reads)."""
    key = (id(tiled), method, tensor.layout, check)
    hit = _PART_CACHE.get(key)
    if hit is None or hit[0] is not tiled:
        probe = Tensor(0, tensor.layout)
        parts = [_call(tiled.get_slice(t), method, probe, check) for t in range(tiled.size)]
        L = parts[0].layout
        if any(p.layout != L for p in parts):
            raise LayoutError(f"{method}: threads got different partition layouts")
        hit = (tiled, L, np.array([p.engine for p in parts], dtype=np.int64))
        _PART_CACHE[key] = hit
    _, L, offs = hit
    _call(tiled.get_slice(0), method, tensor, check)   # the real tensor's checks (alignment)
    storage, idx = _flat_index(tensor.engine, offs[:, None] + layout_offsets(L)[None, :])
    return storage, idx, L


def _call(thr, method, tensor, check):
    if check:
        return getattr(thr, method)(tensor)
    return thr._partition(tensor, method[-1], check=False)


def _copy_operand(tiled, x, side):
    if isinstance(x, RegisterFile):
        view = getattr(tiled.get_slice(0), f"retile_{side}")(x.thread(0))   # with checks
        cols = x.data.shape[1]
        idx = np.arange(x.nthreads)[:, None] * cols + x.offset + layout_offsets(view.layout)[None, :]
        return x.data.reshape(-1), idx, view.layout
    if not isinstance(x, Tensor) or not x.is_numeric:
        raise TypeError(f"run_copy: operands are numpy tensors or RegisterFiles, not {x!r}")
    return _thread_parts(tiled, f"partition_{side}", x)


def _check_bounds(storage, idx, mask, what):
    bad = (idx < 0) | (idx >= storage.size)
    if mask is not None:
        bad &= mask
    if bad.any():
        t = int(np.argwhere(bad)[0][0])
        raise LayoutIndexError(f"{what}: thread {t} accesses an element outside the data "
                               f"(an out-of-bounds coordinate that needs a predicate)")


def run_copy(tiled_copy, src, dst, pred=None, zfill=False):
    """Execute ``tiled_copy`` for every thread: ``dst <- src``.

    ``src``/``dst``: tile tensors (numpy engines; partitioned by ``partition_S``/``_D``) or
    RegisterFiles (viewed by ``retile_S``/``_D``). ``pred``: optional tensor of booleans
    shaped like the tile operand (``src`` if it is a tensor, else ``dst``) and partitioned
    like it; an instruction whose values are all False is skipped (``zfill``: its destination
    values are set to 0, cp.async's zero-fill), and one instruction's values must agree.
    """
    if not isinstance(tiled_copy, TiledCopy):
        raise TypeError(f"run_copy: expected a TiledCopy, not {tiled_copy!r}")
    atom = tiled_copy.atom
    s_store, s_idx, _ = _copy_operand(tiled_copy, src, "S")
    d_store, d_idx, _ = _copy_operand(tiled_copy, dst, "D")
    for store, x in ((s_store, src), (d_store, dst)):
        if store.itemsize * 8 != atom.value_bits and store.dtype != np.bool_:
            raise ValueError(f"run_copy: {atom.name} moves {atom.value_bits}-bit values but an "
                             f"operand holds {store.dtype} ({store.itemsize * 8} bits)")
    T, NA = tiled_copy.size, atom.num_threads
    nvs, nvd = atom.num_values_src, atom.num_values_dst
    J = s_idx.shape[1] // nvs
    if s_idx.shape[1] % nvs or d_idx.shape[1] % nvd or d_idx.shape[1] // nvd != J:
        raise LayoutError(f"run_copy: source ({s_idx.shape[1]} values per thread) and "
                          f"destination ({d_idx.shape[1]}) do not make the same number of "
                          f"{atom.name} instructions")
    R = T // NA
    S = s_idx.reshape(R, NA, J, nvs)
    D = d_idx.reshape(R, NA, J, nvd)
    mask = None
    if pred is not None:
        tile_side, side = (src, "S") if isinstance(src, Tensor) else (dst, "D")
        p_store, p_idx, _ = _thread_parts(tiled_copy, f"partition_{side}", pred, check=False)
        n = nvs if side == "S" else nvd
        pv = p_store[p_idx].astype(bool).reshape(R, NA, J, n)
        inst = pv.all(axis=3)
        if (inst != pv.any(axis=3)).any() or (NA > 1 and (inst != inst[:, :1]).any()):
            raise LayoutError("run_copy: a predicate differs within one instruction; predicate "
                              "whole vectors (use a narrower atom)")
        mask = inst[:, :, :, None]
    ms = None if mask is None else np.broadcast_to(mask, S.shape)
    md = None if mask is None else np.broadcast_to(mask, D.shape)
    _check_bounds(s_store, S, ms, "run_copy source")
    _check_bounds(d_store, D, None if zfill else md, "run_copy destination")
    pos_s = _positions(atom.layout_src_values, NA, nvs)
    pos_d = _positions(atom.layout_dst_values, NA, nvd)
    if not set(pos_d.ravel()) <= set(pos_s.ravel()):
        raise LayoutError(f"{atom.name}: its destination reads bits no source thread writes")
    nbuf = int(max(pos_s.max(), pos_d.max())) + 1
    S_safe = np.where(ms, S, 0) if ms is not None else S
    vals = s_store[S_safe].transpose(0, 2, 1, 3)                       # (R, J, NA, nvs)
    _check_duplicates(S.transpose(0, 2, 1, 3), pos_s, atom)
    buf = np.zeros((R, J, nbuf), dtype=s_store.dtype)
    buf[:, :, pos_s] = vals
    out = buf[:, :, pos_d].transpose(0, 2, 1, 3)                       # (R, NA, J, nvd)
    if md is None:
        d_store[D] = out
    elif zfill:
        d_store[D] = np.where(md, out, np.zeros((), d_store.dtype))
    else:
        d_store[D[md]] = out[md]


def _positions(layout_values, nthr, nval):
    return np.array([[layout_values(a, v) for v in range(nval)] for a in range(nthr)],
                    dtype=np.int64)


def _check_duplicates(S, pos, atom):
    """Source positions shared by several (thread, value) must read the same element."""
    flat_pos = pos.ravel()
    if len(set(flat_pos)) == flat_pos.size:
        return
    s = S.reshape(S.shape[0], S.shape[1], -1)
    order = np.argsort(flat_pos, kind="stable")
    sp = flat_pos[order]
    same = sp[1:] == sp[:-1]
    a, b = order[:-1][same], order[1:][same]
    if (s[:, :, a] != s[:, :, b]).any():
        raise LayoutError(f"{atom.name}: threads that supply the same source row read "
                          f"different elements")


# --- MMA ----------------------------------------------------------------------------------
def _mma_operand(tiled, x, which):
    if isinstance(x, RegisterFile):
        storage, idx = x._flat()
        return storage, idx, x.layout
    if not isinstance(x, Tensor) or not x.is_numeric:
        raise TypeError(f"run_mma: operands are numpy tensors or RegisterFiles, not {x!r}")
    return _thread_parts(tiled, f"partition_{which}", x)


def _mode_sizes(L, n, what):
    sizes = [m.size for m in _modes(L)]
    if len(sizes) != n:
        raise LayoutError(f"run_mma: the per-thread {what} has shape {L.shape}; expected "
                          f"{n} modes (slice extra modes such as the k-tile first)")
    return sizes


def run_mma(tiled_mma, A, B, C):
    """Execute ``tiled_mma`` for every thread: ``C <- A @ B^T + C`` (A is (M, K), B (N, K)).

    Each operand is a tile tensor (partitioned by ``partition_A/B/C``) or a RegisterFile of
    fragments shaped ``(MMA, MMA_M, MMA_K)`` etc. The k-blocks are applied in order, each
    atom instance computing from its own threads' fragments with the atom's types.
    """
    if not isinstance(tiled_mma, TiledMMA):
        raise TypeError(f"run_mma: expected a TiledMMA, not {tiled_mma!r}")
    atom = tiled_mma.atom
    Mt, Nt, Kt = atom.shape_mnk
    a_s, a_i, aL = _mma_operand(tiled_mma, A, "A")
    b_s, b_i, bL = _mma_operand(tiled_mma, B, "B")
    c_s, c_i, cL = _mma_operand(tiled_mma, C, "C")
    VA, RM, RK = _mode_sizes(aL, 3, "A")
    VB, RN, RK2 = _mode_sizes(bL, 3, "B")
    VC, RM2, RN2 = _mode_sizes(cL, 3, "C")
    if (VA, VB, VC) != (atom.layout_A[1].size, atom.layout_B[1].size, atom.layout_C[1].size):
        raise LayoutError(f"run_mma: fragments hold {(VA, VB, VC)} values per atom; "
                          f"{atom.name} needs {atom.layout_A[1].size, atom.layout_B[1].size, atom.layout_C[1].size}")
    if RK != RK2 or RM != RM2 or RN != RN2:
        raise LayoutError(f"run_mma: partitions disagree: A {aL.shape}, B {bL.shape}, C {cL.shape}")
    for s, i, w in ((a_s, a_i, "A"), (b_s, b_i, "B"), (c_s, c_i, "C")):
        _check_bounds(s, i, None, f"run_mma {w}")
    thr_of, AM, AN = _thread_grid(tiled_mma)
    NA = atom.num_threads
    FA = a_s[a_i].reshape(-1, RK, RM, VA)[thr_of]                     # (AM,AN,NA,RK,RM,VA)
    FB = b_s[b_i].reshape(-1, RK, RN, VB)[thr_of]
    FC = c_s[c_i].reshape(-1, RN, RM, VC)[thr_of]
    pa, pb, pc = (_positions(L, NA, n) for L, n in ((atom.layout_A, VA), (atom.layout_B, VB),
                                                     (atom.layout_C, VC)))
    At = np.zeros((AM, AN, RM, RK, Mt * Kt), dtype=FA.dtype)
    At[..., pa] = FA.transpose(0, 1, 4, 3, 2, 5)
    At = At.reshape(AM, AN, RM, RK, Kt, Mt).swapaxes(-1, -2)
    Bt = np.zeros((AM, AN, RN, RK, Nt * Kt), dtype=FB.dtype)
    Bt[..., pb] = FB.transpose(0, 1, 4, 3, 2, 5)
    Bt = Bt.reshape(AM, AN, RN, RK, Kt, Nt).swapaxes(-1, -2)
    Ct = np.zeros((AM, AN, RM, RN, Mt * Nt), dtype=FC.dtype)
    Ct[..., pc] = FC.transpose(0, 1, 4, 3, 2, 5)
    D = Ct.reshape(AM, AN, RM, RN, Nt, Mt).swapaxes(-1, -2)
    for k in range(RK):
        D = atom.compute(At[:, :, :, None, k], Bt[:, :, None, :, k], D)
    Dflat = D.swapaxes(-1, -2).reshape(AM, AN, RM, RN, Mt * Nt)[..., pc]  # (AM,AN,RM,RN,NA,VC)
    FCn = Dflat.transpose(0, 1, 4, 3, 2, 5)                              # (AM,AN,NA,RN,RM,VC)
    out = np.empty((tiled_mma.size, RN, RM, VC), dtype=c_s.dtype)
    out[thr_of] = FCn
    c_s[c_i] = out.reshape(tiled_mma.size, -1)


def _thread_grid(tiled_mma):
    """thr_of[am, an, v]: the thread index of atom thread v of the atom at (am, an)."""
    L = tiled_mma.thr_layout_vmnk
    NA, AM, AN = (L[i].size for i in range(3))
    thr_of = np.full((AM, AN, NA), -1, dtype=np.int64)
    for t in range(tiled_mma.size):
        v, m, n, k = tiled_mma.thr_coord(t)
        v, m, n = (_crd2idx(c, L[i].shape) for i, c in enumerate((v, m, n)))
        thr_of[m, n, v] = t
    if (thr_of < 0).any():
        raise LayoutError(f"thread layout {L} does not give every atom its threads")
    return thr_of, AM, AN


def predicate(coords, bounds):
    """A boolean tensor, shaped like ``coords`` (an identity tensor or its tile), that is True
    where the coordinate is inside ``bounds`` (elementwise ``<``; CuTe's elem_less).

    >>> p = predicate(local_tile(make_identity_tensor((5, 3)), (4, 2), (1, 1)), (5, 3))
    >>> p.values().astype(int).tolist()
    [1, 0, 0, 0, 0, 0, 0, 0]
    """
    vals = coords.values()
    flags = np.array([elem_less(c, bounds) for c in vals], dtype=bool)
    return make_tensor(flags, Layout(coords.shape))


# --- the GEMM -----------------------------------------------------------------------------
@dataclass(frozen=True)
class GemmConfig:
    """A block-level GEMM: shared layouts ``sA`` (bM, bK[, stages]) and ``sB`` (bN, bK[,
    stages]), the global -> shared tiled copies, the tiled MMA, the shared -> register copy
    atoms, and the accumulator dtype. ``copy_A``/``copy_B`` may be callables
    ``(gX_tile, sX_tile) -> TiledCopy`` that choose the vector width from the layouts."""

    sA: Layout
    sB: Layout
    copy_A: object
    copy_B: object
    mma: TiledMMA
    s2r_A: object
    s2r_B: object
    acc_dtype: object = np.float32

    @property
    def tile(self):
        return self.sA[0].size, self.sB[0].size, self.sA[1].size

    @property
    def stages(self):
        return self.sA[2].size if self.sA.rank > 2 else 1


def _auto_copy(thr, val, value_type, atom_kind, max_bits):
    """A callable choosing the widest atom of ``atom_kind`` the tiles' layouts allow."""
    vb = type_bits(value_type)

    def make(g, s):
        probe = make_tiled_copy(UniversalCopy(vb, value_type), thr, val)
        bits = min(max_vector_bits(probe, g, s, max_bits), max_bits)
        if atom_kind == "universal" or bits < 32:
            return make_tiled_copy(UniversalCopy(bits, value_type), thr, val)
        atom = SM80_CP_ASYNC_CACHEGLOBAL(16, value_type) if bits == 128 else \
            SM80_CP_ASYNC_CACHEALWAYS(bits // 8, value_type)
        return make_tiled_copy(atom, thr, val)
    return make


def _tile_arg(tile, what):
    """The block tile (bM, bN, bK) argument of a configuration: three positive ints."""
    if not isinstance(tile, (tuple, list)) or len(tile) != 3:
        raise TypeError(f"{what}: tile must be a tuple (bM, bN, bK), not {tile!r}")
    check_int_tuple(tuple(tile), what, "tile", "extent")
    return tuple(tile)


def moye_config(pipeline="double_buffer", dtype=np.float32, tile=(128, 128, 8),
                copy_threads=(32, 8), mma_threads=(16, 16)):
    """MoYe.jl's SIMT configurations: ``tile`` (bM, bN, bK), cp.async copies over
    ``copy_threads`` (up to 8 bytes per thread, narrowed where the layouts do not allow it),
    UniversalFMA over ``mma_threads``. ``"prefetch"``: shared tiles (bM, bK) padded to
    ``bM + 1``; ``"double_buffer"``: (bM, bK, 2) padded to ``bM + 2``."""
    pipelines = {"prefetch": (1, 1), "double_buffer": (2, 2)}
    if not isinstance(pipeline, str) or pipeline not in pipelines:
        raise ValueError(f"moye_config: pipeline must be one of {sorted(pipelines)}, not "
                         f"{pipeline!r}")
    bM, bN, bK = _tile_arg(tile, "moye_config")
    pad, stages = pipelines[pipeline]

    def smem(b):
        if stages == 1:
            return Layout((b, bK), (1, b + pad))
        return Layout((b, bK, stages), (1, b + pad, (b + pad) * bK))
    nval = max(1, 64 // type_bits(dtype))
    val = (nval, 1)
    copy = _auto_copy(Layout(copy_threads), val, dtype, "cp.async", 64)
    mma = make_tiled_mma(UniversalFMA(dtype), mma_threads)
    return GemmConfig(smem(bM), smem(bN), copy, copy, mma, UniversalCopy(type_bits(dtype), dtype),
                      UniversalCopy(type_bits(dtype), dtype), dtype)


def sm80_config(atom, warps=(2, 2), tile=(64, 64, 32), a_major="K", b_major="K",
                permutation_mnk=None):
    """A tensor-core configuration: ``atom`` (an SM80 MMA atom) tiled over ``warps``, shared
    tiles stored ``a_major``/``b_major`` ("K" or "M"/"N": the contiguous mode), 16-byte
    cp.async copies (narrowed where the layouts do not allow it) and ldmatrix to registers
    (``.trans`` for MN-major 16-bit tiles; plain 32-bit loads for tf32)."""
    if not isinstance(atom, MMAAtom):
        raise TypeError(f"sm80_config: expected an MMA atom, not {atom!r}")
    bM, bN, bK = _tile_arg(tile, "sm80_config")
    for name, major, mn in (("a_major", a_major, "M"), ("b_major", b_major, "N")):
        if major not in ("K", mn, "MN"):
            raise ValueError(f"sm80_config: {name} must be 'K', '{mn}' or 'MN', not {major!r}")
    mma = make_tiled_mma(atom, warps, permutation_mnk)
    in_type = atom.a_type
    vb = type_bits(in_type)
    nthr = mma.size
    per16 = 128 // vb

    def side(bmn, major):
        if major == "K":
            smem = Layout((bmn, bK), (bK, 1))
            tk = bK // per16
            thr = Layout((nthr // tk, tk), (tk, 1))
            val = Layout((1, per16))
        else:
            smem = Layout((bmn, bK), (1, bmn))
            tm = bmn // per16
            thr = Layout((tm, nthr // tm))
            val = Layout((per16, 1))
        return smem, _auto_copy(thr, val, in_type, "cp.async", 128)
    sA, cA = side(bM, a_major)
    sB, cB = side(bN, b_major)
    if vb == 16:
        ldA = SM75_U32x4_LDSM_N() if a_major == "K" else SM75_U16x8_LDSM_T()
        ldB = SM75_U32x2_LDSM_N() if b_major == "K" else SM75_U16x4_LDSM_T()
    else:
        ldA = ldB = UniversalCopy(vb, in_type)
    return GemmConfig(sA, sB, cA, cB, mma, ldA, ldB, atom.frag_dtype("C"))


def cpu_gemm(A, B, config, C=None):
    """``C = A @ B^T`` for ``A`` (M, K) and ``B`` (N, K) numpy arrays (any strides that numpy
    arrays of one block of memory have), written like a kernel from the layer's pieces.

    Every block ``(bx, by)``: ``gA = local_tile(mA, (bM, bK), (bx, None))`` and likewise B,
    C and the identity tensors; each k-tile is copied global -> shared by the tiled copies
    (predicated by the identity tiles and zero-filled outside ``M, N, K``) into its stage of
    the shared tiles, shared -> registers by ``make_tiled_copy_A/B`` of the MMA (retile_D of
    the fragments), multiplied by ``run_mma`` into the accumulators, and finally the
    accumulators are stored by ``make_tiled_copy_C`` where inside ``M x N``.
    """
    if not isinstance(config, GemmConfig):
        raise TypeError(f"cpu_gemm: expected a GemmConfig (moye_config, sm80_config), not "
                        f"{config!r}")
    if C is not None and not isinstance(C, np.ndarray):
        raise TypeError(f"cpu_gemm: C must be None or a numpy array, not {C!r}")
    A, B = np.asarray(A), np.asarray(B)
    if A.dtype.kind not in "biuf" or B.dtype.kind not in "biuf":
        raise TypeError(f"cpu_gemm: A and B must be numeric arrays, not {A.dtype} and {B.dtype}")
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError("cpu_gemm: A and B must be 2-D")
    A = encode(A, config.mma.atom.a_type)      # numbers -> the atom's storage (bf16 bits ...)
    B = encode(B, config.mma.atom.b_type)
    (M, K), (N, K2) = A.shape, B.shape
    if K != K2:
        raise ValueError(f"cpu_gemm: A is {M}x{K} but B is {N}x{K2} (B is given as (N, K))")
    cfg = config
    bM, bN, bK = cfg.tile
    mma = cfg.mma
    C = np.zeros((M, N), dtype=cfg.acc_dtype) if C is None else C
    if C.shape != (M, N):
        raise ValueError(f"cpu_gemm: C has shape {C.shape}, expected {(M, N)}")
    mA, mB, mC = (make_tensor(x if x.flags.c_contiguous or x.flags.f_contiguous
                              else np.ascontiguousarray(x)) for x in (A, B, C))
    iA, iB, iC = (make_identity_tensor(s) for s in ((M, K), (N, K), (M, N)))
    stages = cfg.stages
    T = mma.size
    s2r_A = make_tiled_copy_A(cfg.s2r_A, mma)
    s2r_B = make_tiled_copy_B(cfg.s2r_B, mma)
    r2g_C = make_tiled_copy_C(UniversalCopy(C.itemsize * 8, C.dtype), mma)
    for bx in range(-(-M // bM)):
        for by in range(-(-N // bN)):
            gA = local_tile(mA, (bM, bK), (bx, None))          # (bM, bK, k)
            gB = local_tile(mB, (bN, bK), (by, None))
            gC = local_tile(mC, (bM, bN), (bx, by))
            cA = local_tile(iA, (bM, bK), (bx, None))
            cB = local_tile(iB, (bN, bK), (by, None))
            cC = local_tile(iC, (bM, bN), (bx, by))
            sA = make_tensor(np.zeros(cfg.sA.cosize, A.dtype), cfg.sA)
            sB = make_tensor(np.zeros(cfg.sB.cosize, B.dtype), cfg.sB)
            stage = (lambda s, i: s[(None, None, i)]) if stages > 1 else (lambda s, i: s)
            copy_A = _resolve(cfg.copy_A, gA[(None, None, 0)], stage(sA, 0))
            copy_B = _resolve(cfg.copy_B, gB[(None, None, 0)], stage(sB, 0))
            thr0 = mma.get_slice(0)
            acc = RegisterFile(thr0.partition_fragment_C(gC, cfg.acc_dtype).layout, T,
                               cfg.acc_dtype)
            rA = RegisterFile.like(thr0.partition_fragment_A(stage(sA, 0)), T)
            rB = RegisterFile.like(thr0.partition_fragment_B(stage(sB, 0)), T)
            k_tiles = gA.shape[2]

            def load(kt, s):
                run_copy(copy_A, gA[(None, None, kt)], stage(sA, s),
                         pred=predicate(cA[(None, None, kt)], (M, K)), zfill=True)
                run_copy(copy_B, gB[(None, None, kt)], stage(sB, s),
                         pred=predicate(cB[(None, None, kt)], (N, K)), zfill=True)
            load(0, 0)
            for kt in range(k_tiles):
                s = kt % stages
                run_copy(s2r_A, stage(sA, s), rA)
                run_copy(s2r_B, stage(sB, s), rB)
                if kt + 1 < k_tiles:
                    load(kt + 1, (kt + 1) % stages)
                run_mma(mma, rA, rB, acc)
            out = RegisterFile(acc.layout, T, C.dtype)
            out.data[:] = acc.data.astype(C.dtype)
            run_copy(r2g_C, out, gC, pred=predicate(cC, (M, N)))
    return C


def _resolve(copy, g, s):
    return copy if isinstance(copy, TiledCopy) else copy(g, s)
