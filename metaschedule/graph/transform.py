"""Graph passes: dead code elimination, constant folding, parameter binding, and
folding of per-channel scales and biases into the convolution or matmul before them
(how BatchNormalization disappears into the conv weights)."""

from __future__ import annotations

import numpy as np

from .infer import infer_types
from .interpreter import eval_call
from .ir import Call, Function


def dead_code_elimination(func: Function) -> Function:
    """Drop calls and constants no output depends on."""
    live = set(func.outputs)
    kept = []
    for c in reversed(func.calls):
        if c.name in live:
            kept.append(c)
            live.update(c.args)
    kept.reverse()
    out = func.with_calls(kept)
    out.types = {
        k: v for k, v in func.types.items() if k in live or k in {p.name for p in func.params}
    }
    return out


def bind_params(func: Function, params: dict[str, np.ndarray] | None) -> Function:
    """Turn the inputs named in ``params`` into constants with those values (TVM's
    ``bind_params_by_name``), then fold what became constant."""
    if not params:
        return func
    names = {p.name for p in func.params}
    unknown = sorted(set(params) - names)
    if unknown:
        raise ValueError(
            f"bind_params: {', '.join(unknown)} are not inputs of {func.name}; "
            f"inputs: {', '.join(sorted(names))}"
        )
    consts = dict(func.constants)
    for k, v in params.items():
        p = next(p for p in func.params if p.name == k)
        arr = np.asarray(v, order="C")
        if tuple(arr.shape) != p.type.shape or str(arr.dtype) != p.type.dtype:
            raise ValueError(f"bind_params: {k} must be {p.type}, got {arr.dtype}{arr.shape}")
        consts[k] = arr
    out = Function(
        [p for p in func.params if p.name not in params],
        consts,
        list(func.calls),
        list(func.outputs),
        dict(func.types),
        func.name,
    )
    return fold_constants(out)


def fold_constants(func: Function) -> Function:
    """Evaluate every call whose arguments are all constants (weight-only subgraphs)."""
    consts = dict(func.constants)
    calls = []
    for c in func.calls:
        if c.args and all(a in consts for a in c.args):
            consts[c.name] = eval_call(c, [consts[a] for a in c.args])
        else:
            calls.append(c)
    return dead_code_elimination(func.with_calls(calls, consts))


def _channel_vector(arr: np.ndarray, channels: int, axis_from_end: int) -> np.ndarray | None:
    """``arr`` as a vector over one channel axis (``axis_from_end`` counted from the last
    dimension of the output), or None if it varies along any other axis."""
    if arr.size == 1:
        return np.full(channels, arr.reshape(()), arr.dtype)
    shape = arr.shape
    if len(shape) < axis_from_end:
        return None
    for d in range(len(shape)):
        if d != len(shape) - axis_from_end and shape[d] != 1:
            return None
    if shape[len(shape) - axis_from_end] != channels:
        return None
    return arr.reshape(channels)


def fold_scale_bias(func: Function) -> Function:
    """``multiply(conv2d(x, W) [+ b], s)`` -> ``conv2d(x, W * s) [+ b * s]`` for
    per-output-channel constants ``s`` (also for ``matmul`` with a constant 2-D weight),
    and ``add(add(y, c1), c2)`` -> ``add(y, c1 + c2)``; repeated to a fixed point."""
    changed = True
    while changed:
        changed, func = _fold_once(func)
    return func


def _anchor_axis(call: Call) -> int | None:
    """The output channel axis of an anchor, counted from the end (None: not foldable)."""
    if call.op == "conv2d":
        return 1 if call.attr.get("data_layout", "NCHW") == "NHWC" else 3
    if call.op == "matmul" and not call.attr.get("transpose_b", False):
        return 1
    return None


def _scale_weight(call: Call, w: np.ndarray, s: np.ndarray) -> np.ndarray:
    if call.op == "conv2d":
        nhwc = call.attr.get("data_layout", "NCHW") == "NHWC"  # HWIO: F is the last axis
        return (w * (s.reshape(1, 1, 1, -1) if nhwc else s.reshape(-1, 1, 1, 1))).astype(w.dtype)
    return (w * s.reshape(1, -1)).astype(w.dtype)


def _fold_once(func: Function) -> tuple[bool, Function]:
    users = func.users()
    prod = func.producers()
    consts = dict(func.constants)
    outputs = set(func.outputs)

    def single_use(v: str) -> bool:
        return len(users.get(v, [])) == 1 and v not in outputs

    for i, c in enumerate(func.calls):
        if c.op not in ("multiply", "add") or len(c.args) != 2:
            continue
        ci = [a for a in c.args if a in consts]
        if len(ci) != 1:
            continue
        cname = ci[0]
        other = c.args[1] if c.args[0] == cname else c.args[0]
        p = prod.get(other)
        if p is None or not single_use(other):
            continue
        if c.op == "add" and p.op == "add":  # add(add(y, c1), c2)
            pc = [a for a in p.args if a in consts]
            if len(pc) != 1 or len(p.args) != 2:
                continue
            y = p.args[1] if p.args[0] == pc[0] else p.args[0]
            merged = consts[pc[0]] + consts[cname]
            if (
                merged.shape != np.broadcast_shapes(consts[pc[0]].shape, consts[cname].shape)
                or np.broadcast_shapes(func.type_of(y).shape, merged.shape) != func.type_of(y).shape
            ):
                continue
            key = f"{cname}_merged"
            consts[key] = merged.astype(consts[cname].dtype)
            new = Call(c.name, "add", (y, key))
            calls = [x for x in func.calls if x.name != p.name]
            calls[calls.index(c)] = new
            return True, dead_code_elimination(func.with_calls(calls, consts))
        if c.op != "multiply":
            continue
        anchor, bias = p, None
        if p.op == "add" and len(p.args) == 2:
            pc = [a for a in p.args if a in consts]
            if len(pc) != 1:
                continue
            inner = p.args[1] if p.args[0] == pc[0] else p.args[0]
            anchor = prod.get(inner)
            if anchor is None or not single_use(inner):
                continue
            bias = pc[0]
        axis = _anchor_axis(anchor)
        if axis is None or anchor.args[1] not in consts:
            continue
        channels = func.type_of(anchor.name).shape[-axis]
        s = _channel_vector(consts[cname], channels, axis)
        if (
            s is None
            or np.broadcast_shapes(consts[cname].shape, func.type_of(anchor.name).shape)
            != func.type_of(anchor.name).shape
        ):
            continue
        w = consts[anchor.args[1]]
        wname = f"{anchor.args[1]}_scaled_{i}"
        consts[wname] = _scale_weight(anchor, w, s)
        new_anchor = Call(
            anchor.name, anchor.op, (anchor.args[0], wname, *anchor.args[2:]), anchor.attrs
        )
        calls = list(func.calls)
        calls[calls.index(anchor)] = new_anchor
        if bias is None:
            calls.remove(c)
            renamed = _rename(calls, c.name, anchor.name)
            outs = [anchor.name if o == c.name else o for o in func.outputs]
            out = func.with_calls(renamed, consts, outs)
        else:
            bname = f"{bias}_scaled_{i}"
            consts[bname] = (consts[bias] * consts[cname]).astype(consts[bias].dtype)
            calls.remove(c)
            newp = Call(p.name, "add", tuple(bname if a == bias else a for a in p.args))
            calls[calls.index(p)] = newp
            renamed = _rename(calls, c.name, p.name)
            outs = [p.name if o == c.name else o for o in func.outputs]
            out = func.with_calls(renamed, consts, outs)
        return True, infer_types(dead_code_elimination(out))
    return False, func


def _rename(calls: list[Call], old: str, new: str) -> list[Call]:
    return [
        Call(c.name, c.op, tuple(new if a == old else a for a in c.args), c.attrs) for c in calls
    ]


def sink_reshapes(func: Function) -> Function:
    """``u(reshape(y))`` -> ``reshape(u(y))`` for element-wise unary ``u`` (and a reshape
    read only by ``u``), so that ``u`` fuses into ``y``'s producer: torch's ``Linear`` on
    3-D inputs is ``view(addmm(view(x)))``, and the GELU after it belongs to the addmm."""
    from .op import Pattern, get_op

    changed = True
    while changed:
        changed = False
        users = func.users()
        prod = func.producers()
        outputs = set(func.outputs)
        for c in func.calls:
            if len(c.args) != 1 or get_op(c.op).pattern != Pattern.ELEMWISE:
                continue
            r = prod.get(c.args[0])
            if (
                r is None
                or r.op != "reshape"
                or len(users.get(r.name, [])) != 1
                or r.name in outputs
            ):
                continue
            # r: %r = reshape(%y); c: %u = op(%r)  ->  %r = op(%y); %u = reshape(%r)
            calls = list(func.calls)
            i, j = calls.index(r), calls.index(c)
            calls[i] = Call(r.name, c.op, r.args, c.attrs)
            calls[j] = Call(c.name, "reshape", (r.name,), r.attrs)
            func = infer_types(func.with_calls(calls))
            changed = True
            break
    return func


def _scalar_value(func: Function, v: str) -> float | None:
    c = func.constants.get(v)
    if c is None or c.size != 1:
        return None
    return float(c.reshape(()))


def _other(call: Call, v: str) -> str | None:
    if len(call.args) != 2 or v not in call.args:
        return None
    return call.args[1] if call.args[0] == v else call.args[0]


def rewrite_erf_gelu(func: Function) -> Function:
    """``x * 0.5 * (1 + erf(x / sqrt(2)))`` (as exporters write GELU) -> ``gelu(x)``, one
    element-wise call that fuses into the matmul before it. Matches ``erf(x / c)`` or
    ``erf(x * c)``, ``+ 1``, then ``* x`` and ``* 0.5`` in either order."""
    users = func.users()
    prod = func.producers()
    outputs = set(func.outputs)

    def sole_user(v: str) -> Call | None:
        us = users.get(v, [])
        return us[0] if len(us) == 1 and v not in outputs else None

    for e in func.calls:
        if e.op != "erf":
            continue
        scaled = prod.get(e.args[0])
        if (
            scaled is None
            or scaled.op not in ("divide", "multiply")
            or sole_user(scaled.name) is None
        ):
            continue
        x = scaled.args[0]
        k = _scalar_value(func, scaled.args[1])
        if k is None or abs((k if scaled.op == "divide" else 1 / k) - 2**0.5) > 1e-3:
            continue
        add = sole_user(e.name)
        if add is None or add.op != "add" or _scalar_value(func, _other(add, e.name) or "") != 1.0:
            continue
        m1 = sole_user(add.name)
        if m1 is None or m1.op != "multiply":
            continue
        o1 = _other(m1, add.name)
        half_first = prod.get(o1) if o1 is not None else None
        if o1 == x:  # (x * (1 + erf)) * 0.5
            m2 = sole_user(m1.name)
            if (
                m2 is None
                or m2.op != "multiply"
                or _scalar_value(func, _other(m2, m1.name) or "") != 0.5
            ):
                continue
            last, dead = m2, {scaled.name, e.name, add.name, m1.name}
        elif (
            half_first is not None
            and half_first.op == "multiply"
            and x in half_first.args
            and _scalar_value(func, _other(half_first, x) or "") == 0.5
            and sole_user(half_first.name) is m1
        ):  # (x * 0.5) * (1 + erf)
            last, dead = m1, {scaled.name, e.name, add.name, half_first.name}
        else:
            continue
        calls = [c for c in func.calls if c.name not in dead]
        calls[calls.index(last)] = Call(last.name, "gelu", (x,))
        return rewrite_erf_gelu(infer_types(dead_code_elimination(func.with_calls(calls))))
    return func
