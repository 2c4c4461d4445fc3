"""Schedule rules: how PostOrderApply rewrites each block into design spaces."""

from .add_rfactor import AddRFactor
from .apply_custom_rule import ApplyCustomRule, register_custom_rule
from .auto_bind import AutoBind
from .auto_inline import AutoInline
from .base import RULE_KINDS, PyScheduleRule, ScheduleRule, create, register_default_rules
from .cross_thread_reduction import CrossThreadReduction
from .default_rules import cuda_rules, llvm_rules
from .multi_level_tiling import MultiLevelTiling, ReuseType
from .pack_panel import PackPanel
from .parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from .random_compute_location import RandomComputeLocation
from .window_tiling import WindowTiling

__all__ = [
    "RULE_KINDS",
    "AddRFactor",
    "ApplyCustomRule",
    "AutoBind",
    "AutoInline",
    "CrossThreadReduction",
    "MultiLevelTiling",
    "PackPanel",
    "ParallelizeVectorizeUnroll",
    "PyScheduleRule",
    "RandomComputeLocation",
    "ReuseType",
    "ScheduleRule",
    "create",
    "cuda_rules",
    "llvm_rules",
    "register_custom_rule",
    "register_default_rules",
    "WindowTiling",
]
