"""PackPanel: a contiguous copy of a matmul's strided operand, offered as a choice."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.schedule import Schedule, Trace
from metaschedule.schedule_rule import MultiLevelTiling, PackPanel, ReuseType
from metaschedule.schedule_rule.pack_panel import panel_reads
from metaschedule.space_generator import PostOrderApply
from metaschedule.te import ops
from metaschedule.tune_context import TuneContext

TILING = MultiLevelTiling(
    structure="SSRSRS",
    max_innermost_factor=64,
    reuse_write=ReuseType(req="may", levels=[1, 2], scope="global"),
)


def _cache_reads(sch):
    return [i for i in sch.trace.insts if i.kind.name == "CacheRead"]


def test_a_matmul_gets_a_space_with_b_packed_under_the_first_tile_level(ck, wl):
    func = wl.matmul(16, 32, 64)
    spaces = ck.spaces(func, [TILING, PackPanel()])
    packed = [s for s in spaces if _cache_reads(s)]
    assert len(spaces) == 6 and len(packed) == 3  # each write-cache choice, with and without
    for sch in packed:
        (read,) = _cache_reads(sch)
        assert read.attrs[0] == 1  # B (read 1): rows along k, reused by every row of A
        main = sch.mod["main"]
        cache = sch.get_block("B_global")
        assert len(sch.get_loops(cache)) == 2 + 2  # under i0, j0; then its k and j loops
        assert main.params[1].name == "B"
    ck.assert_space_correct(func, spaces)


def test_weights_activations_and_transposed_operands_are_left_alone(ck, wl):
    # conv2d: the weight is layout-free (RewriteLayout re-lays it out), the input is read
    # along the reduction (a broadcast per step)
    for func in (wl.conv2d(), wl.conv2d(relu=True)):
        spaces = ck.spaces(func, [TILING, PackPanel()])
        assert not any(_cache_reads(s) for s in spaces) and len(spaces) == 3
    # dense: x @ W^T, W layout-free; and a batch matmul with K transposed
    x = te.placeholder((8, 16), "float32", "X")
    w = te.placeholder((32, 16), "float32", "W")
    dense = te.create_prim_func([x, w, ops.dense(x, w)])
    q = te.placeholder((2, 8, 16), "float32", "Q")
    k = te.placeholder((2, 8, 16), "float32", "K")
    bmm = te.create_prim_func([q, k, ops.batch_matmul(q, k, transpose_b=True)])
    for func in (dense, bmm):
        assert not any(_cache_reads(s) for s in ck.spaces(func, [TILING, PackPanel()]))
    # an untiled block (no MultiLevelTiling before it): nothing
    (only,) = ck.spaces(wl.matmul(), [PackPanel()])
    assert not _cache_reads(only)


def test_panel_reads_picks_the_operand_reused_across_rows(wl):
    func = wl.matmul(8, 8, 8)
    sch = Schedule(func)
    block = sch.get(sch.get_block("T_matmul_NN"))
    assert panel_reads(func, block) == [1]
    marked = func.with_attr("layout_free_buffers", [1])
    assert panel_reads(marked, block) == []


@pytest.mark.compiler
def test_sampled_packed_schedules_compute_the_product_after_the_postprocessors():
    """Random points of the default llvm space (PackPanel included) of a matmul, through
    the default postprocessors (RewriteLayout among them), built and run against numpy."""
    from metaschedule.codegen import build

    a = te.placeholder((64, 48), "float32", "A")
    b = te.placeholder((48, 32), "float32", "B")
    func = te.create_prim_func([a, b, ops.matmul(a, b)])
    ctx = TuneContext(func, target="llvm -num-cores=2", space_generator=PostOrderApply())
    spaces, post = ctx.generate_design_space(), ctx.space_generator.postprocs
    packed = [s for s in spaces if _cache_reads(s)]
    assert packed
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 48)).astype("float32")
    y = rng.standard_normal((48, 32)).astype("float32")
    for seed in range(3):
        for space in packed[:2]:
            sch = Schedule(ctx.mod, seed=seed)
            Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
            sch.enter_postproc()
            assert all(p.apply(sch) for p in post)
            lib = build(sch.mod, "cpu")
            out = np.zeros((64, 32), "float32")
            lib(*lib.pack_weights(x, y, out)[:-1], out)
            np.testing.assert_allclose(out, x @ y, rtol=1e-4, atol=1e-4)
