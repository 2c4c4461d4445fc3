"""convert_layout: NCHW graphs rewritten to run convolutions, pooling and their
epilogues channels last. Numerics against the reference interpreter (before and after),
transposes only at the boundary, NHWC tasks, and the compiled / tuned model."""

import numpy as np
import pytest

from metaschedule import graph
from metaschedule import relax_integration as ri
from metaschedule.graph import GraphBuilder
from metaschedule.graph.layout import convert_layout, default_layouts, simplify_transposes
from metaschedule.target import Target

NHWC = {"conv2d": "NHWC"}
LANES = Target("llvm").vector_lanes("float32")


def _conv(b, x, w, stride=1, pad=1, groups=1):
    return b.call(
        "conv2d",
        [x, w],
        strides=(stride, stride),
        pads=(pad, pad, pad, pad),
        dilations=(1, 1),
        groups=groups,
    )


def _resnet_like(c=8):
    """conv + batch norm (scale, shift) + relu, max pool, a residual block, a depthwise
    conv, a channel concat, global pooling, flatten and a matmul + bias."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()

    def const(*shape, scale=0.3):
        return b.const((rng.standard_normal(shape) * scale).astype("float32"))

    x = b.input("x", (1, 3, 16, 16))
    y = _conv(b, x, const(c, 3, 3, 3))
    y = b.call("multiply", [y, const(1, c, 1, 1)])  # batch norm, folded into the conv
    y = b.call("add", [y, const(c, 1, 1)])  # a rank-3 per-channel shift
    y = b.call("relu", [y])
    y = b.call(
        "max_pool2d",
        [y],
        kernel=(3, 3),
        strides=(2, 2),
        pads=(1, 1, 1, 1),
        ceil_mode=False,
    )
    r = b.call("relu", [b.call("add", [_conv(b, y, const(c, c, 3, 3)), const(1, c, 1, 1)])])
    r = b.call("relu", [b.call("add", [_conv(b, r, const(c, c, 3, 3)), y])])  # residual
    d = b.call("clip", [_conv(b, r, const(c, 1, 3, 3), groups=c)], min=0.0, max=6.0)
    cat = b.call("concat", [r, d], axis=1)
    z = _conv(b, cat, const(2 * c, 2 * c, 1, 1), stride=2, pad=0)
    g = b.call("global_avg_pool2d", [z])
    f = b.call("reshape", [g], shape=(1, 2 * c))
    out = b.call("add", [b.call("matmul", [f, const(2 * c, 10)]), const(10)])
    x_val = rng.standard_normal((1, 3, 16, 16)).astype("float32")
    return b.finish([out]), x_val


def _ops(func):
    return [c.op for c in func.calls]


def test_convert_layout_keeps_numerics_and_transposes_only_the_input():
    func, x = _resnet_like()
    opt = graph.optimize(func)
    conv = convert_layout(opt, NHWC)
    want = graph.interpret(opt, x)[0]
    np.testing.assert_allclose(graph.interpret(conv, x)[0], want, rtol=1e-5, atol=1e-5)
    # one transpose (the input); global pooling's [1, 1, 1, C] -> flatten is a reshape
    assert _ops(conv).count("transpose") == 1
    assert conv.calls[0].op == "transpose" and conv.calls[0].args == ("x",)
    for c in conv.calls:
        if c.op in ("conv2d", "max_pool2d", "global_avg_pool2d"):
            assert c.attr["data_layout"] == "NHWC", c
        if c.op == "conv2d":
            assert c.attr["kernel_layout"] == "HWIO"
        if c.op == "concat":
            assert c.attr["axis"] == 3
    # inputs and outputs keep their names, shapes and layouts
    assert [p.name for p in conv.params] == [p.name for p in opt.params]
    assert conv.outputs == opt.outputs
    assert conv.type_of(conv.outputs[0]) == opt.type_of(opt.outputs[0])


def test_values_read_in_nchw_are_transposed_back_once():
    """A non-convertible reader (softmax over the channels) of a convolution's output
    gets one transpose back, however many readers; model outputs are NCHW."""
    rng = np.random.default_rng(1)
    b = GraphBuilder()
    x = b.input("x", (1, 4, 6, 6))
    y = b.call("relu", [_conv(b, x, b.const(rng.standard_normal((8, 4, 3, 3)).astype("f4")))])
    s1 = b.call("softmax", [y], axis=1)
    s2 = b.call("reduce", [y], kind="max", axes=[1], keepdims=True)
    func = b.finish([s1, s2, y])
    conv = convert_layout(graph.optimize(func), NHWC)
    assert _ops(conv).count("transpose") == 2  # the input, and y back to NCHW
    xv = rng.standard_normal((1, 4, 6, 6)).astype("float32")
    for got, want in zip(graph.interpret(conv, xv), graph.interpret(func, xv)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_simplify_transposes_cancels_and_merges():
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4, 5))
    t = b.call("transpose", [x], axes=(0, 2, 3, 1))
    back = b.call("transpose", [t], axes=(0, 3, 1, 2))  # undoes t
    y = b.call("relu", [back])
    t2 = b.call("transpose", [b.call("transpose", [y], axes=(1, 0, 2, 3))], axes=(0, 1, 3, 2))
    g = b.input("g", (1, 1, 1, 7))
    u = b.call("transpose", [g], axes=(0, 3, 1, 2))  # moves unit axes only: a reshape
    func = b.finish([t2, u])
    out = simplify_transposes(graph.infer_types(func))
    ops = _ops(out)
    assert ops.count("transpose") == 1 and ops.count("reshape") == 1, out
    relu = next(c for c in out.calls if c.op == "relu")
    assert relu.args == ("x",)  # the pair cancelled
    xv = np.random.default_rng(2).standard_normal((2, 3, 4, 5)).astype("float32")
    gv = np.arange(7, dtype="float32").reshape(1, 1, 1, 7)
    for got, want in zip(graph.interpret(out, xv, gv), graph.interpret(func, xv, gv)):
        np.testing.assert_array_equal(got, want)


def test_pooling_listed_alone_converts_and_keeps_numerics():
    rng = np.random.default_rng(3)
    b = GraphBuilder()
    x = b.input("x", (1, 5, 9, 9))
    p = b.call(
        "avg_pool2d",
        [x],
        kernel=(3, 3),
        strides=(2, 2),
        pads=(1, 1, 1, 1),
        ceil_mode=True,
        count_include_pad=False,
    )
    m = b.call("max_pool2d", [p], kernel=(2, 2), strides=(1, 1), pads=(0, 0, 1, 1), ceil_mode=False)
    func = b.finish([m])
    conv = convert_layout(graph.infer_types(func), {"avg_pool2d": "NHWC"})
    assert [c.attr.get("data_layout") for c in conv.calls if "pool" in c.op] == ["NHWC"] * 2
    xv = rng.standard_normal((1, 5, 9, 9)).astype("float32")
    np.testing.assert_allclose(
        graph.interpret(conv, xv)[0], graph.interpret(func, xv)[0], rtol=1e-6
    )


def test_bad_layouts_are_errors():
    func, _ = _resnet_like()
    with pytest.raises(ValueError, match="cannot convert 'matmul'"):
        convert_layout(func, {"matmul": "NHWC"})
    with pytest.raises(ValueError, match="not supported"):
        convert_layout(func, {"conv2d": ["NHWC", "OHWI"]})
    with pytest.raises(ValueError, match="desired_layouts"):
        ri.extract_tasks(func, "llvm", desired_layouts="nhwc")
    assert convert_layout(func, {"conv2d": "NCHW"}) is func


def test_default_layouts_are_nhwc_on_cpus_only():
    assert default_layouts("llvm") == NHWC
    assert default_layouts("cuda") == {}


def _conv_tags(task):
    blocks = []

    def visit(stmt):
        from metaschedule.tir import Block

        if isinstance(stmt, Block):
            blocks.append(stmt.annotations.get("tag"))

    from metaschedule.tir.functor import Visitor

    class _V(Visitor):
        def visit_Block(self, node):
            visit(node)
            self.generic_visit(node)

    _V().visit(task.mod["main"].body)
    return [t for t in blocks if t and "conv" in t]


def test_extract_tasks_yields_nhwc_conv_tasks_and_opt_out_keeps_nchw():
    func, _ = _resnet_like()
    tasks = ri.extract_tasks(func, "llvm")
    tags = [tag for t in tasks for tag in _conv_tags(t)]
    assert tags and set(tags) == {"conv2d_nhwc", "group_conv2d_nhwc"}
    nchw = ri.extract_tasks(func, "llvm", desired_layouts=None)
    assert {tag for t in nchw for tag in _conv_tags(t)} == {"conv2d_nchw"}
    assert "transpose" not in [t.task_name for t in nchw]


@pytest.mark.compiler
def test_compiled_nhwc_model_matches_the_interpreter_and_nchw_build():
    func, x = _resnet_like(c=2 * LANES)
    want = graph.interpret(func, x)[0]
    exe = ri.compile_relax(None, func, "llvm", None)
    np.testing.assert_allclose(exe(x=x), want, rtol=1e-4, atol=1e-4)
    ref = ri.compile_relax(None, func, "llvm", None, desired_layouts=None)
    np.testing.assert_allclose(ref(x=x), want, rtol=1e-4, atol=1e-4)
    assert sum(s.ops == ("transpose",) for s in exe.steps) == 1


def test_nhwc_default_conv_schedule_packs_weight_and_vectorizes_channels():
    func, _ = _resnet_like(c=2 * LANES)
    model = graph.lower_model(graph.optimize(func), NHWC)
    name = next(n for n, f in model.funcs.items() if n.startswith("fused_conv2d_add_relu"))
    sch = graph.default_schedule(model.funcs[name], "llvm")
    out = sch.mod["main"]
    v = 2 * LANES
    assert tuple(int(s) for s in out.params[1].shape) == (2 * LANES // v, 3, 3, 3, v)
    assert 1 in out.attrs["prepacked_args"]
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("conv2d_nhwc"))]
    assert [lp.loop_var.name for lp in loops[-5:-2]] == ["ry", "rx", "rc"]
    from metaschedule.tir import ForKind

    assert loops[0].kind == ForKind.PARALLEL and loops[-1].kind == ForKind.VECTORIZED


@pytest.mark.compiler
@pytest.mark.slow
def test_tune_relax_nhwc_compile_and_run(tmp_path):
    func, x = _resnet_like(c=LANES)
    want = graph.interpret(func, x)[0]
    db = ri.tune_relax(
        func,
        None,
        "llvm",
        str(tmp_path),
        max_trials_global=4,
        max_trials_per_task=2,
        op_names=["fused_conv2d_add_relu_2"],
        num_trials_per_iter=2,
        final_selection_top_k=0,
        seed=0,
    )
    records = db.get_all_tuning_records()
    assert records
    assert all(_conv_tags(type("T", (), {"mod": r.workload.mod})) for r in records)
    exe = ri.compile_relax(db, func, "llvm", None)
    np.testing.assert_allclose(exe(x=x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_torch_residual_cnn_compiled_nhwc_matches_torch():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU())
            self.pool = nn.MaxPool2d(3, 2, 1)
            self.c1 = nn.Conv2d(16, 16, 3, 1, 1, bias=False)
            self.b1 = nn.BatchNorm2d(16)
            self.head = nn.Linear(16, 5)

        def forward(self, x):
            y = self.pool(self.stem(x))
            y = torch.relu(self.b1(self.c1(y)) + y)
            return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))

    torch.manual_seed(0)
    net = Net().eval()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(1, 3, 12, 12)
    with torch.no_grad():
        want = net(x).numpy()
    f = graph.from_torch(net, (x,))
    exe = ri.compile_relax(None, f, "llvm", None)
    np.testing.assert_allclose(exe(x.numpy()), want, rtol=1e-4, atol=1e-4)
    model = graph.lower_model(graph.optimize(f), NHWC)
    assert sum(s.ops == ("transpose",) for s in model.steps) == 1


def test_weight_given_as_an_input_is_transposed_in_the_graph():
    rng = np.random.default_rng(7)
    b = GraphBuilder()
    x = b.input("x", (1, 3, 6, 6))
    w = b.input("w", (4, 3, 3, 3))
    func = b.finish([b.call("relu", [_conv(b, x, w)])])
    conv = convert_layout(graph.infer_types(func), NHWC)
    assert _ops(conv).count("transpose") == 3  # x, w in; the output back to NCHW
    xv = rng.standard_normal((1, 3, 6, 6)).astype("float32")
    wv = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    np.testing.assert_allclose(
        graph.interpret(conv, xv, wv)[0], graph.interpret(func, xv, wv)[0], rtol=1e-5, atol=1e-6
    )


def test_scale_folds_into_an_nhwc_conv_weight():
    rng = np.random.default_rng(8)
    b = GraphBuilder()
    x = b.input("x", (1, 5, 5, 3))
    w = b.const(rng.standard_normal((3, 3, 3, 4)).astype("float32"))
    y = b.call(
        "conv2d",
        [x, w],
        strides=(1, 1),
        pads=(1, 1, 1, 1),
        dilations=(1, 1),
        groups=1,
        data_layout="NHWC",
        kernel_layout="HWIO",
    )
    s = b.const(rng.uniform(0.5, 2.0, (1, 1, 1, 4)).astype("float32"))
    func = b.finish([b.call("multiply", [y, s])])
    folded = graph.fold_scale_bias(graph.infer_types(func))
    assert _ops(folded) == ["conv2d"]
    xv = rng.standard_normal((1, 5, 5, 3)).astype("float32")
    np.testing.assert_allclose(
        graph.interpret(folded, xv)[0], graph.interpret(func, xv)[0], rtol=1e-5, atol=1e-5
    )
