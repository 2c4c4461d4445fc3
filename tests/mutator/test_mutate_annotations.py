"""MutateUnroll and MutateParallel: annotation values of the root block."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.mutator import MutateParallel, MutateUnroll
from metaschedule.mutator.mutate_parallel import analyze_parallel, fused_loops
from metaschedule.schedule import Schedule
from metaschedule.testing.tuning_records import matmul
from metaschedule.tune_context import TuneContext


def chain(n=16):
    a = te.placeholder((n, n), "float32", "A")
    b = te.compute((n, n), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((n, n), lambda i, j: b[i, j] + 1.0, name="C")
    return te.create_prim_func([a, c])


def annotated(func, unroll_probs=(0.25, 0.25, 0.25, 0.25), unroll_decision=2, parallel=64):
    sch = Schedule(func, seed=0)
    root = sch.get_block("root")
    other = sch.sample_categorical([7, 8], [0.5, 0.5], decision=0)  # feeds no annotation
    sch.annotate(root, "unrelated", other)
    v = sch.sample_categorical([0, 16, 64, 512], list(unroll_probs), decision=unroll_decision)
    sch.annotate(root, "meta_schedule.unroll_explicit", v)
    if parallel is not None:
        sch.annotate(root, "meta_schedule.parallel", parallel)
    sch.enter_postproc()
    return sch


def categorical_decisions(trace):
    return [trace.decisions[i] for i in trace.insts if i.kind.name == "SampleCategorical"]


def parallel_value(trace):
    return next(
        i.inputs[1]
        for i in trace.insts
        if i.kind.name == "Annotate" and i.attrs[0] == "meta_schedule.parallel"
    )


def test_unroll_redraws_among_the_other_candidates():
    sch = annotated(chain())
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(30):
        new = MutateUnroll().apply(sch.trace, rng)
        other, unroll = categorical_decisions(new)
        assert other == 0 and unroll != 2  # only the annotated sample changes
        seen.add(unroll)
        replayed = Schedule(chain(), seed=1)
        new.apply_to_schedule(replayed, remove_postproc=True)
        assert (
            replayed.mod["main"].root_block.annotations["meta_schedule.unroll_explicit"]
            == [0, 16, 64, 512][unroll]
        )
    assert seen == {0, 1, 3}


def test_unroll_without_alternatives_gives_none():
    assert MutateUnroll().apply(annotated(chain(), (0.0, 0.0, 1.0, 0.0)).trace, 0) is None
    plain = Schedule(chain(), seed=0)
    plain.sample_categorical([1, 2], [0.5, 0.5])
    assert MutateUnroll().apply(plain.trace, 0) is None


@pytest.fixture
def ctx():
    return TuneContext(chain(), target="cpu -num-cores=4", rand_state=1)


def test_parallel_picks_another_plan(ctx):
    mutator = MutateParallel(max_jobs_per_core=16)
    mutator._initialize_with_tune_context(ctx)
    assert mutator.max_parallel_extent == 64
    sch = annotated(ctx.mod, parallel=64)
    rng = np.random.default_rng(0)
    values = set()
    for _ in range(20):
        new = mutator.apply(sch.trace, rng)
        assert categorical_decisions(new) == [0, 2]
        values.add(parallel_value(new))
    # Both blocks have loops (16, 16), products 16 and 256: 64 fuses 2 loops, and the only
    # other plan within 64 fuses 1 loop (limit 16). From 16 there is nothing else within 64.
    assert values == {16}
    sch16 = annotated(ctx.mod, parallel=16)
    assert mutator.apply(sch16.trace, rng) is None
    wide = MutateParallel(max_jobs_per_core=64)  # extent up to 256: 2 loops fit
    wide._initialize_with_tune_context(ctx)
    assert {parallel_value(wide.apply(sch16.trace, rng)) for _ in range(5)} == {256}


def test_parallel_plans_follow_the_loop_structure(ctx):
    sch = Schedule(ctx.mod, seed=0)
    c = sch.get_block("C")
    i, j = sch.get_loops(c)
    sch.split(i, [4, 4])
    sch.compute_at(sch.get_block("B"), sch.get_loops(c)[0])
    # Children of root: B and C, each under (i_0, 4 x 16); products stop once >= limit.
    assert analyze_parallel(sch, "root", "main", limit=64) == [[4, 16, 256], [4, 16, 256]]
    assert analyze_parallel(sch, "root", "main", limit=16) == [[4, 16], [4, 16]]
    mm = Schedule(matmul(8), seed=0)
    i, j, k = mm.get_loops(mm.get_block("C"))
    assert analyze_parallel(mm, "root", "main", limit=1000) == [[8, 64]]  # k is a reduction
    mm.reorder(j, k, i)
    assert analyze_parallel(mm, "root", "main", limit=1000) == [[8]]
    mm.reorder(k, j, i)
    assert analyze_parallel(mm, "root", "main", limit=1000) == []
    assert fused_loops([[4, 16, 64], [2, 32]], 16) == (2, 2)
    assert fused_loops([[4, 16, 64], [2, 32]], 100) == (3, 2)
    assert fused_loops([[4, 16, 64], [2, 32]], 1) == (1, 1)


def test_parallel_sampled_value_and_errors(ctx):
    sch = Schedule(ctx.mod, seed=0)
    v = sch.sample_categorical([8, 64], [0.5, 0.5], decision=1)
    sch.annotate(sch.get_block("root"), "meta_schedule.parallel", v)
    new = MutateParallel(max_jobs_per_core=2).apply(sch.trace, 0)
    assert categorical_decisions(new) == [0]
    assert MutateParallel(max_jobs_per_core=2).apply(Schedule(ctx.mod).trace, 0) is None
    with pytest.raises(ValueError, match="TuneContext"):
        MutateParallel(max_jobs_per_core=2).apply(annotated(ctx.mod).trace, 0)
    with pytest.raises(ValueError, match="max_jobs_per_core"):
        MutateParallel(max_jobs_per_core=0)
