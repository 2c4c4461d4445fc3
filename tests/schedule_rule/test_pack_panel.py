"""PackPanel: a contiguous copy of a matmul's strided operand, offered as a choice."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.schedule import Schedule, Trace
from metaschedule.schedule_rule import MultiLevelTiling, PackPanel, ReuseType
from metaschedule.schedule_rule.pack_panel import panel_reads, transposed_dims
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


def test_weights_and_activations_are_left_alone(ck, wl):
    # conv2d: the weight is layout-free (RewriteLayout re-lays it out), the input is read
    # along the reduction (a broadcast per step)
    for func in (wl.conv2d(), wl.conv2d(relu=True)):
        spaces = ck.spaces(func, [TILING, PackPanel()])
        assert not any(_cache_reads(s) for s in spaces) and len(spaces) == 3
    # dense: x @ W^T, W layout-free (RewriteLayout's, not a copy per task)
    x = te.placeholder((8, 16), "float32", "X")
    w = te.placeholder((32, 16), "float32", "W")
    dense = te.create_prim_func([x, w, ops.dense(x, w)])
    assert not any(_cache_reads(s) for s in ck.spaces(dense, [TILING, PackPanel()]))
    # an untiled block (no MultiLevelTiling before it): nothing
    (only,) = ck.spaces(wl.matmul(), [PackPanel()])
    assert not _cache_reads(only)


def _nt_batch_matmul(b=2, n=8, m=16, k=16):
    q = te.placeholder((b, n, k), "float32", "Q")
    kt = te.placeholder((b, m, k), "float32", "K")
    return te.create_prim_func([q, kt, ops.batch_matmul(q, kt, transpose_b=True)])


def test_a_transposed_operand_is_packed_with_the_vector_dimension_last(ck):
    func = _nt_batch_matmul()
    spaces = ck.spaces(func, [TILING, PackPanel()])
    packed = [s for s in spaces if _cache_reads(s)]
    assert len(spaces) == 6 and len(packed) == 3
    for sch in packed:
        (read,) = _cache_reads(sch)
        assert read.attrs[0] == 1  # K: gathered along j, reused by every row of Q
        (layout,) = [i for i in sch.trace.insts if i.kind.name == "TransformLayout"]
        cache = sch.get(sch.get_block("K_global"))
        panel = cache.writes[0].buffer
        assert [int(d) for d in panel.shape] == [2, 16, 16]  # [b, k, j]: j (the vector) last
        assert layout is not None
    ck.assert_space_correct(func, spaces)


def test_panel_reads_picks_the_operand_reused_across_rows(wl):
    func = wl.matmul(8, 8, 8)
    sch = Schedule(func)
    block = sch.get(sch.get_block("T_matmul_NN"))
    assert panel_reads(func, block) == [1]
    marked = func.with_attr("layout_free_buffers", [1])
    assert panel_reads(marked, block) == []
    # transposed: K[b, j, k] moves its j (dimension 1) last; Q[b, i, k] is a broadcast
    nt = _nt_batch_matmul()
    sch = Schedule(nt)
    (name,) = [b.name_hint for b in _blocks(sch)]
    block = sch.get(sch.get_block(name))
    assert transposed_dims(nt, block) == {1: 1}
    assert panel_reads(nt, block) == [1]
    assert transposed_dims(nt.with_attr("layout_free_buffers", [1]), block) == {}


def _blocks(sch):
    from metaschedule.tir import Block
    from metaschedule.tir.functor import post_order_visit

    out = []
    post_order_visit(
        sch.mod["main"].body,
        lambda n: out.append(n) if isinstance(n, Block) and n.name_hint != "root" else None,
    )
    return out


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


@pytest.mark.compiler
def test_sampled_transposed_panels_compute_the_product_with_vector_loads():
    """Random points of the default llvm space of ``Q @ K^T``, the packed ones through the
    default postprocessors, built and run against numpy; the tile reads the panel with
    vector loads, not lane by lane."""
    from metaschedule.codegen import build
    from metaschedule.codegen.isa import isa_of

    func = _nt_batch_matmul(b=3, n=32, m=48, k=24)
    ctx = TuneContext(func, target="llvm -num-cores=2", space_generator=PostOrderApply())
    spaces, post = ctx.generate_design_space(), ctx.space_generator.postprocs
    packed = [s for s in spaces if _cache_reads(s)]
    assert packed
    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 32, 24)).astype("float32")
    k = rng.standard_normal((3, 48, 24)).astype("float32")
    vector_reads = 0
    for seed in range(4):
        for space in packed[:2]:
            sch = Schedule(ctx.mod, seed=seed)
            Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
            sch.enter_postproc()
            assert all(p.apply(sch) for p in post)
            lib = build(sch.mod, ctx.target)  # the code checked is the code run
            lanes = isa_of(ctx.target).lanes("float32")
            vector_reads += f"ms_load_f32x{lanes}(&K_global[" in lib.get_source()
            out = np.zeros((3, 32, 48), "float32")
            lib(q, k, out)
            np.testing.assert_allclose(out, q @ k.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)
    assert vector_reads > 0
