"""The probabilistic scheduling language: Schedule, random variables, traces."""

from .error import *  # noqa: F403  (every ScheduleError subclass)
from .error import __all__ as _error_names
from .instruction import (
    Instruction,
    InstructionKind,
    get_inst_kind,
    register_inst_kind,
    registered_inst_kinds,
)
from .rv import BlockRV, ExprRV, LoopRV
from .schedule import Schedule
from .state import ScheduleState
from .trace import Trace

__all__ = [
    *_error_names,
    "BlockRV",
    "ExprRV",
    "Instruction",
    "InstructionKind",
    "LoopRV",
    "Schedule",
    "ScheduleState",
    "Trace",
    "get_inst_kind",
    "register_inst_kind",
    "registered_inst_kinds",
]
