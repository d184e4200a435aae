"""Never silently wrong (issue 15): every public callable of ``layoutalg``, given malformed
arguments, returns or raises LayoutError, ValueError or TypeError with a message naming the
function, never AttributeError, KeyError, IndexError (other than a LayoutIndexError, which is
a LayoutError too), ZeroDivisionError, RecursionError, MemoryError or a hang."""

import contextlib
import inspect
import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import layoutalg
from layoutalg import (
    ComposedLayout, Layout, LayoutError, Swizzle, make_identity_tensor, make_tensor,
    make_tiled_copy, make_tiled_mma,
)
from layoutalg.atom import (
    SM80_16x8x16_F32F16F16F32_TN, UniversalCopy, UniversalFMA,
)
from layoutalg.errors import LayoutIndexError

ALLOWED = (LayoutError, ValueError, TypeError)

# The malformed arguments of issue 15, and well-formed ones so that calls get past their
# first argument (a layout, a tensor, a tiled copy...) to the malformed later ones.
MALFORMED = [1.5, True, "a", None, -1, 0, (), (1.5,), ((),), (2, "x"), (0, 4),
             Layout((4, 8)), Layout((2, 3), (3, 1)), 2**40, [4, 2], {1: 2}, float("nan")]


def _tensor():
    return make_tensor(np.zeros(32, np.float32), Layout((4, 8)))


TC = make_tiled_copy(UniversalCopy(32), (2, 2), (1, 1))
MMA = make_tiled_mma(UniversalFMA(), (2, 2))
WELL_FORMED = [1, 2, 4, 8, 32, (2, 2), (4, 8), (2, (2, 2)), Layout(4, 2), Layout(8),
               Layout((2, 2), (1, 4)), ComposedLayout(Swizzle(1, 0, 2), 0, Layout((4, 4))),
               _tensor(), make_identity_tensor((4, 8)), TC, MMA, UniversalCopy(32),
               UniversalFMA(), np.float32, "f32", "K", "prefetch"]
VALUES = st.sampled_from(MALFORMED + WELL_FORMED)

# Names of layoutalg.__all__ that are not functions of user data (modules are skipped too).
EXCLUDED = {
    "LayoutError",          # the exception class
}
PUBLIC = sorted(name for name in layoutalg.__all__
                if name not in EXCLUDED and callable(getattr(layoutalg, name))
                and not inspect.ismodule(getattr(layoutalg, name)))

# The methods users call on the objects the functions return.
METHODS = {
    "Layout.__call__": lambda: Layout((4, 8)),
    "ComposedLayout.__call__": lambda: ComposedLayout(Swizzle(1, 0, 2), 0, Layout((4, 4))),
    "Swizzle.__call__": lambda: Swizzle(2, 0, 3),
    "TiledCopy.get_slice": lambda: TC.get_slice,
    "TiledMMA.get_slice": lambda: MMA.get_slice,
    "ThrCopy.partition_S": lambda: TC.get_slice(1).partition_S,
    "ThrCopy.partition_D": lambda: TC.get_slice(1).partition_D,
    "ThrCopy.retile_D": lambda: TC.get_slice(1).retile_D,
    "ThrMMA.partition_A": lambda: MMA.get_slice(1).partition_A,
    "ThrMMA.partition_B": lambda: MMA.get_slice(1).partition_B,
    "ThrMMA.partition_C": lambda: MMA.get_slice(1).partition_C,
    "Tensor.__getitem__": lambda: _tensor().__getitem__,
    "Tensor.__setitem__": lambda: _tensor().__setitem__,
    "Tensor.__call__": lambda: _tensor(),
    "identity Tensor.__getitem__": lambda: make_identity_tensor((4, 8)).__getitem__,
}


def _arity(f):
    """(fewest, most) positional arguments of ``f`` (a *args counts for two more)."""
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return 1, 3
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(p.default is p.empty for p in pos)
    extra = 2 if any(p.kind == p.VAR_POSITIONAL for p in params) else 0
    return required, max(required, min(len(pos) + extra, 4))


def _call_and_check(f, args):
    try:
        with contextlib.redirect_stdout(io.StringIO()):         # print_layout prints
            f(*args)
    except ALLOWED:
        pass
    except Exception as e:  # noqa: BLE001  (anything else is the bug this test looks for)
        raise AssertionError(f"{f!r}{tuple(args)!r} raised {type(e).__name__}: {e}") from e


FUZZ = settings(max_examples=25, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")      # numpy's dtype alias "a"
@pytest.mark.parametrize("name", PUBLIC)
@FUZZ
@given(data=st.data())
def test_public_callable_on_malformed_arguments(name, data):
    f = getattr(layoutalg, name)
    lo, hi = _arity(f)
    args = data.draw(st.lists(VALUES, min_size=lo, max_size=hi), label="args")
    _call_and_check(f, args)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", sorted(METHODS))
@FUZZ
@given(data=st.data())
def test_method_on_malformed_arguments(name, data):
    f = METHODS[name]()
    args = data.draw(st.lists(VALUES, min_size=1, max_size=3), label="args")
    _call_and_check(f, args)


def test_the_sweep_covers_the_public_names():
    assert len(PUBLIC) > 120 and "composition" in PUBLIC and "local_tile" in PUBLIC
    assert set(EXCLUDED) <= set(layoutalg.__all__)


# --- each function fixed: the error and the function named in its message --------------------
L = Layout((4, 8))
CL = ComposedLayout(Swizzle(1, 0, 2), 0, Layout((4, 4)))

CASES = [
    # (function name, call, exception, message pattern)
    ("append", lambda: layoutalg.append((2, 3)), TypeError, "append: expected a layout"),
    ("append", lambda: layoutalg.append(L, 1.5), TypeError, "append"),
    ("append", lambda: layoutalg.append(L, None, 2**40), LayoutError, "append: a rank of"),
    ("append", lambda: layoutalg.append(L, None, -1), LayoutError, "append"),
    ("prepend", lambda: layoutalg.prepend("a"), TypeError, "prepend: expected a layout"),
    ("prepend", lambda: layoutalg.prepend(L, L, 2**40), LayoutError, "prepend"),
    ("take", lambda: layoutalg.take(((),), 0), TypeError, "take: expected a layout"),
    ("take", lambda: layoutalg.take(L, 0, 5), LayoutIndexError, "take: end 5"),
    ("take", lambda: layoutalg.take(L, 1, 1), LayoutError, "take: the modes"),
    ("group_modes", lambda: layoutalg.group_modes(0, 1), TypeError, "group_modes"),
    ("group_modes", lambda: layoutalg.group_modes(L, "a"), TypeError, "group_modes: begin"),
    ("select", lambda: layoutalg.select({1: 2}, 0), TypeError, "select"),
    ("select", lambda: layoutalg.select(L, 4), LayoutIndexError, "select: mode 4"),
    ("select", lambda: layoutalg.select(L, (0, 4)), TypeError, "select"),
    ("cosize", lambda: layoutalg.cosize((0, 4)), TypeError, "cosize"),
    ("shape", lambda: layoutalg.shape(1.5), TypeError, "shape"),
    ("shape", lambda: layoutalg.shape(np.float32), TypeError, "shape"),
    ("stride", lambda: layoutalg.stride({1: 2}), TypeError, "stride"),
    ("stride", lambda: layoutalg.stride(CL), TypeError, "stride: the composed layout"),
    ("size", lambda: layoutalg.size("abc"), TypeError, "size"),
    ("size", lambda: layoutalg.size((0, 4)), LayoutError, "size.*not positive"),
    ("rank", lambda: layoutalg.rank("abc"), TypeError, "rank"),
    ("depth", lambda: layoutalg.depth([4, 2]), TypeError, "depth"),
    ("flatten", lambda: layoutalg.flatten("abc"), TypeError, "flatten"),
    ("slice_and_offset", lambda: layoutalg.slice_and_offset((None, 1), 1.5), TypeError,
     "slice_and_offset: expected a layout"),
    ("slice_and_offset", lambda: layoutalg.slice_and_offset((None, 1.5), L), LayoutError,
     "slice_and_offset: coordinate"),
    ("slice_and_offset", lambda: layoutalg.slice_and_offset((None, -1), L), LayoutError,
     "slice_and_offset: .* is negative"),
    ("format_layout", lambda: layoutalg.format_layout(2), TypeError, "format_layout"),
    ("print_layout", lambda: layoutalg.print_layout("a"), TypeError, "print_layout"),
    ("upcast", lambda: layoutalg.upcast(L, 0), LayoutError, "upcast: n = 0"),
    ("upcast", lambda: layoutalg.upcast((1.5,), "a"), TypeError, "upcast"),
    ("upcast", lambda: layoutalg.upcast(L, 1.5), TypeError, "upcast: n"),
    ("downcast", lambda: layoutalg.downcast("a", 8), TypeError, "downcast"),
    ("downcast", lambda: layoutalg.downcast(L, 0), LayoutError, "downcast: n = 0"),
    ("recast", lambda: layoutalg.recast(L, 0, 16), LayoutError, "recast: old_bits"),
    ("recast", lambda: layoutalg.recast(L, 16, True), TypeError, "recast: new_bits"),
    ("recast", lambda: layoutalg.recast([4, 2], 16, 32), TypeError, "recast"),
    ("blocked_product", lambda: layoutalg.blocked_product(1.5, L), TypeError,
     "blocked_product"),
    ("blocked_product", lambda: layoutalg.blocked_product(L, (2, "x")), LayoutError,
     "blocked_product"),
    ("raked_product", lambda: layoutalg.raked_product((1.5,), L), TypeError, "raked_product"),
    ("raked_product", lambda: layoutalg.raked_product(L, CL), LayoutError,
     "raked_product: the swizzled layout"),
    ("logical_product", lambda: layoutalg.logical_product(L, CL), LayoutError,
     "logical_product: the swizzled layout"),
    ("composition", lambda: layoutalg.composition([4, 2], None), TypeError, "composition"),
    ("zipped_divide", lambda: layoutalg.zipped_divide(L, (0, 4)), LayoutError,
     "zipped_divide: the tile extent 0"),
    ("tile_to_shape", lambda: layoutalg.tile_to_shape(L, (8, "x")), TypeError,
     "tile_to_shape"),
    ("coalesce", lambda: layoutalg.coalesce(L, "a"), TypeError, "coalesce: profile"),
    ("complement", lambda: layoutalg.complement(L, (2, "x")), TypeError, "complement"),
    ("max_common_vector", lambda: layoutalg.max_common_vector(1.5, L), TypeError,
     "max_common_vector"),
    ("layout_offsets", lambda: layoutalg.layout_offsets(None), TypeError, "layout_offsets"),
    ("layout_offsets", lambda: layoutalg.layout_offsets(2**40), TypeError, "layout_offsets"),
    ("local_partition", lambda: layoutalg.local_partition([4, 2], L, 0), TypeError,
     "local_partition: expected a Tensor"),
    ("local_partition", lambda: layoutalg.local_partition(_tensor(), (2, 2), 4), LayoutError,
     "local_partition: thread index 4"),
    ("local_partition", lambda: layoutalg.local_partition(_tensor(), (2, 2), 1.5),
     LayoutError, "local_partition"),
    ("local_partition", lambda: layoutalg.local_partition(_tensor(), Layout((2, 2), (0, 1)), 1),
     LayoutError, "local_partition: the thread layout .* repeats thread indices"),
    ("local_tile", lambda: layoutalg.local_tile(L, (2, 2), (0, 0)), TypeError,
     "local_tile: expected a Tensor"),
    ("local_tile", lambda: layoutalg.local_tile(_tensor(), (0, 4), 0), LayoutError,
     "local_tile: the tile extent 0"),
    ("local_tile", lambda: layoutalg.local_tile(_tensor(), (2, 2), (2, 0)), LayoutIndexError,
     "local_tile: tile coordinate 2"),
    ("local_tile", lambda: layoutalg.local_tile(_tensor(), 1.5, 0), TypeError, "local_tile"),
    ("local_tile", lambda: layoutalg.local_tile(_tensor(), (2, 2), (1.5, 0)), TypeError,
     "local_tile: coord"),
    ("make_tiled_copy_A", lambda: layoutalg.make_tiled_copy_A(UniversalCopy(32), L),
     TypeError, "make_tiled_copy_A: expected a TiledMMA"),
    ("make_tiled_copy_B", lambda: layoutalg.make_tiled_copy_B(UniversalCopy(32), 1.5),
     TypeError, "make_tiled_copy_B: expected a TiledMMA"),
    ("make_tiled_copy_C", lambda: layoutalg.make_tiled_copy_C(UniversalCopy(32), (0, 4)),
     TypeError, "make_tiled_copy_C: expected a TiledMMA"),
    ("max_vector_bits", lambda: layoutalg.max_vector_bits(1.5, _tensor(), _tensor()),
     TypeError, "max_vector_bits: expected a TiledCopy"),
    ("max_vector_bits", lambda: layoutalg.max_vector_bits(TC, L, _tensor()), TypeError,
     "max_vector_bits: expected a Tensor"),
    ("max_vector_bits", lambda: layoutalg.max_vector_bits(TC, _tensor(), _tensor(), 0),
     LayoutError, "max_vector_bits: max_bits"),
    ("tile_size", lambda: layoutalg.tile_size(2**40), TypeError, "tile_size"),
    ("same_function", lambda: layoutalg.same_function("a", L), TypeError, "same_function"),
    ("layout_expr", lambda: layoutalg.layout_expr(L, CL), TypeError, "layout_expr: coords"),
    ("layout_expr", lambda: layoutalg.layout_expr(L, (1.5, 0)), TypeError, "layout_expr"),
    ("moye_config", lambda: layoutalg.moye_config(()), ValueError, "moye_config: pipeline"),
    ("moye_config", lambda: layoutalg.moye_config(tile=(0, 4, 4)), LayoutError,
     "moye_config: tile"),
    ("sm80_config", lambda: layoutalg.sm80_config(SM80_16x8x16_F32F16F16F32_TN(),
                                                  a_major="x"), ValueError,
     "sm80_config: a_major"),
    ("sm80_config", lambda: layoutalg.sm80_config(UniversalCopy(32)), TypeError,
     "sm80_config"),
    ("cpu_gemm", lambda: layoutalg.cpu_gemm(np.ones((2, 2)), np.ones((2, 2)), None),
     TypeError, "cpu_gemm: expected a GemmConfig"),
    ("RegisterFile", lambda: layoutalg.RegisterFile(L, 2**40, np.float32), LayoutError,
     "RegisterFile"),
    ("RegisterFile", lambda: layoutalg.RegisterFile((0, 4), 1.5, np.float32), TypeError,
     "RegisterFile"),
    ("ThrMMA", lambda: layoutalg.ThrMMA(None, 0), TypeError, "ThrMMA"),
    ("ThrCopy", lambda: layoutalg.ThrCopy(TC, 99), LayoutError, "ThrCopy: thread index 99"),
    ("TiledCopy", lambda: layoutalg.TiledCopy(UniversalCopy(32), (0, 4), (2, 2)), TypeError,
     "TiledCopy"),
    ("TiledCopy", lambda: layoutalg.TiledCopy(UniversalCopy(32), L, 2), TypeError,
     "TiledCopy: the tiler"),
    ("CopyAtom", lambda: layoutalg.CopyAtom("x", "k", 32, 1, L, L, L, 32, 32, 0), TypeError,
     "CopyAtom"),
    ("CopyAtom", lambda: layoutalg.CopyAtom("x", "k", 32, L, L, L, L, 32, 32, 0), LayoutError,
     "CopyAtom 'x': value_bits = 0"),
    ("MMAAtom", lambda: layoutalg.MMAAtom("x", None, "fma", (2**40, 1, 1), L, L, L, L, "f32",
                                          "f32", "f32", "f32"), ValueError, "x"),
    ("MMAAtom", lambda: layoutalg.MMAAtom("x", None, "fma", (1, 1), L, L, L, L, "f32", "f32",
                                          "f32", "f32"), TypeError, "MMAAtom 'x': shape_mnk"),
    ("MMAAtom", lambda: layoutalg.MMAAtom("x", None, "fma", (2, 2, 1), Layout(1, 0),
                                          Layout((1, 2), (0, 1)), Layout((1, 2), (0, 1)),
                                          Layout((1, 4), (0, 2)), "f32", "f32", "f32", "f32"),
     ValueError, r"layout_C \(1,4\):\(0,2\) does not cover its 4-element tile"),
    ("GmmaDescriptor", lambda: layoutalg.GmmaDescriptor("K", 16, 1.5, 0), TypeError,
     "GmmaDescriptor: start"),
    ("GmmaDescriptor", lambda: layoutalg.GmmaDescriptor(0, 16, 16, 100), LayoutError,
     "GmmaDescriptor: swizzle"),
    ("Swizzle", lambda: Swizzle(1, 32, 2**40), LayoutError, r"Swizzle\(1, 32, "),
    ("SwizzledEngine", lambda: layoutalg.SwizzledEngine(0, 1.5), TypeError, "SwizzledEngine"),
    ("Tensor", lambda: layoutalg.Tensor({1: 2}, L), TypeError, "Tensor: the engine"),
    ("dice", lambda: layoutalg.dice(L, (2, 2)), TypeError, "dice"),
    ("dice", lambda: layoutalg.dice((1, None, 1), Layout((2, 3))), ValueError, "dice"),
    # the IntTuple functions
    ("ceil_div", lambda: layoutalg.ceil_div(10, 0), LayoutError, "ceil_div: b 0"),
    ("ceil_div", lambda: layoutalg.ceil_div((0, 4), True), TypeError, "ceil_div: b True"),
    ("crd2crd", lambda: layoutalg.crd2crd(8, (4, 8), 0), LayoutError, "crd2crd: dst_shape"),
    ("idx2crd", lambda: layoutalg.idx2crd(-1, (0, 4)), LayoutError, "idx2crd: idx -1"),
    ("idx2crd", lambda: layoutalg.idx2crd(5, 4, 0), LayoutError, "idx2crd: the mode 4:0"),
    ("idx2crd", lambda: layoutalg.idx2crd(5, (2, 3), (1,)), LayoutError,
     "idx2crd: stride .* is not congruent"),
    ("crd2idx", lambda: layoutalg.crd2idx(32, (0, 4)), LayoutError, "crd2idx: shape"),
    ("crd2idx", lambda: layoutalg.crd2idx(1, (4, "x")), TypeError, "crd2idx: shape"),
    ("shape_div", lambda: layoutalg.shape_div((0, 4), 2), LayoutError, "shape_div: a"),
    ("shape_div", lambda: layoutalg.shape_div(4, float("nan")), TypeError, "shape_div: b"),
    ("product", lambda: layoutalg.product("ab"), TypeError, "product"),
    ("prefix_product", lambda: layoutalg.prefix_product((2, "x")), TypeError,
     "prefix_product"),
    ("suffix_product", lambda: layoutalg.suffix_product([4, 2]), TypeError,
     "suffix_product: t .* is a list"),
    ("compatible", lambda: layoutalg.compatible("a", "a"), TypeError, "compatible"),
    ("congruent", lambda: layoutalg.congruent([4, 2], 1), TypeError, "congruent"),
    ("slice_", lambda: layoutalg.slice_((None, 1.5), (2, 3)), TypeError, "slice_: crd"),
]


@pytest.mark.parametrize("name, call, exc, pattern", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_malformed_argument_is_named(name, call, exc, pattern):
    with pytest.raises(exc, match=pattern) as info:
        call()
    assert isinstance(info.value, ALLOWED)
    assert name in str(info.value) or name == "MMAAtom"


# --- methods users call ---------------------------------------------------------------------
def test_layout_modes_out_of_range_are_layout_and_index_errors():
    for bad in (lambda: Layout((4, 8))[2], lambda: Layout(4)[1]):
        with pytest.raises(LayoutIndexError, match="mode"):
            bad()
    with pytest.raises(IndexError):                   # still the sequence protocol's error
        Layout((4, 8))[5]
    with pytest.raises(LayoutError, match="is negative"):
        Layout((4, 8))((-1, 0))


def test_tensor_indexing_outside_its_array():
    t = _tensor()
    for crd in ((4, 8), 2**40, (0, 9)):
        with pytest.raises(LayoutIndexError, match="outside its array of 32 elements"):
            t[crd]
    with pytest.raises(LayoutIndexError, match="outside its array"):
        t[(4, 8)] = 1.0
    neg = make_tensor(np.arange(8.0), Layout(4, -1))          # numpy would wrap around
    assert neg[0] == 0.0
    with pytest.raises(LayoutIndexError, match="offset -1"):
        neg[1]
    with pytest.raises(LayoutError, match="not an integer"):
        t[(1.5, 0)]
    with pytest.raises(TypeError, match="not iterable"):
        list(t)
    with pytest.raises(LayoutError, match="index or a coordinate"):
        t()


def test_partitions_and_slices_of_malformed_arguments():
    copy, mma = TC.get_slice(1), MMA.get_slice(1)
    for f in (copy.partition_S, copy.partition_D, mma.partition_A, mma.partition_B,
              mma.partition_C):
        with pytest.raises(TypeError, match="partition_"):
            f(Layout((4, 8)))
    for tiled in (TC, MMA):
        with pytest.raises(LayoutError, match="get_slice: thread index"):
            tiled.get_slice(2**40)


# --- what stays accepted ------------------------------------------------------------------
def test_shapes_and_ints_stand_for_layouts_where_cute_takes_them():
    A = Layout((3, 4), (4, 1))
    assert layoutalg.blocked_product(A, (2, 5)) == layoutalg.blocked_product(A, Layout((2, 5)))
    assert layoutalg.raked_product(A, 2) == layoutalg.raked_product(A, Layout(2))
    assert layoutalg.composition(Layout((4, 8)), 4) == Layout(4)
    assert layoutalg.logical_divide(Layout(16), 4) == Layout((4, 4), (1, 4))
    t = layoutalg.local_partition(make_identity_tensor((4, 6)), (2, 3), 3)
    assert t.values() == [(1, 1), (3, 1), (1, 4), (3, 4)]
    assert make_tiled_copy(UniversalCopy(32), (4, 2), 1).tile_size == (4, 2)
    assert layoutalg.size((2, (3, 4))) == 24 and layoutalg.rank((2, 3)) == 2
    assert layoutalg.flatten((2, (3, 4))) == (2, 3, 4) and layoutalg.depth(4) == 0
    assert layoutalg.size(np.int64(6)) == 6
    assert layoutalg.select(Layout((2, 3, 4)), -1, 0) == Layout((4, 2), (6, 1))
    assert layoutalg.take(Layout((2, 3, 4)), 1) == Layout((3, 4), (2, 6))
    assert layoutalg.idx2crd(7, (2, 4), (4, 1)) == (1, 3)
    assert layoutalg.idx2crd(3, (1, 4), (0, 1)) == (0, 3)         # extent 1, stride 0
    assert layoutalg.ceil_div((4, 6), 8) == (1, 3)
    assert layoutalg.recast(Layout((8, 4), (1, 8)), 16, 32) == Layout((4, 4), (1, 4))


def test_symbolic_arguments_stay_accepted():
    sympy = pytest.importorskip("sympy")
    from layoutalg.symbolic import extent_symbols
    (n,) = extent_symbols("n")
    t = sympy.Symbol("t", integer=True, nonnegative=True)
    assert layoutalg.size((n, 4)) == 4 * n and layoutalg.product((2, n)) == 2 * n
    assert layoutalg.prefix_product((n, 4)) == (1, n)
    assert layoutalg.idx2crd(t, (4, 8)) == (sympy.Mod(t, 4), sympy.Mod(sympy.floor(t / 4), 8))
    assert layoutalg.crd2idx((t, 1), (4, n)) == t + 4
    assert layoutalg.shape_div((8 * n, 4), (8, 2)) == (n, 2)
    part = layoutalg.local_partition(make_tensor(sympy.Integer(0), Layout((8, 8))), (4, 2), t)
    assert part.shape == (2, 4)
    assert MMA.get_slice(t).thr_idx is t
    assert layoutalg.slice_and_offset((None, t), Layout((4, 8)))[1] == 4 * t


def test_huge_counts_are_refused_or_cost_nothing():
    # a 2**40-thread tiled MMA is decided on its modes (no 8 TiB array of offsets)
    big = make_tiled_mma(UniversalFMA(), (2**20, 2**20))
    assert big.size == 2**40
    with pytest.raises(LayoutError, match="make_tiled_mma: the atom layout"):
        make_tiled_mma(UniversalFMA(), Layout((2, 2), (2, 2)))     # repeats thread 2
