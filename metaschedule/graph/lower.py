"""Lowering a fused graph to PrimFuncs: one per fused group, deduplicated by structure.

Each group becomes a te program over placeholders of its external inputs (one-element
constants read by element-wise or broadcast calls become immediates), built with
``te.create_prim_func``; the constants among its parameters are listed in its
``attrs["layout_free_buffers"]`` (weights the RewriteLayout postprocessor may have the tuned
function take pre-packed, re-laid out once at compile time). Structurally equal PrimFuncs
(the same convolution shape in two places) are one function, called at each place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..te import create_prim_func, placeholder
from ..tir.function import LAYOUT_FREE_BUFFERS, PrimFunc
from ..tir.names import unique_name
from ..tir.structural import structural_equal, structural_hash
from .fuse import Group, fuse
from .infer import infer_types
from .ir import Function
from .layout import convert_layout
from .op import Pattern, get_op
from .quantize_rewrite import fuse_requantize
from .transform import fold_constants, fold_scale_bias, rewrite_erf_gelu, sink_reshapes


@dataclass(frozen=True)
class Step:
    """One step of the executable: ``out = func(*args)``, or a zero-copy reshape
    (``func`` None: ``out`` is ``args[0]`` viewed in another shape)."""

    func: str | None
    args: tuple[str, ...]
    out: str
    ops: tuple[str, ...]


@dataclass
class LoweredModel:
    """The PrimFuncs of a model and the steps that call them."""

    graph: Function
    funcs: dict[str, PrimFunc] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    weights: dict[str, int] = field(default_factory=dict)


def optimize(func: Function, desired_layouts: Mapping[str, Any] | None = None) -> Function:
    """The graph passes run before lowering: types, requantize epilogues of integer kernels
    (:func:`~.quantize_rewrite.fuse_requantize`), constant folding, scale folding, and
    the layout conversion of :func:`~metaschedule.graph.layout.convert_layout` when
    ``desired_layouts`` asks for one (``{"conv2d": "NHWC"}``)."""
    func = fuse_requantize(infer_types(func))
    func = fold_scale_bias(infer_types(fold_constants(func)))
    if desired_layouts:
        func = convert_layout(func, desired_layouts)
    return sink_reshapes(rewrite_erf_gelu(func))


def _scalar(func: Function, value: str, pattern: Pattern, out_ndim: int) -> Any:
    """A one-element constant an element-wise/broadcast call may read as a number."""
    if pattern > Pattern.BROADCAST or value not in func.constants:
        return None
    c = func.constants[value]
    if c.size != 1 or c.ndim > out_ndim:
        return None
    v = c.reshape(()).item()
    return float(v) if c.dtype.kind == "f" else int(v)


def lower_group(func: Function, group: Group) -> tuple[PrimFunc, tuple[str, ...]]:
    """The PrimFunc of one group and the graph values it takes (inputs, then output)."""
    env: dict[str, Any] = {}
    inputs: list[str] = []
    tensors = []
    members = {c.name for c in group.calls}
    for call in group.calls:
        opdef = get_op(call.op)
        args = []
        for a in call.args:
            if a in env:
                args.append(env[a])
                continue
            s = _scalar(func, a, opdef.pattern, len(func.type_of(call.name).shape))
            if s is not None and call.op != "where":
                args.append(s)
                continue
            if a in members:
                raise AssertionError(f"fusion broke the order at {a}")
            t = func.type_of(a)
            ph = placeholder(t.shape, t.dtype, f"p{len(inputs)}")
            env[a] = ph
            inputs.append(a)
            tensors.append(ph)
            args.append(ph)
        env[call.name] = opdef.lower(args, call.attr)
    out = env[group.output]
    prim = create_prim_func([*tensors, out])
    # as relax does for bound weights: exactly the constants may be re-laid out, once, at
    # compile time (a weight the te operator marked that is a model input may not)
    attrs = {k: v for k, v in prim.attrs.items() if k != LAYOUT_FREE_BUFFERS}
    free = [j for j, a in enumerate(inputs) if a in func.constants]
    if free:
        attrs[LAYOUT_FREE_BUFFERS] = free
    return PrimFunc(prim.params, prim.body, attrs), tuple(inputs)


def lower_model(func: Function, desired_layouts: Mapping[str, Any] | None = None) -> LoweredModel:
    """Optimize (converting layouts as ``desired_layouts`` asks, see :func:`optimize`),
    fuse and lower ``func``; every distinct PrimFunc once, with its weight."""
    graph = optimize(func, desired_layouts)
    model = LoweredModel(graph)
    by_hash: dict[int, list[str]] = {}
    for group in fuse(graph):
        if len(group.calls) == 1 and group.calls[0].op == "reshape":
            c = group.calls[0]
            model.steps.append(Step(None, (c.args[0],), c.name, ("reshape",)))
            continue
        prim, inputs = lower_group(graph, group)
        h = structural_hash(prim)
        name = None
        for cand in by_hash.get(h, []):
            if structural_equal(model.funcs[cand], prim, map_free_vars=True):
                name = cand
                break
        if name is None:
            name = unique_name(group.name, model.funcs)
            model.funcs[name] = prim
            by_hash.setdefault(h, []).append(name)
        model.weights[name] = model.weights.get(name, 0) + 1
        model.steps.append(Step(name, inputs, group.output, tuple(c.op for c in group.calls)))
    return model
