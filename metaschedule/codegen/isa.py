"""The CPU as a value: ``isa_of(target)`` gives one frozen :class:`CpuIsa`.

Every machine number the code generator, the analytic prior, the schedule rules and the
feature extractor rely on (vector width, vector registers, FMA units and latency,
caches, extensions) comes from this record, and nowhere else::

    >>> isa_of(Target("llvm -mcpu=haswell")).vector_registers
    16
    >>> isa_of(Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1")).name
    'neon'

The host's record (``-mcpu=native``, or the name of the host's CPU) is read from its
``/proc/cpuinfo`` flags; a named CPU's from the table below (LLVM's names, which TVM users
pass as ``-mcpu``); ``-mattr=+avx2,-avx512f`` adds or removes extensions of either. The
target's ``vector_width`` may narrow the vectors (``-vector_width=32`` on an AVX-512 CPU
writes 256-bit code), never widen them past what the ISA has.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, replace
from typing import Any

from ..target import HostCpuInfo, Target, host_cpu_info, names_host
from ..tir.dtype import check_dtype, nbytes

__all__ = [
    "CpuIsa",
    "host_arch",
    "host_runs",
    "isa_of",
    "known_cpus",
    "named_isa",
    "target_arch",
    "triple_arch",
]


@dataclass(frozen=True)
class CpuIsa:
    """What one CPU core offers the code generator.

    Attributes:
        arch: ``"x86_64"`` or ``"aarch64"``.
        name: the widest vector ISA: ``"avx512"``, ``"avx2"``, ``"avx"``, ``"sse2"``,
            ``"neon"``.
        cpu: the CPU the record describes (an LLVM ``-mcpu`` name, or ``"native"``).
        vector_bytes: the vector register's width the code is written for.
        vector_registers: how many vector registers the ISA names (16 for AVX2 and SSE,
            32 for AVX-512 and NEON).
        fma_units: vector multiply-add pipes per core, each ``datapath_bits`` wide (an
            ISA without FMA counts a multiplier and an adder as one).
        fma_latency: cycles of one multiply-add in a dependent chain.
        datapath_bits: width of the FMA and load units: a wider vector takes several
            passes (Zen 4 runs a 512-bit FMA as two 256-bit halves).
        extensions: the ISA extensions present, by LLVM's names (``"avx2"``, ``"fma"``,
            ``"avx512f"``, ``"avx512vnni"``, ``"avxvnni"``, ``"neon"``, ``"dotprod"``).
        cache_line_bytes, l1_bytes, l2_bytes, l3_bytes: the target's caches (None: not
            known).
    """

    arch: str
    name: str
    cpu: str
    vector_bytes: int
    vector_registers: int
    fma_units: int
    fma_latency: int
    datapath_bits: int
    extensions: frozenset[str]
    cache_line_bytes: int = 64
    l1_bytes: int | None = None
    l2_bytes: int | None = None
    l3_bytes: int | None = None

    def lanes(self, dtype: str) -> int:
        """How many ``dtype`` values one vector register holds (at least 1)."""
        return max(1, self.vector_bytes // nbytes(check_dtype(dtype)))

    def has(self, *extensions: str) -> bool:
        """Whether every one of ``extensions`` is present."""
        return all(e in self.extensions for e in extensions)

    @property
    def fma_per_cycle(self) -> float:
        """Multiply-adds of whole ``vector_bytes`` vectors a core starts per cycle."""
        return self.fma_units * min(1.0, self.datapath_bits / (8 * self.vector_bytes))

    @property
    def fma_chains(self) -> int:
        """Independent multiply-add chains that keep every FMA pipe busy (latency x
        vectors per cycle): fewer accumulators than this leave the pipes idle."""
        return max(1, round(self.fma_latency * self.fma_per_cycle))

    def peak_flops_per_cycle(self, dtype: str = "float32") -> float:
        """Floating-point operations per cycle and core at the FMA peak."""
        return 2.0 * self.fma_per_cycle * self.lanes(dtype)

    @property
    def register_constraint(self) -> str:
        """The GCC asm constraint of a vector register on this architecture."""
        return "w" if self.arch == "aarch64" else "v"

    def fits_register(self, dtype: str, lanes: int) -> bool:
        """Whether a vector of ``lanes`` ``dtype`` values fits one register."""
        return lanes * nbytes(check_dtype(dtype)) <= self.vector_bytes


# ----------------------------------------------------------------------------- tables

_SSE2 = frozenset({"sse", "sse2"})
_V2 = _SSE2 | {"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16"}
_AVX = _V2 | {"avx"}
_V3 = _AVX | {"avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe"}
_V4 = _V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
_VNNI = _V4 | {"avx512vnni"}
_ICX = _VNNI | {"avx512vbmi", "avx512vbmi2", "avx512bitalg", "avx512vpopcntdq", "avx512ifma"}
_SPR = _ICX | {"avxvnni", "avx512bf16", "avx512fp16", "amx-tile", "amx-int8", "amx-bf16"}
_ZEN4 = _ICX | {"avx512bf16"}
_ADL = _V3 | {"avxvnni"}
_NEON = frozenset({"neon"})
_NEON_DOT = _NEON | {"dotprod"}
_NEOVERSE_V1 = _NEON_DOT | {"sve", "bf16", "i8mm"}


@dataclass(frozen=True)
class _Core:
    """A table row: extensions, FMA pipes x width, FMA latency."""

    arch: str
    extensions: frozenset[str]
    fma_units: int
    datapath_bits: int
    fma_latency: int


def _x86(ext: frozenset[str], units: int, bits: int, latency: int) -> _Core:
    return _Core("x86_64", ext, units, bits, latency)


def _arm(ext: frozenset[str], units: int, latency: int) -> _Core:
    return _Core("aarch64", ext, units, 128, latency)


# Sources: the vendors' optimization manuals, Agner Fog's instruction tables, and for
# Zen 4 and Zen 5 the project's own measurements (target.vector_datapath_bits).
_CPUS: dict[str, _Core] = {
    # x86-64 micro-architecture levels (GCC 11+ and LLVM 12+ -march names)
    "x86-64": _x86(_SSE2, 1, 128, 4),
    "generic": _x86(_SSE2, 1, 128, 4),
    "x86-64-v2": _x86(_V2, 1, 128, 4),
    "x86-64-v3": _x86(_V3, 2, 256, 4),
    "x86-64-v4": _x86(_V4, 2, 512, 4),
    # Intel
    "core2": _x86(_SSE2 | {"sse3", "ssse3"}, 1, 128, 4),
    "nehalem": _x86(_V2, 1, 128, 4),
    "westmere": _x86(_V2, 1, 128, 4),
    "sandybridge": _x86(_AVX, 1, 256, 5),
    "ivybridge": _x86(_AVX, 1, 256, 5),
    "corei7-avx": _x86(_AVX, 1, 256, 5),
    "haswell": _x86(_V3, 2, 256, 5),
    "core-avx2": _x86(_V3, 2, 256, 5),
    "broadwell": _x86(_V3, 2, 256, 4),
    "skylake": _x86(_V3, 2, 256, 4),
    "alderlake": _x86(_ADL, 2, 256, 4),
    "raptorlake": _x86(_ADL, 2, 256, 4),
    "meteorlake": _x86(_ADL, 2, 256, 4),
    "arrowlake": _x86(_ADL, 2, 256, 4),
    "lunarlake": _x86(_ADL, 2, 256, 4),
    "skylake-avx512": _x86(_V4, 2, 512, 4),
    "cascadelake": _x86(_VNNI, 2, 512, 4),
    "cooperlake": _x86(_VNNI | {"avx512bf16"}, 2, 512, 4),
    "icelake-client": _x86(_ICX, 2, 256, 4),  # one 512-bit FMA a cycle
    "tigerlake": _x86(_ICX, 2, 256, 4),
    "icelake-server": _x86(_ICX, 2, 512, 4),
    "sapphirerapids": _x86(_SPR, 2, 512, 4),
    "emeraldrapids": _x86(_SPR, 2, 512, 4),
    "graniterapids": _x86(_SPR, 2, 512, 4),
    "diamondrapids": _x86(_SPR, 2, 512, 4),
    # AMD
    "btver2": _x86(_AVX, 1, 128, 5),
    "bdver1": _x86(_AVX | {"fma4"}, 2, 128, 6),
    "znver1": _x86(_V3, 2, 128, 5),
    "znver2": _x86(_V3, 2, 256, 5),
    "znver3": _x86(_V3, 2, 256, 4),
    "znver4": _x86(_ZEN4, 2, 256, 4),  # AVX-512 on 256-bit units
    "znver5": _x86(_ZEN4 | {"avxvnni"}, 2, 512, 4),
    "znver6": _x86(_ZEN4 | {"avxvnni"}, 2, 512, 4),
    # aarch64 (GCC's -mcpu names)
    "generic-aarch64": _arm(_NEON, 2, 4),
    "cortex-a53": _arm(_NEON, 1, 4),
    "cortex-a72": _arm(_NEON, 2, 7),
    "cortex-a76": _arm(_NEON_DOT, 2, 4),
    "neoverse-n1": _arm(_NEON_DOT, 2, 4),
    "neoverse-n2": _arm(_NEOVERSE_V1, 2, 4),
    "neoverse-v1": _arm(_NEOVERSE_V1, 4, 4),
    "neoverse-v2": _arm(_NEOVERSE_V1, 4, 4),
    "apple-m1": _arm(_NEON_DOT, 4, 4),
    "apple-m2": _arm(_NEON_DOT | {"bf16", "i8mm"}, 4, 4),
}

#: /proc/cpuinfo flag -> LLVM's name of the extension (where they differ)
_FLAG_NAMES = {
    "sse4_1": "sse4.1",
    "sse4_2": "sse4.2",
    "avx512_vnni": "avx512vnni",
    "avx_vnni": "avxvnni",
    "avx512_bf16": "avx512bf16",
    "avx512_fp16": "avx512fp16",
    "avx512_vbmi2": "avx512vbmi2",
    "avx512_bitalg": "avx512bitalg",
    "avx512_vpopcntdq": "avx512vpopcntdq",
    "amx_tile": "amx-tile",
    "amx_int8": "amx-int8",
    "amx_bf16": "amx-bf16",
    "abm": "lzcnt",
    "pni": "sse3",
    "asimd": "neon",
    "asimddp": "dotprod",
    "bmi1": "bmi",
    "i8mm": "i8mm",
}


#: the extensions a record keeps (of /proc/cpuinfo's flags, those that name an ISA
#: extension the code generator or a user's intrinsics may use)
_VOCABULARY = frozenset().union(*(c.extensions for c in _CPUS.values())) | {
    "sse4a",
    "aes",
    "pclmulqdq",
    "gfni",
    "vaes",
    "vpclmulqdq",
    "sha_ni",
    "sve2",
    "asimdhp",
}


def known_cpus(arch: str | None = None) -> tuple[str, ...]:
    """The ``-mcpu`` names of the table (of one architecture, if given)."""
    return tuple(n for n, c in _CPUS.items() if arch is None or c.arch == arch)


def triple_arch(triple: str | None) -> str | None:
    """The architecture a target triple names (``"aarch64"``, ``"x86_64"``), or None."""
    if not triple:
        return None
    head = triple.split("-", 1)[0].lower()
    if head in ("aarch64", "arm64", "aarch64_be"):
        return "aarch64"
    if head in ("x86_64", "amd64", "x86-64"):
        return "x86_64"
    return None


def host_arch() -> str:
    """The host's architecture, as :func:`triple_arch` names it."""
    machine = platform.machine().lower()
    return "aarch64" if machine in ("aarch64", "arm64") else "x86_64"


def target_arch(target: Target) -> str:
    """The architecture ``target`` builds for: its ``-mtriple``, a named CPU's, else the
    host's."""
    arch = triple_arch(getattr(target, "mtriple", None))
    if arch is None:
        core = _CPUS.get(str(target.mcpu))
        arch = core.arch if core is not None else host_arch()
    return arch


def named_isa(mcpu: str, arch: str | None = None) -> CpuIsa | None:
    """The record of a CPU named as LLVM names it (no target's caches), or None."""
    if mcpu == "generic" and arch == "aarch64":
        mcpu = "generic-aarch64"
    core = _CPUS.get(mcpu)
    if core is None or (arch is not None and core.arch != arch):
        return None
    return _record(
        core.arch, mcpu, core.extensions, core.fma_units, core.datapath_bits, core.fma_latency
    )


def isa_of(target: Target | str | Any, host: HostCpuInfo | None = None) -> CpuIsa:
    """The ISA record of a CPU target.

    Args:
        target: a CPU target (or its string).
        host: the host's facts, for a target that names the host (default: this
            machine's, :func:`~metaschedule.target.host_cpu_info`).

    Raises:
        ValueError: a target that is not a CPU, or a CPU name the table does not know on
            another architecture than the host's.
    """
    target = Target(target)
    if target.kind != "cpu":
        raise ValueError(f"isa_of needs a cpu target, got {target.kind} ({target})")
    return _isa_of_target(target, host if host is not None else host_cpu_info())


_ISA_CACHE: dict[tuple[Target, HostCpuInfo], CpuIsa] = {}


def _isa_of_target(target: Target, host: HostCpuInfo) -> CpuIsa:
    found = _ISA_CACHE.get((target, host))
    if found is not None:
        return found
    arch = target_arch(target)
    mcpu = str(target.mcpu)
    if arch == host_arch() and names_host(mcpu, host):
        isa = _host_isa(host, mcpu)
    else:
        isa = named_isa(mcpu, arch) or _unknown(mcpu, arch, target)
    isa = _with_mattr(isa, tuple(getattr(target, "mattr", ()) or ()))
    vector = min(isa.vector_bytes, int(target.vector_width))
    isa = replace(
        isa,
        vector_bytes=vector,
        cache_line_bytes=int(target.cache_line_bytes),
        l1_bytes=getattr(target, "l1_cache_bytes", None),
        l2_bytes=getattr(target, "l2_cache_bytes", None),
        l3_bytes=getattr(target, "l3_cache_bytes", None),
    )
    if len(_ISA_CACHE) > 256:
        _ISA_CACHE.clear()
    _ISA_CACHE[(target, host)] = isa
    return isa


def _unknown(mcpu: str, arch: str, target: Target) -> CpuIsa:
    """A CPU the table does not know: the x86-64 level of the target's vector width (the
    compiler decides whether the name exists), or generic NEON on aarch64."""
    if arch == "aarch64":
        rec = named_isa("generic-aarch64")
        assert rec is not None  # in the table
        return rec
    level = {64: "x86-64-v4", 32: "x86-64-v3"}.get(int(target.vector_width), "x86-64")
    rec = named_isa(level)
    assert rec is not None  # the x86-64 levels are in the table
    return replace(rec, cpu=mcpu)


def _record(
    arch: str, cpu: str, ext: frozenset[str], units: int, bits: int, latency: int
) -> CpuIsa:
    name, width = _vector_isa(arch, ext)
    regs = 32 if arch == "aarch64" or "avx512f" in ext else 16
    return CpuIsa(
        arch=arch,
        name=name,
        cpu=cpu,
        vector_bytes=width,
        vector_registers=regs,
        fma_units=units,
        fma_latency=latency,
        datapath_bits=min(bits, width * 8),
        extensions=frozenset(ext),
    )


def _vector_isa(arch: str, ext: frozenset[str]) -> tuple[str, int]:
    if arch == "aarch64":
        return "neon", 16
    if "avx512f" in ext:
        return "avx512", 64
    if "avx2" in ext:
        return "avx2", 32
    if "avx" in ext:
        return "avx", 32
    return "sse2", 16


def _host_isa(host: HostCpuInfo, mcpu: str) -> CpuIsa:
    """The host's record: its extensions from /proc/cpuinfo; FMA pipes and latency from
    the table row of its CPU where known, else from its datapath width."""
    arch = host_arch()
    ext = frozenset(_FLAG_NAMES.get(f, f) for f in host.flags) & _VOCABULARY
    if not ext:  # nothing readable: what the vector width implies
        ext = {64: _V4, 32: _V3}.get(host.vector_width, _SSE2 if arch == "x86_64" else _NEON)
    row = _CPUS.get(host.cpu_name or "")
    if arch == "aarch64":
        units, bits, latency = (row.fma_units, 128, row.fma_latency) if row else (2, 128, 4)
    elif row is not None and row.arch == arch:
        units, bits, latency = row.fma_units, row.datapath_bits, row.fma_latency
    else:
        bits = host.datapath_bits or min(256, 8 * host.vector_width)
        units, latency = (2 if "fma" in ext else 1), 4
    return _record(arch, mcpu, ext, units, bits, latency)


def _with_mattr(isa: CpuIsa, mattr: tuple[str, ...]) -> CpuIsa:
    """``isa`` with ``-mattr``'s ``+ext`` added and ``-ext`` removed (removing ``avx2``
    removes what needs it)."""
    if not mattr:
        return isa
    ext = set(isa.extensions)
    for item in mattr:
        name = item.lstrip("+-")
        if item.startswith("-"):
            ext.discard(name)
            if name == "avx512f":
                ext -= {e for e in ext if e.startswith("avx512")}
            if name == "avx2":
                ext -= {e for e in ext if e.startswith("avx512")} | {"avxvnni"}
            if name == "avx":
                ext -= {e for e in ext if e.startswith("avx")} | {"fma"}
        else:
            ext.add(name)
    units = isa.fma_units if "fma" not in ext - isa.extensions else max(2, isa.fma_units)
    fresh = _record(isa.arch, isa.cpu, frozenset(ext), units, isa.datapath_bits, isa.fma_latency)
    if fresh.vector_bytes > isa.vector_bytes:  # a wider ISA added: as wide a datapath
        bits = max(isa.datapath_bits, min(256, 8 * fresh.vector_bytes))
        fresh = replace(fresh, datapath_bits=bits)
    return fresh


def host_runs(target: Target | str) -> bool:
    """Whether code built for ``target`` runs on this machine: the same architecture, and
    every extension the target's ISA uses present in the host's."""
    isa = isa_of(target)
    host = isa_of(Target({"kind": "cpu", "mcpu": "native"}))
    return isa.arch == host.arch and isa.extensions <= host.extensions
