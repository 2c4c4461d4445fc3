"""The core of a Schedule: a module being transformed, a trace of how, and a random state.

Primitives are grouped by theme in ``primitives/`` as mixin classes; each one
checks its preconditions, computes the new IR, commits it once, and records one
instruction. A primitive that raises leaves the schedule exactly as it was.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..tir import Block, BlockRealize, For, IRModule, PrimFunc, Var
from ..tir.function import as_module
from .error import ScheduleError
from .instruction import Instruction, InstructionKind, get_inst_kind, register_inst_kind
from .rv import RV, BlockRV, ExprRV, LoopRV
from .state import ScheduleState
from .trace import Trace

if TYPE_CHECKING:
    from .schedule import Schedule

F = TypeVar("F", bound=Callable[..., Any])

_LCG_MOD = 2**31 - 1
_LCG_MUL = 48271


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def atomic(method: F) -> F:
    """Run a primitive so that any error leaves the schedule unchanged."""

    @functools.wraps(method)
    def wrapper(self: Schedule, *args, **kwargs):
        saved = (self.state.copy(), dict(self._rvs), self._trace, self._rand_state)
        try:
            return method(self, *args, **kwargs)
        except Exception:
            self.state, self._rvs, self._trace, self._rand_state = saved
            raise

    return wrapper  # type: ignore[return-value]


class ScheduleBase:
    """RV bookkeeping, tracing and randomness shared by every primitive."""

    def __init__(
        self,
        mod: PrimFunc | IRModule,
        seed: int | None = None,
        debug_mask: str | int = "all",
        error_render_level: str = "detail",
        enable_check: bool = True,
    ):
        if error_render_level not in ("detail", "fast", "none"):
            raise ValueError(
                f"error_render_level must be 'detail', 'fast' or 'none', got {error_render_level!r}"
            )
        self.state = ScheduleState(as_module(mod))
        self.debug_mask = debug_mask
        self.error_render_level = error_render_level
        self.enable_check = enable_check
        self._rvs: dict[RV, tuple] = {}
        self._trace = Trace()
        self._rand_state = 1
        self.seed(seed)
        self._func_working_on: str | None = "main" if "main" in self.state.mod else None

    # basic accessors ----------------------------------------------------------------
    @property
    def mod(self) -> IRModule:
        return self.state.mod

    @property
    def trace(self) -> Trace:
        return self._trace

    @property
    def func_working_on(self) -> str | None:
        return self._func_working_on

    def work_on(self, func_name: str) -> None:
        self.state.func(func_name)  # raises KeyError naming the functions
        self._func_working_on = func_name

    def copy(self) -> Schedule:
        """An independent schedule with the same module, trace, RVs and random state."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.state = self.state.copy()
        new._rvs = dict(self._rvs)
        return new

    def show(self, *args, **kwargs) -> None:
        print(self.mod.script())

    def __repr__(self) -> str:
        return f"Schedule(\n{self.mod.script()}\n)"

    # randomness ---------------------------------------------------------------------
    def seed(self, seed: int | None) -> None:
        """Reset the random state; ``None`` or -1 draws a seed from the OS."""
        if seed is None or seed == -1:
            seed = int.from_bytes(os.urandom(4), "little")
        s = _splitmix64(int(seed)) % _LCG_MOD  # nearby seeds give unrelated streams
        self._rand_state = s if s != 0 else 1

    def fork_seed(self) -> int:
        """Draw a seed for an independent random stream (e.g. for a copy)."""
        return self._next_rand() ^ 0x5DEECE

    def _next_rand(self) -> int:
        self._rand_state = (self._rand_state * _LCG_MUL) % _LCG_MOD
        return self._rand_state

    def _rand_int(self, n: int) -> int:
        """Uniform integer in [0, n)."""
        return self._next_rand() % n

    def _rand_float(self) -> float:
        return (self._next_rand() - 1) / (_LCG_MOD - 1)

    # RV resolution --------------------------------------------------------------------
    def _handle(self, rv: RV) -> tuple:
        try:
            return self._rvs[rv]
        except (KeyError, TypeError):
            raise ScheduleError(f"{rv!r} is not a random variable of this schedule") from None

    def get(self, rv: RV | int) -> Any:
        """The current Block (BlockRV), For (LoopRV) or int (ExprRV) behind ``rv``."""
        if isinstance(rv, BlockRV):
            return self._block(rv)[1].block
        if isinstance(rv, LoopRV):
            h = self._handle(rv)
            if h[0] != "loop":
                return h[0]  # "root" / "inline" markers of sample_compute_location
            return self._loop(rv)[1]
        if isinstance(rv, ExprRV):
            return self._int(rv)
        if isinstance(rv, int):
            return rv
        raise TypeError(f"expected a BlockRV, LoopRV or ExprRV, got {type(rv).__name__}")

    def _block(self, rv: BlockRV) -> tuple[str, BlockRealize]:
        if not isinstance(rv, BlockRV):
            raise TypeError(f"expected a BlockRV, got {type(rv).__name__}: {rv!r}")
        _, func_name, name = self._handle(rv)
        return func_name, self.state.block_realize(func_name, name)

    def _loop(self, rv: LoopRV) -> tuple[str, For]:
        if not isinstance(rv, LoopRV):
            raise TypeError(f"expected a LoopRV, got {type(rv).__name__}: {rv!r}")
        h = self._handle(rv)
        if h[0] != "loop":
            raise ScheduleError(f"the LoopRV stands for {h[0]!r}, not for a loop")
        return h[1], self.state.loop(h[1], h[2])

    def _int(self, v: ExprRV | int) -> int:
        if isinstance(v, ExprRV):
            h = self._handle(v)
            return h[1]
        if isinstance(v, bool) or not isinstance(v, int):
            if hasattr(v, "value") and isinstance(v.value, int):
                return int(v.value)
            raise TypeError(f"expected an int or an ExprRV, got {type(v).__name__}: {v!r}")
        return v

    def _new_block_rv(self, func_name: str, block: Block | BlockRealize | str) -> BlockRV:
        name = (
            block
            if isinstance(block, str)
            else (block.block.name_hint if isinstance(block, BlockRealize) else block.name_hint)
        )
        rv = BlockRV()
        self._rvs[rv] = ("block", func_name, name)
        return rv

    def _new_loop_rv(self, func_name: str, loop: For | Var) -> LoopRV:
        rv = LoopRV()
        self._rvs[rv] = ("loop", func_name, loop.loop_var if isinstance(loop, For) else loop)
        return rv

    def _new_marker_loop_rv(self, marker: str) -> LoopRV:
        rv = LoopRV()
        self._rvs[rv] = (marker,)
        return rv

    def _new_expr_rv(self, value: int) -> ExprRV:
        rv = ExprRV()
        self._rvs[rv] = ("expr", int(value))
        return rv

    def remove_rv(self, rv: RV) -> None:
        """Forget a random variable (recorded in the trace)."""
        self._handle(rv)
        del self._rvs[rv]
        self._record("RemoveRV", [rv], [], [])

    # tracing --------------------------------------------------------------------------
    def _record(self, kind: str, inputs: list, attrs: list, outputs: list, decision=None) -> None:
        inst = Instruction(get_inst_kind(kind), inputs, attrs, outputs)
        self._trace = self._trace.append(inst, decision)

    def enter_postproc(self) -> None:
        """Mark the start of post-processing; traces can drop what follows."""
        self._record("EnterPostproc", [], [], [])

    def _func_name_for_lookup(self, func_name: str | None) -> str:
        if func_name is not None:
            return func_name
        if self._func_working_on is not None:
            return self._func_working_on
        if len(self.mod) == 1:
            return next(iter(self.mod))
        raise ValueError("the module has several functions: pass func_name")


register_inst_kind(
    InstructionKind("EnterPostproc", "enter_postproc", is_pure=False, is_postproc_marker=True)
)
register_inst_kind(InstructionKind("RemoveRV", "remove_rv", inputs=("rv",)))
