"""Compilation targets: ``Target("cpu")`` (alias ``"llvm"``) and ``Target("cuda")``.

A target is a kind plus a fixed set of attributes. Host-dependent defaults (core
count, vector width, cache sizes) are read once when the target is created, so a
target prints, serialises and compares with concrete values::

    >>> Target("llvm -num-cores=4 -mcpu=skylake")
    Target('cpu -cache_line_bytes=64 ... -mcpu=skylake -num_cores=4 -vector_width=32')

TVM-style strings are accepted: ``-num-cores=4``, ``-num_cores 4`` and ``-mattr=+avx2``
are all understood. Unknown kinds and attributes raise ``ValueError`` listing the
accepted ones.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from .tir.dtype import check_dtype, nbytes

__all__ = ["HostCpuInfo", "Target", "host_cpu_info", "is_host", "vector_datapath_bits"]

_KIND_ALIASES = {"cpu": "cpu", "llvm": "cpu", "c": "cpu", "cuda": "cuda", "nvidia": "cuda"}

# attribute name -> (python type, description); order is the canonical print order
_CPU_ATTRS: dict[str, tuple[type, str]] = {
    "mcpu": (str, 'CPU name for -march ("native": the host)'),
    "mtriple": (str, "target triple (informational)"),
    "mattr": (tuple, "extra ISA features, e.g. ('+avx2',)"),
    "num_cores": (int, "threads for parallel loops (physical cores by default)"),
    "vector_width": (int, "SIMD register width in bytes"),
    "cache_line_bytes": (int, "cache line size in bytes"),
    "l1_cache_bytes": (int, "L1 data cache size in bytes"),
    "l2_cache_bytes": (int, "L2 cache size in bytes"),
    "l3_cache_bytes": (int, "last-level cache size in bytes"),
}
_CUDA_ATTRS: dict[str, tuple[type, str]] = {
    "arch": (str, 'compute capability, e.g. "sm_80"'),
    "max_threads_per_block": (int, "threads per block"),
    "max_shared_memory_per_block": (int, "static shared memory bytes per block"),
    "max_shared_memory_per_block_optin": (int, "shared memory bytes a kernel may opt in to"),
    "thread_warp_size": (int, "threads per warp"),
    "registers_per_block": (int, "32-bit registers per block"),
    "max_registers_per_thread": (int, "32-bit registers per thread"),
}
_ATTRS = {"cpu": _CPU_ATTRS, "cuda": _CUDA_ATTRS}
_CUDA_DEFAULTS = {
    "arch": "sm_80",
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 49152,
    "thread_warp_size": 32,
    "registers_per_block": 65536,
    "max_registers_per_thread": 255,
}
# compute capability -> shared memory bytes per block a kernel can opt in to (CUDA C
# Programming Guide, "Technical Specifications per Compute Capability"); static
# __shared__ arrays are limited to 48 KB on every architecture.
_CUDA_SHARED_OPTIN = {
    50: 49152,
    52: 49152,
    53: 49152,
    60: 49152,
    61: 49152,
    62: 49152,
    70: 98304,
    72: 98304,
    75: 65536,
    80: 166912,
    86: 101376,
    87: 166912,
    89: 101376,
    90: 232448,
    100: 232448,
    103: 232448,
    110: 232448,
    120: 101376,
    121: 101376,
}


def known_cpu_vector_width(mcpu: str, arch: str | None = None) -> int | None:
    """The vector width in bytes of a CPU named as LLVM names it; None for other names
    (the table is :mod:`metaschedule.codegen.isa`'s)."""
    from .codegen.isa import named_isa  # local: a cycle, codegen.isa builds on Target

    isa = named_isa(mcpu, arch)
    return isa.vector_bytes if isa is not None else None


# ----------------------------------------------------------------------------- host probing


@dataclass(frozen=True)
class HostCpuInfo:
    """What /proc/cpuinfo and sysfs say about the host (None where unreadable).

    ``vendor`` and ``family`` are /proc/cpuinfo's ``vendor_id`` and ``cpu family``
    (``"AuthenticAMD"``, 25 for Zen 3 and 4); ``avx512f``: the host runs AVX-512.
    """

    physical_cores: int
    vector_width: int
    cache_line_bytes: int
    l1_cache_bytes: int | None
    l2_cache_bytes: int | None
    l3_cache_bytes: int | None
    l1_cache_ways: int | None = None
    l2_cache_ways: int | None = None
    vendor: str | None = None
    family: int | None = None
    avx512f: bool = False
    model: int | None = None
    #: /proc/cpuinfo's ``flags`` (``Features`` on aarch64)
    flags: frozenset[str] = frozenset()

    @property
    def cpu_name(self) -> str | None:
        """The host's CPU as LLVM (and TVM's ``-mcpu``) names it (:func:`cpu_name`)."""
        return cpu_name(self.vendor, self.family, self.model)

    @property
    def datapath_bits(self) -> int | None:
        """Width of the host's FMA and load units (:func:`vector_datapath_bits`)."""
        return vector_datapath_bits(self.vendor, self.family, self.avx512f)


def vector_datapath_bits(vendor: str | None, family: int | None, avx512f: bool) -> int | None:
    """Width in bits of the FMA and load units of a core: a vector wider than this takes
    several passes through them.

    AMD Zen 2 to 4 (cpu family 23 and 25) run a 512-bit FMA or load as two 256-bit
    halves (measured on a Zen 4: 12 independent 16-lane FMA chains gave one FMA a cycle
    per core); AMD family 26 and later (Zen 5 server and desktop parts; measured on an
    EPYC, family 26 model 2: 529 GFLOPS from 2 cores, two 16-lane FMAs a cycle) and
    Intel cores with AVX-512 have 512-bit units (the mobile Zen 5 parts, which split
    them too, are not told apart). None where unknown (another vendor, or no AVX-512:
    then no vector is wider than 256 bits).

    Args:
        vendor: /proc/cpuinfo's ``vendor_id`` (``"AuthenticAMD"``, ``"GenuineIntel"``).
        family: its ``cpu family``.
        avx512f: whether the core runs AVX-512.
    """
    if vendor == "AuthenticAMD" and family in (23, 25):
        return 256
    if not avx512f:
        return None
    if vendor == "GenuineIntel" or (vendor == "AuthenticAMD" and (family or 0) >= 26):
        return 512
    return None


#: Intel family-6 models by the name LLVM gives them (the common desktop and server parts)
_INTEL_MODELS = {
    **dict.fromkeys((0x3C, 0x3F, 0x45, 0x46), "haswell"),
    **dict.fromkeys((0x3D, 0x47, 0x4F, 0x56), "broadwell"),
    **dict.fromkeys((0x4E, 0x5E, 0x8E, 0x9E, 0xA5, 0xA6), "skylake"),
    0x55: "skylake-avx512",
    **dict.fromkeys((0x6A, 0x6C), "icelake-server"),
    **dict.fromkeys((0x7D, 0x7E), "icelake-client"),
    **dict.fromkeys((0x8C, 0x8D), "tigerlake"),
    **dict.fromkeys((0x97, 0x9A), "alderlake"),
    **dict.fromkeys((0xB7, 0xBA, 0xBF), "raptorlake"),
    0x8F: "sapphirerapids",
    0xCF: "emeraldrapids",
    **dict.fromkeys((0xAD, 0xAE), "graniterapids"),
}


def cpu_name(vendor: str | None, family: int | None, model: int | None) -> str | None:
    """The CPU that /proc/cpuinfo's ``vendor_id``, ``cpu family`` and ``model`` describe,
    as LLVM names it (what TVM users pass as ``-mcpu``, e.g. ``"znver5"``); None where
    not known (other vendors and older or rarer models)."""
    if family is None:
        return None
    if vendor == "AuthenticAMD":
        if family >= 26:
            return "znver5"
        if model is None:
            return None
        if family == 25:  # Zen 4 parts among the Zen 3 ones
            zen4 = 0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF
            return "znver4" if zen4 else "znver3"
        if family == 23:
            zen2 = model >= 0x30 and model != 0x50
            return "znver2" if zen2 else "znver1"
        return None
    if vendor == "GenuineIntel" and family == 6 and model is not None:
        return _INTEL_MODELS.get(model)
    return None


def names_host(mcpu: str | None, host: HostCpuInfo | None = None) -> bool:
    """Whether ``-mcpu`` value ``mcpu`` means the host's CPU: ``"native"``, or the name
    of the host's CPU (``"znver5"`` on a Zen 5, as ``tvm.target.codegen.
    llvm_get_system_cpu()`` says)."""
    if mcpu == "native":
        return True
    host = host if host is not None else host_cpu_info()
    return mcpu is not None and mcpu == host.cpu_name


def is_host(target: Any, host: HostCpuInfo | None = None) -> bool:
    """Whether ``target`` is a CPU target of the host (``host``, by default
    :func:`host_cpu_info`): ``-mcpu=native`` or the host CPU's name (:func:`names_host`),
    with the cache sizes the host reports (a native target recorded on another machine,
    or given other sizes, is not)."""
    if getattr(target, "kind", None) != "cpu":
        return False
    host = host if host is not None else host_cpu_info()
    if not names_host(getattr(target, "mcpu", None), host):
        return False
    for key in ("l1_cache_bytes", "l2_cache_bytes", "l3_cache_bytes"):
        mine, theirs = getattr(target, key, None), getattr(host, key)
        if mine is not None and theirs is not None and mine != theirs:
            return False
    return True


@lru_cache(maxsize=1)
def host_cpu_info() -> HostCpuInfo:
    """Probe the host CPU once per process."""
    cpuinfo = _read("/proc/cpuinfo") or ""
    caches = _sysfs_caches()
    line = caches.get("line")
    family = _cpuinfo_field(cpuinfo, "cpu family")
    model = _cpuinfo_field(cpuinfo, "model")
    return HostCpuInfo(
        physical_cores=_physical_cores(cpuinfo),
        vector_width=_vector_width_from_flags(cpuinfo),
        cache_line_bytes=line if line else 64,
        l1_cache_bytes=caches.get(1),
        l2_cache_bytes=caches.get(2),
        l3_cache_bytes=caches.get(3),
        l1_cache_ways=caches.get((1, "ways")),
        l2_cache_ways=caches.get((2, "ways")),
        vendor=_cpuinfo_field(cpuinfo, "vendor_id"),
        family=int(family) if family and family.isdigit() else None,
        avx512f="avx512f" in _cpu_flags(cpuinfo),
        model=int(model) if model and model.isdigit() else None,
        flags=frozenset(_cpu_flags(cpuinfo)),
    )


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _physical_cores(cpuinfo: str) -> int:
    """Unique (physical id, core id) pairs; os.cpu_count() when cpuinfo lacks them."""
    cores: set[tuple[str, str]] = set()
    phys = core = None
    for raw in cpuinfo.splitlines() + [""]:
        key, _, value = raw.partition(":")
        key, value = key.strip(), value.strip()
        if key == "physical id":
            phys = value
        elif key == "core id":
            core = value
        elif not key:  # blank line ends one processor's record
            if core is not None:
                cores.add((phys or "0", core))
            phys = core = None
    if cores:
        return len(cores)
    return os.cpu_count() or 1


def _cpuinfo_field(cpuinfo: str, name: str) -> str | None:
    """The value of the first ``name : value`` line of /proc/cpuinfo, or None."""
    for raw in cpuinfo.splitlines():
        key, sep, value = raw.partition(":")
        if sep and key.strip() == name:
            return value.strip()
    return None


def _cpu_flags(cpuinfo: str) -> set[str]:
    for raw in cpuinfo.splitlines():
        key, _, value = raw.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def _vector_width_from_flags(cpuinfo: str) -> int:
    flags = _cpu_flags(cpuinfo)
    if "avx512f" in flags:
        return 64
    if "avx" in flags or "avx2" in flags:
        return 32
    if "sse2" in flags or "neon" in flags or "asimd" in flags:
        return 16
    return 16


def _parse_size(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    try:
        return int(digits) * scale
    except ValueError:
        return None


def _sysfs_caches() -> dict[Any, int]:
    """{level: size of its data/unified cache, (level, "ways"): its associativity,
    "line": coherency line size} of cpu0."""
    out: dict[Any, int] = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(e for e in os.listdir(base) if e.startswith("index"))
    except OSError:
        return out
    for entry in entries:
        kind = (_read(f"{base}/{entry}/type") or "").strip()
        if kind not in ("Data", "Unified"):
            continue
        level = _parse_size(_read(f"{base}/{entry}/level") or "")
        size = _parse_size(_read(f"{base}/{entry}/size") or "")
        line = _parse_size(_read(f"{base}/{entry}/coherency_line_size") or "")
        ways = _parse_size(_read(f"{base}/{entry}/ways_of_associativity") or "")
        if level and size:
            out[level] = size
            if ways:
                out[(level, "ways")] = ways
        if line and "line" not in out:
            out["line"] = line
    return out


# ----------------------------------------------------------------------------- Target


class Target:
    """A compilation target: ``kind`` ("cpu" or "cuda") and its attributes.

    Args:
        spec: a string (``"cpu"``, ``"llvm -num-cores=4 -mcpu=skylake"``, ``"cuda -arch=sm_86"``),
            a dict with a ``"kind"`` key and attributes, or another Target.

    Raises:
        ValueError: an unknown kind or attribute, or an attribute of the wrong type.
    """

    __slots__ = ("_attrs", "_kind")

    def __init__(self, spec: str | Mapping[str, Any] | Target = "cpu") -> None:
        if isinstance(spec, Target):
            kind, attrs = spec.kind, dict(spec._attrs)
        elif isinstance(spec, str):
            kind, attrs = _parse_string(spec)
        elif isinstance(spec, Mapping):
            attrs = dict(spec)
            if "kind" not in attrs:
                raise ValueError(f"a target dict needs a 'kind' key, got {sorted(attrs)}")
            kind = _canonical_kind(attrs.pop("kind"))
        else:
            raise TypeError(
                f"Target expects a string, a dict or a Target, got {type(spec).__name__}"
            )
        attrs = _complete(kind, _check_attrs(kind, attrs))
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_attrs", tuple(sorted(attrs.items())))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            "Target is immutable; build a new one, e.g. Target({**t.as_json(), ...})"
        )

    # attributes -----------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self._kind

    @property
    def attrs(self) -> Mapping[str, Any]:
        return MappingProxyType(dict(self._attrs))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        for key, value in self._attrs:
            if key == name:
                return value
        raise AttributeError(
            f"target {self._kind} has no attribute {name!r}; it has: "
            f"{', '.join(k for k, _ in self._attrs)}"
        )

    def vector_lanes(self, dtype: str) -> int:
        """How many ``dtype`` values fit in one SIMD register (at least 1)."""
        if self._kind != "cpu":
            raise ValueError(f"vector_lanes is defined for cpu targets, not {self._kind}")
        return max(1, self.vector_width // nbytes(check_dtype(dtype)))

    # printing, serialisation, identity ---------------------------------------------
    def __str__(self) -> str:
        parts = [self._kind]
        for key, value in self._attrs:
            if isinstance(value, tuple):
                value = ",".join(value)
            parts.append(f"-{key}={value}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def as_json(self) -> dict[str, Any]:
        """A JSON-compatible dict; ``Target.from_json`` inverts it."""
        out: dict[str, Any] = {"kind": self._kind}
        for key, value in self._attrs:
            out[key] = list(value) if isinstance(value, tuple) else value
        return out

    @staticmethod
    def from_json(obj: Mapping[str, Any] | str) -> Target:
        if isinstance(obj, str):
            obj = json.loads(obj)
        return Target(dict(obj))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return self._kind == other._kind and self._attrs == other._attrs

    def __hash__(self) -> int:
        return hash((self._kind, self._attrs))

    def __reduce__(self):
        return (Target.from_json, (self.as_json(),))


# ----------------------------------------------------------------------------- parsing


def _canonical_kind(kind: Any) -> str:
    if not isinstance(kind, str) or kind.lower() not in _KIND_ALIASES:
        raise ValueError(
            f"unknown target kind {kind!r}; expected one of: {', '.join(sorted(_KIND_ALIASES))}"
        )
    return _KIND_ALIASES[kind.lower()]


def _parse_string(text: str) -> tuple[str, dict[str, Any]]:
    tokens = shlex.split(text)
    if not tokens:
        raise ValueError("empty target string; expected e.g. 'cpu' or 'llvm -num-cores=4'")
    kind = _canonical_kind(tokens[0])
    attrs: dict[str, Any] = {}
    i = 1
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("-"):
            raise ValueError(f"in target {text!r}: expected '-name=value', got {tok!r}")
        name, eq, value = tok.lstrip("-").partition("=")
        if not eq:  # "-num-cores 4" or a bare flag
            if i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                value = tokens[i + 1]
                i += 1
            else:
                value = "true"
        attrs[name.replace("-", "_")] = value
        i += 1
    return kind, attrs


def _check_attrs(kind: str, attrs: dict[str, Any]) -> dict[str, Any]:
    schema = _ATTRS[kind]
    out: dict[str, Any] = {}
    for name, value in attrs.items():
        key = name.replace("-", "_")
        if key not in schema:
            raise ValueError(
                f"unknown attribute {name!r} for target kind {kind}; accepted: {', '.join(schema)}"
            )
        typ = schema[key][0]
        out[key] = _convert(kind, key, typ, value)
    return out


def _convert(kind: str, key: str, typ: type, value: Any) -> Any:
    where = f"target {kind} attribute {key}"
    if typ is int:
        if isinstance(value, bool):
            raise ValueError(f"{where} must be a positive integer, got {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where} must be a positive integer, got {value!r}") from None
        if number <= 0 or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(f"{where} must be a positive integer, got {value!r}")
        return number
    if typ is tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where} must be a list of strings, got {value!r}")
        return tuple(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _complete(kind: str, attrs: dict[str, Any]) -> dict[str, Any]:
    if kind == "cuda":
        out = {**_CUDA_DEFAULTS, **attrs}
        out.setdefault("max_shared_memory_per_block_optin", _cuda_shared_optin(out["arch"]))
        return out
    host = host_cpu_info()
    out = dict(attrs)
    foreign = _foreign_arch(out.get("mtriple"))
    out.setdefault("mcpu", "generic" if foreign else "native")
    out.setdefault("num_cores", host.physical_cores)
    if "vector_width" not in out:
        out["vector_width"] = _default_vector_width(
            out["mcpu"], out.get("mattr", ()), host, foreign
        )
    out.setdefault("cache_line_bytes", host.cache_line_bytes)
    for level in (1, 2, 3):
        key = f"l{level}_cache_bytes"
        value = getattr(host, key)
        if key not in out and value is not None:
            out[key] = value
    return out


def _cuda_shared_optin(arch: str) -> int:
    """The opt-in shared memory per block of ``sm_XY``; ValueError for an unknown arch."""
    digits = arch.removeprefix("sm_").removeprefix("compute_").rstrip("af")
    if not digits.isdigit():
        raise ValueError(f"cuda arch must look like 'sm_80', got {arch!r}")
    cc = int(digits)
    if cc < 50:
        raise ValueError(f"cuda arch {arch} is older than sm_50, which CUDA 12+ no longer builds")
    known = [k for k in sorted(_CUDA_SHARED_OPTIN) if k <= cc]
    return _CUDA_SHARED_OPTIN[known[-1]]


def _foreign_arch(mtriple: Any) -> str | None:
    """The architecture an ``-mtriple`` names when it is not the host's (aarch64 on an
    x86 host), else None."""
    from .codegen.isa import host_arch, triple_arch  # local: a cycle, isa builds on Target

    arch = triple_arch(mtriple if isinstance(mtriple, str) else None)
    return arch if arch is not None and arch != host_arch() else None


def _default_vector_width(
    mcpu: str, mattr: tuple[str, ...], host: HostCpuInfo, foreign: str | None = None
) -> int:
    features = {m.lstrip("+") for m in mattr if not m.startswith("-")}
    if foreign == "aarch64" or features & {"neon", "dotprod"}:
        return 16
    if "avx512f" in features:
        return 64
    if features & {"avx", "avx2"}:
        return 32
    if mcpu == "native" and not foreign:
        return host.vector_width
    return known_cpu_vector_width(mcpu, foreign) or 16
