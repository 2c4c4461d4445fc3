"""Building and timing post-optimization candidates with any builder and runner."""

from __future__ import annotations

from collections.abc import Sequence

from ..arg_info import ArgInfo
from ..builder import Builder, BuilderInput
from ..builder.base import remove_artifact
from ..database.base import is_valid_run_secs
from ..runner import EvaluatorConfig, Runner, RunnerInput
from ..target import Target
from ..tir.function import IRModule

__all__ = ["Measurer"]


class Measurer:
    """Builds candidates once, then times them in interleaved rounds.

    Each round submits every built candidate to the runner once; a candidate's samples
    are its mean run time in each round. Interleaving the rounds spreads a slow spell of
    the machine over all candidates instead of one, which is what a statistical test
    between candidates needs.

    Args:
        builder: builds the candidates' modules.
        runner: times the built artifacts.
        owned: close the builder and runner in :meth:`close` (they were created here).
    """

    def __init__(self, builder: Builder, runner: Runner, owned: bool = False):
        self.builder = builder
        self.runner = runner
        self.owned = owned

    @staticmethod
    def local(timeout: float, number: int, min_repeat_ms: int, cpu_cache: bool) -> Measurer:
        """A measurer on this machine: a local builder and runner with this protocol."""
        config = EvaluatorConfig(
            number=number, repeat=1, min_repeat_ms=min_repeat_ms, enable_cpu_cache_flush=cpu_cache
        )
        return Measurer(
            Builder.create("local"),
            Runner.create("local", timeout_sec=timeout, evaluator_config=config),
            owned=True,
        )

    def measure(
        self,
        mods: Sequence[IRModule | None],
        target: Target,
        args_info: list[ArgInfo],
        repeat: int,
    ) -> tuple[list[list[float] | None], list[str | None]]:
        """Samples per module (``repeat`` of them) or None, and the error of each failure.

        ``args_info`` describes the workload's arguments; a module that takes a weight
        pre-packed is measured with its own (``ArgInfo.from_entry_func(mod)``).

        A None module is a candidate that failed before building (a postprocessor said no).
        """
        results: list[list[float] | None] = [None] * len(mods)
        errors: list[str | None] = [None] * len(mods)
        index = [i for i, m in enumerate(mods) if m is not None]
        for i, mod in enumerate(mods):
            if mod is None:
                errors[i] = "rejected by a postprocessor"
        built = self.builder.build([BuilderInput(mods[i], target) for i in index])
        artifacts: dict[int, str] = {}
        for i, result in zip(index, built):
            if result.error_msg is not None or result.artifact_path is None:
                errors[i] = f"build: {result.error_msg}"
            else:
                artifacts[i] = result.artifact_path
        samples: dict[int, list[float]] = {i: [] for i in artifacts}
        # each module's own arguments: a weight RewriteLayout re-laid out has the shape
        # that module's tile sizes give it, not the workload's
        infos = {i: _args_info(mods[i], args_info) for i in artifacts}
        try:
            for _ in range(max(1, int(repeat))):
                live = [i for i in artifacts if errors[i] is None]
                futures = self.runner.run(
                    [RunnerInput(artifacts[i], target.kind, infos[i]) for i in live]
                )
                for i, future in zip(live, futures):
                    outcome = future.result()
                    if outcome.error_msg is not None or not is_valid_run_secs(outcome.run_secs):
                        errors[i] = f"run: {outcome.error_msg}"
                    else:
                        secs = outcome.run_secs
                        samples[i].append(sum(secs) / len(secs))
        finally:
            for path in artifacts.values():
                remove_artifact(path)
        for i, values in samples.items():
            if errors[i] is None and values:
                results[i] = values
        return results, errors

    def close(self) -> None:
        if self.owned:
            for component in (self.builder, self.runner):
                close = getattr(component, "close", None)
                if close is not None:
                    close()


def _args_info(mod: IRModule | None, default: list[ArgInfo]) -> list[ArgInfo]:
    """The arguments ``mod`` takes (pre-packed weights in their packed shapes)."""
    if mod is None:
        return default
    return ArgInfo.from_entry_func(mod)
