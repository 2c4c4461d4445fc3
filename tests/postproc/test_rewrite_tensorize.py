"""RewriteTensorize: blocks annotated for auto-tensorization are tensorized after
RewriteReductionBlock split their init off; the init loop is vectorized on request;
everything is in the trace and replays; other schedules are left exactly as they were."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest

import metaschedule as ms
from metaschedule import te, tir
from metaschedule.codegen import build
from metaschedule.codegen.c_intrin import usable_tensor_intrins
from metaschedule.codegen.isa import host_arch
from metaschedule.postproc import Postproc, RewriteReductionBlock, RewriteTensorize
from metaschedule.schedule_rule import tile_with_tensor_intrin
from metaschedule.target import Target
from metaschedule.te import ops
from metaschedule.testing.primitive_check import replay_json
from metaschedule.tir import ForKind
from metaschedule.tir.interpreter import interpret

AUTO = "meta_schedule.auto_tensorize"
HOST = Target("llvm -num-cores=2")


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


def int8_dense(m=8, n=32, k=16):
    a = te.placeholder((m, k), "uint8", name="A")
    w = te.placeholder((n, k), "int8", name="W")
    return te.create_prim_func([a, w, ops.quantized_dense(a, w)])


def annotated_for(func, intrin="dot_16x4_vnni", tag=None):
    """What MultiLevelTilingWithIntrin leaves: the intrinsic's loops innermost and the
    block annotated (with ``tag`` in place of the intrinsic's name if given)."""
    sch = tir.Schedule(func)
    block = sch.get_block("T_qdense")
    assert tile_with_tensor_intrin(sch, block, intrin) is not None
    sch.annotate(block, AUTO, tag or intrin)
    return sch


def operands(func, seed=0):
    rng = np.random.default_rng(seed)
    a_buf, w_buf, c_buf = func.params
    a = rng.integers(0, 256, a_buf.static_shape()).astype("uint8")
    w = rng.integers(-128, 128, w_buf.static_shape()).astype("int8")
    want = (a.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)
    return a, w, np.zeros(c_buf.static_shape(), np.int32), want


def postprocess(sch, *postprocs) -> bool:
    sch.enter_postproc()
    return all(p.apply(sch) for p in postprocs)


def blocks_with(sch, key):
    found = []
    tir.functor.post_order_visit(
        sch.mod["main"].body,
        lambda n: (
            found.append(n.name_hint) if isinstance(n, tir.Block) and key in n.annotations else None
        ),
    )
    return found


@pytest.mark.parametrize("vectorize_init_loop", [False, True])
def test_the_annotated_block_is_tensorized_and_the_init_vectorized_on_request(
    vectorize_init_loop,
):
    func = int8_dense()
    sch = annotated_for(func)
    rewrite = RewriteTensorize(vectorize_init_loop=vectorize_init_loop)
    assert postprocess(sch, RewriteReductionBlock(), rewrite)
    kinds = [i.kind.name for i in sch.trace.insts]
    text = sch.mod.script()
    assert "T.ms_dot_16x4_vnni(" in text and 'T.block("T_qdense")' not in text
    assert blocks_with(sch, AUTO) == []  # the annotations are consumed
    init = sch.get_loops(sch.get_block("T_qdense_init"))
    kind = sch.get(init[-1]).kind
    assert kind is (ForKind.VECTORIZED if vectorize_init_loop else ForKind.SERIAL)
    assert sch.get(init[-1]).extent.value == 16
    a, w, c, want = operands(func)
    interpret(sch.mod["main"], a, w, c)
    np.testing.assert_array_equal(c, want)
    assert kinds[kinds.index("EnterPostproc") :] == [
        "EnterPostproc",
        "GetBlock",
        "GetLoops",
        "DecomposeReduction",
        "Annotate",  # the init, for RewriteTensorize (as TVM)
        "GetBlock",  # the init, first in program order
        "Unannotate",
        *(["GetLoops", "Vectorize"] if vectorize_init_loop else []),
        "GetBlock",
        "Unannotate",
        "GetLoops",
        "Tensorize",
    ]


def test_the_trace_replays_through_json():
    func = int8_dense()
    sch = annotated_for(func)
    assert postprocess(sch, RewriteReductionBlock(), RewriteTensorize(True))
    fresh = replay_json(sch, func)
    assert tir.structural_equal(fresh.mod, sch.mod)


def test_a_block_that_no_longer_matches_keeps_its_loops():
    """As TVM: the schedule is kept (same numbers, no intrinsic), not rejected."""
    func = int8_dense()
    sch = annotated_for(func, tag="dot_8x4_avx2")  # its loops are 16 x 4, not 8 x 4
    assert postprocess(sch, RewriteReductionBlock(), RewriteTensorize())
    assert "ms_dot" not in sch.mod.script() and blocks_with(sch, AUTO) == []
    a, w, c, want = operands(func)
    interpret(sch.mod["main"], a, w, c)
    np.testing.assert_array_equal(c, want)


def test_schedules_without_the_annotation_are_untouched():
    a = te.placeholder((16, 16), "float32", "A")
    b = te.placeholder((16, 16), "float32", "B")
    sch = tir.Schedule(te.create_prim_func([a, b, ops.matmul(a, b)]))
    mod, n = sch.mod, len(sch.trace.insts)
    assert RewriteTensorize(vectorize_init_loop=True).apply(sch)
    assert sch.mod is mod and len(sch.trace.insts) == n


def test_public_name_repr_clone_and_pickle():
    post = ms.postproc.RewriteTensorize(vectorize_init_loop=True)
    assert repr(post) == "RewriteTensorize(vectorize_init_loop=True)"
    assert RewriteTensorize().vectorize_init_loop is False
    assert pickle.loads(pickle.dumps(post)).vectorize_init_loop
    assert post.clone().vectorize_init_loop and post.clone() is not post
    assert isinstance(Postproc.create("llvm")[-1], RewriteTensorize)


@pytest.mark.compiler
def test_the_default_postprocs_build_a_kernel_equal_to_numpy():
    if host_arch() != "x86_64" or "dot_16x4_vnni" not in usable_tensor_intrins(HOST):
        pytest.skip("the host has no AVX512-VNNI")
    func = int8_dense(16, 64, 64)
    sch = annotated_for(func)
    root = sch.get_block("root")
    sch.annotate(root, "meta_schedule.parallel", 32)
    sch.annotate(root, "meta_schedule.vectorize", 64)
    assert postprocess(sch, *Postproc.create("llvm"))
    assert "T.ms_dot_16x4_vnni(" in sch.mod.script()
    lib = build(sch.mod, HOST)
    a, w, c, want = operands(func, seed=3)
    args = ms.pack_weights(sch, [a, w, c])  # RewriteLayout packed W into 16 x 4 tiles
    lib(*args)
    np.testing.assert_array_equal(args[-1], want)
    assert re.search(r"ms_dot_16x4_vnni(_acc)?\(", lib.get_source())  # _acc: in registers
