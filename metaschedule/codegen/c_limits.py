"""How large register tiles may grow on one ISA (:class:`TileLimits`, from the ISA record),
and what planning reads of a target (:class:`PlanTarget`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .isa import CpuIsa

__all__ = ["PlanTarget", "TileLimits"]


@dataclass(frozen=True)
class TileLimits:
    """How large register tiles may grow on one ISA (from :class:`~.isa.CpuIsa`; the
    figures in parentheses are AVX-512's, with 32 vector registers).

    Attributes:
        max_accumulators: most accumulator variables (vectors, or scalars without a
            vectorized loop) of one tile: twice the registers (64), as a few spills cost
            less than the memory round trip on every update of a tile left in memory.
        min_split_accumulators: fewest accumulators a split tile keeps, and the size
            below which a tile is jammed: the independent chains that hide the latency
            of a multiply-add (8: two FMA pipes of latency 4).
        jam_accumulators: most accumulators of a jammed tile (half the registers: 16).
        max_straight_accumulators: most accumulators of a tile written out straight,
            leaving registers for the shared loads (all but 4: 28; measured, 32 of 16
            lanes or 49 of 2 lanes ran up to 2x slower written out).
        straight_registers: registers that accumulators and shared values fit in (32).
        broadcast_accumulators: a tile this small shares its broadcasts whatever it
            holds (16; measured on random conv2d schedules, one thread: tiles of 28
            accumulators holding 16 to 55 values more ran 0.35-1.1x, GCC spilled them;
            tiles of 8 to 16 holding up to 57 more mostly 1.05-1.3x).
        max_call_accumulators: most accumulators of a tile of dot-product calls
            (:mod:`.c_intrin`; the registers: 32). Measured on sampled int8 dense
            schedules, one thread, against the calls left on memory: 1 row x 32 vectors
            1.6-2.2x, 2 x 16 0.7-0.96x (GCC kept that one's cache in registers itself),
            2 x 32 0.86x on AVX-512; 4 x 8 0.59x on AVX2 (16 registers); larger tiles
            split into rows 1.4-2.6x, but 2 x 16 split into rows 0.75x.
    """

    max_accumulators: int
    min_split_accumulators: int
    jam_accumulators: int
    max_straight_accumulators: int
    straight_registers: int
    broadcast_accumulators: int
    max_call_accumulators: int = 32

    @staticmethod
    def of(isa: CpuIsa) -> TileLimits:
        regs = isa.vector_registers
        return TileLimits(
            max_accumulators=2 * regs,
            min_split_accumulators=max(8, isa.fma_chains),
            jam_accumulators=regs // 2,
            max_straight_accumulators=regs - 4,
            straight_registers=regs,
            broadcast_accumulators=regs // 2,
            max_call_accumulators=regs,
        )


class PlanTarget(Protocol):
    """What planning reads of the target: its ISA record and register-tile limits (a
    :class:`~.plan.PlanContext`, or a writer that has them)."""

    @property
    def isa(self) -> CpuIsa: ...

    @property
    def limits(self) -> TileLimits: ...
