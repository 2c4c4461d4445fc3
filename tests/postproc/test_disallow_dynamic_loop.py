"""DisallowDynamicLoop: schedules with a symbolic loop extent are rejected."""

from metaschedule import tir
from metaschedule.postproc import DisallowDynamicLoop
from metaschedule.tir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IterType,
    IterVar,
    PrimFunc,
    Range,
    Var,
)
from metaschedule.tir.stmt import true


def dynamic_copy():
    """``for i in range(n): B[i] = A[i]`` with a free variable ``n``."""
    a, b = Buffer("A", (8,)), Buffer("B", (8,))
    i, v, n = Var("i"), Var("v"), Var("n")
    block = Block(
        (IterVar(v, Range(0, 8), IterType.DATA_PAR),),
        (BufferRegion(a, (Range(v, 1),)),),
        (BufferRegion(b, (Range(v, 1),)),),
        "B",
        BufferStore(b, a[v], (v,)),
    )
    inner = For(i, 0, n, ForKind.SERIAL, BlockRealize((i,), true(), block))
    outer = For(Var("o"), 0, 1, ForKind.SERIAL, inner)
    return PrimFunc((a, b), BlockRealize((), true(), Block((), (), (), "root", outer)))


def test_static_loops_pass_and_nothing_is_recorded(matmul, conv2d):
    for func in (matmul(), conv2d):
        sch = tir.Schedule(func)
        sch.enter_postproc()
        mod, n = sch.mod, len(sch.trace.insts)
        assert DisallowDynamicLoop().apply(sch) is True
        assert sch.mod is mod and len(sch.trace.insts) == n


def test_symbolic_extent_is_rejected():
    sch = tir.Schedule(dynamic_copy())
    assert DisallowDynamicLoop().apply(sch) is False


def test_default_llvm_list_starts_with_it():
    from metaschedule.postproc import Postproc

    assert isinstance(Postproc.create("llvm")[0], DisallowDynamicLoop)
