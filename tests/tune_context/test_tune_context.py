"""TuneContext: normalisation, delegation, initialisation and cloning."""

import logging

import pytest

from metaschedule.database import MemoryDatabase
from metaschedule.runner import RunnerResult
from metaschedule.search_strategy import EvolutionarySearch, ReplayTrace
from metaschedule.space_generator import PostOrderApply, ScheduleFn
from metaschedule.target import Target
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir.function import IRModule
from metaschedule.tune_context import TuneContext
from metaschedule.utils import cpu_count


def tile(sch):
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.split(i, sch.sample_perfect_tile(i, n=2))


def evo():
    return EvolutionarySearch(population_size=8, init_min_unmeasured=1, genetic_num_iters=1)


def test_normalisation():
    func = matmul(8)
    ctx = TuneContext(
        func,
        target="llvm",
        space_generator=tile,
        search_strategy="replay-trace",
        task_name="mm",
        rand_state=12,
        num_threads=3,
    )
    assert isinstance(ctx.mod, IRModule) and ctx.mod["main"] is func
    assert isinstance(ctx.target, Target) and ctx.target.kind == "cpu"
    assert isinstance(ctx.space_generator, ScheduleFn)
    assert isinstance(ctx.search_strategy, ReplayTrace)
    assert ctx.search_strategy.context is ctx
    assert (ctx.rand_state, ctx.num_threads, ctx.task_name) == (12, 3, "mm")
    assert ctx.logger.name == "metaschedule.task.mm"
    renamed = TuneContext(IRModule({"mm": func}))
    assert list(renamed.mod) == ["main"]
    assert TuneContext(IRModule({"a": func, "b": func})).mod.get_global_vars() == ["a", "b"]
    assert 0 <= TuneContext().rand_state < 2**31 - 1
    assert 1 <= TuneContext().num_threads <= cpu_count()
    assert TuneContext(num_threads="logical").num_threads == cpu_count()
    logger = logging.getLogger("custom")
    assert TuneContext(logger=logger).logger is logger


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"rand_state": -5}, ValueError, "rand_state"),
        ({"rand_state": 2**31}, ValueError, "rand_state"),
        ({"rand_state": 1.5}, TypeError, "rand_state"),
        ({"num_threads": "all"}, ValueError, "num_threads"),
        ({"num_threads": 0}, ValueError, "num_threads"),
        ({"logger": "log"}, TypeError, "logger"),
        ({"search_strategy": "annealing"}, ValueError, "evolutionary"),
        ({"target": "tpu"}, ValueError, "tpu"),
    ],
)
def test_invalid_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        TuneContext(matmul(8), **kwargs)
    with pytest.raises(TypeError, match="IRModule or a PrimFunc"):
        TuneContext("matmul")


def test_same_seed_same_streams():
    a, b = TuneContext(rand_state=4), TuneContext(rand_state=4)
    assert [a.fork_seed() for _ in range(3)] == [b.fork_seed() for _ in range(3)]
    assert TuneContext(rand_state=5).fork_seed() != TuneContext(rand_state=4).fork_seed()


def test_delegation_and_its_errors():
    empty = TuneContext(matmul(8))
    with pytest.raises(ValueError, match="space_generator"):
        empty.generate_design_space()
    with pytest.raises(ValueError, match="search_strategy"):
        empty.generate_measure_candidates()
    with pytest.raises(ValueError, match="no mod"):
        TuneContext(space_generator=tile).generate_design_space()
    ctx = TuneContext(
        matmul(8), target="cpu", space_generator=tile, search_strategy=evo(), rand_state=1
    )
    ctx.pre_tuning(4, 2)  # design spaces, database and cost model by default
    cands = ctx.generate_measure_candidates()
    assert len(cands) == 2
    with pytest.raises(ValueError, match="one result per candidate"):
        ctx.notify_runner_results(cands, [RunnerResult([1.0], None)])
    ctx.notify_runner_results(cands, [RunnerResult([1.0], None)] * 2)
    assert len(ctx.generate_measure_candidates()) == 2
    ctx.post_tuning()
    with pytest.raises(ValueError, match="pre_tuning first"):
        ctx.generate_measure_candidates()


def test_clone_is_independent():
    ctx = TuneContext(
        matmul(8),
        target="cpu",
        space_generator=PostOrderApply(sch_rules=[], postprocs=[]),
        search_strategy=evo(),
        task_name="t",
        rand_state=9,
    )
    ctx.pre_tuning(4, 2, database=MemoryDatabase())
    twin = ctx.clone()
    assert twin.space_generator is not ctx.space_generator
    assert twin.search_strategy is not ctx.search_strategy
    assert twin.search_strategy.context is twin and ctx.search_strategy.context is ctx
    assert set(map(id, twin.space_generator.mutator_probs)).isdisjoint(
        map(id, ctx.space_generator.mutator_probs)
    )
    assert (twin.mod, twin.target, twin.task_name, twin.logger) == (
        ctx.mod,
        ctx.target,
        ctx.task_name,
        ctx.logger,
    )
    assert twin.rand_state != ctx.rand_state
    with pytest.raises(ValueError, match="pre_tuning first"):
        twin.generate_measure_candidates()  # the clone does not share the tuning state
    twin.pre_tuning(2, 2)
    assert len(twin.generate_measure_candidates()) == 1  # the space has one point
    assert len(ctx.generate_measure_candidates()) == 1
