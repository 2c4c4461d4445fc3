"""The feature slot table: names and group positions derive from one declaration."""

import pytest

from metaschedule.feature_extractor import PerStoreFeature
from metaschedule.feature_extractor.features.layout import Layout, feature_names, slot_table
from metaschedule.feature_extractor.features.linear import LinearForm
from metaschedule.tir import Var
from metaschedule.tir import expr as E


def test_names_and_spans_follow_the_table():
    table = slot_table(
        buffers_per_store=2, arith_intensity_curve_num_samples=3, extract_workload=True
    )
    layout = Layout(table)
    assert len(layout) == sum(w for _, _, w in table) == len(set(layout.names))
    assert layout.names[layout.span("ops")][:2] == ["float_mad", "float_addsub"]
    assert layout.names[layout.span("vec")][0] == "vec_num"
    assert layout.names[layout.span("B1")][0] == "B1.acc_type_read"
    assert layout.names[layout.span("curve")] == [f"arith_intensity_curve_{i}" for i in range(3)]
    assert layout.names[layout.span("workload")][-1] == "workload_param_bytes"
    assert layout.span("B2") == slice(0, 0)  # a group the table does not have
    # the historical fixed offsets still hold: 57 group-1 slots, then 18 per buffer
    assert layout.span("B0").start == 57 and layout.span("B1").start == 57 + 18
    assert (
        feature_names(2, 3, True)
        == layout.names
        == PerStoreFeature(
            buffers_per_store=2, arith_intensity_curve_num_samples=3, extract_workload=True
        ).feature_names
    )


def test_groups_must_be_contiguous():
    with pytest.raises(ValueError, match="not contiguous"):
        Layout([("a", "x", 1), ("b", "y", 1), ("a", "z", 1)])


def test_linear_form_of_an_index():
    i, j = Var("i", "int32"), Var("j", "int32")
    pos = {i: 0, j: 1}
    form = LinearForm.of(E.Add(E.Mul(i, E.IntImm("int32", 8)), j), pos)
    assert form.plain == {0: 8.0, 1: 1.0} and form.const == 0.0
    mod = LinearForm.of(E.FloorMod(E.Add(i, j), E.IntImm("int32", 4)), pos)
    assert mod.loops() == {0, 1} and mod.capped == [({0: 1.0, 1: 1.0}, 3.0)]
    div = LinearForm.of(E.FloorDiv(E.Add(i, E.IntImm("int32", 5)), E.IntImm("int32", 2)), pos)
    assert div.coef(0) == 0.5 and div.const == 2.0
    assert form.signature() == form.plus(LinearForm({}, [], 3.0)).signature()
