"""Schedule rules: how PostOrderApply rewrites each block into design spaces."""

from .add_rfactor import AddRFactor
from .apply_custom_rule import ApplyCustomRule, register_custom_rule
from .auto_bind import AutoBind
from .auto_inline import AutoInline
from .base import RULE_KINDS, PyScheduleRule, ScheduleRule, create, register_default_rules
from .cross_thread_reduction import CrossThreadReduction
from .default_rules import cuda_rules, llvm_rules
from .multi_level_tiling import MultiLevelTiling, ReuseType
from .multi_level_tiling_with_intrin import MultiLevelTilingWithIntrin
from .pack_panel import PackPanel
from .parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from .random_compute_location import RandomComputeLocation
from .tile_with_tensor_intrin import tile_with_tensor_intrin
from .window_tiling import WindowTiling

__all__ = [
    "RULE_KINDS",
    "AddRFactor",
    "ApplyCustomRule",
    "AutoBind",
    "AutoInline",
    "CrossThreadReduction",
    "MultiLevelTiling",
    "MultiLevelTilingWithIntrin",
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
    "tile_with_tensor_intrin",
    "WindowTiling",
]
