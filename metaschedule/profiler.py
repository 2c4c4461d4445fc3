"""``Profiler``: where the time of a tuning run goes.

The engine times its phases with ``Profiler.timeit(name)``; the time lands in every
profiler entered with ``with Profiler() as p:`` around the run (TVM records into the
innermost one only; here an outer profiler sees what an inner one sees, so a profiler
around a whole script keeps the full picture). Outside any profiler, ``timeit`` costs a
clock read and records nothing.

Phase names used by the engine ("/" separates a phase from its parts; nested phases are
counted in their parent too, so percentages do not add up to 100):
``GenerateDesignSpace``, ``SearchStrategy/PreTuning``, ``SearchStrategy/GenerateCandidates``
(the strategies add their own parts: ``EvoSearch/SampleInitPopulation`` (sampling),
``EvoSearch/Evolve/Mutation`` (mutating and replaying children; the mutators alone:
``EvoSearch/Evolve/Mutator``), ``EvoSearch/Evolve/PredictNormalizedScore``; inside those,
``Search/TraceReplay`` and ``Search/Postproc`` for every replayed trace),
``SearchStrategy/NotifyRunnerResults``, ``Builder``, ``Runner`` (submitting, and waiting for
measurements), ``MeasureCallback/<name>``, ``CostModel/Update`` (training),
``CostModel/Predict`` (scoring) and ``FeatureExtractor`` (inside both).

The entered profilers are a context variable: a thread started inside sees them when it
runs in a copy of the caller's context (``contextvars.copy_context().run(fn)``), and
independent tuning runs in separate threads do not mix their numbers.

Example::

    with ms.Profiler() as profiler:
        ms.tune_tir(...)
    print(profiler.table())
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Profiler"]

_ACTIVE: contextvars.ContextVar[tuple[Profiler, ...]] = contextvars.ContextVar(
    "metaschedule_profilers", default=()
)

#: the key of the profiler's own wall time in :meth:`Profiler.get`
TOTAL = "Total"


class Profiler:
    """Accumulates wall-clock seconds per phase name while it is entered.

    A profiler may be entered several times (its totals keep growing); the ``Total``
    entry is the time spent inside its ``with`` blocks.
    """

    def __init__(self) -> None:
        self._secs: dict[str, float] = {}
        self._calls: dict[str, int] = {}
        self._lock = threading.Lock()  # phases may be timed from worker threads
        self._total = 0.0
        self._entered_at: list[float] = []
        self._tokens: list[contextvars.Token] = []

    # -------------------------------------------------------------------- scoping
    def __enter__(self) -> Self:
        self._tokens.append(_ACTIVE.set(_ACTIVE.get() + (self,)))
        self._entered_at.append(time.perf_counter())
        return self

    def __exit__(self, *exc) -> None:
        self._total += time.perf_counter() - self._entered_at.pop()
        _ACTIVE.reset(self._tokens.pop())

    @staticmethod
    def current() -> Profiler | None:
        """The innermost entered profiler, or None."""
        active = _ACTIVE.get()
        return active[-1] if active else None

    @staticmethod
    @contextmanager
    def timeit(name: str) -> Iterator[None]:
        """Time the ``with`` block as phase ``name`` in every entered profiler."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"Profiler.timeit needs a non-empty phase name, got {name!r}")
        active = _ACTIVE.get()
        start = time.perf_counter()
        try:
            yield
        finally:
            if active:
                elapsed = time.perf_counter() - start
                for profiler in active:
                    profiler._add(name, elapsed)

    def _add(self, name: str, secs: float) -> None:
        with self._lock:
            self._secs[name] = self._secs.get(name, 0.0) + secs
            self._calls[name] = self._calls.get(name, 0) + 1

    # -------------------------------------------------------------------- results
    def get(self) -> dict[str, float]:
        """Seconds per phase, and ``"Total"``: the time inside this profiler so far."""
        total = self._total + sum(time.perf_counter() - t for t in self._entered_at)
        with self._lock:
            out = dict(self._secs)
        out[TOTAL] = total
        return out

    def calls(self) -> dict[str, int]:
        """How many times each phase was timed."""
        with self._lock:
            return dict(self._calls)

    def table(self) -> str:
        """The phases as a text table, slowest first, with their share of the total."""
        secs = self.get()
        calls = self.calls()
        total = secs.pop(TOTAL)
        rows = [("", TOTAL, "", f"{total:.4f}", "100.00")]
        for i, (name, s) in enumerate(sorted(secs.items(), key=lambda kv: (-kv[1], kv[0]))):
            share = 100.0 * s / total if total > 0 else 0.0
            rows.append((str(i + 1), name, str(calls.get(name, 0)), f"{s:.4f}", f"{share:.2f}"))
        header = ("ID", "Name", "Calls", "Time (s)", "Percentage")
        widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
        lines = [" | ".join(h.rjust(w) for h, w in zip(header, widths))]
        lines.append("-+-".join("-" * w for w in widths))
        for row in rows:
            lines.append(" | ".join(v.rjust(w) for v, w in zip(row, widths)))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Profiler(phases={len(self._secs)}, total={self.get()[TOTAL]:.3f}s)"
