"""Traces: printing, JSON round trip, replay, decisions, simplification, registry."""

import json

import pytest

from metaschedule import tir
from metaschedule.schedule import InstructionKind, Trace, register_inst_kind
from metaschedule.tir.structural import structural_equal


def _sample(sch):
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    tiles = sch.sample_perfect_tile(i, n=2, max_innermost_factor=4)
    c = sch.sample_categorical([0, 16, 64], [0.2, 0.3, 0.5])
    sch.annotate(b, "meta_schedule.unroll_explicit", c)
    return tiles, c


def test_same_seed_same_trace(matmul):
    a, b = tir.Schedule(matmul, seed=7), tir.Schedule(matmul, seed=7)
    _sample(a)
    _sample(b)
    assert a.trace.as_json() == b.trace.as_json()
    assert str(a.trace) == str(b.trace)


def test_different_seeds_explore(matmul):
    seen = set()
    for seed in range(20):
        sch = tir.Schedule(matmul, seed=seed)
        tiles, c = _sample(sch)
        seen.add((tuple(sch.get(t) for t in tiles), sch.get(c)))
    assert len(seen) > 3


def test_json_round_trip_and_replay(matmul):
    sch = tir.Schedule(matmul, seed=1)
    _sample(sch)
    obj = json.loads(json.dumps(sch.trace.as_json()))
    trace = Trace.from_json(obj)
    assert trace.as_json() == sch.trace.as_json()
    fresh = tir.Schedule(matmul)
    trace.apply_to_schedule(fresh, remove_postproc=False)
    assert structural_equal(fresh.mod, sch.mod)
    assert fresh.trace.as_json() == sch.trace.as_json()


def test_python_form_rebuilds_schedule(matmul):
    sch = tir.Schedule(matmul, seed=3)
    _sample(sch)
    text = str(sch.trace)
    assert "sch.sample_perfect_tile(loop=l1, n=2, max_innermost_factor=4, decision=" in text
    other = tir.Schedule(matmul)
    exec(text, {"tir": tir, "sch": other})
    assert structural_equal(other.mod, sch.mod)


def test_with_decision_changes_replay(matmul):
    sch = tir.Schedule(matmul, seed=3)
    _sample(sch)
    inst = next(i for i in sch.trace.insts if i.kind.name == "SampleCategorical")
    new = sch.trace.with_decision(inst, 2, remove_postproc=True)
    fresh = tir.Schedule(matmul)
    new.apply_to_schedule(fresh, remove_postproc=False)
    assert fresh.get(fresh.get_block("C")).annotations["meta_schedule.unroll_explicit"] == 64


def test_decision_provider(matmul):
    sch = tir.Schedule(matmul, seed=3)
    _sample(sch)
    fresh = tir.Schedule(matmul)

    def provider(inst, inputs, attrs, decision):
        return [4, 4] if inst.kind.name == "SamplePerfectTile" else decision

    sch.trace.apply_to_schedule(fresh, False, decision_provider=provider)
    tile_inst = next(i for i in fresh.trace.insts if i.kind.name == "SamplePerfectTile")
    assert fresh.trace.get_decision(tile_inst) == [4, 4]


def test_simplified_drops_dead_lookups(matmul):
    sch = tir.Schedule(matmul, seed=0)
    b = sch.get_block("C")
    sch.get_loops(b)  # unused
    sch.sample_categorical([1, 2], [0.5, 0.5])  # unused
    sch.annotate(b, "k", 1)
    kinds = [i.kind.name for i in sch.trace.simplified(remove_postproc=True).insts]
    assert kinds == ["GetBlock", "Annotate"]


def test_remove_postproc(matmul):
    sch = tir.Schedule(matmul, seed=0)
    b = sch.get_block("C")
    sch.annotate(b, "before", 1)
    sch.enter_postproc()
    sch.annotate(b, "after", 1)
    kinds = [i.kind.name for i in sch.trace.simplified(remove_postproc=True).insts]
    assert kinds == ["GetBlock", "Annotate"]
    assert len(sch.trace.as_json(remove_postproc=True)[0]) == 2


def test_malformed_json_is_value_error():
    with pytest.raises(ValueError, match="malformed"):
        Trace.from_json([[["NoSuchKind", [], [], []]], []])
    with pytest.raises(ValueError, match="malformed"):
        Trace.from_json([[["GetLoops", ["b9"], [], ["l0"]]], []])
    with pytest.raises(ValueError):
        Trace.from_json("nonsense")


def test_user_instruction_kind(matmul):
    class MySchedule(tir.Schedule):
        def tag_block(self, block, value):
            self.annotate(block, "user_tag", value)

    kind = InstructionKind("UserTagBlock", "tag_block", inputs=("block",), attrs=("value",))
    register_inst_kind(kind, override=True)
    sch = MySchedule(matmul)
    b = sch.get_block("C")
    trace = Trace().append(next(i for i in sch.trace.insts if i.kind.name == "GetBlock"))
    from metaschedule.schedule import Instruction

    trace = trace.append(Instruction(kind, [sch.trace.insts[0].outputs[0]], ["x"], []))
    fresh = MySchedule(matmul)
    trace.apply_to_schedule(fresh, False)
    assert fresh.get(fresh.get_block("C")).annotations["user_tag"] == "x"
    assert "sch.tag_block(block=b0, value='x')" in str(trace)
    with pytest.raises(ValueError, match="already registered"):
        register_inst_kind(kind)
    del b
