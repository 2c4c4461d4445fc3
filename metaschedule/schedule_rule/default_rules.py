"""The default schedule rules of each target kind (TVM's ``ScheduleRule.create`` lists)."""

from __future__ import annotations

from ..registry import register
from .add_rfactor import AddRFactor
from .apply_custom_rule import ApplyCustomRule
from .auto_bind import AutoBind
from .auto_inline import AutoInline
from .base import ScheduleRule
from .cross_thread_reduction import CrossThreadReduction
from .multi_level_tiling import MultiLevelTiling, ReuseType
from .multi_level_tiling_with_intrin import INT8_DOT_PRODUCTS, MultiLevelTilingWithIntrin
from .pack_panel import PackPanel
from .parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from .random_compute_location import RandomComputeLocation
from .window_tiling import WindowTiling

__all__ = ["cuda_rules", "llvm_rules"]


@register("schedule_rule", "llvm", aliases=("cpu",))
def llvm_rules() -> list[ScheduleRule]:
    """TVM's DefaultLLVM list (less InlineConstantScalars, whose job AutoInline's
    ``inline_const_tensor`` does here), plus :class:`WindowTiling` for pooling and
    :class:`PackPanel` after the tiling, and, before MultiLevelTiling, TVM's
    MultiLevelTilingWithIntrin of its VNNI/AVX512 lists with the int8 dot products the
    target can run (:data:`INT8_DOT_PRODUCTS`; it leaves blocks no intrinsic fits, e.g.
    every float block, to MultiLevelTiling)."""
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
        WindowTiling(row_tiles=[1, 2, 4], max_window=64),
        AddRFactor(max_jobs_per_core=16, max_innermost_factor=64),
        MultiLevelTilingWithIntrin(
            list(INT8_DOT_PRODUCTS),
            structure="SSRSRS",
            tile_binds=None,
            max_innermost_factor=64,
            vector_load_lens=None,
            reuse_read=None,
            reuse_write=ReuseType(req="may", levels=[1, 2], scope="global"),
        ),
        MultiLevelTiling(
            structure="SSRSRS",
            tile_binds=None,
            max_innermost_factor=64,
            vector_load_lens=None,
            reuse_read=None,
            reuse_write=ReuseType(req="may", levels=[1, 2], scope="global"),
        ),
        PackPanel(),
        ParallelizeVectorizeUnroll(
            max_jobs_per_core=16,
            max_vectorize_extent=64,
            unroll_max_steps=[0, 16, 64, 512],
            unroll_explicit=True,
        ),
        RandomComputeLocation(),
    ]


@register("schedule_rule", "cuda")
def cuda_rules() -> list[ScheduleRule]:
    """TVM's DefaultCUDA list, less InlineConstantScalars (AutoInline's
    ``inline_const_tensor`` does its job)."""
    return [
        ApplyCustomRule(),
        MultiLevelTiling(
            structure="SSSRRSRS",
            tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"],
            max_innermost_factor=64,
            vector_load_lens=[1, 2, 3, 4, 8, 16],
            reuse_read=ReuseType(req="must", levels=[4], scope="shared"),
            reuse_write=ReuseType(req="must", levels=[3], scope="local"),
        ),
        AutoInline(
            into_producer=True,
            into_consumer=True,
            inline_const_tensor=True,
            disallow_if_then_else=False,
            require_injective=False,
            require_ordered=False,
            disallow_op=None,
        ),
        CrossThreadReduction(thread_extents=[4, 8, 16, 32, 64, 128, 256, 512]),
        ParallelizeVectorizeUnroll(
            max_jobs_per_core=-1,
            max_vectorize_extent=-1,
            unroll_max_steps=[0, 16, 64, 512, 1024],
            unroll_explicit=True,
        ),
        AutoBind(max_threadblocks=256, thread_extents=[32, 64, 128, 256, 512, 1024]),
    ]
