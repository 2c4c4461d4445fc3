"""The te operator library, built unscheduled and checked against numpy.

Every operator runs through the reference interpreter, and through the C code
generator when it is available (``compiler`` marker).
"""

import importlib.util
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaschedule import te
from metaschedule.te import ops
from metaschedule.te.ops._util import window_count
from metaschedule.testing import RandomArrays
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.verify import verify_well_formed

_HAVE_BUILD = importlib.util.find_spec("metaschedule.codegen") is not None and (
    importlib.util.find_spec("metaschedule.codegen.build") is not None
)

EXECUTORS = [
    pytest.param("interp", id="interp"),
    pytest.param(
        "build",
        id="build",
        marks=[
            pytest.mark.compiler,
            pytest.mark.skipif(not _HAVE_BUILD, reason="metaschedule.codegen.build not there yet"),
        ],
    ),
]


@pytest.fixture(params=EXECUTORS)
def run(request):
    """``run(inputs, output(s), arrays)``: build one PrimFunc, return the output array(s)."""

    def go(inputs, output, arrays):
        outputs = output if isinstance(output, list) else [output]
        func = te.create_prim_func([*inputs, *outputs])
        verify_well_formed(func)
        check_round_trips(func, [*inputs, *outputs])
        outs = [np.zeros(o.shape, o.dtype) for o in outputs]
        if request.param == "interp":
            interpret(func, *arrays, *outs)
        else:
            from metaschedule.codegen.build import build

            build(func, "cpu")(*arrays, *outs)
        return outs if isinstance(output, list) else outs[0]

    return go


def check_round_trips(func, tensors):
    """Every operator's function survives JSON and hashes like a freshly built copy."""
    from metaschedule.tir import load_json, save_json, structural_equal, structural_hash

    loaded = load_json(save_json(func))
    assert structural_equal(loaded, func, map_free_vars=True)
    assert structural_hash(loaded) == structural_hash(func)
    again = te.create_prim_func(tensors)  # fresh loop and block variables: alpha-renamed
    assert structural_equal(again, func) and structural_hash(again) == structural_hash(func)


rand = RandomArrays()  # each call names its seed: inputs independent of test order


def close(actual, expected, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def block_names(out, inputs):
    func = te.create_prim_func([*inputs, out])
    names = []

    def visit(node):
        from metaschedule import tir

        if isinstance(node, tir.Block) and node.name_hint != "root":
            names.append(node.name_hint)

    from metaschedule.tir.functor import post_order_visit

    post_order_visit(func.body, visit)
    return names


# ----------------------------------------------------------------------------- references


def ref_conv(x, w, stride, before, after, dilation, groups=1):
    """Direct N-d channels-last convolution in float64."""
    nd = x.ndim - 2
    x = x.astype("float64")
    w = w.astype("float64")
    xp = np.pad(x, [(0, 0), *zip(before, after), (0, 0)])
    ks, (cin_g, F) = w.shape[:nd], w.shape[nd:]
    out_sp = [(xp.shape[1 + d] - dilation[d] * (ks[d] - 1) - 1) // stride[d] + 1 for d in range(nd)]
    out = np.zeros((x.shape[0], *out_sp, F))
    fpg = F // groups
    for pos in np.ndindex(*ks):
        window = tuple(
            slice(p * dl, p * dl + (o - 1) * s + 1, s)
            for p, dl, o, s in zip(pos, dilation, out_sp, stride)
        )
        patch = xp[(slice(None), *window, slice(None))]
        for g in range(groups):
            out[..., g * fpg : (g + 1) * fpg] += (
                patch[..., g * cin_g : (g + 1) * cin_g] @ w[pos][:, g * fpg : (g + 1) * fpg]
            )
    return out


def ref_pool(x, k, s, before, after_total, fill, reduce):
    xp = np.pad(
        x.astype("float64"),
        [(0, 0), (before[0], after_total[0]), (before[1], after_total[1]), (0, 0)],
        constant_values=fill,
    )
    oh = (xp.shape[1] - k[0]) // s[0] + 1
    ow = (xp.shape[2] - k[1]) // s[1] + 1
    windows = [
        xp[:, r : r + (oh - 1) * s[0] + 1 : s[0], c : c + (ow - 1) * s[1] + 1 : s[1], :]
        for r in range(k[0])
        for c in range(k[1])
    ]
    return reduce(np.stack(windows), axis=0)


# ----------------------------------------------------------------------------- matmul family


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(run, ta, tb):
    a, b = rand(5, 3, seed=1), rand(3, 4, seed=2)
    A = te.placeholder(a.T.shape if ta else a.shape, name="A")
    B = te.placeholder(b.T.shape if tb else b.shape, name="B")
    C = ops.matmul(A, B, transpose_a=ta, transpose_b=tb)
    assert C.shape == (5, 4) and C.name == "T_matmul_" + ("T" if ta else "N") + ("T" if tb else "N")
    out = run(
        [A, B], C, [np.ascontiguousarray(a.T if ta else a), np.ascontiguousarray(b.T if tb else b)]
    )
    close(out, a @ b)


def test_matmul_int8_to_int32(run):
    a = np.random.default_rng(3).integers(-128, 128, (4, 6)).astype("int8")
    b = np.random.default_rng(4).integers(-128, 128, (6, 3)).astype("int8")
    A, B = te.placeholder(a.shape, "int8", "A"), te.placeholder(b.shape, "int8", "B")
    C = ops.matmul(A, B, out_dtype="int32")
    assert C.dtype == "int32"
    np.testing.assert_array_equal(run([A, B], C, [a, b]), a.astype("int32") @ b.astype("int32"))


def test_matmul_shape_error():
    with pytest.raises(ValueError, match="reduction sizes differ"):
        ops.matmul(te.placeholder((3, 4)), te.placeholder((5, 2)))


@pytest.mark.parametrize(
    "ta,tb,ba,bb", [(False, False, 2, 2), (False, True, 2, 1), (True, False, 1, 2)]
)
def test_batch_matmul(run, ta, tb, ba, bb):
    a, b = rand(ba, 3, 4, seed=5), rand(bb, 4, 2, seed=6)
    sa = a.transpose(0, 2, 1) if ta else a
    sb = b.transpose(0, 2, 1) if tb else b
    A, B = te.placeholder(sa.shape, name="A"), te.placeholder(sb.shape, name="B")
    C = ops.batch_matmul(A, B, transpose_a=ta, transpose_b=tb)
    out = run([A, B], C, [np.ascontiguousarray(sa), np.ascontiguousarray(sb)])
    close(out, a @ b)


@pytest.mark.parametrize("with_bias", [False, True])
def test_dense(run, with_bias):
    x, w, bias = rand(3, 5, seed=7), rand(4, 5, seed=8), rand(4, seed=9)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    inputs, arrays = [X, W], [x, w]
    if with_bias:
        Bias = te.placeholder((4,), name="bias")
        inputs.append(Bias)
        arrays.append(bias)
    Y = ops.dense(X, W, bias=inputs[2] if with_bias else None)
    expected = x @ w.T + (bias if with_bias else 0)
    close(run(inputs, Y, arrays), expected)
    assert block_names(Y, inputs) == (["T_dense", "T_add"] if with_bias else ["T_dense"])


# ----------------------------------------------------------------------------- convolutions


@pytest.mark.parametrize(
    "stride,padding,dilation,before,after",
    [
        (1, 0, 1, (0, 0), (0, 0)),
        (2, 1, 1, (1, 1), (1, 1)),
        (1, (1, 2), 2, (1, 2), (1, 2)),
        (2, (0, 1, 2, 1), 1, (0, 1), (2, 1)),
        (1, "SAME", 1, (1, 1), (1, 1)),
    ],
)
def test_conv2d_nhwc(run, stride, padding, dilation, before, after):
    x, w = rand(1, 6, 7, 3, seed=10), rand(3, 3, 3, 4, seed=11)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Y = ops.conv2d_nhwc(X, W, stride=stride, padding=padding, dilation=dilation)
    st, dl = (stride, stride), (dilation, dilation)
    expected = ref_conv(x, w, st, before, after, dl)
    assert Y.shape == expected.shape
    close(run([X, W], Y, [x, w]), expected)
    padded = any(before) or any(after)
    assert block_names(Y, [X, W]) == (["PaddedInput"] if padded else []) + ["conv2d_nhwc"]


def test_conv1d_nwc(run):
    x, w = rand(2, 9, 3, seed=12), rand(3, 3, 5, seed=13)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Y = ops.conv1d_nwc(X, W, stride=2, padding=(1, 2), dilation=1)
    close(run([X, W], Y, [x, w]), ref_conv(x, w, (2,), (1,), (2,), (1,)))


def test_conv3d_ndhwc(run):
    x, w = rand(1, 4, 5, 4, 2, seed=14), rand(2, 3, 2, 2, 3, seed=15)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Y = ops.conv3d_ndhwc(X, W, stride=(1, 2, 1), padding=1)
    expected = ref_conv(x, w, (1, 2, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1))
    close(run([X, W], Y, [x, w]), expected)
    func = te.create_prim_func([X, W, Y])
    conv = func.root_block.body.seq[1]
    names = []
    while hasattr(conv, "loop_var"):
        names.append(conv.loop_var.name)
        conv = conv.body
    assert names == ["nn", "zz", "yy", "xx", "ff", "rz", "ry", "rx", "rc"]


def test_group_conv2d_nhwc(run):
    x, w = rand(1, 5, 5, 6, seed=16), rand(3, 3, 2, 9, seed=17)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Y = ops.group_conv2d_nhwc(X, W, stride=1, padding=1, groups=3)
    close(run([X, W], Y, [x, w]), ref_conv(x, w, (1, 1), (1, 1), (1, 1), (1, 1), groups=3))
    with pytest.raises(ValueError, match="groups"):
        ops.group_conv2d_nhwc(X, W, groups=4)


@pytest.mark.parametrize("multiplier", [None, 2])
def test_depthwise_conv2d_nhwc(run, multiplier):
    x = rand(1, 6, 6, 3, seed=18)
    w = rand(3, 3, 3, multiplier, seed=19) if multiplier else rand(3, 3, 3, seed=19)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Y = ops.depthwise_conv2d_nhwc(X, W, stride=2, padding=1)
    w4 = w if multiplier else w[..., None]
    m = w4.shape[3]
    # depthwise = grouped conv with C groups, kernel [KH, KW, 1, C*M]
    grouped = w4.reshape(3, 3, 1, 3 * m)
    expected = ref_conv(x, grouped, (2, 2), (1, 1), (1, 1), (1, 1), groups=3)
    assert Y.shape == (1, 3, 3, 3 * m)
    close(run([X, W], Y, [x, w]), expected)


@pytest.mark.parametrize(
    "stride,padding,output_padding",
    [(1, 0, 0), (2, 1, 1), (2, (0, 1), 0), (3, (1, 0, 2, 1), (2, 1))],
)
def test_conv2d_transpose_nhwc(run, stride, padding, output_padding):
    x, w = rand(1, 3, 4, 2, seed=20), rand(3, 3, 2, 3, seed=21)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Y = ops.conv2d_transpose_nhwc(
        X, W, stride=stride, padding=padding, output_padding=output_padding
    )
    s = stride
    op = (output_padding,) * 2 if isinstance(output_padding, int) else output_padding
    pads = (
        {0: (0, 0, 0, 0), 1: (1, 1, 1, 1)}.get(padding)
        if isinstance(padding, int)
        else (padding * 2 if len(padding) == 2 else padding)
    )
    full = np.zeros((1, (3 - 1) * s + 3 + op[0], (4 - 1) * s + 3 + op[1], 3))
    for kh in range(3):
        for kw in range(3):
            full[:, kh : kh + 2 * s + 1 : s, kw : kw + 3 * s + 1 : s, :] += x.astype("float64") @ w[
                kh, kw
            ].astype("float64")
    top, left, bottom, right = pads
    expected = full[:, top : full.shape[1] - bottom, left : full.shape[2] - right, :]
    assert Y.shape == expected.shape
    close(run([X, W], Y, [x, w]), expected)
    assert block_names(Y, [X, W]) == ["data_pad", "conv2d_transpose_nhwc"]


def test_conv_errors():
    X = te.placeholder((1, 5, 5, 3), name="X")
    with pytest.raises(ValueError, match="expects 4 input channels"):
        ops.conv2d_nhwc(X, te.placeholder((3, 3, 4, 2)))
    with pytest.raises(ValueError, match="padding needs 1, 2 or 4 values"):
        ops.conv2d_nhwc(X, te.placeholder((3, 3, 3, 2)), padding=(1, 1, 1))
    with pytest.raises(ValueError, match="does not fit"):
        ops.conv2d_nhwc(X, te.placeholder((7, 7, 3, 2)))
    with pytest.raises(ValueError, match="output_padding"):
        ops.conv2d_transpose_nhwc(X, te.placeholder((3, 3, 3, 2)), stride=2, output_padding=2)


# ----------------------------------------------------------------------------- pooling


@pytest.mark.parametrize(
    "kernel,stride,padding,ceil_mode",
    [
        (2, 2, 0, False),
        (3, 2, 1, False),
        (3, (1, 2), (0, 1, 1, 0), False),
        (2, 2, 0, True),
        (3, 2, 1, True),
    ],
)
def test_max_pool2d(run, kernel, stride, padding, ceil_mode):
    x = rand(1, 5, 6, 2, seed=22)
    X = te.placeholder(x.shape, name="X")
    Y = ops.max_pool2d(X, kernel, stride, padding, ceil_mode=ceil_mode)
    expected = _torch_like_pool(x, kernel, stride, padding, ceil_mode, "max", True)
    assert Y.shape == expected.shape
    close(run([X], Y, [x]), expected)


@pytest.mark.parametrize(
    "kernel,stride,padding,ceil_mode,include",
    [
        (2, 2, 0, False, True),
        (3, 2, 1, False, True),
        (3, 2, 1, False, False),
        (3, 2, 1, True, True),
        (3, 2, 1, True, False),
        (3, 1, (1, 0, 0, 1), False, False),
    ],
)
def test_avg_pool2d(run, kernel, stride, padding, ceil_mode, include):
    x = rand(1, 5, 6, 2, seed=23)
    X = te.placeholder(x.shape, name="X")
    Y = ops.avg_pool2d(X, kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=include)
    expected = _torch_like_pool(x, kernel, stride, padding, ceil_mode, "avg", include)
    assert Y.shape == expected.shape
    close(run([X], Y, [x]), expected)
    assert block_names(Y, [X])[-2:] == ["pool_sum", "pool_avg"]


def _torch_like_pool(x, kernel, stride, padding, ceil_mode, kind, include):
    k = (kernel, kernel) if isinstance(kernel, int) else kernel
    s = (stride, stride) if isinstance(stride, int) else stride
    if isinstance(padding, int):
        padding = (padding,) * 4
    before, after = padding[:2], padding[2:] if len(padding) == 4 else padding
    out = []
    for d in range(2):
        span = x.shape[1 + d] + before[d] + after[d] - k[d]
        n = (math.ceil(span / s[d]) if ceil_mode else span // s[d]) + 1
        if ceil_mode and (n - 1) * s[d] >= x.shape[1 + d] + before[d]:
            n -= 1
        out.append(n)
    total = [
        max(after[d], (out[d] - 1) * s[d] + k[d] - x.shape[1 + d] - before[d]) for d in range(2)
    ]
    if kind == "max":
        return ref_pool(x, k, s, before, total, -np.inf, np.max)
    sums = ref_pool(x, k, s, before, total, 0.0, np.sum)
    mask = np.ones((1, *x.shape[1:3], 1))
    if include:  # count explicit padding, never the ceil_mode extra
        mask = np.pad(
            mask,
            [(0, 0), (before[0], after[0]), (before[1], after[1]), (0, 0)],
            constant_values=1.0,
        )
        counts = ref_pool(mask, k, s, (0, 0), [t - a for t, a in zip(total, after)], 0.0, np.sum)
    else:
        counts = ref_pool(mask, k, s, before, total, 0.0, np.sum)
    return sums / counts


def test_pool_known_shapes():
    X = te.placeholder((1, 5, 5, 1), name="X")
    assert ops.max_pool2d(X, 2, 2).shape == (1, 2, 2, 1)
    assert ops.max_pool2d(X, 2, 2, ceil_mode=True).shape == (1, 3, 3, 1)
    assert ops.avg_pool2d(X, 3, 2, 1).shape == (1, 3, 3, 1)


def test_global_avg_pool2d(run):
    x = rand(2, 3, 4, 5, seed=24)
    X = te.placeholder(x.shape, name="X")
    Y = ops.global_avg_pool2d(X)
    assert Y.shape == (2, 1, 1, 5)
    close(run([X], Y, [x]), x.mean(axis=(1, 2), keepdims=True))


def test_max_pool_int_pads_with_lowest(run):
    x = -np.arange(1, 17, dtype="int32").reshape(1, 4, 4, 1)
    X = te.placeholder(x.shape, "int32", name="X")
    Y = ops.max_pool2d(X, 3, 1, 1)
    expected = ref_pool(x, (3, 3), (1, 1), (1, 1), (1, 1), -(2**31), np.max)
    np.testing.assert_array_equal(run([X], Y, [x]), expected)


# ----------------------------------------------------------------------------- softmax, norms


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(run, axis):
    x = rand(3, 4, 5, seed=25) * 3
    X = te.placeholder(x.shape, name="X")
    Y = ops.softmax(X, axis=axis)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    close(run([X], Y, [x]), e / e.sum(axis=axis, keepdims=True))
    assert block_names(Y, [X]) == [
        "T_softmax_maxelem",
        "T_softmax_exp",
        "T_softmax_expsum",
        "T_softmax_norm",
    ]


@pytest.mark.parametrize("axis", [-1, (1, 2)])
def test_layer_norm(run, axis):
    x = rand(2, 3, 6, seed=26) + 4.0
    axes = (axis,) if isinstance(axis, int) else axis
    norm_shape = tuple(x.shape[a] for a in axes)
    g, b = rand(*norm_shape, seed=27), rand(*norm_shape, seed=28)
    X = te.placeholder(x.shape, name="X")
    G, B = te.placeholder(norm_shape, name="gamma"), te.placeholder(norm_shape, name="beta")
    Y = ops.layer_norm(X, G, B, axis=axis, epsilon=1e-5)
    x64 = x.astype("float64")
    mean = x64.mean(axis=axes, keepdims=True)
    var = x64.var(axis=axes, keepdims=True)
    expected = (x64 - mean) / np.sqrt(var + 1e-5) * g + b
    close(run([X, G, B], Y, [x, g, b]), expected)
    with pytest.raises(ValueError, match="gamma"):
        ops.layer_norm(X, te.placeholder((5,)), None)


# ----------------------------------------------------------------------------- element-wise


def test_unary_ops(run):
    x = rand(3, 4, seed=29)
    X = te.placeholder(x.shape, name="X")
    x64 = x.astype("float64")
    c = math.sqrt(2 / math.pi)
    cases = {
        "relu": (ops.relu, np.maximum(x64, 0)),
        "sigmoid": (ops.sigmoid, 1 / (1 + np.exp(-x64))),
        "tanh": (ops.tanh, np.tanh(x64)),
        "gelu": (ops.gelu, 0.5 * x64 * (1 + np.tanh(c * (x64 + 0.044715 * x64**3)))),
    }
    outputs = [fn(X) for fn, _ in cases.values()]
    assert all(Y.op.tag == "elemwise" for Y in outputs)
    for actual, (_, expected) in zip(run([X], outputs, [x]), cases.values()):
        close(actual, expected)


@pytest.mark.parametrize(
    "shape_a,shape_b", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((1,), (2, 3))]
)
def test_binary_broadcast(run, shape_a, shape_b):
    a, b = rand(*shape_a, seed=30), rand(*shape_b, seed=31) + 3.0
    A, B = te.placeholder(shape_a, name="A"), te.placeholder(shape_b, name="B")
    pairs = (
        (ops.add, np.add),
        (ops.subtract, np.subtract),
        (ops.multiply, np.multiply),
        (ops.divide, np.divide),
    )
    outputs = [fn(A, B) for fn, _ in pairs]
    assert all(Y.shape == np.broadcast_shapes(shape_a, shape_b) for Y in outputs)
    for actual, (_, ref) in zip(run([A, B], outputs, [a, b]), pairs):
        close(actual, ref(a, b))


def test_binary_with_scalar_and_errors(run):
    a = rand(2, 3, seed=32)
    A = te.placeholder(a.shape, name="A")
    plus, minus = run([A], [ops.add(A, 2.5), ops.subtract(1.0, A)], [a])
    close(plus, a + 2.5)
    close(minus, 1.0 - a)
    with pytest.raises(ValueError, match="do not broadcast"):
        ops.add(A, te.placeholder((4,)))


def test_bias_add(run):
    x, b = rand(2, 3, 4, seed=33), rand(3, seed=34)
    X, B = te.placeholder(x.shape, name="X"), te.placeholder((3,), name="b")
    close(run([X, B], ops.bias_add(X, B, axis=1), [x, b]), x + b[None, :, None])
    with pytest.raises(ValueError, match="bias has 3 elements"):
        ops.bias_add(X, B, axis=-1)


# ----------------------------------------------------------------------------- layout


@pytest.mark.parametrize("axes", [None, (0, 2, 1), (2, 0, 1), (-1, 0, 1)])
def test_transpose(run, axes):
    x = rand(2, 3, 4, seed=35)
    X = te.placeholder(x.shape, name="X")
    Y = ops.transpose(X, axes)
    np.testing.assert_array_equal(run([X], Y, [x]), np.transpose(x, axes))


def test_transpose_error():
    with pytest.raises(ValueError, match="permutation"):
        ops.transpose(te.placeholder((2, 3)), (0, 0))


@pytest.mark.parametrize(
    "src,dst",
    [
        ((2, 3, 4), (6, 4)),
        ((2, 3, 4), (4, -1)),
        ((6,), (1, 2, 3)),
        ((2, 1, 3), (3, 2)),
        ((4, 6), (2, 2, 2, 3)),
    ],
)
def test_reshape(run, src, dst):
    x = rand(*src, seed=36)
    X = te.placeholder(src, name="X")
    Y = ops.reshape(X, dst)
    np.testing.assert_array_equal(run([X], Y, [x]), x.reshape(dst))


def test_reshape_error():
    with pytest.raises(ValueError, match="cannot reshape"):
        ops.reshape(te.placeholder((2, 3)), (4, 2))


def test_pad(run):
    x = rand(2, 3, seed=37)
    X = te.placeholder(x.shape, name="X")
    Y = ops.pad(X, (1, 0), (2, 3), pad_value=-1.5)
    np.testing.assert_array_equal(
        run([X], Y, [x]), np.pad(x, ((1, 2), (0, 3)), constant_values=-1.5)
    )
    func = te.create_prim_func([X, Y])
    block = func.root_block.body.body.body.block
    assert block.name_hint == "PadInput" and block.annotations["tag"] == "injective,pad"


def test_fused_graph_of_ops(run):
    """conv -> bias -> relu -> max_pool -> reshape -> dense -> softmax, one PrimFunc."""
    x, w = rand(1, 6, 6, 2, seed=38), rand(3, 3, 2, 4, seed=39)
    bias, wd = rand(4, seed=40), rand(5, 36, seed=41)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Bb, Wd = te.placeholder((4,), name="b"), te.placeholder(wd.shape, name="Wd")
    h = ops.relu(ops.bias_add(ops.conv2d_nhwc(X, W, padding=1), Bb))
    h = ops.reshape(ops.max_pool2d(h, 2, 2), (1, 36))
    Y = ops.softmax(ops.dense(h, Wd))
    conv = ref_conv(x, w, (1, 1), (1, 1), (1, 1), (1, 1)) + bias
    pooled = ref_pool(np.maximum(conv, 0), (2, 2), (2, 2), (0, 0), (0, 0), 0.0, np.max)
    logits = pooled.reshape(1, 36) @ wd.T
    e = np.exp(logits - logits.max())
    close(run([X, W, Bb, Wd], Y, [x, w, bias, wd]), e / e.sum())


# ----------------------------------------------------------------------------- properties


@settings(max_examples=20, deadline=None)
@given(
    h=st.integers(3, 7),
    w=st.integers(3, 7),
    kh=st.integers(1, 3),
    kw=st.integers(1, 3),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    groups=st.sampled_from([1, 2]),
)
def test_conv2d_geometry_property(h, w, kh, kw, stride, dilation, pads, groups):
    if h + pads[0] + pads[2] < dilation[0] * (kh - 1) + 1:
        return
    if w + pads[1] + pads[3] < dilation[1] * (kw - 1) + 1:
        return
    x, k = rand(1, h, w, 2, seed=h * w), rand(kh, kw, 2 // groups, 2, seed=kh + kw)
    X, K = te.placeholder(x.shape, name="X"), te.placeholder(k.shape, name="K")
    Y = ops.group_conv2d_nhwc(X, K, stride=stride, padding=pads, dilation=dilation, groups=groups)
    expected = ref_conv(x, k, stride, pads[:2], pads[2:], dilation, groups=groups)
    assert Y.shape == expected.shape
    func = te.create_prim_func([X, K, Y])
    out = np.zeros(Y.shape, "float32")
    interpret(func, x, k, out)
    close(out, expected)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_transpose_reshape_property(shape, data):
    x = rand(*shape, seed=len(shape))
    axes = data.draw(st.permutations(range(len(shape))))
    size = int(np.prod(shape))
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    first = data.draw(st.sampled_from(divisors))
    X = te.placeholder(x.shape, name="X")
    Y = ops.reshape(ops.transpose(X, axes), (first, -1))
    out = np.zeros(Y.shape, "float32")
    interpret(te.create_prim_func([X, Y]), x, out)
    np.testing.assert_array_equal(out, np.transpose(x, axes).reshape(first, -1))


def test_depthwise_multiplier_one_reads_kernel_column_zero():
    """Regression: a 4-D depthwise kernel with M = 1 indexed the multiplier axis by f."""
    import numpy as np

    from metaschedule.tir.interpreter import interpret

    x = te.placeholder((1, 6, 6, 4), "float32", "X")
    w = te.placeholder((3, 3, 4, 1), "float32", "W")
    f = te.create_prim_func([x, w, ops.depthwise_conv2d_nhwc(x, w, 1, 1)])
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((1, 6, 6, 4)).astype("float32")
    wa = rng.standard_normal((3, 3, 4, 1)).astype("float32")
    out = np.zeros((1, 6, 6, 4), "float32")
    interpret(f, xa, wa, out)
    xp = np.pad(xa, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros_like(out)
    for dy in range(3):
        for dx in range(3):
            ref += xp[:, dy : dy + 6, dx : dx + 6, :] * wa[dy, dx, :, 0]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_window_count():
    assert window_count(5, 3, 2, 1, 0, 0) == 2
    assert window_count(7, 3, 1, 2, 0, 0) == 3  # dilated: taps 0, 2, 4
    assert window_count(2, 3, 1, 1, 0, 0) is None  # not even one window fits
    assert window_count(2, 3, 1, 1, 1, 0) == 1  # it does once padded
    assert window_count(5, 2, 2, 1, 0, 0, ceil_mode=True) == 3  # a last partial window
    # ceil_mode never starts a window in the trailing padding alone
    assert window_count(4, 1, 3, 1, 0, 1, ceil_mode=True) == 2
