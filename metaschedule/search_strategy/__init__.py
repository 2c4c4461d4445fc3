"""Search strategies: draw measure candidates from design spaces."""

from ..measure_candidate import MeasureCandidate
from .base import PySearchStrategy, SearchStrategy, create
from .evolutionary_search import EvolutionarySearch
from .replay_func import ReplayFunc
from .replay_trace import ReplayTrace
from .warm_up import WarmUpPolicy

__all__ = [
    "EvolutionarySearch",
    "MeasureCandidate",
    "PySearchStrategy",
    "ReplayFunc",
    "ReplayTrace",
    "SearchStrategy",
    "WarmUpPolicy",
    "create",
]
