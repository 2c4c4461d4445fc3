"""Loop versioning (``codegen/c_versioning.py``): a loop body whose loads are guarded by
inlined padding gets an unguarded copy for the interior, chosen by one test per
iteration; the copy's loads are plain vector loads, and every sampled schedule of padded
convolutions and pooling still computes the numpy result."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaschedule import te, tir
from metaschedule.codegen import build, c_codegen
from metaschedule.codegen.c_interior import interior_share
from metaschedule.codegen.c_versioning import adds_tests, count_ifs, version_guards
from metaschedule.feature_extractor.per_store_feature import FEATURE_LOWER_PASSES
from metaschedule.space_generator import PostOrderApply
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.testing import RandomArrays, op_matmul
from metaschedule.tir import expr as E
from metaschedule.tir.stmt import BufferStore, For, ForKind, IfThenElse
from metaschedule.tir.transform import lower
from metaschedule.tir.transform.lower import LOWER_PASSES
from metaschedule.tune_context import TuneContext

CPU = Target("llvm -mcpu=x86-64-v4 -num-cores=2")  # AVX-512 (testing.isas)
rand = RandomArrays(5)


pytestmark = pytest.mark.usefixtures("session_kernel_cache")


def _pad_hw(x, p: int, value: float = 0.0):
    return np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)), constant_values=value)


# ----------------------------------------------------------------------------- operators
def _depthwise(h: int, w: int, c: int):
    x = te.placeholder((1, h, w, c), "float32", "X")
    k = te.placeholder((3, 3, c), "float32", "K")
    return te.create_prim_func([x, k, ops.depthwise_conv2d_nhwc(x, k, stride=1, padding=1)])


def _depthwise_np(x, k):
    h, w = x.shape[1:3]
    xp = _pad_hw(x, 1)
    return sum(xp[:, a : a + h, b : b + w, :] * k[a, b] for a in range(3) for b in range(3))


def _conv(h: int, w: int, c: int, f: int):
    x = te.placeholder((1, h, w, c), "float32", "X")
    k = te.placeholder((3, 3, c, f), "float32", "W")
    return te.create_prim_func([x, k, ops.conv2d_nhwc(x, k, stride=1, padding=1)])


def _conv_np(x, k):
    h, w = x.shape[1:3]
    xp = _pad_hw(x, 1)
    out = np.zeros((1, h, w, k.shape[3]), "float32")
    for a in range(3):
        for b in range(3):
            out += np.tensordot(xp[:, a : a + h, b : b + w, :], k[a, b], axes=([3], [0]))
    return out


def _windows(xp, stride: int):
    from numpy.lib.stride_tricks import sliding_window_view

    return sliding_window_view(xp, (3, 3), axis=(1, 2))[:, ::stride, ::stride]


def _max_pool(h: int, w: int, c: int):
    x = te.placeholder((1, h, w, c), "float32", "X")
    return te.create_prim_func([x, ops.max_pool2d(x, 3, 2, padding=1)])


def _max_pool_np(x):
    return _windows(_pad_hw(x, 1, -np.inf), 2).max(axis=(4, 5))


def _avg_pool(h: int, w: int, c: int):
    x = te.placeholder((1, h, w, c), "float32", "X")
    return te.create_prim_func([x, ops.avg_pool2d(x, 3, 2, padding=1)])


def _avg_pool_np(x):
    return _windows(_pad_hw(x, 1), 2).sum(axis=(4, 5)) / 9.0


def _conv_transpose(h: int, w: int, c: int, f: int):
    x = te.placeholder((1, h, w, c), "float32", "X")
    k = te.placeholder((4, 4, c, f), "float32", "W")
    return te.create_prim_func([x, k, ops.conv2d_transpose_nhwc(x, k, stride=2, padding=1)])


def _conv_transpose_np(x, k):
    h, w = x.shape[1:3]
    full = np.zeros((1, 2 * h + 2, 2 * w + 2, k.shape[3]), "float32")
    for a in range(4):
        for b in range(4):
            full[:, a : a + 2 * h : 2, b : b + 2 * w : 2, :] += np.tensordot(
                x, k[a, b], axes=([3], [0])
            )
    return full[:, 1 : 2 * h + 1, 1 : 2 * w + 1, :]


OPERATORS = {  # name: (PrimFunc, inputs, numpy result)
    "depthwise": lambda: (_depthwise(7, 9, 16), [rand(1, 7, 9, 16), rand(3, 3, 16)], _depthwise_np),
    "conv": lambda: (_conv(6, 6, 8, 16), [rand(1, 6, 6, 8), rand(3, 3, 8, 16)], _conv_np),
    "max_pool": lambda: (_max_pool(9, 9, 16), [rand(1, 9, 9, 16)], _max_pool_np),
    "avg_pool": lambda: (_avg_pool(9, 9, 16), [rand(1, 9, 9, 16)], _avg_pool_np),
    "conv_transpose": lambda: (
        _conv_transpose(5, 5, 8, 16),
        [rand(1, 5, 5, 8), rand(4, 4, 8, 16)],
        _conv_transpose_np,
    ),
}


# ----------------------------------------------------------------------------- emitted C
def _depthwise_tile(h: int = 10, w: int = 16, c: int = 32) -> tir.Schedule:
    """Padding inlined; output rows tiled 4 pixels x 16 channels, the 3x3 window inside."""
    sch = tir.Schedule(_depthwise(h, w, c))
    block = sch.get_block("depthwise_conv2d_nhwc")
    sch.compute_inline(sch.get_block("PaddedInput"))
    n, y, x, ch, ry, rx = sch.get_loops(block)
    x0, x1 = sch.split(x, [None, 4])
    c0, c1 = sch.split(ch, [None, 16])
    sch.reorder(n, y, x0, c0, ry, rx, x1, c1)
    sch.parallel(sch.fuse(n, y))
    sch.decompose_reduction(block, ry)
    sch.vectorize(c1)
    return sch


def _fast_and_slow(src: str) -> tuple[str, str]:
    """The interior copy and the border copy of the one versioned body in ``src``."""
    m = re.search(r"\n( *)if \(([^\n]*)\) \{\n(.*?)\n\1\} else \{\n(.*?)\n\1\}\n", src, re.S)
    assert m is not None, "no versioned body"
    return m.group(3), m.group(4)


@pytest.mark.compiler
def test_the_interior_copy_of_a_padded_window_loads_plain_vectors():
    sch = _depthwise_tile()
    x, k = rand(1, 10, 16, 32), rand(3, 3, 32)
    lib = build(sch.mod, CPU)
    out = np.zeros((1, 10, 16, 32), "float32")
    lib(x, k, out)
    np.testing.assert_allclose(out, _depthwise_np(x, k), rtol=1e-4, atol=1e-4)
    src = lib.get_source()
    fast, slow = _fast_and_slow(src)
    # the test: the tile's rows and pixels, window included, inside the input
    test = re.search(r"\n *if \((nn_yy_fused[^\n]*)\) \{\n", src).group(1)
    assert test == "nn_yy_fused >= 1 && nn_yy_fused <= 8 && xx_0 * 4 >= 1 && xx_0 * 4 <= 11"
    # interior: no guard, each of the 6 x 3 input vectors loaded once into a register
    assert "?" not in fast and ">= 1" not in fast
    plain = re.findall(r"(\w+) = ms_load_f32x16\(&X\[[^;]*\); MS_IN_REG\(\1\);", fast)
    assert len(plain) == len(set(plain)) == 6 * 3
    # border: each input vector loaded once too, and only those the loops' ranges do not
    # prove inside keep a guard: the window's first and last rows and, in the middle
    # row, its first and last columns (14 of 18)
    loads = re.findall(r"(\w+) = (?:\([^;]*\? )?ms_load_f32x16\(&X\[[^;]*; MS_IN_REG\(\1\);", slow)
    assert len(loads) == len(set(loads)) == 6 * 3
    assert len(re.findall(r"\? ms_load_f32x16\(&X\[", slow)) == 2 * 6 + 2


@pytest.mark.compiler
def test_versioning_off_keeps_one_guarded_body(monkeypatch):
    monkeypatch.setattr(c_codegen, "VERSION_GUARDS", False)
    src = build(_depthwise_tile().mod, CPU).get_source()
    assert "} else {" not in src
    # every tile runs the guarded body: the window's edge loads keep their guards
    assert len(re.findall(r"\? ms_load_f32x16\(&X\[", src)) == 2 * 6 + 2


def _lowered(sch: tir.Schedule):
    return lower(sch.mod["main"])


def _versioned(stmt) -> list[For]:
    """The loops whose body is a versioned pair (an if with an else)."""
    return [
        f for f in _loops(stmt) if isinstance(f.body, IfThenElse) and f.body.else_case is not None
    ]


def _loops(stmt) -> list[For]:
    out: list[For] = []

    def walk(s):
        if isinstance(s, For):
            out.append(s)
        for name in ("body", "then_case", "else_case"):
            child = getattr(s, name, None)
            if child is not None:
                walk(child)
        for child in getattr(s, "seq", ()):
            walk(child)

    walk(stmt)
    return out


def test_no_copy_when_no_tile_is_interior():
    # 8 pixels tiled by 4: both tiles touch the border, the copy would never run
    assert not _versioned(version_guards(_lowered(_depthwise_tile(10, 8, 32)).body))
    assert _versioned(version_guards(_lowered(_depthwise_tile(10, 16, 32)).body))


def test_interior_share_counts_the_iterations_that_pass():
    y, x = E.Var("y", "int32"), E.Var("x", "int32")
    inner = For(x, E.const(0, "int32"), E.const(8, "int32"), ForKind.SERIAL, _nop())
    outer = For(y, E.const(0, "int32"), E.const(10, "int32"), ForKind.SERIAL, inner)
    test = E.And(E.GE(y, E.const(1, "int32")), E.LE(x * 4, E.const(11, "int32")))
    assert interior_share(test, [outer, inner]) == pytest.approx(9 / 10 * 3 / 8)
    big = For(y, E.const(0, "int32"), E.const(1 << 20, "int32"), ForKind.SERIAL, _nop())
    half = E.LT(E.FloorMod(y, E.const(2, "int32")), E.const(1, "int32"))
    assert interior_share(half, [big]) == pytest.approx(0.5, abs=0.02)  # sampled


def _nop():
    from metaschedule.tir.stmt import Evaluate

    return Evaluate(E.const(0, "int32"))


def test_the_test_sits_above_the_reduction_loops():
    body = version_guards(_lowered(_depthwise_tile()).body)
    versioned = _versioned(body)
    assert [f.loop_var.name for f in versioned] == ["ff_0"]
    fast = versioned[0].body.then_case
    names = [f.loop_var.name for f in _loops(fast)]
    assert "ry" in names and "rx" in names  # the window loops are inside the copy


def test_a_padding_copy_is_not_versioned():
    # a padding block computed into its own buffer: its guard feeds no accumulation (a
    # copy, measured no faster versioned), vectorized or not
    sch = tir.Schedule(_depthwise(6, 8, 16))
    assert not _versioned(version_guards(_lowered(sch).body))
    sch.vectorize(sch.get_loops(sch.get_block("PaddedInput"))[-1])
    assert not _versioned(version_guards(_lowered(sch).body))


def test_a_large_tile_is_not_versioned(monkeypatch):
    # 4 pixels x 9 taps = 36 vector updates per test, and 4 x 16 scalar init stores
    from metaschedule.codegen import c_versioning

    body = _lowered(_depthwise_tile(10, 16, 32)).body
    monkeypatch.setattr(c_versioning, "MAX_BODY_STEPS", 100)
    assert _versioned(version_guards(body))
    monkeypatch.setattr(c_versioning, "MAX_BODY_STEPS", 99)
    assert not _versioned(version_guards(body))


def test_unprovable_comparisons_stay_in_the_interior_copy(monkeypatch):
    # conv2d_transpose's dilated input: `(u - 2) % 2 == 0` cannot be bounded, the range
    # comparisons can (a body of 2048 updates: the size bound lifted)
    from metaschedule.codegen import c_versioning

    monkeypatch.setattr(c_versioning, "MAX_BODY_STEPS", 1 << 20)
    func = _conv_transpose(5, 5, 8, 16)
    sch = tir.Schedule(func)
    sch.compute_inline(sch.get_block("data_pad"))
    block = sch.get_block("conv2d_transpose_nhwc")
    n, y, x, f, ry, rx, rc = sch.get_loops(block)
    sch.reorder(n, y, x, ry, rx, rc, f)
    sch.decompose_reduction(block, ry)
    body = version_guards(_lowered(sch).body)
    versioned = _versioned(body)
    assert versioned
    selects: list[E.Select] = []

    def visit(s):
        if isinstance(s, BufferStore):
            _collect_selects(s.value, selects)
        for name in ("body", "then_case"):
            child = getattr(s, name, None)
            if child is not None:
                visit(child)
        for child in getattr(s, "seq", ()):
            visit(child)

    visit(versioned[0].body.then_case)
    assert selects, "the strided guard must stay"
    for sel in selects:
        text = str(sel.condition)
        assert "%" in text or "floormod" in text.lower()
        assert "<" not in text and ">" not in text


def _collect_selects(e, out):
    if isinstance(e, E.Select):
        out.append(e)
    for name in ("a", "b", "condition", "true_value", "false_value", "value"):
        child = getattr(e, name, None)
        if isinstance(child, E.PrimExpr):
            _collect_selects(child, out)


def _imperfect_row_tiles():
    """A padded depthwise conv, the padding inlined, 14 pixels split by 4 (the last tile
    guarded by ``x0 * 4 + x1 < 14``), channels vectorized."""
    x = te.placeholder((1, 14, 14, 16), "float32", "X")
    k = te.placeholder((3, 3, 16), "float32", "K")
    sch = tir.Schedule(
        te.create_prim_func([x, k, ops.depthwise_conv2d_nhwc(x, k, stride=1, padding=1)])
    )
    block = sch.get_block("depthwise_conv2d_nhwc")
    sch.compute_inline(sch.get_block("PaddedInput"))
    n, y, xx, ch, ry, rx = sch.get_loops(block)
    x0, x1 = sch.split(xx, [None, 4])
    sch.reorder(n, y, x0, ry, rx, x1, ch)
    sch.vectorize(ch)
    return sch


def test_an_imperfect_tile_predicate_is_dropped_in_the_interior():
    # 14 split by 4: `x0 * 4 + x1 < 14` guards the last tile only
    sch = _imperfect_row_tiles()
    body = version_guards(_lowered(sch).body)
    versioned = _versioned(body)
    assert len(versioned) == 1
    fast = versioned[0].body.then_case
    # the tile predicate is gone, the init's `ry == 0 and rx == 0` stays
    ifs = [str(s.condition) for s in _stmts(fast) if isinstance(s, IfThenElse)]
    assert ifs == ["ry == 0 and rx == 0"]
    # one test per bound: `xx_0 * 4 <= 9` (the window) implies `xx_0 * 4 <= 10` (the tile)
    test = str(versioned[0].body.condition)
    assert test == "xx_0 * 4 <= 9 and yy >= 1 and yy <= 12 and xx_0 * 4 >= 1"


# ----------------------------------------------------------------------------- invariant guards
def _pool_padding_per_channel() -> tir.Schedule:
    """An average pool whose padding is computed per output pixel and channel (its 3x3
    window into a small buffer), as TVM's best apool schedule: the 9 guards are invariant
    in the channel loop ``ax3``."""
    sch = tir.Schedule(_avg_pool(9, 9, 16))
    n, y, x, ch, _, _ = sch.get_loops(sch.get_block("pool_sum"))
    sch.parallel(sch.fuse(n, y, x))
    sch.compute_at(sch.get_block("pad_temp"), ch)
    return sch


def _versioned_loops(stmt) -> list[IfThenElse]:
    """The versioned loops: an if whose two branches are copies of one loop."""
    return [
        s
        for s in _stmts(stmt)
        if isinstance(s, IfThenElse)
        and isinstance(s.then_case, For)
        and isinstance(s.else_case, For)
        and s.then_case.loop_var is s.else_case.loop_var
    ]


@pytest.mark.compiler
def test_a_loop_with_invariant_guards_gets_an_unguarded_copy_ahead_of_it():
    sch = _pool_padding_per_channel()
    x = rand(1, 9, 9, 16)
    lib = build(sch.mod, CPU)
    out = np.zeros((1, 5, 5, 16), "float32")
    lib(x, out)
    np.testing.assert_allclose(out, _avg_pool_np(x), rtol=1e-5, atol=1e-5)
    src = lib.get_source()
    m = re.search(
        r"\n( *)if \((\(ax0_ax1_ax2_fused[^\n]*)\) \{\n(.*?)\n\1\} else \{\n(.*?)\n\1\}\n",
        src,
        re.S,
    )
    assert m is not None, "no versioned channel loop"
    # the test: the pixel's window inside the input, ahead of the channel loop
    assert "ax3" not in m.group(2)
    fast, slow = m.group(3), m.group(4)
    assert fast.lstrip().startswith("for (int32_t ax3 = 0; ax3 < 16; ++ax3) {")
    assert slow.lstrip().startswith("for (int32_t ax3 = 0; ax3 < 16; ++ax3) {")
    # the interior loop loads plainly (GCC vectorizes it), the border one keeps its guard
    assert "?" not in fast and "pad_temp[ax0 * 3 + ax1] = X[" in fast
    assert len(re.findall(r"\? X\[", slow)) == 1


def test_the_test_of_invariant_guards_goes_ahead_of_the_loop(monkeypatch):
    from metaschedule.codegen import c_versioning

    body = _lowered(_pool_padding_per_channel()).body
    (versioned,) = _versioned_loops(version_guards(body))
    assert versioned.then_case.loop_var.name == "ax3"
    assert {v.name for v in tir.functor.collect_vars(versioned.condition)} == {"ax0_ax1_ax2_fused"}
    assert any(f is versioned.else_case for f in _loops(body))  # the original loop, kept
    selects: list[E.Select] = []
    for s in _stmts(versioned.then_case):
        if isinstance(s, BufferStore):
            _collect_selects(s.value, selects)
    assert not selects
    # 9 guards an iteration: a loop with fewer than MIN_INVARIANT_GUARDS keeps its guards
    # (GCC unswitches one or two), and a padding copy is not versioned otherwise
    monkeypatch.setattr(c_versioning, "MIN_INVARIANT_GUARDS", 9)
    assert _versioned_loops(version_guards(body))
    monkeypatch.setattr(c_versioning, "MIN_INVARIANT_GUARDS", 10)
    assert tir.structural_equal(version_guards(body), body)


def test_a_loop_holding_a_vectorized_loop_is_not_versioned_whole():
    # the depthwise tile's channel loop ff_0 holds the vectorized c1: the test stays in it
    body = version_guards(_lowered(_depthwise_tile()).body)
    assert not _versioned_loops(body)
    assert [f.loop_var.name for f in _versioned(body)] == ["ff_0"]


def test_an_accumulator_allocated_inside_the_loop_leaves_it_eligible():
    # pool_sum computed per channel (allocated in the channel loop's body, as TVM's rfactor
    # apool schedule has it): its accumulation runs inside the body, not across ax3
    sch = tir.Schedule(_avg_pool(9, 9, 16))
    sch.compute_inline(sch.get_block("pad_temp"))
    n, y, x, c = sch.get_loops(sch.get_block("pool_avg"))
    sch.parallel(sch.fuse(n, y, x))
    sch.compute_at(sch.get_block("pool_sum"), c)
    versioned = _versioned_loops(version_guards(_lowered(sch).body))
    assert [s.then_case.loop_var.name for s in versioned] == ["ax3"]


@pytest.mark.compiler
@pytest.mark.parametrize("name", ["avg_pool", "depthwise", "max_pool"])
def test_sampled_schedules_with_a_loop_versioned_whole_compute_the_numpy_result(name, monkeypatch):
    # sampled schedules with a loop versioned whole (invariant guards): the vector build,
    # the bounds-checked one, and for the pools (sums, maxima: no product to contract into
    # an FMA) the very bits of the build without versioning
    _, _, args, want = _space(name)
    checked = 0
    for seed in range(200):  # a max_pool schedule with such a loop is about 1 in 40
        sch = _sampled(name, seed)
        if sch is None or not _versioned_loops(version_guards(_lowered(sch).body)):
            continue
        outs = []
        for debug in (False, True):
            lib = build(sch.mod, CPU, debug=debug)
            out = np.zeros(want.shape, "float32")
            packed = lib.pack_weights(*args, out)
            lib(*packed[:-1], out)
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(sch.trace))
            outs.append(out)
        if name != "depthwise":
            with monkeypatch.context() as m:
                m.setattr(c_codegen, "VERSION_GUARDS", False)
                lib = build(sch.mod, CPU)
            plain = np.zeros(want.shape, "float32")
            lib(*lib.pack_weights(*args, plain)[:-1], plain)
            np.testing.assert_array_equal(outs[0], plain, err_msg=str(sch.trace))
        checked += 1
        if checked == 2:
            break
    assert checked >= 1


def _stmts(s):
    yield s
    for name in ("body", "then_case", "else_case"):
        child = getattr(s, name, None)
        if child is not None:
            yield from _stmts(child)
    for child in getattr(s, "seq", ()):
        yield from _stmts(child)


# ----------------------------------------------------------------------------- numerics
_SPACES: dict[str, tuple] = {}


def _space(name: str):
    if name not in _SPACES:
        func, args, ref = OPERATORS[name]()
        ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=3)
        spaces = ctx.generate_design_space()
        _SPACES[name] = (ctx, spaces, args, ref(*args))
    return _SPACES[name]


def _sampled(name: str, seed: int) -> tir.Schedule | None:
    ctx, spaces, _, _ = _space(name)
    return _replayed(ctx, spaces, seed)


def _replayed(ctx, spaces, seed: int) -> tir.Schedule | None:
    """A random point of one of ``ctx``'s design ``spaces``, postprocessed; None where a
    primitive or a postprocessor rejects it."""
    space = spaces[seed % len(spaces)]
    sch = tir.Schedule(ctx.mod, seed=seed, error_render_level="none")
    try:
        tir.Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
    except tir.ScheduleError:
        return None
    sch.enter_postproc()
    if not all(p.apply(sch) for p in ctx.space_generator.postprocs):
        return None
    return sch


@pytest.mark.compiler
@pytest.mark.parametrize("name", sorted(OPERATORS))
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**31 - 1))
def test_sampled_schedules_of_padded_operators_compute_the_numpy_result(name, seed):
    sch = _sampled(name, seed)
    if sch is None:
        return
    _, _, args, want = _space(name)
    # the vector build, and the bounds-checked one (raises on an access outside a buffer)
    for debug in (False, True):
        lib = build(sch.mod, CPU, debug=debug)
        out = np.zeros(want.shape, "float32")
        packed = lib.pack_weights(*args, out)
        lib(*packed[:-1], out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(sch.trace))


@pytest.mark.compiler
@pytest.mark.parametrize("name", ["avg_pool", "depthwise", "max_pool"])
def test_versioned_sampled_schedules_compute_the_numpy_result(name):
    # the sampled schedules whose C has an unguarded interior copy, checked explicitly
    _, _, args, want = _space(name)
    checked = 0
    for seed in range(40):
        sch = _sampled(name, seed)
        if sch is None or not _versioned(version_guards(_lowered(sch).body)):
            continue
        for debug in (False, True):
            lib = build(sch.mod, CPU, debug=debug)
            out = np.zeros(want.shape, "float32")
            packed = lib.pack_weights(*args, out)
            lib(*packed[:-1], out)
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(sch.trace))
        checked += 1
        if checked == 2:
            break
    assert checked >= 1


def _full_walk(body):
    """``version_guards(body)`` by a walk that analyses every loop (none passed over by
    its facts: guard-free, too many stores, too few guards)."""
    from metaschedule.codegen import c_versioning  # local: private parts under test

    class _AllLoops(tir.functor.Visitor):
        def __init__(self) -> None:
            self.ids: set[int] = set()

        def visit_For(self, loop: For) -> None:
            self.ids.add(id(loop))
            self.generic_visit(loop)

    every = _AllLoops()
    every.visit(body)
    anything = c_versioning._Facts(steps=0, counted=1 << 40, guards=1 << 40, vectorized=False)
    return c_versioning._Versioner(dict.fromkeys(every.ids, anything)).walk(body, [], {})[0]


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_the_walk_passing_over_loops_by_their_facts_versions_what_the_full_walk_does(name):
    """Loops with no guard inside, too many stores or too few guards are passed over
    without a look (_FactsWalk); the result is the one of a walk that examines every loop."""
    compared = 0
    for seed in range(12):
        sch = _sampled(name, seed)
        if sch is None:
            continue
        body = _lowered(sch).body
        assert tir.structural_equal(version_guards(body), _full_walk(body)), str(sch.trace)
        compared += 1
    assert compared >= 4


# ----------------------------------------------------------------------------- adds_tests
#: the nests of the predicate's tests: padded windows, and a matmul whose odd sizes give
#: imperfect tiles (``if`` statements around the updates)
_NESTS = {
    "depthwise": lambda: _depthwise(7, 9, 16),
    "conv": lambda: _conv(6, 6, 8, 16),
    "max_pool": lambda: _max_pool(9, 9, 16),
    "avg_pool": lambda: _avg_pool(9, 9, 16),
    "conv_transpose": lambda: _conv_transpose(5, 5, 8, 16),
    "matmul": lambda: op_matmul(30, 20, 12),
}
_NEST_SPACES: dict[str, tuple] = {}


def _sampled_nest(name: str, seed: int) -> tir.Schedule | None:
    if name not in _NEST_SPACES:
        ctx = TuneContext(_NESTS[name](), target="llvm", space_generator=PostOrderApply())
        _NEST_SPACES[name] = (ctx, ctx.generate_design_space())
    ctx, spaces = _NEST_SPACES[name]
    return _replayed(ctx, spaces, seed)


def _adds_tests_by_counting(body) -> bool:
    return count_ifs(version_guards(body)) > count_ifs(body)


@pytest.mark.parametrize("name", sorted(_NESTS))
@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1))
def test_adds_tests_agrees_with_the_transform_on_sampled_schedules(name, seed):
    """``adds_tests`` (which stops at the first test) says what comparing the ``if``
    statements of ``version_guards``' result with the body's says, on bodies lowered
    for the code generator and for the prior; the transform is the full walk's."""
    sch = _sampled_nest(name, seed)
    if sch is None:
        return
    for passes in (LOWER_PASSES, FEATURE_LOWER_PASSES):
        body = lower(sch.mod["main"], passes).body
        assert adds_tests(body) == _adds_tests_by_counting(body), str(sch.trace)
        assert tir.structural_equal(version_guards(body), _full_walk(body)), str(sch.trace)


def test_adds_tests_on_hand_written_nests():
    versioned = _lowered(_depthwise_tile(10, 16, 32)).body  # a test per output tile
    assert adds_tests(versioned) and _adds_tests_by_counting(versioned)
    no_interior = _lowered(_depthwise_tile(10, 8, 32)).body
    assert not adds_tests(no_interior) and not _adds_tests_by_counting(no_interior)
    padding_copy = _lowered(tir.Schedule(_depthwise(6, 8, 16))).body
    assert not adds_tests(padding_copy) and not _adds_tests_by_counting(padding_copy)
    # ``if`` statements (imperfect tiles) in the body: the count goes on past a test
    sch = _imperfect_row_tiles()
    body = _lowered(sch).body
    assert count_ifs(body) > 0
    assert adds_tests(body) and _adds_tests_by_counting(body)
