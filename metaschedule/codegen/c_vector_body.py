"""The body of a vectorized loop as vector values (GCC vector extensions): loads and
stores of unit stride, gathers of a constant stride, broadcasts, lane-wise arithmetic,
comparisons, selects, casts and math calls; see :mod:`.c_vector` for the loop around it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import c_type, is_bool, is_float, is_int, nbytes
from ..tir.functor import Visitor, collect_vars
from ..tir.stmt import BufferStore, Evaluate, For, IfThenElse, SeqStmt, Stmt
from ..tir.transform.affine import const_bounds
from .c_expr import linear_form, strip_parens
from .c_ir import access_key, has_load, value_key

if TYPE_CHECKING:
    from .c_writer import VectorEmitter

__all__ = ["NotVectorizable", "VectorBody"]


class NotVectorizable(Exception):
    """The loop body cannot be written with vector values; the message says why."""


@dataclass(frozen=True)
class _Val:
    """A value in vector context: scalar C code, a vector of ``dtype``, or a lane mask."""

    code: str
    kind: str  # "scalar" | "vec" | "mask"
    dtype: str = ""
    bits: int = 0
    src: E.PrimExpr | None = None  # a scalar's expression (its broadcast may be shared)


class VectorBody:
    """The body of a vectorized loop written with vector values, one chunk of lanes at a
    time (:meth:`emit`); raises :class:`NotVectorizable` where it cannot be."""

    def __init__(self, fw: VectorEmitter, loop: For) -> None:
        self.fw, self.h, self.v, self.body = fw, fw.helpers, loop.loop_var, loop.body
        self._dep: dict[int, bool] = {}
        self.lanes = 0
        self.start: int | None = None  # the chunk's first lane; None inside a C loop
        self.guarded = 0  # inside an if or a select: loads there may not run

    def emit(self, lanes: int, start: int | None = None) -> None:
        self.lanes, self.start = lanes, start
        self.stmt(self.body)

    # statements ---------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        fw = self.fw
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, BufferStore):
            acc = fw.accumulator(s.buffer, s.indices)
            if acc is not None and acc in fw.lane_sums:
                self._lane_sum(fw.lane_sums[acc], s)
                return
            if acc is not None:
                fw.line(f"{acc} = {self.as_vec(self.expr(s.value), s.buffer.dtype)};")
                return
            self._contiguous(s.buffer, s.indices)
            ptr = f"&{fw.buf_names[s.buffer]}[{fw.index(s.buffer, s.indices)}]"
            if is_bool(s.buffer.dtype):  # bytes of 0/1 from a mask of -1/0
                store = self.h.vstore("int8", self.lanes)
                mask = self.as_mask(self.expr(s.value), 8)
                fw.line(f"{store}((int8_t*){ptr}, -{mask});")
            else:
                value = self.as_vec(self.expr(s.value), s.buffer.dtype)
                fw.line(f"{self.h.vstore(s.buffer.dtype, self.lanes)}({ptr}, {value});")
        elif isinstance(s, IfThenElse):
            if self.depends(s.condition):
                raise NotVectorizable("an if condition depends on the vectorized variable")
            fw.line(f"if ({strip_parens(fw.expr(s.condition))}) {{")
            fw.indent += 1
            self.guarded += 1
            self.stmt(s.then_case)
            fw.indent -= 1
            if s.else_case is not None:
                fw.line("} else {")
                fw.indent += 1
                self.stmt(s.else_case)
                fw.indent -= 1
            self.guarded -= 1
            fw.line("}")
        elif isinstance(s, Evaluate) and isinstance(s.value, (E.IntImm, E.FloatImm)):
            pass
        else:
            raise NotVectorizable(f"the body contains a {type(s).__name__}")

    def _lane_sum(self, vacc: str, s: BufferStore) -> None:
        """``acc = acc + value`` summed lane-wise into the vector ``vacc``."""
        value = s.value
        if not isinstance(value, E.Add):
            raise NotVectorizable(f"{s.buffer.name} is not updated by a sum")
        fw = self.fw
        for mine, other in ((value.a, value.b), (value.b, value.a)):
            if isinstance(mine, E.BufferLoad) and mine.buffer is s.buffer:
                if fw.accumulator(mine.buffer, mine.indices) is None:
                    break
                term = self.as_vec(self.expr(other), s.buffer.dtype)
                fw.line(f"{vacc} = {vacc} + {term};")
                return
        raise NotVectorizable(f"{s.buffer.name} is not updated by a sum of itself")

    def _stride(self, buf: Buffer, indices) -> int:
        """The constant element stride of an access between lanes; raises if it has none."""
        form = linear_form(buf, indices)
        if form.without(self.v).uses(self.v):
            raise NotVectorizable(f"access to {buf.name} is not affine in the vector lanes")
        return form.coef(self.v)

    def _contiguous(self, buf: Buffer, indices) -> None:
        form = linear_form(buf, indices)
        if form.coef(self.v) != 1 or form.without(self.v).uses(self.v):
            raise NotVectorizable(f"access to {buf.name} is not unit-stride in the vector lanes")

    # expressions --------------------------------------------------------------------
    def depends(self, e: E.PrimExpr) -> bool:
        hit = self._dep.get(id(e))
        if hit is None:
            hit = self._dep[id(e)] = self.v in collect_vars(e)
        return hit

    def expr(self, e: E.PrimExpr) -> _Val:
        if not self.depends(e):
            if isinstance(e, E.BufferLoad) and not self.guarded:
                # broadcast once per loop or iteration of the loop around (c_invariant)
                shared = self.fw.invariant_load(e, self.lanes, broadcast=True)
                if shared is not None:
                    return _Val(shared, "vec", e.dtype)
            return _Val(self.fw.expr(e), "scalar", e.dtype, src=e)
        if e is self.v:
            iota = self.h.viota(e.dtype, self.lanes)
            return _Val(f"({self.fw.var_names[e]} + {iota}())", "vec", e.dtype)
        if isinstance(e, E.BufferLoad):
            acc = self.fw.accumulator(e.buffer, e.indices)
            if acc is not None:
                return _Val(acc, "vec", e.dtype)
            stride = self._stride(e.buffer, e.indices)
            ptr = f"&{self.fw.buf_names[e.buffer]}[{self.fw.index(e.buffer, e.indices)}]"
            if stride != 1 and not is_bool(e.dtype):
                # a constant stride (a transposed operand): gather the lanes one by one
                vt = self.h.vtype(e.dtype, self.lanes)
                lanes = ", ".join(f"ms_p[{k * stride}]" for k in range(self.lanes))
                return _Val(
                    f"({{ const {c_type(e.dtype)}* ms_p = {ptr}; ({vt}){{{lanes}}}; }})",
                    "vec",
                    e.dtype,
                )
            self._contiguous(e.buffer, e.indices)
            if is_bool(e.dtype):  # bytes of 0/1 become a mask of -1/0
                load, zero = self.h.vload("int8", self.lanes), self.h.vbroadcast("int8", self.lanes)
                return _Val(f"({load}((const int8_t*){ptr}) != {zero}(0))", "mask", bits=8)
            hoisted = None if self.guarded else self.fw.invariant_load(e, self.lanes)
            if hoisted is not None:  # made before a loop it is invariant in (c_invariant)
                return _Val(hoisted, "vec", e.dtype)
            load = self.h.vload(e.dtype, self.lanes)
            return _Val(self._shared_load(e, f"{load}({ptr})"), "vec", e.dtype)
        if isinstance(e, E.Cast):
            return self._cast(e)
        if isinstance(e, E.CmpOp):
            if is_bool(e.a.dtype):
                raise NotVectorizable("comparison of bool values")
            a, b = self.as_vec(self.expr(e.a), e.a.dtype), self.as_vec(self.expr(e.b), e.b.dtype)
            op = "==" if isinstance(e, E.EQ) else "!=" if isinstance(e, E.NE) else e.symbol
            return _Val(f"({a} {op} {b})", "mask", bits=nbytes(e.a.dtype) * 8)
        if isinstance(e, (E.And, E.Or)):
            if self._unsafe_loads(e.b):
                raise NotVectorizable("a lazily evaluated and/or operand loads from memory")
            va, vb = self.expr(e.a), self.expr(e.b)
            bits = va.bits or vb.bits or 32
            op = "&" if isinstance(e, E.And) else "|"
            return _Val(
                f"({self.as_mask(va, bits)} {op} {self.as_mask(vb, bits)})", "mask", bits=bits
            )
        if isinstance(e, E.Not):
            va = self.expr(e.a)
            bits = va.bits or 32
            return _Val(f"(~{self.as_mask(va, bits)})", "mask", bits=bits)
        if isinstance(e, E.Select):
            return self._select(e)
        if isinstance(e, (E.Min, E.Max)):
            fn = self.h.vminmax(e.symbol, e.dtype, self.lanes)
            return _Val(f"{fn}({self._operands(e)})", "vec", e.dtype)
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            return self._floor_divmod(e)
        if isinstance(e, (E.Add, E.Sub, E.Mul, E.Div)):
            a, b = self.as_vec(self.expr(e.a), e.dtype), self.as_vec(self.expr(e.b), e.dtype)
            return _Val(f"({a} {e.symbol} {b})", "vec", e.dtype)
        if isinstance(e, E.Call) and is_float(e.dtype):
            fn = self.h.vcall(e.op, e.dtype, self.lanes, len(e.args))
            args = ", ".join(self.as_vec(self.expr(a), e.dtype) for a in e.args)
            return _Val(f"{fn}({args})", "vec", e.dtype)
        raise NotVectorizable(f"{type(e).__name__} on vector lanes")

    def _shared_load(self, e: E.BufferLoad, code: str) -> str:
        """A vector load made once per straight-line block of accumulator updates
        (``fw.shared_loads``, see :func:`.c_accumulate.straight_line`): the first use
        assigns a variable declared ahead of the block and pins it in a register (GCC
        would otherwise fold the load into every use again), later uses read it."""
        return self._shared((access_key(e.buffer, e.indices), self.lanes, self.start), e, code)

    def _shared_broadcast(self, x: _Val, dtype: str) -> str | None:
        """The broadcast of a loaded scalar (a conv's input pixel across its output
        channels) made once per straight-line block, as :meth:`_shared_load`; None when
        the block shares no broadcasts (``fw.shared_broadcasts``) or ``x`` loads nothing."""
        e = x.src
        if not self.fw.shared_broadcasts or e is None or not has_load(e):
            return None
        # keyed by value (a load by its element, an inlined padding guard by its affine
        # forms), however its indices were written out (the block stores no memory)
        code = f"{self.h.vbroadcast(dtype, self.lanes)}({x.code})"
        return self._shared(("bcast", value_key(e), dtype, self.lanes), e, code, dtype)

    def _shared_select(self, e: E.Select, code: str) -> str:
        """A guarded vector load (an inlined padding: ``cond ? X[...] : 0`` with a
        condition the same for every lane) made once per straight-line block, as
        :meth:`_shared_load`: a window's border tile reads each guarded input vector for
        up to nine updates, and the guard and the load are written once, keyed by value
        (the guard by its affine forms, however each step wrote its indices)."""
        if not has_load(e):
            return code
        return self._shared(("select", value_key(e), self.lanes, self.start), e, code)

    def _shared(self, key: tuple, e: E.PrimExpr, code: str, dtype: str = "") -> str:
        shared = self.fw.shared_loads
        if shared is None or self.start is None or self.guarded:
            return code
        name = shared.get(key)
        if name is None:
            name = shared[key] = self.fw.names.fresh("ms_ld")
            self.fw.shared_decls.append((self.h.vtype(dtype or e.dtype, self.lanes), name))
            pin = self.fw.pin(name, dtype or e.dtype, self.lanes)
            self.fw.line(f"{name} = {code}; {pin}".rstrip())
        return name

    def _operands(self, e: E.BinaryOp) -> str:
        return f"{self.as_vec(self.expr(e.a), e.dtype)}, {self.as_vec(self.expr(e.b), e.dtype)}"

    def _cast(self, e: E.Cast) -> _Val:
        x = self.expr(e.value)
        if is_bool(e.dtype):
            if x.kind == "mask":
                return x
            zero = self.h.vbroadcast(e.value.dtype, self.lanes)
            return _Val(
                f"({self.as_vec(x, e.value.dtype)} != {zero}(0))",
                "mask",
                bits=nbytes(e.value.dtype) * 8,
            )
        vt = self.h.vtype(e.dtype, self.lanes)
        if x.kind == "mask":  # true lanes are -1: negate to get 1
            return _Val(f"__builtin_convertvector(-{x.code}, {vt})", "vec", e.dtype)
        code = self.as_vec(x, e.value.dtype)
        src = e.value.dtype
        if is_int(src) and nbytes(src) == 1 and is_int(e.dtype) and nbytes(e.dtype) >= 4:
            # 8 -> 32 bits through 16: GCC 12 writes a one-step widening lane by lane
            # (a scalar sign extension per lane), the two steps as vpmovsxbw + vpmovsxwd
            mid = self.h.vtype("int16", self.lanes)  # holds every u8 and s8 value
            code = f"__builtin_convertvector({code}, {mid})"
        return _Val(f"__builtin_convertvector({code}, {vt})", "vec", e.dtype)

    def _select(self, e: E.Select) -> _Val:
        if is_bool(e.dtype):
            raise NotVectorizable("select of bool values")
        known = self.fw.known_guard(e.condition) if not self.depends(e.condition) else None
        if isinstance(known, bool):  # the loops' ranges decide it
            return self.expr(e.true_value if known else e.false_value)
        self.guarded += 1
        try:
            t = self.as_vec(self.expr(e.true_value), e.dtype)
            f = self.as_vec(self.expr(e.false_value), e.dtype)
        finally:
            self.guarded -= 1
        if known is not None:
            code = f"({self.fw.expr(known)} ? {t} : {f})"
            return _Val(self._shared_select(e, code), "vec", e.dtype)
        if self._unsafe_loads(e.true_value) or self._unsafe_loads(e.false_value):
            # the select may guard loads (padding): evaluating both sides must stay in bounds
            raise NotVectorizable(
                "a select with a lane-dependent condition guards loads that may be out of bounds"
            )
        mask = self.as_mask(self.expr(e.condition), nbytes(e.dtype) * 8)
        fn = self.h.vselect(e.dtype, self.lanes)
        return _Val(f"{fn}({mask}, {t}, {f})", "vec", e.dtype)

    def _floor_divmod(self, e: E.BinaryOp) -> _Val:
        div = isinstance(e, E.FloorDiv)
        a, b = self.as_vec(self.expr(e.a), e.dtype), self.as_vec(self.expr(e.b), e.dtype)
        if is_float(e.dtype):
            floor = self.h.vcall("floor", e.dtype, self.lanes, 1)
            q = f"{floor}({a} / {b})"
            return _Val(q if div else f"({a} - {q} * {b})", "vec", e.dtype)
        if is_int(e.dtype) and self.fw.nonneg(e.a) and isinstance(e.b, E.IntImm) and e.b.value > 0:
            return _Val(f"({a} {'/' if div else '%'} {b})", "vec", e.dtype)
        raise NotVectorizable("floor division of possibly negative lanes")

    def _unsafe_loads(self, e: E.PrimExpr) -> bool:
        """True if ``e`` has a load not provably in bounds over the enclosing loops."""
        unsafe = False
        ranges = self.fw.ranges

        class _V(Visitor):
            def visit_BufferLoad(self, load: E.BufferLoad) -> None:
                nonlocal unsafe
                for idx, dim in zip(load.indices, load.buffer.static_shape()):
                    b = const_bounds(idx, ranges)
                    unsafe = unsafe or b is None or b[0] < 0 or b[1] >= dim
                self.generic_visit(load)

        _V().visit(e)
        return unsafe

    # conversions --------------------------------------------------------------------
    def as_vec(self, x: _Val, dtype: str) -> str:
        if x.kind == "vec":
            return x.code
        if x.kind == "scalar":
            shared = self._shared_broadcast(x, dtype)
            return shared or f"{self.h.vbroadcast(dtype, self.lanes)}({x.code})"
        raise NotVectorizable("a lane mask used as a number")

    def as_mask(self, x: _Val, bits: int) -> str:
        mt = self.h.mask_type(bits, self.lanes)
        if x.kind == "mask":
            return x.code if x.bits == bits else f"__builtin_convertvector({x.code}, {mt})"
        if x.kind == "scalar":
            int_t = {8: "int8", 16: "int16", 32: "int32", 64: "int64"}[bits]
            return f"{self.h.vbroadcast(int_t, self.lanes)}(({x.code}) ? -1 : 0)"
        raise NotVectorizable("a number used as a lane mask")
