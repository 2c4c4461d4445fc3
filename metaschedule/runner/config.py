"""Configuration of the measurement loop."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["EvaluatorConfig"]


class EvaluatorConfig(NamedTuple):
    """How to time one candidate.

    Args:
        number: calls averaged into one measurement (one "repeat").
        repeat: measurements to take; the result has ``repeat`` numbers per argument set.
        min_repeat_ms: raise ``number`` until one repeat lasts at least this many ms.
        enable_cpu_cache_flush: flush the CPU caches before each call (not counted).

    The kernel runs ``1 + number * repeat`` times or more: one warm-up call first.
    A NamedTuple, as in TVM.
    """

    number: int = 3
    repeat: int = 1
    min_repeat_ms: int = 100
    enable_cpu_cache_flush: bool = False

    @staticmethod
    def _normalized(config: EvaluatorConfig | None) -> EvaluatorConfig:
        """Fill in defaults and check the values."""
        if config is None:
            return EvaluatorConfig()
        if not isinstance(config, EvaluatorConfig):
            raise TypeError(f"expected an EvaluatorConfig, got {type(config).__name__}")
        config = EvaluatorConfig(
            number=int(config.number),
            repeat=int(config.repeat),
            min_repeat_ms=int(config.min_repeat_ms),
            enable_cpu_cache_flush=bool(config.enable_cpu_cache_flush),
        )
        if config.number < 1 or config.repeat < 1 or config.min_repeat_ms < 0:
            raise ValueError(
                f"EvaluatorConfig needs number >= 1, repeat >= 1, min_repeat_ms >= 0; got {config}"
            )
        return config
