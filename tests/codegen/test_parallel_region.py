"""One OpenMP region per function (codegen/c_parallel.py): the region, its barriers, and
random schedules of multi-nest kernels computing the numpy result."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaschedule import te
from metaschedule.codegen import build, codegen_c
from metaschedule.codegen.c_parallel import plan_barriers, plan_items
from metaschedule.schedule import Schedule
from metaschedule.schedule.error import ScheduleError
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.testing import RandomArrays, build_and_check
from metaschedule.tir import Allocate, Buffer, BufferStore, For, ForKind, PrimFunc, SeqStmt, Var
from metaschedule.tir.transform import lower

CPU = Target({"kind": "cpu", "num_cores": 2, "vector_width": 32})
P, S = ForKind.PARALLEL, ForKind.SERIAL
rand = RandomArrays(7)


pytestmark = pytest.mark.usefixtures("session_kernel_cache")


# ----------------------------------------------------------------------------- programs


def _softmax(rows: int = 6, cols: int = 20):
    (x,) = [te.placeholder((rows, cols), "float32", "X")]
    ref = lambda a: (
        np.exp(a - a.max(-1, keepdims=True))
        / np.exp(  # noqa: E731
            a - a.max(-1, keepdims=True)
        ).sum(-1, keepdims=True)
    )
    return te.create_prim_func([x, ops.softmax(x, axis=-1)]), [(rows, cols)], ref


def _conv(h: int = 6, c: int = 4, f: int = 3):
    x = te.placeholder((1, h, h, c), "float32", "X")
    w = te.placeholder((3, 3, c, f), "float32", "W")

    def ref(a, k):
        p = np.pad(a, ((0, 0), (1, 1), (1, 1), (0, 0)))
        out = np.zeros((1, h, h, f), "float32")
        for i in range(3):
            for j in range(3):
                out += np.einsum("nhwc,cf->nhwf", p[:, i : i + h, j : j + h, :], k[i, j])
        return out

    func = te.create_prim_func([x, w, ops.conv2d_nhwc(x, w, stride=1, padding=1)])
    return func, [(1, h, h, c), (3, 3, c, f)], ref


def _pool(h: int = 7, c: int = 5):
    x = te.placeholder((1, h, h, c), "float32", "X")

    def ref(a):
        p = np.pad(a, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
        o = (h + 2 - 3) // 2 + 1
        taps = [p[:, i : i + 2 * o : 2, j : j + 2 * o : 2, :] for i in range(3) for j in range(3)]
        return np.max(np.stack(taps), axis=0)

    func = te.create_prim_func([x, ops.max_pool2d(x, kernel=3, stride=2, padding=1)])
    return func, [(1, h, h, c)], ref


PROGRAMS = {"softmax": _softmax, "padded conv": _conv, "pool": _pool}


def _blocks(sch: Schedule):
    return sch.get_child_blocks(sch.get_block("root"))


def _all_parallel(func: PrimFunc) -> PrimFunc:
    sch = Schedule(func)
    for b in _blocks(sch):
        sch.parallel(sch.get_loops(b)[0 if len(sch.get_loops(b)) < 4 else 1])
    return sch.mod["main"]


def _run(func: PrimFunc, shapes, ref) -> str:
    """``func`` built and checked against ``ref`` on random inputs of ``shapes``."""
    ins = [rand(*s) for s in shapes]
    return build_and_check(func, ins, ref(*ins), target=CPU, rtol=1e-4, atol=1e-5)


def _regions(src: str) -> int:
    return len(re.findall(r"#pragma omp parallel\b", src))


# ----------------------------------------------------------------------------- the region


@pytest.mark.compiler
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_multi_nest_function_opens_one_region(name):
    func, shapes, ref = PROGRAMS[name]()
    src = _run(_all_parallel(func), shapes, ref)
    nests = len(_blocks(Schedule(func)))
    assert _regions(src) == 1
    assert re.search(r"#pragma omp parallel num_threads\(ms_team\(\d+, 2\)\)\n", src)
    assert src.count("#pragma omp for schedule(static)") == nests


def test_softmax_rows_need_no_barrier_between_stages():
    """Every stage is parallel over the rows: iteration i writes and reads row i only."""
    func, _, _ = _softmax()
    src = codegen_c(lower(_all_parallel(func)), CPU).code
    assert src.count("schedule(static) nowait") == 3  # the last keeps the region's barrier


def test_padding_then_conv_keeps_the_barrier():
    """The convolution reads the rows around its own: the padding must be complete."""
    func, _, _ = _conv()
    sch = Schedule(func)
    pad, conv = _blocks(sch)
    sch.parallel(sch.get_loops(pad)[1])  # rows of the padded input (8)
    sch.parallel(sch.get_loops(conv)[1])  # output rows (6)
    src = codegen_c(lower(sch.mod["main"]), CPU).code
    assert _regions(src) == 1 and "nowait" not in src


def _two_loops(offset: int, extent2: int = 8, kind2: ForKind = P, mid: bool = False) -> PrimFunc:
    """T[i] = A[i] * 2 (parallel over 8), then B[i] = T[i + offset] (``kind2`` loop over
    ``extent2``), optionally a serial ``B[0] = B[0] + 1`` between."""
    a, b = Buffer("A", (16,)), Buffer("B", (16,))
    t = Buffer("T", (16,))
    i, j = Var("i"), Var("j")
    fill = For(i, 0, 8, P, BufferStore(t, a[i] * 2.0, (i,)))
    use = For(j, 0, extent2, kind2, BufferStore(b, t[j + offset], (j,)))
    stmts = [fill, use]
    if mid:
        stmts.insert(1, BufferStore(a, a[0] + 1.0, (0,)))
    return PrimFunc((a, b), Allocate(t, SeqStmt(tuple(stmts))))


def _nowaits(func: PrimFunc) -> list[bool]:
    _, items = plan_items(func.body)
    plan_barriers(items)
    return [it.nowait for it in items]


def test_barriers_are_dropped_only_where_proved():
    assert _nowaits(_two_loops(0)) == [True, False]  # the same element per iteration
    assert _nowaits(_two_loops(1)) == [False, False]  # iteration j reads what j+1 wrote
    assert _nowaits(_two_loops(0, extent2=4)) == [False, False]  # other trip counts
    # the serial store writes A, which the first loop reads: the loop's barrier stays;
    # the second loop touches neither A nor what the store reads: the single's goes
    assert _nowaits(_two_loops(0, mid=True)) == [False, True, False]


@pytest.mark.compiler
def test_a_serial_statement_between_nests_runs_once_in_the_region():
    func = _two_loops(0, mid=True)
    lib = build(func, CPU)
    a = np.arange(16, dtype="float32")
    b = np.zeros(16, "float32")
    lib(a, b)
    src = lib.get_source()
    assert _regions(src) == 1 and "#pragma omp single" in src
    np.testing.assert_array_equal(b[:8], np.arange(8) * 2.0)
    assert a[0] == 1.0  # once, not once per thread


@pytest.mark.compiler
def test_a_parallel_loop_inside_a_serial_loop_ends_the_region():
    a, b = Buffer("A", (4, 8)), Buffer("B", (4, 8))
    i, j, k, m = Var("i"), Var("j"), Var("k"), Var("m")
    first = For(i, 0, 4, P, For(j, 0, 8, S, BufferStore(b, a[i, j] + 1.0, (i, j))))
    outer = For(k, 0, 4, S, For(m, 0, 8, P, BufferStore(b, b[k, m] * 2.0, (k, m))))
    func = PrimFunc((a, b), SeqStmt((first, outer)))
    assert [it.kind for it in plan_items(func.body)[1]] == ["parallel", "nested"]
    lib = build(func, CPU)
    x, y = rand(4, 8), np.zeros((4, 8), "float32")
    lib(x, y)
    np.testing.assert_allclose(y, (x + 1) * 2, rtol=1e-6)
    assert lib.get_source().count("#pragma omp parallel for") == 2  # as before


@pytest.mark.compiler
def test_heap_workspaces_are_taken_once_per_thread_for_the_region():
    a, b = Buffer("A", (4, 16384)), Buffer("B", (4,))
    t, u = Buffer("T", (16384,)), Buffer("U", (16384,))  # 64 KB each: heap
    i, j, k, m = Var("i"), Var("j"), Var("k"), Var("m")

    def nest(o, n, buf, scale):
        fill = For(n, 0, 16384, S, BufferStore(buf, a[o, n] * scale, (n,)))
        total = For(n, 0, 16384, S, BufferStore(b, b[o] + buf[n], (o,)))
        return For(o, 0, 4, P, Allocate(buf, SeqStmt((fill, total))))

    func = PrimFunc((a, b), SeqStmt((nest(i, j, t, 1.0), nest(k, m, u, 2.0))))
    lib = build(func, CPU)
    src = lib.get_source()
    body = src[src.index("(void** args) {") :]
    assert _regions(body) == 1 and body.count("ms_ws_get(") == 2
    assert body.index("ms_ws_get(") < body.index("#pragma omp for")
    x = rand(4, 16384)
    for _ in range(2):  # the second call reuses the workspace
        y = np.zeros(4, "float32")
        lib(x, y)
        np.testing.assert_allclose(y, x.sum(1) * 3, rtol=1e-3, atol=1e-2)


def test_a_single_parallel_nest_is_emitted_as_before():
    func, _, _ = _softmax()
    sch = Schedule(func)
    sch.parallel(sch.get_loops(_blocks(sch)[3])[0])
    src = codegen_c(lower(sch.mod["main"]), CPU).code
    pragma = r"#pragma omp parallel for num_threads\(ms_team\(\d+, 2\)\) schedule\(runtime\)"
    assert len(re.findall(pragma, src)) == 1
    assert "omp for" not in src.replace("omp parallel for", "")


# ----------------------------------------------------------------------------- random


def _random_schedule(func: PrimFunc, data) -> PrimFunc:
    """Per block: serial, or a parallel outer loop after a random split or fuse; maybe a
    vectorized innermost loop."""
    sch = Schedule(func)
    for b in _blocks(sch):
        loops = sch.get_loops(b)
        how = data.draw(st.sampled_from(["serial", "outer", "fuse", "split", "second"]))
        try:
            if how == "outer":
                sch.parallel(loops[0])
            elif how == "second" and len(loops) > 1:
                sch.parallel(loops[1])
            elif how == "fuse" and len(loops) > 1:
                sch.parallel(sch.fuse(loops[0], loops[1]))
            elif how == "split":
                pos = data.draw(st.integers(0, min(1, len(loops) - 1)))
                factor = data.draw(st.sampled_from([2, 3, 4]))
                outer, _ = sch.split(loops[pos], factors=[None, factor])
                sch.parallel(outer)
            if data.draw(st.booleans()):
                sch.vectorize(sch.get_loops(b)[-1])
        except ScheduleError:
            pass  # not legal for this block (a reduction loop): keep what was done
    return sch.mod["main"]


@pytest.mark.compiler
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=st.sampled_from(list(PROGRAMS)), data=st.data())
def test_random_schedules_of_multi_nest_kernels_compute_numpy(name, data):
    func, shapes, ref = PROGRAMS[name]()
    scheduled = _random_schedule(func, data)
    src = _run(scheduled, shapes, ref)
    _, items = plan_items(lower(scheduled).body)
    kinds = [it.kind for it in items]
    if kinds.count("parallel") >= 2 and "nested" not in kinds:
        assert _regions(src) == 1
