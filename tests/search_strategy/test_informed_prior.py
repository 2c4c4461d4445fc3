"""A cost model that arrives informed (pre-trained) ranks the warm-up batches."""

import numpy as np

from metaschedule.cost_model.base import PyCostModel
from metaschedule.cost_model.prior import AnalyticPrior
from metaschedule.cost_model.prior.machine import Machine
from metaschedule.database import MemoryDatabase
from metaschedule.feature_extractor import PerStoreFeature
from metaschedule.measure_candidate import MeasureCandidate
from metaschedule.schedule import Schedule
from metaschedule.search_strategy import EvolutionarySearch, WarmUpPolicy
from metaschedule.search_strategy.warm_up import InformedPrior, describe_scores
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


def test_the_warm_up_log_calls_blended_scores_scores_and_a_priors_estimates_times():
    scores = np.array([2e3, 1e3, 5e2])  # 1 / seconds
    model = type("M", (), {"predict": lambda self, ctx, c: np.ones(len(c))})()
    plain = describe_scores(ConstantPrior([1.0]), scores)
    assert plain == "estimates: best 0.5 ms, median 1 ms"
    blended = describe_scores(InformedPrior(ConstantPrior([1.0]), model), scores)
    assert blended == "blended scores: best 2e+03, median 1e+03" and "ms" not in blended


def test_the_models_prior_features_share_the_searchs_estimates():
    """An informed model whose features include the prior's estimate takes the search's
    prior (so each candidate is estimated once), and only a prior like its own."""
    extractor = PerStoreFeature(extract_prior=True)
    model = type("M", (), {"extractor": extractor})()
    prior = AnalyticPrior()
    InformedPrior(prior, model)
    assert extractor._prior is prior
    sch = Schedule(matmul(32))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, [None, 8])
    ctx = TuneContext(matmul(32), target="llvm")
    (feats,) = extractor.extract_from(ctx, [MeasureCandidate(sch, [])])
    assert id(sch.mod) in prior._cache, "the search's prior made the features' estimate"
    secs = 1.0 / prior.score_mod(sch.mod, Machine.of_target(ctx.target))
    np.testing.assert_allclose(feats[0, extractor.layout.span("prior")][0], np.log2(1 + secs * 1e9))
    other = PerStoreFeature(extract_prior=True)
    assert not other.share_prior(AnalyticPrior(machine=Machine(vector_registers=16)))
    assert other._prior is None
    assert not PerStoreFeature().share_prior(prior)  # no prior slots: nothing to share
