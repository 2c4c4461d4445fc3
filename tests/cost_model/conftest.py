"""A synthetic tuning task for the learned cost models.

Each candidate carries its own feature matrix (1 to 3 rows of 8 features); its run
time is ``1 / (1 + sum over rows of g(row))`` with a fixed nonlinear ``g``, so the
normalised throughput is additive over rows, as sum pooling assumes.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from metaschedule.feature_extractor import PyFeatureExtractor
from metaschedule.runner import RunnerResult
from metaschedule.search_strategy import MeasureCandidate
from metaschedule.utils import derived_object


@derived_object
class StoredFeatures(PyFeatureExtractor):
    """Returns the feature matrix each synthetic candidate carries in ``sch.features``."""

    def extract_from(self, context, candidates):
        return [c.sch.features for c in candidates]


def row_score(x):
    return 2.0 * x[:, 0] + x[:, 1] ** 2 + 0.5 * (1.0 - x[:, 2]) + 1.5 * (x[:, 3] > 0.5)


def make_task(seed, n, fail_every=0):
    rng = np.random.default_rng(seed)
    cands, results, throughput = [], [], []
    for i in range(n):
        feats = rng.random((int(rng.integers(1, 4)), 8)).astype(np.float32)
        cost = 1.0 / (1.0 + row_score(feats).sum())
        cands.append(MeasureCandidate(SimpleNamespace(features=feats), []))
        if fail_every and i % fail_every == 0:
            results.append(RunnerResult(None, "synthetic failure"))
        else:
            results.append(RunnerResult([cost, cost * 1.01], None))
        throughput.append(1.0 / cost)
    return cands, results, np.array(throughput)


@pytest.fixture(name="make_task")
def make_task_fixture():
    """The synthetic task builder: ``make_task(seed, n, fail_every=0)``."""
    return make_task


@pytest.fixture(name="extractor")
def extractor_fixture():
    return StoredFeatures()


@pytest.fixture
def context():
    return SimpleNamespace(mod=None, target=None)
