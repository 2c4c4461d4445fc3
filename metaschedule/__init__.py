"""metaschedule: a Python auto-tuner for tensor programs.

Users write ``import metaschedule as ms``; the names follow TVM's MetaSchedule
(``ms.tune_tir``, ``ms.Database.create("json")``, ``ms.TuneContext``, ...), with
``ms.te`` / ``ms.tir`` in place of ``tvm.te`` / ``tvm.tir``.
"""

from . import codegen, runtime, te, tir
from .codegen import build
from .target import Target
from . import (
    arg_info,
    builder,
    cost_model,
    database,
    feature_extractor,
    measure_callback,
    mutator,
    postproc,
    registry,
    runner,
    schedule_rule,
    search_strategy,
    space_generator,
    task_scheduler,
    tir_integration,
)
from .builder import Builder
from .cost_model import CostModel
from .database import Database
from .feature_extractor import FeatureExtractor
from .measure_callback import MeasureCallback
from .mutator import Mutator
from .postproc import Postproc
from .profiler import Profiler
from .runner import Runner
from .schedule_rule import ScheduleRule
from .measure_candidate import MeasureCandidate
from .search_strategy import SearchStrategy
from .space_generator import SpaceGenerator
from .task_scheduler import TaskScheduler
from .tune import tune_tasks, tune_tir
from .tune_context import TuneContext
from .utils import derived_object

from . import graph, relax_integration
from .relax_integration import ExtractedTask

__version__ = "0.1.0"
