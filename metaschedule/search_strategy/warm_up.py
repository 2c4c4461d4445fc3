"""``WarmUpPolicy``: how a warming-up evolutionary search picks its batches with a prior.

While the learned cost model is warming up (it has learned nothing and scores at random,
``CostModel.warming_up``), :class:`~.evolutionary_search.EvolutionarySearch` draws its
batches from random samples of the design space. With a prior (a cost model that needs
no data: by default the analytic CPU model,
:class:`~metaschedule.cost_model.prior.AnalyticPrior`), it samples ``oversample`` times
the batch, refines them for ``refine_rounds`` rounds (mutants of the prior's best, every
mutator alike, scored by the prior: random samples seldom hold the register tiles or
compute locations it rates best), and measures the ones the prior ranks highest,
keeping a share ``random_share`` of random picks among the random samples.

The learned model uses no measurement before it has ``num_warmup_samples`` of them (100
for XGBoost: more than a 64-trial budget), so the policy makes the warm-up learn from
its own: a warm-up batch has at most ``max_batch`` schedules (a larger batch is measured
in several), and once the workload has measured schedules a share ``measured_share`` of
each batch is picked among mutants of the ``measured_parents`` fastest (the prior ranks
them). The prior cannot tell apart the schedules it rates best (its estimates of a
batch's top few differ by a few percent where their measured times differ by 1.5x);
the measurements can, and the fastest one's neighbours are where the next gains are.

The prior only scores; this policy is the search's. Where we differ from TVM: TVM's
warm-up batches are uniformly random (``EvolutionarySearch(prior=None)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

__all__ = ["InformedPrior", "WarmUpPolicy"]

T = TypeVar("T")


@dataclass(frozen=True)
class WarmUpPolicy:
    """How many random schedules a warming-up search samples, refines and picks from.

    Args:
        oversample: random schedules sampled per schedule to pick (at least 1; at least
            2 are sampled, as without a prior; 1 means the prior only reorders).
        random_share: share of a warm-up batch picked at random among the random
            samples, for diversity (the rest are the prior's best).
        refine_rounds: rounds of mutating the prior's best samples (half as many
            children as samples per round, scored by the prior) before it picks; 0: it
            picks among the random samples only. Three: the depthwise convolution's fast
            structures (padding inlined, a few pixels' tile over the 3x3 window) take two
            changes from the random samples' best (the padding's location and the
            tile), which two rounds reached for neither of two seeds, three for both.
        first_oversample: ``oversample`` of the first batch, which has no measurement
            to start from (the later ones mutate the fastest measured schedules): on the
            depthwise convolution, 8 finds schedules the prior rates 12% faster than 4.
        max_batch: most schedules in a warm-up batch; a larger ``num_trials_per_iter``
            is measured in several batches, each steered by the measurements before it.
        measured_share: share of a warm-up batch picked, once the workload has measured
            schedules, among mutants of the fastest of them (ranked by the prior).
        measured_parents: how many of the fastest measured schedules are mutated.

    Raises:
        ValueError: a setting out of its range.
    """

    oversample: int = 4
    random_share: float = 0.25
    refine_rounds: int = 3
    first_oversample: int = 8
    max_batch: int = 16
    measured_share: float = 0.5
    measured_parents: int = 4

    def __post_init__(self) -> None:
        for name, value, low in (
            ("oversample", self.oversample, 1),
            ("refine_rounds", self.refine_rounds, 0),
            ("first_oversample", self.first_oversample, 1),
            ("max_batch", self.max_batch, 1),
            ("measured_parents", self.measured_parents, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"WarmUpPolicy: {name} must be an int >= {low}, got {value!r}")
        for name in ("random_share", "measured_share"):
            value = getattr(self, name)
            if isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"WarmUpPolicy: {name} must be in [0, 1], got {value!r}")
            object.__setattr__(self, name, float(value))

    def num_near_measured(self, num: int) -> int:
        """How many of a warm-up batch of ``num`` are picked near the measured best."""
        return int(round(num * self.measured_share))

    def samples_per_pick(self, first: bool = False) -> int:
        """Random samples drawn per schedule of a batch the prior picks from (``first``:
        of the first batch, nothing measured yet)."""
        return max(2, self.first_oversample if first else self.oversample)

    def refine(
        self,
        samples: list[T],
        scores: np.ndarray,
        num: int,
        children: Callable[[list[T], np.ndarray | None, int], list[T]],
        score: Callable[[list[T]], np.ndarray | None],
    ) -> tuple[list[T], np.ndarray]:
        """``samples`` and their prior ``scores``, followed by mutants of the prior's best
        ``num`` and their scores: ``refine_rounds`` rounds, each asking ``children(parents,
        parent_p, count)`` for ``len(samples) // 2`` (at least 1) new distinct ones, a
        child's parent drawn in proportion to its score (``parent_p``; None: uniform).
        Stops early when a round finds no new child, or ``score`` returns None (it
        failed)."""
        pool, pool_scores = list(samples), [float(x) for x in scores]
        for _ in range(self.refine_rounds):
            top = np.argsort(-np.array(pool_scores), kind="stable")[:num]
            parents = [pool[int(i)] for i in top]
            weights = np.array([pool_scores[int(i)] for i in top], float)
            parent_p = weights / weights.sum() if weights.sum() > 0 else None
            kids = children(parents, parent_p, max(1, len(samples) // 2))
            if not kids:
                break
            got = score(kids)
            if got is None:
                break
            pool += kids
            pool_scores += [float(x) for x in np.nan_to_num(got, nan=0.0)]
        return pool, np.array(pool_scores)

    def pick(
        self,
        scores: Sequence[float] | np.ndarray,
        num: int,
        num_random: int,
        rng: np.random.Generator,
    ) -> tuple[list[int], int]:
        """The batch of ``num`` among scored schedules, as indices into ``scores``, and how
        many of them the prior picked: the best ``num - round(num * random_share)`` first
        (best first), then the rest at random among the first ``num_random`` (the random
        samples; refined mutants follow them) not picked already."""
        scores = np.asarray(scores, float)
        order = np.argsort(-scores, kind="stable")
        num_best = min(len(scores), num - int(round(num * self.random_share)))
        chosen = [int(i) for i in order[:num_best]]
        taken = set(chosen)
        rest = [i for i in range(num_random) if i not in taken]
        chosen += [rest[int(i)] for i in rng.permutation(len(rest))[: num - len(chosen)]]
        return chosen, num_best


class InformedPrior:
    """The warm-up's scorer when the cost model is ``informed`` while warming up (it
    arrives pre-trained): the geometric mean of the prior's estimated throughput and the
    model's predicted normalised throughput (floored at ``floor``), each to the power of
    its ``weight``; the model alone without a prior. Both are per-workload scales, so
    scores of separate calls compare (the refinement compares children with parents).
    """

    def __init__(self, prior: Any, model: Any, weight: float = 0.5, floor: float = 1e-3):
        self.prior, self.model, self.weight, self.floor = prior, model, weight, floor
        share = getattr(getattr(model, "extractor", None), "share_prior", None)
        if prior is not None and share is not None:
            share(prior)  # the model's prior features: the same estimates, computed once

    def predict(self, context: Any, candidates: list[Any]) -> np.ndarray:
        learned = np.maximum(np.asarray(self.model.predict(context, candidates), float), 0.0)
        learned = np.maximum(learned, self.floor)
        if self.prior is None:
            return learned
        estimate = np.asarray(self.prior.predict(context, candidates), float)
        return estimate ** (1.0 - self.weight) * learned**self.weight

    def __str__(self) -> str:
        return f"{self.prior or 'no prior'} informed by {type(self.model).__name__}"


def describe_scores(scorer: Any, scores: np.ndarray) -> str:
    """The warm-up log's summary of a batch's ``scores``: a prior's are ``1 / estimated
    seconds`` (shown as times); an :class:`InformedPrior`'s blend the prior's estimate with
    the model's prediction, and are not times."""
    best, median = float(scores.max()), float(np.median(scores))
    if isinstance(scorer, InformedPrior):
        return f"blended scores: best {best:.3g}, median {median:.3g}"
    return (
        f"estimates: best {1e3 / max(best, 1e-30):.3g} ms, median {1e3 / max(median, 1e-30):.3g} ms"
    )
