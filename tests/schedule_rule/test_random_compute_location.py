"""RandomComputeLocation: which blocks get a sampled location, and every location works."""

import numpy as np

from metaschedule import te
from metaschedule.mutator import MutateComputeLocation
from metaschedule.schedule import Schedule
from metaschedule.schedule_rule import MultiLevelTiling, RandomComputeLocation, ReuseType
from metaschedule.space_generator import PostOrderApply
from metaschedule.tune_context import TuneContext


def sampled_blocks(sch):
    """Names of the blocks whose location was sampled (some may be inlined since)."""
    names = {id(i.outputs[0]): i.attrs[0] for i in sch.trace.insts if i.kind.name == "GetBlock"}
    return [
        names[id(i.inputs[0])] for i in sch.trace.insts if i.kind.name == "SampleComputeLocation"
    ]


def test_padding_gets_a_sampled_location_and_every_one_is_correct(ck, wl):
    func = wl.conv2d()
    (sch,) = ck.spaces(func, [RandomComputeLocation()])
    kinds = ck.kinds(sch)
    assert kinds.count("SampleComputeLocation") == 1 and kinds.count("ComputeAt") == 1
    assert sampled_blocks(sch) == ["PaddedInput"]
    (sample,) = [i for i in sch.trace.insts if i.kind.name == "SampleComputeLocation"]
    # replay with each decision: root (-1), inline (-2) and each loop of the conv
    expected = ck.reference(func)
    decisions = set()
    for d in range(-2, 7):
        new = Schedule(func)
        sch.trace.with_decision(sample, d, remove_postproc=True).apply_to_schedule(
            new, remove_postproc=True
        )
        decisions.add(
            new.trace.decisions[
                next(i for i in new.trace.insts if i.kind.name == "SampleComputeLocation")
            ]
        )
        ck.assert_same_numbers(func, new, expected)
    assert {-2, -1, 0} <= decisions and len(decisions) >= 5


def test_output_and_multi_block_nests_are_left_alone(ck, wl):
    # matmul: its only block is the output (no consumer)
    (sch,) = ck.spaces(wl.matmul(), [RandomComputeLocation()])
    assert set(ck.kinds(sch)) == {"GetBlock"}
    # a producer sharing its outermost loop with its consumer is not moved
    a = te.placeholder((8, 8), "float32", "A")
    b = te.compute((8, 8), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((8, 8), lambda i, j: b[i, j] + 1.0, name="C")
    pre = Schedule(te.create_prim_func([a, c]))
    pre.compute_at(pre.get_block("B"), pre.get_loops(pre.get_block("C"))[0])
    (sch,) = ck.spaces(pre.mod["main"], [RandomComputeLocation()])
    assert set(ck.kinds(sch)) == {"GetBlock"}


def test_tiled_blocks_are_left_alone(ck, wl):
    func = wl.conv2d(relu=True)
    mlt = MultiLevelTiling(
        "SSRSRS", max_innermost_factor=64, reuse_write=ReuseType("no", [], "global")
    )
    (sch,) = ck.spaces(func, [mlt, RandomComputeLocation()])
    moved = sampled_blocks(sch)
    # the tiled conv has a consumer but keeps its tiles; T_add and the padding move
    assert "conv2d_nhwc" not in moved and "PaddedInput" in moved and "T_add" in moved
    ck.assert_space_correct(func, [sch], replays=1)


def test_locations_vary_with_the_seed_and_mutate(ck, wl):
    func = wl.conv2d()
    seen = set()
    for seed in range(8):
        (sch,) = ck.spaces(func, [RandomComputeLocation()], rand_state=seed)
        seen.add(ck.decisions(sch))
    assert len(seen) >= 3
    space = PostOrderApply(sch_rules=[RandomComputeLocation()], postprocs=[], mutator_probs={})
    ctx = TuneContext(func, target="llvm", space_generator=space, rand_state=0)
    (sch,) = ctx.generate_design_space()
    mutator = MutateComputeLocation()
    mutator._initialize_with_tune_context(ctx)
    mutated = mutator.apply(sch.trace, np.random.default_rng(0))
    assert mutated is not None and ck.decisions(sch) != tuple(
        d for d in (mutated.decisions.get(i) for i in mutated.insts) if d is not None
    )
    new = Schedule(func)
    mutated.apply_to_schedule(new, remove_postproc=True)
    ck.assert_same_numbers(func, new)
