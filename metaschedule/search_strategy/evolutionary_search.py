"""``EvolutionarySearch``: evolve schedules with mutators, guided by a cost model.

Each batch (as TVM's evolutionary search):

1. the initial population: the best measured traces of the workload from the database,
   replayed, plus random replays of the design spaces that were not measured yet;
2. ``genetic_num_iters`` rounds of evolution: parents drawn in proportion to their
   predicted score, mutated (a mutator drawn by ``mutator_probs``, with probability
   ``genetic_mutate_prob``) and replayed with the postprocessors; every schedule seen is
   scored by the cost model and the best unmeasured ones are kept;
3. the picks: the best schedules, with a share ``eps_greedy`` of random initial ones.

Where we differ from TVM on purpose: while the cost model is warming up (it has learned
nothing yet and scores at random, ``CostModel.warming_up``), evolution guided by those
scores would only shuffle random schedules, at the price of ``genetic_num_iters x
population_size`` replays. Such a batch is drawn from random initial samples directly
(about twice the batch size of them). Replayed traces are remembered across batches.

And while warming up, ``prior`` (by default the analytic CPU model
:class:`~metaschedule.cost_model.prior.AnalyticPrior`, used on CPU targets only) ranks
those random samples, by the policy ``warm_up`` (:class:`~.warm_up.WarmUpPolicy`): it
samples ``oversample`` times the batch, adds mutants of the ones it ranks highest
(``refine_rounds`` rounds, scored by the prior alone), picks the best of all and a share
``random_share`` of the random samples at random. Warm-up batches have at most
``max_batch`` schedules, and once some are measured a share ``measured_share`` of each is
the prior's best mutants of the fastest measured ones: the warm-up learns from its own
measurements before the cost model does. ``prior=None`` restores uniform random
warm-up batches (TVM's behaviour). Once the cost model has trained, the prior is not used.

A schedule is never picked twice, nor picked when it was measured before: picked schedules
and the database records of the workload are remembered (by the structure of the scheduled
module, and by trace for records not replayed).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cost_model.prior import AnalyticPrior
from ..measure_candidate import MeasureCandidate
from ..registry import register
from ..schedule import Schedule, Trace
from .base import (
    ContextBound,
    SearchStrategy,
    TraceReplayer,
    TrialWindow,
    random_seed,
    timed,
    trace_key,
)
from .schedule_set import ScheduleInfo, ScheduleSet
from .warm_up import InformedPrior, WarmUpPolicy, describe_scores

if TYPE_CHECKING:
    from ..cost_model.base import CostModel
    from ..database import Database, Workload
    from ..mutator import Mutator
    from ..runner import RunnerResult

__all__ = ["EvolutionarySearch"]


@dataclass
class _State:
    window: TrialWindow
    design_spaces: list[Trace]
    database: Database
    cost_model: CostModel
    workload: Workload
    replayer: TraceReplayer
    measured: ScheduleSet = field(default_factory=ScheduleSet)
    db_replays: dict[str, Schedule | None] = field(default_factory=dict)
    picked: list[ScheduleInfo] = field(default_factory=list)  # the last batch, until notified
    num_empty_iters: int = 0


@register("search_strategy", "evolutionary")
class EvolutionarySearch(ContextBound, SearchStrategy):
    """Evolutionary search guided by a cost model (see the module docstring).

    Args:
        population_size: schedules per generation.
        init_measured_ratio: share of the initial population taken from the database.
        init_min_unmeasured: fewest unmeasured initial schedules; with fewer the search
            is over (the space is exhausted or cannot be sampled).
        max_fail_count: rounds of initial sampling (``population_size`` replays each) to
            reach ``init_min_unmeasured``.
        genetic_num_iters: rounds of evolution per batch.
        genetic_mutate_prob: probability that a child is a mutation (else a copy).
        genetic_max_fail_count: retries of a failed mutation before copying the parent.
        eps_greedy: share of random initial schedules among the picks.
        prior: ranks the random samples of a batch while the cost model warms up:
            ``"analytic"`` (:class:`~metaschedule.cost_model.prior.AnalyticPrior`), an
            ``AnalyticPrior``, or None (uniform random picks, as TVM).
        warm_up: how the prior picks a warm-up batch (``oversample``, ``random_share``,
            ``refine_rounds``: :class:`~.warm_up.WarmUpPolicy`); None: the defaults.
    """

    #: batches in a row without a new schedule before the search stops (TVM's default)
    num_empty_iters_before_early_stop: int = 5

    def __init__(
        self,
        *,
        population_size: int = 512,
        init_measured_ratio: float = 0.2,
        init_min_unmeasured: int = 50,
        max_fail_count: int = 5,
        genetic_num_iters: int = 4,
        genetic_mutate_prob: float = 0.85,
        genetic_max_fail_count: int = 10,
        eps_greedy: float = 0.05,
        prior: str | AnalyticPrior | None = "analytic",
        warm_up: WarmUpPolicy | None = None,
    ) -> None:
        for name, value, low in (
            ("population_size", population_size, 1),
            ("init_min_unmeasured", init_min_unmeasured, 1),
            ("max_fail_count", max_fail_count, 1),
            ("genetic_num_iters", genetic_num_iters, 0),
            ("genetic_max_fail_count", genetic_max_fail_count, 0),
        ):
            if not isinstance(value, int) or value < low:
                raise ValueError(
                    f"EvolutionarySearch: {name} must be an int >= {low}, got {value!r}"
                )
        for name, value in (
            ("init_measured_ratio", init_measured_ratio),
            ("genetic_mutate_prob", genetic_mutate_prob),
            ("eps_greedy", eps_greedy),
        ):
            if not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"EvolutionarySearch: {name} must be in [0, 1], got {value!r}")
        self.population_size = population_size
        self.init_measured_ratio = float(init_measured_ratio)
        self.init_min_unmeasured = init_min_unmeasured
        self.max_fail_count = max_fail_count
        self.genetic_num_iters = genetic_num_iters
        self.genetic_mutate_prob = float(genetic_mutate_prob)
        self.genetic_max_fail_count = genetic_max_fail_count
        self.eps_greedy = float(eps_greedy)
        if prior == "analytic":
            prior = AnalyticPrior()
        elif prior is not None and not isinstance(prior, AnalyticPrior):
            raise ValueError(
                f"EvolutionarySearch: prior must be 'analytic', an AnalyticPrior or None, "
                f"got {prior!r}"
            )
        self.prior: AnalyticPrior | None = prior
        if warm_up is not None and not isinstance(warm_up, WarmUpPolicy):
            raise ValueError(
                f"EvolutionarySearch: warm_up must be a WarmUpPolicy or None, got {warm_up!r}"
            )
        self.warm_up: WarmUpPolicy = warm_up if warm_up is not None else WarmUpPolicy()
        self._state: _State | None = None
        self._new_batch()

    #: replayed traces remembered across batches, at most this many per population size
    replay_memo_factor: int = 8

    def _new_batch(self) -> None:
        """Forget per-batch memos (scores may change between batches as the model learns)."""
        self._infos: dict[int, ScheduleInfo] = {}  # id(sch) -> info; keeps sch alive
        self._scores: dict[int, float] = {}  # id(sch) -> predicted score
        replays = getattr(self, "_replays", {})
        if len(replays) > self.replay_memo_factor * self.population_size:
            replays = {}  # a bound on memory; replays of the same trace are equal
        self._replays: dict[str, Schedule | None] = replays  # trace key -> replayed schedule

    # --------------------------------------------------------------------- interface
    def _initialize_with_tune_context(self, context: Any) -> None:
        self._bind(context)
        self._state = None

    def pre_tuning(
        self,
        max_trials: int,
        num_trials_per_iter: int,
        design_spaces: list[Schedule],
        database: Database | None = None,
        cost_model: CostModel | None = None,
    ) -> None:
        self._check_pre_tuning(self._state is not None, design_spaces)
        if database is None or cost_model is None:
            missing = "database" if database is None else "cost_model"
            raise ValueError(
                f"EvolutionarySearch needs a {missing} in pre_tuning "
                "(TuneContext.pre_tuning supplies a memory database and a "
                "random model when none is given)"
            )
        workload = database.commit_workload(self.mod)
        self._state = _State(
            TrialWindow(max_trials, num_trials_per_iter),
            [Trace(sch.trace.insts, {}) for sch in design_spaces],
            database,
            cost_model,
            workload,
            TraceReplayer(self.mod, self.postprocs),
        )
        # Records measured earlier (a resumed run) are never measured again.
        for record in database.get_all_tuning_records():
            if record.workload is workload or record.workload.shash == workload.shash:
                self._state.measured.add_trace_key(trace_key(record.trace))

    def post_tuning(self) -> None:
        state = self._require_state()
        self._log(logging.INFO, "EvolutionarySearch failures: %s", state.replayer.summary())
        self._state = None

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        state = self._require_state()
        num = state.window.next_batch()
        if num == 0:
            return None
        self._new_batch()
        pop = self.population_size
        warming_up = bool(getattr(state.cost_model, "warming_up", False))
        prior = self._prior()
        if warming_up:  # random scores: no evolution, random samples (module docstring)
            if prior is not None:
                num = min(num, self.warm_up.max_batch)  # the rest after these are measured
            measured = []
            per_pick = 2 if prior is None else self.warm_up.samples_per_pick(not state.measured)
            unmeasured = self._sample_init_population(
                min(pop, max(per_pick * num, self.init_min_unmeasured))
            )
        else:
            measured = self._pick_best_from_database(int(pop * self.init_measured_ratio))
            unmeasured = self._sample_init_population(pop - len(measured))
        self._log(
            logging.INFO,
            "Picked %d schedule(s) from the database, sampled %d",
            len(measured),
            len(unmeasured),
        )
        if len(unmeasured) < self.init_min_unmeasured:
            self._log(
                logging.WARNING,
                "Cannot sample enough initial population (%d < "
                "init_min_unmeasured=%d): the search is over",
                len(unmeasured),
                self.init_min_unmeasured,
            )
            return None
        if warming_up and prior is not None:
            with timed("EvoSearch/PickWithPrior"):
                picks = self._pick_with_prior(self._unique_unmeasured(unmeasured), num)
        else:
            if warming_up:
                bests = self._unique_unmeasured(unmeasured)
            else:
                bests = self._evolve(measured + unmeasured, num)
            with timed("EvoSearch/PickWithEpsGreedy"):
                # Warming up, every sample is a random pick already: take distinct ones.
                picks = self._pick_with_eps_greedy([] if warming_up else unmeasured, bests, num)
        self._log(logging.INFO, "Sending %d candidate(s) for measurement", len(picks))
        if not picks:
            state.num_empty_iters += 1
            if state.num_empty_iters >= self.num_empty_iters_before_early_stop:
                return None
        else:
            state.num_empty_iters = 0
        return self._candidates(picks)

    def notify_runner_results(
        self, measure_candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        state = self._require_state()
        state.window.advance(len(measure_candidates))
        sent = {id(c.sch) for c in measure_candidates}
        for info in state.picked:  # picks the caller did not measure may be picked again
            if id(info.sch) not in sent:
                state.measured.discard(info)
        state.picked = []
        for cand in measure_candidates:
            state.measured.add(ScheduleInfo(cand.sch))

    def clone(self) -> EvolutionarySearch:
        return EvolutionarySearch(
            population_size=self.population_size,
            init_measured_ratio=self.init_measured_ratio,
            init_min_unmeasured=self.init_min_unmeasured,
            max_fail_count=self.max_fail_count,
            genetic_num_iters=self.genetic_num_iters,
            genetic_mutate_prob=self.genetic_mutate_prob,
            genetic_max_fail_count=self.genetic_max_fail_count,
            eps_greedy=self.eps_greedy,
            prior=None if self.prior is None else self.prior.clone(),
            warm_up=self.warm_up,
        )

    # --------------------------------------------------------------------- the phases
    def _pick_best_from_database(self, num: int) -> list[Schedule]:
        return self._best_measured(num)[0]

    def _best_measured(self, num: int) -> tuple[list[Schedule], list[float]]:
        """The ``num`` fastest measured schedules of the workload (replayed database
        records, fastest first) and their mean measured seconds."""
        state = self._require_state()
        if num <= 0:
            return [], []
        out, secs = [], []
        with timed("EvoSearch/PickBestFromDatabase"):
            for record in state.database.get_top_k(state.workload, num):
                key = trace_key(record.trace)
                if key not in state.db_replays:
                    sch = state.replayer(record.trace, random_seed(self.rng))
                    if sch is None:
                        self._log(
                            logging.WARNING,
                            "A database record of this workload does "
                            "not replay here; ignoring it:\n%s",
                            record.trace,
                        )
                    state.db_replays[key] = sch
                sch = state.db_replays[key]
                if sch is not None:
                    out.append(sch)
                    secs.append(float(np.mean(record.run_secs)))
                    state.measured.add(self._info(sch))
        return out, secs

    def _sample_init_population(self, num: int) -> list[Schedule]:
        state = self._require_state()
        spaces = state.design_spaces
        # a space without sampling instructions is one schedule: replayed once per call
        # (a spatial-only function's space often is: all inlined, parallel, vectorized)
        fixed = [not any(i.kind.has_decision for i in sp.insts) for sp in spaces]
        once: dict[int, Schedule | None] = {}
        out: list[Schedule] = []
        with timed("EvoSearch/SampleInitPopulation"):
            for _ in range(self.max_fail_count):
                for _ in range(num):
                    k = int(self.rng.integers(len(spaces)))
                    seed = random_seed(self.rng)
                    if not fixed[k]:
                        sch = state.replayer(spaces[k], seed)
                    elif k in once:
                        sch = once[k]
                    else:
                        sch = once[k] = state.replayer(spaces[k], seed)
                    if sch is not None and not state.measured.contains(self._info(sch)):
                        out.append(sch)  # repeats allowed: they weigh the sampling, as TVM
                if len(out) >= self.init_min_unmeasured or all(fixed):
                    break  # every space fixed: another round finds nothing new
        return out

    def _evolve(self, population: list[Schedule], num: int) -> list[Schedule]:
        state = self._require_state()
        seen = ScheduleSet()
        heap: list[tuple[float, int, Schedule]] = []  # the best `num`, a min-heap
        for it in range(self.genetic_num_iters + 1):
            with timed("EvoSearch/Evolve/PredictNormalizedScore"):
                scores = self._predict(population)
            for sch, score in zip(population, scores):
                info = self._info(sch)
                if state.measured.contains(info) or seen.contains(info):
                    continue
                seen.add(info)
                item = (float(score), -len(seen), sch)  # ties: the earlier one wins
                if len(heap) < num:
                    heapq.heappush(heap, item)
                elif item[:2] > heap[0][:2]:
                    heapq.heapreplace(heap, item)
            if it == self.genetic_num_iters or not population:
                break
            with timed("EvoSearch/Evolve/Mutation"):
                population = self._mutate(population, scores)
        best = sorted(heap, key=lambda x: x[:2], reverse=True)
        if best:
            self._log(
                logging.INFO,
                "Scores of the best %d schedule(s): %s",
                len(best),
                ", ".join(f"{s:.4f}" for s, _, _ in best[:16]),
            )
        return [sch for _, _, sch in best]

    def _unique_unmeasured(self, schs: list[Schedule]) -> list[Schedule]:
        """``schs`` without repeats or measured schedules, in order."""
        state = self._require_state()
        seen = ScheduleSet()
        out = []
        for sch in schs:
            info = self._info(sch)
            if not state.measured.contains(info) and not seen.contains(info):
                seen.add(info)
                out.append(sch)
        return out

    def _mutate(self, population: list[Schedule], scores: np.ndarray) -> list[Schedule]:
        total = float(scores.sum())
        parent_p = scores / total if total > 0 else None  # all zero: uniform
        mutators: list[Mutator | None] = [None]
        masses = [1.0 - self.genetic_mutate_prob]
        mass = sum(self.mutator_probs.values())
        if self.genetic_mutate_prob > 0 and mass > 0:
            for mutator, p in self.mutator_probs.items():
                mutators.append(mutator)
                masses.append(self.genetic_mutate_prob * p / mass)
        else:
            masses = [1.0]
        mutator_p = np.array(masses) / sum(masses)
        return [
            self._child(population, parent_p, mutators, mutator_p)
            for _ in range(self.population_size)
        ]

    def _child(
        self,
        population: list[Schedule],
        parent_p: np.ndarray | None,
        mutators: list,
        mutator_p: np.ndarray,
    ) -> Schedule:
        failures = self._require_state().replayer.failures
        parent = population[0]
        for _ in range(self.genetic_max_fail_count + 1):
            parent = population[int(self.rng.choice(len(population), p=parent_p))]
            mutator = mutators[int(self.rng.choice(len(mutators), p=mutator_p))]
            if mutator is None:
                return parent
            try:
                with timed("EvoSearch/Evolve/Mutator"):
                    trace = mutator.apply(parent.trace, self.rng)
            except ValueError as err:
                failures[f"{mutator}: {type(err).__name__}"] += 1
                continue
            if trace is None:
                failures[f"{mutator}: nothing to mutate"] += 1
                continue
            child = self._replay(trace)
            if child is not None:
                return child
        return parent  # out of retries: keep the last parent, as TVM

    def _pick_with_eps_greedy(
        self, unmeasured: list[Schedule], bests: list[Schedule], num: int
    ) -> list[Schedule]:
        state = self._require_state()
        num_rands = int(num * self.eps_greedy)
        num_bests = num - num_rands
        rands = [unmeasured[i] for i in self.rng.permutation(len(unmeasured))]
        i_best = i_rand = 0
        out = []
        for i in range(num):
            prefer_best = i < num_bests
            if (prefer_best or i_rand >= len(rands)) and i_best < len(bests):
                sch, i_best = bests[i_best], i_best + 1
            elif i_rand < len(rands):
                sch, i_rand = rands[i_rand], i_rand + 1
            else:
                break
            info = self._info(sch)
            if not state.measured.contains(info):
                state.measured.add(info)
                state.picked.append(info)
                out.append(sch)
        return out

    def _prior(self) -> Any:
        """The warm-up's scorer: the prior if it models the target (a CPU model: not for
        GPUs), informed by the cost model when that is (:class:`~.warm_up.InformedPrior`)."""
        cpu = getattr(getattr(self.context, "target", None), "kind", "cpu") == "cpu"
        prior, model = self.prior if cpu else None, self._require_state().cost_model
        self._scorer = InformedPrior(prior, model) if getattr(model, "informed", 0) else prior
        return self._scorer

    def _pick_with_prior(self, samples: list[Schedule], num: int) -> list[Schedule]:
        """The prior's best ``num`` of distinct unmeasured ``samples`` and of their
        mutants, but a share drawn at random from the rest of the samples
        (:class:`~.warm_up.WarmUpPolicy`)."""
        state = self._require_state()
        prior, policy = self._scorer, self.warm_up
        near = self._pick_near_measured(policy.num_near_measured(num))
        num -= len(near)
        samples = [s for s in samples if not state.measured.contains(self._info(s))]
        if not samples or num <= 0:
            return near
        try:
            scores = np.asarray(prior.predict(self.context, self._candidates(samples)), float)
        except Exception as err:  # noqa: BLE001 - a prior's bug must not end the tuning
            self._log(
                logging.WARNING,
                "%s failed (%s: %s); this warm-up batch is uniformly random",
                prior,
                type(err).__name__,
                err,
            )
            scores = np.zeros(len(samples))
        n_random = len(samples)
        scores = np.nan_to_num(scores, nan=0.0)
        mutators = [m for m, p in self.mutator_probs.items() if p > 0]
        if policy.refine_rounds > 0 and float(scores.max()) > 0 and mutators:
            with timed("EvoSearch/RefineWithPrior"):
                children = self._prior_children(samples, mutators)
                samples, scores = policy.refine(samples, scores, num, children, self._prior_scores)
        chosen, num_best = policy.pick(scores, num, n_random, self.rng)
        self._log(
            logging.INFO,
            "Warm-up: %d of %d sample(s) (%d of them refined) picked by %s (%s), %d at random",
            num_best,
            len(samples),
            len(samples) - n_random,
            prior,
            describe_scores(prior, scores),
            len(chosen) - num_best,
        )
        out = near
        for i in chosen:
            info = self._info(samples[i])
            state.measured.add(info)
            state.picked.append(info)
            out.append(samples[i])
        return out

    def _pick_near_measured(self, num: int) -> list[Schedule]:
        """The prior's best ``num`` mutants (and mutants of those, ``refine_rounds``
        rounds) of the fastest measured schedules of the workload, the faster a parent
        the likelier; none before anything is measured (:class:`~.warm_up.WarmUpPolicy`)."""
        state = self._require_state()
        mutators = [m for m, p in self.mutator_probs.items() if p > 0]
        if num <= 0 or not mutators:
            return []
        parents, secs = self._best_measured(self.warm_up.measured_parents)
        if not parents:
            return []
        with timed("EvoSearch/RefineNearMeasured"):
            children = self._prior_children(parents, mutators)
            speed = 1.0 / np.maximum(np.asarray(secs, float), 1e-12)  # 0 s: a coarse timer
            kids = children(parents, speed / speed.sum(), 4 * num)
            scores = self._prior_scores(kids) if kids else None
            if scores is None:
                return []
            scores = np.nan_to_num(scores, nan=0.0)
            kids, scores = self.warm_up.refine(kids, scores, num, children, self._prior_scores)
        out = []
        for i in np.argsort(-scores, kind="stable")[:num]:
            info = self._info(kids[int(i)])
            state.measured.add(info)
            state.picked.append(info)
            out.append(kids[int(i)])
        self._log(
            logging.INFO,
            "Warm-up: %d of %d mutant(s) of the %d fastest measured schedule(s) picked by %s",
            len(out),
            len(kids),
            len(parents),
            self._scorer,
        )
        return out

    def _prior_children(
        self, samples: list[Schedule], mutators: list[Mutator]
    ) -> Callable[[list[Schedule], np.ndarray | None, int], list[Schedule]]:
        """What makes the mutants of a refinement round (:meth:`WarmUpPolicy.refine`):
        ``count`` children of ``parents``, those not among ``samples``, an earlier round's
        or the measured schedules left out. Random samples seldom hold the best register
        tiles of a space (a few tile sizes among thousands); mutating the tile sizes of
        the best ones finds them."""
        state = self._require_state()
        # each mutator alike: the prior scores a mutant for free, so its refinement moves
        # the structure (compute locations, unrolling) as often as the tile sizes, where
        # the learned search changes tile sizes most (mutator_probs)
        mutator_p = np.full(len(mutators), 1.0 / len(mutators))
        seen = ScheduleSet()
        for sch in samples:
            seen.add(self._info(sch))

        def children(
            parents: list[Schedule], parent_p: np.ndarray | None, count: int
        ) -> list[Schedule]:
            kids = []
            for _ in range(count):
                child = self._child(parents, parent_p, mutators, mutator_p)
                info = self._info(child)
                if seen.contains(info) or state.measured.contains(info):
                    continue
                seen.add(info)
                kids.append(child)
            return kids

        return children

    def _prior_scores(self, schs: list[Schedule]) -> np.ndarray | None:
        """The prior's scores of mutants, or None when it fails (logged)."""
        try:
            return np.asarray(self._scorer.predict(self.context, self._candidates(schs)), float)
        except Exception as err:  # noqa: BLE001 - a prior's bug must not end the tuning
            self._log(logging.WARNING, "%s failed on mutants (%s)", self._scorer, err)
            return None

    # --------------------------------------------------------------------- helpers
    def _info(self, sch: Schedule) -> ScheduleInfo:
        info = self._infos.get(id(sch))
        if info is None:
            info = self._infos[id(sch)] = ScheduleInfo(sch)  # keeps sch alive: ids stay unique
        return info

    def _replay(self, trace: Trace) -> Schedule | None:
        key = trace_key(trace)
        if key not in self._replays:
            self._replays[key] = self._require_state().replayer(trace, random_seed(self.rng))
        return self._replays[key]

    def _predict(self, population: list[Schedule]) -> np.ndarray:
        state = self._require_state()
        todo = list({id(s): s for s in population if id(s) not in self._scores}.values())
        if todo:
            raw = np.asarray(
                state.cost_model.predict(self.context, self._candidates(todo)), dtype=float
            ).reshape(-1)
            if raw.shape[0] != len(todo):
                raise ValueError(
                    f"the cost model {state.cost_model} predicted {raw.shape[0]} "
                    f"scores for {len(todo)} candidates"
                )
            # Negative or NaN scores count as 0 (TVM clamps), so they are never parents.
            raw = np.maximum(np.nan_to_num(raw, nan=0.0, posinf=1e30, neginf=0.0), 0.0)
            for sch, score in zip(todo, raw):
                self._scores[id(sch)] = float(score)
                self._info(sch)  # keeps sch alive while its id is a key
        return np.array([self._scores[id(s)] for s in population], dtype=float)

    def _require_state(self) -> _State:
        if self._state is None:
            raise ValueError("EvolutionarySearch is not tuning: call pre_tuning first")
        return self._state

    def __str__(self) -> str:
        return (
            f"EvolutionarySearch(population_size={self.population_size}, "
            f"eps_greedy={self.eps_greedy}, prior={self.prior})"
        )
