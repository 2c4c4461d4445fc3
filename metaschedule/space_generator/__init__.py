"""Space generators: turn a workload into design spaces."""

from .base import PySpaceGenerator, ScheduleFnType, SpaceGenerator, create, rule_kind_from_target
from .post_order_apply import PostOrderApply
from .schedule_fn import ScheduleFn
from .space_generator_union import SpaceGeneratorUnion

__all__ = [
    "PostOrderApply",
    "PySpaceGenerator",
    "ScheduleFn",
    "ScheduleFnType",
    "SpaceGenerator",
    "SpaceGeneratorUnion",
    "create",
    "rule_kind_from_target",
]
