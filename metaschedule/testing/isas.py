"""Targets of each x86 vector ISA, for tests that must hold on every ISA the host runs
(an AVX-512 host runs AVX2 and SSE2 code too), and skip only what it cannot run."""

from __future__ import annotations

from ..codegen.isa import host_runs
from ..target import Target

__all__ = ["AVX2", "AVX512", "SSE2", "X86_TARGETS", "runnable", "runnable_targets"]

#: SSE2 (16-byte vectors, 16 registers, no FMA): the x86-64 baseline
SSE2 = Target("llvm -mcpu=x86-64 -num-cores=2")
#: AVX2 + FMA (32-byte vectors, 16 registers)
AVX2 = Target("llvm -mcpu=haswell -num-cores=2")
#: AVX-512 (64-byte vectors, 32 registers)
AVX512 = Target("llvm -mcpu=x86-64-v4 -num-cores=2")
X86_TARGETS = {"sse2": SSE2, "avx2": AVX2, "avx512": AVX512}


def runnable(target: Target) -> bool:
    """Whether this host runs code built for ``target``."""
    return host_runs(target)


def runnable_targets() -> dict[str, Target]:
    """The x86 targets of :data:`X86_TARGETS` this host runs, by ISA name."""
    return {name: t for name, t in X86_TARGETS.items() if runnable(t)}
