"""MLPModel: learns the synthetic task, warm-up, save/load, determinism, gradients."""

import numpy as np
import pytest

from metaschedule.cost_model import CostModel, MLPModel
from metaschedule.cost_model.metric import rank_correlation
from metaschedule.cost_model.mlp_model import pool_features


@pytest.fixture
def model(extractor):
    def make(**kwargs):
        kwargs.setdefault("extractor", extractor)
        kwargs.setdefault("num_warmup_samples", 50)
        return MLPModel(**kwargs)

    return make


def test_learns_the_synthetic_task(context, model, make_task):
    cands, results, _ = make_task(0, 200, fail_every=17)
    test_cands, _, throughput = make_task(1, 100)
    m = model()
    m.update(context, cands, results)
    assert m.params is not None
    assert rank_correlation(m.predict(context, test_cands), throughput) > 0.8


def test_warmup_is_random_then_trained(context, model, make_task):
    cands, results, _ = make_task(0, 30)
    m = model()
    m.update(context, cands, results)
    assert m.params is None
    a = m.predict(context, cands)
    assert np.all((a >= 0) & (a < 1)) and not np.array_equal(a, m.predict(context, cands))
    more, more_results, _ = make_task(1, 30)
    m.update(context, more, more_results)
    assert m.params is not None and m.last_train_size == 60
    p = m.predict(context, cands)
    assert np.array_equal(p, m.predict(context, cands))  # trained predictions are stable


def test_deterministic_given_seed(context, model, make_task):
    cands, results, _ = make_task(0, 80)
    a, b, c = model(seed=5), model(seed=5), model(seed=6)
    for m in (a, b, c):
        m.update(context, cands, results)
    pa, pb, pc = (m.predict(context, cands[:10]) for m in (a, b, c))
    assert np.array_equal(pa, pb) and not np.array_equal(pa, pc)


def test_save_load_round_trip(tmp_path, context, model, make_task):
    cands, results, _ = make_task(0, 80)
    probe, _, _ = make_task(2, 20)
    m = model(hidden_sizes=(16, 8, 4))
    m.update(context, cands, results)
    path = str(tmp_path / "mlp.tar")
    m.save(path)
    restored = model()  # the saved layer sizes win over the constructor's
    restored.load(path)
    assert restored.hidden_sizes == (16, 8, 4) and restored.data_size == 80
    np.testing.assert_array_equal(restored.predict(context, probe), m.predict(context, probe))
    with pytest.raises(ValueError, match="MLPModel.load"):
        (tmp_path / "bad").write_bytes(b"junk")
        restored.load(str(tmp_path / "bad"))


def test_gradients_match_finite_differences(model):
    m = model(hidden_sizes=(5, 4), weight_decay=0.0)
    rng = np.random.default_rng(0)
    x, y, w = rng.normal(size=(6, 3)), rng.random(6), rng.random(6) + 0.1
    m.params = [rng.normal(size=s) for s in [(3, 5), (5,), (5, 4), (4,), (4, 1), (1,)]]

    def loss():
        out, _ = m._forward(x)
        return 0.5 * np.mean(w * (out - y) ** 2)

    grads = m._gradients(x, y, w)
    eps = 1e-6
    for p, g in zip(m.params, grads):
        for idx in list(np.ndindex(p.shape))[:6]:
            old = p[idx]
            p[idx] = old + eps
            up = loss()
            p[idx] = old - eps
            down = loss()
            p[idx] = old
            assert g[idx] == pytest.approx((up - down) / (2 * eps), rel=1e-4, abs=1e-8)


def test_pool_features_and_create(extractor):
    f = [np.array([[1, 2], [3, 0]], np.float32), np.zeros((0, 2), np.float32)]
    pooled = pool_features(f, 2)
    np.testing.assert_allclose(pooled[0], [4, 2, 2, 1, 3, 2, np.log2(3)])
    np.testing.assert_allclose(pooled[1], [0] * 6 + [0])
    assert isinstance(CostModel.create("mlp", extractor=extractor), MLPModel)
    with pytest.raises(ValueError, match="hidden_sizes"):
        MLPModel(extractor=extractor, hidden_sizes=())
    with pytest.raises(TypeError, match="MLPModel: extractor must be a FeatureExtractor or a kind"):
        MLPModel(extractor=3)
