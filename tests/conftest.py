"""Test-wide settings: hypothesis draws the same examples on every run, so CI is repeatable;
a test that compiles C must say so with ``@pytest.mark.compiler``.

Explore more freely by hand with ``--hypothesis-seed=random`` or a larger
``--hypothesis-profile``.
"""

import gc
import importlib
import sys

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


# ----------------------------------------------------------------------------- tiers

#: Tests outside ``slow``/``compiler`` that took 1.5 s or more each (all parameters
#: together) in the fast tier on 2 shared cores (``--durations``, 2026-11-28): other
#: processes, worker pools, many hypothesis examples. They run in the second tier
#: (``-m "slow or compiler"``), so the fast one stays under 2 minutes. A new test of
#: that cost carries ``@pytest.mark.slow`` itself.
SLOW_TESTS = frozenset(
    {
        "tests/codegen/test_cuda_vector.py::test_cooperative_fetch_loads_float4_and_computes_the_same",
        "tests/codegen/test_versioning.py::test_adds_tests_agrees_with_the_transform_on_sampled_schedules",
        "tests/codegen/test_versioning.py::test_the_walk_passing_over_loops_by_their_facts_versions_what_the_full_walk_does",
        "tests/cost_model/test_prior.py::test_merged_register_tiles_are_the_code_generators",
        "tests/cost_model/test_prior.py::test_the_prior_hoists_invariant_loads_where_the_code_generator_does",
        "tests/cost_model/test_prior.py::test_the_register_tiles_are_the_code_generators",
        "tests/database/test_database_processes.py::test_four_json_writers_append_whole_lines_and_lose_nothing",
        "tests/database/test_database_processes.py::test_killing_a_writer_loses_nothing_committed",
        "tests/database/test_database_processes.py::test_two_processes_commit_200_records_each_and_lose_none",
        "tests/database/test_prune_and_full_disk.py::test_json_prune_waits_for_the_lock_commits_take",
        "tests/database/test_sqlite_concurrency.py::test_four_writers_lose_and_duplicate_nothing",
        "tests/faults/test_pool.py::test_a_pool_that_cannot_start_says_why_at_once",
        "tests/faults/test_pool.py::test_builder_and_runner_whose_initializer_fails_raise_quickly",
        "tests/faults/test_pool.py::test_timeout_kills_the_worker_and_its_children",
        "tests/graph/test_graph_torch.py::test_torch_cnn_fuses_batch_norm_and_activation",
        "tests/runner/test_openmp_policy.py::test_a_worker_decides_once_from_the_load_it_sees_and_records_why",
        "tests/runner/test_openmp_policy.py::test_the_users_openmp_settings_win",
        "tests/runner/test_tls_fleet.py::test_rpc_session_run_is_bounded",
        "tests/schedule/test_schedule_property.py::test_random_schedule_keeps_numbers_and_replays",
        "tests/schedule/test_schedule_property.py::test_random_schedule_parallel_at_any_outer_loop",
        "tests/schedule_rule/test_cuda_space.py::test_sampled_schedules_launch_and_compute_what_numpy_does",
        "tests/schedule_rule/test_default_rules.py::test_spaces_of_real_operators_compute_the_same_numbers",
        "tests/schedule_rule/test_pack_panel.py::test_a_matmul_gets_a_space_with_b_packed_under_the_first_tile_level",
        "tests/tir/test_arith_simplify.py::test_simplify_preserves_value_within_ranges",
        "tests/tir/test_structural.py::test_hash_is_stable_across_processes",
        "tests/tir/test_structural_key.py::test_keys_are_equal_exactly_when_the_expressions_are_up_to_renaming",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Sort tests into the tiers of ``.ci/test``: ``slow`` for the tests measured slow
    above; a test marked ``slow`` or ``compiler`` anywhere (function, class, module)
    keeps its marker. (A test that compiles in this process without ``compiler`` fails,
    see :func:`pytest_runtest_call`.)"""
    for item in items:
        if item.nodeid.split("[", 1)[0] in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


# ----------------------------------------------------------------------------- garbage


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After the last test of a module (its module fixtures finalized), collect garbage and
    freeze what is left (``gc.freeze``): the package, numpy, torch, the test modules and
    their caches, hundreds of thousands of objects that every full collection of the
    session would walk again (0.2-0.4 s each). The objects a test makes are collected as
    before."""
    result = yield
    if nextitem is None or getattr(nextitem, "module", None) is not getattr(item, "module", None):
        gc.collect()
        gc.freeze()
    return result


# ----------------------------------------------------------------------------- Dask fleet


@pytest.fixture(autouse=True, scope="module")
def _local_fleet_closed_after_its_module():
    """Close ``metaschedule.testing.dask_cluster.local_fleet()`` after each test module that
    started it. Idle, its scheduler (in this process) and its two worker processes take
    about 8% of a core; kept until exit, they would slow every later test, for minutes, by
    that much. The next module that needs a fleet starts a new one (3-4 s)."""
    yield
    module = sys.modules.get("metaschedule.testing.dask_cluster")
    fleet = getattr(module, "_fleet", None)
    if fleet is not None:
        module._fleet = None
        fleet.close()


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
