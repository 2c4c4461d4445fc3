"""Postprocessors: finish or reject the schedules a search strategy samples."""

from .base import Postproc, PyPostproc, create, register_default_postprocs
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
    "register_default_postprocs",
]


def _llvm_defaults() -> list[Postproc]:
    """TVM's CPU list without RewriteLayout (not implemented here)."""
    return [DisallowDynamicLoop(), RewriteParallelVectorizeUnroll(), RewriteReductionBlock()]


register_default_postprocs("llvm", _llvm_defaults)
