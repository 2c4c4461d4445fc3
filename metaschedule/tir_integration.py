"""MetaSchedule-TIR integration: tune TIR functions, and apply the best schedule found."""

from __future__ import annotations

from .database import Database
from .schedule import Schedule
from .target import Target
from .tir.function import IRModule, PrimFunc, as_module
from .tune import tune_tir

__all__ = ["compile_tir", "tune_tir"]


def compile_tir(database: Database, mod: IRModule | PrimFunc, target: Target | str) -> Schedule:
    """The best schedule of ``mod`` in ``database``, replayed on ``mod``.

    The trace is replayed on ``mod`` itself, never on the module the database stored (see
    :meth:`~metaschedule.database.Database.query_schedule`): the library built from the
    schedule has ``mod``'s names, and a database file can carry no code into it.

    Args:
        database: the database of tuning records (what ``tune_tir`` returned).
        mod: the TIR function tuned, or a module of that one function.
        target: the target it was tuned for.

    The schedule's function may take some weights pre-packed (the ``RewriteLayout``
    postprocessor re-laid out the parameters marked layout-free): its
    ``attrs["prepacked_args"]`` gives their original shapes and maps. Pack them once with
    :func:`metaschedule.pack_weights`::

        sch = ms.tir_integration.compile_tir(database, func, "llvm")
        lib = ms.build(sch.mod, "llvm")
        args = ms.pack_weights(sch, [x, w, out])  # w in its original layout, packed once
        lib(*args)

    Raises:
        ValueError: the module has several functions (compile each one), or the database
            has no valid record of this workload (tune it first). TVM returns None here.
    """
    mod = as_module(mod)
    if len(mod) != 1:
        raise ValueError(
            f"compile_tir compiles one function at a time; the module has "
            f"{len(mod)}: {', '.join(mod)}. Call it on each function"
        )
    func = mod[next(iter(mod))]
    workload = IRModule({"main": func})  # as tune_tir stores it
    target = target if isinstance(target, Target) else Target(target)
    sch = database.query_schedule(workload, target, workload_name="main")
    if sch is None:
        raise ValueError(
            f"compile_tir: {database!r} has no valid tuning record of this "
            f"workload (function {next(iter(mod))!r}); tune it first with "
            "ms.tune_tir(mod, target, work_dir, max_trials_global) and pass the "
            "database it returns"
        )
    return sch
