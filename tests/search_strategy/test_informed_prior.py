"""A cost model that arrives informed (pre-trained) ranks the warm-up batches."""

import numpy as np

from metaschedule.cost_model.base import PyCostModel
from metaschedule.database import MemoryDatabase
from metaschedule.search_strategy import EvolutionarySearch, WarmUpPolicy
from metaschedule.search_strategy.warm_up import InformedPrior
from metaschedule.space_generator import ScheduleFn
from metaschedule.testing.tuning_records import matmul
from metaschedule.tune_context import TuneContext
from metaschedule.utils import derived_object


@derived_object
class InformedWarmingUp(PyCostModel):
    """Warming up (nothing learned on the task) but informed: scores the innermost tile
    of loop j (16 best), records what it scored."""

    warming_up = True
    informed = True

    def __init__(self, decisions):
        self.decisions, self.calls = decisions, []

    def load(self, path):
        pass

    def save(self, path):
        pass

    def update(self, context, candidates, results):
        pass

    def predict(self, context, candidates):
        keys = [self.decisions(c.sch) for c in candidates]
        self.calls.append(keys)
        return np.array([float(k[1][1]) for k in keys])


class ConstantPrior:
    def __init__(self, values):
        self.values = values

    def predict(self, context, candidates):
        return np.array(self.values, float)


def test_informed_prior_is_the_geometric_blend_and_floors_the_model():
    model = type("M", (), {"predict": lambda self, ctx, c: np.array([1.0, 0.25, -3.0])})()
    blend = InformedPrior(ConstantPrior([4.0, 16.0, 9.0]), model, weight=0.5, floor=1e-2)
    np.testing.assert_allclose(blend.predict(None, [0, 1, 2]), [2.0, 2.0, 0.3])
    alone = InformedPrior(None, model, floor=1e-2)
    np.testing.assert_allclose(alone.predict(None, [0, 1, 2]), [1.0, 0.25, 1e-2])
    assert "informed by" in str(blend)


def test_an_informed_model_ranks_the_warm_up_batch_without_a_prior(tile_ij, drive, decisions):
    """prior=None would take uniform random samples; an informed model ranks them."""
    model = InformedWarmingUp(decisions)
    ctx = TuneContext(
        matmul(64),
        target="cpu",
        space_generator=ScheduleFn(tile_ij, sch_rules=[], postprocs=[], mutator_probs={}),
        search_strategy=EvolutionarySearch(
            population_size=64,
            init_min_unmeasured=2,
            prior=None,
            warm_up=WarmUpPolicy(oversample=4, random_share=0.25, refine_rounds=0),
        ),
        rand_state=1,
    )
    batches = drive(ctx, MemoryDatabase(), max_trials=8, num_trials_per_iter=8, cost_model=model)
    assert model.calls, "the informed model scored the warm-up samples"
    scored = model.calls[0]
    picks = [decisions(c.sch) for c in batches[0]]
    ranked = sorted(set(scored), key=lambda k: k[1][1], reverse=True)
    best = [k[1][1] for k in ranked[:6]]
    assert sorted((k[1][1] for k in picks[:6]), reverse=True) == best
