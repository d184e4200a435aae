"""gemm.cute: layouts and tensors inside numba kernels. The kernels of cute_kernels.py (a
transpose, a small GEMM through shared tensors, a tiled copy with local_tile,
local_partition and slices) run in the simulator against numpy; their PTX (compiled on the
CPU) shows the offsets as constant arithmetic without local memory; a coordinate that does
not fit a layout is a typing error naming both."""

import os
import sys

import pytest

from simcase import simulator_report

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)


def test_kernels_match_numpy_in_simulator():
    seed = int.from_bytes(os.urandom(4), "little")
    got = simulator_report(os.path.join(HERE, "sim_cute_cases.py"), seed)
    assert got["transpose"] == 0.0 and got["odd offsets"], (seed, got)
    assert got["small gemm"] < 1e-4, (seed, got)
    assert got["tiled copy"] == 0.0, (seed, got)
    assert got["moye prefetch"] < 1e-5, (seed, got)
    assert got["moye prefetch cp.async"] < 1e-5, (seed, got)
    assert got["moye double buffer"] < 1e-5, (seed, got)
    assert got["any shape copy"] == [True, True], (seed, got)


def test_tensor_core_tiles_match_numpy_in_simulator():
    """gemm(tiled_mma, ...) on the SM80 atoms' twins (tf32, bf16, f16) and ldmatrix into the
    fragments (bf16; f16 moves the same bits), against float64."""
    seed = int.from_bytes(os.urandom(4), "little")
    got = simulator_report(os.path.join(HERE, "sim_cute_cases.py"), seed, "tensor cores")
    assert got["mma tile"]["tf32"] < 2e-3, (seed, got)     # tf32 operands: 2^-11 each
    assert got["mma tile"]["bf16"] < 1e-5 and got["mma tile"]["f16"] < 1e-5, (seed, got)
    assert got["ldmatrix tile"] < 1e-5, (seed, got)


def test_sm80_gemm_matches_numpy_in_simulator():
    """The SM80 tensor-core GEMM of cute_kernels (cp.async, ldmatrix, mma.sync, predicated
    partial tiles) on 32 x 32 x 32 tiles, bf16, against float64 (f16 differs only in the
    mma's type: the mma tiles cover it)."""
    seed = int.from_bytes(os.urandom(4), "little")
    got = simulator_report(os.path.join(HERE, "sim_cute_cases.py"), seed, "sm80")
    assert max(got.values()) < 1e-5, (seed, got)


def _assert_typing_errors(cases, sig):
    """Each (kernel, text) of ``cases`` fails to compile for ``sig`` with a TypingError
    whose message has the text (numba raises its TypingError from numba.core or
    numba.cuda.core, by the path taken)."""
    for fn, text in cases:
        with pytest.raises(Exception) as info:
            _ptx(fn, sig)
        assert type(info.value).__name__ == "TypingError" and text in str(info.value), \
            (fn.__name__, str(info.value)[-400:])


def _ptx(fn, sig):
    from numba import cuda
    return cuda.compile_ptx(fn, sig, cc=(9, 0))[0]


@pytest.fixture(scope="module")
def numba_cute():
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("compiles PTX: the simulator is on")
    from gemm import cute
    return cute


def test_offsets_fold_to_constants(numba_cute):
    from layoutalg import Layout
    L = Layout((4, (2, 3)), (3, (1, 12)))
    assert L((3, (1, 2))) == 34

    def kernel(out):
        out[0] = L((3, (1, 2)))         # a static coordinate: a constant
        out[1] = numba_cute.cosize(L) * 1000 + numba_cute.size(L)
    ptx = _ptx(kernel, "void(uint32[::1])")
    assert "34;" in ptx and "35024;" in ptx, ptx


def test_kernel_ptx_has_no_local_memory_or_division(numba_cute):
    import cute_kernels
    from gemm.arch.inspect import local_memory_ops
    ptx = _ptx(cute_kernels.transpose, "void(float32[::1], float32[::1], uint32[::1], uint32)")
    assert local_memory_ops(ptx) == []
    # the layout ODD has extents 3 and 5: its offsets divide by reciprocal multiplies
    assert "div" not in ptx and "rem" not in ptx
    assert "mul.hi.u32" in ptx or "mul.wide.u32" in ptx


def test_tiles_and_partitions_unroll_to_constant_offsets(numba_cute):
    import cute_kernels
    from gemm.arch.inspect import local_memory_ops
    ptx = _ptx(cute_kernels.tiled_copy, "void(float32[::1], float32[::1])")
    assert local_memory_ops(ptx) == []
    assert "div" not in ptx and "rem" not in ptx
    # a thread's partition of the (32, 8) tile by 8 x 4 threads: 8 loads and 8 stores
    assert ptx.count("ld.global.f32") == 8 and ptx.count("st.global.f32") == 8


def test_moye_kernel_compiles_to_registers(numba_cute):
    """The seed's first kernel in its configuration (128 x 128 x 8 tiles, 256 threads):
    fragments in registers (no local memory, no spills), the FMAs unrolled."""
    import cute_kernels
    from gemm.arch.inspect import local_memory_ops, ptxas_usage
    kernel, grid, threads = cute_kernels.moye_prefetch(256, 256, 64)
    ptx = _ptx(kernel, "void(float32[::1], float32[::1], float32[::1])")
    assert local_memory_ops(ptx) == []
    assert ptx.count("fma.rn.f32") >= 8 * 8 * 8       # one k-tile's 8 x 8 x 8 per thread
    assert ptxas_usage(ptx, (9, 0))[0].spills == 0
    # the seed's own copies: cp.async, 4 per thread per operand at both copy sites
    ptx = _ptx(cute_kernels.moye_prefetch(256, 256, 64, cp_async=True)[0],
               "void(float32[::1], float32[::1], float32[::1])")
    assert ptx.count("cp.async.ca.shared.global") == 16 and "cp.async.wait_all" in ptx
    assert local_memory_ops(ptx) == [] and "ld.f32" not in ptx
    # a fragment's loads share one address and constant displacements: few 64-bit products
    assert ptx.count("mul.wide") < 16, ptx.count("mul.wide")


def test_double_buffer_kernel_unrolls_to_registers(numba_cute):
    """The seed's second kernel (seed configuration): its k_block loop written out by
    cute.unrolled, so the fragments indexed by k_block stay in registers; cp.async of 8
    bytes, 2 per thread per operand at both copy sites."""
    import cute_kernels
    from gemm.arch.inspect import local_memory_ops, ptxas_usage
    kernel, grid, threads = cute_kernels.moye_double_buffer(256, 256, 64)
    ptx = _ptx(kernel, "void(float32[::1], float32[::1], float32[::1])")
    assert local_memory_ops(ptx) == []
    assert ptx.count("fma.rn.f32") == 8 * 4 * 16      # 8 k-blocks of a 4 x 16 thread tile
    assert "ld.f32" not in ptx and "ld.shared.f32" in ptx      # shared loads, not generic
    copies = [line for line in ptx.splitlines() if "cp.async.ca.shared.global" in line]
    assert len(copies) == 8 and all(line.endswith(", 8;") for line in copies)
    assert "cp.async.wait_all" in ptx
    usage = ptxas_usage(ptx, (9, 0))[0]
    assert usage.spills == 0 and usage.stack_frame == 0


@pytest.mark.parametrize("pipeline", ["prefetch", "double_buffer"])
def test_matmul_kernels_of_run_time_shapes_stay_in_registers(numba_cute, pipeline):
    """gemm.matmul's SIMT kernels (gemm.cute_kernels: run-time extents and strides, identity
    tensors, copy_if, axpby), default tiles, A and B column-major with 2-value copies where
    the pipeline's padding allows: no local memory or spills, the FMAs of a k-tile unrolled,
    zero-filling cp.async (src-size operand) at both copy sites, shared loads not generic."""
    from gemm import api, simt
    from gemm.arch.inspect import local_memory_ops, ptxas_usage
    cfg = api.KERNELS[pipeline]
    vec = simt.copy_vector(cfg, 0, cfg.bM, 4)
    assert vec == (1 if pipeline == "prefetch" else 2)
    ptx = _ptx(simt.simt_function(cfg, 0, 0, vec, vec), simt.SIGNATURE)
    assert local_memory_ops(ptx) == []
    assert ptx.count("fma.rn.f32") >= 8 * 8 * 8       # a k-tile's 8 x 8 x 8 per thread
    copies = [line for line in ptx.splitlines() if "cp.async.ca.shared.global" in line]
    # 128 x 8 values per operand over 256 threads, at two copy sites, two operands
    assert len(copies) == 2 * 2 * 128 * 8 // 256 // vec
    assert all(line.rstrip(";").split(",")[-1].strip().startswith("%r") for line in copies)
    assert "ld.f32" not in ptx and "ld.shared.f32" in ptx
    usage = ptxas_usage(ptx, (9, 0))[0]
    assert usage.spills == 0 and usage.stack_frame == 0


def test_unrolled_writes_out_loops_and_refuses_what_it_cannot(numba_cute):
    """The unroll loop is written out (its bytecode loses that loop; the others stay), the
    bodies see their constants in order, and the kernel compiles with its register array in
    registers (a small case: LLVM keeps it there even as a loop; the seed's double-buffered
    kernel, above, is the case that needs the writing out). Loops that break, and non-int
    tuples, are refused when decorated."""
    import dis
    from numba import cuda, float32
    from gemm.arch.inspect import local_memory_ops
    unroll, STEPS = numba_cute.unroll, numba_cute.static_range(6)

    def loops(fn):
        return sum(i.opname == "FOR_ITER" for i in dis.get_instructions(fn))

    def order(out):
        for k in unroll(STEPS):
            for j in unroll((10, 20)):
                out.append(k + j)
    written = numba_cute.unrolled(order)
    seen = []
    written(seen)
    assert loops(order) == 2 and loops(written) == 0
    assert seen == [k + j for k in range(6) for j in (10, 20)]

    def rotate(out):
        frag = cuda.local.array(6, float32)
        for i in range(6):
            frag[i] = out[i]
        for k in unroll(STEPS):
            nxt = k + 1
            if k == 5:
                nxt = 0
            frag[nxt] = frag[nxt] * frag[k] + out[6 + k]
        for i in range(6):
            out[i] = frag[i]

    assert loops(rotate) == 3 and loops(numba_cute.unrolled(rotate)) == 2
    assert local_memory_ops(_ptx(numba_cute.unrolled(rotate), "void(float32[::1])")) == []

    def breaks(out):
        for k in unroll(STEPS):
            if out[k] > 0:
                break

    def not_ints(out):
        for k in unroll((0.5, 1.5)):
            out[0] = k
    with pytest.raises(SyntaxError, match="may not break"):
        numba_cute.unrolled(breaks)
    with pytest.raises(TypeError, match="tuple of ints"):
        numba_cute.unrolled(not_ints)


def test_layout_argument_is_free(numba_cute):
    from numba.cuda import types
    from layoutalg import Layout
    L = Layout((8, 8), (1, 8))

    def kernel(out, layout):
        out[0] = layout(5, 3)
    ptx = _ptx(kernel, (types.Array(types.uint32, 1, "C"), numba_cute.LayoutType(L)))
    assert "29;" in ptx                 # 5 + 3 * 8
    # the array's 7 parameters (numba's ABI) and none for the layout
    assert ptx.count(".param .u64") == 7


def test_bad_coordinate_is_a_typing_error(numba_cute):
    from layoutalg import Layout
    L = Layout((4, 8), (8, 1))

    def kernel(out):
        out[0] = L(1, 2, 3)

    def bad_engine(out):
        T = numba_cute.make_tensor(out[0], L)
        T[0] = 1
    _assert_typing_errors(((kernel, "is not a coordinate of the layout (4,8):(8,1)"),
                           (bad_engine, "the engine must be a 1-D or C-contiguous array")),
                          "void(uint32[::1])")


def test_fma_gemm_on_numpy_fragments_matches_element_by_element():
    """gemm(C, A, B) of UniversalFMA fragments outside kernels (the simulator's path): on
    fragments over numpy storage it runs as outer products, which must give the bits of the
    element-by-element sums (each product and sum rounded to float32, k-block by k-block),
    whatever the fragments' layouts (A's k-blocks strided, C column-major, a nested mode;
    a C of aliased elements takes the element-by-element loop)."""
    import numpy as np
    from layoutalg import Layout
    from layoutalg.tensor import Tensor
    from gemm.cute._python import gemm
    rng = np.random.default_rng(5)
    m, n, k = 6, 4, 3
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    c = rng.standard_normal(64).astype(np.float32)
    A = Tensor(a, Layout((1, m, k), (0, 1, 9)))
    B = Tensor(b, Layout((1, (2, 2), k), (0, (5, 1), 13)))
    C = Tensor(c, Layout((1, m, n), (0, 1, m)))
    want = c.copy()
    for kk in range(k):
        for i in range(m):
            for j in range(n):
                x = want[i + m * j] + a[i + 9 * kk] * b[(j % 2) * 5 + j // 2 + 13 * kk]
                want[i + m * j] = np.float32(x)
    gemm(C, A, B)
    assert c.tobytes() == want.tobytes()
    # a C whose columns alias (stride 0): every product added in turn, as one by one
    c2 = c.copy()
    want = c2.copy()
    for kk in range(k):
        for i in range(m):
            for j in range(n):
                x = want[i] + a[i + 9 * kk] * b[(j % 2) * 5 + j // 2 + 13 * kk]
                want[i] = np.float32(x)
    gemm(Tensor(c2, Layout((1, m, n), (0, 1, 0))), A, B)
    assert c2.tobytes() == want.tobytes()


def test_symbolic_layout_is_refused():
    import sympy
    from layoutalg import Layout
    from gemm import cute
    with pytest.raises(TypeError, match="non-negative integer shapes and strides"):
        cute.cosize(Layout((sympy.Symbol("n", positive=True, integer=True), 2), (1, 4)))


def test_run_time_shapes_compute_with_their_values(numba_cute):
    """make_layout from run-time integers: offsets use them (a multiply by ld), a static
    unit stride folds, size of a run-time extent is its value, ceil of a tile count is an
    add and a shift; the identity tensor's coordinates and copy_if's predicates stay in
    registers."""
    import cute_kernels
    from gemm.arch.inspect import local_memory_ops
    one, tile = numba_cute.static(1), numba_cute.static((4, 8))

    def kernel(out, m, k, ld):
        L = numba_cute.make_layout((m, k), (one, ld))
        T = numba_cute.make_tensor(out, L)
        T[3, 2] = numba_cute.size(L)                              # m * k at (3 + 2 ld)
        tiles = numba_cute.local_tile(T, tile, (0, None))
        out[0] = numba_cute.size(tiles[0, 0, None])               # ceil(k / 8)
    ptx = _ptx(kernel, "void(float32[::1], uint32, uint32, uint32)")
    assert "mul.lo.s32" in ptx and "shr.u32" in ptx and "div" not in ptx, ptx
    ptx = _ptx(cute_kernels.any_shape_copy,
               "void(float32[::1], float32[::1], uint32, uint32, uint32, uint32)")
    assert local_memory_ops(ptx) == [] and ptx.count("st.global.f32") == 4


def test_run_time_shapes_refuse_what_they_cannot_express(numba_cute):
    """A typing error naming the fault, at compile time: a float extent, a register
    fragment of a run-time shape, cosize of a run-time layout, writing to an identity
    tensor, a predicate of the wrong size."""
    import cute_kernels
    from numba import float32, int32
    one = numba_cute.static(1)

    def float_extent(out, m):
        numba_cute.make_tensor(out, numba_cute.make_layout((m * 0.5, 4)))[0] = 1

    def dynamic_fragment(out, m):
        T = numba_cute.make_tensor(out, numba_cute.make_layout((m, 4)))
        numba_cute.make_fragment_like(T, float32)[0] = 1

    def dynamic_cosize(out, m):
        out[0] = numba_cute.cosize(numba_cute.make_layout((m, 4), (one, m)))

    def write_coordinates(out, m):
        C = numba_cute.make_identity_tensor((m, 4))
        C[0] = (1, 2)

    def short_predicate(out, m):
        T = numba_cute.make_tensor(out, numba_cute.make_layout((m, 4)))
        thr = numba_cute.get_slice(cute_kernels.ANY_COPY, 0)
        tS = numba_cute.partition_S(thr, numba_cute.local_tile(T, cute_kernels.ANY_TILE,
                                                               (0, 0)))
        pred = numba_cute.make_fragment_like(tS[0, None, 0], int32)
        numba_cute.copy_if(cute_kernels.ANY_COPY, pred, tS, tS)
    _assert_typing_errors(((float_extent, "is not a shape or stride"),
                           (dynamic_fragment, "needs a static one"),
                           (dynamic_cosize, "it needs a static layout"),
                           (write_coordinates, "identity tensor"),
                           (short_predicate, "the predicate has 2 elements")),
                          "void(float32[::1], uint32)")


def test_unrolled_folds_the_branches_its_constants_decide(numba_cute):
    """cute.unrolled drops ``if`` branches decided by the loop's constant and the function's
    int constants (and the decided terms of an ``and``); a name the body reassigns is not
    folded."""
    import ast
    import textwrap
    from gemm.cute import _unroll_statements

    def written_out(source, constants):
        body = ast.parse(textwrap.dedent(source)).body
        return ast.unparse(ast.Module(body=_unroll_statements(body, {}, ast, constants),
                                      type_ignores=[]))
    text = written_out("""
        for k in unroll((0, 1, 2)):
            if k == 0 and flag:
                out[0] = 10
            if k == LAST:
                out[1] = 20
            else:
                out[2] = 30
        """, {"LAST": 2})
    assert text.count("out[0] = 10") == 1 and text.count("if flag:") == 1   # k == 0 only
    assert text.count("out[1] = 20") == 1 and text.count("out[2] = 30") == 2
    assert "k ==" not in text and "LAST" not in text
    text = written_out("""
        for k in unroll((0, 1)):
            k = k + 1
            if k == 0:
                out[0] = 1
        """, {})
    assert text.count("if k == 0") == 2


def test_tiled_mma_gemm_issues_mma_sync(numba_cute):
    """gemm(tiled_mma, C, A, B) with the SM80 atoms: one mma.sync per (m, n, k) of a
    thread's fragments (a warp's 32 x 16 x 32 share: 2 x 2 x 4 for tf32, 2 x 2 x 2 for
    bf16), each tf32 operand rounded once, fragments in registers; another atom, fragments
    of the wrong shape or type, are typing errors naming them."""
    import cute_kernels
    from layoutalg import Layout, make_tiled_mma
    from layoutalg.atom.mma import SM80_16x8x8_F16F16F16F16_TN
    from gemm.arch.inspect import local_memory_ops
    from numba import float32
    sig = "void(float32[::1], float32[::1], float32[::1])"
    ptx = _ptx(cute_kernels.mma_tile("tf32"), sig)
    assert ptx.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 2 * 2 * 4
    assert ptx.count("cvt.rna.tf32.f32") == 4 * 2 * 4 + 2 * 2 * 4
    assert local_memory_ops(ptx) == []
    # bf16: uint16 fragments packed in pairs (no conversion), 2 x 2 x 2 instructions
    ptx = _ptx(cute_kernels.mma_tile("bf16"), "void(uint16[::1], uint16[::1], float32[::1])")
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 2 * 2 * 2
    assert "cvt.rna" not in ptx and local_memory_ops(ptx) == []
    f16_acc = make_tiled_mma(SM80_16x8x8_F16F16F16F16_TN(), Layout((1, 1)))

    def other_atom(a, b, c):
        thr = numba_cute.get_slice(f16_acc, 0)
        C = numba_cute.make_fragment_like(numba_cute.partition_C(
            thr, numba_cute.make_tensor(c, cute_kernels.TC)), float32)
        numba_cute.gemm(f16_acc, C, C, C)

    def wrong_shapes(a, b, c):
        thr = numba_cute.get_slice(cute_kernels.MMA_TF32, 0)
        C = numba_cute.make_fragment_like(numba_cute.partition_C(
            thr, numba_cute.make_tensor(c, cute_kernels.TC)), float32)
        numba_cute.gemm(cute_kernels.MMA_TF32, C, C, C)
    mma = cute_kernels.MMAS["bf16"][0]

    def float_bf16(a, b, c):
        thr = numba_cute.get_slice(mma, 0)
        A = numba_cute.make_fragment_like(numba_cute.partition_A(
            thr, numba_cute.make_tensor(a, cute_kernels.TA)), float32)
        B = numba_cute.make_fragment_like(numba_cute.partition_B(
            thr, numba_cute.make_tensor(b, cute_kernels.TB)), float32)
        C = numba_cute.make_fragment_like(numba_cute.partition_C(
            thr, numba_cute.make_tensor(c, cute_kernels.TC)), float32)
        numba_cute.gemm(mma, C, A, B)
    _assert_typing_errors(((other_atom, "is not supported in kernels yet"),
                           (wrong_shapes, "fragments C (4, M, N), A (4, M, K), B (2, N, K)"),
                           (float_bf16, "takes uint16 (the bits of bf16 / f16) A fragments")),
                          sig)


def test_ldmatrix_copy_fills_mma_fragments_from_shared_memory(numba_cute):
    """copy(make_tiled_copy_A/B(ldmatrix atom, mma), partition_S(shared), retile_D(fragment)):
    one ldmatrix per instruction of the partition (a warp's 32 x 32 share of A: 4 x4; of B,
    16 x 32: 4 x2), no scalar shared loads, fragments in registers; a source outside shared
    memory or float registers are typing errors naming them."""
    import cute_kernels
    from gemm.arch.inspect import local_memory_ops
    from numba import float32
    sig = "void(uint16[::1], uint16[::1], float32[::1])"
    ptx = _ptx(cute_kernels.ldmatrix_tile("bf16"), sig)
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x2.shared.b16") == 4
    assert "ld.shared.u16" not in ptx and local_memory_ops(ptx) == []
    assert ptx.count("mma.sync.aligned.m16n8k16") == 2 * 2 * 2
    mma = cute_kernels.MMAS["bf16"][0]
    from layoutalg.atom.copy import SM75_U32x4_LDSM_N
    from layoutalg.tiled import make_tiled_copy_A
    ldsm = make_tiled_copy_A(SM75_U32x4_LDSM_N(), mma)
    bits = cute_kernels.MMAS["bf16"][1]

    def from_global(a, b, c):
        A = numba_cute.make_tensor(a, cute_kernels.TA)
        frag = numba_cute.make_fragment_like(numba_cute.partition_A(
            numba_cute.get_slice(mma, 0), A), bits)
        thr = numba_cute.get_slice(ldsm, 0)
        numba_cute.copy(ldsm, numba_cute.partition_S(thr, A), numba_cute.retile_D(thr, frag))

    def into_floats(a, b, c):
        sA = numba_cute.make_shared_tensor(bits, cute_kernels.SA_ROWS)
        frag = numba_cute.make_fragment_like(numba_cute.partition_A(
            numba_cute.get_slice(mma, 0), sA), float32)
        thr = numba_cute.get_slice(ldsm, 0)
        numba_cute.copy(ldsm, numba_cute.partition_S(thr, sA), numba_cute.retile_D(thr, frag))
    _assert_typing_errors(((from_global, "reads shared memory"),
                           (into_floats, "writes 16-bit values")), sig)


def test_sm80_gemm_compiles_to_ldmatrix_and_mma(numba_cute):
    """The SM80 GEMM of cute_kernels (128 x 128 x 32 tiles, 2 x 2 warps): per k-tile 2
    k-blocks of 4 ldmatrix.x4 (A) and 8 .x2 (B) and 32 mma.sync, 16-byte zero-filling
    cp.async at both copy sites, no scalar shared loads, no local memory or spills."""
    import cute_kernels
    from gemm.arch.inspect import local_memory_ops, ptxas_usage
    kernel, threads, grid = cute_kernels.sm80_gemm("bf16")
    ptx = _ptx(kernel, "void(uint16[::1], uint16[::1], float32[::1], uint32, uint32, uint32, "
                       "uint32, uint32, uint32, float32, float32)")
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4") == 2 * 4
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x2") == 2 * 8
    assert ptx.count("mma.sync.aligned.m16n8k16") == 2 * 4 * 8
    copies = [line for line in ptx.splitlines() if "cp.async.cg.shared.global" in line]
    assert len(copies) == 2 * 2 * 4 and all("16, %r" in line for line in copies)
    assert "ld.shared" not in ptx and local_memory_ops(ptx) == []
    usage = ptxas_usage(ptx, (9, 0))[0]
    assert usage.spills == 0 and usage.stack_frame == 0


def test_a_rank_1_layout_of_an_int_shape_works_in_a_kernel(numba_cute):
    """Layout(8, 2) has an int shape (not a tuple): a tensor, its size and a register
    fragment of it compile (its leaves were once added as ints, a TypeError)."""
    from numba import float32
    from layoutalg import Layout
    L = Layout(8, 2)

    def kernel(out):
        T = numba_cute.make_tensor(out, L)
        F = numba_cute.make_fragment_like(T, float32)
        F[0] = 1.5
        T[3] = numba_cute.size(L) + F[0]            # out[6] = 9.5
    import struct
    ptx = _ptx(kernel, "void(float32[::1])")
    bits = struct.unpack("<I", struct.pack("<f", 9.5))[0]
    assert "+24]" in ptx and (str(bits) in ptx or "0f41180000" in ptx), ptx   # out[6] = 9.5


def test_dynamic_range_counts_in_32_bits(numba_cute):
    """Nested loops over dynamic_range keep one uint32 counter each: no 64-bit compare,
    select or division in the kernel (numba's range, the same loops, has all three)."""
    import re
    from numba import uint32
    c = numba_cute

    def loops(rng):
        def kernel(out, n, m):
            s = uint32(0)
            for i in rng(n):
                for j in rng(i, m, n):
                    s = uint32(s ^ uint32(i * j))
            out[0] = s
        return kernel
    wide = re.compile(r"(setp|selp)\.\w+64|div\.")
    assert not wide.search(_ptx(loops(c.dynamic_range), "void(uint32[::1], uint32, uint32)"))
    assert wide.search(_ptx(loops(range), "void(uint32[::1], uint32, uint32)"))


def test_dynamic_range_in_python_is_range_of_checked_bounds():
    from gemm.cute import dynamic_range
    assert list(dynamic_range(4)) == [0, 1, 2, 3]
    assert list(dynamic_range(3, 11, 4)) == [3, 7]
    for bad in ((-1,), (0, 2 ** 32), (0, 4, 0), (1.5,), (True,)):
        with pytest.raises(ValueError, match="dynamic_range"):
            dynamic_range(*bad)


def test_universal_pairs_store_as_vectors(numba_cute):
    """copy(make_tiled_copy_C(UniversalCopy(2 values), mma), fragment, partition_D(T)): one
    store per pair where the layouts make each pair's elements consecutive: 16-bit pairs
    into a 128-byte-swizzled shared tile (the swizzle moves no bit below a pair's) as one
    32-bit word each, and float pairs into a global matrix of a run-time leading dimension
    as vectors, predicated by copy_if."""
    import numpy as np
    from numba import cuda, float32, uint8, uint16
    from layoutalg import Layout, UniversalCopy, make_tiled_copy_C, make_tiled_mma
    from layoutalg.atom.mma import SM90_64xNx16_F32BF16BF16_SS
    from layoutalg.swizzle import ComposedLayout, Swizzle
    mma = make_tiled_mma(SM90_64xNx16_F32BF16BF16_SS(64))
    r2s = make_tiled_copy_C(UniversalCopy(32, np.uint16), mma)
    r2g = make_tiled_copy_C(UniversalCopy(64, np.float32), mma)
    sw = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((64, 64), (64, 1)))
    one_per_pair, tile = Layout(16), Layout((64, 64), (64, 1))
    c, one, block = numba_cute, numba_cute.static(1), numba_cute.static((64, 64))

    def kernel(out, n, ld):
        t = cuda.threadIdx.x
        acc = c.make_fragment_like(c.partition_C(c.get_slice(mma, t),
                                                 c.make_tensor(out, tile)), float32)
        c.fill(acc, 1.0)
        raw = cuda.shared.array(4096, uint16)
        tD = c.partition_D(c.get_slice(r2s, t), c.make_tensor(raw, sw))
        y = c.make_fragment_like(tD, uint16)
        c.fill(y, 7)
        c.copy(r2s, y, tD)
        thr = c.get_slice(r2g, t)
        g = c.local_tile(c.make_tensor(out, c.make_layout((64, n), (ld, one))), block, (0, 0))
        crd = c.partition_D(thr, c.local_tile(c.make_identity_tensor((64, n)), block, (0, 0)))
        ok = c.make_fragment_like(c.make_tensor(out, one_per_pair), uint8)
        for j in range(16):
            ok[j] = c.elem_less(crd[2 * j], (64, n))
        c.copy_if(r2g, ok, acc, c.partition_D(thr, g))
        out[0] = raw[t]

    ptx = _ptx(kernel, "void(float32[::1], uint32, uint32)")
    assert ptx.count("st.shared.u32") == 16 and "st.shared.u16" not in ptx
    assert ptx.count("st.global.v2.f32") == 16
    assert ptx.count("st.global.f32") == 1           # out[0]


def test_swizzled_share_of_known_bits_is_one_swizzle(numba_cute):
    """cute_kernels.swizzled_stores: a thread's share of a swizzled tile at a constant place
    (its offset's bits known, none shared with its elements' places in the period) costs one
    swizzle, its elements that swizzle XOR 7 constants (the pairs' 8 column places; its
    second row of pairs a whole period on); the share of a tile at a run-time place (whole
    periods of the swizzle: they move the array's start, not the swizzled offset) costs no
    other: the same swizzle and the same 7 constants. Before the run-time tile's periods
    were kept apart, it swizzled each of its 8 places (9 shifts in all)."""
    import re
    import cute_kernels
    ptx = _ptx(cute_kernels.swizzled_stores, "void(uint16[::1], uint32)")
    assert ptx.count("st.shared.u32") == 32
    assert ptx.count("shr.u32") == 1
    assert len(re.findall(r"xor\.b(?:32|64)\s+%\w+, %\w+, \d+;", ptx)) == 7


def test_universal_pairs_refuse_a_misaligned_vector_in_python():
    """In Python (the simulator's copy): pairs of floats from an odd element are refused
    (partition_D: a vector store needs them aligned); from an even one the copy writes each
    value where the partition of an identity tensor says it lies."""
    import numpy as np
    from layoutalg import Layout, UniversalCopy, make_tiled_copy_C, make_tiled_mma
    from layoutalg.atom.mma import SM90_64xNx16_F32BF16BF16_SS
    from layoutalg.errors import LayoutError
    from gemm.cute import _python as c
    mma = make_tiled_mma(SM90_64xNx16_F32BF16BF16_SS(64))
    r2g = make_tiled_copy_C(UniversalCopy(64, np.float32), mma)
    thr = c.get_slice(r2g, 5)
    out = np.zeros(64 * 64 + 1, np.float32)
    src = c.make_tensor(np.arange(32, dtype=np.float32), Layout(32))
    with pytest.raises(LayoutError, match="breaks the 2-value alignment"):
        c.copy(r2g, src, c.partition_D(thr, c.make_tensor(out, Layout((64, 64), (64, 1)), 1)))
    c.copy(r2g, src, c.partition_D(thr, c.make_tensor(out, Layout((64, 64), (64, 1)))))
    crd = c.partition_D(thr, c.make_identity_tensor((64, 64)))
    assert [out[r * 64 + k] for r, k in (crd[j] for j in range(32))] == list(range(32))


def test_universal_copies_in_python_keep_predicates_and_bounds():
    """The Python copy of a universal tiled copy (all of a thread's values at once): groups
    whose predicate is false keep dst's values, the others take src's (into a swizzled
    tensor, at its swizzled places), and a destination element outside its array is refused
    (LayoutIndexError, as element by element)."""
    import numpy as np
    from layoutalg import Layout, UniversalCopy, make_tiled_copy_C, make_tiled_mma
    from layoutalg.atom.mma import SM90_64xNx16_F32BF16BF16_SS
    from layoutalg.errors import LayoutIndexError
    from layoutalg.swizzle import ComposedLayout, Swizzle
    from gemm.cute import _python as c
    mma = make_tiled_mma(SM90_64xNx16_F32BF16BF16_SS(64))
    pairs = make_tiled_copy_C(UniversalCopy(32, np.uint16), mma)
    sw = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((64, 64), (64, 1)))
    rng = np.random.default_rng()
    t = int(rng.integers(128))
    thr = c.get_slice(pairs, t)
    src = c.make_tensor(rng.integers(1, 1000, 32).astype(np.uint16), Layout(32))
    keep = rng.integers(0, 2, 16).astype(np.uint8)
    out = np.zeros(4096, np.uint16)
    c.copy_if(pairs, c.make_tensor(keep, Layout(16)), src, c.partition_D(thr, c.make_tensor(
        out, sw)))
    crd = c.partition_D(thr, c.make_identity_tensor((64, 64)))
    want = np.zeros(4096, np.uint16)
    for j in range(32):
        if keep[j // 2]:
            r, k = crd[j]
            want[sw(r, k)] = src[j]
    assert (out == want).all() and keep.any() == out.any()
    short = np.zeros(64 * 64 - 64, np.uint16)       # the tile's last row is past the array
    dst = c.partition_D(c.get_slice(pairs, 127),
                        c.make_tensor(short, Layout((64, 64), (64, 1))))
    with pytest.raises(LayoutIndexError, match="outside its array"):
        c.copy(pairs, src, dst)


def test_static_groups_cover_a_range_in_groups_dividing_it():
    from gemm.cute import static_groups
    assert static_groups(128) == (tuple(range(0, 128, 16)), 16)
    assert static_groups(12) == ((0, 4, 8), 4)
    assert static_groups(6, 4) == ((0, 2, 4), 2)
    assert static_groups(0) == ((), 16)
    for bad in ((-1,), (8, 0), (1.5,), (8, 2.0)):
        with pytest.raises(TypeError, match="static_groups"):
            static_groups(*bad)
