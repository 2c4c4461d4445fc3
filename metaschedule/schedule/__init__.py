"""The probabilistic scheduling language: Schedule, random variables, traces."""

from .error import BlockNotFoundError, LoopNotFoundError, NotAffineError, ScheduleError
from .instruction import (
    Instruction, InstructionKind, get_inst_kind, register_inst_kind, registered_inst_kinds,
)
from .rv import BlockRV, ExprRV, LoopRV
from .schedule import Schedule
from .state import ScheduleState
from .trace import Trace
