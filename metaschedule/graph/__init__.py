"""Whole models (our counterpart of TVM's Relax): a dataflow IR, importers, lowering
through the te operator library with fusion, and an executable.

``ms.graph.from_onnx(model)`` / ``ms.graph.from_torch(module, example_inputs)`` import a
model as a :class:`Function`; :mod:`metaschedule.relax_integration` extracts its tasks,
tunes them and compiles it into an :class:`Executable`.
"""

from .builder import GraphBuilder
from .default_schedule import default_schedule
from .executable import Executable, ProfileReport, load
from .frontend_onnx import ModelFileError, UnsupportedOperatorError, from_onnx, supported_ops
from .frontend_torch import from_torch
from .fuse import Group, fuse
from .infer import GraphError, infer_types
from .interpreter import interpret
from .ir import Call, Function, TensorType, Var
from .layout import convert_layout, default_layouts, simplify_transposes
from .lower import LoweredModel, Step, lower_model, optimize
from .op import Pattern, get_op, list_ops
from .serialize import from_json, load_json, save_json, to_json
from .transform import bind_params, dead_code_elimination, fold_constants, fold_scale_bias

__all__ = [
    "Call",
    "Executable",
    "Function",
    "GraphBuilder",
    "GraphError",
    "Group",
    "LoweredModel",
    "ModelFileError",
    "Pattern",
    "ProfileReport",
    "Step",
    "TensorType",
    "UnsupportedOperatorError",
    "Var",
    "bind_params",
    "convert_layout",
    "dead_code_elimination",
    "default_layouts",
    "default_schedule",
    "fold_constants",
    "fold_scale_bias",
    "from_json",
    "from_onnx",
    "from_torch",
    "fuse",
    "get_op",
    "infer_types",
    "interpret",
    "list_ops",
    "load",
    "load_json",
    "lower_model",
    "optimize",
    "save_json",
    "simplify_transposes",
    "supported_ops",
    "to_json",
]
