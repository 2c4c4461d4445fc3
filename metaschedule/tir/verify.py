"""Well-formedness of PrimFuncs: scoping of variables and buffers, shapes and dtypes.

``verify_well_formed(func_or_mod)`` raises :class:`IRVerifyError` on the first problem,
with a message that names the offending variable, buffer or block and shows the
printed enclosing block or loop.

Scoping follows TensorIR:

* a loop variable is visible in its loop's body; a block iteration variable in its
  block (iter-var domains excluded); the variables of the parameters' shapes
  (symbolic dimensions) everywhere;
* a block is isolated from the loops around it: its body, init and read/write
  regions may use its own iteration variables and loops inside it, but not the
  variables of enclosing loops or blocks, which reach it only through the
  BlockRealize bindings (and predicate). Bindings are evaluated outside the block,
  so they may use enclosing loops and the iteration variables of enclosing blocks
  (as ``blockize`` produces), never those of unrelated blocks;
* a buffer is visible if it is a parameter, in the ``alloc_buffers`` of an
  enclosing block, or allocated by an enclosing ``Allocate``.

Every load and store whose index provably leaves its buffer's shape for some point
of the iteration domain is an error (see :mod:`.access_check`; guarded and
data-dependent accesses are checked at run time instead). Coverage of accesses by a
block's declared read/write regions is a schedule concern and is not checked here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import expr as E
from .access_check import find_out_of_bounds
from .buffer import Buffer
from .dtype import is_bool, is_int
from .function import IRModule, PrimFunc
from .functor import post_order_visit
from .printer import script
from .stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterType,
    SeqStmt,
)

_CONTEXT_LINES = 12


class IRVerifyError(ValueError):
    """A PrimFunc is not well formed; the message shows where."""


def verify_well_formed(func_or_mod: PrimFunc | IRModule) -> None:
    """Check every PrimFunc of ``func_or_mod``; raise :class:`IRVerifyError` on the first error.

    Raises:
        IRVerifyError: naming what is wrong and showing the surrounding IR.
        TypeError: if the argument is neither a PrimFunc nor an IRModule.
    """
    if isinstance(func_or_mod, PrimFunc):
        _Verifier(func_or_mod, func_or_mod.attrs.get("global_symbol", "main")).run()
    elif isinstance(func_or_mod, IRModule):
        for name, func in func_or_mod.items():
            if not isinstance(func, PrimFunc):
                raise IRVerifyError(
                    f"module function {name!r} is a {type(func).__name__}, expected a PrimFunc"
                )
            _Verifier(func, name).run()
    else:
        raise TypeError(
            "verify_well_formed expects a PrimFunc or an IRModule, "
            f"got {type(func_or_mod).__name__}"
        )


verify = verify_well_formed


@dataclasses.dataclass
class _VarInfo:
    kind: str  # "loop", "block iter var" or "shape"
    depth: int  # block nesting depth at the definition
    owner: str  # human-readable definer


class _Verifier:
    def __init__(self, func: PrimFunc, name: str):
        self.func = func
        self.fname = name
        self.vars: dict[E.Var, _VarInfo] = {}
        self.buffers: dict[Buffer, str] = {}
        self.depth = 0
        self.stack: list[Any] = []  # enclosing For / BlockRealize / Block nodes

    # ------------------------------------------------------------------ errors
    def fail(self, what: str, node: Any = None) -> None:
        scopes = (For, BlockRealize, Block)
        target = next((n for n in reversed(self.stack) if isinstance(n, scopes)), None)
        if target is None:
            target = node if node is not None else self.func
        if isinstance(target, For):
            where = f"loop {target.loop_var.name}"
        elif isinstance(target, (BlockRealize, Block)):
            block = target.block if isinstance(target, BlockRealize) else target
            where = f'block "{block.name_hint}"'
        else:
            where = "the statement"
        lines = script(target).splitlines()
        if len(lines) > _CONTEXT_LINES:
            lines = lines[:_CONTEXT_LINES] + ["..."]
        shown = "\n".join("    " + ln for ln in lines)
        raise IRVerifyError(f"{what} (function {self.fname})\n  in {where}:\n{shown}")

    # ------------------------------------------------------------------ entry
    def run(self) -> None:
        for k, buf in enumerate(self.func.params):
            if not isinstance(buf, Buffer):
                self.fail(f"parameter {k} is a {type(buf).__name__}, expected a Buffer")
            if buf in self.buffers:
                self.fail(f"buffer {buf.name} is a parameter twice")
            self.buffers[buf] = "parameter"
        for buf in self.func.params:
            for v in _vars_of(buf.shape):
                self.vars.setdefault(v, _VarInfo("shape", -1, f"the shape of {buf.name}"))
        self.stmt(self.func.body)
        self.check_bounds()

    def check_bounds(self) -> None:
        found = find_out_of_bounds(self.func, self.fname)
        if found:
            v = found[0]
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            self.stack = [v.node] if v.node is not None else []
            self.fail(f"out-of-bounds access: {v.message()}{more}", v.node)

    # ------------------------------------------------------------------ statements
    def stmt(self, s: Any) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            self.fail(f"unexpected {type(s).__name__} where a statement was expected", s)
        method(s)

    def stmt_SeqStmt(self, s: SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def stmt_Evaluate(self, s: Evaluate) -> None:
        value = s.value
        if isinstance(value, (bool, int, float)):  # Evaluate(0) as a no-op: tolerated
            return
        self.expr(value, s)

    def stmt_IfThenElse(self, s: IfThenElse) -> None:
        self.expr(s.condition, s)
        if not is_bool(s.condition.dtype):
            self.fail(f"if condition {s.condition} has dtype {s.condition.dtype}, expected bool", s)
        self.stmt(s.then_case)
        if s.else_case is not None:
            self.stmt(s.else_case)

    def stmt_BufferStore(self, s: BufferStore) -> None:
        self.access(s.buffer, s.indices, "store", s)
        self.expr(s.value, s)
        if s.value.dtype != s.buffer.dtype:
            self.fail(
                f"store of a {s.value.dtype} value into {s.buffer.dtype} buffer {s.buffer.name}", s
            )

    def stmt_Allocate(self, s: Allocate) -> None:
        self.declare_buffer(s.buffer, "an Allocate", s)
        self.stmt(s.body)
        del self.buffers[s.buffer]

    def stmt_For(self, s: For) -> None:
        v = s.loop_var
        self.expr(s.min, s)
        self.expr(s.extent, s)
        if not is_int(v.dtype) or s.min.dtype != v.dtype or s.extent.dtype != v.dtype:
            self.fail(
                f"loop {v.name} has loop variable dtype {v.dtype} but min/extent dtypes "
                f"{s.min.dtype}/{s.extent.dtype}; all three must be the same integer type",
                s,
            )
        self.stack.append(s)
        self.define(v, "loop", f"loop {v.name}", s)
        self.stmt(s.body)
        del self.vars[v]
        self.stack.pop()

    def stmt_BlockRealize(self, s: BlockRealize) -> None:
        b = s.block
        self.stack.append(s)
        if len(s.iter_values) != len(b.iter_vars):
            self.fail(
                f"block {b.name_hint} has {len(b.iter_vars)} iter vars but "
                f"{len(s.iter_values)} bindings",
                s,
            )
        for iv, value in zip(b.iter_vars, s.iter_values):
            self.expr(value, s)
            if value.dtype != iv.var.dtype:
                self.fail(
                    f"iter var {iv.var.name} of block {b.name_hint} has dtype {iv.var.dtype} "
                    f"but is bound to {value} of dtype {value.dtype}",
                    s,
                )
        self.expr(s.predicate, s)
        if not is_bool(s.predicate.dtype):
            self.fail(f"predicate {s.predicate} of block {b.name_hint} is not bool", s)
        self.block(b)
        self.stack.pop()

    def stmt_Block(self, b: Block) -> None:
        self.stack.append(b)
        if b.iter_vars:
            self.fail(f"block {b.name_hint} has iter vars but no BlockRealize binding them", b)
        self.block(b)
        self.stack.pop()

    def block(self, b: Block) -> None:
        name = b.name_hint
        has_reduce = False
        for iv in b.iter_vars:
            v = iv.var
            if not is_int(v.dtype):
                self.fail(f"iter var {v.name} of block {name} has non-integer dtype {v.dtype}", b)
            for e in (iv.dom.min, iv.dom.extent):
                self.shape_expr(e, f"the domain of iter var {v.name} of block {name}", b)
            ext = iv.dom.extent
            if isinstance(ext, E.IntImm) and ext.value <= 0:
                self.fail(f"iter var {v.name} of block {name} has empty domain extent {ext}", b)
            if iv.iter_type not in (
                IterType.DATA_PAR,
                IterType.COMM_REDUCE,
                IterType.ORDERED,
                IterType.OPAQUE,
            ):
                self.fail(f"iter var {v.name} of block {name} has kind {iv.iter_type.name}", b)
            has_reduce |= iv.iter_type is IterType.COMM_REDUCE
        if b.init is not None and not has_reduce:
            self.fail(f"block {name} has an init statement but no reduction iter var", b)
        self.depth += 1
        for iv in b.iter_vars:
            self.define(iv.var, "block iter var", f"block {name}", b)
        for buf in b.alloc_buffers:
            self.declare_buffer(buf, f"block {name}", b)
        for kind, regions in (("read", b.reads), ("write", b.writes)):
            for r in regions:
                self.region(r, kind, b)
        if b.init is not None:
            self.stmt(b.init)
        self.stmt(b.body)
        for buf in b.alloc_buffers:
            del self.buffers[buf]
        for iv in b.iter_vars:
            del self.vars[iv.var]
        self.depth -= 1

    def region(self, r: BufferRegion, kind: str, block: Block) -> None:
        if r.buffer not in self.buffers:
            self.fail(
                f"block {block.name_hint} declares a {kind} of buffer {r.buffer.name}, which is "
                "neither a parameter nor allocated by an enclosing block or Allocate",
                block,
            )
        if len(r.region) != r.buffer.ndim:
            self.fail(
                f"{kind} region of buffer {r.buffer.name} in block {block.name_hint} has "
                f"{len(r.region)} ranges for {r.buffer.ndim} dimensions",
                block,
            )
        for rng in r.region:
            for e in (rng.min, rng.extent):
                self.expr(e, block)
                if not is_int(e.dtype):
                    self.fail(
                        f"{kind} region of buffer {r.buffer.name} has non-integer bound {e}", block
                    )

    # ------------------------------------------------------------------ definitions
    def define(self, v: E.Var, kind: str, owner: str, node: Any) -> None:
        old = self.vars.get(v)
        if old is not None:
            self.fail(
                f"{kind} variable {v.name} of {owner} is already defined by {old.owner} "
                "in an enclosing scope",
                node,
            )
        self.vars[v] = _VarInfo(kind, self.depth, owner)

    def declare_buffer(self, buf: Buffer, owner: str, node: Any) -> None:
        if buf in self.buffers:
            self.fail(
                f"buffer {buf.name} allocated by {owner} is already declared "
                f"(by {self.buffers[buf]})",
                node,
            )
        for e in buf.shape:
            self.shape_expr(e, f"the shape of buffer {buf.name}", node)
        self.buffers[buf] = owner

    def shape_expr(self, e: E.PrimExpr, what: str, node: Any) -> None:
        for v in _vars_of(e):
            info = self.vars.get(v)
            if info is None or info.kind != "shape":
                self.fail(
                    f"{what} uses variable {v.name}; only constants and the symbolic "
                    "dimensions of parameters are allowed there",
                    node,
                )
        if not is_int(e.dtype):
            self.fail(f"{what} is {e} of non-integer dtype {e.dtype}", node)

    # ------------------------------------------------------------------ expressions
    def access(self, buf: Buffer, indices: tuple, kind: str, node: Any) -> None:
        if buf not in self.buffers:
            self.fail(
                f"{kind} of buffer {buf.name}, which is neither a parameter nor allocated "
                "by an enclosing block or Allocate",
                node,
            )
        if len(indices) != buf.ndim:
            self.fail(
                f"{kind} of buffer {buf.name} with {len(indices)} indices; it has "
                f"{buf.ndim} dimensions",
                node,
            )
        for i in indices:
            if not is_int(i.dtype):
                self.fail(f"index {i} of buffer {buf.name} has non-integer dtype {i.dtype}", node)
            self.expr(i, node)

    def expr(self, root: E.PrimExpr, node: Any) -> None:
        todo = [root]
        while todo:
            e = todo.pop()
            if isinstance(e, E.Var):
                self.use(e, node)
            elif isinstance(e, E.BufferLoad):
                self.access(e.buffer, e.indices, "load", node)
            elif isinstance(e, E.Reduce):
                self.fail(
                    f"reduction {e} inside a PrimFunc; Reduce is only valid in a "
                    "te.compute body (lower it with te.create_prim_func)",
                    node,
                )
            elif isinstance(e, E.PrimExpr):
                for f in dataclasses.fields(e):
                    if f.init:
                        child = getattr(e, f.name)
                        if isinstance(child, E.PrimExpr):
                            todo.append(child)
                        elif isinstance(child, tuple):
                            todo.extend(c for c in child if isinstance(c, E.PrimExpr))
            else:
                self.fail(f"unexpected {type(e).__name__} where an expression was expected", node)

    def use(self, v: E.Var, node: Any) -> None:
        info = self.vars.get(v)
        if info is None:
            self.fail(
                f"variable {v.name} is used but not defined: it is not a loop variable, "
                "block iter var or symbolic dimension in scope here",
                node,
            )
        if info.kind != "shape" and info.depth < self.depth:
            block = next(
                (n for n in reversed(self.stack) if isinstance(n, (BlockRealize, Block))), None
            )
            bname = (block.block if isinstance(block, BlockRealize) else block).name_hint
            self.fail(
                f"{info.kind} variable {v.name} of {info.owner} is used inside block {bname}; "
                "a block must reach enclosing loops and blocks through its iter var bindings",
                node,
            )


def _vars_of(node: Any) -> list[E.Var]:
    found: list[E.Var] = []
    seen: set[E.Var] = set()

    def f(n):
        if isinstance(n, E.Var) and n not in seen:
            seen.add(n)
            found.append(n)

    post_order_visit(node, f)
    return found
