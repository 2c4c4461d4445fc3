"""A user-defined search strategy plugs into a TuneContext."""

import pytest

from metaschedule.arg_info import ArgInfo
from metaschedule.search_strategy import MeasureCandidate, PySearchStrategy
from metaschedule.tune_context import TuneContext
from metaschedule.utils import derived_object


@derived_object
class OneShot(PySearchStrategy):
    """Measures each design space once, then stops."""

    def _initialize_with_tune_context(self, context):
        self.context = context

    def pre_tuning(
        self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None
    ):
        self.todo = list(design_spaces)[:max_trials]
        self.measured = []

    def generate_measure_candidates(self):
        if not self.todo:
            return None
        batch, self.todo = self.todo, []
        return [MeasureCandidate(s, ArgInfo.from_entry_func(s.mod)) for s in batch]

    def notify_runner_results(self, measure_candidates, results):
        self.measured.extend(results)

    def clone(self):
        return OneShot()


def test_user_strategy_is_initialised_and_driven(task, drive):
    def two_spaces(sch):
        other = sch.copy()
        i = other.get_loops(other.get_block("C"))[0]
        other.split(i, [4, 4])
        return [sch, other]

    strategy = OneShot()
    ctx = TuneContext(
        task, target="cpu", space_generator=two_spaces, search_strategy=strategy, rand_state=1
    )
    assert strategy.context is ctx
    batches = drive(ctx, max_trials=10)
    assert [len(b) for b in batches] == [2]
    assert len(strategy.measured) == 2 and all(r.run_secs for r in strategy.measured)
    assert isinstance(ctx.clone().search_strategy, OneShot)


def test_derived_object_requires_the_abstract_methods():
    with pytest.raises(TypeError, match="generate_measure_candidates"):

        @derived_object
        class Incomplete(PySearchStrategy):
            def pre_tuning(self, *args):
                pass
