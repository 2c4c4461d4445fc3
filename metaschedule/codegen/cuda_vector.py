"""Vectorized loops in CUDA C: ``float2``/``float4`` (``half2``, ``int2``/``int4``) accesses.

A loop ``for v in T.vectorized(n)`` (n = 2 or 4; 8 for a float16 copy) whose body is one
store ``B[...] = f(A[...], ...)`` becomes a single vector store when every access that
depends on ``v`` is *contiguous and aligned*: its row-major offset is ``base + v`` with
``base`` provably a multiple of ``n``. Then ::

    *(float4*)(B + base_B) = *(float4*)(A + base_A);           // a copy
    { float4 a0 = *(float4*)(A + base_A); float4 r;            // an element-wise body
      r.x = f(a0.x); r.y = f(a0.y); ...; *(float4*)(B + base_B) = r; }

"Provably" is a small modular analysis of the offset (:func:`split_lane`): each
subexpression is known as ``rest + c * v`` with ``rest = q * k + r`` for an unknown
integer ``k``; ``floordiv``/``floormod`` by a constant keep the lane term when the known
residue leaves room for all lanes (the split-and-fuse indices cooperative fetch makes).
Buffer bases are aligned: global buffers come from ``cudaMalloc`` (256 bytes), shared
arrays are declared ``__align__(16)``. Register (``local``) arrays are left scalar.

Anything else (a strided or unaligned access, ``v`` outside a load, an inner loop) is the
plain ``#pragma unroll`` loop; the emulator runs both the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.functor import collect_vars, post_order_visit, substitute
from ..tir.stmt import BufferStore, For, ForKind, IfThenElse, Stmt
from .c_expr import linear_index, strip_parens

if TYPE_CHECKING:
    from .c_writer import CWriter

__all__ = ["emit_cuda_vectorized", "split_lane", "vector_type"]

_COMPONENTS = ("x", "y", "z", "w")
# (dtype, lanes) -> the CUDA vector type; element-wise bodies need the component names
_COPY_TYPES = {
    ("float32", 2): "float2",
    ("float32", 4): "float4",
    ("int32", 2): "int2",
    ("int32", 4): "int4",
    ("float16", 2): "half2",
    ("float16", 4): "uint2",
    ("float16", 8): "uint4",
}
_ELEMENTWISE = {("float32", 2), ("float32", 4), ("int32", 2), ("int32", 4), ("float16", 2)}


def vector_type(dtype: str, lanes: int) -> str | None:
    """The CUDA type moving ``lanes`` elements of ``dtype`` at once, if there is one."""
    return _COPY_TYPES.get((dtype, lanes))


@dataclass(frozen=True)
class _Lane:
    """``rest + coef * v``, where ``rest`` (free of ``v``) is ``q * k + r`` for some k."""

    rest: E.PrimExpr
    coef: int
    q: int  # 0: rest is the constant r
    r: int


def _known(rest: E.PrimExpr, coef: int, q: int, r: int) -> _Lane:
    q = abs(q)
    return _Lane(rest, coef, q, r % q if q else r)


def split_lane(e: E.PrimExpr, v: E.Var, lanes: int) -> _Lane | None:
    """``e`` as ``rest + c * v`` for ``0 <= v < lanes`` with what is known of ``rest``
    modulo an integer, or None when ``v`` enters in another way."""
    if isinstance(e, E.IntImm):
        return _Lane(e, 0, 0, e.value)
    if isinstance(e, E.Var):
        if e is v:
            return _Lane(E.const(0, e.dtype), 1, 0, 0)
        return _Lane(e, 0, 1, 0)
    return _with_lane(e, v, lanes)


def _with_lane(e: E.PrimExpr, v: E.Var, lanes: int) -> _Lane | None:
    if isinstance(e, (E.Add, E.Sub)):
        a, b = split_lane(e.a, v, lanes), split_lane(e.b, v, lanes)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, E.Add) else -1
        rest: E.PrimExpr = type(e)(a.rest, b.rest)
        return _known(rest, a.coef + sign * b.coef, math.gcd(a.q, b.q), a.r + sign * b.r)
    if isinstance(e, E.Mul):
        a, b = split_lane(e.a, v, lanes), split_lane(e.b, v, lanes)
        if a is None or b is None:
            return None
        if b.q == 0 and b.coef == 0:
            k = b.r
            return _known(E.Mul(a.rest, e.b), a.coef * k, a.q * k, a.r * k)
        if a.q == 0 and a.coef == 0:
            k = a.r
            return _known(E.Mul(e.a, b.rest), b.coef * k, b.q * k, b.r * k)
        if a.coef or b.coef:
            return None
        q = math.gcd(a.q * b.q, math.gcd(a.q * b.r, b.q * a.r))
        return _known(e, 0, q, a.r * b.r)
    if isinstance(e, (E.FloorDiv, E.FloorMod)) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        c = e.b.value
        a = split_lane(e.a, v, lanes)
        if a is None:
            return None
        if a.coef == 0:
            if isinstance(e, E.FloorMod):
                if a.q % c == 0:
                    return _known(e, 0, 0, a.r % c)
                g = math.gcd(a.q, c)
                return _known(e, 0, g, a.r)
            if a.q and a.q % c == 0:
                return _known(e, 0, a.q // c, a.r // c)
            if a.q == 0:
                return _known(e, 0, 0, a.r // c)
            return _Lane(e, 0, 1, 0)
        # rest + coef * v: the lanes stay inside one period of c?
        if a.coef < 0:
            return None
        rest = type(e)(a.rest, e.b)
        if a.q == 0 or a.q % c == 0:  # rest % c is known exactly
            low = a.r % c
            if low + a.coef * (lanes - 1) >= c:
                return None
            if isinstance(e, E.FloorDiv):
                return _known(rest, 0, a.q // c, a.r // c)
            return _known(rest, a.coef, 0, low)
        if c % a.q == 0:  # rest % c is one of r, r + q, ..., c - q + r
            if a.r % a.q + a.coef * (lanes - 1) >= a.q:
                return None
            if isinstance(e, E.FloorDiv):
                return _Lane(rest, 0, 1, 0)
            return _known(rest, a.coef, a.q, a.r)
        return None
    if v in collect_vars(e):
        return None
    return _Lane(e, 0, 1, 0)


def _aligned_base(buf: Buffer, indices, v: E.Var, lanes: int) -> E.PrimExpr | None:
    """The offset of ``buf[indices]`` at ``v = 0`` when it is ``base + v`` with ``base`` a
    multiple of ``lanes``; None otherwise."""
    if buf.scope not in ("global", "shared"):
        return None
    try:
        flat = linear_index(buf, tuple(indices))
    except ValueError:
        return None
    lane = split_lane(flat, v, lanes)
    if lane is None or lane.coef != 1:
        return None
    if lane.q % lanes or lane.r % lanes:
        return None
    zero = {v: E.const(0, v.dtype)}
    return linear_index(buf, tuple(substitute(i, zero) for i in indices))


def emit_cuda_vectorized(fw: CWriter, loop: For, name: str) -> bool:
    """Emit ``loop`` as one vector access per operand; False (nothing emitted) when it
    cannot be (see the module docstring)."""
    if loop.kind is not ForKind.VECTORIZED:
        return False
    if not (isinstance(loop.extent, E.IntImm) and E.is_const_int(loop.min, 0)):
        return False
    lanes, v = loop.extent.value, loop.loop_var
    body: Stmt = loop.body
    guard = None
    if isinstance(body, IfThenElse) and body.else_case is None:
        if v in collect_vars(body.condition):
            return False
        guard, body = body.condition, body.then_case
    if not isinstance(body, BufferStore):
        return False
    store = body
    vtype = vector_type(store.buffer.dtype, lanes)
    if vtype is None:
        return False
    dst = _aligned_base(store.buffer, store.indices, v, lanes)
    if dst is None:
        return False
    loads: list[E.BufferLoad] = []

    def visit(x) -> None:
        if isinstance(x, E.BufferLoad) and v in collect_vars(x):
            loads.append(x)

    post_order_visit(store.value, visit)
    bases = []
    for ld in loads:
        if ld.buffer.dtype != store.buffer.dtype:
            return False
        base = _aligned_base(ld.buffer, ld.indices, v, lanes)
        if base is None:
            return False
        bases.append(base)
    copy = isinstance(store.value, E.BufferLoad) and len(loads) == 1
    if not copy and (store.buffer.dtype, lanes) not in _ELEMENTWISE:
        return False
    # the body with its vector loads as component variables must not use v otherwise
    slots = [E.Var(f"__vec{i}", ld.dtype) for i, ld in enumerate(loads)]
    replaced = _replace_loads(store.value, loads, slots)
    if v in collect_vars(replaced):
        return False

    def ptr(buf: Buffer, base: E.PrimExpr) -> str:
        return f"*({vtype}*)({fw.buf_names[buf]} + {strip_parens(fw.expr(base))})"

    fw.line(f"// {name}: {lanes} lanes as one {vtype} access")
    if guard is not None:
        fw.line(f"if ({strip_parens(fw.expr(guard))}) {{")
        fw.indent += 1
    if copy:
        fw.line(f"{ptr(store.buffer, dst)} = {ptr(loads[0].buffer, bases[0])};")
    else:
        fw.line("{")
        fw.indent += 1
        names = []
        for ld, base in zip(loads, bases):
            nm = fw.names.fresh("vin")
            names.append(nm)
            fw.line(f"{vtype} {nm} = {ptr(ld.buffer, base)};")
        out = fw.names.fresh("vout")
        fw.line(f"{vtype} {out};")
        for lane in range(lanes):
            comp = _COMPONENTS[lane]
            for slot, nm in zip(slots, names):
                fw.var_names[slot] = f"{nm}.{comp}"
            value = substitute(replaced, {v: E.const(lane, v.dtype)})
            fw.line(f"{out}.{comp} = {strip_parens(fw.expr(value))};")
        for slot in slots:
            fw.var_names.pop(slot, None)
        fw.line(f"{ptr(store.buffer, dst)} = {out};")
        fw.indent -= 1
        fw.line("}")
    if guard is not None:
        fw.indent -= 1
        fw.line("}")
    return True


def _replace_loads(value: E.PrimExpr, loads: list[E.BufferLoad], slots: list[E.Var]):
    from ..tir.functor import Mutator

    table = {id(ld): s for ld, s in zip(loads, slots)}

    class _R(Mutator):
        def visit_BufferLoad(self, e):
            hit = table.get(id(e))
            return hit if hit is not None else self.generic_visit(e)

    return _R().visit(value)
