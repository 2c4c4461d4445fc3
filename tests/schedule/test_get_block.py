"""Lookup primitives and annotate/unannotate."""

import pytest

from metaschedule import tir


def test_get_block_and_loops(matmul):
    sch = tir.Schedule(matmul)
    b = sch.get_block("C")
    assert sch.get(b).name_hint == "C"
    loops = sch.get_loops(b)
    assert [sch.get(lp).extent.value for lp in loops] == [16, 12, 8]
    with pytest.raises(tir.ScheduleError, match="no block named 'D'"):
        sch.get_block("D")


def test_producers_consumers_outputs(matmul_relu):
    sch = tir.Schedule(matmul_relu)
    c, d = sch.get_block("C"), sch.get_block("D")
    assert [sch.get(x).name_hint for x in sch.get_producers(d)] == ["C"]
    assert [sch.get(x).name_hint for x in sch.get_consumers(c)] == ["D"]
    assert sch.get_producers(c) == [] and sch.get_consumers(d) == []
    root = sch.get_block("root")
    assert [sch.get(x).name_hint for x in sch.get_output_blocks(root)] == ["D"]
    assert [sch.get(x).name_hint for x in sch.get_child_blocks(root)] == ["C", "D"]


def test_annotate_unannotate(matmul):
    sch = tir.Schedule(matmul)
    b = sch.get_block("C")
    i = sch.get_loops(b)[0]
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    assert sch.get(i).annotations == {"pragma_auto_unroll_max_step": 16}
    sch.unannotate(i, "pragma_auto_unroll_max_step")
    assert sch.get(i).annotations == {}
    with pytest.raises(tir.ScheduleError, match="no annotation"):
        sch.unannotate(i, "nope")
