"""The CPU as features: one vector per target, the same on every row of a candidate.

With it one cost model spans machines: trained on records of several ISAs (a corpus),
it predicts for the target at hand. Widths, counts and cache sizes are ``log2(1 + x)``;
extensions are 0/1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...codegen.isa import CpuIsa, isa_of
from ...target import Target
from .buffers import slog
from .layout import ISA_FLAGS

__all__ = ["isa_vector", "target_isa"]


def isa_vector(isa: CpuIsa, num_cores: int) -> np.ndarray:
    """The ISA slots (:data:`ISA_NAMES`) of ``isa`` running ``num_cores`` threads."""
    flags = [
        float(isa.has("avx512vnni") or isa.has("avxvnni")) if f == "vnni" else float(isa.has(f))
        for f in ISA_FLAGS
    ]
    values = [
        slog(isa.vector_bytes),
        slog(isa.vector_registers),
        slog(isa.fma_units),
        slog(isa.fma_latency),
        slog(isa.datapath_bits),
        slog(isa.fma_chains),
        slog(isa.peak_flops_per_cycle("float32")),
        slog(isa.l1_bytes or 0),
        slog(isa.l2_bytes or 0),
        slog(isa.l3_bytes or 0),
        slog(num_cores),
        float(isa.arch == "aarch64"),
    ]
    return np.array(values + flags, dtype=np.float32)


def target_isa(context: Any) -> tuple[CpuIsa, int]:
    """The ISA and thread count a tuning context measures on: ``context.isa`` when set
    (a corpus part's recorded machine), else the record of ``context.target``, else (no
    target) the host's."""
    target = getattr(context, "target", None)
    isa = getattr(context, "isa", None)
    if isa is None:
        isa = isa_of(target if target is not None else Target("llvm"))
    cores = getattr(target, "attrs", {}).get("num_cores") if target is not None else None
    return isa, int(cores or 1)
