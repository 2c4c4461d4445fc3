"""tune_tir / tune_tasks / compile_tir, end to end on a 64x64x64 matmul.

The slow tests compile and measure for real with tiny budgets; the others check the
plumbing with the dummy builder and runner.
"""

import json
import os
import re

import numpy as np
import pytest

from metaschedule.arg_info import ArgInfo
from metaschedule.builder import LocalBuilder
from metaschedule.codegen.build import build
from metaschedule.cost_model import MLPModel, PyCostModel, XGBModel
from metaschedule.database import JSONDatabase, MemoryDatabase
from metaschedule.database.base import measurement_key
from metaschedule.final_selection import is_selected
from metaschedule.measure_callback import MeasureCallback, PyMeasureCallback
from metaschedule.profiler import Profiler
from metaschedule.runner import EvaluatorConfig, LocalRunner
from metaschedule.runtime.module import kernel_cache_dir
from metaschedule.schedule import Schedule, Trace
from metaschedule.search_strategy import EvolutionarySearch, MeasureCandidate, PySearchStrategy
from metaschedule.task_scheduler import GradientBased, RoundRobin
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir.function import IRModule
from metaschedule.tir.stmt import For, ForKind
from metaschedule.tir.structural import structural_hash
from metaschedule.tir_integration import compile_tir, tune_tir
from metaschedule.tune import tune_tasks
from metaschedule.tune_context import TuneContext
from metaschedule.utils import derived_object

N = 64


def template(sch: Schedule) -> None:
    """Tile i and j by sampled factors, put k between them, vectorize the inner j."""
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, i1, k, j1)
    sch.vectorize(j1)


def tiny_evolutionary() -> EvolutionarySearch:
    return EvolutionarySearch(population_size=16, init_min_unmeasured=4, genetic_num_iters=1)


@pytest.fixture(scope="module")
def builder():
    with LocalBuilder(max_workers=2, timeout_sec=120) as b:
        yield b


@pytest.fixture(scope="module")
def runner():
    config = EvaluatorConfig(number=1, repeat=3, min_repeat_ms=0)
    with LocalRunner(timeout_sec=30, evaluator_config=config) as r:
        yield r


@pytest.fixture(scope="module")
def unscheduled_secs():
    """Mean run time of the unscheduled matmul, timed as the runner times candidates."""
    lib = build(matmul(N), "cpu")
    args = [np.random.default_rng(0).random((N, N), dtype=np.float32) for _ in range(2)]
    out = np.zeros((N, N), np.float32)
    lib(*args, out)
    timer = lib.time_evaluator(lib.entry_name, number=1, repeat=3, min_repeat_ms=0)
    return float(np.mean(timer(*args, out).results))


def check_best(db, unscheduled_secs):
    """compile_tir's schedule computes the matmul and its record beats the unscheduled."""
    func = matmul(N)
    sch = compile_tir(db, func, "cpu")
    rng = np.random.default_rng(1)
    a, b = rng.random((N, N), dtype=np.float32), rng.random((N, N), dtype=np.float32)
    c = np.zeros((N, N), np.float32)
    build(sch.mod, "cpu")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    best = db.query_tuning_record(IRModule({"main": func}), "cpu")
    assert best.is_valid and best.mean_run_sec < unscheduled_secs
    return sch


def record_hashes(db):
    """Structural hashes of the modules the records of the database replay to."""
    out = []
    for record in db.get_all_tuning_records():
        sch = Schedule(record.workload.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        out.append(structural_hash(sch.mod))
    return out


# ------------------------------------------------------------------------------ slow
@pytest.mark.compiler
@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["replay-func", "replay-trace", "evolutionary"])
def test_each_strategy_finds_a_fast_correct_schedule(
    strategy, tmp_path, builder, runner, unscheduled_secs
):
    work_dir = str(tmp_path)
    with Profiler() as profiler:
        db = tune_tir(
            matmul(N),
            "cpu",
            work_dir,
            8,
            num_trials_per_iter=4,
            space=template,
            strategy=tiny_evolutionary() if strategy == "evolutionary" else strategy,
            cost_model="random",
            builder=builder,
            runner=runner,
            seed=0,
        )
    # 8 trials, then the final selection's re-measurements of the best
    assert isinstance(db, JSONDatabase) and len(db) > 8
    assert all(r.is_valid for r in db.get_all_tuning_records())
    journal = os.path.join(work_dir, "logs", "final_selection.jsonl")
    assert is_selected(db, IRModule({"main": matmul(N)}), journal)
    check_best(db, unscheduled_secs)
    # the engine times its phases
    for phase in (
        "GenerateDesignSpace",
        "SearchStrategy/GenerateCandidates",
        "Builder",
        "Runner",
        "MeasureCallback/AddToDatabase",
        "FinalSelection",
        "FinalSelection/Builder",
        "FinalSelection/Runner",
    ):
        assert profiler.get()[phase] > 0
    # logs: the scheduler's file and one per task
    logs = sorted(os.listdir(os.path.join(work_dir, "logs")))
    assert logs == ["final_selection.jsonl", "task_0_main.log", "task_scheduler.log"]
    scheduler_log = (tmp_path / "logs" / "task_scheduler.log").read_text()
    assert "[8/8] Task #0 'main'" in scheduler_log and "Total trials: 8" in scheduler_log
    assert "Final selection of task #0 'main': the best is now" in scheduler_log
    assert "Batch of 4 measured" in (tmp_path / "logs" / "task_0_main.log").read_text()
    # the records are in work_dir and outlive the database object
    assert len(JSONDatabase(work_dir=work_dir)) == len(db)


@pytest.mark.compiler
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["xgb", "mlp"])
def test_learned_cost_models_train_during_tuning(kind, tmp_path, builder, runner, unscheduled_secs):
    model = (
        XGBModel(num_warmup_samples=4, early_stopping_rounds=5)
        if kind == "xgb"
        else MLPModel(num_warmup_samples=4, epochs=10, hidden_sizes=(16,))
    )
    db = tune_tir(
        matmul(N),
        "cpu",
        str(tmp_path),
        12,
        num_trials_per_iter=4,
        space=template,
        strategy=tiny_evolutionary(),
        cost_model=model,
        builder=builder,
        runner=runner,
        seed=1,
        final_selection_top_k=0,
    )
    assert len(db) == 12
    assert model.data_size == sum(r.is_valid for r in db.get_all_tuning_records()) >= 8
    trained = model.booster if kind == "xgb" else model.params
    assert trained is not None
    assert len(set(record_hashes(db))) == 12  # the evolutionary search never repeats
    check_best(db, unscheduled_secs)


@pytest.mark.compiler
@pytest.mark.slow
def test_resuming_does_not_measure_again(tmp_path, builder, runner):
    work_dir = str(tmp_path)
    kwargs = {
        "num_trials_per_iter": 4,
        "space": template,
        "cost_model": "random",
        "builder": builder,
        "runner": runner,
        "final_selection_top_k": 0,
    }
    db = tune_tir(matmul(N), "cpu", work_dir, 8, strategy=tiny_evolutionary(), seed=2, **kwargs)
    first = record_hashes(db)
    assert len(first) == 8
    # the same call again: the budget is spent, nothing is measured
    db2 = tune_tir(matmul(N), "cpu", work_dir, 8, strategy=tiny_evolutionary(), seed=2, **kwargs)
    assert record_hashes(db2) == first
    # a larger budget tunes only the difference
    db3 = tune_tir(matmul(N), "cpu", work_dir, 16, strategy=tiny_evolutionary(), seed=2, **kwargs)
    hashes = record_hashes(db3)
    assert len(hashes) == 16 and hashes[:8] == first
    assert len(set(hashes)) == 16  # same seed, yet nothing measured twice


@pytest.mark.compiler
@pytest.mark.slow
def test_two_tasks_under_gradient_based_both_get_trials(tmp_path, builder, runner):
    mod = IRModule({"big": matmul(N), "small": matmul(32)})
    db = tune_tir(
        mod,
        "cpu",
        str(tmp_path),
        12,
        num_trials_per_iter=4,
        space=template,
        strategy="replay-trace",
        cost_model="random",
        task_scheduler=GradientBased(seed=0),
        builder=builder,
        runner=runner,
        seed=3,
        final_selection_top_k=0,
    )
    per_task = {
        name: sum(
            r.workload is db.commit_workload(IRModule({"main": mod[name]}))
            for r in db.get_all_tuning_records()
        )
        for name in mod
    }
    assert sum(per_task.values()) == 12 and min(per_task.values()) >= 4
    logs = sorted(os.listdir(tmp_path / "logs"))
    assert logs == ["task_0_big.log", "task_1_small.log", "task_scheduler.log"]
    sch = compile_tir(db, mod["small"], "cpu")
    a, b = np.ones((32, 32), np.float32), np.full((32, 32), 2.0, np.float32)
    c = np.zeros((32, 32), np.float32)
    build(sch.mod, "cpu")(a, b, c)
    np.testing.assert_allclose(c, a @ b)


@derived_object
class VectorWidthModel(PyCostModel):
    """A user's cost model: wider vectorized loops score higher."""

    def __init__(self):
        self.updates = 0
        self.predictions = 0

    def load(self, path):
        pass

    def save(self, path):
        pass

    def update(self, context, candidates, results):
        assert all(r.error_msg is None for r in results)
        self.updates += len(candidates)

    def predict(self, context, candidates):
        self.predictions += len(candidates)
        return np.array([_vector_width(c.sch.mod["main"].body) for c in candidates], float)


def _vector_width(stmt) -> int:
    from metaschedule.tir.functor import post_order_visit

    widths = [1]

    def visit(node):
        if isinstance(node, For) and node.kind is ForKind.VECTORIZED:
            widths.append(node.extent.value)

    post_order_visit(stmt, visit)
    return max(widths)


@derived_object
class RankedRandom(PySearchStrategy):
    """A user's strategy: sample 3x the batch at random, measure what the model ranks best."""

    def _initialize_with_tune_context(self, context):
        self.context = context

    def pre_tuning(
        self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None
    ):
        self.left, self.per_iter = max_trials, num_trials_per_iter
        self.spaces = [Trace(s.trace.insts, {}) for s in design_spaces]
        self.cost_model = cost_model
        self.rng = np.random.default_rng(0)
        self.notified = 0

    def generate_measure_candidates(self):
        if self.left <= 0:
            return None
        pool = []
        for _ in range(3 * self.per_iter):
            sch = Schedule(self.context.mod, seed=int(self.rng.integers(2**31 - 1)))
            self.spaces[0].apply_to_schedule(sch, remove_postproc=True)
            pool.append(MeasureCandidate(sch, ArgInfo.from_entry_func(self.context.mod)))
        scores = self.cost_model.predict(self.context, pool)
        order = np.argsort(-scores, kind="stable")[: min(self.per_iter, self.left)]
        return [pool[i] for i in order]

    def notify_runner_results(self, measure_candidates, results):
        self.left -= len(measure_candidates)
        self.notified += len(results)

    def clone(self):
        return RankedRandom()


@pytest.mark.compiler
@pytest.mark.slow
def test_user_cost_model_and_search_strategy_plug_in(tmp_path, builder, runner, unscheduled_secs):
    model, strategy = VectorWidthModel(), RankedRandom()
    db = tune_tir(
        matmul(N),
        "cpu",
        str(tmp_path),
        8,
        num_trials_per_iter=4,
        space=template,
        strategy=strategy,
        cost_model=model,
        builder=builder,
        runner=runner,
        seed=4,
        task_scheduler="round-robin",
    )
    assert strategy.notified == 8 and model.predictions == 24 and model.updates == 8
    widths = [_vector_width(compile_tir(db, matmul(N), "cpu").mod["main"].body)]
    assert widths[0] >= 8  # the model's preference shows in what was measured
    check_best(db, unscheduled_secs)


# ------------------------------------------------------------------------------ fast
def split_template(sch):
    loop = sch.get_loops(sch.get_block("C"))[0]
    sch.split(loop, sch.sample_perfect_tile(loop, n=2))


def dummy_tune(tmp_path, mod, **kwargs):
    kwargs.setdefault("space", split_template)
    kwargs.setdefault("strategy", "replay-trace")
    kwargs.setdefault("cost_model", "random")
    return tune_tir(
        mod,
        "cpu",
        str(tmp_path),
        kwargs.pop("trials", 8),
        num_trials_per_iter=4,
        builder=DummyBuilder(),
        runner=DummyRunner(),
        **kwargs,
    )


def test_plumbing_with_dummies(tmp_path):
    db = dummy_tune(
        tmp_path,
        matmul(8),
        database="memory",
        task_scheduler="round-robin",
        seed=5,
        final_selection_top_k=0,
    )
    assert isinstance(db, MemoryDatabase) and len(db) == 8
    assert not os.path.exists(tmp_path / "database_workload.json")
    assert sorted(os.listdir(tmp_path / "logs")) == ["task_0_main.log", "task_scheduler.log"]
    sch = compile_tir(db, matmul(8), "cpu")
    assert any(inst.kind.name == "Split" for inst in sch.trace.insts)


def test_the_same_seed_gives_the_same_candidates(tmp_path):
    def traces(sub):
        db = dummy_tune(tmp_path / sub, matmul(16), database="memory", seed=7)
        return [str(r.trace) for r in db.get_all_tuning_records()]

    assert traces("a") == traces("b")


def test_special_space_and_per_task_limit(tmp_path):
    def fuse_template(sch):
        i, j, _ = sch.get_loops(sch.get_block("C"))
        sch.fuse(i, j)

    mod = IRModule({"a": matmul(8), "b": matmul(4)})
    db = dummy_tune(
        tmp_path,
        mod,
        trials=100,
        max_trials_per_task=4,
        special_space={"b": fuse_template},
        task_scheduler=RoundRobin(),
        final_selection_top_k=0,
    )
    assert len(db) == 8  # each task stops at max_trials_per_task
    kinds = {
        name: {i.kind.name for i in compile_tir(db, mod[name], "cpu").trace.insts} for name in mod
    }
    assert "Split" in kinds["a"] and "Fuse" not in kinds["a"]
    assert "Fuse" in kinds["b"] and "Split" not in kinds["b"]
    with pytest.raises(ValueError, match="special_space names c, which the module does not"):
        dummy_tune(tmp_path, mod, special_space={"c": fuse_template})


def test_a_single_callback_and_task_loggers_are_restored(tmp_path):
    seen = []

    @derived_object
    class Count(PyMeasureCallback):
        def apply(
            self, task_scheduler, task_id, measure_candidates, builder_results, runner_results
        ):
            seen.append(len(runner_results))

    ctx = TuneContext(
        matmul(8),
        target="cpu",
        space_generator=split_template,
        search_strategy="replay-trace",
        rand_state=0,
    )
    own_logger = ctx.logger
    scheduler = RoundRobin()
    db = tune_tasks(
        tasks=[ctx],
        task_weights=[1.0],
        work_dir=str(tmp_path),
        max_trials_global=8,
        num_trials_per_iter=4,
        builder=DummyBuilder(),
        runner=DummyRunner(),
        database="memory",
        cost_model="random",
        measure_callbacks=Count(),
        task_scheduler=scheduler,
    )
    assert seen == [4, 4] and len(db) == 0  # no AddToDatabase among the callbacks
    assert ctx.logger is own_logger and "logger" not in scheduler.__dict__


def test_errors_at_the_boundary(tmp_path):
    ctx = TuneContext(
        matmul(8), target="cpu", space_generator=split_template, search_strategy="replay-trace"
    )
    with pytest.raises(ValueError, match="1 tasks but 2 task_weights"):
        tune_tasks(
            tasks=[ctx], task_weights=[1.0, 2.0], work_dir=str(tmp_path), max_trials_global=4
        )
    with pytest.raises(ValueError, match="unknown task scheduler kind 'fifo'"):
        dummy_tune(tmp_path, matmul(8), task_scheduler="fifo")
    with pytest.raises(ValueError, match="database must be a Database, 'json' or 'memory'"):
        dummy_tune(tmp_path, matmul(8), database="sqlite3")
    with pytest.raises(ValueError, match="no valid tuning record of this workload"):
        compile_tir(MemoryDatabase(), matmul(8), "cpu")
    with pytest.raises(ValueError, match="one function at a time"):
        compile_tir(MemoryDatabase(), IRModule({"a": matmul(8), "b": matmul(4)}), "cpu")


def test_callbacks_default_kind_is_the_seeds():
    assert [type(c).__name__ for c in MeasureCallback.create("default")] == [
        "AddToDatabase",
        "RemoveBuildArtifact",
        "UpdateCostModel",
    ]


@pytest.mark.compiler
@pytest.mark.slow
def test_the_final_selection_reuses_the_build_cache_and_compile_tir_returns_its_winner(
    tmp_path, monkeypatch, unscheduled_secs
):
    # a kernel cache of its own (its workers inherit it): tests running beside this one
    # build into the shared cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    work_dir = str(tmp_path / "work")
    config = EvaluatorConfig(number=1, repeat=3, min_repeat_ms=0)
    with (
        LocalBuilder(max_workers=1, timeout_sec=120) as builder,
        LocalRunner(timeout_sec=30, evaluator_config=config) as runner,
    ):
        kwargs = {
            "num_trials_per_iter": 4,
            "space": template,
            "strategy": tiny_evolutionary(),
            "cost_model": "random",
            "builder": builder,
            "runner": runner,
            "seed": 4,
        }
        db = tune_tir(matmul(N), "cpu", work_dir, 6, final_selection_top_k=0, **kwargs)
        assert len(db) == 6
        cache = kernel_cache_dir()
        assert cache.startswith(str(tmp_path))
        built = {f for f in os.listdir(cache) if re.fullmatch(r"[0-9a-f]{32}\.so", f)}
        assert built
        # the same call with the final selection: nothing to tune, the selection runs
        with Profiler() as profiler:
            db = tune_tir(matmul(N), "cpu", work_dir, 6, final_selection_top_k=3, **kwargs)
    assert {f for f in os.listdir(cache) if re.fullmatch(r"[0-9a-f]{32}\.so", f)} == built
    assert profiler.get()["FinalSelection"] > 0 and "SearchStrategy/GenerateCandidates" not in (
        profiler.get()
    )
    assert len(db) > 6  # the re-measurements
    journal = os.path.join(work_dir, "logs", "final_selection.jsonl")
    entries = [json.loads(line) for line in open(journal)]
    assert entries[-1]["done"] and is_selected(db, IRModule({"main": matmul(N)}), journal)
    best = db.query_tuning_record(IRModule({"main": matmul(N)}), "cpu")
    assert measurement_key(best) == entries[-1]["best"]
    assert best.run_secs == [pytest.approx(entries[-1]["best_secs"])]
    sch = check_best(db, unscheduled_secs)
    assert str(sch.trace) == str(best.as_measure_candidate().sch.trace)
