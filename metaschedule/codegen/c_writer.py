"""What the C and CUDA writers share: C identifiers, parameters, and lines of text.

:class:`CWriter` holds the text of one function being written (lines at an indent, the
C names of variables and buffers, the ranges of the loops around) and writes
expressions (:class:`.c_expr.ExprWriter`); the CPU writer (:mod:`.c_codegen`) and the
CUDA kernel writer (:mod:`.cuda_codegen`) each extend it with their statements.
:class:`CpuEmitter` names what the CPU stages (:mod:`.c_vector`, :mod:`.c_accumulate_emit`,
:mod:`.c_invariant`, :mod:`.c_parallel`) read and write of the CPU writer, and
:class:`VectorEmitter` the part of it vector code uses.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import c_type
from ..tir.function import PrimFunc
from ..tir.names import unique_name
from ..tir.stmt import For, IfThenElse, Stmt
from .c_expr import ExprWriter, strip_parens
from .c_helpers import Helpers
from .c_ir import affine_add, written_buffers

if TYPE_CHECKING:
    from ..target import Target
    from .c_accumulate import TileLimits
    from .c_init_fusion import InitFusion
    from .isa import CpuIsa

__all__ = [
    "C_RESERVED",
    "CWriter",
    "CpuEmitter",
    "NameTable",
    "ParamInfo",
    "VectorEmitter",
    "param_infos",
]

C_RESERVED = {
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "main",
    "args",
    "errno",
    "abs",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "erf",
    "floor",
    "ceil",
    "round",
    "sin",
    "cos",
    "pow",
    "free",
    "malloc",
    "memcpy",
    "memset",
    "NAN",
    "INFINITY",
    "fabs",
    "trunc",
    "exp2",
    "log2",
    "nearbyint",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "size_t",
    "l",
}
#: more libm names a kernel (named after its graph operator: ``expm1``, ``log1p``) must
#: not take
C_RESERVED |= {
    "expm1", "log1p", "log10", "sinh", "cosh", "tan", "asin", "acos", "atan", "atan2",
    "asinh", "acosh", "atanh", "cbrt", "hypot", "fmin", "fmax", "fmod", "rint", "lround",
    "copysign", "nan", "isnan", "isinf", "signbit", "ldexp", "frexp", "modf", "remainder",
    "lgamma", "tgamma", "erfc", "exit", "abort", "printf",
}  # fmt: skip


@dataclass(frozen=True)
class ParamInfo:
    """A parameter of a generated function, as the runtime checks it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    written: bool


def param_infos(func: PrimFunc) -> tuple[ParamInfo, ...]:
    """The parameters of ``func`` as the runtime checks them."""
    written = written_buffers(func.body)
    return tuple(ParamInfo(b.name, b.dtype, b.static_shape(), b in written) for b in func.params)


class NameTable:
    """Unique C identifiers derived from IR name hints."""

    def __init__(self, taken: set[str] | None = None) -> None:
        self.used: set[str] = set(C_RESERVED) | (taken or set())

    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint) or "v"
        if base[0].isdigit():
            base = "v_" + base
        if base.startswith(("ms_", "__")) or keyword.iskeyword(base):
            base = "u_" + base
        name = unique_name(base, self.used)
        self.used.add(name)
        return name


class CWriter(ExprWriter):
    """The text of one function being written: ``lines`` at ``indent``, the C names of
    variables and buffers, and the ranges of the loops around (for the expressions)."""

    def __init__(self, name: str, helpers: Helpers) -> None:
        self.name, self.helpers = name, helpers
        self.names = NameTable()
        self.var_names: dict[E.Var, str] = {}
        self.buf_names: dict[Buffer, str] = {}
        self.ranges: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]] = {}
        self.lines: list[str] = []
        self.indent = 1

    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    def stmt(self, s: Stmt) -> None:
        raise NotImplementedError

    def block(self, s: Stmt) -> None:
        """``s`` one level deeper."""
        self.indent += 1
        self.stmt(s)
        self.indent -= 1

    def if_then_else(self, s: IfThenElse) -> None:
        """``if (cond) { then } else { else }``, each branch one level deeper."""
        self.line(f"if ({strip_parens(self.expr(s.condition))}) {{")
        self.block(s.then_case)
        if s.else_case is not None:
            self.line("} else {")
            self.block(s.else_case)
        self.line("}")

    def for_header(
        self, loop: For, name: str, step: int = 1, stop: E.PrimExpr | None = None
    ) -> None:
        t = c_type(loop.loop_var.dtype)
        lo = self.expr(loop.min)
        stop = stop if stop is not None else affine_add(loop.min, loop.extent)
        inc = f"++{name}" if step == 1 else f"{name} += {step}"
        end = strip_parens(self.expr(stop))
        self.line(f"for ({t} {name} = {strip_parens(lo)}; {name} < {end}; {inc}) {{")


class VectorEmitter(Protocol):
    """The CPU writer as vector code (:mod:`.c_vector`, :mod:`.c_vector_body`) uses it:
    what :class:`.c_vector.DryWriter`, which checks vector code by writing it nowhere,
    provides too."""

    # text and names (CWriter)
    name: str
    helpers: Helpers
    names: NameTable
    var_names: dict[E.Var, str]
    buf_names: dict[Buffer, str]
    ranges: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]]
    lines: list[str]
    indent: int
    target: Target
    # a register tile being written (c_accumulate_emit) and its shared loads
    accumulated: Buffer | None
    lane_sums: dict[str, str]
    shared_loads: dict[tuple, str] | None
    shared_decls: list[tuple[str, str]]
    shared_broadcasts: bool
    known: dict[E.Var, E.PrimExpr]

    @property
    def isa(self) -> CpuIsa: ...

    def line(self, text: str) -> None: ...

    def stmt(self, s: Stmt) -> None: ...

    def block(self, s: Stmt) -> None: ...

    def expr(self, e: E.PrimExpr) -> str: ...

    def index(self, buf: Buffer, indices: tuple[E.PrimExpr, ...], kind: str = "load") -> str: ...

    def for_header(
        self, loop: For, name: str, step: int = 1, stop: E.PrimExpr | None = None
    ) -> None: ...

    def nonneg(self, e: E.PrimExpr) -> bool: ...

    def known_guard(self, cond: E.PrimExpr) -> E.PrimExpr | bool: ...

    def accumulator(self, buf: Buffer, indices: tuple[E.PrimExpr, ...]) -> str | None: ...

    def invariant_load(
        self, load: E.BufferLoad, lanes: int, broadcast: bool = False
    ) -> str | None: ...

    def pin(self, name: str, dtype: str, lanes: int) -> str: ...

    def unfused(self, loop: For) -> For | None: ...


class CpuEmitter(VectorEmitter, Protocol):
    """The CPU writer (:class:`.c_codegen.FunctionWriter`) as its stages use it: the
    text and names of :class:`CWriter`, and the state of the code being written."""

    # a register tile being written (c_accumulate_emit)
    accumulators: dict[tuple, str]
    simd_reduction: tuple[E.Var, tuple[str, ...]] | None
    pending_init: InitFusion | None
    init_uses: set[int]
    # loops: unrolling, parallel regions, constants of written-out code
    auto_unroll: int | None
    explicit_unroll: bool
    in_parallel: bool
    omp_region: Any
    hoisted: set[Buffer]
    # heap buffers from the workspace (c_workspace): the function's symbol, its slots
    symbol: str
    workspace: list[tuple[str, int]]
    scopes: list[Any]

    @property
    def limits(self) -> TileLimits: ...

    def tile_at(self, loop: For) -> Any: ...

    def row_at(self, loop: For) -> For | None: ...

    def heap_allocations(self, s: Stmt, inside_parallel: bool) -> list[Buffer]: ...
