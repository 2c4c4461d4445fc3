"""Workload and TuningRecord values: JSON round trips, validity, measure candidates."""

import json
import math

import pytest

from metaschedule.arg_info import TensorInfo
from metaschedule.database import MAX_RUN_SEC, TuningRecord, Workload, is_valid_run_secs
from metaschedule.target import Target
from metaschedule.testing.tuning_records import make_record, matmul, matmul_relu
from metaschedule.tir.structural import structural_equal, structural_hash


def test_workload_json_round_trip():
    w = Workload(matmul_relu(8))
    assert w.shash == structural_hash(w.mod)
    obj = json.loads(json.dumps(w.as_json()))
    assert obj[0] == str(w.shash)
    back = Workload.from_json(obj)
    assert back.shash == w.shash
    assert structural_equal(back.mod, w.mod)
    from metaschedule.tir.serialize import save_json

    as_text = Workload.from_json([obj[0], save_json(w.mod)])  # the module as a JSON string
    assert structural_equal(as_text.mod, w.mod)
    with pytest.raises(ValueError, match="malformed Workload JSON"):
        Workload.from_json(["1"])


@pytest.mark.parametrize(
    "run_secs,target,args_info",
    [
        ([0.5, 0.25], "cpu", [TensorInfo("float32", (8, 8))] * 3),
        (None, None, None),
        ([1e10], "llvm -num-cores=2", []),
    ],
)
def test_tuning_record_json_round_trip(run_secs, target, args_info):
    w = Workload(matmul(8))
    base = make_record(w, run_secs, seed=5)
    record = TuningRecord(base.trace, w, run_secs, target and Target(target), args_info)
    obj = json.loads(json.dumps(record.as_json()))
    back = TuningRecord.from_json(obj, w)
    assert back.workload is w
    assert back.trace.as_json() == record.trace.as_json()
    assert back.run_secs == run_secs
    assert back.target == record.target
    assert back.args_info == args_info
    with pytest.raises(ValueError, match="malformed TuningRecord JSON"):
        TuningRecord.from_json(obj[:2], w)


def test_validity_follows_tvm_convention():
    assert is_valid_run_secs([1.0, 2.0])
    for bad in (None, [], [MAX_RUN_SEC], [1.0, 1e10], [math.nan], [math.inf], [-1.0]):
        assert not is_valid_run_secs(bad)
    w = Workload(matmul(8))
    assert make_record(w, [0.5, 1.5]).mean_run_sec == 1.0
    assert make_record(w, [1e10]).mean_run_sec == math.inf


def test_as_measure_candidate_replays_the_trace():
    w = Workload(matmul(8))
    record = make_record(w, [0.5], seed=2)
    candidate = record.as_measure_candidate()
    assert candidate.sch.trace.as_json() == record.trace.as_json()
    assert list(candidate.args_info) == record.args_info
