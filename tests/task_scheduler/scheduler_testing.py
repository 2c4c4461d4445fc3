"""Tasks for scheduler tests: small matmuls with a one-split template, and recorders.

(A module of its own, not conftest.py: test modules import it by name, and several
test folders have a conftest.py.)
"""

from metaschedule.builder import BuilderResult, PyBuilder
from metaschedule.runner import RunnerFuture
from metaschedule.search_strategy import ReplayTrace
from metaschedule.testing.dummy_object import DummyBuilder, DummyRunner
from metaschedule.testing.tuning_records import matmul
from metaschedule.tune_context import TuneContext
from metaschedule.utils import derived_object


def split_template(sch):
    """Split the first loop of block C by a sampled tile: a few distinct schedules."""
    block = sch.get_block("C")
    loop = sch.get_loops(block)[0]
    sch.split(loop, sch.sample_perfect_tile(loop, n=2))


def make_task(n=16, name="main", strategy=None, seed=0):
    return TuneContext(
        matmul(n),
        target="cpu",
        space_generator=split_template,
        search_strategy=strategy if strategy is not None else ReplayTrace(),
        task_name=name,
        rand_state=seed,
    )


@derived_object
class EventBuilder(PyBuilder):
    """A dummy builder that logs ("build", n) events and can fail chosen workloads."""

    def __init__(self, events, fail_sizes=()):
        self.events = events
        self.fail_sizes = set(fail_sizes)
        self.inner = DummyBuilder()

    def build(self, build_inputs):
        self.events.append(
            ("build", [inp.mod["main"].params[0].shape[0].value for inp in build_inputs])
        )
        out = []
        for inp, res in zip(build_inputs, self.inner.build(build_inputs)):
            if inp.mod["main"].params[0].shape[0].value in self.fail_sizes:
                out.append(BuilderResult(None, "injected build failure"))
            else:
                out.append(res)
        return out


class EventRunner(DummyRunner):
    """A dummy runner whose futures log ("result", path) when their result is taken."""

    def __init__(self, events, **kwargs):
        super().__init__(**kwargs)
        self.events = events

    def _future(self, inp):
        inner = super()._future(inp)

        def result():
            self.events.append(("result", inp.artifact_path))
            return inner.result()

        return RunnerFuture(inner.done, result)
