"""Peephole patterns the importers recognise as they emit calls.

Exporters spell some activations as several operators: SiLU as ``x * sigmoid(x)``
(ONNX's ``Mul`` of ``Sigmoid``, ATen's decomposed ``silu``), and the tanh GELU (GPT-2's)
as ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))`` (ONNX before opset 20).
Before opset 17 ONNX has no LayerNormalization: exporters write
``(x - mean(x)) / sqrt(mean((x - mean(x))**2) + eps)``, two reductions and a chain of
element-wise calls, where one ``layer_norm`` call is a vector row reduction.
Their calls read ``x`` more than once, and fusion only joins a value with one reader,
so they would be passes of their own after the convolution or matmul that produces
``x``; as one ``silu``, ``gelu_tanh`` or ``layer_norm`` call they fuse. The calls a match makes
dead are dropped when the builder finishes.
"""

from __future__ import annotations

import math

from .builder import GraphBuilder
from .ir import Call

#: the constants of the tanh GELU, matched to this relative tolerance
_GELU_TANH = {"half": 0.5, "beta": math.sqrt(2 / math.pi), "kappa": 0.044715}
_RTOL = 1e-5


def producer(b: GraphBuilder, value: object) -> Call | None:
    """The call ``b`` emitted for ``value`` (None for an input, a constant or a number)."""
    if not isinstance(value, str):
        return None
    return next((c for c in reversed(b.calls) if c.name == value), None)


def silu_operand(b: GraphBuilder, x: object, y: object) -> str | None:
    """``v`` when ``x * y`` is ``v * sigmoid(v)`` (either order), else None."""
    for s, v in ((x, y), (y, x)):
        call = producer(b, s)
        if call is not None and call.op == "sigmoid" and call.args[0] == v:
            return v
    return None


def _factors(b: GraphBuilder, v: str, depth: int = 4) -> list[str]:
    """The operands of the product tree of ``multiply`` calls that computes ``v``."""
    call = producer(b, v)
    if depth == 0 or call is None or call.op != "multiply":
        return [v]
    return [f for a in call.args for f in _factors(b, a, depth - 1)]


def _split(b: GraphBuilder, factors: list[str]) -> tuple[float, list[str]]:
    """The product of the one-element constants among ``factors``, and the others."""
    k, rest = 1.0, []
    for f in factors:
        if b.is_const(f) and b.value(f).size == 1:
            k *= float(b.value(f).reshape(-1)[0])
        else:
            rest.append(f)
    return k, rest


def _near(value: float, key: str) -> bool:
    return math.isclose(value, _GELU_TANH[key], rel_tol=_RTOL)


def _added(b: GraphBuilder, v: str) -> tuple[str, str] | None:
    call = producer(b, v)
    return (call.args[0], call.args[1]) if call is not None and call.op == "add" else None


def _is_cube_of(b: GraphBuilder, c: str, v: str) -> bool:
    """``c`` is ``kappa * v**3``: ``v * v * v`` or ``power(v, 3)``, times kappa."""
    k, rest = _split(b, _factors(b, c))
    if not _near(k, "kappa"):
        return False
    if rest == [v, v, v]:
        return True
    call = producer(b, rest[0]) if len(rest) == 1 else None
    if call is None or call.op != "power" or call.args[0] != v:
        return False
    k3, others = _split(b, [call.args[1]])
    return not others and k3 == 3.0


def gelu_tanh_operand(b: GraphBuilder, x: str, y: str) -> str | None:
    """``v`` when ``x * y`` is the tanh GELU of ``v`` (the module docstring's expression,
    its products in any order and grouping), else None."""
    half, rest = _split(b, _factors(b, x) + _factors(b, y))
    if len(rest) != 2 or not _near(half, "half"):
        return None
    for one_plus, v in (rest, rest[::-1]):
        terms = _added(b, one_plus)
        if terms is None:
            continue
        one, t = _split(b, [terms[0]])[0], terms[1]
        if b.is_const(t):
            one, t = _split(b, [terms[1]])[0], terms[0]
        tanh = producer(b, t)
        if one != 1.0 or tanh is None or tanh.op != "tanh":
            continue
        beta, inner = _split(b, _factors(b, tanh.args[0]))
        inner_terms = _added(b, inner[0]) if len(inner) == 1 else None
        if not _near(beta, "beta") or inner_terms is None or v not in inner_terms:
            continue
        cube = inner_terms[1] if inner_terms[0] == v else inner_terms[0]
        if _is_cube_of(b, cube, v):
            return v
    return None


def _mean_of(b: GraphBuilder, v: str) -> tuple[str, tuple[int, ...]] | None:
    """``(x, axes)`` when ``v`` is ``mean(x, axes, keepdims=True)``."""
    call = producer(b, v)
    if call is None or call.op != "reduce" or call.attr.get("kind") != "mean":
        return None
    axes = call.attr.get("axes")
    if axes is None or not call.attr.get("keepdims"):
        return None
    return call.args[0], tuple(axes)


def layer_norm_of(b: GraphBuilder, num: str, den: str) -> tuple[str, float, int] | None:
    """``(x, eps, n)`` when ``num / den`` normalizes ``x`` over its last ``n`` axes (the
    module docstring's expression; the square as ``power(d, 2)`` or ``d * d``)."""
    sub, sqrt = producer(b, num), producer(b, den)
    if sub is None or sub.op != "subtract" or sqrt is None or sqrt.op != "sqrt":
        return None
    x, mean = sub.args
    first = _mean_of(b, mean)
    terms = _added(b, sqrt.args[0])
    if first is None or first[0] != x or terms is None:
        return None
    var, eps = terms if b.is_const(terms[1]) else terms[::-1]
    second = _mean_of(b, var)
    if not b.is_const(eps) or b.value(eps).size != 1 or second is None:
        return None
    square = producer(b, second[0])
    if square is None or second[1] != first[1]:
        return None
    if square.op == "multiply":
        ok = square.args == (num, num)
    else:
        two, others = _split(b, list(square.args[1:]))
        ok = square.op == "power" and square.args[0] == num and not others and two == 2.0
    nd = len(b.types[x].shape)
    axes = first[1]
    if not ok or sorted(a % nd for a in axes) != list(range(nd - len(axes), nd)):
        return None
    return x, float(b.value(eps).reshape(-1)[0]), len(axes)
