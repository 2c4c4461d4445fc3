"""The default schedule of depthwise convolutions (MobileNet's, EfficientNet's): the
padding is read in the window as guarded loads (no padded copy of the input), a dense
convolution keeps its padding stage; numerics against the numpy reference interpreter
over strides, odd sizes, kernel sizes, channel counts and both layouts. Never timings."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaschedule import graph
from metaschedule import relax_integration as ri
from metaschedule.graph import GraphBuilder
from metaschedule.graph.layout import default_layouts
from metaschedule.target import Target

LANES = Target("llvm").vector_lanes("float32")


def _depthwise_graph(c, hw, k=3, stride=1, pads=None, mult=1, act="clip", seed=1):
    """``x -> conv(groups=c, c * mult outputs) + bias -> act``, NCHW as imported."""
    rng = np.random.default_rng(seed)
    pads = pads if pads is not None else (k // 2,) * 4
    b = GraphBuilder()
    x = b.input("x", (1, c, *hw))
    w = b.const(rng.standard_normal((c * mult, 1, k, k)).astype("float32") * 0.3, "w")
    bias = b.const(rng.standard_normal((1, c * mult, 1, 1)).astype("float32"), "bias")
    y = b.call("conv2d", [x, w], strides=(stride, stride), pads=pads, dilations=(1, 1), groups=c)
    y = b.call("add", [y, bias])
    if act == "clip":
        y = b.call("clip", [y], min=0.0, max=6.0)
    elif act:
        y = b.call(act, [y])
    return b.finish([y]), rng.standard_normal((1, c, *hw)).astype("float32")


def _check(func, x, layouts="default"):
    exe = ri.compile_relax(None, func, "llvm", None, desired_layouts=layouts)
    want = graph.interpret(func, x)[0]
    got = exe(x)
    scale = max(float(np.abs(want).max()), 1e-6)
    assert float(np.abs(got - want).max()) / scale < 1e-4
    assert set(exe.sources.values()) == {"default"}


def _scheduled(func, layouts):
    model = graph.lower_model(func, layouts)
    (prim,) = [f for name, f in model.funcs.items() if "conv" in name]
    sch = graph.default_schedule(prim, "llvm")
    return [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_block("root"))]


@pytest.mark.parametrize("layouts", ["nhwc", "nchw"])
def test_depthwise_padding_is_read_in_the_window_not_copied(layouts):
    func, _ = _depthwise_graph(2 * LANES, (9, 9), stride=2)
    names = _scheduled(func, default_layouts("llvm") if layouts == "nhwc" else None)
    assert not any("pad" in n.lower() for n in names), names


def test_dense_conv_keeps_its_padding_stage():
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (1, 8, 9, 9))
    w = b.const(rng.standard_normal((LANES, 8, 3, 3)).astype("float32"), "w")
    y = b.call("conv2d", [x, w], strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), groups=1)
    names = _scheduled(b.finish([y]), default_layouts("llvm"))
    assert any("pad" in n.lower() for n in names), names


@pytest.mark.compiler
@pytest.mark.parametrize(
    "c,hw,k,stride",
    [
        (2 * LANES, (14, 14), 3, 1),  # two vectors of channels
        (2 * LANES, (15, 15), 3, 2),  # odd size, strided
        (6 * LANES, (7, 7), 3, 1),  # 7x7: columns without a divisor up to the tile
        (3 * LANES, (9, 9), 5, 2),  # 5x5 strided, an odd number of vectors
        (LANES + 8, (11, 13), 3, 1),  # channels no vector divides, not square
        (LANES, (5, 5), 5, 1),  # the window as large as the input: every tile a border
    ],
)
def test_depthwise_default_schedule_matches_numpy(c, hw, k, stride):
    func, x = _depthwise_graph(c, hw, k, stride)
    _check(func, x)


@pytest.mark.compiler
def test_depthwise_asymmetric_padding_and_channel_multiplier_match_numpy():
    func, x = _depthwise_graph(LANES, (10, 10), 3, 2, pads=(0, 0, 1, 1), mult=2, act="relu")
    _check(func, x)


@pytest.mark.compiler
@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_nchw_default_schedule_matches_numpy(stride):
    func, x = _depthwise_graph(LANES, (13, 13), 3, stride)
    _check(func, x, layouts=None)


@pytest.mark.compiler
@settings(max_examples=6, deadline=None, derandomize=True)
@given(
    vectors=st.integers(1, 3),
    extra=st.sampled_from([0, 0, 4]),
    h=st.integers(3, 17),
    w=st.integers(3, 17),
    k=st.sampled_from([3, 5]),
    stride=st.integers(1, 2),
)
def test_depthwise_default_schedule_matches_numpy_over_shapes(vectors, extra, h, w, k, stride):
    func, x = _depthwise_graph(vectors * LANES + extra, (h, w), k, stride, act="hard_swish")
    _check(func, x)
