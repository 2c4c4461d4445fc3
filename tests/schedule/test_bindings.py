"""Binding rewrites after split/fuse, and the replay shortcuts: each one must give
exactly what the general path (the arith simplifier, int_set, can_prove, the full
affine detection) gives, after every step of a schedule."""

from __future__ import annotations

import itertools

import pytest
from schedule_shortcuts import general_paths

from metaschedule import te, tir
from metaschedule.schedule import Trace, bindings
from metaschedule.schedule import affine as af
from metaschedule.schedule import analysis as an
from metaschedule.testing import op_matmul
from metaschedule.tir import Add, BufferLoad, Range, Var
from metaschedule.tir.arith.iter_map import is_affine_binding
from metaschedule.tir.buffer import Buffer
from metaschedule.tir.expr import const
from metaschedule.tir.functor import post_order_visit
from metaschedule.tir.structural import structural_equal
from metaschedule.tir.structural_key import MAX_NODES


def assert_shortcuts_change_nothing(func, build):
    """After each step of ``build(sch)``, the module is the same with the shortcuts as
    without them."""
    sch = tir.Schedule(func, seed=3)
    build(sch)
    trace = sch.trace
    for n in range(1, len(trace.insts) + 1):
        prefix = Trace(trace.insts[:n], trace.decisions)
        fast = tir.Schedule(func, seed=3)
        prefix.apply_to_schedule(fast, remove_postproc=False)
        with general_paths():
            slow = tir.Schedule(func, seed=3)
            prefix.apply_to_schedule(slow, remove_postproc=False)
        assert structural_equal(fast.mod, slow.mod), (
            f"after {trace.insts[n - 1].kind.name}:\n{fast.mod}\n!=\n{slow.mod}"
        )


def conv():
    data = te.placeholder((1, 6, 6, 4), "float32", "data")
    kernel = te.placeholder((3, 3, 4, 8), "float32", "kernel")
    return te.create_prim_func([data, kernel, te.ops.conv2d_nhwc(data, kernel, padding=1)])


# ----------------------------------------------------------------------------- split


def test_tiled_value_is_what_the_simplifier_gives():
    for factors in itertools.chain.from_iterable(
        itertools.product([1, 2, 3], repeat=n) for n in (1, 2, 3, 4)
    ):
        for preserve, dtype in itertools.product((True, False), ("int32", "int64")):
            vs = [Var(f"i_{k}", dtype) for k in range(len(factors))]
            fused = vs[0]
            for v, f in zip(vs[1:], factors[1:]):
                fused = fused * f + v
            dom = {v: Range(const(0, dtype), const(f, dtype)) for v, f in zip(vs, factors)}
            (slow,) = bindings.simplify_bindings([fused], dom, const(True), preserve)
            fast = bindings.tiled_value(vs, list(factors), preserve)
            if fast is None:  # every loop a unit loop that is not preserved
                assert not preserve and set(factors) == {1} and slow.value == 0
            else:
                assert structural_equal(fast, slow), (factors, preserve, str(fast), str(slow))


def tile_matmul(sch, factors=((2, 4, 2), (3, 1, 4), (4, 2)), preserve=True):
    b = sch.get_block("T_matmul_NN")
    loops = sch.get_loops(b)
    tiles = [sch.split(lp, list(f), preserve_unit_iters=preserve) for lp, f in zip(loops, factors)]
    (i0, i1, i2), (j0, j1, j2), (k0, k1) = tiles
    sch.reorder(i0, j0, i1, j1, k0, i2, j2, k1)
    return b, tiles


@pytest.mark.parametrize("preserve", [True, False])
def test_shortcuts_give_the_general_module_for_tiling(preserve):
    def build(sch):
        b, ((i0, i1, i2), (j0, j1, j2), (k0, k1)) = tile_matmul(sch, preserve=preserve)
        cw = sch.cache_write(b, 0, "local")
        sch.reverse_compute_at(cw, j1, preserve_unit_loops=preserve)
        sch.decompose_reduction(b, k0)
        fused = sch.fuse(i0, j0, i1, preserve_unit_iters=preserve)  # j0 is a unit loop
        sch.parallel(fused)
        sch.vectorize(j2)
        sch.split(k1, [None, 1], preserve_unit_iters=preserve)

    assert_shortcuts_change_nothing(op_matmul(16, 12, 8), build)


def test_shortcuts_give_the_general_module_for_conv():
    def build(sch):
        pad = sch.get_block("PaddedInput")
        conv_b = sch.get_block("conv2d_nhwc")
        n, h, w, co, rh, rw, rc = sch.get_loops(conv_b)
        h0, h1 = sch.split(h, [3, 2])
        co0, co1 = sch.split(co, [None, 4])
        sch.reorder(h0, co0, w, h1, rh, rw, rc, co1)
        sch.compute_at(pad, w)  # a halo: bindings h0 * 2 + ax0 over a larger domain
        sch.fuse(n, h0, co0)
        sch.split(rc, [2, 2])

    assert_shortcuts_change_nothing(conv(), build)


def test_imperfect_split_takes_the_general_path_and_stays_affine():
    sch = tir.Schedule(op_matmul(10, 12, 8))
    i, _, _ = sch.get_loops(sch.get_block("T_matmul_NN"))
    i0, i1 = sch.split(i, [3, 4])
    r = sch.state.block_realize("main", "T_matmul_NN")
    assert str(r.predicate) == "i_0 * 4 + i_1 < 10"
    assert af.has_affine_binding(sch.state, "main", r)
    sch.parallel(i0)  # accepted: affine under the predicate
    assert sch.get(i0).kind is tir.ForKind.PARALLEL


# ----------------------------------------------------------------------------- fuse


def test_fuse_digits_are_what_the_simplifier_gives():
    def build(sch):
        b, ((i0, i1, i2), (j0, j1, j2), (k0, k1)) = tile_matmul(sch)
        sch.fuse(j1, k0)  # a fused data-parallel and reduction digit: general path
        sch.fuse(i0, j0)
        sch.fuse(i2, j2)

    assert_shortcuts_change_nothing(op_matmul(16, 12, 8), build)


def test_fuse_records_the_affinity_of_the_new_bindings():
    sch = tir.Schedule(op_matmul(16, 12, 8))
    b, ((i0, i1, i2), (j0, j1, j2), _) = tile_matmul(sch)
    fused = sch.fuse(i0, j0)  # one digit per binding: the shortcut, which records
    r = sch.state.block_realize("main", "T_matmul_NN")
    dom = an.loop_doms(sch.state.loops_above("main", r))
    assert not af.is_tiling_binding(r, dom)
    memo = af.affine_memo(sch.state)
    assert memo.get(r, dom) is True
    assert is_affine_binding(r.iter_values, dom, r.predicate)  # the memo tells the truth
    assert "//" in str(r.iter_values[0]) and sch.get(fused).extent.value == 6
    # two digits of one binding: the simplifier merges them; nothing is claimed until a
    # check asks, which then detects and remembers
    sch.fuse(fused, i1)
    r = sch.state.block_realize("main", "T_matmul_NN")
    dom = an.loop_doms(sch.state.loops_above("main", r))
    assert memo.get(r, dom) is None
    assert af.has_affine_binding(sch.state, "main", r) and memo.get(r, dom) is True


# ----------------------------------------------------------------------------- memo


def _fused_then_split(dtype: str = "int32"):
    """The bindings of a padding block fused whole and split by 64 (what the postprocessor
    does to it in every schedule), over fresh loops."""
    f0, f1 = Var("f_0", dtype), Var("f_1", dtype)
    f = f0 * const(64, dtype) + f1
    values = [const(0, dtype), f // 3584, f // 128 % 28, f % 128]
    dom = {
        f0: Range(const(0, dtype), const(1568, dtype)),
        f1: Range(const(0, dtype), const(64, dtype)),
    }
    return values, dom, (f0, f1)


def test_the_bindings_memo_answers_for_fresh_loops_as_the_simplifier():
    memo = bindings.BindingsMemo()
    for _ in range(3):
        values, dom, loops = _fused_then_split()
        got = memo.simplify(values, dom, const(True), True)
        want = bindings.simplify_bindings(values, dom, const(True), True)
        assert structural_equal(got, want)
        assert [str(v) for v in got] == ["0", "f_0 // 56", "f_0 // 2 % 28", "f_0 % 2 * 64 + f_1"]
        # the answer is in this call's loops
        assert an.expr_vars(got) == set(loops)
        assert got[0] is values[0]  # an unchanged binding is the caller's own value
    assert len(memo._memo) == 1


def test_the_bindings_memo_tells_apart_what_the_simplifier_does():
    memo = bindings.BindingsMemo()
    values, dom, _ = _fused_then_split()
    memo.simplify(values, dom, const(True), True)
    # other extents, another dtype, unit loops dropped: other answers
    for case in (
        lambda v, d: (v, {k: Range(r.min, const(r.extent.value * 2)) for k, r in d.items()}),
        lambda v, d: (v[1:], d),
    ):
        other_values, other_dom = case(*_fused_then_split()[:2])
        got = memo.simplify(other_values, other_dom, const(True), True)
        want = bindings.simplify_bindings(other_values, other_dom, const(True), True)
        assert structural_equal(got, want)
    values64, dom64, _ = _fused_then_split("int64")
    got = memo.simplify(values64, dom64, const(True), True)
    assert all(v.dtype == "int64" for v in got)
    unit = {k: Range(r.min, const(1)) for k, r in _fused_then_split()[1].items()}
    values, _, loops = _fused_then_split()
    unit = dict(zip(loops, unit.values()))
    for preserve in (True, False):
        got = memo.simplify(values, unit, const(True), preserve)
        want = bindings.simplify_bindings(values, unit, const(True), preserve)
        assert structural_equal(got, want)
    assert len(memo._memo) == 6


def _buffers_loaded(node) -> set:
    out: set = set()
    post_order_visit(node, lambda x: out.add(x.buffer) if isinstance(x, BufferLoad) else None)
    return out


def test_the_bindings_memo_answers_loads_in_the_callers_buffers(monkeypatch):
    """A binding that loads a buffer (an indirection) is answered in the caller's buffer
    and loops, never in the first caller's."""
    memo = bindings.BindingsMemo()
    simplify_bindings = bindings.simplify_bindings
    computed = []
    monkeypatch.setattr(
        bindings, "simplify_bindings", lambda *args: computed.append(1) or simplify_bindings(*args)
    )
    for k in range(3):
        f0, f1 = Var("f_0"), Var("f_1")
        idx = Buffer(f"idx{k}", (8,), "int32")
        f = f0 * 8 + f1
        values = [BufferLoad(idx, (f // 8,)), f % 8]
        dom = {f0: Range(0, 8), f1: Range(0, 8)}
        got = memo.simplify(values, dom, const(True), True)
        want = simplify_bindings(values, dom, const(True), True)
        assert structural_equal(got, want)
        assert [str(v) for v in got] == [f"idx{k}[f_0]", "f_1"]
        assert _buffers_loaded(got) == {idx} and an.expr_vars(got) == {f0, f1}
    assert len(computed) == 1 and len(memo._memo) == 1


def test_the_bindings_memo_leaves_what_it_cannot_key_to_the_simplifier():
    """Loop domains with a symbolic min or extent, and bindings too large to key, are
    simplified (as the simplifier does) and not remembered."""
    memo = bindings.BindingsMemo()
    n = Var("n")
    for symbolic in (lambda r: Range(r.min, n), lambda r: Range(n, r.extent)):
        for _ in range(2):
            values, dom, (f0, _) = _fused_then_split()
            dom[f0] = symbolic(dom[f0])
            got = memo.simplify(values, dom, const(True), True)
            want = bindings.simplify_bindings(values, dom, const(True), True)
            assert structural_equal(got, want)
    values, dom, (f0, f1) = _fused_then_split()
    large = f0
    for _ in range(MAX_NODES + 1):
        large = Add(large, f1)
    got = memo.simplify([large], dom, const(True), True)
    assert structural_equal(got, bindings.simplify_bindings([large], dom, const(True), True))
    assert not memo._memo


def test_sampled_schedules_replayed_on_one_memo_are_the_general_ones():
    """Replays of a design space on copies of one schedule share the memo of simplified
    bindings (as the search's replays do): each module is the one the general paths give."""
    from metaschedule.space_generator import PostOrderApply
    from metaschedule.tune_context import TuneContext

    ctx = TuneContext(conv(), target="llvm", space_generator=PostOrderApply(), rand_state=3)
    spaces = ctx.generate_design_space()
    base = tir.Schedule(ctx.mod, seed=0)
    compared = 0
    for seed in range(8):
        sch = base.copy()
        sch.seed(seed)
        try:
            spaces[seed % len(spaces)].trace.apply_to_schedule(sch, remove_postproc=True)
            sch.enter_postproc()
            if not all(p.apply(sch) for p in ctx.space_generator.postprocs):
                continue
        except tir.ScheduleError:
            continue
        with general_paths():
            slow = tir.Schedule(ctx.mod, seed=seed)
            Trace(sch.trace.insts, sch.trace.decisions).apply_to_schedule(
                slow, remove_postproc=False
            )
        assert structural_equal(sch.mod, slow.mod), str(sch.trace)
        compared += 1
    assert compared >= 4
    assert bindings.bindings_memo(base.state)._memo  # one memo for all the copies
