"""Loads made once per loop, or once per iteration, and kept in registers.

A register tile (:mod:`.c_accumulate`) whose reduction steps are all written out reads,
on each iteration of the serial loop around it, the same few vectors of one operand.
TVM's best schedule of a 127 x 511 x 255 matmul, after
:func:`.c_vector.vectorize_outputs`::

    for k_0 in range(73):
      for i_2 in range(127):                       # the loop L: the rows
        acc = load(&C[i_2, 0]);  acc_1 = C[i_2, 16];
        acc = acc + bcast(A[i_2, 7 * k_0]) * load(&B[7 * k_0, 0]);
        acc_1 = acc_1 + A[i_2, 7 * k_0] * B[7 * k_0, 16];
        ...                                         # 7 steps of k_1, written out
        store(&C[i_2, 0], acc);  C[i_2, 16] = acc_1;

reads a 7 x 17 panel of ``B`` (7 vectors and 7 scalars) for every row, and each element
of ``A`` twice, as a broadcast and as a scalar. LLVM's loop-invariant code motion gives
TVM the panel in 14 registers before the row loop, and it broadcasts each ``A`` once
into a register whose first lane serves the scalar update; GCC folds every one of those
loads into its multiply-add, 30 loads a row where LLVM makes 9. On this loop, bound by
loads, that ran at 0.37x TVM (47 against 126 GFLOPS, one thread).

Here the code generator does both itself. Each :class:`InvariantScope` is a serial C
loop being emitted. A load in a register tile's code written out straight inside it (no
C loop between them: every loop in between written out, every vector chunk at a
constant offset) is put in a variable pinned in a register
(:meth:`InvariantScope.value`), when, after those constants are put into its offset,

* the offset uses only variables bound outside the loop: the load is made once, before
  the loop (the ``B`` panel);
* or it uses the loop's own variable too and is broadcast to a vector: the broadcast is
  made once per iteration, at the top of the body, and a scalar use of the same element
  reads its first lane (``A``; not in the straight-line blocks of
  :func:`.c_accumulate.straight_line`, which share their loads themselves).

Either is safe when every iteration of the loop makes the load: the loop has a constant
extent of at least one, its body no condition (``if``, ``select``, ``&&``, ``||``) and no
loop of a non-constant or zero extent; and when the loop writes no element of the buffer.
Hoisted values and the tile's accumulators together take at most
:data:`MAX_INVARIANT_SHARE` of the target's vector registers, so that the tile does not
spill. Code is written only once it is known to be writable (vector code and register
tiles are checked first, on a writer that keeps nothing), so every hoisted value is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..tir import expr as E
from ..tir.buffer import Buffer
from ..tir.dtype import c_type, is_bool
from ..tir.functor import any_node, collect_vars, post_order_visit, substitute
from ..tir.stmt import BufferStore, For, IfThenElse
from .c_helpers import c_comment_text
from .c_ir import access_key

if TYPE_CHECKING:
    from .c_writer import CpuEmitter

#: Whether loads are hoisted out of the loops around register tiles (see the module
#: docstring). The analytic prior (``cost_model/prior.py``, ``_invariant_loads``) counts
#: the loads saved.
HOIST_INVARIANT_LOADS = True
#: Share of the vector registers that hoisted values and a tile's accumulators may take
#: together (the rest: the temporaries of the updates).
MAX_INVARIANT_SHARE = 0.75

__all__ = ["HOIST_INVARIANT_LOADS", "MAX_INVARIANT_SHARE", "InvariantScope", "SharedPlan"]


def _registers(fw: CpuEmitter) -> int:
    """Registers hoisted values and accumulators may take on ``fw``'s target: a share of
    its ISA's vector registers."""
    return int(fw.isa.vector_registers * MAX_INVARIANT_SHARE)


@dataclass
class _Hoisted:
    """A load made before the loop."""

    name: str
    buffer: Buffer
    indices: tuple[E.PrimExpr, ...]  # constants put in; a vector's first lane
    lanes: int
    broadcast: bool  # a scalar broadcast to ``lanes``


@dataclass
class _Shared:
    """An element broadcast in the loop's body, and the widths it is read at (1: as a
    scalar). Each use is written inline, unless the scope's plan (``shares``) gives it a
    variable: an element read both as a vector and as a scalar (see :class:`SharedPlan`)."""

    token: int
    buffer: Buffer
    indices: tuple[E.PrimExpr, ...]  # constants put in
    widths: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class SharedPlan:
    """The elements of each scope broadcast once at the top of its loop's body (read there
    both as vectors and as scalars, within the register budget): ``scopes[k]`` holds
    ``(token, variable, lanes)`` for the ``k``-th scope opened while writing the function
    (in the order :meth:`.c_codegen.FunctionWriter._loop` opens them).

    Which elements these are depends on the code written around them (the register
    tile's points, the vector chunks, the steps written out), so the plan comes from
    writing the function once without it (:meth:`InvariantScope.close` records what it
    decides); the function is then written with it, each use spelled as decided.
    """

    scopes: tuple[tuple[int, tuple[tuple[int, str, int], ...]], ...] = ()


@dataclass
class InvariantScope:
    """A serial loop being emitted and the loads hoisted out of it so far.

    Attributes:
        loop: the loop.
        outer: the variables bound outside it.
        lines: the list its header was written to; ``at``: the position before the
            header (and any pragma), at ``indent``; ``body_at``: the position of the
            first line of its body.
    """

    loop: For
    outer: frozenset[E.Var]
    lines: list[str]
    at: int
    indent: int
    body_at: int = -1
    hoisted: dict[tuple, _Hoisted] = field(default_factory=dict)
    shared: dict[tuple, _Shared] = field(default_factory=dict)
    accumulators: int = 0  # most accumulators live in the body
    _safe: bool | None = None
    # the plan of the shared broadcasts (token -> variable, lanes; None: not known yet,
    # every use inline) and what close() decides
    shares: dict[int, tuple[str, int]] | None = None
    index: int = -1  # the order the writer opened it in (SharedPlan)
    decided: dict[int, tuple[str, int]] = field(default_factory=dict)
    _written: set[Buffer] = field(default_factory=set)

    def safe(self) -> bool:
        """Whether every iteration of the loop runs every load in its body (see the
        module docstring), computed once."""
        if self._safe is None:
            loop = self.loop
            ok = isinstance(loop.extent, E.IntImm) and loop.extent.value >= 1

            def bad(node) -> bool:
                if isinstance(node, BufferStore):
                    self._written.add(node.buffer)
                    return False
                if isinstance(node, (IfThenElse, E.Select, E.And, E.Or)):
                    return True
                if isinstance(node, E.Call) and node.op == "if_then_else":
                    return True
                return isinstance(node, For) and not (
                    isinstance(node.extent, E.IntImm) and node.extent.value >= 1
                )

            # any_node stops at the first hit: when there is none it saw every store
            self._safe = ok and not any_node(loop.body, bad)
        return self._safe

    def writes(self, buffer: Buffer) -> bool:
        """Whether the loop stores into ``buffer`` (known once :meth:`safe` holds)."""
        return buffer in self._written

    def hoists_from(self, fw: CpuEmitter, loop: For) -> bool:
        """Whether ``loop`` (inside this scope's loop, in a register tile), written out,
        would read a load invariant in this scope's loop from straight-line code: worth
        writing it out (``c_codegen.EXPLICIT_TILE_STEPS``)."""
        if not HOIST_INVARIANT_LOADS or not self.safe():
            return False
        var = self.loop.loop_var
        between = [v for v in fw.ranges if v is not var and v not in self.outer]
        if any(v not in fw.known and v is not loop.loop_var for v in between):
            return False
        inner = {loop.loop_var} | set(fw.known)  # constants once written out
        post_order_visit(loop.body, lambda n: inner.add(n.loop_var) if isinstance(n, For) else None)
        allowed = self.outer | inner

        def invariant(n) -> bool:
            if not isinstance(n, E.BufferLoad) or n.buffer is fw.accumulated:
                return False
            if n.buffer in self._written:
                return False
            used = collect_vars(n.indices)
            return var not in used and used <= allowed

        return any_node(loop.body, invariant)

    def value(
        self, fw: CpuEmitter, load: E.BufferLoad, lanes: int, broadcast: bool = False
    ) -> str | None:
        """The C expression of ``load`` (see the module docstring): ``lanes`` of it from
        the element it names, or with ``broadcast`` the element in ``lanes`` lanes. None
        when it stays a plain load. Variables bound to constants in the code between the
        loop and the load (``fw.known``: written-out steps, vector chunks) count as those
        constants."""
        if not HOIST_INVARIANT_LOADS or is_bool(load.dtype):
            return None
        consts, var = fw.known, self.loop.loop_var
        if any(v not in consts for v in fw.ranges if v is not var and v not in self.outer):
            return None  # in a C loop inside this one: that loop's code, not straight-line

        indices = tuple(substitute(i, consts) for i in load.indices) if consts else load.indices
        used = collect_vars(indices)
        invariant = used <= self.outer
        if not invariant and not used <= self.outer | {var}:
            return None
        if not self.safe() or load.buffer in self._written:
            return None
        self.accumulators = max(self.accumulators, len(set(fw.accumulators.values())))
        elem = access_key(load.buffer, indices)
        if invariant:
            return self._hoist(fw, load, indices, elem, lanes, broadcast)
        shared = self.shared.get(elem)
        if broadcast and shared is None and fw.shared_loads is None:
            shared = self.shared[elem] = _Shared(len(self.shared), load.buffer, indices)
        if shared is None or not (broadcast or lanes == 1):
            return None
        shared.widths.add(lanes)
        # spelled inline first in any case: the helpers it needs come in the same order
        inline = f"{fw.buf_names[load.buffer]}[{fw.index(load.buffer, load.indices)}]"
        if broadcast:
            inline = f"{fw.helpers.vbroadcast(load.dtype, lanes)}({inline})"
        planned = self.shares.get(shared.token) if self.shares is not None else None
        if planned is not None and lanes in (1, planned[1]):
            return planned[0] if lanes > 1 else f"{planned[0]}[0]"
        return inline

    def _hoist(self, fw, load, indices, elem, lanes: int, broadcast: bool) -> str | None:
        """A load invariant in the loop, made before it."""
        got = self.hoisted.get((elem, lanes, broadcast))
        if got is not None:
            return got.name
        if lanes == 1:  # the first lane of a broadcast of the element
            for h in self.hoisted.values():
                if h.broadcast and access_key(h.buffer, h.indices) == elem:
                    return f"{h.name}[0]"
        # the registers of a straight-line block's shared loads count too
        if len(self.hoisted) + self.accumulators + len(fw.shared_decls) >= _registers(fw):
            return None
        name = fw.names.fresh(f"{load.buffer.name}_inv")
        self.hoisted[(elem, lanes, broadcast)] = _Hoisted(
            name, load.buffer, indices, lanes, broadcast
        )
        return name

    def close(self, fw: CpuEmitter) -> None:
        """Write the shared broadcasts at the top of the body, the hoisted loads before
        the loop."""
        name = c_comment_text(self.loop.loop_var.name)
        if self.shared:
            self._share(fw)
        if self.hoisted:
            pad = "  " * self.indent
            out = [f"{pad}// {len(self.hoisted)} loads invariant in loop {name}, in registers"]
            for h in self.hoisted.values():
                pin = fw.pin(h.name, h.buffer.dtype, h.lanes)
                out.append(f"{pad}{self._declare(fw, h, h.indices, h.lanes)} {pin}".rstrip())
            self.lines[self.at : self.at] = out

    def _share(self, fw: CpuEmitter) -> None:
        """Broadcasts read as vectors and as scalars made once at the top of the body,
        within the register budget (recorded in ``decided``); every other use stays
        inline. Written with a plan (``shares``), the uses were spelled as it decides,
        which is what is decided here again."""
        left = _registers(fw) - len(self.hoisted) - self.accumulators
        decls = []
        for sh in self.shared.values():
            wide = max(sh.widths)
            if left <= 0 or wide == 1 or 1 not in sh.widths:
                continue
            var = fw.names.fresh(f"{sh.buffer.name}_bc")
            h = _Hoisted(var, sh.buffer, sh.indices, wide, True)
            pin = fw.pin(var, sh.buffer.dtype, wide)
            decls.append(f"{self._declare(fw, h, sh.indices, wide)} {pin}".rstrip())
            self.decided[sh.token] = (var, wide)
            left -= 1
        if self.shares is not None and self.shares != self.decided:
            raise AssertionError(  # the plan was made by writing the same code
                f"loop {self.loop.loop_var.name}: planned shared broadcasts {self.shares}, "
                f"written {self.decided}"
            )
        if decls:
            pad = "  " * (self.indent + 1)
            head = f"{pad}// {len(decls)} elements broadcast once per iteration of "
            head += f"{c_comment_text(self.loop.loop_var.name)}, read as vectors and as scalars"
            self.lines[self.body_at : self.body_at] = [head] + [pad + d for d in decls]

    @staticmethod
    def _declare(fw: CpuEmitter, h: _Hoisted, indices, lanes: int) -> str:
        elem = f"{fw.buf_names[h.buffer]}[{fw.index(h.buffer, indices)}]"
        dtype = h.buffer.dtype
        if lanes == 1:
            return f"{c_type(dtype)} {h.name} = {elem};"
        vt = fw.helpers.vtype(dtype, lanes)
        if h.broadcast:
            return f"{vt} {h.name} = {fw.helpers.vbroadcast(dtype, lanes)}({elem});"
        return f"{vt} {h.name} = {fw.helpers.vload(dtype, lanes)}(&{elem});"
