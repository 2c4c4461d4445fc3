"""``estimate_flops``: how many arithmetic operations a tensor program performs.

The task scheduler divides this by a measured latency to report GFLOPS. Each store's
value expression counts its arithmetic operations (``+ - * /``, min/max, comparisons,
selects, and math calls such as ``exp``: one each); index arithmetic is not counted, nor
are loads, stores and casts. A store counts once per execution: its count is multiplied
by the extents of the loops around it. So a matmul ``C[i, j] += A[i, k] * B[k, j]`` over
``n x m x k`` counts ``2 * n * m * k``, its zero-init nothing.

Loops with a non-constant extent count as one iteration, conditionals as their costlier
branch, and block predicates are ignored (an upper bound for partial tiles); the estimate
is meant for unscheduled workloads, where none of these occur.
"""

from __future__ import annotations

from .tir.expr import (
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    IntImm,
    Node,
    Not,
    PrimExpr,
    Select,
)
from .tir.function import IRModule, PrimFunc, as_module
from .tir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    SeqStmt,
    Stmt,
)

__all__ = ["estimate_flops"]


def estimate_flops(mod: IRModule | PrimFunc) -> float:
    """The number of arithmetic operations of every function of ``mod`` (see the module
    docstring for what counts)."""
    return float(sum(_stmt_ops(func.body) for func in as_module(mod).functions.values()))


def _stmt_ops(stmt: Stmt | None) -> int:
    if stmt is None:
        return 0
    if isinstance(stmt, BufferStore):
        return _expr_ops(stmt.value)
    if isinstance(stmt, For):
        extent = stmt.extent.value if isinstance(stmt.extent, IntImm) else 1
        return extent * _stmt_ops(stmt.body)
    if isinstance(stmt, SeqStmt):
        return sum(_stmt_ops(s) for s in stmt.seq)
    if isinstance(stmt, BlockRealize):
        return _stmt_ops(stmt.block)
    if isinstance(stmt, Block):
        return _stmt_ops(stmt.init) + _stmt_ops(stmt.body)
    if isinstance(stmt, IfThenElse):
        return max(_stmt_ops(stmt.then_case), _stmt_ops(stmt.else_case))
    if isinstance(stmt, Allocate):
        return _stmt_ops(stmt.body)
    if isinstance(stmt, Evaluate):
        return _expr_ops(stmt.value)
    raise TypeError(f"estimate_flops: unexpected statement {type(stmt).__name__}")


def _expr_ops(expr: Node) -> int:
    if isinstance(expr, BufferLoad):
        return 0  # indices are address arithmetic
    if isinstance(expr, BinaryOp):
        return 1 + _expr_ops(expr.a) + _expr_ops(expr.b)
    if isinstance(expr, Select):
        return 1 + sum(_expr_ops(e) for e in (expr.condition, expr.true_value, expr.false_value))
    if isinstance(expr, Call):
        return 1 + sum(_expr_ops(a) for a in expr.args if isinstance(a, PrimExpr))
    if isinstance(expr, Not):
        return 1 + _expr_ops(expr.a)
    if isinstance(expr, Cast):
        return _expr_ops(expr.value)
    return 0  # variables and constants
