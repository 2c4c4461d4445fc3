"""Turn a graph of te tensors into a schedulable PrimFunc (TVM's ``te.create_prim_func``).

Each compute becomes one block in a perfect nest of serial loops (one per spatial
axis, then one per reduction axis), all under the ``root`` block, in topological
order::

    for i, j, k in grid(128, 128, 128):
        with block("C"):
            v_i, v_j, v_k = axis.remap("SSR", [i, j, k])
            reads(A[v_i, v_k], B[v_k, v_j])
            writes(C[v_i, v_j])
            with init():
                C[v_i, v_j] = 0.0
            C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]

As in TVM, a reduction block does not list its own output among its reads, and
access regions are written in the block's iteration variables (``A[v_i - 1]`` for a
shifted access is a one-element region); several different accesses to one buffer
are merged into their bounding box when they differ by constants, else into the
whole dimension.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from typing import Any

from ..tir.access_check import check_expr_accesses
from ..tir.buffer import Buffer
from ..tir.expr import (
    Add,
    BufferLoad,
    IntImm,
    Mul,
    Node,
    PrimExpr,
    Reduce,
    Select,
    Sub,
    Var,
    const,
)
from ..tir.function import LAYOUT_FREE_BUFFERS, PrimFunc
from ..tir.functor import Visitor, substitute
from ..tir.stmt import (
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IterType,
    IterVar,
    Range,
    Stmt,
    seq,
    true,
)
from .tensor import (
    ComputeOp,
    Operation,
    PlaceholderOp,
    Tensor,
    as_tensor_list,
    neutral_element,
)

#: ``te.compute(..., attrs={LAYOUT_FREE_PLACEHOLDERS: [W]})``: ``W`` may be re-laid out
#: ahead of time (TVM's name); the function lists it in ``attrs["layout_free_buffers"]``.
LAYOUT_FREE_PLACEHOLDERS = "layout_free_placeholders"


def create_prim_func(tensors: Sequence[Tensor]) -> PrimFunc:
    """A PrimFunc computing every compute op the given tensors depend on.

    Args:
        tensors: the function's parameters, in order: every placeholder that is
            read, and the outputs. Computes not in the list become intermediate
            buffers allocated in the root block.

    A placeholder a compute names in ``attrs={"layout_free_placeholders": [W]}`` is
    listed, by parameter index, in the function's ``attrs["layout_free_buffers"]`` (as in
    TVM): the RewriteLayout postprocessor may then take it pre-packed.

    Raises:
        ValueError: a placeholder that is read but not listed, a tensor listed
            twice, or nothing to compute.
        IndexError: a compute reads outside the shape of a tensor for some point of
            its iteration domain (``B[i + 1]`` for ``i`` in ``[0, n)`` with ``B`` of
            shape ``(n,)``, or a reduce axis longer than the axis it reduces).
    """
    args = as_tensor_list(tensors)
    seen: set[int] = set()
    for t in args:
        if id(t) in seen:
            raise ValueError(f"tensor {t.name} appears twice in the argument list")
        seen.add(id(t))
    ops = _topo_order(args)
    arg_ops = {id(t.op) for t in args}
    missing = [op.name for op in ops if isinstance(op, PlaceholderOp) and id(op) not in arg_ops]
    if missing:
        raise ValueError(
            f"placeholder(s) {', '.join(missing)} are read but not in the argument list "
            f"[{', '.join(t.name for t in args)}]; pass every input tensor"
        )
    computes = [op for op in ops if isinstance(op, ComputeOp)]
    if not computes:
        raise ValueError("create_prim_func: the tensors compute nothing (only placeholders)")
    for op in computes:
        _check_accesses(op)

    used_names: set[str] = set()
    stmts = [_compute_to_nest(op, _unique(op.name, used_names)) for op in computes]
    allocs = tuple(op.output(0).buffer for op in computes if id(op) not in arg_ops)
    root = Block(
        iter_vars=(),
        reads=(),
        writes=(),
        name_hint="root",
        body=seq(*stmts),
        alloc_buffers=allocs,
    )
    body = BlockRealize((), true(), root)
    params = tuple(t.buffer for t in args)
    attrs: dict[str, Any] = {"global_symbol": "main", "tir.noalias": True}
    free = _layout_free_params(computes, args)
    if free:
        attrs[LAYOUT_FREE_BUFFERS] = free
    return PrimFunc(params, body, attrs)


def _layout_free_params(computes: list[ComputeOp], args: list[Tensor]) -> list[int]:
    """TVM's ``layout_free_buffers``: the indices of the parameters some compute lists in
    ``attrs["layout_free_placeholders"]`` (weights that may be re-laid out ahead of time)."""
    position = {id(t.op): j for j, t in enumerate(args) if isinstance(t.op, PlaceholderOp)}
    free: set[int] = set()
    for op in computes:
        for t in op.attrs.get(LAYOUT_FREE_PLACEHOLDERS) or ():
            if not isinstance(t, Tensor) or not isinstance(t.op, PlaceholderOp):
                raise TypeError(
                    f"te.compute '{op.name}': attrs['{LAYOUT_FREE_PLACEHOLDERS}'] must list "
                    f"placeholders, got {t!r}"
                )
            if id(t.op) in position:
                free.add(position[id(t.op)])
    return sorted(free)


def _check_accesses(op: ComputeOp) -> None:
    """Raise if a load of ``op``'s body provably leaves its tensor's shape."""
    ranges = {}
    for iv in (*op.axis, *op.reduce_axis):
        lo, extent = iv.dom.min, iv.dom.extent
        if isinstance(lo, IntImm) and isinstance(extent, IntImm) and extent.value > 0:
            ranges[iv.var] = (lo.value, lo.value + extent.value - 1)
    found = check_expr_accesses(list(op.body), ranges, f"te.compute '{op.name}'")
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise IndexError(
            f"{found[0].message()}{more}; fix the index or the shapes, or guard the access "
            "with te.if_then_else (as padding does)"
        )


def _topo_order(args: list[Tensor]) -> list[Operation]:
    """Operations reachable from ``args``, producers before consumers (DFS post-order)."""
    order: list[Operation] = []
    done: set[int] = set()
    for t in args:
        stack: list[tuple[Operation, int]] = [(t.op, 0)]
        while stack:
            op, child = stack.pop()
            if id(op) in done:
                continue
            inputs = op.input_tensors
            if child < len(inputs):
                stack.append((op, child + 1))
                if id(inputs[child].op) not in done:
                    stack.append((inputs[child].op, 0))
            else:
                done.add(id(op))
                order.append(op)
    return order


def _unique(name: str, used: set[str]) -> str:
    out, n = name, 0
    while out in used:
        n += 1
        out = f"{name}_{n}"
    used.add(out)
    return out


# ----------------------------------------------------------------------------- one block


def _compute_to_nest(op: ComputeOp, block_name: str) -> Stmt:
    out = op.output(0).buffer
    loops: list[tuple[Var, int]] = []
    iter_vars: list[IterVar] = []
    bindings: list[PrimExpr] = []
    vmap: dict[Var, PrimExpr] = {}
    for iv in (*op.axis, *op.reduce_axis):
        lo, extent = int(iv.dom.min), int(iv.dom.extent)
        loop_var = Var(iv.var.name, "int32")
        block_var = Var("v_" + iv.var.name, "int32")
        kind = IterType.DATA_PAR if iv.iter_type == IterType.DATA_PAR else IterType.COMM_REDUCE
        iter_vars.append(IterVar(block_var, Range(const(lo), const(extent)), kind))
        bindings.append(loop_var if lo == 0 else loop_var + lo)
        loops.append((loop_var, extent))
        vmap[iv.var] = block_var
    index = tuple(vmap[iv.var] for iv in op.axis)

    body_expr = op.body[0]
    if isinstance(body_expr, Reduce):
        source = substitute(body_expr.source, vmap)
        condition = substitute(body_expr.condition, vmap)
        if not (isinstance(condition, IntImm) and condition.value == 1):
            # mask with the neutral element, keeping the body ``C = combiner(C, rhs)`` that
            # reduction primitives (rfactor, cross-thread reduction) match
            source = Select(condition, source, neutral_element(body_expr.combiner))
        body: Stmt = BufferStore(out, body_expr.combiner(out.load(index), source), index)
        init: Stmt | None = BufferStore(out, body_expr.combiner.identity, index)
        reads = access_regions((condition, source))
    else:
        value = substitute(body_expr, vmap)
        body = BufferStore(out, value, index)
        init = None
        reads = access_regions(value)
    annotations = {k: v for k, v in op.attrs.items() if k != LAYOUT_FREE_PLACEHOLDERS}
    if op.tag:
        annotations["tag"] = op.tag
    block = Block(
        iter_vars=tuple(iter_vars),
        reads=reads,
        writes=(BufferRegion(out, tuple(Range(v, const(1)) for v in index)),),
        name_hint=block_name,
        body=body,
        init=init,
        annotations=annotations,
    )
    nest: Stmt = BlockRealize(tuple(bindings), true(), block)
    for loop_var, extent in reversed(loops):
        nest = For(loop_var, const(0), const(extent), ForKind.SERIAL, nest)
    return nest


# ----------------------------------------------------------------------------- regions


class _Loads(Visitor):
    def __init__(self):
        self.accesses: dict[Buffer, list[tuple[PrimExpr, ...]]] = {}

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.accesses.setdefault(node.buffer, []).append(node.indices)
        self.generic_visit(node)


def access_regions(expr: Any) -> tuple[BufferRegion, ...]:
    """The buffer regions read by ``expr``, one per buffer in order of first access."""
    loads = _Loads()
    loads.visit(expr)
    return tuple(
        BufferRegion(
            buf, tuple(_dim_region(buf, d, [ix[d] for ix in idx_list]) for d in range(buf.ndim))
        )
        for buf, idx_list in loads.accesses.items()
    )


def _dim_region(buf: Buffer, dim: int, indices: list[PrimExpr]) -> Range:
    full = Range(const(0, buf.shape[dim].dtype), buf.shape[dim])
    forms = []
    for e in indices:
        if _reads_memory(e):  # data-dependent index: anything may be read
            return full
        forms.append(_linear(e))
    offsets = [off for _, off in forms]
    if len({key for key, _ in forms}) != 1:
        return full
    lo = min(range(len(indices)), key=lambda n: offsets[n])
    return Range(indices[lo], const(max(offsets) - offsets[lo] + 1))


def _reads_memory(e: PrimExpr) -> bool:
    found = []

    class _F(Visitor):
        def visit_BufferLoad(self, node):
            found.append(node)

    _F().visit(e)
    return bool(found)


def _linear(e: PrimExpr) -> tuple[Any, int]:
    """Split ``e`` into (a key of its non-constant part, its constant offset).

    ``e`` is read as a sum of atoms times integer coefficients plus a constant; atoms
    are variables or any non-linear subexpression (compared structurally).
    """
    terms: dict[Any, int] = {}
    offset = 0

    def walk(x: PrimExpr, coeff: int) -> None:
        nonlocal offset
        if isinstance(x, IntImm):
            offset += coeff * x.value
        elif isinstance(x, Add):
            walk(x.a, coeff)
            walk(x.b, coeff)
        elif isinstance(x, Sub):
            walk(x.a, coeff)
            walk(x.b, -coeff)
        elif isinstance(x, Mul) and isinstance(x.b, IntImm):
            walk(x.a, coeff * x.b.value)
        elif isinstance(x, Mul) and isinstance(x.a, IntImm):
            walk(x.b, coeff * x.a.value)
        else:
            k = structural_key(x)
            terms[k] = terms.get(k, 0) + coeff

    walk(e, 1)
    return frozenset((k, c) for k, c in terms.items() if c != 0), offset


def structural_key(node: Any) -> Any:
    """A hashable key equal for structurally identical expressions (variables by identity)."""
    if isinstance(node, (Var, Buffer)):
        return (type(node).__name__, id(node))
    if isinstance(node, (tuple, list)):
        return tuple(structural_key(x) for x in node)
    if isinstance(node, enum.Enum):
        return node.value
    if isinstance(node, Node) and dataclasses.is_dataclass(node):
        return (type(node).__name__,) + tuple(
            structural_key(getattr(node, f.name)) for f in dataclasses.fields(node)
        )
    if isinstance(node, dict):
        return tuple(sorted((k, structural_key(v)) for k, v in node.items()))
    return node
