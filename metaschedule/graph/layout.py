"""Layout conversion (TVM's ``ConvertLayout``): convolutions and what follows them in NHWC.

Importers produce NCHW graphs (ONNX's and PyTorch's layout). On a CPU a convolution
vectorizes best over its output channels, the innermost dimension in NHWC with an HWIO
kernel, and the tuner's search spaces find much faster schedules there. :func:`convert_layout`
rewrites the graph so that the listed operators run channels last:

* each listed convolution (``{"conv2d": "NHWC"}``) takes NHWC data and an HWIO kernel
  (a constant kernel is transposed here, once) and produces NHWC; the integer
  ``qnn_conv2d`` follows the ``conv2d`` entry unless it has one of its own (TVM's
  ``qnn.conv2d`` key: ``{"conv2d": "NHWC", "qnn_conv2d": "NCHW"}`` converts only the
  float convolutions);
* pooling (max, average, global average) whose input is already NHWC follows it
  (or is listed itself), as do element-wise and broadcast calls of rank-4 values with
  an NHWC argument (constants are transposed, lower-rank constants broadcast as before)
  and a concatenation along the channels;
* every other call reads its arguments in their original layout: a value made in NHWC
  is transposed back once, where first needed, under its original name, so the model's
  inputs and outputs keep their names and layouts.

Transposes thus appear only at the boundary (after the model's input, before a
flatten or a matmul); :func:`simplify_transposes` then merges transposes of
transposes (cancelling those that undo each other) and turns a transpose that moves
only unit axes (``[1, 1, 1, C] -> [1, C, 1, 1]`` after global pooling) into a reshape.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..target import Target
from .infer import infer_types
from .ir import Call, Function, make_attrs
from .op import Pattern, get_op
from .transform import dead_code_elimination

__all__ = [
    "DEFAULT_CPU_LAYOUTS",
    "NCHW_TO_NHWC",
    "NHWC_TO_NCHW",
    "convert_layout",
    "default_layouts",
    "simplify_transposes",
]

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)
#: the operators :func:`convert_layout` can convert, and the layouts it knows
CONVERTIBLE = ("conv2d", "qnn_conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool2d")
CONVS = ("conv2d", "qnn_conv2d")
POOLS = ("max_pool2d", "avg_pool2d", "global_avg_pool2d")
#: what the compile pipeline asks for on CPU targets
DEFAULT_CPU_LAYOUTS: dict[str, str] = {"conv2d": "NHWC"}


def default_layouts(target: Target | str) -> dict[str, str]:
    """The layouts :mod:`metaschedule.relax_integration` converts to by default: NHWC
    convolutions on CPU targets (``llvm``, ``c``), none elsewhere."""
    target = target if isinstance(target, Target) else Target(target)
    return dict(DEFAULT_CPU_LAYOUTS) if target.kind == "cpu" else {}


def _check_layouts(desired: Mapping[str, str | list[str] | tuple[str, ...]]) -> set[str]:
    """The operators to convert to NHWC (an NCHW entry means: leave as imported)."""
    chosen = set()
    for op, layout in desired.items():
        if op not in CONVERTIBLE:
            raise ValueError(
                f"convert_layout: cannot convert {op!r}; convertible operators: "
                f"{', '.join(CONVERTIBLE)}"
            )
        layouts = [layout] if isinstance(layout, str) else list(layout)
        data = layouts[0] if layouts else "NHWC"
        kernel = layouts[1] if len(layouts) > 1 else ("HWIO" if data == "NHWC" else "OIHW")
        if (data, kernel) == ("NCHW", "OIHW"):
            continue
        if data != "NHWC" or (op in CONVS and kernel != "HWIO"):
            raise ValueError(
                f"convert_layout: {op} to {layout!r} is not supported; use 'NHWC' "
                "(HWIO kernels) or 'NCHW' (as imported)"
            )
        chosen.add(op)
    if "conv2d" in chosen and "qnn_conv2d" not in desired:
        chosen.add("qnn_conv2d")  # an integer convolution is a convolution
    return chosen


class _Rewriter:
    def __init__(self, func: Function):
        self.func = func
        self.calls: list[Call] = []
        self.consts = dict(func.constants)
        self.nhwc: dict[str, str] = {}  # original value -> the name of its NHWC copy
        self.moved: set[str] = set()  # values made only in NHWC (their name is free)
        self.names = {p.name for p in func.params} | set(func.constants)
        self.names |= {c.name for c in func.calls}

    def fresh(self, base: str) -> str:
        name, n = f"{base}_nhwc", 0
        while name in self.names:
            n += 1
            name = f"{base}_nhwc{n}"
        self.names.add(name)
        return name

    def rank4(self, v: str) -> bool:
        return len(self.func.type_of(v).shape) == 4

    def original(self, v: str) -> str:
        """``v`` in its original layout (transposed back under its name when needed)."""
        if v in self.moved:
            self.calls.append(
                Call(v, "transpose", (self.nhwc[v],), make_attrs({"axes": NHWC_TO_NCHW}))
            )
            self.moved.discard(v)
        return v

    def channels_last(self, v: str) -> str:
        """``v`` in NHWC: its NHWC copy, a transposed constant, or a new transpose."""
        if v in self.nhwc:
            return self.nhwc[v]
        name = self.fresh(v)
        if v in self.consts:
            self.consts[name] = np.ascontiguousarray(np.transpose(self.consts[v], NCHW_TO_NHWC))
        else:
            self.calls.append(Call(name, "transpose", (v,), make_attrs({"axes": NCHW_TO_NHWC})))
        self.nhwc[v] = name
        return name

    def broadcast_operand(self, v: str) -> str | None:
        """An operand of a converted broadcast call: NHWC, or a constant broadcast to
        rank 4 and transposed; None when it cannot follow (a lower-rank non-constant)."""
        if v in self.nhwc or (v not in self.consts and self.rank4(v)):
            return self.channels_last(v)
        if v not in self.consts:
            return None
        c = self.consts[v]
        if c.ndim > 4:
            return None
        if c.size == 1 or c.ndim == 0:
            return v
        if c.ndim == 4:
            return self.channels_last(v)
        name = self.fresh(v)
        full = c.reshape((1,) * (4 - c.ndim) + c.shape)
        self.consts[name] = np.ascontiguousarray(np.transpose(full, NCHW_TO_NHWC))
        return name

    def emit_nhwc(self, call: Call, args: list[str], attrs: dict) -> None:
        name = self.fresh(call.name)
        self.calls.append(Call(name, call.op, tuple(args), make_attrs(attrs)))
        self.nhwc[call.name] = name
        self.moved.add(call.name)

    def keep(self, call: Call) -> None:
        self.calls.append(
            Call(call.name, call.op, tuple(self.original(a) for a in call.args), call.attrs)
        )


def _follows(rw: _Rewriter, call: Call) -> bool:
    """Whether an element-wise/broadcast call goes NHWC (some computed argument is)."""
    if get_op(call.op).pattern > Pattern.BROADCAST or not rw.rank4(call.name):
        return False
    return any(a in rw.nhwc and a not in rw.consts for a in call.args)


def convert_layout(
    func: Function, desired_layouts: Mapping[str, str | list[str] | tuple[str, ...]]
) -> Function:
    """``func`` with the operators in ``desired_layouts`` (and what follows them, see the
    module doc) channels last; the inputs and outputs are unchanged.

    Args:
        func: a graph with inferred types (NCHW convolutions, as imported).
        desired_layouts: operator -> layout, TVM's form: ``{"conv2d": "NHWC"}`` or
            ``{"conv2d": ["NHWC", "HWIO"]}``; also ``qnn_conv2d`` (else it follows
            ``conv2d``), ``max_pool2d``, ``avg_pool2d``, ``global_avg_pool2d``.
            ``"NCHW"`` leaves an operator as imported.

    Raises:
        ValueError: an operator or a layout that cannot be converted.
    """
    chosen = _check_layouts(desired_layouts)
    if not chosen:
        return func
    func = infer_types(func) if not func.types else func
    rw = _Rewriter(func)
    for call in func.calls:
        at = call.attr
        nchw = at.get("data_layout", "NCHW") == "NCHW"
        if call.op in CONVS and nchw and call.op in chosen:
            x = rw.channels_last(call.args[0])
            w = call.args[1]
            if w in rw.consts:
                wname = rw.fresh(w)
                rw.consts[wname] = np.ascontiguousarray(np.transpose(rw.consts[w], (2, 3, 1, 0)))
            else:
                wname = rw.fresh(w)
                rw.calls.append(
                    Call(wname, "transpose", (rw.original(w),), make_attrs({"axes": (2, 3, 1, 0)}))
                )
            rest = [rw.original(a) for a in call.args[2:]]  # qnn_conv2d's bias: per channel
            attrs = {**at, "data_layout": "NHWC", "kernel_layout": "HWIO"}
            rw.emit_nhwc(call, [x, wname, *rest], attrs)
        elif call.op in POOLS and nchw and (call.op in chosen or call.args[0] in rw.nhwc):
            rw.emit_nhwc(call, [rw.channels_last(call.args[0])], {**at, "data_layout": "NHWC"})
        elif (
            call.op == "concat"
            and rw.rank4(call.name)
            and at["axis"] in (1, -3)
            and any(a in rw.nhwc for a in call.args)
        ):
            args = [rw.channels_last(a) for a in call.args]
            rw.emit_nhwc(call, args, {**at, "axis": 3})
        elif _follows(rw, call):
            args = [rw.broadcast_operand(a) for a in call.args]
            if any(a is None for a in args):
                rw.keep(call)
            else:
                rw.emit_nhwc(call, [a for a in args if a is not None], at)
        else:
            rw.keep(call)
    outputs = [rw.original(o) for o in func.outputs]
    out = func.with_calls(rw.calls, rw.consts, outputs)
    return simplify_transposes(infer_types(dead_code_elimination(out)))


def _compose(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """The axes of ``transpose(transpose(x, p), q)`` as one transpose of ``x``."""
    return tuple(p[i] for i in q)


def simplify_transposes(func: Function) -> Function:
    """Merge ``transpose(transpose(x, p), q)`` into one transpose of ``x`` (dropped when
    the identity), turn a transpose that moves only unit axes into a reshape, and a
    reshape of a reshape into one reshape."""
    prod = func.producers()
    calls: list[Call] = []
    alias: dict[str, str] = {}  # a dropped identity transpose -> the value it equals
    outputs = set(func.outputs)
    for c in func.calls:
        args = tuple(alias.get(a, a) for a in c.args)
        c = Call(c.name, c.op, args, c.attrs)
        if c.op == "transpose":
            axes = tuple(c.attr["axes"])
            src = prod.get(args[0])
            if src is not None and src.op == "transpose":
                axes = _compose(tuple(src.attr["axes"]), axes)
                args = src.args
            if axes == tuple(range(len(axes))) and c.name not in outputs:
                alias[c.name] = args[0]
                continue
            shape = func.type_of(args[0]).shape
            kept = [a for a in axes if shape[a] != 1]
            if kept == sorted(kept):  # only unit axes move: the same data order
                c = Call(c.name, "reshape", args, make_attrs({"shape": func.type_of(c.name).shape}))
            else:
                c = Call(c.name, "transpose", args, make_attrs({"axes": axes}))
            prod[c.name] = c
        if c.op == "reshape":
            src = prod.get(args[0])
            if src is not None and src.op == "reshape":  # reshape(reshape(x)): one view
                c = Call(c.name, "reshape", src.args, c.attrs)
                prod[c.name] = c
        calls.append(c)
    return infer_types(dead_code_elimination(func.with_calls(calls)))
