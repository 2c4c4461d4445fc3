"""EvolutionarySearch driven without a compiler (dummy builder and runner)."""

import numpy as np
import pytest

from metaschedule.cost_model.base import PyCostModel
from metaschedule.database import MemoryDatabase
from metaschedule.search_strategy import EvolutionarySearch, SearchStrategy, WarmUpPolicy
from metaschedule.space_generator import ScheduleFn
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.structural import structural_equal, structural_hash
from metaschedule.tune_context import TuneContext
from metaschedule.utils import derived_object


def small_evo(**kwargs):
    params = {"population_size": 16, "init_min_unmeasured": 2, "genetic_num_iters": 2}
    params.update(kwargs)
    return EvolutionarySearch(**params)


def make_ctx(func, sch_fn, seed=1, **kwargs):
    return TuneContext(
        func,
        target="cpu",
        space_generator=ScheduleFn(sch_fn),
        search_strategy=small_evo(**kwargs),
        rand_state=seed,
    )


def all_candidates(batches):
    return [c for batch in batches for c in batch]


def assert_structurally_unique(schs):
    by_hash = {}
    for sch in schs:
        for other in by_hash.setdefault(structural_hash(sch.mod), []):
            assert not structural_equal(other.mod, sch.mod, map_free_vars=True), sch.trace
        by_hash[structural_hash(sch.mod)].append(sch)


@derived_object
class InnerJScore(PyCostModel):
    """Scores a candidate by the innermost tile of loop j (prefers 16, then 8, ...) and
    records what it scored."""

    def __init__(self, decisions):
        self.decisions = decisions
        self.calls = []

    def load(self, path):
        pass

    def save(self, path):
        pass

    def update(self, context, candidates, results):
        pass

    def predict(self, context, candidates):
        self.calls.append([self.decisions(c.sch) for c in candidates])
        return np.array([score(self.decisions(c.sch)) for c in candidates])


def score(key):
    return float(key[1][1])  # the innermost factor of j's tile


def test_respects_max_trials_and_batch_size(task, tile_ij, drive):
    ctx = make_ctx(task, tile_ij)
    batches = drive(ctx, MemoryDatabase(), max_trials=10, num_trials_per_iter=4)
    assert [len(b) for b in batches] == [4, 4, 2]
    assert_structurally_unique([c.sch for c in all_candidates(batches)])


def test_never_remeasures_and_stops_when_the_space_is_exhausted(tile_i, drive, decisions):
    ctx = make_ctx(matmul(8), tile_i)  # 4 points: the innermost tile of i is 1, 2, 4 or 8
    batches = drive(ctx, MemoryDatabase(), max_trials=100, num_trials_per_iter=3)
    cands = all_candidates(batches)
    assert sorted(decisions(c.sch) for c in cands) == [((1, 8),), ((2, 4),), ((4, 2),), ((8, 1),)]
    assert_structurally_unique([c.sch for c in cands])


def test_resumed_run_skips_database_records(task, tile_ij, drive):
    db = MemoryDatabase()
    first = all_candidates(drive(make_ctx(task, tile_ij, seed=1), db, max_trials=10))
    assert len(db) == 10
    # The space has 25 points: a second run can find at most the 15 others.
    second = all_candidates(drive(make_ctx(task, tile_ij, seed=2), db, max_trials=100))
    assert 10 <= len(second) <= 15
    assert_structurally_unique([c.sch for c in first + second])


def test_picks_follow_the_cost_model(task, tile_ij, drive, decisions):
    model = InnerJScore(decisions)
    ctx = make_ctx(task, tile_ij, eps_greedy=0.0)
    batches = drive(ctx, MemoryDatabase(), max_trials=4, num_trials_per_iter=4, cost_model=model)
    picks = [score(decisions(c.sch)) for c in batches[0]]
    seen = {key for call in model.calls for key in call}
    assert sorted(picks, reverse=True) == sorted((score(k) for k in seen), reverse=True)[:4]
    assert max(picks) == 16.0  # j's innermost tile can be 16, and evolution finds it


def test_eps_greedy_one_picks_only_initial_samples(task, tile_ij, drive, decisions):
    model = InnerJScore(decisions)
    ctx = make_ctx(task, tile_ij, eps_greedy=1.0)
    batches = drive(ctx, MemoryDatabase(), max_trials=4, num_trials_per_iter=4, cost_model=model)
    initial = set(model.calls[0])  # the first prediction scores the initial population
    assert {decisions(c.sch) for c in batches[0]} <= initial


def test_same_rand_state_gives_same_candidates(task, tile_ij, drive, decisions):
    runs = [
        [
            decisions(c.sch)
            for c in all_candidates(drive(make_ctx(task, tile_ij, seed=7), MemoryDatabase()))
        ]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    other = [
        decisions(c.sch)
        for c in all_candidates(drive(make_ctx(task, tile_ij, seed=8), MemoryDatabase()))
    ]
    assert other != runs[0]


def test_defaults_from_the_context_and_numbers(tile_ij, drive):
    func = matmul(8)
    ctx = make_ctx(func, tile_ij)
    batches = drive(ctx, None, max_trials=3, num_trials_per_iter=3)  # memory db, random model
    rng = np.random.default_rng(0)
    a, b = rng.random((8, 8), dtype=np.float32), rng.random((8, 8), dtype=np.float32)
    for cand in all_candidates(batches):
        c = np.zeros((8, 8), np.float32)
        interpret(cand.sch.mod["main"], a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)
        assert [info.shape for info in cand.args_info] == [(8, 8)] * 3


def test_call_order_and_arguments_are_checked(task, tile_ij):
    ctx = make_ctx(task, tile_ij)
    with pytest.raises(ValueError, match="pre_tuning first"):
        ctx.generate_measure_candidates()
    strategy = ctx.search_strategy
    with pytest.raises(ValueError, match="needs a database"):
        strategy.pre_tuning(4, 2, ctx.generate_design_space(), None, None)
    ctx.pre_tuning(4, 2)
    with pytest.raises(ValueError, match="already called"):
        ctx.pre_tuning(4, 2)
    ctx.post_tuning()
    with pytest.raises(ValueError, match="at least one design space"):
        ctx.pre_tuning(4, 2, design_spaces=[])
    with pytest.raises(ValueError, match="population_size"):
        EvolutionarySearch(population_size=0)
    with pytest.raises(ValueError, match="eps_greedy"):
        EvolutionarySearch(eps_greedy=1.5)
    with pytest.raises(ValueError, match="not initialised"):
        EvolutionarySearch().pre_tuning(4, 2, ctx.generate_design_space(), MemoryDatabase(), None)


def test_create_and_clone():
    evo = SearchStrategy.create("evolutionary", population_size=8, eps_greedy=0.25)
    assert isinstance(evo, EvolutionarySearch)
    twin = evo.clone()
    assert twin is not evo and (twin.population_size, twin.eps_greedy) == (8, 0.25)
    assert SearchStrategy.create().population_size == 512
    with pytest.raises(ValueError, match="replay-trace"):
        SearchStrategy.create("annealing")


def test_user_mutators_are_sampled_with_the_search_stream(task, tile_ij, drive):
    from metaschedule.mutator import MutateTileSize, PyMutator

    @derived_object
    class Spy(PyMutator):
        def __init__(self):
            self.states = []

        def apply(self, trace, rand_state=None):
            self.states.append(rand_state)
            return MutateTileSize().apply(trace, rand_state)

    spy = Spy()
    space = ScheduleFn(tile_ij, sch_rules=[], postprocs=[], mutator_probs={spy: 1.0})
    ctx = TuneContext(
        task,
        target="cpu",
        space_generator=space,
        search_strategy=small_evo(genetic_mutate_prob=1.0),
        rand_state=1,
    )
    drive(ctx, MemoryDatabase(), max_trials=4)
    assert spy.states and all(isinstance(s, np.random.Generator) for s in spy.states)
    assert all(s is ctx.search_strategy.rng for s in spy.states)


def test_picks_not_measured_can_come_back(tile_i, decisions):
    from metaschedule.runner import RunnerResult

    ctx = make_ctx(matmul(8), tile_i)
    ctx.pre_tuning(100, 4)
    first = ctx.generate_measure_candidates()
    assert len(first) == 4  # the whole space
    ctx.notify_runner_results(first[:2], [RunnerResult([1.0], None)] * 2)  # 2 were measured
    second = ctx.generate_measure_candidates()
    assert sorted(decisions(c.sch) for c in second) == sorted(decisions(c.sch) for c in first[2:])
    ctx.notify_runner_results(second, [RunnerResult([1.0], None)] * 2)
    assert ctx.generate_measure_candidates() is None
    ctx.post_tuning()


def test_a_warming_up_model_skips_evolution(task, tile_ij, drive, decisions):
    """While the cost model scores at random, a batch is random samples: no mutation, no
    prediction, and still a full batch of distinct unmeasured schedules (without a prior:
    the prior's refinement mutates, see the prior's tests below)."""
    from metaschedule.mutator import MutateTileSize, PyMutator

    @derived_object
    class Spy(PyMutator):
        def __init__(self):
            self.calls = 0

        def apply(self, trace, rand_state=None):
            self.calls += 1
            return MutateTileSize().apply(trace, rand_state)

    @derived_object
    class WarmingUp(InnerJScore):
        warm = True

        @property
        def warming_up(self):
            return self.warm

    spy, model = Spy(), WarmingUp(decisions)
    space = ScheduleFn(tile_ij, sch_rules=[], postprocs=[], mutator_probs={spy: 1.0})
    ctx = TuneContext(
        task,
        target="cpu",
        space_generator=space,
        search_strategy=small_evo(genetic_mutate_prob=1.0, prior=None),
        rand_state=1,
    )
    batches = drive(ctx, MemoryDatabase(), max_trials=8, num_trials_per_iter=8, cost_model=model)
    assert len(batches[0]) == 8 and spy.calls == 0 and model.calls == []
    assert_structurally_unique([c.sch for c in batches[0]])
    model.warm = False  # once trained, evolution is back
    ctx = TuneContext(
        task,
        target="cpu",
        space_generator=space,
        search_strategy=small_evo(genetic_mutate_prob=1.0),
        rand_state=1,
    )
    drive(ctx, MemoryDatabase(), max_trials=8, num_trials_per_iter=8, cost_model=model)
    assert spy.calls > 0 and model.calls


# ----------------------------------------------------------------------------- the prior
def _warming_up_model(decisions):
    @derived_object
    class WarmingUp(InnerJScore):
        @property
        def warming_up(self):
            return True

    return WarmingUp(decisions)


def _spy_prior(decisions):
    """An AnalyticPrior that scores by j's innermost tile and records what it scored."""
    from metaschedule.cost_model.prior import AnalyticPrior

    class SpyPrior(AnalyticPrior):
        def __init__(self):
            super().__init__()
            self.calls = []

        def predict(self, context, candidates):
            self.calls.append([decisions(c.sch) for c in candidates])
            return np.array([score(decisions(c.sch)) for c in candidates])

    return SpyPrior()


def _prior_ctx(task, sch_fn, prior, seed=1, pop=64, target="cpu", warm_up=None):
    return TuneContext(
        task,
        target=target,
        space_generator=ScheduleFn(sch_fn, sch_rules=[], postprocs=[], mutator_probs={}),
        search_strategy=small_evo(population_size=pop, prior=prior, warm_up=warm_up),
        rand_state=seed,
    )


def test_warm_up_picks_the_priors_best_of_oversampled_samples_and_some_random(
    tile_ij, drive, decisions
):
    prior = _spy_prior(decisions)
    model = _warming_up_model(decisions)
    ctx = _prior_ctx(
        matmul(64), tile_ij, prior, warm_up=WarmUpPolicy(oversample=4, random_share=0.25)
    )
    batches = drive(ctx, MemoryDatabase(), max_trials=8, num_trials_per_iter=8, cost_model=model)
    assert len(prior.calls) == 1 and model.calls == []  # the model's random scores: unused
    scored = prior.calls[0]
    assert len(scored) == len(set(scored)) > 8  # distinct samples, more than the batch
    picks = [decisions(c.sch) for c in batches[0]]
    assert len(picks) == 8 == len(set(picks)) and set(picks) <= set(scored)
    ranked = sorted(scored, key=score, reverse=True)
    assert picks[:6] == ranked[:6]  # 8 - round(8 * 0.25) picked by the prior, best first
    assert set(picks[6:]) <= set(ranked[6:])  # the others at random from the rest


def test_the_cpu_prior_ranks_nothing_on_a_gpu_target(tile_ij, drive, decisions):
    prior = _spy_prior(decisions)
    ctx = _prior_ctx(matmul(64), tile_ij, prior, target="cuda")
    model = _warming_up_model(decisions)
    batches = drive(ctx, MemoryDatabase(), max_trials=8, num_trials_per_iter=8, cost_model=model)
    assert prior.calls == [] and len(all_candidates(batches)) == 8


def test_warm_up_without_prior_is_as_before(tile_ij, drive, decisions):
    """prior=None: the very picks of the search before the prior existed (recorded)."""
    model = _warming_up_model(decisions)
    ctx = _prior_ctx(matmul(64), tile_ij, None)
    batches = drive(ctx, MemoryDatabase(), max_trials=16, num_trials_per_iter=8, cost_model=model)
    assert [decisions(c.sch) for c in all_candidates(batches)] == [
        ((64, 1), (64, 1)), ((32, 2), (8, 8)), ((16, 4), (32, 2)), ((16, 4), (16, 4)),
        ((64, 1), (8, 8)), ((16, 4), (8, 8)), ((32, 2), (16, 4)), ((32, 2), (32, 2)),
        ((8, 8), (32, 2)), ((4, 16), (4, 16)), ((8, 8), (16, 4)), ((16, 4), (4, 16)),
        ((64, 1), (32, 2)), ((32, 2), (4, 16)), ((64, 1), (16, 4)), ((8, 8), (8, 8)),
    ]  # fmt: skip
    assert model.calls == []


def test_warm_up_with_prior_is_deterministic(tile_ij, drive, decisions):
    from metaschedule.cost_model.prior import AnalyticPrior

    model = _warming_up_model(decisions)
    runs = [
        [
            decisions(c.sch)
            for c in all_candidates(
                drive(
                    _prior_ctx(matmul(64), tile_ij, AnalyticPrior(), seed=5),
                    MemoryDatabase(),
                    max_trials=8,
                    num_trials_per_iter=4,
                    cost_model=model,
                )
            )
        ]
        for _ in range(2)
    ]
    assert runs[0] == runs[1] and len(runs[0]) == 8


def test_the_prior_is_on_by_default_and_checked():
    from metaschedule.cost_model.prior import AnalyticPrior

    evo = EvolutionarySearch()
    assert isinstance(evo.prior, AnalyticPrior)
    twin = evo.clone()
    assert isinstance(twin.prior, AnalyticPrior) and twin.prior is not evo.prior
    assert EvolutionarySearch(prior=None).clone().prior is None
    assert evo.warm_up == twin.warm_up == WarmUpPolicy()  # the warm-up policy: the search's
    mine, policy = AnalyticPrior(), WarmUpPolicy(oversample=2, random_share=0.5)
    copied = EvolutionarySearch(prior=mine, warm_up=policy).clone()
    assert copied.prior is not mine and copied.warm_up == policy
    with pytest.raises(ValueError, match="prior"):
        EvolutionarySearch(prior="xgb")
    with pytest.raises(ValueError, match="warm_up must be a WarmUpPolicy"):
        EvolutionarySearch(warm_up={"oversample": 2})


def test_a_failing_prior_leaves_a_uniform_batch(tile_ij, drive, decisions):
    from metaschedule.cost_model.prior import AnalyticPrior

    class Broken(AnalyticPrior):
        def predict(self, context, candidates):
            raise ZeroDivisionError("a bug")

    model = _warming_up_model(decisions)
    ctx = _prior_ctx(matmul(64), tile_ij, Broken())
    batches = drive(ctx, MemoryDatabase(), max_trials=8, num_trials_per_iter=8, cost_model=model)
    assert len(batches[0]) == 8 == len({decisions(c.sch) for c in batches[0]})


def test_warm_up_refines_the_priors_best_by_mutation(tile_ij, drive, decisions):
    """With mutators, the prior's best random samples are mutated and the mutants scored
    by the prior too: the batch's best is at least the best random sample, and picks
    may be mutants; the random share is still drawn from the random samples."""
    from metaschedule.mutator import MutateTileSize

    def ctx_with(prior, warm_up):
        return TuneContext(
            matmul(64),
            target="cpu",
            space_generator=ScheduleFn(
                tile_ij, sch_rules=[], postprocs=[], mutator_probs={MutateTileSize(): 1.0}
            ),
            search_strategy=small_evo(population_size=16, prior=prior, warm_up=warm_up),
            rand_state=3,
        )

    model = _warming_up_model(decisions)
    prior = _spy_prior(decisions)
    policy = WarmUpPolicy(oversample=2, random_share=0.25, refine_rounds=2)
    batches = drive(
        ctx_with(prior, policy),
        MemoryDatabase(),
        max_trials=8,
        num_trials_per_iter=8,
        cost_model=model,
    )
    assert len(prior.calls) >= 2 and model.calls == []  # the samples, then the mutants
    samples, mutants = prior.calls[0], [k for call in prior.calls[1:] for k in call]
    assert mutants and not set(mutants) & set(samples)
    picks = [decisions(c.sch) for c in batches[0]]
    assert len(picks) == 8 == len(set(picks))
    assert max(score(p) for p in picks[:6]) >= max(score(s) for s in samples)
    assert sorted(picks[:6], key=score, reverse=True) == picks[:6]
    assert set(picks[6:]) <= set(samples)  # the random share: random samples only

    plain = _spy_prior(decisions)
    no_refining = WarmUpPolicy(oversample=2, random_share=0.25, refine_rounds=0)
    drive(
        ctx_with(plain, no_refining),
        MemoryDatabase(),
        max_trials=8,
        num_trials_per_iter=8,
        cost_model=model,
    )
    assert len(plain.calls) == 1  # no refinement: the random samples only


def test_warm_up_batches_are_capped_and_then_mutate_the_fastest_measured(tile_ij, decisions):
    """At most ``max_batch`` per warm-up batch; once some are measured, a share of the next
    batch is the prior's best mutants of the fastest measured schedule (one tile changed)."""
    from metaschedule.database import TuningRecord
    from metaschedule.mutator import MutateTileSize
    from metaschedule.runner import RunnerResult

    def secs(key):  # "measured": prefers i's inner tile 4, unlike the prior's score
        return 1e-3 * (1 + abs(key[0][1] - 4))

    prior = _spy_prior(decisions)
    policy = WarmUpPolicy(
        oversample=2, random_share=0.0, refine_rounds=0, max_batch=4, measured_parents=1
    )
    ctx = TuneContext(
        matmul(64),
        target="cpu",
        space_generator=ScheduleFn(
            tile_ij, sch_rules=[], postprocs=[], mutator_probs={MutateTileSize(): 1.0}
        ),
        search_strategy=small_evo(population_size=16, prior=prior, warm_up=policy),
        rand_state=3,
    )
    db = MemoryDatabase()
    ctx.pre_tuning(12, 8, database=db, cost_model=_warming_up_model(decisions))
    workload = db.commit_workload(ctx.mod)
    batches = []
    while (cands := ctx.generate_measure_candidates()) is not None:
        batches.append(cands)
        results = [RunnerResult([secs(decisions(c.sch))], None) for c in cands]
        for c, r in zip(cands, results):
            db.commit_tuning_record(
                TuningRecord(c.sch.trace, workload, r.run_secs, ctx.target, c.args_info)
            )
        ctx.notify_runner_results(cands, results)
    ctx.post_tuning()
    assert [len(b) for b in batches] == [4, 4, 4]  # 12 trials, 8 a batch: 3 of at most 4
    keys = [decisions(c.sch) for b in batches for c in b]
    assert len(set(keys)) == 12
    first = keys[:4]
    assert set(first) <= set(prior.calls[0])
    assert [score(k) for k in first] == sorted(map(score, prior.calls[0]), reverse=True)[:4]
    for i, batch in enumerate(batches[1:], 1):
        fastest = min(keys[: 4 * i], key=secs)
        mutants = prior.calls[2 * i - 1]  # each batch: the mutants, then fresh samples
        near = [decisions(c.sch) for c in batch[:2]]  # half of the batch
        assert set(near) <= set(mutants) and len(mutants) > 2
        assert [score(k) for k in near] == sorted(map(score, mutants), reverse=True)[:2]
        assert all(sum(a != b for a, b in zip(m, fastest)) == 1 for m in mutants)


def test_a_space_without_sampling_is_replayed_once_per_round(task, drive, monkeypatch):
    """A design space with no sampling instruction is one schedule: the initial sampling
    replays it once (not population_size x max_fail_count times) and stops after one
    round when it is measured, so the search ends at once."""
    from metaschedule.search_strategy.base import TraceReplayer

    def fixed(sch):
        i, _, _ = sch.get_loops(sch.get_block("C"))
        sch.parallel(i)

    calls = []
    real = TraceReplayer.__call__

    def counting(self, trace, seed):
        calls.append(seed)
        return real(self, trace, seed)

    monkeypatch.setattr(TraceReplayer, "__call__", counting)
    ctx = make_ctx(task, fixed, population_size=64, init_min_unmeasured=2, max_fail_count=5)
    batches = drive(ctx, MemoryDatabase(), max_trials=8, num_trials_per_iter=4)
    assert [len(b) for b in batches] == [1]  # the one point, measured once
    assert len(calls) <= 4  # a replay per sampling call, not 64 x 5 (before: 380)
