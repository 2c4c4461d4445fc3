"""Test-wide settings: hypothesis draws the same examples on every run, so CI is repeatable;
a test that compiles C must say so with ``@pytest.mark.compiler``.

Explore more freely by hand with ``--hypothesis-seed=random`` or a larger
``--hypothesis-profile``.
"""

import importlib

import pytest
from hypothesis import settings

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
        return (yield)
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
