"""relax_integration: extract_tasks, tune_relax, compile_relax over graph functions."""

import json
import logging

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import graph
from metaschedule import relax_integration as ri
from metaschedule.graph import GraphBuilder
from metaschedule.graph.default_times import (
    DEFAULT_SCHEDULES_FILE,
    load_default_times,
    save_default_times,
    workload_key,
)


def _mlp(layers=3, width=16):
    """A model with repeated identical layers: one task of weight ``layers - 1``."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    y = b.input("x", (4, 8))
    w = b.const((rng.standard_normal((8, width)) * 0.3).astype("float32"), "w_in")
    y = b.call("relu", [b.call("matmul", [y, w])])
    for i in range(layers - 1):
        w = b.const((rng.standard_normal((width, width)) * 0.3).astype("float32"), f"w{i}")
        bias = b.const(rng.standard_normal(width).astype("float32"), f"b{i}")
        y = b.call("relu", [b.call("add", [b.call("matmul", [y, w]), bias])])
    return b.finish([y]), rng


@pytest.fixture(scope="module")
def runner():
    config = ms.runner.EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)
    with ms.runner.LocalRunner(timeout_sec=30, evaluator_config=config) as r:
        yield r


@pytest.fixture(scope="module")
def builder():
    with ms.builder.LocalBuilder(max_workers=2, timeout_sec=120) as b:
        yield b


def _quick(**kw):
    """Tuning arguments that keep a test short: tiny search, one measurement each."""
    return dict(num_trials_per_iter=4, cost_model="random", strategy="replay-trace", seed=0, **kw)


def test_extract_tasks_deduplicates_with_weights():
    f, _ = _mlp()
    tasks = ri.extract_tasks(f, "llvm")
    assert [(t.task_name, t.weight) for t in tasks] == [
        ("fused_matmul_relu", 1),
        ("fused_matmul_add_relu", 2),
    ]
    t = tasks[1]
    assert isinstance(t, ms.ExtractedTask) and list(t.mod) == ["main"]
    assert t.target.kind == "cpu" and t.dispatched == [t.mod]


def test_extract_tasks_params_bind_inputs():
    b = GraphBuilder()
    x = b.input("x", (2, 4))
    w = b.input("w", (4, 4))
    f = b.finish([b.call("matmul", [x, w])])
    tasks = ri.extract_tasks(f, "llvm", params={"w": np.eye(4, dtype="float32")})
    assert [t.task_name for t in tasks] == ["matmul"]
    assert [p.name for p in tasks[0].mod["main"].params][:1] == ["p0"]
    with pytest.raises(ValueError, match="not inputs"):
        ri.extract_tasks(f, "llvm", params={"v": np.eye(4, dtype="float32")})


def test_extracted_tasks_to_tune_contexts():
    f, _ = _mlp()
    tasks = ri.extract_tasks(f, "llvm")
    contexts, weights = ri.extracted_tasks_to_tune_contexts(tasks, "unused", seed=3)
    assert weights == [1.0, 2.0]
    assert [c.task_name for c in contexts] == [t.task_name for t in tasks]
    assert all(isinstance(c, ms.TuneContext) and c.space_generator is not None for c in contexts)
    assert contexts[0].space_generator is not contexts[1].space_generator


def test_tune_relax_rejects_unknown_op_names(tmp_path):
    f, _ = _mlp()
    with pytest.raises(ValueError, match="match no task; the tasks are fused_matmul_relu"):
        ri.tune_relax(f, None, "llvm", str(tmp_path), 8, op_names=["conv2d"])


@pytest.mark.compiler
def test_compile_relax_warns_per_function_without_records(caplog):
    f, _ = _mlp()
    db = ms.Database.create("memory")
    with caplog.at_level(logging.WARNING, logger="metaschedule.relax_integration"):
        ri.compile_relax(db, f, "llvm", None, enable_warning=True)
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2 and "fused_matmul_relu" in msgs[0]


@pytest.mark.compiler
@pytest.mark.slow
def test_tune_compile_save_load_run(tmp_path, builder, runner):
    f, rng = _mlp()
    work = str(tmp_path / "work")
    db = ri.tune_relax(
        f,
        None,
        "llvm",
        work,
        max_trials_global=8,
        max_trials_per_task=4,
        **_quick(builder=builder, runner=runner),
    )
    tasks = ri.extract_tasks(f, "llvm")
    for t in tasks:
        assert db.query_tuning_record(t.mod, t.target) is not None, t.task_name
    exe = ri.compile_relax(db, f, "llvm", None)
    # each function gets the database's best schedule when it beats the default
    # schedule's time that tune_relax measured, and the default schedule otherwise
    times = load_default_times(str(tmp_path / "work" / DEFAULT_SCHEDULES_FILE))
    target = ms.Target("llvm")
    assert len(times) == len(tasks)
    for t in tasks:
        best = db.query_tuning_record(t.mod, t.target).mean_run_sec
        won = best < times[workload_key(t.mod, target)]
        assert exe.sources[t.task_name] == ("database" if won else "default"), t.task_name
    x = rng.standard_normal((4, 8)).astype("float32")
    want = graph.interpret(f, x)[0]
    np.testing.assert_allclose(exe(x), want, rtol=1e-5, atol=1e-5)
    path = exe.export_library(tmp_path / "mlp.ms")
    np.testing.assert_allclose(graph.load(path)(x=x), want, rtol=1e-5, atol=1e-5)
    # reusing the logs: a reloaded database compiles the same model without measuring
    again = ri.compile_relax(ms.Database.create("json", work_dir=work), f, "llvm", None)
    assert again.module.path == exe.module.path  # the kernel cache served the library
    assert again.sources == exe.sources
    np.testing.assert_allclose(again(x), want, rtol=1e-5, atol=1e-5)


def test_tune_relax_op_names_tunes_a_subset(tmp_path):
    from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner

    f, _ = _mlp()
    runner = DummyRunner()
    db = ri.tune_relax(
        f,
        None,
        "llvm",
        str(tmp_path),
        max_trials_global=4,
        max_trials_per_task=4,
        op_names=["add"],
        database="memory",
        final_selection_top_k=0,
        **_quick(builder=DummyBuilder(), runner=runner),
    )
    assert len(runner.inputs) == 5  # 4 trials, and the default schedule of the task
    tasks = ri.extract_tasks(f, "llvm")
    assert db.query_tuning_record(tasks[1].mod, tasks[1].target) is not None
    assert db.query_tuning_record(tasks[0].mod, tasks[0].target) is None


@pytest.mark.compiler
def test_anchor_block_tasks_share_one_tuned_trace(tmp_path):
    """Layers with the same matmul and different epilogues are one anchor-block task; its
    trace schedules every one of them at compile time (as an anchor trace)."""
    from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner

    rng = np.random.default_rng(1)
    b = GraphBuilder()
    y = b.input("x", (4, 16))
    w = b.const((rng.standard_normal((16, 16)) * 0.3).astype("float32"), "w_in")
    y = b.call("relu", [b.call("matmul", [y, w])])
    for i in range(2):
        w = b.const((rng.standard_normal((16, 16)) * 0.3).astype("float32"), f"w{i}")
        bias = b.const(rng.standard_normal(16).astype("float32"), f"b{i}")
        y = b.call("relu", [b.call("add", [b.call("matmul", [y, w]), bias])])
    f = b.finish([y])
    assert len(ri.extract_tasks(f, "llvm")) == 2
    (task,) = ri.extract_tasks(f, "llvm", module_equality="anchor-block")
    assert task.weight == 3 and len(task.dispatched) == 2
    db = ri.tune_relax(
        f,
        None,
        "llvm",
        str(tmp_path),
        max_trials_global=4,
        database="memory",
        module_equality="anchor-block",
        builder=DummyBuilder(),
        runner=DummyRunner(),
        **_quick(),
    )
    exe = ri.compile_relax(db, f, "llvm", None)
    assert set(exe.sources.values()) == {"database"} and len(exe.sources) == 2
    x = rng.standard_normal((4, 16)).astype("float32")
    np.testing.assert_allclose(exe(x), graph.interpret(f, x)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.compiler
def test_compile_relax_mixes_database_and_default_schedules(tmp_path):
    """A database covering one task: that function from the database, the rest default
    (a conv with its weight packed at compile time); compiling again with the same
    database builds nothing new (the kernel cache serves the library)."""
    from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner

    rng = np.random.default_rng(5)
    b = GraphBuilder()
    x = b.input("x", (1, 4, 6, 6))
    w = b.const(rng.standard_normal((16, 4, 3, 3)).astype("float32") * 0.3, "w")
    y = b.call(
        "relu",
        [b.call("conv2d", [x, w], strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), groups=1)],
    )
    y = b.call("reshape", [y], shape=(1, 576))
    w2 = b.const(rng.standard_normal((576, 8)).astype("float32") * 0.1, "w2")
    y = b.call("matmul", [y, w2])
    f = b.finish([y])
    tasks = ri.extract_tasks(f, "llvm")
    matmul_task = next(t for t in tasks if "matmul" in t.task_name)
    db = ri.tune_relax(
        f,
        None,
        "llvm",
        str(tmp_path),
        max_trials_global=2,
        max_trials_per_task=2,
        op_names=["matmul"],
        database="memory",
        **_quick(builder=DummyBuilder(), runner=DummyRunner()),
    )
    exe = ri.compile_relax(db, f, "llvm", None)
    assert exe.sources[matmul_task.task_name] == "database"
    others = {k: v for k, v in exe.sources.items() if k != matmul_task.task_name}
    # the conv (NHWC on CPUs) and the transposes into and out of it
    assert set(others.values()) == {"default"} and any("conv2d" in k for k in others)
    xv = rng.standard_normal((1, 4, 6, 6)).astype("float32")
    want = graph.interpret(f, xv)[0]
    np.testing.assert_allclose(exe(xv), want, rtol=1e-4, atol=1e-4)
    again = ri.compile_relax(db, f, "llvm", None)
    assert again.module.path == exe.module.path
    np.testing.assert_allclose(again(xv), want, rtol=1e-4, atol=1e-4)


def _record(db, task, run_sec):
    """Commit the task's unscheduled workload as a record measured at ``run_sec``."""
    sch = ms.tir.Schedule(task.mod)
    db.commit_tuning_record(
        ms.database.TuningRecord(
            sch.trace,
            db.commit_workload(task.mod),
            [run_sec],
            task.target,
            ms.arg_info.ArgInfo.from_entry_func(task.mod),
        )
    )


@pytest.mark.compiler
@pytest.mark.parametrize("record_sec, source", [(10.0, "default"), (1e-9, "database")])
def test_compile_relax_prefers_the_faster_of_record_and_default(
    tmp_path, caplog, record_sec, source
):
    """A record slower than the recorded default time loses to the default schedule; a
    faster one is used; the output matches numpy either way."""
    f, rng = _mlp()
    tasks = ri.extract_tasks(f, "llvm")
    db = ms.Database.create("json", work_dir=str(tmp_path))
    for t in tasks:
        _record(db, t, record_sec)
    target = ms.Target("llvm")
    save_default_times(
        str(tmp_path / DEFAULT_SCHEDULES_FILE),
        {workload_key(t.mod, target): 1e-3 for t in tasks},
        {workload_key(t.mod, target): t.task_name for t in tasks},
    )
    with caplog.at_level(logging.WARNING, logger="metaschedule.relax_integration"):
        exe = ri.compile_relax(db, f, "llvm", None, enable_warning=True)
    assert exe.sources == {t.task_name: source for t in tasks}
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2 and all(source in m for m in msgs)
    assert ("not faster than the default" in msgs[0]) == (source == "default")
    x = rng.standard_normal((4, 8)).astype("float32")
    np.testing.assert_allclose(exe(x), graph.interpret(f, x)[0], rtol=1e-5, atol=1e-5)
    # the same through a SQLite database in the same folder
    sq = ms.database.SQLiteDatabase(str(tmp_path / "db.sqlite"))
    for t in tasks:
        _record(sq, t, record_sec)
    assert ri.compile_relax(sq, f, "llvm", None).sources == exe.sources


@pytest.mark.compiler
@pytest.mark.parametrize("text", ["{not json", '{"format": "other"}', None])
def test_compile_relax_malformed_default_times_warns(tmp_path, text):
    f, rng = _mlp()
    tasks = ri.extract_tasks(f, "llvm")
    db = ms.Database.create("json", work_dir=str(tmp_path))
    for t in tasks:
        _record(db, t, 10.0)
    path = tmp_path / DEFAULT_SCHEDULES_FILE
    if text is None:  # a well-formed file with one bad entry and one good one
        key = workload_key(tasks[0].mod, ms.Target("llvm"))
        good = {"shash": key[0], "target": key[1], "run_sec": 1e-3}
        bad = {"shash": "1", "run_sec": "fast"}
        path.write_text(
            '{"format": "metaschedule-default-schedules", "version": 1, "entries": '
            + json.dumps([bad, good])
            + "}"
        )
        with pytest.warns(RuntimeWarning, match="1 malformed entries"):
            exe = ri.compile_relax(db, f, "llvm", None)
        assert list(exe.sources.values()) == ["default", "database"]
    else:
        path.write_text(text)
        with pytest.warns(RuntimeWarning, match=DEFAULT_SCHEDULES_FILE):
            exe = ri.compile_relax(db, f, "llvm", None)
        assert set(exe.sources.values()) == {"database"}
    x = rng.standard_normal((4, 8)).astype("float32")
    np.testing.assert_allclose(exe(x), graph.interpret(f, x)[0], rtol=1e-5, atol=1e-5)


def test_tune_relax_records_default_times_once(tmp_path):
    """tune_relax measures each task's default schedule with its runner, once per
    work_dir; a failed measurement leaves no time."""
    from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner

    f, _ = _mlp()
    tasks = ri.extract_tasks(f, "llvm")
    calls = []

    def secs(path):
        calls.append(path)
        return [1e10] if len(calls) == 1 else [2e-3]  # the first default fails

    runner = DummyRunner(secs)
    kw = {
        "max_trials_global": 2,
        "max_trials_per_task": 1,
        "database": "memory",
        "final_selection_top_k": 0,  # the end-of-tuning timing: the next test
    }
    ri.tune_relax(
        f, None, "llvm", str(tmp_path), **kw, **_quick(builder=DummyBuilder(), runner=runner)
    )
    times = load_default_times(str(tmp_path / DEFAULT_SCHEDULES_FILE))
    target = ms.Target("llvm")
    assert times == {workload_key(tasks[1].mod, target): 2e-3}
    n = len(runner.inputs)
    assert n == 2 + 2  # two trials and the two defaults
    ri.tune_relax(
        f, None, "llvm", str(tmp_path), **kw, **_quick(builder=DummyBuilder(), runner=runner)
    )
    assert len(runner.inputs) - n == 2 + 1  # only the default that failed is measured again


@pytest.mark.compiler
def test_tune_relax_ends_timing_each_default_against_the_best(tmp_path):
    """At the end of tune_relax each task's default schedule and best record are timed
    together, interleaved: compile_relax's choice compares times of the same moments, not
    a default timed before tuning under another load; a second run times nothing."""
    from metaschedule.database.base import measurement_key  # local: the record's key
    from metaschedule.graph.default_times import load_default_versus  # local: the file
    from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner

    f, rng = _mlp()
    tasks = ri.extract_tasks(f, "llvm")
    calls: list[str] = []
    defaults: set[str] = set()

    def secs(path):
        calls.append(path)
        if len(calls) <= len(tasks):  # before tuning, the defaults look slow (a busy moment)
            defaults.add(path)
            return [3e-3]
        if path in defaults:
            return [1e-3]
        return [2e-3 + 1e-6 * (hash(path) % 100)]  # tuned schedules: distinct, no ties

    runner = DummyRunner(secs)
    work = str(tmp_path / "work")
    # no warm start: these timings tell the default schedule from the tuned ones, and a
    # warm start would measure the default's trace as a tuned schedule
    kw = {"max_trials_global": 4, "max_trials_per_task": 2, "warm_start": False}
    db = ri.tune_relax(f, None, "llvm", work, **kw, **_quick(builder=DummyBuilder(), runner=runner))
    path = str(tmp_path / "work" / DEFAULT_SCHEDULES_FILE)
    times, versus = load_default_times(path), load_default_versus(path)
    target = ms.Target("llvm")
    for t in tasks:
        key = workload_key(t.mod, target)
        best = db.query_tuning_record(t.mod, t.target)
        assert times[key] == pytest.approx(1e-3), t.task_name
        assert best.mean_run_sec == pytest.approx(2e-3, rel=0.06), t.task_name
        assert versus[key] == measurement_key(best), t.task_name
    assert sum(1 for p in calls if p in defaults) == len(tasks) * (1 + 5)  # before + 5 rounds
    exe = ri.compile_relax(db, f, "llvm", None)
    assert set(exe.sources.values()) == {"default"}
    n = len(runner.inputs)
    ri.tune_relax(f, None, "llvm", work, **kw, **_quick(builder=DummyBuilder(), runner=runner))
    assert len(runner.inputs) == n


@pytest.mark.compiler
def test_timing_the_defaults_leaves_the_final_selection_standing(tmp_path):
    """The default-vs-best timing at the end of tune_relax does not re-rank the database:
    a best record timed slower in those rounds stays the database's best (the final
    selection's choice), compile_relax compares the times of the same rounds, and tuning
    again re-measures nothing."""
    from metaschedule.database.base import measurement_key  # local: the record's key
    from metaschedule.graph.default_times import load_default_versus_secs  # local: the file
    from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner

    f, _ = _mlp()
    tasks = ri.extract_tasks(f, "llvm")
    calls: list[str] = []
    defaults: set[str] = set()

    def secs(path):
        calls.append(path)
        if len(calls) <= len(tasks):
            defaults.add(path)
            return [1e-3]
        if path in defaults:  # the default, timed again with the best
            return [3e-3]
        # tuned: once the defaults are timed again, every tuned kernel looks 2x slower
        slow = 2.0 if any(p in defaults for p in calls[len(tasks) :]) else 1.0
        return [slow * (2e-3 + 1e-6 * (hash(path) % 100))]

    runner = DummyRunner(secs)
    work = str(tmp_path / "work")
    # no warm start: these timings tell the default schedule from the tuned ones, and a
    # warm start would measure the default's trace as a tuned schedule
    kw = {"max_trials_global": 4, "max_trials_per_task": 2, "warm_start": False}
    db = ri.tune_relax(f, None, "llvm", work, **kw, **_quick(builder=DummyBuilder(), runner=runner))
    pairs = load_default_versus_secs(str(tmp_path / "work" / DEFAULT_SCHEDULES_FILE))
    target = ms.Target("llvm")
    for t in tasks:
        best = db.query_tuning_record(t.mod, t.target)
        assert best.mean_run_sec == pytest.approx(2e-3, rel=0.06), t.task_name  # unchanged
        key, tuned_sec = pairs[workload_key(t.mod, target)]
        assert key == measurement_key(best) and tuned_sec > 3e-3, t.task_name
    exe = ri.compile_relax(db, f, "llvm", None)
    # the same rounds decide: the default's 3 ms against the best's ~4.1 (not its 2 ms record)
    assert set(exe.sources.values()) == {"default"}
    n = len(runner.inputs)
    ri.tune_relax(f, None, "llvm", work, **kw, **_quick(builder=DummyBuilder(), runner=runner))
    assert len(runner.inputs) == n
