"""ApplyCustomRule: a block annotated with a rule name is scheduled by that rule alone."""

import logging

import pytest

from metaschedule.schedule import Schedule
from metaschedule.schedule_rule import (
    ApplyCustomRule,
    MultiLevelTiling,
    ReuseType,
    register_custom_rule,
)


def annotated(func, value):
    pre = Schedule(func)
    pre.annotate(pre.get_block("T_matmul_NN"), "schedule_rule", value)
    return pre.mod["main"]


def mlt():
    return MultiLevelTiling(
        "SSRSRS", max_innermost_factor=64, reuse_write=ReuseType("may", [1, 2], "global")
    )


def test_registered_rule_replaces_the_other_rules(ck, wl):
    calls = []

    @register_custom_rule("test_split_i_by_two", override=True)
    def split_i(sch, block):
        calls.append(sch.get(block).name_hint)
        outs = []
        for factor in (2, 4):
            new = sch.copy()
            new.split(new.get_loops(block)[0], [None, factor])
            outs.append(new)
        return outs

    func = annotated(wl.matmul(), "test_split_i_by_two")
    spaces = ck.spaces(func, [ApplyCustomRule(), mlt()])
    assert calls == ["T_matmul_NN"]
    assert len(spaces) == 2  # the custom rule's, untouched by MultiLevelTiling
    assert all("SamplePerfectTile" not in ck.kinds(s) for s in spaces)
    assert sorted(
        s.get(s.get_loops(s.get_block("T_matmul_NN"))[1]).extent.value for s in spaces
    ) == [2, 4]
    ck.assert_space_correct(func, spaces, replays=0)


def test_rule_modifying_in_place_may_return_none(ck, wl):
    register_custom_rule(
        "test_in_place", lambda sch, block: sch.annotate(block, "seen", 1), override=True
    )
    (sch,) = ck.spaces(annotated(wl.matmul(), "test_in_place"), [ApplyCustomRule()])
    assert sch.get(sch.get_block("T_matmul_NN")).annotations["seen"] == 1


def test_unknown_rule_warns_and_lets_the_other_rules_work(ck, wl, caplog):
    func = annotated(wl.matmul(), "test_no_such_rule")
    with caplog.at_level(logging.WARNING):
        spaces = ck.spaces(func, [ApplyCustomRule(), mlt()])
    assert "meta_schedule.cpu.test_no_such_rule" in caplog.text
    assert len(spaces) == 3 and all("SamplePerfectTile" in ck.kinds(s) for s in spaces)
    assert "schedule_rule" not in spaces[0].get(spaces[0].get_block("T_matmul_NN")).annotations


def test_none_keeps_the_block_from_every_rule(ck, wl):
    (sch,) = ck.spaces(annotated(wl.matmul(), "None"), [ApplyCustomRule(), mlt()])
    assert set(ck.kinds(sch)) == {"GetBlock"}


def test_rules_are_looked_up_per_target_key(ck, wl):
    register_custom_rule(
        "test_gpu_only", lambda sch, block: [sch], target_keys=("gpu",), override=True
    )
    func = annotated(wl.matmul(), "test_gpu_only")
    spaces = ck.spaces(func, [ApplyCustomRule(), mlt()])  # a cpu target: not found
    assert all("SamplePerfectTile" in ck.kinds(s) for s in spaces)


def test_registering_twice_needs_override():
    register_custom_rule("test_twice", lambda sch, block: [sch], override=True)
    with pytest.raises(ValueError, match="already registered"):
        register_custom_rule("test_twice", lambda sch, block: [sch])
    with pytest.raises(TypeError, match="function"):
        register_custom_rule("test_not_callable", 3)


def test_needs_a_target(wl):
    func = annotated(wl.matmul(), "anything")
    sch = Schedule(func)
    with pytest.raises(ValueError, match="target"):
        ApplyCustomRule().apply(sch, sch.get_block("T_matmul_NN"))
