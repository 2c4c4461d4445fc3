"""XGBModel (and the shared training data and metrics) on synthetic and real features."""

import itertools
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import metaschedule as ms
from metaschedule.arg_info import ArgInfo
from metaschedule.cost_model import CostModel, XGBConfig, XGBModel
from metaschedule.cost_model.metric import (
    TrainingData,
    average_peak_score,
    costs_of,
    rank_correlation,
)
from metaschedule.runner import RunnerResult
from metaschedule.search_strategy import MeasureCandidate
from metaschedule.testing import matmul


@pytest.fixture
def model(extractor):
    """An XGBModel on the synthetic features, small enough for tests."""

    def make(**kwargs):
        kwargs.setdefault("extractor", extractor)
        kwargs.setdefault("num_warmup_samples", 50)
        kwargs.setdefault("early_stopping_rounds", 15)
        kwargs.setdefault("num_tuning_cores", 1)
        return XGBModel(**kwargs)

    return make


def test_ranks_held_out_candidates(context, model, make_task):
    cands, results, _ = make_task(0, 200, fail_every=17)
    test_cands, _, throughput = make_task(1, 100)
    m = model()
    m.update(context, cands, results)
    assert m.booster is not None and m.data_size == 200
    assert rank_correlation(m.predict(context, test_cands), throughput) > 0.5


def test_warmup_predicts_random_scores(context, model, make_task):
    cands, results, _ = make_task(0, 30)
    m = model()
    m.update(context, cands, results)
    assert m.booster is None
    a, b = m.predict(context, cands[:10]), m.predict(context, cands[:10])
    assert a.shape == (10,) and np.all((a >= 0) & (a < 1)) and not np.array_equal(a, b)
    # seeded by config.seed: a fresh model gives the same first draw
    assert np.array_equal(model().predict(context, cands[:10]), a)


def test_save_load_round_trip(tmp_path, context, model, make_task):
    cands, results, _ = make_task(0, 120)
    test_cands, _, _ = make_task(1, 40)
    m = model()
    m.update(context, cands, results)
    path = str(tmp_path / "xgb.tar")
    m.save(path)
    restored = model()
    restored.load(path)
    assert restored.data_size == 120 and restored.last_train_size == m.last_train_size
    np.testing.assert_array_equal(
        restored.predict(context, test_cands), m.predict(context, test_cands)
    )
    np.testing.assert_array_equal(restored.data.targets(), m.data.targets())
    # the restored model keeps learning from where it was
    more, more_results, _ = make_task(2, 40)
    m.update(context, more, more_results)
    restored.update(context, more, more_results)
    np.testing.assert_array_equal(
        restored.predict(context, test_cands), m.predict(context, test_cands)
    )


def test_save_load_before_training_keeps_the_random_state(tmp_path, context, model):
    m = model()
    m.predict(context, [None] * 3)
    path = str(tmp_path / "warm.tar")
    m.save(path)
    restored = model()
    restored.load(path)
    assert restored.booster is None
    assert np.array_equal(restored.predict(context, [None] * 5), m.predict(context, [None] * 5))


def test_load_rejects_other_files(tmp_path, model):
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"not a tar file")
    with pytest.raises(ValueError, match="XGBModel.load"):
        model().load(str(bad))


def test_deterministic_and_adaptive_training(context, model, make_task):
    cands, results, _ = make_task(0, 100)
    probe, _, _ = make_task(3, 20)
    a, b = model(), model()
    a.update(context, cands, results)
    b.update(context, cands, results)
    assert np.array_equal(a.predict(context, probe), b.predict(context, probe))
    booster = a.booster
    few, few_results, _ = make_task(4, 10)  # grows the data by 10%: no retraining
    a.update(context, few, few_results)
    assert a.booster is booster and a.data_size == 110
    more, more_results, _ = make_task(5, 20)  # now 30% more than at the last training
    a.update(context, more, more_results)
    assert a.booster is not booster and a.last_train_size == 130
    # without adaptive training every update retrains
    c = model(adaptive_training=False)
    c.update(context, cands, results)
    booster = c.booster
    c.update(context, few, few_results)
    assert c.booster is not booster


def test_failed_runs_count_as_zero_throughput():
    results = [
        RunnerResult([2.0, 4.0], None),
        RunnerResult(None, "boom"),
        RunnerResult([1.0], None),
        RunnerResult([], None),
    ]
    costs = costs_of(results)
    assert costs[0] == 3.0 and costs[2] == 1.0 and np.isinf(costs[1]) and np.isinf(costs[3])
    data = TrainingData()
    f = [np.ones((1, 2), np.float32)] * 4
    data.add("w1", f, costs)
    data.add("w2", f[:2], np.array([4.0, 8.0]))
    np.testing.assert_allclose(data.targets(), [1 / 3, 0, 1, 0, 1, 0.5])
    with pytest.raises(ValueError, match="2 columns"):
        data.add("w1", [np.ones((1, 3), np.float32)], np.array([1.0]))
    again = TrainingData.from_bytes(data.to_bytes())
    assert again.keys == data.keys and again.costs == data.costs
    assert all(np.array_equal(x, y) for x, y in zip(again.features, data.features))


def test_average_peak_score_and_rank_correlation():
    target = np.array([0.1, 1.0, 0.5, 0.2])
    assert average_peak_score(target, target, 2) == 1.0
    # predicted order 0, 3: running best 0.1, 0.2 of a peak of 1.0
    assert average_peak_score(np.array([4, 1, 2, 3]), target, 2) == pytest.approx(0.15)
    assert rank_correlation([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_config_and_arguments(model):
    assert XGBConfig() == (10, 0.001, 0, 0.2, 43, None, "auto")
    params = XGBConfig(tree_method="gpu_hist").to_dict()
    assert params["tree_method"] == "hist" and params["device"] == "cuda"
    m = model(num_tuning_cores=2, tree_method="hist")
    assert m.config.nthread == 2 and m.config.tree_method == "hist"
    assert isinstance(CostModel.create("xgb", num_warmup_samples=5), XGBModel)
    with pytest.raises(ValueError, match="runner results"):
        model().update(None, [None], [])


# ----------------------------------------------------------------------------- real features


def tiled(func, tile_i, tile_j, vec, par):
    sch = ms.tir.Schedule(func, seed=0)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, tile_i])
    j0, j1 = sch.split(j, [None, tile_j])
    sch.reorder(i0, j0, k, i1, j1)
    if vec:
        sch.vectorize(j1)
    if par:
        sch.parallel(i0)
    return sch


def test_learns_a_cost_of_real_schedules():
    """Cost follows the vector length, parallelism and i-tile of matmul schedules."""
    func = matmul(32, 32, 32)
    knobs = list(
        itertools.product([1, 2, 4, 8, 16], [2, 4, 8, 16, 32], [False, True], [False, True])
    )
    rng = np.random.default_rng(0)
    rng.shuffle(knobs)
    cands, results, throughput = [], [], []
    for ti, tj, vec, par in knobs:
        sch = tiled(func, ti, tj, vec, par)
        cands.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod)))
        speed = 1 + 2 * vec * np.log2(tj) + 3 * par + 0.5 * np.log2(ti)
        results.append(RunnerResult([1.0 / speed], None))
        throughput.append(speed)
    context = SimpleNamespace(mod=func, target=None)
    m = XGBModel(num_warmup_samples=20, early_stopping_rounds=15, num_tuning_cores=1)
    m.update(context, cands[:70], results[:70])
    pred = m.predict(context, cands[70:])
    assert rank_correlation(pred, throughput[70:]) > 0.5


def test_missing_xgboost_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "xgboost", None)  # makes `import xgboost` fail
    with pytest.raises(ImportError, match="pip install xgboost-cpu"):
        XGBModel()
