"""WarmUpPolicy: how a warming-up evolutionary search samples, refines and picks with a
prior (the search's policy; the prior only scores)."""

import numpy as np
import pytest

from metaschedule.search_strategy import WarmUpPolicy


def test_the_defaults_and_the_checks():
    policy = WarmUpPolicy()
    assert (policy.oversample, policy.random_share, policy.refine_rounds) == (4, 0.25, 3)
    assert WarmUpPolicy(oversample=1).samples_per_pick() == 2  # as many as without a prior
    assert (policy.samples_per_pick(), policy.samples_per_pick(first=True)) == (4, 8)
    with pytest.raises(ValueError, match="first_oversample must be an int >= 1"):
        WarmUpPolicy(first_oversample=0)
    assert WarmUpPolicy(random_share=1).random_share == 1.0
    with pytest.raises(ValueError, match="oversample must be an int >= 1"):
        WarmUpPolicy(oversample=0)
    with pytest.raises(ValueError, match="oversample"):
        WarmUpPolicy(oversample=True)
    with pytest.raises(ValueError, match=r"random_share must be in \[0, 1\]"):
        WarmUpPolicy(random_share=1.5)
    with pytest.raises(ValueError, match="refine_rounds must be an int >= 0"):
        WarmUpPolicy(refine_rounds=-1)
    assert (policy.max_batch, policy.measured_share, policy.measured_parents) == (16, 0.5, 4)
    assert [WarmUpPolicy(measured_share=x).num_near_measured(8) for x in (0, 0.3, 1)] == [0, 2, 8]
    with pytest.raises(ValueError, match="max_batch must be an int >= 1"):
        WarmUpPolicy(max_batch=0)
    with pytest.raises(ValueError, match=r"measured_share must be in \[0, 1\]"):
        WarmUpPolicy(measured_share=-0.1)
    with pytest.raises(ValueError, match="measured_parents must be an int >= 1"):
        WarmUpPolicy(measured_parents=2.5)


def test_pick_takes_the_best_then_random_samples():
    """8 scored: the 10 random samples then 2 refined mutants (the best two scores). A
    batch of 4 with a quarter at random: the 3 best, then one random sample."""
    scores = np.array([1, 5, 2, 7, 3, 0, 4, 6, 0.5, 0.1, 9, 8], float)
    chosen, num_best = WarmUpPolicy(random_share=0.25).pick(scores, 4, 10, np.random.default_rng(0))
    assert num_best == 3 and chosen[:3] == [10, 11, 3]
    assert len(chosen) == 4 and chosen[3] < 10 and chosen[3] not in chosen[:3]
    again, _ = WarmUpPolicy(random_share=0.25).pick(scores, 4, 10, np.random.default_rng(0))
    assert again == chosen  # the generator decides the random ones
    everything, _ = WarmUpPolicy(random_share=0.0).pick(scores, 20, 10, np.random.default_rng(0))
    assert everything == [int(i) for i in np.argsort(-scores, kind="stable")]


def test_refine_mutates_the_best_for_its_rounds():
    """Children of the best ``num`` (parents weighted by score), half as many as samples a
    round, scored and appended; a round with no new child or a failed scoring stops."""
    asked = []

    def children(parents, parent_p, count):
        asked.append((list(parents), None if parent_p is None else list(parent_p), count))
        return [max(parents) + k + 1 for k in range(count)]

    pool, scores = WarmUpPolicy(refine_rounds=2).refine(
        [1, 2, 3, 4], np.array([1.0, 2.0, 3.0, 4.0]), 2, children, lambda xs: np.array(xs, float)
    )
    assert pool == [1, 2, 3, 4, 5, 6, 7, 8] and list(scores) == pool
    assert asked[0] == ([4, 3], [4 / 7, 3 / 7], 2) and asked[1][0] == [6, 5]

    asked.clear()
    pool, _ = WarmUpPolicy(refine_rounds=3).refine(
        [1, 2], np.array([1.0, 2.0]), 2, children, lambda xs: None
    )
    assert pool == [1, 2] and len(asked) == 1  # the scoring failed: no more rounds
    pool, _ = WarmUpPolicy(refine_rounds=0).refine(
        [1, 2], np.array([1.0, 2.0]), 2, children, lambda xs: np.ones(len(xs))
    )
    assert pool == [1, 2]
