"""Postprocessors: finish or reject the schedules a search strategy samples."""

from .base import Postproc, PyPostproc, create, register_default_postprocs
from .default_postprocs import cuda_postprocs, llvm_postprocs
from .disallow_dynamic_loop import DisallowDynamicLoop
from .rewrite_cooperative_fetch import RewriteCooperativeFetch
from .rewrite_layout import RewriteLayout
from .rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
from .rewrite_reduction_block import RewriteReductionBlock
from .rewrite_tensorize import RewriteTensorize
from .rewrite_unbound_block import RewriteUnboundBlock
from .verify_gpu_code import VerifyGPUCode

__all__ = [
    "DisallowDynamicLoop",
    "Postproc",
    "PyPostproc",
    "RewriteCooperativeFetch",
    "RewriteLayout",
    "RewriteParallelVectorizeUnroll",
    "RewriteReductionBlock",
    "RewriteTensorize",
    "RewriteUnboundBlock",
    "VerifyGPUCode",
    "create",
    "cuda_postprocs",
    "llvm_postprocs",
    "register_default_postprocs",
]
