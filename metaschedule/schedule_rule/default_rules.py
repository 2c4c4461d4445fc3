"""The default schedule rules of each target kind (TVM's ``ScheduleRule.create`` lists)."""

from __future__ import annotations

from ..registry import register
from .add_rfactor import AddRFactor
from .apply_custom_rule import ApplyCustomRule
from .auto_inline import AutoInline
from .base import ScheduleRule
from .multi_level_tiling import MultiLevelTiling, ReuseType
from .parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from .random_compute_location import RandomComputeLocation

__all__ = ["llvm_rules"]


@register("schedule_rule", "llvm", aliases=("cpu",))
def llvm_rules() -> list[ScheduleRule]:
    """TVM's DefaultLLVM list (less InlineConstantScalars, whose job AutoInline's
    ``inline_const_tensor`` does here)."""
    return [
        ApplyCustomRule(),
        AutoInline(
            into_producer=False,
            into_consumer=True,
            inline_const_tensor=True,
            disallow_if_then_else=True,
            require_injective=True,
            require_ordered=True,
            disallow_op=["tir.exp"],
        ),
        AddRFactor(max_jobs_per_core=16, max_innermost_factor=64),
        MultiLevelTiling(
            structure="SSRSRS",
            tile_binds=None,
            max_innermost_factor=64,
            vector_load_lens=None,
            reuse_read=None,
            reuse_write=ReuseType(req="may", levels=[1, 2], scope="global"),
        ),
        ParallelizeVectorizeUnroll(
            max_jobs_per_core=16,
            max_vectorize_extent=64,
            unroll_max_steps=[0, 16, 64, 512],
            unroll_explicit=True,
        ),
        RandomComputeLocation(),
    ]
