"""The script printer: any IR node as readable, Python-like TVMScript.

``script(node)`` is what ``str()`` and ``repr()`` of every node return, so it never
raises: a node it cannot print (or a malformed tree) prints as ``<ClassName ...>``.

Names are deterministic and unique within one printed script: variables and
buffers are named after their hints in the order they are first printed, and a
second distinct object with the same hint gets ``_1``, ``_2``, ... appended. One
name space covers both, per function, as in a Python scope.

Differences from TVM's printer, on purpose: a ``Range`` prints as
``T.Range(min=..., extent=...)`` (unambiguous), ``T.thread_binding`` always shows
its begin and end, and an ``Allocate`` prints as ``X = T.allocate(...)`` followed by
its body at the same indentation (its scope is the rest of the enclosing body).
"""

from __future__ import annotations

import enum
import json
import keyword
import math
import re
from typing import Any

from . import expr as E
from .buffer import Buffer
from .function import IRModule, PrimFunc
from .functor import Visitor
from .names import unique_name
from .stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IterType,
    IterVar,
    Range,
    SeqStmt,
    Stmt,
)

INDENT = "    "

# Python operator precedences (higher binds tighter).
_OR, _AND, _NOT, _CMP, _ADD, _MUL, _UNARY, _ATOM = 1, 2, 3, 4, 6, 7, 8, 10

_AXIS_KIND = {
    IterType.DATA_PAR: ("spatial", "S"),
    IterType.COMM_REDUCE: ("reduce", "R"),
    IterType.ORDERED: ("scan", "O"),
    IterType.OPAQUE: ("opaque", "O"),
    IterType.THREAD_INDEX: ("thread_index", "T"),
}
_ITER_TYPE_NAME = {
    IterType.DATA_PAR: "DataPar",
    IterType.THREAD_INDEX: "ThreadIndex",
    IterType.COMM_REDUCE: "CommReduce",
    IterType.ORDERED: "Ordered",
    IterType.OPAQUE: "Opaque",
}
_FOR_KIND = {
    ForKind.PARALLEL: "T.parallel",
    ForKind.VECTORIZED: "T.vectorized",
    ForKind.UNROLLED: "T.unroll",
    ForKind.SERIAL: "T.serial",
}
_RESERVED = set(keyword.kwlist) | {"T", "I", "range"}


def script(node: Any) -> str:
    """Print ``node`` (any IR node, or a list/tuple of them) as TVMScript-like text."""
    try:
        return _Printer().top(node)
    except Exception as err:  # noqa: BLE001 - str()/repr() of a node must never raise
        return f"<{type(node).__name__} (unprintable: {type(err).__name__}: {err})>"


def _sanitize(hint: str, default: str) -> str:
    name = re.sub(r"\W", "_", hint or "") or default
    if name[0].isdigit():
        name = "_" + name
    if name in _RESERVED:
        name += "_"
    return name


def _is_true(e: Any) -> bool:
    return isinstance(e, E.IntImm) and e.dtype == "bool" and e.value == 1


def _const_int(e: Any) -> int | None:
    if isinstance(e, E.IntImm) and e.dtype != "bool":
        return e.value
    return None


def _infix(e: Any) -> tuple[str, int] | None:
    """(symbol, precedence) of a node printed as a Python infix operator, else None."""
    if isinstance(e, (E.Add, E.Sub)):
        return e.symbol, _ADD
    if isinstance(e, (E.Mul, E.FloorDiv, E.FloorMod)):
        return e.symbol, _MUL
    if isinstance(e, E.Div) and e.dtype.startswith("float"):
        return "/", _MUL
    if isinstance(e, E.CmpOp):
        return e.symbol, _CMP
    if isinstance(e, E.And):
        return "and", _AND
    if isinstance(e, E.Or):
        return "or", _OR
    return None


class _UsesAny(Visitor):
    def __init__(self, targets: set):
        self.targets = targets
        self.found = False

    def visit_Var(self, v: E.Var) -> None:
        if v in self.targets:
            self.found = True


def _uses_any(node: Any, targets: set) -> bool:
    if not targets:
        return False
    v = _UsesAny(targets)
    v.visit(node)
    return v.found


class _Printer:
    def __init__(self) -> None:
        self.names: dict[Any, str] = {}
        self.used: set[str] = set()
        self.lines: list[str] = []
        self.depth = 0
        self.loop_dom: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]] = {}

    # ------------------------------------------------------------------ entry
    def top(self, node: Any) -> str:
        if isinstance(node, IRModule):
            return self.module(node)
        if isinstance(node, PrimFunc):
            self.func(node, node.attrs.get("global_symbol", "main"))
            return "\n".join(self.lines)
        if isinstance(node, Stmt):
            self.stmt(node)
            return "\n".join(self.lines)
        if isinstance(node, E.PrimExpr):
            return self.expr(node)
        if isinstance(node, Buffer):
            return f"{self.name(node)}: {self.buffer_type(node)}"
        if isinstance(node, Range):
            return f"T.Range(min={self.expr(node.min)}, extent={self.expr(node.extent)})"
        if isinstance(node, IterVar):
            return self.iter_var(node)
        if isinstance(node, BufferRegion):
            return self.region(node)
        if isinstance(node, E.CommReducer):
            return self.reducer(node)
        if isinstance(node, (list, tuple)):
            return "[" + ", ".join(self.top(x) for x in node) + "]"
        if isinstance(node, E.Node):
            return self.generic(node)
        return self.value(node)

    def generic(self, node: E.Node) -> str:
        import dataclasses

        if not dataclasses.is_dataclass(node):
            return f"<{type(node).__name__}>"
        parts = [f"{f.name}={self.value(getattr(node, f.name))}" for f in dataclasses.fields(node)]
        return f"<{type(node).__name__} {', '.join(parts)}>"

    # ------------------------------------------------------------------ names
    def name(self, node: E.Var | Buffer) -> str:
        got = self.names.get(node)
        if got is not None:
            return got
        base = _sanitize(node.name, "v" if isinstance(node, E.Var) else "buf")
        name = unique_name(base, self.used)
        self.used.add(name)
        self.names[node] = name
        return name

    # ------------------------------------------------------------------ values
    def value(self, v: Any) -> str:
        """Annotation values: nodes, strings, numbers, and containers of them."""
        if isinstance(v, E.PrimExpr):
            return self.expr(v)
        if isinstance(v, E.Node):
            return self.top(v)
        if isinstance(v, enum.Enum):
            return repr(v.value)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, dict):
            return self.dict(v)
        if isinstance(v, list):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, tuple):
            inner = ", ".join(self.value(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        return repr(v)

    def dict(self, d: dict) -> str:
        items = sorted(d.items(), key=lambda kv: str(kv[0]))
        return "{" + ", ".join(f"{self.value(k)}: {self.value(v)}" for k, v in items) + "}"

    def shape(self, shape: tuple) -> str:
        inner = ", ".join(self.expr(s) for s in shape)
        return f"({inner},)" if len(shape) == 1 else f"({inner})"

    def buffer_type(self, b: Buffer) -> str:
        scope = "" if b.scope == "global" else f", scope={json.dumps(b.scope)}"
        return f"T.Buffer({self.shape(b.shape)}, {json.dumps(b.dtype)}{scope})"

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Any) -> str:
        return self.expr_prec(e)[0]

    def operand(self, e: Any, prec: int, right: bool) -> str:
        text, p = self.expr_prec(e)
        if p < prec or (p == prec and (right or prec == _CMP)):
            return f"({text})"
        return text

    def expr_prec(self, e: Any) -> tuple[str, int]:
        if not isinstance(e, E.Node):  # e.g. a Python int left in an Evaluate
            return self.value(e), _ATOM
        if isinstance(e, E.Var):
            return self.name(e), _ATOM
        if isinstance(e, E.IntImm):
            return self.int_imm(e)
        if isinstance(e, E.FloatImm):
            return f"T.{e.dtype}({self.float_text(e.value)})", _ATOM
        if isinstance(e, E.StringImm):
            return json.dumps(e.value), _ATOM
        infix = _infix(e)
        if infix is not None:
            return self.infix_chain(e, *infix), infix[1]
        return self.call_like(e), _ATOM

    def int_imm(self, e: E.IntImm) -> tuple[str, int]:
        if e.dtype == "bool":
            return f"T.bool({bool(e.value)})", _ATOM
        if e.dtype == "int32":
            return str(e.value), (_UNARY if e.value < 0 else _ATOM)
        return f"T.{e.dtype}({e.value})", _ATOM

    @staticmethod
    def float_text(v: float) -> str:
        if math.isnan(v) or math.isinf(v):
            return json.dumps(repr(v))
        if v.is_integer() and abs(v) < 1e16 and not (v == 0 and math.copysign(1, v) < 0):
            return str(int(v))
        return repr(v)

    def infix_chain(self, e: Any, symbol: str, prec: int) -> str:
        # Walk the left spine iteratively: long sums print without deep recursion.
        chain = [e]
        cur = e.a
        while prec != _CMP:
            inner = _infix(cur)
            if inner is None or inner[1] != prec:
                break
            chain.append(cur)
            cur = cur.a
        text = self.operand(cur, prec, right=False)
        for node in reversed(chain):
            text += f" {_infix(node)[0]} {self.operand(node.b, prec, right=True)}"
        return text

    def call_like(self, e: Any) -> str:
        x = self.expr
        if isinstance(e, E.Not):
            return f"not {self.operand(e.a, _NOT, right=True)}"
        if isinstance(e, E.Min):
            return f"T.min({x(e.a)}, {x(e.b)})"
        if isinstance(e, E.Max):
            return f"T.max({x(e.a)}, {x(e.b)})"
        if isinstance(e, E.Div):
            return f"T.Div({x(e.a)}, {x(e.b)})"
        if isinstance(e, E.Cast):
            return f"T.Cast({json.dumps(e.dtype)}, {x(e.value)})"
        if isinstance(e, E.Select):
            return f"T.Select({x(e.condition)}, {x(e.true_value)}, {x(e.false_value)})"
        if isinstance(e, E.Call):
            return f"T.{e.op}({', '.join(x(a) for a in e.args)})"
        if isinstance(e, E.BufferLoad):
            self.name(e.buffer)  # name left to right, as the text reads
            return self.subscript(e.buffer, [x(i) for i in e.indices])
        if isinstance(e, E.Reduce):
            axis = ", ".join(self.iter_var(iv) for iv in e.axis)
            where = "" if _is_true(e.condition) else f", where={x(e.condition)}"
            return f"T.reduce({self.reducer(e.combiner)}, {x(e.source)}, axis=[{axis}]{where})"
        return self.generic(e)

    def subscript(self, buffer: Buffer, parts: list[str]) -> str:
        return f"{self.name(buffer)}[{', '.join(parts) if parts else '()'}]"

    def reducer(self, r: E.CommReducer) -> str:
        return (
            f"T.comm_reducer(lambda {self.name(r.lhs)}, {self.name(r.rhs)}: "
            f"{self.expr(r.result)}, [{self.expr(r.identity)}])"
        )

    def iter_var(self, iv: IterVar) -> str:
        tag = f", thread={json.dumps(iv.thread_tag)}" if iv.thread_tag else ""
        dom = f"T.Range(min={self.expr(iv.dom.min)}, extent={self.expr(iv.dom.extent)})"
        kind = _ITER_TYPE_NAME.get(iv.iter_type, str(iv.iter_type))
        return f"T.iter_var({self.name(iv.var)}, {dom}, {json.dumps(kind)}{tag})"

    def end(self, lo: Any, extent: Any) -> str:
        """Text of ``lo + extent``, folded when both are integer constants of one dtype."""
        a, b = _const_int(lo), _const_int(extent)
        if a is not None and b is not None and lo.dtype == extent.dtype:
            return self.int_imm(E.IntImm(lo.dtype, a + b))[0]
        if a == 0:
            return self.expr(extent)
        return f"{self.operand(lo, _ADD, False)} + {self.operand(extent, _ADD, True)}"

    def region(self, r: BufferRegion) -> str:
        self.name(r.buffer)
        parts = []
        for rng in r.region:
            if _const_int(rng.extent) == 1:
                parts.append(self.expr(rng.min))
            else:
                parts.append(f"{self.expr(rng.min)}:{self.end(rng.min, rng.extent)}")
        return self.subscript(r.buffer, parts)

    # ------------------------------------------------------------------ statements
    def emit(self, line: str) -> None:
        self.lines.append(INDENT * self.depth + line)

    def stmt(self, s: Any) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            self.emit(self.top(s) if not isinstance(s, Stmt) else self.generic(s))
        else:
            method(s)

    def body(self, s: Any) -> None:
        self.depth += 1
        self.stmt(s)
        self.depth -= 1

    def stmt_SeqStmt(self, s: SeqStmt) -> None:
        if not s.seq:
            self.emit("T.evaluate(0)")
        for x in s.seq:
            self.stmt(x)

    def stmt_BufferStore(self, s: BufferStore) -> None:
        self.name(s.buffer)
        target = self.subscript(s.buffer, [self.expr(i) for i in s.indices])
        self.emit(f"{target} = {self.expr(s.value)}")

    def stmt_Evaluate(self, s: Evaluate) -> None:
        self.emit(f"T.evaluate({self.expr(s.value)})")

    def stmt_IfThenElse(self, s: IfThenElse) -> None:
        self.emit(f"if {self.expr(s.condition)}:")
        self.body(s.then_case)
        if s.else_case is not None:
            self.emit("else:")
            self.body(s.else_case)

    def stmt_Allocate(self, s: Allocate) -> None:
        b = s.buffer
        scope = "" if b.scope == "global" else f", scope={json.dumps(b.scope)}"
        shape = self.shape(b.shape)
        self.emit(f"{self.name(b)} = T.allocate({shape}, {json.dumps(b.dtype)}{scope})")
        self.stmt(s.body)

    def stmt_For(self, s: For) -> None:
        loops = [s]
        if self.collapsible(s):
            seen = {s.loop_var}
            while self.collapsible(loops[-1].body) and not _uses_any(loops[-1].body.extent, seen):
                loops.append(loops[-1].body)
                seen.add(loops[-1].loop_var)
        names = ", ".join(self.name(f.loop_var) for f in loops)
        if len(loops) > 1:
            head = f"T.grid({', '.join(self.expr(f.extent) for f in loops)})"
        else:
            head = self.loop_head(s)
        self.emit(f"for {names} in {head}:")
        for f in loops:
            self.loop_dom[f.loop_var] = (f.min, f.extent)
        self.body(loops[-1].body)
        for f in loops:
            self.loop_dom.pop(f.loop_var, None)

    @staticmethod
    def collapsible(s: Any) -> bool:
        return (
            isinstance(s, For)
            and s.kind is ForKind.SERIAL
            and _const_int(s.min) == 0
            and not s.annotations
        )

    def loop_head(self, s: For) -> str:
        if _const_int(s.min) == 0:
            args = [self.expr(s.extent)]
        else:
            args = [self.expr(s.min), self.end(s.min, s.extent)]
        if s.kind is ForKind.THREAD_BINDING:
            args = [self.expr(s.min), self.end(s.min, s.extent)]
            args.append(f"thread={json.dumps(s.thread_binding)}")
            fn = "T.thread_binding"
        elif s.kind is ForKind.SERIAL and not s.annotations:
            fn = "range"
        else:
            fn = _FOR_KIND[s.kind]
        if s.annotations:
            args.append(f"annotations={self.dict(s.annotations)}")
        return f"{fn}({', '.join(args)})"

    def stmt_BlockRealize(self, s: BlockRealize) -> None:
        self.block(s.block, s)

    def stmt_Block(self, s: Block) -> None:
        self.block(s, None)

    def block(self, b: Block, realize: BlockRealize | None) -> None:
        self.emit(f"with T.block({json.dumps(b.name_hint)}):")
        self.depth += 1
        self.axes(b, realize)
        if realize is not None and not _is_true(realize.predicate):
            self.emit(f"T.where({self.expr(realize.predicate)})")
        self.emit(f"T.reads({', '.join(self.region(r) for r in b.reads)})")
        self.emit(f"T.writes({', '.join(self.region(r) for r in b.writes)})")
        if b.annotations:
            self.emit(f"T.block_attr({self.dict(b.annotations)})")
        self.block_contents(b)
        self.depth -= 1

    def block_contents(self, b: Block) -> None:
        for buf in b.alloc_buffers:
            self.alloc_buffer(buf)
        if b.init is not None:
            self.emit("with T.init():")
            self.body(b.init)
        self.stmt(b.body)

    def alloc_buffer(self, b: Buffer) -> None:
        scope = "" if b.scope == "global" else f", scope={json.dumps(b.scope)}"
        shape = self.shape(b.shape)
        self.emit(f"{self.name(b)} = T.alloc_buffer({shape}, {json.dumps(b.dtype)}{scope})")

    def axes(self, b: Block, realize: BlockRealize | None) -> None:
        if realize is not None and self.remappable(b, realize):
            lhs = ", ".join(self.name(iv.var) for iv in b.iter_vars)
            kinds = "".join(_AXIS_KIND[iv.iter_type][1] for iv in b.iter_vars)
            rhs = ", ".join(self.expr(v) for v in realize.iter_values)
            self.emit(f"{lhs} = T.axis.remap({json.dumps(kinds)}, [{rhs}])")
            return
        for k, iv in enumerate(b.iter_vars):
            kind = _AXIS_KIND.get(iv.iter_type, ("opaque", "O"))[0]
            if _const_int(iv.dom.min) == 0:
                dom = self.expr(iv.dom.extent)
            else:
                dom = f"({self.expr(iv.dom.min)}, {self.end(iv.dom.min, iv.dom.extent)})"
            args = [dom] if realize is None else [dom, self.expr(realize.iter_values[k])]
            self.emit(f"{self.name(iv.var)} = T.axis.{kind}({', '.join(args)})")

    def remappable(self, b: Block, realize: BlockRealize) -> bool:
        if not b.iter_vars:
            return False
        seen = set()
        for iv, value in zip(b.iter_vars, realize.iter_values):
            if iv.iter_type not in (IterType.DATA_PAR, IterType.COMM_REDUCE):
                return False
            if not isinstance(value, E.Var) or value in seen or value not in self.loop_dom:
                return False
            seen.add(value)
            lo, ext = self.loop_dom[value]
            if _const_int(lo) != 0 or _const_int(iv.dom.min) != 0:
                return False
            if iv.var.dtype != value.dtype:
                return False
            same = iv.dom.extent is ext or (
                _const_int(ext) is not None and _const_int(iv.dom.extent) == _const_int(ext)
            )
            if not same:
                return False
        return True

    # ------------------------------------------------------------------ functions
    def func(self, f: PrimFunc, name: str) -> None:
        params = ", ".join(f"{self.name(b)}: {self.buffer_type(b)}" for b in f.params)
        self.emit("@T.prim_func")
        self.emit(f"def {_sanitize(name, 'main')}({params}):")
        self.depth += 1
        shape_vars = _ShapeVars()
        for b in f.params:
            shape_vars.visit(b.shape)
        for v in shape_vars.found:
            self.emit(f"{self.name(v)} = T.{v.dtype}()")
        attrs = {k: v for k, v in f.attrs.items() if k != "global_symbol"}
        if attrs:
            self.emit(f"T.func_attr({self.dict(attrs)})")
        body = f.body
        if isinstance(body, BlockRealize) and self.trivial_root(body):
            self.emit('# with T.block("root"):')
            self.block_contents(body.block)
        else:
            self.stmt(body)
        self.depth -= 1

    @staticmethod
    def trivial_root(r: BlockRealize) -> bool:
        b = r.block
        return (
            b.name_hint == "root"
            and not b.iter_vars
            and _is_true(r.predicate)
            and not b.reads
            and not b.writes
            and b.init is None
            and not b.annotations
        )

    def module(self, mod: IRModule) -> str:
        lines = [
            "# from metaschedule.script import ir as I",
            "# from metaschedule.script import tir as T",
            "",
            "@I.ir_module",
            "class Module:",
        ]
        for k, (name, f) in enumerate(mod.items()):
            if k:
                lines.append("")
            p = _Printer()
            p.depth = 1
            if isinstance(f, PrimFunc):
                p.func(f, name)
            else:
                p.emit(f"{name} = {script(f)}")
            lines.extend(p.lines)
        return "\n".join(lines)


class _ShapeVars(Visitor):
    """Variables of buffer shapes, in first-seen order."""

    def __init__(self) -> None:
        self.found: list[E.Var] = []
        self._seen: set[E.Var] = set()

    def visit_Var(self, v: E.Var) -> None:
        if v not in self._seen:
            self._seen.add(v)
            self.found.append(v)
