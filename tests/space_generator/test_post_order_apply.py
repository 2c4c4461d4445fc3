"""PostOrderApply: rules applied to every block, consumers first."""

import pytest

from metaschedule import registry, te
from metaschedule.mutator import MutateTileSize
from metaschedule.postproc import Postproc, PyPostproc
from metaschedule.schedule_rule import PyScheduleRule, ScheduleRule
from metaschedule.space_generator import PostOrderApply, SpaceGenerator
from metaschedule.tune_context import TuneContext
from metaschedule.utils import derived_object


def chain(n=8):
    a = te.placeholder((n, n), "float32", "A")
    b = te.compute((n, n), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((n, n), lambda i, j: b[i, j] + 1.0, name="C")
    d = te.compute((n, n), lambda i, j: c[i, j] * c[i, j], name="D")
    return te.create_prim_func([a, d])


@derived_object
class Record(PyScheduleRule):
    """Records the blocks it sees; returns the schedule unchanged."""

    def __init__(self, log):
        self.log = log
        self.context = None

    def _initialize_with_tune_context(self, context):
        self.context = context

    def apply(self, sch, block):
        self.log.append(sch.get(block).name_hint)
        return [sch]


@derived_object
class ForkOnC(PyScheduleRule):
    """On block C: two spaces, C's first loop split by 2 or by 4."""

    def apply(self, sch, block):
        if sch.get(block).name_hint != "C":
            return [sch]
        out = []
        for factor in (2, 4):
            new = sch.copy()
            new.split(new.get_loops(block)[0], [None, factor])
            out.append(new)
        return out


@derived_object
class InlineB(PyScheduleRule):
    def apply(self, sch, block):
        if sch.get(block).name_hint == "B":
            sch.compute_inline(block)
        return [sch]


def design_spaces(rules, func=None, **kwargs):
    space = PostOrderApply(sch_rules=rules, postprocs=[], mutator_probs={}, **kwargs)
    ctx = TuneContext(func or chain(), target="cpu", space_generator=space, rand_state=0)
    return ctx.generate_design_space()


def test_blocks_in_post_order_consumers_first():
    log = []
    spaces = design_spaces([Record(log)])
    assert len(spaces) == 1
    assert log == ["root", "D", "C", "B"]
    assert [i.kind.name for i in spaces[0].trace.insts] == ["GetBlock"] * 4  # lookups traced


def test_rules_run_in_order_over_every_space():
    log = []
    spaces = design_spaces([ForkOnC(), Record(log)])
    assert len(spaces) == 2
    assert log == ["root", "D", "C", "B"] * 2
    extents = sorted(s.get(s.get_loops(s.get_block("C"))[1]).extent.value for s in spaces)
    assert extents == [2, 4]


def test_removed_and_filtered_and_annotated_blocks_are_skipped():
    log = []
    design_spaces([InlineB(), Record(log)])
    assert log == ["root", "D", "C"]
    log.clear()
    design_spaces([Record(log)], f_block_filter=lambda block: block.name_hint != "C")
    assert log == ["root", "D", "B"]

    def annotate_c(sch, block):
        if sch.get(block).name_hint == "C":
            sch.annotate(block, "schedule_rule", "my_rule")
        return [sch]

    @derived_object
    class AnnotateC(PyScheduleRule):
        def apply(self, sch, block):
            return annotate_c(sch, block)

    log.clear()
    design_spaces([AnnotateC(), Record(log)])
    assert log == ["root", "D", "B"]


def test_from_target_fills_defaults_and_initialises_parts():
    space = PostOrderApply()
    ctx = TuneContext(chain(), target="cpu", space_generator=space, rand_state=0)
    from metaschedule.postproc import Postproc
    from metaschedule.schedule_rule import ScheduleRule

    assert [type(r) for r in space.sch_rules] == [type(r) for r in ScheduleRule.create("llvm")]
    assert [type(p) for p in space.postprocs] == [type(p) for p in Postproc.create("llvm")]
    assert {type(m) for m in space.mutator_probs} >= {MutateTileSize}
    assert all(m._mod is ctx.mod for m in space.mutator_probs)
    bare = PostOrderApply()
    TuneContext(chain(), space_generator=bare)  # no target: nothing to take defaults from
    assert (bare.sch_rules, bare.postprocs, bare.mutator_probs) == ([], [], {})
    with pytest.raises(ValueError, match="sch_rules"):
        PostOrderApply().generate_design_space(TuneContext(chain()).mod)


def test_registered_defaults_are_used():
    log = []
    with registry.registered("schedule_rule", "llvm", lambda: [Record(log)]):
        space = PostOrderApply()
        ctx = TuneContext(chain(), target="cpu", space_generator=space, rand_state=0)
        assert [type(r) for r in ScheduleRule.create("llvm")] == [Record]
    assert space.sch_rules[0].context is ctx
    ctx.generate_design_space()
    assert log == ["root", "D", "C", "B"]
    assert type(ScheduleRule.create("llvm")[0]) is not Record  # restored after the block
    with pytest.raises(ValueError, match="llvm"):
        ScheduleRule.create("tpu")
    with pytest.raises(ValueError, match="llvm"):
        Postproc.create("tpu")
    with pytest.raises(ValueError, match="unknown postprocessor kind 'hexagon'"):
        Postproc.create("hexagon")  # not built: an error, never an empty list


def test_clone_and_create():
    log = []
    space = PostOrderApply(sch_rules=[Record(log)], postprocs=[], mutator_probs={})
    twin = space.clone()
    assert twin.sch_rules[0] is not space.sch_rules[0]
    assert isinstance(SpaceGenerator.create("post-order-apply"), PostOrderApply)
    with pytest.raises(TypeError, match="ScheduleRule"):
        PostOrderApply(sch_rules=["not a rule"])
    with pytest.raises(TypeError, match="mutator_probs"):
        PostOrderApply(mutator_probs=[MutateTileSize()])

    @derived_object
    class Keep(PyPostproc):
        def apply(self, sch):
            return True

    assert PostOrderApply(postprocs=[Keep()]).clone().postprocs[0].apply(None)
