"""Test-wide settings: hypothesis draws the same examples on every run, so CI is repeatable;
a test that compiles C must say so with ``@pytest.mark.compiler``.

Explore more freely by hand with ``--hypothesis-seed=random`` or a larger
``--hypothesis-profile``.
"""

import importlib

import pytest
from hypothesis import settings

from metaschedule.runtime import UnsupportedIsaError

# the module, not the function metaschedule.codegen re-exports under the same name
codegen_build = importlib.import_module("metaschedule.codegen.build")

settings.register_profile("default", derandomize=True, deadline=None)
settings.load_profile("default")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/codegen/golden/*.c from the current code generator",
    )
    parser.addoption(
        "--as-host",
        default=None,
        metavar="CPU",
        help="run as if the host were this CPU (znver3: AVX2, sse: SSE2 only): the host's "
        "/proc/cpuinfo and -march=native follow it in the test process (not in workers); "
        "finds tests that assume the host's vector width",
    )
    parser.addoption(
        "--fuzz-long",
        action="store_true",
        default=False,
        help="run the fuzzer (tests/fuzz) on many more programs (minutes, not seconds)",
    )


# ----------------------------------------------------------------------------- markers


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Fail a test that compiles C in this process without ``@pytest.mark.compiler``.

    (Compiles in builder worker processes are not seen here; tests that use a real
    ``LocalBuilder`` carry the marker by audit.)
    """
    if item.get_closest_marker("compiler") is not None:
        try:
            return (yield)
        except UnsupportedIsaError as err:  # code of an ISA this host does not run
            pytest.skip(f"the host cannot run it: {err}")
    calls: list[str] = []
    real = codegen_build.compile_shared

    def recording(source: str, *args, **kwargs):
        calls.append(source)
        return real(source, *args, **kwargs)

    codegen_build.compile_shared = recording
    try:
        result = yield
    finally:
        codegen_build.compile_shared = real
    if calls:
        pytest.fail(
            f"{item.nodeid} compiles C ({len(calls)} module(s)) but is not marked "
            "@pytest.mark.compiler; add the marker so that runs without a compiler skip it",
            pytrace=False,
        )
    return result


# ----------------------------------------------------------------------------- --as-host

_AS_HOST = {
    "znver3": (
        "AuthenticAMD",
        25,
        1,
        "fpu sse sse2 pni ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt avx f16c abm bmi1 avx2 bmi2",
    ),
    "sse": ("GenuineIntel", 6, 0x1A, "fpu sse sse2 pni ssse3 cx16 sse4_1 sse4_2 popcnt"),
}


def pytest_configure(config: pytest.Config) -> None:
    name = config.getoption("--as-host")
    if not name:
        return
    if name not in _AS_HOST:
        raise pytest.UsageError(f"--as-host: one of {sorted(_AS_HOST)}, got {name!r}")
    from metaschedule import target as target_mod
    from metaschedule.codegen import compiler, isa

    vendor, family, model, flags = _AS_HOST[name]
    real_read = target_mod._read
    march = "znver3" if name == "znver3" else "x86-64-v2"
    cpuinfo = "".join(
        f"processor : {p}\nvendor_id : {vendor}\ncpu family : {family}\nmodel : {model}\n"
        f"physical id : 0\ncore id : {p}\nflags : {flags}\n\n"
        for p in range(2)
    )

    def read(path: str):
        return cpuinfo if path == "/proc/cpuinfo" else real_read(path)

    real_march = compiler.march_flag

    def march_flag(target):
        flag = real_march(target)
        return f"-march={march}" if flag == "-march=native" else flag

    target_mod._read = read
    compiler.march_flag = march_flag
    target_mod.host_cpu_info.cache_clear()
    isa._ISA_CACHE.clear()
