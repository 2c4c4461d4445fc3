"""``from_onnx``: import an ONNX model as a graph :class:`~.ir.Function`.

Weights (initializers and ``Constant`` nodes) become constants; everything computed from
constants alone (``Shape`` of static shapes, reshape targets, transposed Gemm weights,
BatchNormalization's scale and shift) is folded at import. ``onnx`` is imported lazily
(the ``onnx`` extra).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

# their converters register themselves; onnx_ops_quantized last: it wraps Conv, MatMul, Gemm
from . import onnx_ops, onnx_ops_more, onnx_ops_quantized  # noqa: F401
from .builder import GraphBuilder
from .ir import Function
from .onnx_convert import _CONVERTERS, UnsupportedOperatorError, _Ctx, supported_ops

__all__ = ["ModelFileError", "UnsupportedOperatorError", "from_onnx", "supported_ops"]


class ModelFileError(ValueError):
    """A model file that is not a readable ONNX model (truncated, corrupt, not ONNX, or
    external data it may not read); the message names the file."""


def _load(path: str) -> Any:
    """The ``ModelProto`` in ``path``; anything but a missing or unreadable file (an
    ``OSError``) is a :class:`ModelFileError` naming it, not a protobuf traceback.

    ``onnx >= 1.17`` (the ``onnx`` extra) refuses external-data paths that leave the
    model's folder (CVE-2024-27318, CVE-2024-27319); older versions do not.
    """
    import onnx
    from google.protobuf.message import Error as ProtobufError

    try:
        model = onnx.load(path)
    except OSError:
        raise
    except (ProtobufError, ValueError, RuntimeError, UnicodeDecodeError, RecursionError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ModelFileError(
            f"{path}: not a readable ONNX model ({type(err).__name__}: {first}); is the "
            "file truncated or not an .onnx file?"
        ) from None
    if not model.graph.output:
        raise ModelFileError(
            f"{path}: not an ONNX model with a graph (no graph outputs); "
            "is the file empty or truncated?"
        )
    return model


# ----------------------------------------------------------------------------- driver
def _attrs(node) -> dict[str, Any]:
    import onnx
    from onnx import numpy_helper

    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, (list, tuple)):
            v = [x.decode() if isinstance(x, bytes) else x for x in v]
        out[a.name] = v
    return out


def from_onnx(
    model_or_path: Any,
    shape_dict: dict[str, tuple[int, ...]] | None = None,
    opset: int | None = None,
) -> Function:
    """Import an ONNX model (a ``ModelProto``, or a path to one).

    Args:
        model_or_path: the model.
        shape_dict: shapes for inputs whose ONNX shape has symbolic dimensions.
        opset: the default-domain opset to assume (default: the model's).

    Raises:
        ModelFileError: ``model_or_path`` names a file that is not a readable ONNX model
            (a truncated or corrupt protobuf): one line naming the file.
        UnsupportedOperatorError: an operator (or attribute) the importer does not
            handle; the message names the op type, the node and the opset.
    """
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "from_onnx needs the onnx package: pip install 'metaschedule[onnx]'"
        ) from err
    if isinstance(model_or_path, (str, os.PathLike)):
        model = _load(os.fspath(model_or_path))
    else:
        model = model_or_path
        if not model.graph.output:
            raise ValueError(
                "the model: not an ONNX model with a graph (no graph outputs); "
                "is it empty or truncated?"
            )
    if opset is None:
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    graph = model.graph
    b = GraphBuilder(graph.name or "main")
    env: dict[str, str] = {}
    for init in graph.initializer:
        env[init.name] = b.const(numpy_helper.to_array(init), init.name)
    shape_dict = dict(shape_dict or {})
    for inp in graph.input:
        if inp.name in env:
            continue
        tt = inp.type.tensor_type
        dims = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif inp.name in shape_dict:
                dims.append(int(shape_dict[inp.name][i]))
            else:
                raise ValueError(
                    f"from_onnx: input {inp.name!r} has a symbolic dimension "
                    f"{d.dim_param!r}; give its shape in shape_dict"
                )
        if inp.name in shape_dict:
            dims = [int(s) for s in shape_dict[inp.name]]
        dtype = str(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)))
        env[inp.name] = b.input(inp.name, tuple(dims), dtype)
    for index, node in enumerate(graph.node):
        ctx = _Ctx(b, opset, node, index)
        default = node.domain in ("", "ai.onnx")
        # other domains' operators are registered under "domain.op" (com.microsoft.QLinearAdd)
        fn = _CONVERTERS.get(node.op_type if default else f"{node.domain}.{node.op_type}")
        if fn is None and not default:
            raise UnsupportedOperatorError(
                f"ONNX operator {node.domain}.{node.op_type} "
                f"(node {ctx.label}, opset {opset}) is not supported; supported operators: "
                f"{', '.join(supported_ops())}"
            )
        if fn is None:
            raise UnsupportedOperatorError(
                f"ONNX operator {node.op_type} (node {ctx.label}, opset {opset}) is not "
                f"supported; supported operators: {', '.join(supported_ops())}"
            )
        missing = [i for i in node.input if i and i not in env]
        if missing:
            raise ValueError(f"ONNX node {ctx.label} reads undefined {missing}")
        ins = [env[i] if i else None for i in node.input]
        out = fn(ctx, ins, _attrs(node))
        outs = out if isinstance(out, list) else [out]
        for name, value in zip(node.output, outs):
            if name:
                env[name] = value
    return b.finish([env[o.name] for o in graph.output])
