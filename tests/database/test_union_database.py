"""UnionDatabase and OrderedUnionDatabase (the seed's five cases), and ScheduleFnDatabase."""

import itertools

import pytest

from metaschedule.database import (
    MemoryDatabase,
    OrderedUnionDatabase,
    ScheduleFnDatabase,
    UnionDatabase,
    Workload,
)
from metaschedule.schedule import BlockNotFoundError
from metaschedule.target import Target
from metaschedule.testing.tuning_records import make_record, matmul, record_schedule
from metaschedule.tir.structural import structural_equal

CPU = Target("cpu")


def dbs(times):
    """db1, db2 (empty), then one database per run time: db3 has r3 = times[0], ..."""
    out = [MemoryDatabase(), MemoryDatabase()]
    for k, t in enumerate(times):
        db = MemoryDatabase()
        db.commit_tuning_record(make_record(Workload(matmul(8)), [t], seed=k))
        out.append(db)
    return out


def best(db):
    record = db.query_tuning_record(matmul(8), CPU, "main")
    return None if record is None else record.run_secs[0]


ORDERS = list(itertools.permutations([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("r3,r4", [(1.0, 2.0), (2.0, 1.0)])
def test_case1_union_returns_the_better_of_r3_and_r4(r3, r4):
    db1, db2, db3, db4 = dbs([r3, r4])
    assert best(UnionDatabase(db1, db2, db3, db4)) == min(r3, r4)


@pytest.mark.parametrize("r3,r4", [(1.0, 2.0), (2.0, 1.0)])
def test_case2_ordered_union_returns_r3(r3, r4):
    db1, db2, db3, db4 = dbs([r3, r4])
    assert best(OrderedUnionDatabase(db1, db2, db3, db4)) == r3


@pytest.mark.parametrize("r3,r4,r5", ORDERS)
def test_case3_union_over_an_ordered_union(r3, r4, r5):
    db1, db2, db3, db4, db5 = dbs([r3, r4, r5])
    merged = UnionDatabase(db1, db2, db3, OrderedUnionDatabase(db4, db5))
    assert best(merged) == min(r3, r4)


@pytest.mark.parametrize("r3,r4,r5", ORDERS)
def test_case4_union_over_a_union(r3, r4, r5):
    db1, db2, db3, db4, db5 = dbs([r3, r4, r5])
    assert best(UnionDatabase(db1, db2, db3, UnionDatabase(db4, db5))) == min(r3, r4, r5)


@pytest.mark.parametrize("r3,r4,r5", ORDERS)
def test_case5_ordered_union_over_a_union(r3, r4, r5):
    db1, db2, db3, db4, db5 = dbs([r3, r4, r5])
    assert best(OrderedUnionDatabase(db1, db2, UnionDatabase(db3, db4), db5)) == min(r3, r4)


def test_unions_without_answers_and_invalid_records():
    db1, db2 = MemoryDatabase(), MemoryDatabase()
    assert best(UnionDatabase(db1, db2)) is None
    assert best(OrderedUnionDatabase(db1, db2)) is None
    failed = MemoryDatabase()
    failed.commit_tuning_record(make_record(Workload(matmul(8)), [1e10]))
    (db3,) = dbs([4.0])[2:]
    assert best(OrderedUnionDatabase(failed, db3)) == 4.0  # a failure is no answer


def test_union_views_merge_reads_and_refuse_commits():
    db1, db2, db3, db4 = dbs([2.0, 1.0])
    union = UnionDatabase(db1, db2, db3, db4)
    ordered = OrderedUnionDatabase(db1, db2, db3, db4)
    assert union.has_workload(matmul(8)) and not union.has_workload(matmul(4))
    assert len(union) == 2 and len(union.get_all_tuning_records()) == 2
    w = Workload(matmul(8))
    assert [r.run_secs for r in union.get_top_k(w, 5)] == [[1.0], [2.0]]
    assert [r.run_secs for r in ordered.get_top_k(w, 5)] == [[2.0]]
    with pytest.raises(NotImplementedError, match="read-only"):
        union.commit_workload(matmul(8))
    with pytest.raises(NotImplementedError, match="read-only"):
        ordered.commit_tuning_record(make_record(w, [1.0]))
    with pytest.raises(TypeError, match="member 1 is a str"):
        UnionDatabase(db1, "db2")
    pruned = MemoryDatabase()
    union.dump_pruned(pruned)
    assert [r.run_secs for r in pruned.get_all_tuning_records()] == [[1.0]]


def split_first_loop(sch):
    try:
        block = sch.get_block("C")
    except BlockNotFoundError:
        return False
    sch.split(sch.get_loops(block)[0], [None, 2])
    return True


def test_schedule_fn_database_answers_by_scheduling():
    db = ScheduleFnDatabase(split_first_loop)
    sch = db.query_schedule(matmul(8), CPU, "main")
    assert [len(sch.get_loops(sch.get_block("C")))] == [4]
    record = db.query_tuning_record(matmul(8), CPU, "main")
    assert record.run_secs is None and record.target == CPU
    assert structural_equal(db.query_ir_module(matmul(8), CPU, "main"), sch.mod)
    from metaschedule.te import compute, create_prim_func, placeholder

    a = placeholder((4,), name="A")
    other = create_prim_func([a, compute((4,), lambda i: a[i] * 2.0, name="D")])
    assert db.query_schedule(other, CPU, "main") is None
    assert len(db) == 0 and db.get_all_tuning_records() == [] and not db.has_workload(matmul(8))
    with pytest.raises(NotImplementedError, match="stores no records"):
        db.commit_tuning_record(record)


def test_schedule_fn_database_in_unions():
    tuned = MemoryDatabase()
    tuned.commit_tuning_record(make_record(Workload(matmul(8)), [0.5], seed=3))
    by_hand = ScheduleFnDatabase(split_first_loop)
    tuned_trace = record_schedule(matmul(8), 3).trace.as_json()
    # ordered: the hand-written schedule overrides the tuned one, and the reverse
    assert (
        OrderedUnionDatabase(by_hand, tuned).query_tuning_record(matmul(8), CPU, "main").run_secs
        is None
    )
    assert OrderedUnionDatabase(tuned, by_hand).query_tuning_record(
        matmul(8), CPU, "main"
    ).run_secs == [0.5]
    # union: a measured record beats one without a run time
    got = UnionDatabase(by_hand, tuned).query_schedule(matmul(8), CPU, "main")
    assert got.trace.as_json() == tuned_trace
