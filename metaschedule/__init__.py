"""metaschedule: a Python auto-tuner for tensor programs.

Users write ``import metaschedule as ms``; the names follow TVM's MetaSchedule
(``ms.tune_tir``, ``ms.Database.create("json")``, ``ms.TuneContext``, ...), with
``ms.te`` / ``ms.tir`` in place of ``tvm.te`` / ``tvm.tir``.
"""

from . import (
    arg_info,
    builder,
    codegen,
    cost_model,
    database,
    feature_extractor,
    graph,
    measure_callback,
    mutator,
    postproc,
    registry,
    relax_integration,
    runner,
    runtime,
    schedule_rule,
    search_strategy,
    space_generator,
    task_scheduler,
    te,
    testing,
    tir,
    tir_integration,
)
from .builder import Builder
from .codegen import build
from .cost_model import CostModel
from .database import Database
from .feature_extractor import FeatureExtractor
from .measure_callback import MeasureCallback
from .measure_candidate import MeasureCandidate
from .mutator import Mutator
from .postproc import Postproc
from .profiler import Profiler
from .relax_integration import ExtractedTask
from .runner import Runner
from .runtime import pack_weights
from .schedule_rule import ScheduleRule
from .search_strategy import SearchStrategy
from .space_generator import SpaceGenerator
from .target import Target
from .task_scheduler import TaskScheduler
from .tune import tune_tasks, tune_tir
from .tune_context import TuneContext
from .utils import derived_object

__version__ = "0.1.0"
