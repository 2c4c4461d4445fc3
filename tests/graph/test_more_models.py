"""Whole models defined in code (:mod:`metaschedule.testing.models`, at the small sizes
of ``models.SMALL``): exported by ``torch.onnx.export`` (the TorchScript exporter,
opsets 13-18) and imported by ``from_onnx``, against onnxruntime; and through
``torch.export`` and ``from_torch``, against torch. Compiled untuned, each must match
within 1e-4 relative (max abs difference over max abs value)."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

from metaschedule import graph
from metaschedule import relax_integration as ri
from metaschedule.testing import models

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

NAMES = list(models.MODELS)
#: the opset each model is compiled at (together they cover 13-18); ``scaled_dot_product
#: attention`` (nn.MultiheadAttention's too) exports from opset 14 on
OPSET = {
    "resnet50": 13,
    "mobilenet_v3": 14,
    "efficientnet_b0": 15,
    "vit": 16,
    "gpt_block": 17,
    "unet": 18,
}
LOWEST = {"vit": 14, "gpt_block": 14}


def rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    assert got.shape == ref.shape
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def _small(name: str):
    module, shape = models.MODELS[name](torch, **models.SMALL[name])
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    return module, x


def _export(module, x: np.ndarray, opset: int, dynamo: bool = False) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (torch.from_numpy(x),),
            buf,
            dynamo=dynamo,
            opset_version=opset,
            input_names=["x"],
            output_names=["y"],
        )
    return buf.getvalue()


def _ort(model: bytes, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("name", NAMES)
def test_imports_at_the_lowest_and_highest_opset(name):
    """The reference interpreter of the imported graph agrees with onnxruntime at the
    model's lowest exportable opset and at 18."""
    module, x = _small(name)
    for opset in (LOWEST.get(name, 13), 18):
        model = _export(module, x, opset)
        got = graph.interpret(graph.from_onnx(onnx.load_from_string(model)), x)[0]
        assert rel_err(got, _ort(model, x)) < 1e-5, opset


@pytest.mark.slow
@pytest.mark.compiler
@pytest.mark.parametrize("name", NAMES)
def test_onnx_export_compiles_and_matches_onnxruntime(name):
    module, x = _small(name)
    model = _export(module, x, OPSET[name])
    exe = ri.compile_relax(None, graph.from_onnx(onnx.load_from_string(model)), "llvm", None)
    assert rel_err(exe(x=x), _ort(model, x)) < 1e-4


@pytest.mark.slow
@pytest.mark.compiler
@pytest.mark.parametrize("name", NAMES)
def test_torch_export_compiles_and_matches_torch(name):
    module, x = _small(name)
    with torch.no_grad():
        ref = module(torch.from_numpy(x)).numpy()
    f = graph.from_torch(module, (torch.from_numpy(x),))
    exe = ri.compile_relax(None, f, "llvm", None)
    assert rel_err(exe(x), ref) < 1e-4


@pytest.mark.parametrize("name", NAMES)
def test_dynamo_exporter_imports(name):
    """The default (dynamo) exporter, where onnxscript is installed: opset 18."""
    pytest.importorskip("onnxscript")
    module, x = _small(name)
    model = _export(module, x, 18, dynamo=True)
    got = graph.interpret(graph.from_onnx(onnx.load_from_string(model)), x)[0]
    assert rel_err(got, _ort(model, x)) < 1e-5


def test_silu_fuses_into_its_convolution():
    """``x * sigmoid(x)`` is one ``silu`` call from either importer, so it fuses into the
    convolution that produces ``x`` (two calls reading ``x`` would not)."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.SiLU()).eval()
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype("float32")
    f_onnx = graph.from_onnx(onnx.load_from_string(_export(module, x, 17)))
    f_torch = graph.from_torch(module, (torch.from_numpy(x),))
    with torch.no_grad():
        ref = module(torch.from_numpy(x)).numpy()
    for f in (f_onnx, f_torch):
        assert [c.op for c in f.calls] == ["conv2d", "add", "silu"]
        assert rel_err(graph.interpret(f, x)[0], ref) < 1e-6


class _Norms(torch.nn.Module):
    """A layer norm over the last two axes, then one over a middle axis written by hand
    (not a layer norm: it must stay element-wise calls), then a tanh GELU."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = torch.nn.LayerNorm((4, 8))

    def forward(self, x):
        y = self.ln(x)
        d = y - y.mean(1, keepdim=True)
        y = d / torch.sqrt((d * d).mean(1, keepdim=True) + 1e-3)
        return torch.nn.functional.gelu(y, approximate="tanh")


@pytest.mark.parametrize("opset", [14, 16])
def test_decomposed_layer_norm_and_tanh_gelu_are_one_call(opset):
    """Before opset 17 a layer norm is exported as reductions and element-wise calls, and
    a tanh GELU (before opset 20) as element-wise calls: the importer makes each one call
    (a middle-axis normalization is left alone)."""
    torch.manual_seed(0)
    module = _Norms().eval()
    x = np.random.default_rng(0).standard_normal((2, 4, 8)).astype("float32")
    model = _export(module, x, opset)
    f = graph.from_onnx(onnx.load_from_string(model))
    ops = [c.op for c in f.calls]
    assert ops.count("layer_norm") == 1 and ops.count("gelu_tanh") == 1
    assert "tanh" not in ops and ops.count("sqrt") == 1  # the middle-axis one
    assert rel_err(graph.interpret(f, x)[0], _ort(model, x)) < 1e-5


def _mod_model(dtype: int, fmod: int):
    from onnx import helper

    nodes = [helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)]
    vi = [helper.make_tensor_value_info(n, dtype, [2, 6]) for n in ("a", "b")]
    g = helper.make_graph(nodes, "mod", vi, [helper.make_tensor_value_info("y", dtype, [2, 6])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.compiler
@pytest.mark.parametrize(
    "dtype,fmod", [("int64", 0), ("int32", 1), ("float32", 1)], ids=["int-floor", "int-c", "float"]
)
def test_onnx_mod_matches_onnxruntime(dtype, fmod):
    from onnx import helper

    model = _mod_model(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), fmod)
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((2, 6)) * 10).astype(dtype)
    b = rng.choice([-3.5, -2, 2, 3, 4.25], (2, 6)).astype(dtype)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"a": a, "b": b})[0]
    f = graph.from_onnx(model)
    np.testing.assert_allclose(graph.interpret(f, a, b)[0], ref, rtol=1e-6)
    exe = ri.compile_relax(None, f, "llvm", None)
    np.testing.assert_allclose(exe(a=a, b=b), ref, rtol=1e-5, atol=1e-5)


def test_onnx_float_mod_without_fmod_is_refused():
    from onnx import TensorProto

    with pytest.raises(graph.UnsupportedOperatorError, match="fmod=0 on floats"):
        graph.from_onnx(_mod_model(TensorProto.FLOAT, 0))


def test_torch_remainder_and_fmod():
    class M(torch.nn.Module):
        def forward(self, x, y):
            return torch.remainder(x, y) + torch.fmod(x, 3.0)

    x = torch.randn(3, 5) * 10
    y = torch.tensor([2.0, -3.0, 4.5, -1.5, 7.0])
    f = graph.from_torch(M(), (x, y))
    ref = M()(x, y).numpy()
    np.testing.assert_allclose(graph.interpret(f, x.numpy(), y.numpy())[0], ref, rtol=1e-5)
