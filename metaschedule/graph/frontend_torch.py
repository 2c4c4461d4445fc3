"""``from_torch``: import a PyTorch module through ``torch.export`` (core ATen ops).

Parameters, buffers and lifted constants become graph constants; what depends on them
alone is folded. ``torch`` is imported by the caller's module only (the ``torch`` extra).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import torch_ops, torch_ops_more  # noqa: F401  (their converters register themselves)
from .builder import GraphBuilder
from .ir import Function
from .torch_convert import _CONVERTERS, UnsupportedOperatorError, _Ctx, supported_ops

__all__ = ["from_torch", "supported_ops"]


# ----------------------------------------------------------------------------- driver
def _to_numpy(t: Any) -> np.ndarray:
    return t.detach().cpu().contiguous().numpy().copy()


def _target_name(target: Any) -> str:
    if target is operator.getitem:
        return "getitem"
    packet = getattr(target, "overloadpacket", None)
    name = str(packet if packet is not None else target)
    return name if name.startswith("aten.") else f"aten.{name}" if "::" not in name else name


def from_torch(module: Any, example_inputs: Sequence[Any], *, decompose: bool = True) -> Function:
    """Import ``module`` (a ``torch.nn.Module``) by ``torch.export`` on ``example_inputs``.

    The inputs' shapes become the model's static shapes; ``module`` is put in eval mode.

    Raises:
        UnsupportedOperatorError: an ATen operator the importer does not handle (named).
    """
    import torch

    module = module.eval()
    with torch.no_grad():
        ep = torch.export.export(module, tuple(example_inputs))
    if decompose:
        ep = ep.run_decompositions()
    sig = ep.graph_signature
    state = dict(ep.state_dict)
    consts = dict(getattr(ep, "constants", {}) or {})
    lifted: dict[str, Any] = {}
    lifted.update({k: state[v] for k, v in sig.inputs_to_parameters.items()})
    lifted.update(
        {k: state[v] if v in state else consts[v] for k, v in sig.inputs_to_buffers.items()}
    )
    lifted.update(
        {k: consts[v] for k, v in getattr(sig, "inputs_to_lifted_tensor_constants", {}).items()}
    )
    b = GraphBuilder(type(module).__name__)
    env: dict[str, Any] = {}

    def value(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return env[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(value(x) for x in a)
        return a

    outputs: list[str] = []
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            if node.name in lifted:
                env[node.name] = b.const(_to_numpy(lifted[node.name]), node.name)
            else:
                meta = node.meta["val"]
                env[node.name] = b.input(
                    node.name,
                    tuple(int(s) for s in meta.shape),
                    str(meta.dtype).replace("torch.", ""),
                )
        elif node.op == "call_function":
            name = _target_name(node.target)
            if name == "getitem":
                env[node.name] = env[node.args[0].name][node.args[1]]
                continue
            fn = _CONVERTERS.get(name)
            if fn is None:
                raise UnsupportedOperatorError(
                    f"torch operator {node.target} (node {node.name!r}) is not supported; "
                    f"supported: {', '.join(sorted(_CONVERTERS))}"
                )
            env[node.name] = fn(_Ctx(b, node), *value(node.args), **value(dict(node.kwargs)))
        elif node.op == "output":
            outs = node.args[0]
            outputs = [env[o.name] for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
        else:
            raise UnsupportedOperatorError(f"torch.export node kind {node.op!r} ({node.name})")
    return b.finish(outputs)
