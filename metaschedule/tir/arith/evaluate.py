"""A scalar reference evaluator: the meaning of an expression, as the simplifier sees it.

Integers are mathematical (Python ints, no wrap-around) except in a ``Cast`` to a
narrower integer type, which wraps as in C. ``FloorDiv``/``FloorMod`` follow Python's
``//`` and ``%``; ``Div`` on integers truncates toward zero as in C. Float results are
rounded to their dtype (float32 arithmetic gives float32 results).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import expr as E
from ..dtype import bits, is_bool, is_float
from ..interpreter import intrinsic_functions
from ..op import BINARY_INTRINSICS

Scalar = int | float | bool

#: the interpreter's intrinsics, computed in float64 and then rounded to the dtype
_INTRINSICS = intrinsic_functions("float64")


def round_float(value: float, dtype: str) -> float:
    """``value`` rounded to the precision of the float ``dtype``."""
    if dtype == "float64":
        return float(value)
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.dtype(dtype).type(value))


def wrap_int(value: int, dtype: str) -> int | bool:
    """``value`` converted to the integer ``dtype`` with two's-complement wrap-around."""
    if is_bool(dtype):
        return bool(value)
    width = bits(dtype)
    value &= (1 << width) - 1
    if dtype.startswith("int") and value >= 1 << (width - 1):
        value -= 1 << width
    return value


def trunc_div(a: int, b: int) -> int:
    """C division of integers: the quotient rounded toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def float_div(a: float, b: float) -> float:
    """IEEE division (``x / 0`` is an infinity or NaN rather than an exception)."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def cast_value(value: Scalar, dtype: str) -> Scalar:
    """Convert a scalar to ``dtype`` with C semantics (float to int truncates)."""
    if is_bool(dtype):
        return bool(value)
    if is_float(dtype):
        return round_float(float(value), dtype)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"cannot cast the float {value} to {dtype}")
        value = math.trunc(value)
    return wrap_int(int(value), dtype)


def binary_value(op: type, a: Scalar, b: Scalar, dtype: str) -> Scalar:
    """Apply the arithmetic node class ``op`` to two scalars of the operand ``dtype``."""
    fl = is_float(dtype)
    if op is E.Add:
        r = a + b
    elif op is E.Sub:
        r = a - b
    elif op is E.Mul:
        r = a * b
    elif op is E.Div:
        if fl:
            r = float_div(a, b)
        else:
            if b == 0:
                raise ZeroDivisionError(f"integer division by zero: {a} / {b}")
            r = trunc_div(int(a), int(b))
    elif op is E.FloorDiv or op is E.FloorMod:
        if b == 0:
            if fl:
                return math.nan
            raise ZeroDivisionError(f"integer division by zero: {a} {op.symbol} {b}")
        if fl:
            q = math.floor(a / b)
            r = q if op is E.FloorDiv else a - q * b
        else:
            r = a // b if op is E.FloorDiv else a % b
    elif op is E.Min:
        r = min(a, b)
    elif op is E.Max:
        r = max(a, b)
    else:
        raise TypeError(f"binary_value: {op.__name__} is not an arithmetic node")
    if fl:
        return round_float(r, dtype)
    if is_bool(dtype):
        return bool(r)
    return int(r)


def compare_value(op: type, a: Scalar, b: Scalar) -> bool:
    """Apply the comparison node class ``op`` (EQ, NE, LT, LE, GT, GE) to two scalars."""
    if issubclass(op, E.EQ):
        return a == b
    if issubclass(op, E.NE):
        return a != b
    if op is E.LT:
        return a < b
    if op is E.LE:
        return a <= b
    if op is E.GT:
        return a > b
    if op is E.GE:
        return a >= b
    raise TypeError(f"compare_value: {op.__name__} is not a comparison")


def call_value(op: str, args: list[Scalar], dtype: str) -> Scalar:
    """Evaluate the math intrinsic ``op`` on scalar ``args`` in ``dtype``."""
    fn = _INTRINSICS.get(op)
    if fn is None or len(args) != (2 if op in BINARY_INTRINSICS else 1):
        known = ", ".join(sorted(_INTRINSICS))
        raise ValueError(f"cannot evaluate the call {op}({len(args)} args); known: {known}")
    with np.errstate(all="ignore"):
        r = fn(*(np.float64(a) for a in args))
    if is_float(dtype):
        return round_float(float(r), dtype)
    return cast_value(float(r), dtype)


def evaluate(expr: E.PrimExpr | Scalar, env: Mapping[Any, Any] | None = None) -> Scalar:
    """Evaluate ``expr`` with variables taken from ``env``.

    Args:
        expr: the expression (Python numbers are returned as they are).
        env: values of the variables (``Var -> number``); a ``Buffer -> numpy array`` entry
            lets ``BufferLoad`` nodes be evaluated too.

    Returns:
        an ``int`` for integer expressions, a ``float`` for float ones, a ``bool`` for bools.

    Raises:
        ValueError: a variable has no value, or the expression has no scalar meaning.
        ZeroDivisionError: an integer division or modulo by zero.
    """
    if not isinstance(expr, E.PrimExpr):
        return expr
    return _Evaluator(env or {}).run(expr)


_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max)


class _Evaluator:
    def __init__(self, env: Mapping[Any, Any]):
        self.env = env
        self._memo: dict[int, tuple[E.PrimExpr, Any]] = {}  # shared sub-expressions: once

    def run(self, e: E.PrimExpr) -> Any:
        hit = self._memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out = self._run(e)
        self._memo[id(e)] = (e, out)
        return out

    def _run(self, e: E.PrimExpr) -> Any:
        if isinstance(e, E.IntImm):
            return bool(e.value) if is_bool(e.dtype) else e.value
        if isinstance(e, E.FloatImm):
            return e.value
        if isinstance(e, E.Var):
            if e not in self.env:
                raise ValueError(f"evaluate: no value given for variable {e.name!r}")
            v = self.env[e]
            return cast_value(v.item() if isinstance(v, np.generic) else v, e.dtype)
        if isinstance(e, E.CmpOp):
            return compare_value(type(e), self.run(e.a), self.run(e.b))
        if isinstance(e, E.And):
            return bool(self.run(e.a)) and bool(self.run(e.b))
        if isinstance(e, E.Or):
            return bool(self.run(e.a)) or bool(self.run(e.b))
        if isinstance(e, _ARITH):
            spine, node = [], e  # iterate along the left spine of long chains
            while isinstance(node, _ARITH):
                spine.append(node)
                node = node.a
            acc = self.run(node)
            for n in reversed(spine):
                acc = binary_value(type(n), acc, self.run(n.b), n.dtype)
            return acc
        if isinstance(e, E.Not):
            return not self.run(e.a)
        if isinstance(e, E.Select):
            return self.run(e.true_value) if self.run(e.condition) else self.run(e.false_value)
        if isinstance(e, E.Cast):
            return cast_value(self.run(e.value), e.dtype)
        if isinstance(e, E.Call):
            return call_value(e.op, [self.run(a) for a in e.args], e.dtype)
        if isinstance(e, E.StringImm):
            return e.value
        if isinstance(e, E.BufferLoad):
            arr = self.env.get(e.buffer)
            if arr is None:
                raise ValueError(f"evaluate: no array given for buffer {e.buffer.name!r}")
            v = np.asarray(arr)[tuple(int(self.run(i)) for i in e.indices)]
            return cast_value(v.item(), e.dtype)
        raise ValueError(f"evaluate: {type(e).__name__} has no scalar meaning here: {e}")
