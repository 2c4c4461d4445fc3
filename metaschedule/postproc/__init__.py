"""Postprocessors: finish or reject the schedules a search strategy samples."""

from .base import Postproc, PyPostproc, create, register_default_postprocs
from .default_postprocs import llvm_postprocs
from .disallow_dynamic_loop import DisallowDynamicLoop
from .rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
from .rewrite_reduction_block import RewriteReductionBlock
from .verify_gpu_code import VerifyGPUCode

__all__ = [
    "DisallowDynamicLoop",
    "Postproc",
    "PyPostproc",
    "RewriteParallelVectorizeUnroll",
    "RewriteReductionBlock",
    "VerifyGPUCode",
    "create",
    "llvm_postprocs",
    "register_default_postprocs",
]
