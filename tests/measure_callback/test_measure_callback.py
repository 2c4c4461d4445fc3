"""The measure callbacks: database records, artifact removal, cost model updates."""

import os
from types import SimpleNamespace

import numpy as np
import pytest

from metaschedule.arg_info import ArgInfo
from metaschedule.builder import BuilderResult
from metaschedule.cost_model import PyCostModel
from metaschedule.database import MAX_RUN_SEC, MemoryDatabase
from metaschedule.measure_callback import (
    AddToDatabase,
    MeasureCallback,
    PyMeasureCallback,
    RemoveBuildArtifact,
    TaskView,
    UpdateCostModel,
    create,
)
from metaschedule.runner import RunnerResult
from metaschedule.schedule import Schedule
from metaschedule.search_strategy import MeasureCandidate
from metaschedule.target import Target
from metaschedule.task_scheduler import RoundRobin, TaskRecord
from metaschedule.testing.tuning_records import matmul
from metaschedule.utils import derived_object


def candidates(n):
    func = matmul(8)
    out = []
    for seed in range(n):
        sch = Schedule(func, seed=seed)
        loop = sch.get_loops(sch.get_block("C"))[0]
        sch.split(loop, sch.sample_perfect_tile(loop, n=2))
        out.append(MeasureCandidate(sch, ArgInfo.from_prim_func(func)))
    return out


def scheduler(database=None, cost_model=None):
    ctx = SimpleNamespace(mod=matmul(8), target=Target("cpu"), task_name="main")
    sched = RoundRobin()
    sched.tasks, sched.database, sched.cost_model = [TaskRecord(ctx, 1.0)], database, cost_model
    return sched


def test_task_view_is_a_read_only_snapshot():
    db = MemoryDatabase()
    sched = scheduler(db)
    sched.tasks[0].latencies.extend([1.0, 2.0])
    view = sched.task_view(0)
    assert isinstance(view, TaskView)
    assert (view.task_id, view.name, view.num_trials) == (0, "main", 2)
    assert view.ctx is sched.tasks[0].ctx and view.mod is view.ctx.mod
    assert view.target == Target("cpu") and view.database is db and view.cost_model is None
    with pytest.raises(AttributeError):
        view.database = None
    with pytest.raises(ValueError, match="task_view"):
        sched.task_view(3)


OK = BuilderResult("dummy://x", None)
BUILD_FAILED = BuilderResult(None, "no compiler")


def test_add_to_database_commits_every_candidate():
    db = MemoryDatabase()
    cands = candidates(3)
    AddToDatabase().apply(
        scheduler(db),
        0,
        cands,
        [OK, BUILD_FAILED, OK],
        [
            RunnerResult([2e-3, 4e-3], None),
            RunnerResult(None, "not run"),
            RunnerResult(None, "crashed"),
        ],
    )
    records = db.get_all_tuning_records()
    assert [r.run_secs for r in records] == [[2e-3, 4e-3], [MAX_RUN_SEC], [MAX_RUN_SEC]]
    assert [r.trace for r in records] == [c.sch.trace for c in cands]
    assert all(
        r.target == Target("cpu") and r.args_info == list(cands[0].args_info) for r in records
    )
    best = db.query_tuning_record(matmul(8))
    assert best.run_secs == [2e-3, 4e-3]


def test_add_to_database_without_database_does_nothing():
    # not even inside a database scope: the callback commits only to the scheduler's own
    # database, never to the ambient one
    ambient, sched = MemoryDatabase(), scheduler(None)
    with ambient:
        AddToDatabase().apply(sched, 0, candidates(1), [OK], [RunnerResult([1.0], None)])
    assert sched.database is None
    assert len(ambient) == 0 and not ambient.has_workload(matmul(8))


def test_remove_build_artifact(tmp_path):
    own = tmp_path / "build-1"
    own.mkdir()
    (own / "artifact.so").write_bytes(b"x")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "artifact.so").write_bytes(b"x")
    (shared / "other.txt").write_text("keep")
    results = [
        BuilderResult(str(own / "artifact.so"), None),
        BuilderResult(str(shared / "artifact.so"), None),
        BuilderResult("dummy://123", None),
        BuilderResult(None, "failed"),
        BuilderResult(str(tmp_path / "gone.so"), None),
    ]
    RemoveBuildArtifact().apply(scheduler(), 0, candidates(5), results, [None] * 5)
    assert not own.exists()  # the artifact's own folder, left empty, is removed
    assert sorted(os.listdir(shared)) == ["other.txt"]


@derived_object
class RecordingModel(PyCostModel):
    def __init__(self):
        self.updates = []

    def load(self, path):
        pass

    def save(self, path):
        pass

    def update(self, context, candidates, results):
        self.updates.append((context, list(candidates), list(results)))

    def predict(self, context, candidates):
        return np.zeros(len(candidates))


def test_update_cost_model_learns_from_successes_only():
    model = RecordingModel()
    sched = scheduler(cost_model=model)
    cands = candidates(4)
    results = [
        RunnerResult([1e-3], None),
        RunnerResult(None, "crashed"),
        RunnerResult(None, "not run"),
        RunnerResult([0.0], None),
    ]
    UpdateCostModel().apply(sched, 0, cands, [OK, OK, BUILD_FAILED, OK], results)
    [(ctx, got, got_results)] = model.updates
    assert ctx is sched.tasks[0].ctx
    assert got == [cands[0]] and got_results == [results[0]]
    UpdateCostModel().apply(sched, 0, cands[1:2], [OK], [RunnerResult(None, "x")])
    assert len(model.updates) == 1  # nothing successful: no update
    UpdateCostModel().apply(scheduler(cost_model=None), 0, cands[:1], [OK], results[:1])


def test_create_default():
    callbacks = create("default")
    assert [type(c) for c in callbacks] == [AddToDatabase, RemoveBuildArtifact, UpdateCostModel]
    assert [type(c) for c in MeasureCallback.create("default")] == [
        AddToDatabase,
        RemoveBuildArtifact,
        UpdateCostModel,
    ]
    with pytest.raises(ValueError, match="default"):
        create("verbose")


def test_user_callbacks_must_implement_apply():
    with pytest.raises(TypeError, match="apply"):

        @derived_object
        class Incomplete(PyMeasureCallback):
            pass

    @derived_object
    class Counter(PyMeasureCallback):
        def __init__(self):
            self.n = 0

        def apply(
            self, task_scheduler, task_id, measure_candidates, builder_results, runner_results
        ):
            self.n += len(runner_results)

    counter = Counter()
    counter.apply(scheduler(), 0, candidates(2), [OK, OK], [RunnerResult([1.0], None)] * 2)
    assert counter.n == 2
