"""from_torch: small modules through torch.export, compiled untuned, against torch."""

import graph_torch_models as models
import numpy as np
import pytest

from metaschedule import graph
from metaschedule import relax_integration as ri

torch = pytest.importorskip("torch")


@pytest.mark.compiler
@pytest.mark.parametrize("make", [models.make_mlp, models.make_cnn, models.make_transformer])
def test_compile_untuned_matches_torch(make):
    module, example = make(torch)
    with torch.no_grad():
        ref = module(*example).numpy()
    f = graph.from_torch(module, example)
    x = example[0].numpy()
    np.testing.assert_allclose(graph.interpret(f, x)[0], ref, rtol=1e-4, atol=1e-5)
    exe = ri.compile_relax(None, f, "llvm", None)
    np.testing.assert_allclose(exe(x), ref, rtol=1e-4, atol=1e-5)


def test_torch_cnn_fuses_batch_norm_and_activation():
    module, example = models.make_cnn(torch)
    f = graph.from_torch(module, example)
    names = [t.task_name for t in ri.extract_tasks(f, "llvm")]
    assert names[0] == "transpose"  # the input to NHWC, where the convolutions run on CPUs
    assert names[1:4] == [
        "fused_conv2d_add_relu",
        "fused_conv2d_add_clip",
        "fused_conv2d_add_relu_1",
    ]


def test_torch_transformer_fuses_matmul_bias_gelu():
    module, example = models.make_transformer(torch)
    f = graph.from_torch(module, example)
    names = [t.task_name for t in ri.extract_tasks(f, "llvm")]
    assert "fused_matmul_add_gelu" in names
    assert "softmax" in names or any(n.startswith("fused_") and "softmax" in n for n in names)


def test_unsupported_torch_operator_is_named():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.topk(x, 2).values

    with pytest.raises(graph.UnsupportedOperatorError, match="aten.topk"):
        graph.from_torch(M(), (torch.randn(3, 4),))
