"""ScheduleFn, SpaceGeneratorUnion and user space generators."""

import pytest

from metaschedule.schedule import Schedule
from metaschedule.space_generator import (
    PySpaceGenerator,
    ScheduleFn,
    SpaceGenerator,
    SpaceGeneratorUnion,
)
from metaschedule.testing.tuning_records import matmul
from metaschedule.tune_context import TuneContext
from metaschedule.utils import derived_object


def tile(sch):
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.split(i, sch.sample_perfect_tile(i, n=3))


def tile_decision(sch):
    return next(
        sch.trace.decisions[i] for i in sch.trace.insts if i.kind.name == "SamplePerfectTile"
    )


def ctx_with(space, seed=0):
    return TuneContext(matmul(16), target="cpu", space_generator=space, rand_state=seed)


def test_return_forms():
    def returns_schedule(sch):
        tile(sch)
        return sch

    def returns_list(sch):
        return [sch, sch.copy()]

    for fn, count in ((tile, 1), (returns_schedule, 1), (returns_list, 2)):
        spaces = ctx_with(ScheduleFn(fn)).generate_design_space()
        assert len(spaces) == count and all(isinstance(s, Schedule) for s in spaces)
    assert (
        ctx_with(ScheduleFn(tile)).generate_design_space()[0].trace.insts[-1].kind.name == "Split"
    )
    with pytest.raises(TypeError, match="must return None, a Schedule or a list"):
        ctx_with(ScheduleFn(lambda sch: 3)).generate_design_space()
    with pytest.raises(TypeError, match="function"):
        ScheduleFn("tile")


def test_schedules_are_seeded_from_the_context():
    def draws(seed):
        ctx = ctx_with(ScheduleFn(tile), seed)
        return [tile_decision(ctx.generate_design_space()[0]) for _ in range(6)]

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)
    assert len({tuple(d) for d in draws(1)}) > 1  # each call gets a fresh seed


def test_union_concatenates_and_initialises_members():
    first, second = ScheduleFn(tile), ScheduleFn(lambda sch: [sch, sch.copy()])
    union = SpaceGeneratorUnion([first, second], postprocs=[], sch_rules=[], mutator_probs={})
    ctx = ctx_with(union)
    assert len(ctx.generate_design_space()) == 3
    assert first.mutator_probs  # initialised from the target ("from-target")
    twin = union.clone()
    assert twin.space_generators[0] is not first
    assert isinstance(SpaceGenerator.create("union", [first]), SpaceGeneratorUnion)
    with pytest.raises(TypeError, match="SpaceGenerators"):
        SpaceGeneratorUnion([tile])


def test_user_space_generator_and_create():
    @derived_object
    class Two(PySpaceGenerator):
        def generate_design_space(self, mod):
            sch = self._fresh_schedule(mod)
            return [sch, sch.copy()]

    gen = Two()  # no super().__init__: "from-target" defaults still apply
    ctx = ctx_with(gen)
    assert len(ctx.generate_design_space()) == 2 and gen.mutator_probs
    assert isinstance(SpaceGenerator.create(tile), ScheduleFn)
    with pytest.raises(ValueError, match="post-order-apply"):
        SpaceGenerator.create("random-walk")
    with pytest.raises(TypeError, match="generate_design_space"):

        @derived_object
        class Empty(PySpaceGenerator):
            pass
