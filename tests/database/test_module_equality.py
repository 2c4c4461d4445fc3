"""Module equality kinds and the anchor block."""

import pytest

from metaschedule import te
from metaschedule.database import (
    JSONDatabase,
    MemoryDatabase,
    ModuleEquality,
    SQLiteDatabase,
    Workload,
    find_anchor_block,
)
from metaschedule.target import Target
from metaschedule.testing.tuning_records import make_record, matmul, matmul_relu


def elementwise(n=16):
    a = te.placeholder((n, n), name="A")
    return te.create_prim_func([a, te.compute((n, n), lambda i, j: a[i, j] * 2.0, name="B")])


def test_anchor_block_is_the_block_with_the_most_work():
    assert find_anchor_block(matmul_relu()).name_hint == "C"  # 16^3 beats the ReLU's 16^2
    assert find_anchor_block(matmul()).name_hint == "C"
    assert find_anchor_block(elementwise()).name_hint == "B"


def test_structural_and_ignore_tensor_compare_whole_modules():
    for kind in ("structural", "ignore-tensor"):
        eq = ModuleEquality(kind)
        assert eq.equal(matmul(8), matmul(8)) and eq.hash(matmul(8)) == eq.hash(matmul(8))
        assert not eq.equal(matmul(8), matmul_relu(8))
        assert not eq.equal(matmul(8), matmul(4))


def test_anchor_block_equality_matches_modules_sharing_their_main_computation():
    eq = ModuleEquality("anchor-block")
    assert eq.equal(matmul(8), matmul_relu(8))
    assert eq.hash(matmul(8)) == eq.hash(matmul_relu(8))
    assert not eq.equal(matmul(8), matmul(4))
    assert not eq.equal(matmul(8), elementwise(8))


def test_unknown_kind_lists_the_kinds():
    with pytest.raises(ValueError, match="structural, ignore-tensor, anchor-block"):
        ModuleEquality("exact")


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: MemoryDatabase(module_equality="anchor-block"),
        lambda tmp: JSONDatabase(work_dir=str(tmp), module_equality="anchor-block"),
        lambda tmp: SQLiteDatabase(str(tmp / "db.sqlite"), module_equality="anchor-block"),
    ],
)
def test_databases_honour_anchor_block_equality(make, tmp_path):
    db = make(tmp_path)
    w = db.commit_workload(matmul(8))
    db.commit_tuning_record(make_record(w, [0.5]))
    assert db.has_workload(matmul_relu(8))
    assert db.commit_workload(matmul_relu(8)).shash == ModuleEquality("anchor-block").hash(
        matmul(8)
    )
    record = db.query_tuning_record(matmul_relu(8), Target("cpu"), "main")
    assert record.run_secs == [0.5]
    structural = MemoryDatabase()
    structural.commit_tuning_record(make_record(Workload(matmul(8)), [0.5]))
    assert not structural.has_workload(matmul_relu(8))
