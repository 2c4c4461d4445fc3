"""The CUDA code generator spells a loop's thread tag into the source: a tag that is not
a thread axis (from IR built or loaded elsewhere) is a CodegenError before any text."""

from __future__ import annotations

import pytest

from metaschedule.codegen.cuda_codegen import CodegenError, codegen_cuda
from metaschedule.testing.gpu_schedules import shared_memory_matmul
from metaschedule.tir import stmt as S
from metaschedule.tir.function import PrimFunc
from metaschedule.tir.functor import Mutator, replace_fields
from metaschedule.tir.transform import GPU_LOWER_PASSES, lower


def _retag(func: PrimFunc, old: str, new: str) -> PrimFunc:
    class Retag(Mutator):
        def visit_For(self, loop):
            loop = self.generic_visit(loop)
            if loop.kind is S.ForKind.THREAD_BINDING and loop.thread_binding == old:
                return replace_fields(loop, thread_binding=new)
            return loop

    return replace_fields(func, body=Retag().visit(func.body))


@pytest.mark.parametrize(
    "tag",
    ["threadIdx.w", "blockIdx", "warpIdx.x", 'threadIdx.x;\nsystem("touch X");//', "", "vthreadX"],
)
def test_a_loop_bound_to_an_unknown_tag_is_refused(tag):
    lowered = lower(shared_memory_matmul(32, 8).mod["main"], GPU_LOWER_PASSES)
    assert "threadIdx.x" in codegen_cuda(lowered, "cuda").code  # the valid IR generates
    bad = _retag(lowered, "threadIdx.x", tag)
    with pytest.raises(CodegenError, match="not a thread axis") as info:
        codegen_cuda(bad, "cuda")
    message = str(info.value)
    assert "\n" not in message and "expected blockIdx.x/y/z" in message
