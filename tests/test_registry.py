"""The one component registry: built-in kinds, runtime registration, plugins."""

from __future__ import annotations

import sys
import types
from importlib import metadata

import pytest

import metaschedule as ms
from metaschedule import registry
from metaschedule.cost_model import RandomModel
from metaschedule.runner import LocalRunner, PyRunner


@pytest.fixture
def clean():
    """Forget the kinds a test registers."""
    added: list[tuple[str, str]] = []
    yield added
    for family, kind in added:
        registry.unregister(family, kind)


def test_every_family_has_its_builtin_kinds():
    expected = {
        "builder": {"local"},
        "runner": {"local"},
        "database": {"json", "memory", "union", "ordered_union", "sqlite", "schedule_fn"},
        "search_strategy": {"evolutionary", "replay-trace", "replay-func"},
        "space_generator": {"post-order-apply", "union", "schedule-fn"},
        "task_scheduler": {"gradient", "round-robin"},
        "mutator": {"llvm", "cpu"},
        "measure_callback": {"default"},
        "cost_model": {"xgb", "mlp", "random", "none"},
        "feature_extractor": {"per-store-feature"},
        "schedule_rule": {"llvm", "cpu"},
        "postproc": {"llvm", "cpu"},
    }
    assert set(registry.FAMILIES) == set(expected)
    for family, kinds in expected.items():
        assert kinds <= set(registry.kinds(family)), family


@pytest.mark.parametrize(
    "create, family",
    [
        (ms.Builder.create, "builder"),
        (ms.Runner.create, "runner"),
        (ms.Database.create, "database"),
        (ms.SearchStrategy.create, "search strategy"),
        (ms.SpaceGenerator.create, "space generator"),
        (ms.TaskScheduler.create, "task scheduler"),
        (ms.Mutator.create, "mutator"),
        (ms.MeasureCallback.create, "measure callback"),
        (ms.CostModel.create, "cost model"),
        (ms.FeatureExtractor.create, "feature extractor"),
        (ms.ScheduleRule.create, "schedule rule"),
        (ms.Postproc.create, "postprocessor"),
    ],
)
def test_unknown_kind_lists_the_known_ones(create, family):
    with pytest.raises(ValueError, match=f"unknown {family} kind 'nope'; expected one of: "):
        create("nope")


@pytest.mark.parametrize("create", [ms.ScheduleRule.create, ms.Postproc.create, ms.Mutator.create])
@pytest.mark.parametrize("kind", ["cuda-tensorcore", "hexagon"])
def test_unbuilt_target_kinds_are_errors_not_empty_lists(create, kind):
    with pytest.raises(ValueError, match="cpu, cuda, llvm"):
        create(kind)


def test_defaults_are_fresh_lists():
    a, b = ms.ScheduleRule.create("llvm"), ms.ScheduleRule.create("cpu")
    assert [type(r) for r in a] == [type(r) for r in b] and a[0] is not b[0]
    assert [type(p) for p in ms.Postproc.create("cpu")] == [
        type(p) for p in ms.Postproc.create("llvm")
    ]


def test_seed_calls_keep_working(tmp_path):
    assert isinstance(ms.Database.create("json", work_dir=str(tmp_path)), ms.database.JSONDatabase)
    assert isinstance(ms.Database.create(lambda sch: False), ms.database.ScheduleFnDatabase)
    assert ms.CostModel.create("none") is None
    assert isinstance(ms.SearchStrategy.create("replay-trace", 7), ms.search_strategy.ReplayTrace)
    assert isinstance(ms.Runner.create(), LocalRunner)


def test_arguments_that_do_not_fit_name_the_kind():
    with pytest.raises(TypeError, match=r"runner kind 'local' \(.*LocalRunner\).*bogus"):
        ms.Runner.create("local", bogus=1)


def test_third_party_kind_registered_at_runtime(clean):
    @registry.register("runner", "test-remote")
    class RemoteRunner(PyRunner):
        def __init__(self, host: str = "localhost") -> None:
            self.host = host

        def run(self, runner_inputs):
            return []

    clean.append(("runner", "test-remote"))
    runner = ms.Runner.create("test-remote", host="gpu-box")
    assert isinstance(runner, RemoteRunner) and runner.host == "gpu-box"
    assert "test-remote" in registry.kinds("runner")
    with pytest.raises(ValueError, match="already registered"):
        registry.register("runner", "test-remote", LocalRunner)
    registry.register("runner", "test-remote", LocalRunner, replace=True)
    assert isinstance(ms.Runner.create("test-remote"), LocalRunner)


def test_registered_context_manager_restores():
    with registry.registered("cost_model", "random", lambda: "stand-in"):
        assert ms.CostModel.create("random") == "stand-in"
    assert isinstance(ms.CostModel.create("random"), RandomModel)


def test_lazy_string_factories(clean):
    ms.schedule_rule.register_default_rules("test-lazy", "metaschedule.schedule_rule:llvm_rules")
    clean.append(("schedule_rule", "test-lazy"))
    assert [type(r) for r in ms.ScheduleRule.create("test-lazy")] == [
        type(r) for r in ms.ScheduleRule.create("llvm")
    ]
    with pytest.raises(TypeError, match="module:function"):
        registry.lazy("no colon")


def test_unknown_family():
    with pytest.raises(ValueError, match="unknown component family 'rocket'"):
        registry.create("rocket", "x")


class _EntryPoint:
    """A stand-in for importlib.metadata.EntryPoint."""

    def __init__(self, name: str, value: str) -> None:
        self.name, self.value = name, value
        self.loads = 0

    def load(self):
        self.loads += 1
        module_name, attr = self.value.split(":")
        return getattr(sys.modules[module_name], attr)


def _fake_plugin(monkeypatch, entry_points: list[_EntryPoint]) -> None:
    def entry_points_of(group: str):
        assert group == registry.ENTRY_POINT_GROUP
        return entry_points

    monkeypatch.setattr(metadata, "entry_points", entry_points_of)


def test_entry_point_plugin_is_loaded_lazily_on_a_miss(monkeypatch, clean):
    plugin = types.ModuleType("fake_ms_plugin")

    class ConstantModel(RandomModel):
        pass

    plugin.ConstantModel = ConstantModel
    monkeypatch.setitem(sys.modules, "fake_ms_plugin", plugin)
    ep = _EntryPoint("cost_model.test-constant", "fake_ms_plugin:ConstantModel")
    other = _EntryPoint("runner.test-other", "fake_ms_plugin:ConstantModel")
    _fake_plugin(monkeypatch, [ep, other])
    clean.append(("cost_model", "test-constant"))

    assert "test-constant" in registry.kinds("cost_model")  # listed before loading
    assert ep.loads == 0
    ms.CostModel.create("random")  # a hit never reads the plugins
    assert ep.loads == 0
    assert isinstance(ms.CostModel.create("test-constant", seed=1), ConstantModel)
    assert isinstance(ms.CostModel.create("test-constant"), ConstantModel)
    assert ep.loads == 1 and other.loads == 0  # loaded once, and only the one asked for


def test_entry_point_may_name_a_module_that_registers_itself(monkeypatch, clean):
    plugin = types.ModuleType("fake_ms_plugin2")

    def load():
        registry.register("task_scheduler", "test-plugged", ms.task_scheduler.RoundRobin)
        return plugin

    ep = _EntryPoint("task_scheduler.test-plugged", "fake_ms_plugin2:x")
    ep.load = load
    _fake_plugin(monkeypatch, [ep])
    clean.append(("task_scheduler", "test-plugged"))
    assert isinstance(ms.TaskScheduler.create("test-plugged"), ms.task_scheduler.RoundRobin)


def test_broken_plugin_says_which(monkeypatch):
    ep = _EntryPoint("builder.test-broken", "missing_module:Thing")
    _fake_plugin(monkeypatch, [ep])
    with pytest.raises(ImportError, match="builder.test-broken.*failed to load"):
        ms.Builder.create("test-broken")
