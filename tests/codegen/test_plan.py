"""The code generator as a pipeline (codegen/passes.py, codegen/plan.py): the passes in
order, the plan as frozen data that tests read instead of C comments, the emitter writing
what the plan says, and the module structure (no import cycle, no private name crossing
modules, the CUDA writer apart from the CPU writer)."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.codegen import CodegenOptions, build, codegen_c
from metaschedule.codegen.c_accumulate import AccumulatorPlan
from metaschedule.codegen.c_parallel import ParallelPlan, Region
from metaschedule.codegen.isa import isa_of
from metaschedule.codegen.passes import PASSES, PassContext, run_passes
from metaschedule.codegen.plan import (
    FunctionPlan,
    PlanContext,
    emitted_loops,
    plan_body,
    plan_function,
)
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.tir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    const,
)
from metaschedule.tir import expr as E
from metaschedule.tir.transform import lower

AVX512 = Target("llvm -mcpu=x86-64-v4 -num-cores=2")
AVX2 = Target("llvm -mcpu=haswell -num-cores=2")
CODEGEN = Path(__file__).parents[2] / "metaschedule" / "codegen"


def _register_tiled(rows: int = 4, cols: int = 32, k: int = 24) -> PrimFunc:
    """A matmul ``i0 j0 | k | i1 (rows) j1 (cols, vectorized)``, its init decomposed."""
    a = te.placeholder((16, k), "float32", "A")
    b = te.placeholder((k, 64), "float32", "B")
    sch = tir.Schedule(te.create_prim_func([a, b, ops.matmul(a, b)]))
    block = sch.get_block("T_matmul_NN")
    i, j, kk = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, cols])
    sch.reorder(i0, j0, kk, i1, j1)
    sch.decompose_reduction(block, kk)
    sch.vectorize(j1)
    return lower(sch.mod["main"])


def _widths(tile: AccumulatorPlan) -> list[int]:
    return [p.extent.value if isinstance(p, For) else 1 for p in tile.points]


def test_the_passes_run_in_one_list_in_order():
    assert [p.name for p in PASSES] == ["auto_vectorize", "widen_vector_loops", "version_guards"]
    func = _register_tiled()
    isa = isa_of(AVX512)
    # every pass off: the body as it was
    off = PassContext(isa, auto_vectorize=False, version_guards=False)
    assert run_passes(func.body, off) is func.body
    # debug code gets no vector loops made for it
    debug = PassContext(isa, version_guards=False, debug=True)
    assert run_passes(func.body, debug) is func.body


def test_a_register_tile_is_planned_as_frozen_data():
    plan = plan_function(_register_tiled(), AVX512)
    assert isinstance(plan, FunctionPlan)
    ((loop, tile),) = plan.tiles
    assert loop.loop_var.name == "k"
    assert [lp.loop_var.name for lp in tile.region] == ["k"]
    assert tile.lanes == 16 and _widths(tile) == [16] * 8  # 4 rows x 2 vectors
    assert plan.tile_at(loop) is tile
    with pytest.raises(dataclasses.FrozenInstanceError):
        tile.lanes = 8  # type: ignore[misc]
    # the init nest starts the accumulators instead of being stored
    ((init, red, fusion),) = plan.inits
    assert fusion.roots == (loop,)


def test_the_plan_reads_the_isa():
    """AVX2 holds 8 floats a vector: the same tile is 4 rows x 4 vectors of 8 lanes."""
    ((_, tile),) = plan_function(_register_tiled(), AVX2).tiles
    assert tile.lanes == 8 and _widths(tile) == [8] * 16


def test_the_plan_reads_the_options_it_is_given():
    func = _register_tiled(rows=2, cols=16, k=8)
    fused = plan_function(func, AVX512)
    assert fused.inits
    unfused = plan_function(func, AVX512, CodegenOptions(fuse_init=False))
    assert not unfused.inits and unfused.tiles
    debug = plan_function(func, AVX512, debug=True)
    assert not debug.tiles and not debug.inits


def test_the_emitter_writes_the_tiles_of_the_plan():
    func = _register_tiled()
    plan = plan_function(func, AVX512)
    code = codegen_c(func, AVX512).code
    written = [int(n) for n in re.findall(r"kept in (\d+) accumulators?", code)]
    assert written == [len(t.points) for _, t in plan.tiles]


def _two_parallel_loops(offset: int) -> PrimFunc:
    """T[i] = A[i] * 2 (parallel over 8), then B[j] = T[j + offset] (parallel over 8)."""
    a, b, t = Buffer("A", (16,)), Buffer("B", (16,)), Buffer("T", (16,))
    i, j = Var("i"), Var("j")
    fill = For(i, 0, 8, ForKind.PARALLEL, BufferStore(t, a[i] * 2.0, (i,)))
    use = For(j, 0, 8, ForKind.PARALLEL, BufferStore(b, t[j + offset], (j,)))
    return PrimFunc((a, b), Allocate(t, SeqStmt((fill, use))))


def test_parallel_regions_are_planned_with_their_barriers():
    plan = plan_function(_two_parallel_loops(0), AVX512)
    assert isinstance(plan.parallel, ParallelPlan)
    (region,) = plan.parallel.regions
    assert isinstance(region, Region)
    assert [s.kind for s in region.steps] == ["parallel", "parallel"]
    assert [s.nowait for s in region.steps] == [True, False]  # same element per iteration
    (region,) = plan_function(_two_parallel_loops(1), AVX512).parallel.regions
    assert [s.nowait for s in region.steps] == [False, False]  # j reads what j + 1 wrote
    alone = plan_function(_two_parallel_loops(0), AVX512, CodegenOptions(shared_regions=False))
    assert alone.parallel.parts == ()


def _serial_row() -> PrimFunc:
    """``for i: for j (serial): for k: C[i, j] += A[i, k] * B[k, j]``, lowered."""
    a = te.placeholder((4, 8), "float32", "A")
    b = te.placeholder((8, 32), "float32", "B")
    sch = tir.Schedule(te.create_prim_func([a, b, ops.matmul(a, b)]))
    block = sch.get_block("T_matmul_NN")
    _, j, _ = sch.get_loops(block)
    sch.decompose_reduction(block, j)
    return lower(sch.mod["main"])


def test_a_serial_row_over_a_reduction_is_planned_as_vector_code():
    """``for j (serial): for k: C[i, j] += A[i, k] * B[k, j]``: the plan vectorizes ``j``
    and keeps the row of 32 in two vector accumulators across ``k``."""
    plan = plan_function(_serial_row(), AVX512)
    ((loop, row),) = plan.rows
    assert loop.loop_var.name == "j" and loop.kind is ForKind.SERIAL
    assert row.loop_var.name == "k" and row.body.kind is ForKind.VECTORIZED
    ((start, tile),) = plan.tiles
    assert start is row and _widths(tile) == [16, 16]


def test_the_emitted_loops_put_the_row_in_place_and_keep_the_planned_objects():
    """``emitted_loops``: the serial row becomes the nest the plan made (``k`` around ``j``
    vectorized), whose loop the plan's tile is at; ``plan_body(inits=False)`` plans the
    same tiles without init fusion, and ``version_guards=False`` leaves no loop twice."""
    body = _serial_row().body
    plan = plan_body(body, PlanContext.of(AVX512), version_guards=False, inits=False)
    assert not plan.inits and len(plan.rows) == 1
    emitted = emitted_loops(plan)
    loops: list[For] = []

    def walk(s: Stmt) -> None:
        if isinstance(s, For):
            loops.append(s)
            walk(s.body)
        elif isinstance(s, SeqStmt):
            for x in s.seq:
                walk(x)

    walk(emitted)
    ((loop, row),) = plan.rows
    assert loop not in loops and row in loops  # the nest, the same object
    assert [lp.loop_var.name for lp in loops[-2:]] == ["k", "j"]
    assert loops[-1].kind is ForKind.VECTORIZED
    ((start, tile),) = plan.tiles
    assert plan.tile_at(row) is tile and _widths(tile) == [16, 16]
    # the init nest is the body's own loop; i, around the row, a copy (no tile there)
    names = {lp.loop_var.name: lp for lp in loops}
    assert plan.tile_at(names["j_init"]) is None and plan.tile_at(names["i"]) is False


def _tile_without_vector_code(init: bool) -> PrimFunc:
    """``C[i, j] += A[i, k] * float((A[i, k] < B[k, j]) == (j < 2))``, ``j`` vectorized:
    a register tile is planned across ``k``, but a comparison of bool lanes has no vector
    code; with ``init``, a vectorized init nest before it."""
    c, a, b = Buffer("C", (4, 32)), Buffer("A", (4, 8)), Buffer("B", (8, 32))
    i, k, j = Var("i", "int32"), Var("k", "int32"), Var("j", "int32")
    same = E.EQ(E.LT(BufferLoad(a, (i, k)), BufferLoad(b, (k, j))), E.LT(j, const(2)))
    value = BufferLoad(c, (i, j)) + BufferLoad(a, (i, k)) * E.Cast("float32", same)
    nest = For(j, const(0), const(32), ForKind.VECTORIZED, BufferStore(c, value, (i, j)))
    body: Stmt = For(k, const(0), const(8), ForKind.SERIAL, nest)
    if init:
        j0 = Var("j_init", "int32")
        zero = BufferStore(c, E.FloatImm("float32", 0.0), (i, j0))
        body = SeqStmt((For(j0, const(0), const(32), ForKind.VECTORIZED, zero), body))
    return PrimFunc((a, b, c), For(i, const(0), const(4), ForKind.SERIAL, body))


@pytest.mark.compiler
@pytest.mark.usefixtures("session_kernel_cache")
@pytest.mark.parametrize("init", [False, True])
def test_a_tile_that_cannot_be_written_is_checked_before_any_text(init):
    """The planned tile is checked before it is written (no attempt is written and taken
    back): the loop is written as it is, its vector loop as a scalar loop."""
    func = _tile_without_vector_code(init)
    plan = plan_function(func, AVX512)
    assert len(plan.tiles) == 1 and bool(plan.inits) is init
    code = codegen_c(func, AVX512).code
    assert "kept in" not in code
    assert "// j: not vectorized (comparison of bool values)" in code  # j: no name taken
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 8), "float32"), rng.standard_normal((8, 32), "float32")
    c = rng.standard_normal((4, 32), "float32")
    want = c * (not init) + np.einsum(
        "ik,ikj->ij", a, ((a[:, :, None] < b[None]) == (np.arange(32) < 2)).astype("float32")
    )
    build(func, AVX512)(a, b, c)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_plan_function_is_for_cpu_targets():
    from metaschedule.codegen import CodegenError

    with pytest.raises(CodegenError, match="cpu targets"):
        plan_function(_register_tiled(), "cuda")


# ----------------------------------------------------------------------------- structure


def _imports() -> dict[str, list[tuple[str, str]]]:
    """module -> (module of codegen it imports from, name), any import (also under
    TYPE_CHECKING or inside a function)."""
    modules = {p.stem for p in CODEGEN.glob("*.py")}
    out: dict[str, list[tuple[str, str]]] = {}
    for path in CODEGEN.glob("*.py"):
        found = out.setdefault(path.stem, [])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module is None:
                    found += [(a.name, "") for a in node.names if a.name in modules]
                elif node.module.split(".")[0] in modules:
                    found += [(node.module.split(".")[0], a.name) for a in node.names]
    return out


def test_codegen_has_no_import_cycle():
    graph = {m: {t for t, _ in deps} for m, deps in _imports().items()}
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycle = [*path[path.index(t) :], t] if t in path else [m, t]
                pytest.fail(f"import cycle in codegen: {' -> '.join(cycle)}")
            if t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_no_private_name_is_imported_across_codegen_modules():
    private = [
        f"{m} imports {name} from {t}"
        for m, deps in _imports().items()
        for t, name in deps
        if name.startswith("_")
    ]
    assert private == []


def test_the_cuda_writer_does_not_inherit_the_cpu_writer():
    from metaschedule.codegen.c_codegen import FunctionWriter
    from metaschedule.codegen.c_writer import CWriter
    from metaschedule.codegen.cuda_codegen import _KernelWriter

    assert issubclass(_KernelWriter, CWriter)
    assert not issubclass(_KernelWriter, FunctionWriter)
