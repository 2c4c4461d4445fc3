"""The suite's ``tbg`` (batch matmul ``Q @ K^T``) at small shapes: every design space of
the default llvm rules, sampled with several seeds and postprocessed (RewriteLayout
included), compiles to C that computes numpy's result; with ``K`` a layout-free weight
RewriteLayout takes it pre-packed and ``pack_weights`` re-lays it out."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.codegen import build
from metaschedule.postproc import Postproc
from metaschedule.search_strategy.base import TraceReplayer
from metaschedule.space_generator import PostOrderApply
from metaschedule.tune_context import TuneContext


def _tbg(b: int, m: int, n: int, k: int, weight_k: bool):
    q = te.placeholder((b, m, k), "float32", "Q")
    kk = te.placeholder((b, n, k), "float32", "K")
    r = te.reduce_axis((0, k), "r")
    attrs = {"layout_free_placeholders": [kk]} if weight_k else None
    out = te.compute(
        (b, m, n),
        lambda bb, i, j: te.sum(q[bb, i, r] * kk[bb, j, r], axis=r),
        name="T_batch_matmul_NT",
        tag="batch_matmul",
        attrs=attrs,
    )
    return te.create_prim_func([q, kk, out])


@pytest.mark.compiler
@pytest.mark.parametrize("weight_k", [False, True])
def test_every_sampled_tbg_schedule_computes_numpys_result(weight_k):
    func = _tbg(3, 16, 32, 8, weight_k)
    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 16, 8)).astype("float32")
    k = rng.standard_normal((3, 32, 8)).astype("float32")
    want = q @ k.transpose(0, 2, 1)
    target = "llvm -num-cores 2"
    ctx = TuneContext(func, target=target, space_generator=PostOrderApply(), rand_state=0)
    spaces = ctx.generate_design_space()
    assert len(spaces) >= 3  # write-cache choices (K is read transposed: no packed copy)
    replay = TraceReplayer(ctx.mod, Postproc.create("llvm"))
    checked, packed = 0, 0
    for i, space in enumerate(spaces):
        for seed in (1, 2, 3):
            sch = replay(space.trace, 11 * i + seed)
            if sch is None:  # a postprocessor rejected the sample
                continue
            lib = build(sch.mod, target)
            args = lib.pack_weights(q, k, np.zeros_like(want))
            packed += args[1].shape != k.shape
            lib(*args)
            np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-4, err_msg=f"{i}/{seed}")
            checked += 1
    assert checked >= len(spaces)
    if weight_k:
        assert packed >= 1  # RewriteLayout re-laid K out for some sample
    else:
        assert packed == 0
