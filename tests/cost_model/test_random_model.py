"""RandomModel, the CostModel factory and PyCostModel."""

import numpy as np
import pytest

from metaschedule.cost_model import CostModel, PyCostModel, RandomModel
from metaschedule.utils import derived_object


def test_scores_in_range_and_seeded():
    a, b = RandomModel(seed=3, max_range=10), RandomModel(seed=3, max_range=10)
    pa, pb = a.predict(None, [None] * 50), b.predict(None, [None] * 50)
    assert pa.shape == (50,) and np.all((pa >= 0) & (pa < 10))
    assert np.array_equal(pa, pb)
    assert not np.array_equal(pa, a.predict(None, [None] * 50))  # the state advances
    assert not np.array_equal(pa, RandomModel(seed=4, max_range=10).predict(None, [None] * 50))


def test_save_load_continues_the_sequence(tmp_path):
    m = RandomModel(seed=7)
    m.predict(None, [None] * 5)
    path = str(tmp_path / "random.json")
    m.save(path)
    expected = m.predict(None, [None] * 8)
    restored = RandomModel(seed=0)
    restored.load(path)
    assert np.array_equal(restored.predict(None, [None] * 8), expected)
    assert np.array_equal(RandomModel(path=path).predict(None, [None] * 8), expected)


def test_update_is_a_noop_and_bad_input():
    m = RandomModel(seed=1)
    m.update(None, [None], [None])
    with pytest.raises(ValueError, match="max_range"):
        RandomModel(max_range=0)


def test_load_rejects_other_files(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="RandomModel"):
        RandomModel().load(str(path))


def test_create():
    assert isinstance(CostModel.create("random", seed=1), RandomModel)
    assert CostModel.create("none") is None
    with pytest.raises(ValueError, match="xgb"):
        CostModel.create("forest")


def test_py_cost_model_subclass():
    @derived_object
    class Constant(PyCostModel):
        def load(self, path):
            pass

        def save(self, path):
            pass

        def update(self, context, candidates, results):
            pass

        def predict(self, context, candidates):
            return np.ones(len(candidates))

    assert np.array_equal(Constant().predict(None, [1, 2]), [1.0, 1.0])
    with pytest.raises(TypeError, match="predict"):

        @derived_object
        class Missing(PyCostModel):
            def load(self, path):
                pass

            def save(self, path):
                pass

            def update(self, context, candidates, results):
                pass
