"""Fuzzing the default design space: random valid te programs, sampled schedules.

Every sampled schedule either is rejected by a postprocessor (with a reason) or
verifies and computes the numpy result (interpreted; some compiled too). The short
mode runs in CI in well under a minute; ``pytest tests/fuzz --fuzz-long`` explores
far more programs. Shrunk failures become tests in ``test_fuzz_regressions.py``.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaschedule.testing.fuzz import FuzzStats, check_program, random_program

SHORT, LONG = 30, 400


class HypothesisDraw:
    """The fuzz generator's choices, drawn by hypothesis (so failures shrink)."""

    def __init__(self, data):
        self.data = data

    def integer(self, lo, hi):
        return self.data.draw(st.integers(lo, hi))

    def pick(self, options):
        return self.data.draw(st.sampled_from(list(options)))


def _report(stats: FuzzStats) -> str:
    lines = [f"{len(stats.failures)} failure(s):"]
    for f in stats.failures[:5]:
        lines.append(f"- {f.signature()}\n  program: {f.program}\n  {f.message[:800]}")
    return "\n".join(lines)


@pytest.mark.compiler
@pytest.mark.timeout(900)
def test_default_design_space_on_random_programs(request):
    long = request.config.getoption("--fuzz-long")
    stats = FuzzStats()
    count = [0]

    @settings(
        max_examples=LONG if long else SHORT,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def run(data):
        count[0] += 1
        program = random_program(HypothesisDraw(data), max_stages=4 if long else 3)
        before = len(stats.failures)
        # compile the schedules of every 6th program (C compilation is the slow part)
        check_program(
            program,
            stats,
            num_schedules=6 if long else 3,
            num_builds=1 if long or count[0] % 6 == 0 else 0,
            seed=count[0],
            debug_builds=True,
        )
        assert len(stats.failures) == before, _report(stats)

    run()
    assert stats.programs >= (LONG if long else SHORT) // 2
    assert stats.interpreted > 0 and stats.built > 0
    assert stats.failures == []
