"""ReplayTrace and ReplayFunc driven without a compiler, and postprocessor failures."""

import logging

import numpy as np
import pytest

from metaschedule.postproc import PyPostproc
from metaschedule.search_strategy import ReplayFunc, ReplayTrace, SearchStrategy
from metaschedule.space_generator import ScheduleFn
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir.interpreter import interpret
from metaschedule.tune_context import TuneContext
from metaschedule.utils import derived_object


@derived_object
class RejectInnermostOne(PyPostproc):
    """Rejects schedules whose first tile has an innermost factor of 1; counts calls."""

    def __init__(self, decisions):
        self.decisions = decisions
        self.calls = 0

    def apply(self, sch):
        self.calls += 1
        return self.decisions(sch)[0][1] != 1


@derived_object
class RejectAll(PyPostproc):
    def apply(self, sch):
        return False


def make_ctx(sch_fn, strategy, postprocs=(), seed=3, func=None):
    space = ScheduleFn(sch_fn, sch_rules=[], postprocs=list(postprocs), mutator_probs={})
    return TuneContext(
        func or matmul(16),
        target="cpu",
        space_generator=space,
        search_strategy=strategy,
        rand_state=seed,
    )


@pytest.mark.parametrize("strategy", [ReplayTrace, ReplayFunc])
def test_batches_respect_max_trials_and_sample_the_space(strategy, tile_ij, drive, decisions):
    ctx = make_ctx(tile_ij, strategy())
    batches = drive(ctx, max_trials=10, num_trials_per_iter=4)
    assert [len(b) for b in batches] == [4, 4, 2]
    keys = [decisions(c.sch) for b in batches for c in b]
    assert len(set(keys)) > 3  # random points of a 25-point space
    for key in keys:
        assert key[0][0] * key[0][1] == 16 and key[1][0] * key[1][1] == 16


@pytest.mark.parametrize("strategy", [ReplayTrace, ReplayFunc])
def test_candidates_are_postprocessed_and_correct(strategy, tile_ij, drive, decisions):
    post = RejectInnermostOne(decisions)
    ctx = make_ctx(tile_ij, strategy(), [post], func=matmul(8))
    cands = [c for b in drive(ctx, max_trials=6, num_trials_per_iter=6) for c in b]
    assert len(cands) == 6 and post.calls >= 6
    rng = np.random.default_rng(1)
    a, b = rng.random((8, 8), dtype=np.float32), rng.random((8, 8), dtype=np.float32)
    for cand in cands:
        assert decisions(cand.sch)[0][1] != 1
        assert any(i.kind.name == "EnterPostproc" for i in cand.sch.trace.insts)
        c = np.zeros((8, 8), np.float32)
        interpret(cand.sch.mod["main"], a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@pytest.mark.parametrize("strategy", [lambda: ReplayTrace(max_fail_count=3), ReplayFunc])
def test_stops_when_every_candidate_fails(strategy, tile_ij, caplog):
    ctx = make_ctx(tile_ij, strategy(), [RejectAll()])
    ctx.pre_tuning(8, 4)
    with caplog.at_level(logging.WARNING):
        assert ctx.generate_measure_candidates() is None
    assert "RejectAll" in caplog.text
    ctx.post_tuning()


def test_same_seed_same_candidates(tile_ij, drive, decisions):
    def run(seed):
        batches = drive(make_ctx(tile_ij, ReplayTrace(), seed=seed), max_trials=6)
        return [decisions(c.sch) for b in batches for c in b]

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_lifecycle_errors_and_create(tile_ij):
    ctx = make_ctx(tile_ij, ReplayTrace())
    with pytest.raises(ValueError, match="pre_tuning first"):
        ctx.generate_measure_candidates()
    ctx.pre_tuning(4, 2)
    with pytest.raises(ValueError, match="already called"):
        ctx.pre_tuning(4, 2)
    with pytest.raises(ValueError, match="num_trials_per_iter"):
        make_ctx(tile_ij, ReplayTrace()).pre_tuning(4, 0)
    fresh = make_ctx(tile_ij, ReplayTrace()).search_strategy
    with pytest.raises(ValueError, match="at least one design space"):
        fresh.pre_tuning(4, 2, [])
    with pytest.raises(TypeError, match="design spaces must be Schedules"):
        fresh.pre_tuning(4, 2, ["not a schedule"])
    with pytest.raises(ValueError, match="max_fail_count"):
        ReplayTrace(max_fail_count=0)
    assert isinstance(SearchStrategy.create("replay-trace", max_fail_count=7), ReplayTrace)
    assert SearchStrategy.create("replay-trace", 7).clone().max_fail_count == 7
    assert isinstance(SearchStrategy.create("replay-func").clone(), ReplayFunc)
