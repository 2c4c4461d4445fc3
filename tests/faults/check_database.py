"""Check a tuning work_dir after interruptions: lost, duplicated, unreplayable records."""

import os
import warnings

from metaschedule.database import JSONDatabase
from metaschedule.schedule import Schedule


def check_work_dir(work_dir: str, committed_log: str = "committed.log") -> dict:
    """Counts: ``records``, ``lost`` (committed per the spy log, absent from the
    database), ``duplicates`` (schedules stored more than once), ``replay_failures``
    (records whose trace does not apply to their workload), ``warnings`` (lines the
    database skipped, e.g. torn by a kill)."""
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
    return {
        "records": len(records),
        "lost": len([k for k in set(committed) if k not in stored]),
        "duplicates": len(keys) - len(stored),
        "replay_failures": replay_failures,
        "warnings": len(caught),
    }
