"""The default postprocessors of each target kind (TVM's ``Postproc.create`` lists)."""

from __future__ import annotations

from ..registry import register
from .base import Postproc
from .disallow_dynamic_loop import DisallowDynamicLoop
from .rewrite_cooperative_fetch import RewriteCooperativeFetch
from .rewrite_layout import RewriteLayout
from .rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
from .rewrite_reduction_block import RewriteReductionBlock
from .rewrite_tensorize import RewriteTensorize
from .rewrite_unbound_block import RewriteUnboundBlock
from .verify_gpu_code import VerifyGPUCode

__all__ = ["cuda_postprocs", "llvm_postprocs"]


@register("postproc", "llvm", aliases=("cpu",))
def llvm_postprocs() -> list[Postproc]:
    """TVM's CPU list, with RewriteTensorize (of TVM's CPU-tensorization list) last: it
    does nothing where no block was tiled for an intrinsic. TVM runs it before
    RewriteLayout; here the tensorized call fixes the strides of the weight it reads, so
    the weight gets its layout first."""
    return [
        DisallowDynamicLoop(),
        RewriteParallelVectorizeUnroll(),
        RewriteReductionBlock(),
        RewriteLayout(),
        RewriteTensorize(vectorize_init_loop=True),
    ]


@register("postproc", "cuda")
def cuda_postprocs() -> list[Postproc]:
    """TVM's CUDA list."""
    return [
        DisallowDynamicLoop(),
        RewriteCooperativeFetch(),
        RewriteUnboundBlock(max_threadblocks=256),
        RewriteParallelVectorizeUnroll(),
        RewriteReductionBlock(),
        VerifyGPUCode(),
    ]
