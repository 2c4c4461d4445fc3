"""The default schedule (no database): numerics per operator kind against the numpy
reference interpreter, and the shape of the schedule (parallel outside, vectorized
inside, conv weights packed at compile time). Never timings."""

import numpy as np
import pytest

from metaschedule import graph, te
from metaschedule import relax_integration as ri
from metaschedule.graph import GraphBuilder
from metaschedule.graph.default_schedule import _wide_vector
from metaschedule.graph.schedule_conv import _blocks, channel_block
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.tir import ForKind
from metaschedule.tir.functor import Visitor

LANES = Target("llvm").vector_lanes("float32")


def _check(func, *inputs, rtol=1e-4):
    exe = ri.compile_relax(None, func, "llvm", None)
    want = graph.interpret(func, *inputs)[0]
    got = exe(*inputs)
    scale = max(float(np.abs(want).max()), 1e-6)
    assert float(np.abs(got - want).max()) / scale < rtol
    assert set(exe.sources.values()) == {"default"}
    return exe


def _conv_graph(c, f, hw, k=3, stride=1, pad=1, groups=1, residual=False, act="relu"):
    rng = np.random.default_rng(1)
    b = GraphBuilder()
    x = b.input("x", (1, c, *hw))
    w = b.const(rng.standard_normal((f, c // groups, k, k)).astype("float32") * 0.2, "w")
    bias = b.const(rng.standard_normal((1, f, 1, 1)).astype("float32"), "bias")
    y = b.call(
        "conv2d",
        [x, w],
        strides=(stride, stride),
        pads=(pad, pad, pad, pad),
        dilations=(1, 1),
        groups=groups,
    )
    y = b.call("add", [y, bias])
    if residual:
        y = b.call("add", [y, y])
    if act:
        y = b.call(act, [y])
    x_val = rng.standard_normal((1, c, *hw)).astype("float32")
    return b.finish([y]), x_val


def _only_func(func):
    model = graph.lower_model(func)
    (name,) = list(model.funcs)
    return model.funcs[name]


def _kinds(sch, block_name):
    return [sch.get(lp).kind for lp in sch.get_loops(sch.get_block(block_name))]


@pytest.mark.compiler
@pytest.mark.parametrize(
    "c,f,hw,k,stride,pad",
    [
        (8, 2 * LANES, (9, 10), 3, 1, 1),  # two vectors of channels, 10 columns -> tile 5
        (5, LANES, (11, 11), 3, 2, 1),  # one vector, strided
        (3, 2 * LANES, (12, 12), 7, 2, 3),  # a stem-like 7x7
        (6, 4 * LANES, (7, 7), 1, 1, 0),  # 1x1
        (4, 12, (6, 6), 3, 1, 1),  # channels no vector divides: the generic schedule
    ],
)
def test_conv2d_default_schedule_numerics(c, f, hw, k, stride, pad):
    func, x = _conv_graph(c, f, hw, k, stride, pad)
    _check(func, x)


@pytest.mark.compiler
def test_conv2d_epilogue_with_residual_and_clip():
    func, x = _conv_graph(8, LANES, (8, 8), residual=True, act="sigmoid")
    _check(func, x)


def test_conv2d_default_schedule_packs_weight_parallel_outside_vector_inside():
    func, _ = _conv_graph(8, 2 * LANES, (9, 10))
    prim = _only_func(func)
    sch = graph.default_schedule(prim, "llvm")
    out = sch.mod["main"]
    v = channel_block(2 * LANES, LANES)
    assert v == 2 * LANES
    assert tuple(int(s) for s in out.params[1].shape) == (2 * LANES // v, 8, 3, 3, v)
    assert 1 in out.attrs["prepacked_args"]
    kinds = _kinds(sch, "conv2d_nchw")
    assert kinds[0] == ForKind.PARALLEL
    assert kinds[-1] == ForKind.VECTORIZED and kinds[-2] == ForKind.UNROLLED
    # the reduction loops sit outside the register tile
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("conv2d_nchw"))]
    assert [lp.loop_var.name for lp in loops[-5:-2]] == ["rc", "ry", "rx"]
    # bias and relu are applied when the tile is written back: no separate pass
    names = [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_block("root"))]
    assert not any(n.startswith("T_relu") for n in names)


def test_conv2d_without_a_vector_of_channels_keeps_its_weight_layout():
    func, _ = _conv_graph(4, 12, (6, 6))
    prim = _only_func(func)
    sch = graph.default_schedule(prim, "llvm")
    assert tuple(int(s) for s in sch.mod["main"].params[1].shape) == (12, 4, 3, 3)
    assert "prepacked_args" not in sch.mod["main"].attrs


@pytest.mark.compiler
def test_depthwise_conv_default_schedule_numerics():
    func, x = _conv_graph(16, 16, (10, 10), groups=16, act="relu")
    _check(func, x)


def _unary_graph(shape, op, **attrs):
    b = GraphBuilder()
    x = b.input("x", shape)
    y = b.call(op, [x], **attrs)
    return b.finish([y]), np.random.default_rng(2).standard_normal(shape).astype("float32")


@pytest.mark.compiler
@pytest.mark.parametrize(
    "op,attrs",
    [
        (
            "max_pool2d",
            {"kernel": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1), "ceil_mode": False},
        ),
        (
            "avg_pool2d",
            {
                "kernel": (3, 3),
                "strides": (1, 1),
                "pads": (1, 1, 1, 1),
                "ceil_mode": False,
                "count_include_pad": False,
            },
        ),
        ("global_avg_pool2d", {}),
    ],
)
def test_pooling_default_schedule_numerics(op, attrs):
    func, x = _unary_graph((1, 8, 12, 12), op, **attrs)
    _check(func, x)


@pytest.mark.compiler
@pytest.mark.parametrize(
    "op,attrs",
    [
        ("softmax", {"axis": -1}),
        ("reduce", {"kind": "mean", "axes": [-1], "keepdims": True}),
        ("reduce", {"kind": "max", "axes": [1], "keepdims": False}),
        ("sigmoid", {}),
    ],
)
def test_reduction_and_elementwise_default_schedule_numerics(op, attrs):
    func, x = _unary_graph((2, 6, 40), op, **attrs)
    _check(func, x)


@pytest.mark.compiler
def test_matmul_bias_gelu_default_schedule_numerics_and_shape():
    rng = np.random.default_rng(3)
    b = GraphBuilder()
    x = b.input("x", (6, 24))
    w = b.const(rng.standard_normal((24, 40)).astype("float32") * 0.2, "w")
    bias = b.const(rng.standard_normal((40,)).astype("float32"), "bias")
    y = b.call("gelu", [b.call("add", [b.call("matmul", [x, w]), bias])])
    func = b.finish([y])
    _check(func, rng.standard_normal((6, 24)).astype("float32"))
    sch = graph.default_schedule(_only_func(func), "llvm")
    text = sch.mod["main"].script()
    assert "T.parallel" in text and "T.vectorized" in text


@pytest.mark.compiler
def test_layer_norm_default_schedule_numerics():
    rng = np.random.default_rng(4)
    b = GraphBuilder()
    x = b.input("x", (3, 5, 48))
    g = b.const(rng.standard_normal((48,)).astype("float32"), "g")
    be = b.const(rng.standard_normal((48,)).astype("float32"), "b")
    y = b.call("layer_norm", [x, g, be], epsilon=1e-5)
    _check(b.finish([y]), rng.standard_normal((3, 5, 48)).astype("float32"))


@pytest.mark.compiler
def test_matmul_with_a_weight_bigger_than_the_cache_sweeps_rows_inside_columns():
    """A weight many times the L2 cache: each column block's strip stays cached while
    the row blocks sweep it (column loop outside the row loop); the register tile is
    written back per row block; numerics unchanged."""
    rng = np.random.default_rng(6)
    b = GraphBuilder()
    x = b.input("x", (16, 32))
    w = b.const(rng.standard_normal((32, 4 * LANES)).astype("float32"), "w")
    func = b.finish([b.call("relu", [b.call("matmul", [x, w])])])
    prim = _only_func(func)
    small = Target("llvm -l2_cache_bytes=256")
    sch = graph.default_schedule(prim, small)
    names = [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block("T_matmul"))]
    # the column block outside the row block (both then fused into the parallel loop)
    assert names == ["j_0_i_0_fused", "k", "i_1", "j_1"], names
    from metaschedule.codegen.build import build

    mod = build(sch.mod["main"], small)
    xv = rng.standard_normal((16, 32)).astype("float32")
    out = np.empty((16, 4 * LANES), "float32")
    # the weight is taken in column panels (see test_matmul_weight_is_packed_in_panels)
    args = mod.pack_weights(xv, func.constants["w"], out)
    mod["main"](*args)
    np.testing.assert_allclose(out, np.maximum(xv @ func.constants["w"], 0), rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_erf_and_gelu_lower_to_arithmetic_within_1e6_of_math_erf():
    import math

    xs = np.linspace(-6, 6, 2401, dtype="float32").reshape(1, 2401)
    for op in ("erf", "gelu"):
        func, _ = _unary_graph((1, 2401), op)
        exe = ri.compile_relax(None, func, "llvm", None)
        got = exe(xs)
        exact = np.array(
            [math.erf(v) for v in xs.ravel().astype(float) * (1 if op == "erf" else 2**-0.5)]
        )
        want = exact if op == "erf" else xs.ravel() * 0.5 * (1 + exact)
        assert float(np.abs(got.ravel() - want).max()) < 2e-6, op
        assert "T.erf" not in _only_func(func).script()  # no libm call per lane


@pytest.mark.compiler
def test_conv_weight_given_at_run_time_is_not_packed():
    """Only constants are re-laid out at compile time: a weight that is a model input
    keeps its OIHW layout (the executable passes it as given)."""
    rng = np.random.default_rng(7)
    b = GraphBuilder()
    x = b.input("x", (1, 4, 6, 6))
    w = b.input("w", (2 * LANES, 4, 3, 3))
    y = b.call("conv2d", [x, w], strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), groups=1)
    func = b.finish([y])
    xv = rng.standard_normal((1, 4, 6, 6)).astype("float32")
    wv = rng.standard_normal((2 * LANES, 4, 3, 3)).astype("float32")
    exe = ri.compile_relax(None, func, "llvm", None)
    np.testing.assert_allclose(exe(xv, wv), graph.interpret(func, xv, wv)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_transpose_to_few_channels_last_unrolls_the_channels_and_vectorizes_nothing():
    # an image NCHW -> NHWC: the 3 channels are too few for a vector; unrolled, the C
    # compiler vectorizes the row loop around them
    func, x = _unary_graph((1, 3, 8, 40), "transpose", axes=(0, 2, 3, 1))
    sch = graph.default_schedule(_only_func(func), "llvm")
    (block,) = [
        b for b in sch.get_child_blocks(sch.get_block("root")) if sch.get(b).name_hint != "root"
    ]
    kinds = [sch.get(lp).kind for lp in sch.get_loops(block)]
    assert kinds[0] == ForKind.PARALLEL and kinds[-1] == ForKind.UNROLLED
    assert ForKind.VECTORIZED not in kinds
    exe = _check(func, x)
    np.testing.assert_array_equal(exe(x), x.transpose(0, 2, 3, 1))


@pytest.mark.compiler
def test_short_contiguous_inner_loop_is_fused_into_a_vector_not_unrolled():
    # element-wise over 3 channels: contiguous, the postprocessor fuses the loops
    func, x = _unary_graph((1, 2, 40, 3), "relu")
    sch = graph.default_schedule(_only_func(func), "llvm")
    (block,) = list(sch.get_child_blocks(sch.get_block("root")))
    kinds = [sch.get(lp).kind for lp in sch.get_loops(block)]
    assert ForKind.UNROLLED not in kinds and kinds[-1] == ForKind.VECTORIZED
    _check(func, x)


@pytest.mark.compiler
def test_matmul_weight_is_packed_in_column_panels_with_an_8_row_tile():
    """A constant matmul weight ``W[k, j]`` is taken as ``[j0, k, j1]``: the panel of one
    column block contiguous (rows 4 KiB apart would share L1 sets), the register tile 8
    rows by the vector block; numerics through compile_relax (which packs the weight)."""
    rng = np.random.default_rng(8)
    b = GraphBuilder()
    x = b.input("x", (16, 24))
    w = b.const(rng.standard_normal((24, 4 * LANES)).astype("float32"), "w")
    bias = b.const(rng.standard_normal((4 * LANES,)).astype("float32"), "bias")
    func = b.finish([b.call("add", [b.call("matmul", [x, w]), bias])])
    prim = _only_func(func)
    sch = graph.default_schedule(prim, "llvm")
    main = sch.mod["main"]
    packed = main.attrs["prepacked_args"]
    assert list(packed) == [1]  # the weight; the 1-D bias keeps its layout
    assert tuple(int(s) for s in main.params[1].shape) == (2, 24, 2 * LANES)
    loops = sch.get_loops(sch.get_block("T_matmul"))
    assert [int(sch.get(lp).extent.value) for lp in loops[-2:]] == [8, 2 * LANES]
    from metaschedule.codegen.build import build

    # the C reads the packed weight with plain vector loads (no per-lane gather) into 16
    # register accumulators
    src = build(main, "llvm").get_source()
    weight = main.params[1].name
    assert f"_load_f32x{LANES}(&{weight}[" in src and "const float* ms_p" not in src
    assert "kept in 16 accumulators" in src
    _check(func, rng.standard_normal((16, 24)).astype("float32"))
    # given at run time, the weight keeps its layout
    b2 = GraphBuilder()
    x2, w2 = b2.input("x", (16, 24)), b2.input("w", (24, 4 * LANES))
    runtime = _only_func(b2.finish([b2.call("matmul", [x2, w2])]))
    assert "prepacked_args" not in graph.default_schedule(runtime, "llvm", set()).mod["main"].attrs


@pytest.mark.compiler
def test_softmax_row_sums_run_in_vector_lanes():
    """Softmax's sum of exponentials (and layer norm's sums) get their init hoisted out
    of the reduction loop, so the loop is vector code (vector exp, partial sums in
    lanes), not a scalar ``expf`` per element."""
    from metaschedule.codegen.build import build

    func, x = _unary_graph((2, 3, 64), "softmax", axis=-1)
    sch = graph.default_schedule(_only_func(func), "llvm")
    src = build(sch.mod["main"], "llvm").get_source()
    assert "summed in vector lanes" in src and "expf(" not in src
    _check(func, x)


@pytest.mark.compiler
@pytest.mark.parametrize("size,pad", [(13, 1), (11, 1), (12, 0)])
def test_max_pool_default_schedule_tiles_rows_in_registers_with_padding_inlined(size, pad):
    """An NHWC max pool (ResNet's 3x3 stride 2): its padding is read in the window as
    guarded loads (no padded copy), and two output rows by a channel vector stay in
    registers across the window (WindowTiling's sketch); odd row counts included."""
    from metaschedule import te
    from metaschedule.codegen import build
    from metaschedule.te import ops
    from metaschedule.tir.interpreter import interpret

    x = te.placeholder((1, size, size, 64), "float32", "x")
    func = te.create_prim_func([x, ops.max_pool2d(x, 3, 2, padding=pad)])
    sch = graph.default_schedule(func, "llvm")
    names = [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_block("root"))]
    assert "pad_temp" not in names
    assert "meta_schedule.window_tiling" in str(sch.trace)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.static_shape()).astype("float32") for p in func.params]
    want = [a.copy() for a in args]
    interpret(func, *want)
    build(sch.mod, "llvm")(*args)
    np.testing.assert_array_equal(args[-1], want[-1])


# ----------------------------------------------------------------------------- prime extents
#: extents without small divisors (ViT's 197 tokens, and smaller primes): the default
#: schedule tiles them with a guarded last tile or vectorizes them whole
PRIMES = (197, 61, 13)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layer_norm(x, g, be, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + be


def _close(got, want, rtol=1e-4):
    scale = max(float(np.abs(want).max()), 1e-6)
    assert float(np.abs(got - want).max()) / scale < rtol


@pytest.mark.compiler
@pytest.mark.parametrize("n", PRIMES)
def test_dense_with_prime_rows_or_columns_matches_numpy(n):
    """A constant-weight matmul with bias: ``n`` rows (a register tile of 8 rows, the last
    one guarded) and ``n`` columns (the vector loop)."""
    rng = np.random.default_rng(n)
    for m, cols in ((n, 2 * LANES), (16, n)):
        b = GraphBuilder()
        x = b.input("x", (m, 40))
        w = b.const(rng.standard_normal((40, cols)).astype("float32"), "w")
        bias = b.const(rng.standard_normal((cols,)).astype("float32"), "bias")
        func = b.finish([b.call("add", [b.call("matmul", [x, w]), bias])])
        xv = rng.standard_normal((m, 40)).astype("float32")
        exe = _check(func, xv)
        _close(exe(xv), xv @ func.constants["w"] + func.constants["bias"])


@pytest.mark.compiler
@pytest.mark.parametrize("n", PRIMES)
def test_batch_matmuls_with_prime_extents_match_numpy(n):
    """Attention's two matmuls over ``n`` tokens: ``Q @ K^T`` (``n x n``, the vector loop
    of prime extent) and ``P @ V`` (``n`` rows, ``n`` long reduction)."""
    rng = np.random.default_rng(n + 1)
    b = GraphBuilder()
    q, kt = b.input("q", (2, n, 24)), b.input("kt", (2, 24, n))
    func = b.finish([b.call("matmul", [q, kt])])
    qv = rng.standard_normal((2, n, 24)).astype("float32")
    kv = rng.standard_normal((2, 24, n)).astype("float32")
    exe = _check(func, qv, kv)
    _close(exe(qv, kv), qv @ kv)
    b = GraphBuilder()
    p, v = b.input("p", (2, n, n)), b.input("v", (2, n, 16))
    func = b.finish([b.call("matmul", [p, v])])
    pv = rng.standard_normal((2, n, n)).astype("float32")
    vv = rng.standard_normal((2, n, 16)).astype("float32")
    exe = _check(func, pv, vv)
    _close(exe(pv, vv), pv @ vv)


@pytest.mark.compiler
@pytest.mark.parametrize("n", PRIMES)
def test_softmax_and_layer_norm_with_prime_extents_match_numpy(n):
    rng = np.random.default_rng(n + 2)
    func, x = _unary_graph((2, n, n), "softmax", axis=-1)
    exe = _check(func, x)
    _close(exe(x), _softmax(x.astype("float64")))
    for shape in ((n, 48), (3, n)):
        b = GraphBuilder()
        xi = b.input("x", shape)
        g = b.const(rng.standard_normal((shape[-1],)).astype("float32"), "g")
        be = b.const(rng.standard_normal((shape[-1],)).astype("float32"), "b")
        func = b.finish([b.call("layer_norm", [xi, g, be], epsilon=1e-5)])
        xv = rng.standard_normal(shape).astype("float32")
        exe = _check(func, xv)
        _close(exe(xv), _layer_norm(xv.astype("float64"), func.constants["g"], func.constants["b"]))


@pytest.mark.compiler
def test_prime_extents_get_register_tiles_and_vectors():
    """197 rows: tiles of 8 rows, the interior ones unguarded in register accumulators
    (the code generator versions the last, guarded tile); ``Q @ K^T`` with 197 columns
    vectorizes them whole (12 vectors and a remainder), not one lane at a time."""
    from metaschedule.codegen.build import build

    rng = np.random.default_rng(9)
    b = GraphBuilder()
    x = b.input("x", (197, 40))
    w = b.const(rng.standard_normal((40, 2 * LANES)).astype("float32"), "w")
    prim = _only_func(b.finish([b.call("matmul", [x, w])]))
    sch = graph.default_schedule(prim, "llvm")
    loops = sch.get_loops(sch.get_block("T_matmul"))
    assert [int(sch.get(lp).extent.value) for lp in loops[-2:]] == [8, 2 * LANES]
    src = build(sch.mod["main"], "llvm").get_source()
    assert "kept in 16 accumulators" in src
    b = GraphBuilder()
    q, kt = b.input("q", (2, 197, 24)), b.input("kt", (2, 24, 197))
    sch = graph.default_schedule(_only_func(b.finish([b.call("matmul", [q, kt])])), "llvm")
    loops = sch.get_loops(sch.get_block("T_matmul"))
    assert sch.get(loops[-1]).kind == ForKind.VECTORIZED
    assert int(sch.get(loops[-1]).extent.value) == 197


def _squeeze_excite(c=32, s=4, hw=12):
    """y * sigmoid(conv1x1(relu(conv1x1(mean(y))))) of a convolution's output y (channels
    last, as the product): the gate has one value per channel."""
    rng = np.random.default_rng(4)
    b = GraphBuilder()
    x = b.input("x", (1, c, hw, hw))
    w = b.const(rng.standard_normal((c, c, 1, 1)).astype("float32") * 0.3, "w")
    x = b.call("conv2d", [x, w], strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1)
    g = b.call("global_avg_pool2d", [x])
    for i, (cin, cout) in enumerate([(c, s), (s, c)]):
        w = b.const(rng.standard_normal((cout, cin, 1, 1)).astype("float32") * 0.3, f"w{i}")
        g = b.call("conv2d", [g, w], strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1)
        g = b.call("relu" if i == 0 else "sigmoid", [g])
    return b.finish([b.call("multiply", [x, g])]), rng


@pytest.mark.compiler
def test_a_broadcast_gate_is_computed_once_per_channel_not_per_pixel():
    f, rng = _squeeze_excite()
    x = rng.standard_normal((1, 32, 12, 12)).astype("float32")
    _check(f, x)
    gated = [t for t in ri.extract_tasks(f, "llvm") if "sigmoid" in t.task_name]
    assert gated
    for task in gated:
        sch = graph.default_schedule(task.mod["main"], "llvm")
        blocks = [b for b in _blocks(sch.mod["main"]) if b.writes]  # not the root
        sigmoid = [b for b in blocks if "T.sigmoid(" in str(b.body)]
        assert sigmoid
        for blk in sigmoid:  # inlined into the product it would write 12 * 12 * 32
            assert int(np.prod([int(e) for e in blk.writes[0].buffer.shape])) == 32


def test_a_global_pool_accumulates_several_vectors_and_leaves_a_chunk_per_core():
    """No rows to tile: the channel loop takes several vectors (independent sums), as
    many as divide the channels with a chunk left for every core."""
    assert _wide_vector(144, 16, 16, 1, 1) == 48  # 9 vectors: 3 x 3 (at most 8)
    assert _wide_vector(96, 16, 16, 1, 2) == 48  # 2 chunks for 2 cores
    assert _wide_vector(96, 16, 8, 1, 2) == 48  # AVX2: 6 vectors of 8
    assert _wide_vector(96, 16, 16, 4, 4) == 96  # the batch gives the cores their chunks
    assert _wide_vector(16, 16, 16, 1, 1) == 16
    x = te.placeholder((1, 14, 14, 144), "float32", "X")
    func = te.create_prim_func([x, ops.global_avg_pool2d(x)])
    sch = graph.default_schedule(func, "llvm -mcpu=skylake-avx512 -num-cores=1")
    found = []

    class Loops(Visitor):
        def visit_For(self, node):
            if node.kind == ForKind.VECTORIZED:
                found.append(int(node.extent.value))
            self.generic_visit(node)

    Loops().visit(sch.mod["main"].body)
    assert 48 in found  # the reduction's vector loop: 3 vectors of 16 lanes
