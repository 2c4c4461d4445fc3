"""``tune_tasks`` and ``tune_tir``: the tuner's entry points (the seed's signatures).

``tune_tasks`` tunes prepared TuneContexts under a task scheduler: it turns the
string arguments into components (``"local"`` builder and runner, a ``"json"`` database
in ``work_dir``, the ``"xgb"`` cost model, the ``"default"`` callbacks, the ``"gradient"``
scheduler), opens the run's logs in ``work_dir/logs``, runs the scheduler and returns the
database. ``tune_tir`` makes one task per function of a TIR module and calls it.

Tuning again with the same ``work_dir`` resumes, idempotently: the records the JSON
database already holds for a workload count toward ``max_trials_global`` (and
``max_trials_per_task``), so the same call after an interruption measures only what the
budget still allows, the same call after completion returns at once, and a larger budget
tunes only the difference. The search starts from the earlier records and never
measures them again. Every result is committed as soon as it is measured; Ctrl-C (or an
error) stops the workers, removes the temporary build folders and says how to resume.

The final selection (``final_selection_top_k``, an addition to TVM's signatures): after
the search, each task's best records are re-measured interleaved and the re-measurements
committed (see :mod:`metaschedule.final_selection`), so a lucky single timing does not
decide what ``compile_tir`` builds. Schedules are counted once however often they were
measured, so resuming neither tunes again nor repeats a selection that is done.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import Literal

from .builder import Builder
from .cost_model.base import CostModel
from .database import Database, JSONDatabase, MemoryDatabase
from .database.base import measurement_key
from .final_selection import finalize
from .logging import TuningLogs
from .measure_callback.base import MeasureCallback, normalize_callbacks
from .post_optimization import post_optimize
from .profiler import Profiler
from .runner import Runner
from .runtime import cuda_unavailable_reason
from .search_strategy import SearchStrategy
from .space_generator import SpaceGenerator
from .target import Target
from .task_scheduler import TaskScheduler
from .tir.function import IRModule, PrimFunc, as_module
from .tune_context import TuneContext, _normalize_threads

__all__ = ["DEFAULT_FINAL_SELECTION_TOP_K", "tune_tasks", "tune_tir"]

#: records per task the final selection re-measures by default
DEFAULT_FINAL_SELECTION_TOP_K = 5


def tune_tasks(
    *,
    tasks: list[TuneContext],
    task_weights: Sequence[float],
    work_dir: str,
    max_trials_global: int,
    max_trials_per_task: int | None = None,
    num_trials_per_iter: int = 64,
    builder: Builder | Literal["local"] = "local",
    runner: Runner | Literal["local", "rpc"] = "local",
    database: Database | Literal["json", "memory"] = "json",
    cost_model: CostModel | Literal["xgb", "mlp", "random"] = "xgb",
    measure_callbacks: list[MeasureCallback] | MeasureCallback | Literal["default"] = "default",
    task_scheduler: TaskScheduler | Literal["gradient", "round-robin"] = "gradient",
    module_equality: str = "structural",
    post_optimization: bool | None = False,
    final_selection_top_k: int = DEFAULT_FINAL_SELECTION_TOP_K,
) -> Database:
    """Tune a list of tasks with a task scheduler.

    Args:
        tasks: the tasks; each needs a mod, a target, a space generator and a strategy.
        task_weights: one weight per task (how often the task runs in the whole program).
        work_dir: the folder of the run: the JSON database and ``logs/``.
        max_trials_global: candidates to measure in all.
        max_trials_per_task: candidates to measure per task (default: the global one).
        num_trials_per_iter: candidates per batch.
        builder, runner: components, or "local" (created here and closed at the end);
            runner="rpc" measures on a Dask fleet: ``RPCRunner()``, whose RPCConfig comes
            from MS_RPC_TRACKER_HOST/PORT/KEY (or TVM_TRACKER_HOST/PORT/KEY).
        database: a database, "json" (in ``work_dir``) or "memory".
        cost_model: a cost model, or "xgb", "mlp", "random".
        measure_callbacks: callbacks, one callback, or "default".
        task_scheduler: a scheduler, or "gradient", "round-robin".
        module_equality: how the created database matches workloads ("structural",
            "ignore-tensor", "anchor-block").
        post_optimization: after the search, run a Droplet search (a local search over the
            best record's tile and unroll decisions, moves accepted by a t-test at p=0.05)
            with up to :data:`POST_OPTIMIZATION_TRIALS` measurements per task; a better
            schedule found is committed to the database. See
            :mod:`metaschedule.post_optimization`.
        final_selection_top_k: after the search (and the post-optimization), re-measure
            each task's best ``final_selection_top_k`` records, interleaved, with the same
            builder and runner, and commit the re-measurements so that the database's best
            is the re-measured winner (:func:`metaschedule.final_selection.finalize`); 0
            turns it off. A failed selection is logged and leaves the tuning result as it
            was. An addition to TVM's signature.

    Returns:
        The database with all tuning records.

    Raises:
        ValueError: a bad argument (named), before anything starts.
        PermissionError, OSError: ``work_dir`` cannot be written (read-only, disk full),
            before tuning starts.
        KeyboardInterrupt: Ctrl-C; what was measured is saved, the workers are stopped,
            and the message says how to resume.

    Resuming: the records the database holds for a task's workload count toward both
    budgets, so calling again with the same ``work_dir`` finishes an interrupted run,
    returns at once after a completed one, and with a larger ``max_trials_global`` tunes
    only the difference.

    During the run each task's ``ctx.logger`` is replaced by a logger that writes
    ``work_dir/logs/task_<i>_<name>.log`` and forwards to the original one, and the
    scheduler logs to ``work_dir/logs/task_scheduler.log``; both are restored at the end.
    """
    tasks = list(tasks)
    task_weights = [float(w) for w in task_weights]
    if not tasks:
        raise ValueError("tune_tasks: no tasks to tune")
    if len(tasks) != len(task_weights):
        raise ValueError(f"tune_tasks: {len(tasks)} tasks but {len(task_weights)} task_weights")
    bad = [t for t in tasks if not isinstance(t, TuneContext)]
    if bad:
        raise TypeError(f"tune_tasks: tasks must be TuneContexts, got {bad[0]!r}")
    check_budgets(max_trials_global, max_trials_per_task, num_trials_per_iter)
    check_final_selection_top_k(final_selection_top_k)
    if max_trials_per_task is None:
        max_trials_per_task = max_trials_global
    if not isinstance(work_dir, (str, os.PathLike)):
        raise TypeError(f"tune_tasks: work_dir must be a path, got {work_dir!r}")
    work_dir = os.fspath(work_dir)
    cost_model = _named("cost_model", _cost_model, cost_model)
    callbacks = _named("measure_callbacks", normalize_callbacks, measure_callbacks)
    scheduler = _named("task_scheduler", _task_scheduler, task_scheduler)
    _check_gpu_reachable(tasks, runner)
    check_work_dir(work_dir)
    owned: list = []
    records_before = 0
    interrupted: KeyboardInterrupt | None = None
    try:
        database = _database(database, work_dir, module_equality)
        builder = _component(builder, Builder, "builder", owned)
        runner = _component(runner, Runner, "runner", owned)
        records_before = _count(database)
        with TuningLogs(work_dir, [t.task_name for t in tasks], [t.logger for t in tasks]) as logs:
            try:
                _run_scheduler(
                    scheduler,
                    logs,
                    tasks,
                    task_weights,
                    max_trials_global,
                    max_trials_per_task,
                    num_trials_per_iter,
                    builder,
                    runner,
                    callbacks,
                    database,
                    cost_model,
                    work_dir,
                    bool(post_optimization),
                    final_selection_top_k,
                )
            except KeyboardInterrupt:
                msg = _interrupted_message(database, work_dir, _count(database) - records_before)
                logs.scheduler.warning("%s", msg)
                interrupted = KeyboardInterrupt(msg)
    except KeyboardInterrupt:  # while starting: nothing was tuned yet
        interrupted = KeyboardInterrupt(
            "Tuning interrupted while starting; nothing new was measured. To resume, run "
            "the same call again with the same work_dir"
        )
        print(interrupted, file=sys.stderr, flush=True)
    finally:
        for component in owned:
            component.close()
    if interrupted is not None:
        raise interrupted from None  # after the cleanup; the message says how to resume
    return database


def _run_scheduler(
    scheduler,
    logs,
    tasks,
    task_weights,
    max_trials_global,
    max_trials_per_task,
    num_trials_per_iter,
    builder,
    runner,
    callbacks,
    database,
    cost_model,
    work_dir,
    post_optimization: bool = False,
    final_selection_top_k: int = 0,
) -> None:
    """Run the scheduler with the run's loggers in place; the loggers are restored."""
    saved_loggers = [t.logger for t in tasks]
    had_logger = "logger" in scheduler.__dict__
    saved_scheduler_logger = scheduler.logger
    try:
        for task, logger in zip(tasks, logs.tasks):
            task.logger = logger
        scheduler.logger = logs.scheduler
        logs.scheduler.info(
            "Tuning %d task(s) with %s: max_trials_global=%d, max_trials_per_task=%d, "
            "num_trials_per_iter=%d, database=%s, cost_model=%s, work_dir=%s",
            len(tasks),
            scheduler,
            max_trials_global,
            max_trials_per_task,
            num_trials_per_iter,
            type(database).__name__,
            type(cost_model).__name__,
            work_dir,
            extra={"progress": (0, max_trials_global)},
        )
        scheduler.tune(
            tasks,
            task_weights,
            max_trials_global,
            max_trials_per_task,
            num_trials_per_iter,
            builder,
            runner,
            callbacks,
            database,
            cost_model,
        )
        if post_optimization:
            _post_optimize(tasks, database, builder, runner, work_dir, logs.scheduler)
        if final_selection_top_k > 0:
            _final_selection(
                tasks, database, builder, runner, final_selection_top_k, logs, work_dir
            )
    finally:
        for task, logger in zip(tasks, saved_loggers):
            task.logger = logger
        if had_logger:
            scheduler.logger = saved_scheduler_logger
        else:
            del scheduler.logger


def check_final_selection_top_k(value) -> None:
    """ValueError unless ``final_selection_top_k`` is an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"final_selection_top_k must be an int >= 0 (0: off), got {value!r}")


def check_budgets(max_trials_global, max_trials_per_task, num_trials_per_iter) -> None:
    """ValueError naming the first budget that is not a positive int."""
    for name, value in (
        ("max_trials_global", max_trials_global),
        ("max_trials_per_task", max_trials_per_task),
        ("num_trials_per_iter", num_trials_per_iter),
    ):
        if value is None and name == "max_trials_per_task":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


#: free bytes ``work_dir`` needs before tuning starts
MIN_FREE_BYTES = 16 << 20


def check_work_dir(work_dir: str) -> None:
    """Make sure records can be written to ``work_dir``: create it, write and remove a
    probe file, and check for free space; a clear error otherwise (before tuning)."""
    what = "choose a writable folder (a read-only work_dir can still be queried)"
    try:
        os.makedirs(work_dir, exist_ok=True)
        probe = os.path.join(work_dir, f".write-probe-{os.getpid()}")
        try:
            with open(probe, "wb") as f:
                f.write(b"\0" * 65536)
                f.flush()
                os.fsync(f.fileno())
        finally:
            if os.path.exists(probe):
                os.remove(probe)
    except OSError as err:
        raise type(err)(
            err.errno, f"cannot write to work_dir {work_dir!r}: {err.strerror}; {what}"
        ) from None
    free = shutil.disk_usage(work_dir).free
    if free < MIN_FREE_BYTES:
        raise OSError(
            f"work_dir {work_dir!r} has only {free >> 20} MiB free; tuning needs at "
            f"least {MIN_FREE_BYTES >> 20} MiB for its records and logs"
        )


def _count(database: Database) -> int:
    try:
        return len(database)
    except Exception:  # noqa: BLE001 - only for the interruption message
        return 0


def _interrupted_message(database: Database, work_dir: str, new_records: int) -> str:
    where = (
        f"saved in {work_dir}"
        if isinstance(database, JSONDatabase)
        else f"in the {type(database).__name__} returned by this call (not on disk)"
    )
    return (
        f"Tuning interrupted: {new_records} new record(s) {where}; the workers are "
        "stopped and the temporary build folders removed. To resume, run the same call "
        "again with the same work_dir"
    )


def _named(name: str, make, value, *args):
    """``make(value, *args)``, with a ValueError saying which argument was bad."""
    try:
        return make(value, *args)
    except ValueError as err:
        raise ValueError(f"{name}={value!r}: {err}") from None


def tune_tir(
    mod: IRModule | PrimFunc,
    target: str | Target,
    work_dir: str,
    max_trials_global: int,
    *,
    max_trials_per_task: int | None = None,
    num_trials_per_iter: int = 64,
    builder: Builder | Literal["local"] = "local",
    runner: Runner | Literal["local", "rpc"] = "local",
    database: Database | Literal["json", "memory"] = "json",
    cost_model: CostModel | Literal["xgb", "mlp", "random"] = "xgb",
    measure_callbacks: list[MeasureCallback] | MeasureCallback | Literal["default"] = "default",
    task_scheduler: TaskScheduler | Literal["gradient", "round-robin"] = "gradient",
    space: SpaceGenerator.SpaceGeneratorType = "post-order-apply",
    strategy: SearchStrategy
    | Literal["replay-func", "replay-trace", "evolutionary"] = "evolutionary",
    num_tuning_cores: Literal["physical", "logical"] | int = "physical",
    seed: int | None = None,
    module_equality: str = "structural",
    special_space: Mapping[str, SpaceGenerator.SpaceGeneratorType] | None = None,
    post_optimization: bool | None = False,
    final_selection_top_k: int = DEFAULT_FINAL_SELECTION_TOP_K,
) -> Database:
    """Tune a TIR function, or each function of an IRModule (one task each, weight 1).

    Args:
        mod: a PrimFunc, or an IRModule of PrimFuncs; each function is tuned as a
            workload of its own (a module whose only function is ``main``).
        target: the target, or its string ("cpu", "llvm -num-cores 4", ...).
        space: the space generator: an object, a schedule function (a hand-written
            template, see :class:`~metaschedule.space_generator.ScheduleFn`), or a kind.
            An object serves the first task; the other tasks get clones.
        strategy: the search strategy: an object (first task; clones for the others) or
            a kind.
        num_tuning_cores: threads of each task's search ("physical", "logical", a count).
        seed: the random seed of the tasks, and of a "gradient" task scheduler created
            here (None: from the OS).
        special_space: a space per function name, instead of ``space``.
        The others: as :func:`tune_tasks`.

    Returns:
        The database with all tuning records; ``compile_tir`` reads the best one.

    Resuming: the records ``work_dir`` already holds for a function count toward
    ``max_trials_global``, so after an interruption (Ctrl-C, a crash, ``kill -9``) the
    same call finishes the budget, after completion it returns at once with the same
    best, and a larger ``max_trials_global`` tunes only the difference. Every result is
    saved as soon as it is measured. Bad arguments, and a ``work_dir`` that cannot be
    written, are errors before anything starts (see :func:`tune_tasks`).
    """
    check_budgets(max_trials_global, max_trials_per_task, num_trials_per_iter)
    check_final_selection_top_k(final_selection_top_k)
    mod = as_module(mod)
    target = target if isinstance(target, Target) else Target(target)
    _check_gpu_reachable([target], runner)
    special_space = dict(special_space or {})
    unknown = sorted(set(special_space) - set(mod))
    if unknown:
        raise ValueError(
            f"tune_tir: special_space names {', '.join(unknown)}, which the module "
            f"does not have; its functions: {', '.join(mod)}"
        )
    if task_scheduler == "gradient" and seed is not None:  # reproducible tie-breaking too
        task_scheduler = TaskScheduler.create("gradient", seed=seed)
    make_context = _ContextMaker(strategy, seed, num_tuning_cores)
    tasks = []
    for name, func in mod.items():
        if not isinstance(func, PrimFunc):
            raise TypeError(
                f"tune_tir: function {name!r} is a {type(func).__name__}, not a PrimFunc"
            )
        space_arg = "special_space" if name in special_space else "space"
        space_value = special_space.get(name, space)
        for arg, value, make in (
            (space_arg, space_value, SpaceGenerator.create),
            ("strategy", strategy, SearchStrategy.create),
            ("num_tuning_cores", num_tuning_cores, _normalize_threads),
        ):
            if isinstance(value, str) or arg == "num_tuning_cores":
                _named(arg, make, value)
        tasks.append(make_context(IRModule({"main": func}), target, name, space_value))
    return tune_tasks(
        tasks=tasks,
        task_weights=[1.0] * len(tasks),
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


# --------------------------------------------------------------------------- components
class _ContextMaker:
    """Makes the TuneContexts of one tuning call (``tune_tir``, and ``tune_relax``'s
    ``extracted_tasks_to_tune_contexts``): a space or strategy object serves the first
    task given it, later tasks get clones, so no two tasks share tuning state."""

    def __init__(self, strategy, seed: int | None, num_threads) -> None:
        self.strategy = strategy
        self.seed = seed
        self.num_threads = num_threads
        self._used: set[int] = set()

    def __call__(self, mod: IRModule, target: Target, task_name: str, space) -> TuneContext:
        return TuneContext(
            mod,
            target=target,
            space_generator=self._fresh(space),
            search_strategy=self._fresh(self.strategy),
            task_name=task_name,
            rand_state=-1 if self.seed is None else self.seed,
            num_threads=self.num_threads,
        )

    def _fresh(self, component):
        if isinstance(component, (SpaceGenerator, SearchStrategy)):
            if id(component) in self._used:
                return component.clone()
            self._used.add(id(component))
        return component


#: Neighbours a Droplet search measures per task when ``post_optimization`` is on.
POST_OPTIMIZATION_TRIALS = 100


def _post_optimize(tasks, database, builder, runner, work_dir, logger) -> None:
    for task in tasks:
        post_optimize(
            database,
            [task.mod],
            task.target,
            POST_OPTIMIZATION_TRIALS,
            builder=builder,
            runner=runner,
            log_dir=os.path.join(work_dir, "logs", f"droplet_{task.task_name}"),
            logger=logger,
        )


#: the final selection's journal in ``work_dir/logs`` (one JSON line per pass, and one
#: per finished selection: what tuning again reads to not repeat it)
FINAL_SELECTION_JOURNAL = "final_selection.jsonl"


def _final_selection(tasks, database, builder, runner, top_k: int, logs, work_dir) -> None:
    """The final selection of every task (see :func:`tune_tasks`); a failure is logged
    and leaves that task's records as tuning left them. Ctrl-C propagates (what was
    committed stays)."""
    scheduler_log = logs.scheduler
    for task_id, task in enumerate(tasks):
        logger = task.logger
        scheduler_log.info(
            "Final selection of task #%d %r: its best %d record(s), re-measured interleaved",
            task_id,
            task.task_name,
            top_k,
        )
        try:
            before = database.query_tuning_record(task.mod, task.target)
            with Profiler.timeit("FinalSelection"):
                selection = finalize(
                    database,
                    task.mod,
                    task.target,
                    top_k=top_k,
                    builder=builder,
                    runner=runner,
                    logger=logger,
                    journal=os.path.join(work_dir, "logs", FINAL_SELECTION_JOURNAL),
                )
        except Exception as err:  # noqa: BLE001 - never lose the tuning result to it
            msg = (
                f"the final selection failed ({type(err).__name__}: {err}); kept the tuning result"
            )
            logger.warning("%s", msg)
            scheduler_log.warning("Task #%d %r: %s", task_id, task.task_name, msg)
            continue
        if selection is None:
            scheduler_log.info(
                "Final selection of task #%d %r: nothing to re-measure (done already, or "
                "fewer than two valid records; see the task's log)",
                task_id,
                task.task_name,
            )
            continue
        after = database.query_tuning_record(task.mod, task.target)
        if after is None or before is None or not math.isfinite(min(selection.medians)):
            scheduler_log.warning(
                "Final selection of task #%d %r: every re-measurement failed; kept the tuning "
                "result",
                task_id,
                task.task_name,
            )
            continue
        changed = measurement_key(after) != measurement_key(before)
        scheduler_log.info(
            "Final selection of task #%d %r: the best is now %.2f us%s",
            task_id,
            task.task_name,
            after.mean_run_sec * 1e6,
            f" (it was not tuning's first choice, {before.mean_run_sec * 1e6:.2f} us once)"
            if changed
            else "",
        )


def _check_gpu_reachable(tasks: list[TuneContext] | list[Target], runner) -> None:
    """A cuda task measured by the local runner needs a GPU here: fail before tuning."""
    targets = [t if isinstance(t, Target) else t.target for t in tasks]
    if runner != "local" or not any(t is not None and t.kind == "cuda" for t in targets):
        return
    reason = cuda_unavailable_reason()
    if reason is not None:
        raise RuntimeError(
            f"tune: the cuda target needs a GPU to measure on, and the local runner has none "
            f"({reason}); pass a runner that reaches one, e.g. runner=RPCRunner(...)"
        )


def _database(database, work_dir: str, module_equality: str) -> Database:
    if isinstance(database, Database):
        return database
    if database == "json":
        return JSONDatabase(work_dir=work_dir, module_equality=module_equality)
    if database == "memory":
        return MemoryDatabase(module_equality=module_equality)
    raise ValueError(f"database must be a Database, 'json' or 'memory', got {database!r}")


def _cost_model(cost_model) -> CostModel | None:
    if cost_model is None or isinstance(cost_model, CostModel):
        return cost_model
    if isinstance(cost_model, str):
        return CostModel.create(cost_model)
    raise TypeError(f"cost_model must be a CostModel or 'xgb', 'mlp', 'random', got {cost_model!r}")


def _task_scheduler(task_scheduler) -> TaskScheduler:
    if isinstance(task_scheduler, TaskScheduler):
        return task_scheduler
    if isinstance(task_scheduler, str):
        return TaskScheduler.create(task_scheduler)
    raise TypeError(
        "task_scheduler must be a TaskScheduler or 'gradient', 'round-robin', got "
        f"{task_scheduler!r}"
    )


def _component(value, cls: type, what: str, owned: list):
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        component = cls.create(value)
        if hasattr(component, "close"):
            owned.append(component)
        return component
    raise TypeError(f"{what} must be a {cls.__name__} or a kind such as 'local', got {value!r}")
