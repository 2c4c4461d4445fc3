"""The pre-trained XGBoost cost model: trained on a synthetic corpus (no measuring), it
ranks the schedules of a workload it has not seen; where ``pretrained=True`` looks; and
fine-tuning from it."""

from __future__ import annotations

import json
import os
import shutil
import types

import numpy as np
import pytest

from metaschedule.cost_model import XGBModel
from metaschedule.cost_model import pretrained as pretrained_mod
from metaschedule.cost_model.pretrained import (
    EXTRACTOR_SETTINGS,
    NAMES_FILE,
    default_path,
    load_pretrained,
    spearman,
    train_pretrained,
    user_path,
)
from metaschedule.feature_extractor import PerStoreFeature
from metaschedule.runner import RunnerResult
from metaschedule.testing.corpus import synthetic_corpus
from metaschedule.testing.workloads import matmul

HELD_OUT = "matmul-24x24x8"
#: schedules per workload: enough to learn from, few enough for the fast tier
PER_WORKLOAD = 16


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A synthetic corpus part, the model trained on it without :data:`HELD_OUT`, the
    training summary, and the held-out workload's records."""
    root = tmp_path_factory.mktemp("pretrained")
    part = synthetic_corpus(str(root / "corpus" / "part"), n=PER_WORKLOAD)
    out = str(root / "model.tar")
    summary = train_pretrained([str(root / "corpus")], out, holdout=[HELD_OUT], max_rounds=100)
    with open(os.path.join(part.path, NAMES_FILE)) as f:
        names = json.load(f)
    db = part.database()
    held = [r for r in db.get_all_tuning_records() if names[str(r.workload.shash)] == HELD_OUT]
    db.close()
    return types.SimpleNamespace(part=part, path=out, summary=summary, held=held)


@pytest.fixture
def no_user_model(tmp_path, monkeypatch):
    """No pre-trained model anywhere: an empty cache, no shipped file."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(pretrained_mod, "shipped_path", lambda: str(tmp_path / "shipped.tar"))


def _context(trained):
    return types.SimpleNamespace(mod=trained.held[0].workload.mod, target=trained.part.target)


def _candidates(trained):
    return [r.as_measure_candidate() for r in trained.held]


def _throughput(trained):
    return 1.0 / np.array([r.run_secs[0] for r in trained.held])


def _model(path, **kwargs):
    kwargs.setdefault("num_tuning_cores", 1)
    return XGBModel(pretrained=path, **kwargs)


def test_training_holds_out_a_workload_and_ranks_it(trained):
    summary = trained.summary
    assert len(trained.held) == PER_WORKLOAD
    assert summary["samples"] == 5 * PER_WORKLOAD
    assert summary["held_out_samples"] == PER_WORKLOAD
    assert summary["held_out"] == [HELD_OUT] and summary["skipped"] == 0
    assert 0 < summary["rounds"] <= 100 and summary["bytes"] == os.path.getsize(trained.path)
    ((name, rho),) = summary["held_out_spearman"].items()
    assert name == f"{HELD_OUT}@{trained.part.path}"
    assert rho > 0.5
    # the analytic prior's own ranking of the same records, from its feature column
    ((prior_name, prior_rho),) = summary["held_out_prior_spearman"].items()
    assert prior_name == name and -1 <= prior_rho <= 1 and prior_rho != rho
    meta = load_pretrained(trained.path)
    assert meta.extractor_settings == PerStoreFeature(**EXTRACTOR_SETTINGS).settings()
    assert meta.meta["parts"][0]["held_out"] == PER_WORKLOAD


def test_a_pretrained_model_ranks_an_unseen_workload_before_measuring_it(trained):
    model = _model(trained.path)
    assert model.informed and model.data_size == 0
    assert model.pretrained is not None and model.pretrained.path == trained.path
    scores = model.predict(_context(trained), _candidates(trained))
    throughput = _throughput(trained)
    assert spearman(scores, throughput) > 0.5
    order = np.argsort(-throughput)  # fastest first
    assert scores[order[:4]].mean() > scores[order[-4:]].mean()
    # the same scores again: they are the booster's, not random draws
    np.testing.assert_array_equal(model.predict(_context(trained), _candidates(trained)), scores)


def test_fine_tuning_continues_boosting_from_the_pretrained_model(trained, tmp_path):
    model = _model(trained.path, num_warmup_samples=8, early_stopping_rounds=5)
    base_rounds = model.booster.num_boosted_rounds()
    assert base_rounds == trained.summary["rounds"]
    cands, held = _candidates(trained), trained.held
    results = [RunnerResult(r.run_secs, None) for r in held[:12]]
    model.update(_context(trained), cands[:12], results)
    assert model.data_size == 12 and not model.warming_up
    assert model.booster.num_boosted_rounds() > base_rounds
    # the base is kept as it was: a second model starts from the same rounds
    assert _model(trained.path).booster.num_boosted_rounds() == base_rounds
    # save/load round trip of the fine-tuned model
    saved = str(tmp_path / "tuned.tar")
    model.save(saved)
    restored = _model(trained.path, num_warmup_samples=8, early_stopping_rounds=5)
    restored.load(saved)
    assert restored.data_size == 12
    assert restored.booster.num_boosted_rounds() == model.booster.num_boosted_rounds()
    np.testing.assert_array_equal(
        restored.predict(_context(trained), cands), model.predict(_context(trained), cands)
    )


def test_not_a_pretrained_model_file_is_a_value_error(tmp_path):
    text = tmp_path / "model.tar"
    text.write_text("not a tar file")
    with pytest.raises(ValueError, match="cannot read"):
        _model(str(text))
    with pytest.raises(ValueError, match="missing.tar"):
        _model(str(tmp_path / "missing.tar"))
    saved = str(tmp_path / "xgb.tar")  # a tuning model's own file is not a pre-trained one
    XGBModel(pretrained=False).save(saved)
    with pytest.raises(ValueError, match="is not a metaschedule.pretrained-xgb.1 file"):
        _model(saved)


def test_an_extractor_of_other_features_is_a_value_error(trained):
    with pytest.raises(ValueError, match="trained with the features of"):
        _model(trained.path, extractor=PerStoreFeature())
    same = PerStoreFeature(**EXTRACTOR_SETTINGS)
    assert _model(trained.path, extractor=same).extractor is same


def test_pretrained_false_starts_empty_with_random_predictions(trained):
    model = _model(False)
    assert model.pretrained is None and model.booster is None
    assert model.warming_up and not model.informed
    first = model.predict(_context(trained), _candidates(trained)[:8])
    second = model.predict(_context(trained), _candidates(trained)[:8])
    assert np.all((first >= 0) & (first < 1)) and not np.array_equal(first, second)


def test_the_user_model_is_found_under_xdg_cache_home(trained, tmp_path, no_user_model):
    assert user_path() == str(tmp_path / "cache" / "metaschedule" / "xgb_pretrained.tar")
    assert default_path() is None and XGBModel().pretrained is None
    os.makedirs(os.path.dirname(user_path()))
    shutil.copy(trained.path, user_path())
    assert default_path() == user_path()
    model = XGBModel()
    assert model.informed and model.pretrained.path == user_path()
    # pretrained=True with a custom extractor: the model starts empty, no error
    assert XGBModel(extractor=PerStoreFeature()).pretrained is None


def test_pretrained_false_ignores_a_user_model(trained, no_user_model):
    os.makedirs(os.path.dirname(user_path()))
    shutil.copy(trained.path, user_path())
    assert XGBModel().pretrained is not None
    model = XGBModel(pretrained=False)
    assert model.pretrained is None and not model.informed and model.warming_up


def test_a_corpus_without_training_samples_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="holds no part"):
        train_pretrained([str(tmp_path)], str(tmp_path / "m.tar"))
    part = synthetic_corpus(str(tmp_path / "part"), {"mm": lambda: matmul(8)}, n=4)
    with pytest.raises(ValueError, match="no training sample"):
        train_pretrained([part.path], str(tmp_path / "m.tar"), holdout=["mm"])


def test_the_shipped_model_loads_is_small_and_ranks_a_tiled_kernel_first(tmp_path, monkeypatch):
    """The package ships a model (trained by benchmarks/corpus.py data on two ISAs), which
    ``pretrained=True`` loads when the user has none, under the wheel's 5 MB budget; it
    ranks a tiled, vectorized and parallel matmul above the naive loop nest."""
    import metaschedule as ms
    from metaschedule.arg_info import ArgInfo
    from metaschedule.search_strategy import MeasureCandidate
    from metaschedule.target import Target

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no user model
    path = pretrained_mod.shipped_path()
    assert os.path.isfile(path) and os.path.getsize(path) < 5 * 2**20
    base = load_pretrained(path)
    assert base.extractor_settings == PerStoreFeature(**EXTRACTOR_SETTINGS).settings()
    assert base.meta["held_out"] and {p["isa"]["name"] for p in base.meta["parts"]} >= {
        "avx2",
        "avx512",
    }
    model = XGBModel()
    assert model.pretrained is not None and model.pretrained.path == path

    func = matmul(128, 128, 128)
    naive = ms.tir.Schedule(func, seed=0)
    tiled = ms.tir.Schedule(func, seed=0)
    i, j, k = tiled.get_loops(tiled.get_block("C"))
    i0, i1 = tiled.split(i, [None, 4])
    j0, j1 = tiled.split(j, [None, 16])
    tiled.reorder(i0, j0, k, i1, j1)
    tiled.parallel(i0)
    tiled.vectorize(j1)
    ctx = types.SimpleNamespace(mod=func, target=Target("llvm -mcpu=haswell -num-cores 2"))
    scores = model.predict(
        ctx, [MeasureCandidate(s, ArgInfo.from_entry_func(s.mod)) for s in (naive, tiled)]
    )
    assert scores[1] > scores[0]
