"""``metaschedule show`` and the report data count a final selection's re-measurements
as what they are: not trials, but the time that counts for their schedule."""

from __future__ import annotations

import os

from metaschedule import te, tir
from metaschedule.cli import main
from metaschedule.database import JSONDatabase, TuningRecord
from metaschedule.report.data import load_run
from metaschedule.te import ops
from metaschedule.tir.function import IRModule


def _traces():
    a = te.placeholder((16, 16), "float32", "A")
    b = te.placeholder((16, 16), "float32", "B")
    mod = IRModule({"main": te.create_prim_func([a, b, ops.matmul(a, b)])})
    plain = tir.Schedule(mod)
    split = tir.Schedule(mod)
    i, _, _ = split.get_loops(split.get_block("T_matmul_NN"))
    split.split(i, [4, 4])
    return mod, plain.trace, split.trace


def test_remeasurements_are_not_trials(tmp_path, capsys):
    mod, plain, split = _traces()
    work_dir = str(tmp_path)
    db = JSONDatabase(
        os.path.join(work_dir, "database_workload.json"),
        os.path.join(work_dir, "database_tuning_record.json"),
    )
    wl = db.commit_workload(mod)
    db.commit_tuning_record(TuningRecord(plain, wl, [1e-3]))  # trial 0
    db.commit_tuning_record(TuningRecord(split, wl, [2e-3]))  # trial 1
    db.commit_tuning_record(TuningRecord(plain, wl, [4e-3]))  # re-measured: slower
    db.commit_tuning_record(TuningRecord(split, wl, [3e-3]))  # re-measured: now the best
    db.close()

    (data,) = load_run(work_dir).workloads
    assert data.trials == 2 and data.remeasurements == 2
    assert data.latencies == [1e-3, 2e-3]  # the tuning curve: first timings
    assert data.best_index == 1 and data.best_latency == 3e-3  # as the database ranks
    assert data.best_record.trace.as_json() == split.as_json()

    assert main(["show", work_dir]) == 0
    out = capsys.readouterr().out
    assert "2 trial(s), 2 re-measurement(s)" in out
    assert "3000.00" in out and "1000.00" not in out
