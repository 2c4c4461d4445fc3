"""Target parsing, host-derived attributes, serialisation and errors."""

from __future__ import annotations

import os
import pickle

import pytest

from metaschedule import target as target_mod
from metaschedule.target import Target, host_cpu_info


def test_cpu_aliases_and_defaults():
    t = Target("cpu")
    assert t.kind == "cpu" and Target("llvm") == t
    assert t.mcpu == "native"
    assert t.num_cores == host_cpu_info().physical_cores >= 1
    assert t.vector_width in (16, 32, 64)
    assert t.cache_line_bytes > 0
    assert t.vector_lanes("float32") == t.vector_width // 4
    assert t.vector_lanes("float64") == t.vector_width // 8
    assert t.vector_lanes("int8") == t.vector_width


def test_tvm_style_string_with_both_spellings():
    t = Target("llvm -num-cores=4 -mcpu=skylake")
    assert (t.kind, t.num_cores, t.mcpu, t.vector_width) == ("cpu", 4, "skylake", 32)
    assert Target("llvm -num_cores 4 -mcpu skylake") == t
    assert Target("llvm -mcpu=skylake-avx512").vector_width == 64
    assert Target("cpu -mcpu=x86-64 -mattr=+avx2,+fma").vector_width == 32
    assert Target("cpu -mattr=+avx2,+fma").mattr == ("+avx2", "+fma")


def test_dict_spec_and_json_round_trip():
    t = Target({"kind": "cpu", "num_cores": 2, "vector_width": 16, "mcpu": "native"})
    assert t.num_cores == 2 and t.vector_lanes("float32") == 4
    assert Target.from_json(t.as_json()) == t
    assert Target.from_json('{"kind": "llvm", "num_cores": 2, "vector_width": 16}') == t
    assert Target(str(t)) == t and Target(t) == t
    assert pickle.loads(pickle.dumps(t)) == t
    assert hash(Target(t.as_json())) == hash(t)
    assert Target({"kind": "cpu", "num_cores": 3}) != t
    assert len({t, Target(str(t))}) == 1


def test_cuda_defaults_and_overrides():
    t = Target("cuda")
    assert t.kind == "cuda"
    assert (t.arch, t.max_threads_per_block, t.max_shared_memory_per_block, t.thread_warp_size) == (
        "sm_80",
        1024,
        49152,
        32,
    )
    assert Target("cuda -arch=sm_86").arch == "sm_86"
    assert str(Target("cuda")).startswith("cuda -arch=sm_80")
    with pytest.raises(ValueError, match="cpu"):
        t.vector_lanes("float32")


def test_errors_list_accepted_values():
    with pytest.raises(ValueError, match="unknown target kind 'opencl'.*cpu.*cuda"):
        Target("opencl")
    with pytest.raises(ValueError, match="unknown attribute 'foo'.*num_cores"):
        Target("cpu -foo=1")
    with pytest.raises(ValueError, match="unknown attribute 'num_cores' for target kind cuda"):
        Target({"kind": "cuda", "num_cores": 4})
    with pytest.raises(ValueError, match="num_cores must be a positive integer, got 'x'"):
        Target("cpu -num-cores=x")
    with pytest.raises(ValueError, match="positive integer"):
        Target({"kind": "cpu", "num_cores": 0})
    with pytest.raises(ValueError, match="'kind' key"):
        Target({"num_cores": 2})
    with pytest.raises(TypeError, match="Target expects"):
        Target(3)
    with pytest.raises(AttributeError, match="has no attribute 'arch'"):
        _ = Target("cpu").arch
    with pytest.raises(AttributeError, match="immutable"):
        Target("cpu").num_cores = 3


def test_cpuinfo_parsing(tmp_path):
    text = (
        "processor\t: 0\nphysical id\t: 0\ncore id\t: 0\nflags\t: fpu sse2 avx avx2\n\n"
        "processor\t: 1\nphysical id\t: 0\ncore id\t: 0\nflags\t: fpu sse2 avx avx2\n\n"
        "processor\t: 2\nphysical id\t: 0\ncore id\t: 1\nflags\t: fpu sse2 avx avx2\n\n"
        "processor\t: 3\nphysical id\t: 1\ncore id\t: 0\nflags\t: fpu sse2 avx avx2\n"
    )
    assert target_mod._physical_cores(text) == 3  # hyperthreads counted once
    assert target_mod._physical_cores("processor : 0\n") == (os.cpu_count() or 1)
    assert target_mod._vector_width_from_flags(text) == 32
    assert target_mod._vector_width_from_flags("flags : sse2 avx512f") == 64
    assert target_mod._vector_width_from_flags("Features : fp asimd") == 16
    assert target_mod._parse_size("48K") == 48 * 1024 and target_mod._parse_size("2M") == 2**21
    zen5 = "vendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nflags\t: avx2 avx512f\n"
    assert target_mod._cpuinfo_field(zen5, "cpu family") == "26"
    assert target_mod._cpuinfo_field(zen5, "vendor_id") == "AuthenticAMD"
    assert target_mod._cpuinfo_field(zen5, "stepping") is None
    assert "avx512f" in target_mod._cpu_flags(zen5)


def test_datapath_width_by_vendor_and_family():
    from metaschedule.target import vector_datapath_bits

    assert vector_datapath_bits("AuthenticAMD", 25, True) == 256  # Zen 4
    assert vector_datapath_bits("AuthenticAMD", 23, False) == 256  # Zen 2
    assert vector_datapath_bits("AuthenticAMD", 26, True) == 512  # Zen 5
    assert vector_datapath_bits("GenuineIntel", 6, True) == 512
    assert vector_datapath_bits("GenuineIntel", 6, False) is None
    assert vector_datapath_bits(None, None, True) is None


def test_is_host_needs_the_hosts_cpu_and_cache_sizes():
    from metaschedule.target import is_host
    from metaschedule.testing.hosts import ZEN4, ZEN5, native_target

    assert is_host(native_target(ZEN5), ZEN5)
    assert not is_host(native_target(ZEN5), ZEN4)  # recorded on a Zen 5, asked on a Zen 4
    # TVM users name the host's CPU ("znver5", LLVM's name) rather than "native"
    assert is_host(native_target(ZEN5, mcpu="znver5"), ZEN5)
    assert not is_host(native_target(ZEN5, mcpu="znver4"), ZEN5)
    assert not is_host(None, ZEN5)


@pytest.mark.parametrize(
    "vendor, family, model, name",
    [
        ("AuthenticAMD", 26, 2, "znver5"),
        ("AuthenticAMD", 25, 0x11, "znver4"),
        ("AuthenticAMD", 25, 0x61, "znver4"),
        ("AuthenticAMD", 25, 0x01, "znver3"),
        ("AuthenticAMD", 25, 0x21, "znver3"),
        ("AuthenticAMD", 23, 0x31, "znver2"),
        ("AuthenticAMD", 23, 0x01, "znver1"),
        ("GenuineIntel", 6, 0x8F, "sapphirerapids"),
        ("GenuineIntel", 6, 0x55, "skylake-avx512"),
        ("GenuineIntel", 6, 0x3F, "haswell"),
        ("GenuineIntel", 6, 0x01, None),
        ("CentaurHauls", 7, 1, None),
        (None, None, None, None),
    ],
)
def test_the_hosts_cpu_is_named_as_llvm_names_it(vendor, family, model, name):
    from metaschedule.target import cpu_name

    assert cpu_name(vendor, family, model) == name
