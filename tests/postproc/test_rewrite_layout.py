"""RewriteLayout: layout-free weights re-laid out in their schedule's loop order."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metaschedule as ms
from metaschedule import te, tir
from metaschedule.arg_info import ArgInfo, TensorInfo
from metaschedule.postproc import Postproc, RewriteLayout
from metaschedule.schedule.prepacked import prepacked_args
from metaschedule.search_strategy.base import TraceReplayer
from metaschedule.space_generator import PostOrderApply
from metaschedule.te import ops
from metaschedule.tir.interpreter import interpret
from metaschedule.tune_context import TuneContext


def _dense(n=8, m=64, k=32):
    x = te.placeholder((n, k), "float32", "X")
    w = te.placeholder((m, k), "float32", "W")
    return te.create_prim_func([x, w, ops.dense(x, w)])


def _matmul_free_b(n=8, m=32, k=16):
    a = te.placeholder((n, k), "float32", "A")
    b = te.placeholder((k, m), "float32", "B")
    r = te.reduce_axis((0, k), "k")
    c = te.compute(
        (n, m),
        lambda i, j: te.sum(a[i, r] * b[r, j], axis=r),
        name="C",
        attrs={"layout_free_placeholders": [b]},
    )
    return te.create_prim_func([a, b, c])


def _conv2d(c=4, f=8):
    data = te.placeholder((1, 6, 6, c), "float32", "data")
    kernel = te.placeholder((3, 3, c, f), "float32", "kernel")
    return te.create_prim_func([data, kernel, ops.conv2d_nhwc(data, kernel, padding=1)])


def _depthwise():
    data = te.placeholder((1, 6, 6, 8), "float32", "data")
    kernel = te.placeholder((3, 3, 8), "float32", "kernel")
    return te.create_prim_func([data, kernel, ops.depthwise_conv2d_nhwc(data, kernel, padding=1)])


def _conv_bias_relu():
    data = te.placeholder((1, 5, 5, 8), "float32", "data")
    kernel = te.placeholder((3, 3, 8, 8), "float32", "kernel")
    bias = te.placeholder((8,), "float32", "bias")
    conv = ops.conv2d_nhwc(data, kernel, padding=1)
    return te.create_prim_func([data, kernel, bias, ops.relu(ops.bias_add(conv, bias, axis=-1))])


def _dense_bias_gelu():
    x = te.placeholder((4, 16), "float32", "X")
    w = te.placeholder((32, 16), "float32", "W")
    b = te.placeholder((32,), "float32", "bias")
    return te.create_prim_func([x, w, b, ops.gelu(ops.dense(x, w, b))])


def _run_packed(sch_func, func, seed=0):
    """(got, want): ``sch_func`` run on random inputs of ``func`` packed for it, and ``func``."""
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(p.static_shape()).astype("float32") for p in func.params]
    want = [a.copy() for a in args]
    interpret(func, *want)
    got = ms.pack_weights(sch_func, args)
    interpret(sch_func, *got)
    return got[-1], want[-1]


def _shape(func, j):
    return tuple(int(s) for s in func.params[j].shape)


def test_create_prim_func_lists_layout_free_placeholders():
    assert _dense().attrs["layout_free_buffers"] == [1]
    assert _conv2d().attrs["layout_free_buffers"] == [1]
    assert _depthwise().attrs["layout_free_buffers"] == [1]
    assert _matmul_free_b().attrs["layout_free_buffers"] == [1]
    a = te.placeholder((4, 4), "float32", "A")
    assert "layout_free_buffers" not in te.create_prim_func([a, ops.relu(a)]).attrs
    sch = tir.Schedule(_dense())
    block = sch.get(sch.get_block("T_dense"))
    assert "layout_free_placeholders" not in block.annotations


def test_tiled_dense_weight_follows_the_loops(check):
    func = _dense()
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("T_dense"))
    j0, j1 = sch.split(j, [4, 16])
    k0, k1 = sch.split(k, [2, 16])
    sch.reorder(i, j0, k0, j1, k1)
    sch.enter_postproc()
    assert RewriteLayout().apply(sch)
    out = sch.mod["main"]
    assert _shape(out, 1) == (4, 2, 16, 16)
    packed = prepacked_args(out)[1]
    assert packed.original_shape == (64, 32)
    assert (
        str(packed.index_map) == "IndexMap(lambda i0, i1: (i0 // 16, i1 // 16, i0 % 16, i1 % 16))"
    )
    w = np.arange(64 * 32, dtype="float32").reshape(64, 32)
    np.testing.assert_array_equal(packed.pack(w), w.reshape(4, 16, 2, 16).transpose(0, 2, 1, 3))
    check(sch, func)  # numbers with packed weights; the trace replays to the same module
    # idempotent: a second run changes nothing
    mod = sch.mod
    assert RewriteLayout().apply(sch)
    assert sch.mod is mod


def test_tiled_matmul_with_layout_free_b(check):
    func = _matmul_free_b()
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [2, 4])
    j0, j1, j2 = sch.split(j, [2, 2, 8])
    k0, k1 = sch.split(k, [4, 4])
    sch.reorder(i0, j0, i1, k0, j1, k1, j2)
    sch.enter_postproc()
    assert RewriteLayout().apply(sch)
    out = sch.mod["main"]
    # B[k, j]: loops j0, k0, j1, k1, j2 in nest order
    assert _shape(out, 1) == (2, 4, 2, 4, 8)
    assert str(prepacked_args(out)[1].index_map) == (
        "IndexMap(lambda i0, i1: (i1 // 16, i0 // 4, i1 // 8 % 2, i0 % 4, i1 % 8))"
    )
    check(sch, func)


def test_tiled_conv2d_kernel_follows_the_loops(check):
    func = _conv2d()
    sch = tir.Schedule(func)
    block = sch.get_block("conv2d_nhwc")
    n, y, x, f, ry, rx, rc = sch.get_loops(block)
    f0, f1 = sch.split(f, [2, 4])
    rc0, rc1 = sch.split(rc, [2, 2])
    sch.reorder(n, y, f0, x, ry, rx, rc0, rc1, f1)
    sch.enter_postproc()
    assert RewriteLayout().apply(sch)
    out = sch.mod["main"]
    assert _shape(out, 1) == (2, 3, 3, 2, 2, 4)
    assert str(prepacked_args(out)[1].index_map) == (
        "IndexMap(lambda i0, i1, i2, i3: (i3 // 4, i0, i1, i2 // 2, i2 % 2, i3 % 4))"
    )
    assert _shape(out, 0) == (1, 6, 6, 4)  # data is not layout-free
    check(sch, func)


def test_weights_it_cannot_or_need_not_rewrite_are_skipped():
    # untiled: the loops already walk the kernel in order
    sch = tir.Schedule(_conv2d())
    sch.reorder(*[sch.get_loops(sch.get_block("conv2d_nhwc"))[i] for i in (0, 1, 2, 4, 5, 6, 3)])
    mod = sch.mod
    assert RewriteLayout().apply(sch) and sch.mod is mod
    # a weight not marked layout-free keeps its layout
    a = te.placeholder((8, 8), "float32", "A")
    b = te.placeholder((8, 8), "float32", "B")
    sch = tir.Schedule(te.create_prim_func([a, b, ops.matmul(a, b)]))
    i, j, k = sch.get_loops(sch.get_block("T_matmul_NN"))
    sch.reorder(j, k, i)
    mod = sch.mod
    assert RewriteLayout().apply(sch) and sch.mod is mod
    # read through a cache_read copy: skipped, the schedule still accepted
    sch = tir.Schedule(_dense())
    blk = sch.get_block("T_dense")
    sch.cache_read(blk, 1, "global")
    i, j, k = sch.get_loops(blk)
    sch.reorder(k, j)
    mod = sch.mod
    assert RewriteLayout().apply(sch) and sch.mod is mod
    # an imperfect split (a predicate) is not a mixed-radix walk: skipped
    sch = tir.Schedule(_dense(m=60))
    i, j, k = sch.get_loops(sch.get_block("T_dense"))
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(j0, k, j1)
    mod = sch.mod
    assert RewriteLayout().apply(sch) and sch.mod is mod


@settings(max_examples=25, deadline=None)
@given(
    tj=st.sampled_from([1, 2, 4, 8, 16]),
    tk=st.sampled_from([1, 2, 4, 8]),
    order=st.permutations(["i", "j0", "j1", "k0", "k1"]),
    fuse=st.booleans(),
)
def test_random_tilings_pack_to_the_loop_order(tj, tk, order, fuse):
    func = _dense(n=4, m=16, k=8)
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("T_dense"))
    j0, j1 = sch.split(j, [None, tj])
    k0, k1 = sch.split(k, [None, tk])
    loops = {"i": i, "j0": j0, "j1": j1, "k0": k0, "k1": k1}
    sch.reorder(*[loops[n] for n in order])
    if fuse and order[0] in ("i", "j0", "j1") and order[1] in ("i", "j0", "j1"):
        sch.fuse(loops[order[0]], loops[order[1]])  # as RewriteParallelVectorizeUnroll does
    sch.enter_postproc()
    assert RewriteLayout().apply(sch)
    out = sch.mod["main"]
    got, want = _run_packed(out, func)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    packed = prepacked_args(out)
    if packed:
        shape = _shape(out, 1)
        assert int(np.prod(shape)) == 16 * 8 and 1 not in shape
        # the innermost packed dimension is the innermost loop that moves the weight
        extents = {"j0": 16 // tj, "j1": tj, "k0": 8 // tk, "k1": tk}
        moving = [n for n in order if n != "i" and extents[n] > 1]
        assert shape[-1] == extents[moving[-1]]
    assert RewriteLayout().apply(sch) and sch.mod["main"] is out  # idempotent


def _sampled(func, seeds):
    """Schedules of the default llvm space (all its design spaces, fresh decisions per
    seed), post-processed with the default llvm postprocessors."""
    ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=0)
    spaces = ctx.generate_design_space()
    replay = TraceReplayer(ctx.mod, Postproc.create("llvm"))
    out = []
    for space in spaces:
        for seed in seeds:
            sch = replay(space.trace, seed)
            if sch is not None:
                out.append(sch)
    return out


@pytest.mark.compiler
@pytest.mark.parametrize(
    "make",
    [_conv2d, _depthwise, _conv_bias_relu, _dense_bias_gelu, _matmul_free_b],
    ids=lambda f: f.__name__,
)
def test_every_sampled_schedule_computes_the_numpy_result(make):
    func = make()
    schs = _sampled(func, seeds=range(3))
    assert schs
    packed_any = False
    for n, sch in enumerate(schs):
        out = sch.mod["main"]
        packed_any |= bool(prepacked_args(out))
        got, want = _run_packed(out, func, seed=n)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(sch.trace))
    assert packed_any, "RewriteLayout packed the weight in no sampled schedule"
    # compiled: the first packed schedule through the C back end and ArgInfo
    sch = next((s for s in schs if prepacked_args(s.mod["main"])), schs[0])
    lib = ms.build(sch.mod, "llvm")
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(p.static_shape()).astype("float32") for p in func.params]
    want = [a.copy() for a in args]
    interpret(func, *want)
    lib(*lib.pack_weights(*args))
    np.testing.assert_allclose(args[-1], want[-1], rtol=1e-4, atol=1e-4)
    infos = ArgInfo.from_prim_func(sch.mod["main"])
    assert [i.shape for i in infos] == [tuple(p["shape"]) for p in lib["main"].params]
    assert any(i.is_prepacked for i in infos)


def test_arg_info_says_which_args_are_prepacked_and_round_trips():
    func = _dense()
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("T_dense"))
    j0, j1 = sch.split(j, [4, 16])
    sch.reorder(j0, k, j1)
    RewriteLayout().apply(sch)
    infos = ArgInfo.from_prim_func(sch.mod["main"])
    x, w, y = infos
    assert not x.is_prepacked and not y.is_prepacked
    assert w.is_prepacked and w.original_shape == (64, 32) and w.shape == (4, 32, 16)
    back = [ArgInfo.from_json(json.loads(json.dumps(a.as_json()))) for a in infos]
    assert back == infos
    assert str(back[1].index_map) == str(w.index_map)
    # records written before pre-packing existed still parse
    old = ArgInfo.from_json(["TENSOR", "float32", [64, 32]])
    assert old == TensorInfo("float32", (64, 32)) and not old.is_prepacked
    assert len(x.as_json()) == 3
    with pytest.raises(ValueError, match="pre-packed weight a fourth entry"):
        ArgInfo.from_json(["TENSOR", "float32", [4], {"shape": [4]}])


@pytest.mark.compiler
def test_compile_tir_and_packing_as_a_user_sees_it(tmp_path):
    """A user compiles the best record and packs the weight once with ms.pack_weights."""
    func = _dense(n=8, m=32, k=16)
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("T_dense"))
    j0, j1 = sch.split(j, [4, 8])
    sch.reorder(i, j0, k, j1)
    assert TraceReplayer(func, Postproc.create("llvm")).apply_postprocs(sch)
    db = ms.Database.create("memory")
    workload = db.commit_workload(tir.IRModule({"main": func}))
    infos = ArgInfo.from_entry_func(sch.mod)
    db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, [1e-5], None, infos))

    best = ms.tir_integration.compile_tir(db, func, "llvm")
    lib = ms.build(best.mod, "llvm")
    x = np.random.default_rng(0).standard_normal((8, 16)).astype("float32")
    w = np.random.default_rng(1).standard_normal((32, 16)).astype("float32")
    y = np.zeros((8, 32), "float32")
    with pytest.raises(ValueError, match="taken pre-packed"):
        lib(x, w, y)
    args = ms.pack_weights(best, [x, w, y])  # from the schedule, or the built module
    assert args[0] is x and args[2] is y and args[1].shape == (4, 16, 8)
    lib(*args)
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(lib.pack_weights(x, w, y)[1], args[1])
    with pytest.raises(ValueError, match="argument 1: expected an array of the original"):
        ms.pack_weights(lib, [x, args[1], y])
    # an exported library still says which arguments it takes pre-packed, and how
    loaded = ms.runtime.load_module(lib.export_library(tmp_path / "dense.so"))
    assert list(loaded["main"].prepacked) == [1]
    np.testing.assert_array_equal(loaded.pack_weights(x, w, y)[1], args[1])
