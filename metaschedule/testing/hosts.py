"""Fake hosts for tests of what depends on the host CPU (:class:`~metaschedule.target.
HostCpuInfo`), and the native targets they would create, so no test depends on the CPU it
runs on."""

from __future__ import annotations

from ..target import HostCpuInfo, Target

__all__ = ["INTEL_AVX512", "UNKNOWN", "ZEN4", "ZEN5", "native_target"]

#: AMD Zen 4 (EPYC, cpu family 25): AVX-512 on 256-bit units, L1D 32 KiB 8-way
ZEN4 = HostCpuInfo(
    physical_cores=2,
    vector_width=64,
    cache_line_bytes=64,
    l1_cache_bytes=32 * 1024,
    l2_cache_bytes=1024 * 1024,
    l3_cache_bytes=32 * 1024 * 1024,
    l1_cache_ways=8,
    l2_cache_ways=8,
    vendor="AuthenticAMD",
    family=25,
    avx512f=True,
    model=0x11,
)
#: AMD Zen 5 (EPYC, cpu family 26): 512-bit units, L1D 48 KiB 12-way, L2 1 MiB 16-way
ZEN5 = HostCpuInfo(
    physical_cores=2,
    vector_width=64,
    cache_line_bytes=64,
    l1_cache_bytes=48 * 1024,
    l2_cache_bytes=1024 * 1024,
    l3_cache_bytes=32 * 1024 * 1024,
    l1_cache_ways=12,
    l2_cache_ways=16,
    vendor="AuthenticAMD",
    family=26,
    avx512f=True,
    model=2,
)
#: an Intel server core with AVX-512 (Sapphire Rapids: L1D 48 KiB 12-way, L2 2 MiB 16-way)
INTEL_AVX512 = HostCpuInfo(
    physical_cores=2,
    vector_width=64,
    cache_line_bytes=64,
    l1_cache_bytes=48 * 1024,
    l2_cache_bytes=2 * 1024 * 1024,
    l3_cache_bytes=None,
    l1_cache_ways=12,
    l2_cache_ways=16,
    vendor="GenuineIntel",
    family=6,
    avx512f=True,
    model=0x8F,
)
#: a host that told nothing: no /proc/cpuinfo fields, no sysfs caches
UNKNOWN = HostCpuInfo(
    physical_cores=1,
    vector_width=16,
    cache_line_bytes=64,
    l1_cache_bytes=None,
    l2_cache_bytes=None,
    l3_cache_bytes=None,
)


def native_target(host: HostCpuInfo, **attrs) -> Target:
    """``Target("cpu")`` as created on ``host`` (``attrs`` override): every attribute
    the host gives is spelled out, so nothing comes from the real one."""
    spec = {
        "kind": "cpu",
        "mcpu": "native",
        "num_cores": host.physical_cores,
        "vector_width": host.vector_width,
        "cache_line_bytes": host.cache_line_bytes,
    }
    for level in (1, 2, 3):
        size = getattr(host, f"l{level}_cache_bytes")
        if size is not None:
            spec[f"l{level}_cache_bytes"] = size
    return Target({**spec, **attrs})
