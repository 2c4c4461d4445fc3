"""MetaSchedule over whole models (TVM's ``meta_schedule.relax_integration``).

The names, arguments and defaults are TVM's; ``mod`` is a :class:`metaschedule.graph.Function`
(our Relax counterpart, from :func:`metaschedule.graph.from_onnx` or ``from_torch``) where
TVM takes a Relax ``IRModule``, and :func:`compile_relax` returns a
:class:`metaschedule.graph.Executable` where TVM returns a ``VMExecutable``.

Typical use::

    mod = ms.graph.from_onnx("model.onnx")
    db = ms.relax_integration.tune_relax(mod, None, "llvm", "work", max_trials_global=640)
    exe = ms.relax_integration.compile_relax(db, mod, "llvm", None)
    y = exe(x=x)
"""

from __future__ import annotations

import logging
import math
import os
import statistics
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from .arg_info import ArgInfo
from .builder import Builder
from .cost_model.base import CostModel
from .database import Database, TuningRecord
from .database.base import measurement_key
from .database.module_equality import ModuleEquality
from .final_selection import DEFAULT_ROUNDS, time_interleaved
from .graph.build import build_executable
from .graph.default_schedule import default_schedule
from .graph.default_times import (
    DEFAULT_SCHEDULES_FILE,
    default_times_path,
    load_default_times,
    load_default_versus,
    load_default_versus_secs,
    measure_default_schedules,
    save_default_times,
    workload_key,
)
from .graph.executable import Executable
from .graph.ir import Function
from .graph.layout import default_layouts
from .graph.lower import LoweredModel, lower_model
from .graph.transform import bind_params
from .measure_callback.base import MeasureCallback
from .report.measure_log import MeasureLog
from .runner import Runner
from .schedule import Schedule
from .search_strategy import SearchStrategy
from .space_generator import SpaceGenerator
from .target import Target
from .task_scheduler import TaskScheduler, WarmStart
from .tir.function import IRModule, PrimFunc
from .tir.structural import structural_equal
from .trace_apply import schedule_using_anchor_trace
from .tune import DEFAULT_FINAL_SELECTION_TOP_K, _component, _ContextMaker, tune_tasks
from .tune_context import TuneContext

__all__ = [
    "ExtractedTask",
    "compile_relax",
    "extract_tasks",
    "extracted_tasks_to_tune_contexts",
    "tune_relax",
]

logger = logging.getLogger("metaschedule.relax_integration")


@dataclass
class ExtractedTask:
    """A tuning task extracted from a model: one distinct PrimFunc.

    Attributes:
        task_name: the fused function's name (``fused_conv2d_add_relu``).
        mod: the workload, a module whose only function is ``main``.
        target: the target.
        dispatched: the modules the task stands for (here: ``[mod]``).
        weight: how many times the model calls the function.
    """

    task_name: str
    mod: IRModule
    target: Target
    dispatched: list[IRModule] = field(default_factory=list)
    weight: int = 1


def _as_function(mod: Function | object) -> Function:
    if isinstance(mod, Function):
        return mod
    raise TypeError(
        f"expected a metaschedule.graph.Function (from ms.graph.from_onnx / "
        f"from_torch), got {type(mod).__name__}"
    )


#: ``desired_layouts`` of extract_tasks / tune_relax / compile_relax: "default" is
#: :func:`metaschedule.graph.layout.default_layouts` of the target (NHWC convolutions on
#: CPUs); None or {} keeps the imported layouts; else as ``convert_layout`` takes them
Layouts = Mapping[str, str | list[str] | tuple[str, ...]] | Literal["default"] | None


def _lower(
    mod: Function, params: dict[str, np.ndarray] | None, target: Target, desired_layouts: Layouts
) -> LoweredModel:
    if isinstance(desired_layouts, str):
        if desired_layouts != "default":
            raise ValueError(
                f"desired_layouts must be 'default', None or a mapping like "
                f"{{'conv2d': 'NHWC'}}, got {desired_layouts!r}"
            )
        desired_layouts = default_layouts(target)
    return lower_model(bind_params(_as_function(mod), params), desired_layouts)


def _workload(func: PrimFunc) -> IRModule:
    return IRModule({"main": func})


def extract_tasks(
    mod: Function,
    target: Target | str,
    params: dict[str, np.ndarray] | None = None,
    module_equality: str = "structural",
    *,
    desired_layouts: Layouts = "default",
) -> list[ExtractedTask]:
    """The tuning tasks of a model: one per distinct fused PrimFunc, with its weight.

    Args:
        mod: the model.
        target: the compilation target.
        params: values for inputs of ``mod`` that are weights (bound as constants).
        module_equality: how functions are deduplicated: "structural" (structural
            equality), "ignore-tensor" (the same: our PrimFuncs hold no tensor data) or
            "anchor-block" (equal anchor blocks, e.g. one task for conv2d + add and
            conv2d + add + relu of the same convolution).
        desired_layouts: the layouts to convert the model to before lowering (an
            addition to TVM's signature): "default" converts convolutions to NHWC on CPU
            targets (:func:`metaschedule.graph.layout.convert_layout`), None keeps the
            imported layouts. Pass the same value to :func:`tune_relax` and
            :func:`compile_relax` so that the records match the compiled functions.

    Returns:
        The tasks, in the order the model first calls them.
    """
    target = target if isinstance(target, Target) else Target(target)
    return _extract(_lower(mod, params, target, desired_layouts), target, module_equality)


def _extract(model: LoweredModel, target: Target, module_equality: str) -> list[ExtractedTask]:
    equality = ModuleEquality(module_equality)
    tasks: list[ExtractedTask] = []
    keys: dict[int, list[int]] = {}
    for name, func in model.funcs.items():
        wl = _workload(func)
        h = equality.hash(wl)
        for i in keys.get(h, []):
            if equality.equal(tasks[i].mod, wl):
                tasks[i].weight += model.weights[name]
                tasks[i].dispatched.append(wl)
                break
        else:
            keys.setdefault(h, []).append(len(tasks))
            tasks.append(ExtractedTask(name, wl, target, [wl], model.weights[name]))
    return tasks


def extracted_tasks_to_tune_contexts(
    extracted_tasks: list[ExtractedTask],
    work_dir: str,
    space: SpaceGenerator.SpaceGeneratorType = "post-order-apply",
    strategy: SearchStrategy.SearchStrategyType = "evolutionary",
    num_threads: Literal["physical", "logical"] | int = "physical",
    seed: int | None = None,
) -> tuple[list[TuneContext], list[float]]:
    """One TuneContext per task (a space and a strategy of its own) and the weights.

    ``work_dir`` is accepted as in TVM (where it names the logs); logs are opened by
    :func:`~metaschedule.tune_tasks`.
    """
    del work_dir
    make_context = _ContextMaker(strategy, seed, num_threads)
    tasks = [make_context(t.mod, t.target, t.task_name, space) for t in extracted_tasks]
    return tasks, [float(t.weight) for t in extracted_tasks]


def tune_relax(
    mod: Function,
    params: dict[str, np.ndarray] | None,
    target: str | Target,
    work_dir: str,
    max_trials_global: int,
    max_trials_per_task: int | None = None,
    op_names: list[str] | None = None,
    *,
    num_trials_per_iter: int = 64,
    builder: Builder | Literal["local"] = "local",
    runner: Runner | Literal["local", "rpc"] = "local",
    database: Database | Literal["json", "memory"] = "json",
    cost_model: CostModel | Literal["xgb", "mlp", "random"] = "xgb",
    measure_callbacks: list[MeasureCallback] | MeasureCallback | Literal["default"] = "default",
    task_scheduler: TaskScheduler | Literal["gradient", "round-robin"] = "gradient",
    space: SpaceGenerator.SpaceGeneratorType = "post-order-apply",
    strategy: SearchStrategy.SearchStrategyType = "evolutionary",
    seed: int | None = None,
    module_equality: str = "structural",
    post_optimization: bool | None = False,
    final_selection_top_k: int = DEFAULT_FINAL_SELECTION_TOP_K,
    desired_layouts: Layouts = "default",
    warm_start: bool = True,
    early_stopping_rounds: int | None = 2,
    early_stopping_threshold: float = 0.01,
) -> Database:
    """Tune the tasks of a model under one task scheduler.

    Args:
        op_names: tune only the tasks whose name contains one of these strings
            (e.g. ``["conv2d"]``); None tunes every task.
        post_optimization: after the search, a Droplet search around each task's best
            record (as in :func:`metaschedule.tune_tir`; an addition to TVM's signature).
        final_selection_top_k: re-measure each task's best records interleaved at the end
            and commit the re-measurements (as in :func:`metaschedule.tune_tasks`; 0: off;
            an addition to TVM's signature).
        desired_layouts: as :func:`extract_tasks`.
        warm_start: start each task from its default schedule and from the best traces of
            sibling tasks (:class:`~metaschedule.task_scheduler.WarmStart`).
        early_stopping_rounds, early_stopping_threshold: stop a task whose best gained
            less than the threshold over that many of its rounds; its budget goes to the
            others (:mod:`metaschedule.task_scheduler.early_stopping`; None: off).
        The others: as :func:`extract_tasks` and :func:`metaschedule.tune_tasks`.

    The last three (additions to TVM's signature) apply to a ``task_scheduler`` given by
    name ("gradient", the default: the budget goes where the model's time is, each task
    weighted by its calls); a scheduler object is used as it is. ``measure_callbacks=
    "default"`` adds a :class:`~metaschedule.report.MeasureLog` (``work_dir/logs/
    measurements.jsonl``), from which ``metaschedule report`` draws the model's estimated
    latency against tuning time.

    Before tuning, each task's default schedule (the one :func:`compile_relax` uses
    without a record) is measured once with the same ``builder`` and ``runner``, and its
    time kept in ``work_dir/default_schedules.json`` (see
    :mod:`metaschedule.graph.default_times`); tasks already there are not measured again.
    A failed measurement leaves the task without a default time. With the final selection
    on, tuning ends by timing each task's default schedule and its best record together,
    interleaved (5 rounds): the record is committed with its median and the default's
    median replaces its time, so :func:`compile_relax` compares times of the same moments.

    Returns:
        The database of tuning records; pass it to :func:`compile_relax`.

    Raises:
        ValueError: ``op_names`` selects no task (the error lists the task names).
    """
    target = target if isinstance(target, Target) else Target(target)
    model = _lower(mod, params, target, desired_layouts)
    tasks = _extract(model, target, module_equality)
    if op_names is not None:
        chosen = [t for t in tasks if any(op in t.task_name for op in op_names)]
        if not chosen:
            raise ValueError(
                f"tune_relax: op_names {op_names} match no task; the tasks are "
                f"{', '.join(t.task_name for t in tasks)}"
            )
        tasks = chosen
    if task_scheduler in ("gradient", "round-robin"):
        task_scheduler = TaskScheduler.create(
            task_scheduler,
            early_stopping_rounds=early_stopping_rounds,
            early_stopping_threshold=early_stopping_threshold,
            warm_start=WarmStart(_default_starts(model)) if warm_start else None,
            **({"seed": seed} if task_scheduler == "gradient" and seed is not None else {}),
        )
    if isinstance(measure_callbacks, str) and measure_callbacks == "default":
        measure_callbacks = [
            MeasureLog(work_dir, predict=False),
            *MeasureCallback.create("default"),
        ]
    contexts, weights = extracted_tasks_to_tune_contexts(
        tasks, work_dir, space, strategy, seed=seed
    )
    owned: list = []
    try:
        builder = _component(builder, Builder, "builder", owned)
        runner = _component(runner, Runner, "runner", owned)
        _record_default_times(model, tasks, target, work_dir, builder, runner)
        database = tune_tasks(
            tasks=contexts,
            task_weights=weights,
            work_dir=work_dir,
            max_trials_global=max_trials_global,
            max_trials_per_task=max_trials_per_task,
            num_trials_per_iter=num_trials_per_iter,
            builder=builder,
            runner=runner,
            database=database,
            cost_model=cost_model,
            measure_callbacks=measure_callbacks,
            task_scheduler=task_scheduler,
            module_equality=module_equality,
            post_optimization=post_optimization,
            final_selection_top_k=final_selection_top_k,
        )
        if final_selection_top_k > 0:
            _time_defaults_against_best(model, tasks, target, work_dir, database, builder, runner)
        return database
    finally:
        for component in owned:
            component.close()


def default_start(ctx: TuneContext, layout_free: Collection[int] | None = ()) -> list[Schedule]:
    """The default schedule of a task's workload (what
    :class:`~metaschedule.task_scheduler.WarmStart` starts ``tune_relax``'s tasks from).

    ``layout_free``: the parameters that are constants of the model (``tune_relax``
    passes them, so the schedule is the one :func:`compile_relax` builds). A matmul's
    weight is then re-laid out by a schedule instruction (``transform_layout``), which a
    trace holds; a convolution's weight is packed by rewriting the function before
    scheduling, which no trace holds: the warm start skips such a schedule and logs why."""
    return [default_schedule(ctx.mod["main"], ctx.target, layout_free)]


def _default_starts(model: LoweredModel):
    """:func:`default_start` with each task's constant parameters as ``layout_free``."""

    def default_schedules(ctx: TuneContext) -> list[Schedule]:
        return default_start(ctx, _constant_params(model, ctx.task_name))

    return default_schedules


def _record_default_times(
    model: LoweredModel,
    tasks: list[ExtractedTask],
    target: Target,
    work_dir: str,
    builder: Builder,
    runner: Runner,
) -> None:
    """Measure the default schedule of each task not yet in ``work_dir``'s default-times
    file and add the times to it (a failure is logged and leaves no time)."""
    path = os.path.join(os.fspath(work_dir), DEFAULT_SCHEDULES_FILE)
    known = load_default_times(path)
    todo, mods = [], []
    for t in tasks:
        key = workload_key(t.mod, target)
        if key in known:
            continue
        try:
            sch = default_schedule(t.mod["main"], target, _constant_params(model, t.task_name))
        except Exception as err:  # noqa: BLE001 - no default time is the only consequence
            logger.warning("tune_relax: no default schedule of %s (%s)", t.task_name, err)
            continue
        todo.append((key, t.task_name))
        mods.append(sch.mod)
    if not mods:
        return
    try:
        results = measure_default_schedules(mods, target, builder, runner)
    except Exception as err:  # noqa: BLE001 - measuring the defaults is best effort
        logger.warning("tune_relax: measuring the default schedules failed (%s)", err)
        return
    times, names = {}, {}
    for (key, name), (sec, error) in zip(todo, results):
        if sec is None:
            logger.warning("tune_relax: the default schedule of %s failed: %s", name, error)
            continue
        times[key], names[key] = sec, name
    if times:
        try:
            save_default_times(path, times, names)
        except OSError as err:
            logger.warning("tune_relax: cannot write %s (%s)", path, err)


def _time_defaults_against_best(
    model: LoweredModel,
    tasks: list[ExtractedTask],
    target: Target,
    work_dir: str,
    database: Database,
    builder: Builder,
    runner: Runner,
    rounds: int = DEFAULT_ROUNDS,
) -> None:
    """The last step of the final selection: time each task's default schedule and its
    best tuned schedule together, interleaved, so that the choice :func:`compile_relax`
    makes between them compares times of the same moments (a default timed once before
    tuning, against a record timed later under another load, decides by luck). Both medians
    go to the default-times file, with the schedule the default was timed against; the
    database is left as the final selection ranked it. A pair timed already is not timed
    again. Best effort: a failure is logged and changes nothing."""
    path = os.path.join(os.fspath(work_dir), DEFAULT_SCHEDULES_FILE)
    versus = load_default_versus(path)
    times: dict = {}
    names: dict = {}
    against: dict = {}
    for t in tasks:
        key = workload_key(t.mod, target)
        try:
            record = database.query_tuning_record(t.mod, target, "main")
            if record is None or versus.get(key) == measurement_key(record):
                continue
            default = default_schedule(t.mod["main"], target, _constant_params(model, t.task_name))
            tuned = record.as_measure_candidate(t.mod)  # on our module, not the stored one
            candidates = [
                (tuned.sch.mod, tuned.args_info),
                (default.mod, ArgInfo.from_entry_func(default.mod, remove_preproc=True)),
            ]
            secs = time_interleaved(candidates, target, rounds, builder, runner)
        except Exception as err:  # noqa: BLE001 - the comparison is best effort
            logger.warning(
                "tune_relax: %s: timing the default schedule failed (%s)", t.task_name, err
            )
            continue
        tuned_sec, default_sec = (statistics.median(s) for s in secs)
        if math.isfinite(default_sec):
            times[key], names[key] = default_sec, t.task_name
            if math.isfinite(tuned_sec):
                against[key] = (measurement_key(record), tuned_sec)
        logger.info(
            "tune_relax: %s: best tuned %s, default schedule %s (medians of %d interleaved rounds)",
            t.task_name,
            _ms(tuned_sec),
            _ms(default_sec),
            rounds,
        )
    if times:
        try:
            save_default_times(path, times, names, against)
        except OSError as err:
            logger.warning("tune_relax: cannot write %s (%s)", path, err)


def compile_relax(
    database: Database,
    mod: Function,
    target: Target | str,
    params: dict[str, np.ndarray] | None,
    enable_warning: bool = False,
    *,
    desired_layouts: Layouts = "default",
) -> Executable:
    """Compile a model with the best schedule of each function in ``database``.

    A function the database has no record of gets the default schedule (inlined,
    parallel, vectorized; see :mod:`metaschedule.graph.default_schedule`). So does a
    function whose best record is not faster than its default schedule's time as
    :func:`tune_relax` measured it (``default_schedules.json`` beside the files of a
    JSON or SQLite database; without a time for a function its record is used). Where
    the default was timed against that very record, interleaved, the record's time from
    those rounds is the one compared.
    ``enable_warning`` logs, per function, which schedule it got and why. Nothing is
    measured; kernels already in the kernel cache are not compiled again.
    ``desired_layouts``: as :func:`extract_tasks` (the value tuning used).

    Returns:
        An :class:`~metaschedule.graph.Executable`.
    """
    target = target if isinstance(target, Target) else Target(target)
    model = _lower(mod, params, target, desired_layouts)
    times_path = default_times_path(database)
    default_times = load_default_times(times_path)
    versus_secs = load_default_versus_secs(times_path)
    scheduled: dict[str, PrimFunc] = {}
    sources: dict[str, str] = {}
    for name, func in model.funcs.items():
        wl = _workload(func)
        record = None if database is None else database.query_tuning_record(wl, target, "main")
        key = workload_key(wl, target)
        default_sec = default_times.get(key)
        sch, why = None, f"no tuning record of {name} in {database!r}"
        if record is not None:
            tuned_sec = record.mean_run_sec
            pair = versus_secs.get(key)
            if pair is not None and pair[0] == measurement_key(record):
                tuned_sec = pair[1]  # timed with the default, the same moments
            if default_sec is not None and not tuned_sec < default_sec:
                why = (
                    f"{name}: the best record ({_ms(tuned_sec)}) is not faster than the "
                    f"default schedule ({_ms(default_sec)})"
                )
            else:
                sch = _replay_record(record, wl, target, name)
                why = f"{name}: the best record ({_ms(tuned_sec)})" + (
                    f" beats the default schedule ({_ms(default_sec)})"
                    if default_sec is not None
                    else ", no default schedule time recorded"
                )
                if sch is None:
                    why = f"{name}: the best record does not replay"
        if sch is None:
            if enable_warning:
                logger.warning("compile_relax: %s; using the default schedule", why)
            sch = default_schedule(func, target, _constant_params(model, name))
            sources[name] = "default"
        else:
            if enable_warning:
                logger.warning("compile_relax: %s; using the database", why)
            sources[name] = "database"
        scheduled[name] = sch.mod["main"]
    return build_executable(model, scheduled, target, sources)


def _ms(sec: float | None) -> str:
    return "no valid time" if sec is None or sec == float("inf") else f"{sec * 1e3:.4g} ms"


def _constant_params(model: LoweredModel, name: str) -> set[int]:
    """The parameters of function ``name`` that are constants at every call (weights the
    build may re-lay out once)."""
    calls = [s.args for s in model.steps if s.func == name]
    consts = model.graph.constants
    return (
        {j for j in range(len(calls[0])) if all(a[j] in consts for a in calls)} if calls else set()
    )


def _replay_record(
    record: TuningRecord, wl: IRModule, target: Target, name: str
) -> Schedule | None:
    """The record's trace applied to ``wl`` itself, or None: replayed when the record
    is of ``wl``, applied as an anchor trace when anchor-block equality found it for a
    function that fuses other blocks around the same anchor."""
    sch = Schedule(wl)
    try:
        if structural_equal(record.workload.mod, wl):
            record.trace.apply_to_schedule(sch, remove_postproc=False)
        else:  # found by anchor-block equality: a sibling with other fused blocks
            schedule_using_anchor_trace(sch, record.trace, target)
    except Exception as err:  # noqa: BLE001 - any replay failure means the same
        logger.warning(
            "compile_relax: the best record of %s does not replay on it (%s: %s); "
            "using the default schedule",
            name,
            type(err).__name__,
            err,
        )
        return None
    return sch
