"""Small helpers of metaschedule.utils."""

from __future__ import annotations

import gc

import pytest

from metaschedule.utils import deferred_full_collections


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_full_collections_are_deferred_within_the_block_only(thresholds):
    gc.set_threshold(700, 10, 10)
    with deferred_full_collections():
        assert gc.get_threshold() == (700, 10, 1000)
        with deferred_full_collections(50):  # nested: never lowered
            assert gc.get_threshold() == (700, 10, 1000)
        assert gc.get_threshold() == (700, 10, 1000)
    assert gc.get_threshold() == (700, 10, 10)
    with pytest.raises(RuntimeError), deferred_full_collections():
        raise RuntimeError("restored on the way out")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_search_batch_runs_without_full_collections(thresholds):
    from metaschedule import te
    from metaschedule.tune_context import TuneContext

    gc.set_threshold(700, 10, 10)
    seen = []

    class _Strategy:
        def generate_measure_candidates(self):
            seen.append(gc.get_threshold())
            return None

    a = te.placeholder((4,), "float32", "A")
    ctx = TuneContext(te.create_prim_func([a, te.compute((4,), lambda i: a[i] + 1.0)]))
    ctx._strategy = lambda: _Strategy()  # type: ignore[method-assign]
    assert ctx.generate_measure_candidates() is None
    assert seen == [(700, 10, 1000)] and gc.get_threshold() == (700, 10, 10)
