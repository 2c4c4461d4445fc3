"""ParallelizeVectorizeUnroll: the root block's annotations and the sampled unroll step."""

import numpy as np
import pytest

from metaschedule import te
from metaschedule.mutator import MutateUnroll
from metaschedule.schedule import Schedule
from metaschedule.schedule_rule import ParallelizeVectorizeUnroll

KEYS = (
    "meta_schedule.parallel",
    "meta_schedule.vectorize",
    "meta_schedule.unroll_explicit",
    "meta_schedule.unroll_implicit",
)


def root_annotations(sch):
    anns = sch.get(sch.get_block("root")).annotations
    return {k: v for k, v in anns.items() if k in KEYS}


def llvm_pvu(**overrides):
    kwargs = {
        "max_jobs_per_core": 16,
        "max_vectorize_extent": 64,
        "unroll_max_steps": [0, 16, 64, 512],
        "unroll_explicit": True,
    }
    return ParallelizeVectorizeUnroll(**{**kwargs, **overrides})


def test_root_gets_parallel_vectorize_and_a_sampled_unroll(ck, wl):
    (sch,) = ck.spaces(wl.matmul(), [llvm_pvu()], target="llvm -num-cores=4")
    anns = root_annotations(sch)
    assert anns["meta_schedule.parallel"] == 4 * 16
    assert anns["meta_schedule.vectorize"] == 64
    assert anns["meta_schedule.unroll_explicit"] in (0, 16, 64, 512)
    (sample,) = [i for i in sch.trace.insts if i.kind.name == "SampleCategorical"]
    assert sample.attrs[0] == [0, 16, 64, 512] and sample.attrs[1] == [0.25] * 4
    assert [0, 16, 64, 512][sch.trace.decisions[sample]] == anns["meta_schedule.unroll_explicit"]
    # only the root is annotated
    assert sch.get(sch.get_block("T_matmul_NN")).annotations == {"tag": "matmul"}


def test_unroll_steps_vary_across_seeds_and_mutate(ck, wl):
    seen = set()
    for seed in range(12):
        (sch,) = ck.spaces(wl.matmul(), [llvm_pvu()], rand_state=seed)
        seen.add(root_annotations(sch)["meta_schedule.unroll_explicit"])
    assert len(seen) >= 3
    mutated = MutateUnroll().apply(sch.trace, np.random.default_rng(0))
    new = Schedule(wl.matmul())
    mutated.apply_to_schedule(new, remove_postproc=True)
    assert (
        root_annotations(new)["meta_schedule.unroll_explicit"]
        != root_annotations(sch)["meta_schedule.unroll_explicit"]
    )


def test_implicit_unroll_key(ck, wl):
    (sch,) = ck.spaces(wl.matmul(), [llvm_pvu(unroll_explicit=False)])
    anns = root_annotations(sch)
    assert "meta_schedule.unroll_implicit" in anns and "meta_schedule.unroll_explicit" not in anns


def test_all_spatial_function_is_not_unrolled(ck):
    a = te.placeholder((8,), "float32", "A")
    func = te.create_prim_func([a, te.compute((8,), lambda i: a[i] + 1.0, name="B")])
    (sch,) = ck.spaces(func, [llvm_pvu()])
    assert set(root_annotations(sch)) == {"meta_schedule.parallel", "meta_schedule.vectorize"}


def test_minus_one_and_empty_steps_disable(ck, wl):
    rule = ParallelizeVectorizeUnroll(
        max_jobs_per_core=-1, max_vectorize_extent=-1, unroll_max_steps=None
    )
    (sch,) = ck.spaces(wl.matmul(), [rule])
    assert root_annotations(sch) == {}


def test_python_defaults_are_tvms():
    rule = ParallelizeVectorizeUnroll()
    assert (
        rule.max_jobs_per_core,
        rule.max_vectorize_extent,
        rule.unroll_max_steps,
        rule.unroll_explicit,
    ) == (16, 16, [], True)


def test_needs_a_core_count(wl):
    sch = Schedule(wl.matmul())
    with pytest.raises(ValueError, match="core count"):
        llvm_pvu().apply(sch, sch.get_block("root"))
    # but a non-root block is left alone without one
    block = sch.get_block("T_matmul_NN")
    assert llvm_pvu().apply(sch, block) == [sch]


@pytest.mark.parametrize(
    "kwargs", [{"max_jobs_per_core": 0}, {"max_vectorize_extent": -2}, {"unroll_max_steps": [-1]}]
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        ParallelizeVectorizeUnroll(**kwargs)
