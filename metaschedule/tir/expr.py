"""Expressions of the tensor IR.

Every node is an immutable dataclass. Nodes compare by identity (``is``); structural
comparison is :func:`metaschedule.tir.structural_equal`. As in TVM, ``a == b`` on two
expressions builds an ``EQ`` node whose truth value is identity, so expressions can
still be used as dictionary keys.

Python numbers mix freely with expressions: ``i * 4 + 1`` takes the integer type of
``i``, ``x * 0.5`` the float type of ``x``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from .dtype import SUPPORTED_DTYPES, bits, check_dtype, is_bool, is_float, is_int

if TYPE_CHECKING:
    from .buffer import Buffer


# Canonical dtype strings: constructors given one skip ``check_dtype`` (same result).
_CANONICAL_DTYPES = frozenset(SUPPORTED_DTYPES)
_NON_FLOAT_DTYPES = frozenset(d for d in SUPPORTED_DTYPES if not is_float(d))
_FLOAT_DTYPES = frozenset(d for d in SUPPORTED_DTYPES if is_float(d))


class Node:
    """Base of every IR node (expressions, statements, buffers, functions)."""

    __slots__ = ()

    def script(self) -> str:
        from .printer import script  # local: a cycle, the printer imports every node

        return script(self)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return self.script()


class PrimExpr(Node):
    """A scalar expression with a ``dtype``."""

    __slots__ = ()
    dtype: str

    # arithmetic ---------------------------------------------------------------
    def __add__(self, other):
        return _binary(Add, self, other)

    def __radd__(self, other):
        return _binary(Add, other, self)

    def __sub__(self, other):
        return _binary(Sub, self, other)

    def __rsub__(self, other):
        return _binary(Sub, other, self)

    def __mul__(self, other):
        return _binary(Mul, self, other)

    def __rmul__(self, other):
        return _binary(Mul, other, self)

    def __truediv__(self, other):
        return _binary(Div, self, other)

    def __rtruediv__(self, other):
        return _binary(Div, other, self)

    def __floordiv__(self, other):
        return _binary(FloorDiv, self, other)

    def __rfloordiv__(self, other):
        return _binary(FloorDiv, other, self)

    def __mod__(self, other):
        return _binary(FloorMod, self, other)

    def __rmod__(self, other):
        return _binary(FloorMod, other, self)

    def __neg__(self):
        return _binary(Sub, const(0, self.dtype), self)

    # comparison ---------------------------------------------------------------
    def __lt__(self, other):
        return _compare(LT, self, other)

    def __le__(self, other):
        return _compare(LE, self, other)

    def __gt__(self, other):
        return _compare(GT, self, other)

    def __ge__(self, other):
        return _compare(GE, self, other)

    def __eq__(self, other):  # type: ignore[override]
        return _compare(EqualOp, self, other)

    def __ne__(self, other):  # type: ignore[override]
        return _compare(NotEqualOp, self, other)

    __hash__ = object.__hash__

    # logic (on bool expressions) ------------------------------------------------
    def __and__(self, other):
        return logical_and(self, other)

    def __or__(self, other):
        return logical_or(self, other)

    def __invert__(self):
        return Not(convert(self))

    def __bool__(self) -> bool:
        raise TypeError(
            f"the truth value of the symbolic expression {self} is unknown; use "
            "tir.all/tir.any or tir.Select instead of Python's and/or/if"
        )

    def astype(self, dtype: str) -> PrimExpr:
        return cast(dtype, self)


# ----------------------------------------------------------------------------- leaves


@dataclass(frozen=True, eq=False, repr=False)
class Var(PrimExpr):
    """A scalar variable (loop variable, block iteration variable, ...).

    Two variables are the same only if they are the same object; names are hints.
    """

    name: str
    dtype: str = "int32"

    def __post_init__(self):
        dtype = self.dtype
        if type(dtype) is not str or dtype not in _CANONICAL_DTYPES:
            object.__setattr__(self, "dtype", check_dtype(dtype))


@dataclass(frozen=True, eq=False, repr=False)
class IntImm(PrimExpr):
    dtype: str
    value: int

    def __post_init__(self):
        dtype = self.dtype
        if type(dtype) is not str or dtype not in _NON_FLOAT_DTYPES:
            dtype = check_dtype(dtype)
            if is_float(dtype):
                raise TypeError(f"IntImm needs an integer or bool dtype, got {dtype}")
            object.__setattr__(self, "dtype", dtype)
        if type(self.value) is not int:
            object.__setattr__(self, "value", int(self.value))

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value


@dataclass(frozen=True, eq=False, repr=False)
class FloatImm(PrimExpr):
    dtype: str
    value: float

    def __post_init__(self):
        dtype = self.dtype
        if type(dtype) is not str or dtype not in _FLOAT_DTYPES:
            dtype = check_dtype(dtype)
            if not is_float(dtype):
                raise TypeError(f"FloatImm needs a float dtype, got {dtype}")
            object.__setattr__(self, "dtype", dtype)
        if type(self.value) is not float:
            object.__setattr__(self, "value", float(self.value))

    def __float__(self) -> float:
        return self.value


@dataclass(frozen=True, eq=False, repr=False)
class StringImm(PrimExpr):
    """A string constant (only used as an argument of intrinsic calls and annotations)."""

    value: str
    dtype: str = field(default="int32", init=False)  # strings carry no numeric type


# ----------------------------------------------------------------------------- operators


@dataclass(frozen=True, eq=False, repr=False)
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr


@dataclass(frozen=True, eq=False, repr=False)
class BinaryOp(PrimExpr):
    """Base of the two-operand nodes; ``a`` and ``b`` share one dtype."""

    a: PrimExpr
    b: PrimExpr
    dtype: str = field(init=False)
    symbol = "?"

    def __post_init__(self):
        object.__setattr__(self, "dtype", self._result_dtype())

    def _result_dtype(self) -> str:
        if self.a.dtype != self.b.dtype:
            raise TypeError(
                f"{type(self).__name__} operands differ in dtype: {self.a.dtype} vs {self.b.dtype}"
                f" in ({self.a}) {self.symbol} ({self.b}); insert a tir.Cast"
            )
        return self.a.dtype


class Add(BinaryOp):
    symbol = "+"


class Sub(BinaryOp):
    symbol = "-"


class Mul(BinaryOp):
    symbol = "*"


class Div(BinaryOp):
    """``a / b``: true division for floats, truncating division (as in C) for integers."""

    symbol = "/"


class FloorDiv(BinaryOp):
    """Integer division rounding toward minus infinity (Python's ``//``)."""

    symbol = "//"


class FloorMod(BinaryOp):
    """Remainder of :class:`FloorDiv`; has the sign of the divisor (Python's ``%``)."""

    symbol = "%"


class Min(BinaryOp):
    symbol = "min"


class Max(BinaryOp):
    symbol = "max"


class CmpOp(BinaryOp):
    """Comparison; the result is ``bool``."""

    def _result_dtype(self) -> str:
        super()._result_dtype()
        return "bool"


class EQ(CmpOp):
    symbol = "=="


class NE(CmpOp):
    symbol = "!="


class LT(CmpOp):
    symbol = "<"


class LE(CmpOp):
    symbol = "<="


class GT(CmpOp):
    symbol = ">"


class GE(CmpOp):
    symbol = ">="


class EqualOp(EQ):
    """``a == b`` written in Python: an EQ node whose truth value is identity of a and b."""

    def __bool__(self) -> bool:
        return self.a is self.b


class NotEqualOp(NE):
    """``a != b`` written in Python: an NE node whose truth value is non-identity."""

    def __bool__(self) -> bool:
        return self.a is not self.b


class And(BinaryOp):
    symbol = "and"

    def _result_dtype(self) -> str:
        _require_bool(self.a, "And")
        _require_bool(self.b, "And")
        return "bool"


class Or(BinaryOp):
    symbol = "or"

    def _result_dtype(self) -> str:
        _require_bool(self.a, "Or")
        _require_bool(self.b, "Or")
        return "bool"


@dataclass(frozen=True, eq=False, repr=False)
class Not(PrimExpr):
    a: PrimExpr
    dtype: str = field(default="bool", init=False)

    def __post_init__(self):
        _require_bool(self.a, "Not")


@dataclass(frozen=True, eq=False, repr=False)
class Select(PrimExpr):
    """``true_value if condition else false_value``; both branches may be evaluated."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str = field(init=False)

    def __post_init__(self):
        _require_bool(self.condition, "Select")
        if self.true_value.dtype != self.false_value.dtype:
            raise TypeError(
                f"Select branches differ in dtype: {self.true_value.dtype} vs "
                f"{self.false_value.dtype}"
            )
        object.__setattr__(self, "dtype", self.true_value.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Call(PrimExpr):
    """A call to a pure math intrinsic named by ``op`` ("exp", "sqrt", ...)."""

    dtype: str
    op: str
    args: tuple[PrimExpr, ...]

    def __post_init__(self):
        object.__setattr__(self, "dtype", check_dtype(self.dtype))
        object.__setattr__(self, "args", tuple(self.args))


@dataclass(frozen=True, eq=False, repr=False)
class BufferLoad(PrimExpr):
    """``buffer[indices]``."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    dtype: str = field(init=False)

    def __post_init__(self):
        indices = tuple([convert(i) for i in self.indices])
        if len(indices) != len(self.buffer.shape):
            raise IndexError(
                f"buffer {self.buffer.name} has {len(self.buffer.shape)} dimensions, "
                f"indexed with {len(indices)}"
            )
        for idx in indices:
            if not is_int(idx.dtype):
                raise TypeError(f"index {idx} of buffer {self.buffer.name} is not an integer")
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "dtype", self.buffer.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class CommReducer(Node):
    """A commutative reducer: ``result(lhs, rhs)`` with ``identity`` as its neutral element."""

    lhs: Var
    rhs: Var
    result: PrimExpr
    identity: PrimExpr

    def __call__(self, x: PrimExpr, y: PrimExpr) -> PrimExpr:
        from .functor import substitute  # local: a cycle, functor imports expr

        return substitute(self.result, {self.lhs: x, self.rhs: y})


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(PrimExpr):
    """A reduction of ``source`` over ``axis`` (only inside a te.compute body)."""

    combiner: CommReducer
    source: PrimExpr
    axis: tuple  # tuple[IterVar, ...]
    condition: PrimExpr
    dtype: str = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "axis", tuple(self.axis))
        object.__setattr__(self, "dtype", self.source.dtype)


# ----------------------------------------------------------------------------- helpers

ExprLike = Union[PrimExpr, int, float, bool]  # noqa: UP007 (a runtime alias, py3.10)


def const(value: int | float | bool, dtype: str | None = None) -> PrimExpr:
    """A constant; the dtype defaults to int32, float32 or bool after the Python type."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -(2**31) <= value < 2**31 else "int64"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make a constant from {value!r}")
    if type(dtype) is not str or dtype not in _CANONICAL_DTYPES:
        dtype = check_dtype(dtype)
    if is_float(dtype):
        return FloatImm(dtype, float(value))
    if is_bool(dtype):
        return IntImm("bool", int(bool(value)))
    if isinstance(value, float) and not float(value).is_integer():
        raise TypeError(f"cannot make a {dtype} constant from the float {value}")
    return IntImm(dtype, int(value))


def convert(value: Any, dtype: str | None = None) -> PrimExpr:
    """Turn a Python number (or expression) into a :class:`PrimExpr`."""
    if isinstance(value, PrimExpr):
        return value
    if hasattr(value, "as_expr"):  # IterVar, te.Tensor of rank 0, ...
        return value.as_expr()
    if isinstance(value, (bool, int, float)):
        return const(value, dtype)
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return const(value.item(), dtype or value.dtype.name)
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"expected an expression or a number, got {type(value).__name__}: {value!r}")


def _match(a: Any, b: Any) -> tuple[PrimExpr, PrimExpr]:
    """Convert two operands, giving Python numbers the dtype of the other side.

    Two integer expressions of different width are both widened to the wider one.
    """
    if isinstance(a, PrimExpr) and not isinstance(b, PrimExpr) and isinstance(b, (int, float)):
        if is_float(a.dtype) or (
            is_int(a.dtype) and isinstance(b, int) and not isinstance(b, bool)
        ):
            return a, const(b, a.dtype)
        if is_int(a.dtype) and isinstance(b, float):
            return a, const(b, "float32")  # will fail below with a clear message
        return a, const(b, a.dtype if isinstance(b, bool) else None)
    if isinstance(b, PrimExpr) and not isinstance(a, PrimExpr):
        b2, a2 = _match(b, a)
        return a2, b2
    a, b = convert(a), convert(b)
    if a.dtype != b.dtype and is_int(a.dtype) and is_int(b.dtype):
        wide = a.dtype if bits(a.dtype) >= bits(b.dtype) else b.dtype
        a, b = cast(wide, a), cast(wide, b)
    return a, b


def _binary(cls, a, b) -> PrimExpr:
    a, b = _match(a, b)
    return cls(a, b)


def _compare(cls, a, b) -> PrimExpr:
    a, b = _match(a, b)
    return cls(a, b)


def _require_bool(e: PrimExpr, who: str) -> None:
    if not is_bool(e.dtype):
        raise TypeError(f"{who} needs a bool operand, got {e} of dtype {e.dtype}")


def cast(dtype: str, value: ExprLike) -> PrimExpr:
    """Convert ``value`` to ``dtype`` (no node if it already has that dtype)."""
    if type(dtype) is not str or dtype not in _CANONICAL_DTYPES:
        dtype = check_dtype(dtype)
    value = convert(value)
    if value.dtype == dtype:
        return value
    if isinstance(value, IntImm) and not is_float(dtype):
        if is_bool(dtype):
            return IntImm(dtype, int(bool(value.value)))
        return IntImm(dtype, _wrap_int(value.value, dtype))
    if isinstance(value, (IntImm, FloatImm)) and is_float(dtype):
        return FloatImm(dtype, float(value.value))
    return Cast(dtype, value)


def _wrap_int(value: int, dtype: str) -> int:
    """``value`` converted to ``dtype`` with two's-complement wrap-around, as a C cast does."""
    n = bits(dtype)
    value &= (1 << n) - 1
    if not dtype.startswith("uint") and value >= 1 << (n - 1):
        value -= 1 << n
    return value


def logical_and(*args: ExprLike) -> PrimExpr:
    exprs = [convert(a) for a in args]
    out = exprs[0]
    for e in exprs[1:]:
        out = And(out, e)
    return out


def logical_or(*args: ExprLike) -> PrimExpr:
    exprs = [convert(a) for a in args]
    out = exprs[0]
    for e in exprs[1:]:
        out = Or(out, e)
    return out


def is_const_int(e: Any, value: int | None = None) -> bool:
    """True if ``e`` is an integer constant (equal to ``value`` when given)."""
    if isinstance(e, bool):
        return False
    if isinstance(e, int):
        return value is None or e == value
    return isinstance(e, IntImm) and (value is None or e.value == value)
