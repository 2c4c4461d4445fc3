"""Check a tuning work_dir after interruptions: lost, duplicated, unreplayable records."""

import os
import warnings

from metaschedule.database import JSONDatabase
from metaschedule.schedule import Schedule


def check_work_dir(work_dir: str, committed_log: str = "committed.log") -> dict:
    """Counts: ``records``, ``trials`` (records tuning measured), ``lost`` (committed per
    the spy log, absent from the database), ``duplicates`` (schedules stored more than once
    by tuning), ``remeasured`` (the final selection's records: repeats committed after the
    last first measurement, once tuning was over), ``replay_failures`` (records whose
    trace does not apply to their workload), ``warnings`` (lines the database skipped,
    e.g. torn by a kill)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = JSONDatabase(work_dir=work_dir)
        records = db.get_all_tuning_records()
    keys: list[str] = []
    replay_failures = 0
    for record in records:
        try:
            sch = Schedule(record.workload.mod)
            record.trace.apply_to_schedule(sch, remove_postproc=False)
            from metaschedule.tir.structural import structural_hash

            keys.append(str(structural_hash(sch.mod)))
        except Exception:  # noqa: BLE001 - counted
            replay_failures += 1
    path = os.path.join(work_dir, committed_log)
    committed = []
    if os.path.exists(path):
        with open(path) as f:
            committed = [line.strip() for line in f if line.strip()]
    stored = set(keys)
    first: dict[str, int] = {}
    for n, key in enumerate(keys):
        first.setdefault(key, n)
    last_new = max(first.values(), default=-1)
    repeats = [n for n, key in enumerate(keys) if first[key] != n]
    remeasured = sum(1 for n in repeats if n > last_new)
    return {
        "records": len(records),
        "trials": len(records) - remeasured,
        "lost": len([k for k in set(committed) if k not in stored]),
        "duplicates": len(repeats) - remeasured,
        "remeasured": remeasured,
        "replay_failures": replay_failures,
        "warnings": len(caught),
    }
