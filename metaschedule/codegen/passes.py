"""The TIR-to-TIR passes the C code generator runs on a lowered function body, in order.

Each pass maps a body to a body that computes the same (checkable with the interpreter);
:data:`PASSES` lists them and :func:`run_passes` runs the enabled ones. The plan
(:mod:`.plan`) and the emitter (:mod:`.c_codegen`) read the body they return, and so does
the analytic prior, which must see the loops the emitter writes.

1. ``auto_vectorize`` (:func:`.c_autovector.vectorize_scalar_nests`): a scalar nest gets a
   vector loop where a unit-stride loop can move innermost.
2. ``widen_vector_loops`` (:func:`.c_autovector.widen_vector_loops`): a vector loop
   narrower than the register takes in the loop around it.
3. ``version_guards`` (:func:`.c_versioning.version_guards`): a guarded body gets an
   unguarded copy for the interior.

Two more rewrites of the same kind happen per loop while a function is written, because
whether they apply depends on the register tile planned there: a fused vectorized loop is
split back in two (:func:`.c_ir.unfuse`), and a serial loop over a reduction is vectorized
over its outputs (:func:`.c_vector.vectorize_outputs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..tir.stmt import Stmt
from .c_autovector import vectorize_scalar_nests, widen_vector_loops
from .c_versioning import version_guards
from .isa import CpuIsa

__all__ = ["PASSES", "Pass", "PassContext", "run_passes"]


@dataclass(frozen=True)
class PassContext:
    """What the passes read: the ISA, the switches that turn passes off, and whether the
    code is bounds-checked (debug code checks its accesses one by one: no vector loops
    are made for it)."""

    isa: CpuIsa
    auto_vectorize: bool = True
    version_guards: bool = True
    debug: bool = False


@dataclass(frozen=True)
class Pass:
    """A named rewrite of a function body, and when it runs."""

    name: str
    run: Callable[[Stmt, PassContext], Stmt]
    enabled: Callable[[PassContext], bool]


PASSES: tuple[Pass, ...] = (
    Pass(
        "auto_vectorize",
        lambda body, ctx: vectorize_scalar_nests(body),
        lambda ctx: ctx.auto_vectorize and not ctx.debug,
    ),
    Pass(
        "widen_vector_loops",
        lambda body, ctx: widen_vector_loops(body, ctx.isa.vector_bytes),
        lambda ctx: ctx.auto_vectorize and not ctx.debug,
    ),
    Pass("version_guards", lambda body, ctx: version_guards(body), lambda ctx: ctx.version_guards),
)


def run_passes(body: Stmt, ctx: PassContext, passes: tuple[Pass, ...] = PASSES) -> Stmt:
    """``body`` after every enabled pass of ``passes``, in order."""
    for p in passes:
        if p.enabled(ctx):
            body = p.run(body, ctx)
    return body
