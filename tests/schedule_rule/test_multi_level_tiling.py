"""MultiLevelTiling: tile structure, write/read caches, and correctness of the spaces."""

import math

import numpy as np
import pytest

from metaschedule.mutator import MutateTileSize
from metaschedule.schedule import Schedule
from metaschedule.schedule_rule import AutoInline, MultiLevelTiling, ReuseType
from metaschedule.tir import IntImm

STRUCTURE_KEY = "meta_schedule.tiling_structure"


def llvm_mlt(**overrides):
    """The rule as in the llvm default list."""
    kwargs = {
        "structure": "SSRSRS",
        "max_innermost_factor": 64,
        "reuse_write": ReuseType(req="may", levels=[1, 2], scope="global"),
    }
    return MultiLevelTiling(**{**kwargs, **overrides})


def loops_of(sch, name):
    fname, realize = sch._block(sch.get_block(name))
    return sch.state.loops_above(fname, realize)


def extents(sch, name):
    return [lp.extent.value for lp in loops_of(sch, name)]


def shared_loops(sch, a, b):
    """How many loops block ``a`` and block ``b`` share."""
    return len({id(lp) for lp in loops_of(sch, a)} & {id(lp) for lp in loops_of(sch, b)})


def tiles(sch):
    """The decisions of the SamplePerfectTile instructions, in trace order."""
    return [
        list(sch.trace.decisions[i]) for i in sch.trace.insts if i.kind.name == "SamplePerfectTile"
    ]


def test_matmul_loops_follow_the_ssrsrs_structure(ck, wl):
    func = wl.matmul(8, 16, 32)
    spaces = ck.spaces(func, [llvm_mlt()])
    assert len(spaces) == 3
    for sch in spaces:
        block = sch.get(sch.get_block("T_matmul_NN"))
        assert block.annotations[STRUCTURE_KEY] == "SSRSRS"
        ti, tj, tk = tiles(sch)
        assert (len(ti), len(tj), len(tk)) == (4, 4, 2)
        assert (math.prod(ti), math.prod(tj), math.prod(tk)) == (8, 16, 32)
        assert max(ti[-1], tj[-1], tk[-1]) <= 64
        # i0 j0 | i1 j1 | k0 | i2 j2 | k1 | i3 j3
        order = [ti[0], tj[0], ti[1], tj[1], tk[0], ti[2], tj[2], tk[1], ti[3], tj[3]]
        assert extents(sch, "T_matmul_NN") == order
        assert "Reorder" in ck.kinds(sch)


def test_write_cache_may_gives_no_cache_and_one_per_level(ck, wl):
    spaces = ck.spaces(wl.matmul(), [llvm_mlt()])
    seen = set()
    for sch in spaces:
        if "CacheWrite" not in ck.kinds(sch):
            seen.add(None)
            continue
        # the compute block writes the cache; the copy back sits under the level's loops
        block = sch.get(sch.get_block("T_matmul_NN"))
        assert block.writes[0].buffer.name == "T_matmul_NN_global"
        seen.add(shared_loops(sch, "T_matmul_NN", "T_matmul_NN_global"))
    assert seen == {None, 2, 4}


@pytest.mark.parametrize("req, count", [("must", 2), ("no", 1)])
def test_write_cache_must_and_no(ck, wl, req, count):
    reuse = ReuseType(req=req, levels=[1, 2] if req != "no" else [], scope="global")
    spaces = ck.spaces(wl.matmul(), [llvm_mlt(reuse_write=reuse)])
    assert len(spaces) == count
    assert all(("CacheWrite" in ck.kinds(s)) == (req == "must") for s in spaces)


def test_reuse_given_as_a_dict(ck, wl):
    spaces = ck.spaces(
        wl.matmul(), [llvm_mlt(reuse_write={"req": "must", "levels": [2], "scope": "global"})]
    )
    assert len(spaces) == 1 and "CacheWrite" in ck.kinds(spaces[0])


def test_spaces_compute_the_same_numbers(ck, wl):
    func = wl.matmul(8, 4, 16)
    ck.assert_space_correct(func, ck.spaces(func, [llvm_mlt()]), replays=3)


def test_conv2d_tiles_seven_loops_and_keeps_numbers(ck, wl):
    func = wl.conv2d()
    spaces = ck.spaces(func, [llvm_mlt()])
    assert len(spaces) == 3
    for sch in spaces:
        assert len(extents(sch, "conv2d_nhwc")) == 4 * 4 + 3 * 2
        assert STRUCTURE_KEY not in sch.get(sch.get_block("PaddedInput")).annotations
    ck.assert_space_correct(func, spaces, replays=1)


def test_elementwise_epilogue_is_moved_instead_of_a_new_cache(ck, wl):
    func = wl.conv2d(relu=True)
    inline = AutoInline(False, True, True, True, True, True, ["tir.exp"])
    spaces = ck.spaces(func, [inline, llvm_mlt()])
    assert len(spaces) == 3
    assert not any("CacheWrite" in ck.kinds(s) for s in spaces)
    shared = sorted(shared_loops(s, "conv2d_nhwc", "T_relu") for s in spaces)
    assert shared == [0, 4, 8]  # not moved, under level 1, under level 2 (4 spatial loops each)
    ck.assert_space_correct(func, spaces, replays=0)


def test_blocks_without_data_reuse_are_not_tiled(ck, wl):
    (sch,) = ck.spaces(wl.softmax(), [llvm_mlt()])
    assert set(ck.kinds(sch)) == {"GetBlock"}


def test_write_cache_level_annotation_forces_the_cache(ck, wl):
    pre = Schedule(wl.matmul())
    pre.annotate(pre.get_block("T_matmul_NN"), "meta_schedule.write_cache_level", [1])
    func = pre.mod["main"]
    (sch,) = ck.spaces(func, [llvm_mlt(reuse_write=None)])
    assert "CacheWrite" in ck.kinds(sch)
    assert shared_loops(sch, "T_matmul_NN", "T_matmul_NN_global") == 2
    ck.assert_same_numbers(func, sch)


def test_read_cache_with_cooperative_fetch(ck, wl):
    func = wl.matmul()
    rule = llvm_mlt(
        reuse_write=None,
        vector_load_lens=[1, 2, 4],
        reuse_read=ReuseType(req="must", levels=[2], scope="global"),
    )
    (sch,) = ck.spaces(func, [rule])
    kinds = ck.kinds(sch)
    assert kinds.count("CacheRead") == 2 and kinds.count("ComputeAt") == 2
    assert kinds.count("SampleCategorical") == 2
    for name in ("A_global", "B_global"):
        block = sch.get(sch.get_block(name))
        assert block.annotations["meta_schedule.cooperative_fetch"] in (1, 2, 4)
        assert shared_loops(sch, "T_matmul_NN", name) == 4
    ck.assert_space_correct(func, [sch], replays=2)


@pytest.mark.parametrize("limit", [2, None])
def test_max_innermost_factor(ck, wl, limit):
    func = wl.matmul(16, 16, 16)
    inner = set()
    for seed in range(6):
        for sch in ck.spaces(func, [llvm_mlt(max_innermost_factor=limit)], rand_state=seed):
            inner |= {t[-1] for t in tiles(sch)}
            recorded = {i.attrs[1] for i in sch.trace.insts if i.kind.name == "SamplePerfectTile"}
            assert recorded == {limit or 16}  # None: the loop's extent bounds it
    if limit:
        assert inner <= {1, 2} and inner == {1, 2}
    else:
        assert max(inner) > 2


def test_filter_fn_overrides_the_default_condition(ck, wl):
    func = wl.softmax()
    rule = llvm_mlt(
        reuse_write=None, filter_fn=lambda sch, b: sch.get(b).name_hint == "T_softmax_exp"
    )
    (sch,) = ck.spaces(func, [rule])
    assert len(extents(sch, "T_softmax_exp")) == 2 * 4  # two spatial loops, four tiles each
    ck.assert_same_numbers(func, sch)
    (sch,) = ck.spaces(wl.matmul(), [llvm_mlt(filter_fn=lambda sch, b: False)])
    assert set(ck.kinds(sch)) == {"GetBlock"}


def test_tile_binds_fuse_and_bind_the_outer_levels(ck, wl):
    rule = MultiLevelTiling(
        "SSSRRSRS", tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"], max_innermost_factor=64
    )
    (sch,) = ck.spaces(wl.matmul(), [rule])
    kinds = ck.kinds(sch)
    assert kinds.count("Fuse") == 3 and kinds.count("Bind") == 3
    bound = [lp.thread_binding for lp in loops_of(sch, "T_matmul_NN")[:3]]
    assert bound == ["blockIdx.x", "vthread.x", "threadIdx.x"]


def test_different_seeds_give_different_points_and_mutation_replays(ck, wl):
    func = wl.matmul(16, 16, 16)
    # the tiles are sampled before the write-cache forks: one point per seed
    points = {
        ck.decisions(s) for seed in range(4) for s in ck.spaces(func, [llvm_mlt()], rand_state=seed)
    }
    assert len(points) == 4
    (sch, *_) = ck.spaces(func, [llvm_mlt()])
    mutated = MutateTileSize().apply(sch.trace, np.random.default_rng(0))
    assert mutated is not None and tiles(sch) != [
        list(mutated.decisions[i]) for i in mutated.insts if i.kind.name == "SamplePerfectTile"
    ]
    new = Schedule(func, seed=0)
    mutated.apply_to_schedule(new, remove_postproc=True)
    ck.assert_same_numbers(func, new)


def test_trivial_binding_is_required(ck, wl):
    pre = Schedule(wl.matmul())
    i, j, _k = pre.get_loops(pre.get_block("T_matmul_NN"))
    pre.fuse(i, j)
    (sch,) = ck.spaces(pre.mod["main"], [llvm_mlt()])
    assert set(ck.kinds(sch)) == {"GetBlock"}


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"structure": "SSX"}, "structure"),
        ({"structure": "SS"}, "structure"),
        ({"structure": "SRS", "reuse_write": ReuseType("must", [3], "global")}, "levels"),
        ({"reuse_read": ReuseType("may", [1], "global")}, "may"),
        ({"max_innermost_factor": 0}, "max_innermost_factor"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiLevelTiling(**kwargs)


def test_bad_reuse_type():
    with pytest.raises(ValueError, match="req"):
        ReuseType("sometimes", [1], "global")
    with pytest.raises(ValueError, match="1-based"):
        ReuseType("must", [0], "global")
    assert ReuseType("may", [1, 2], "global").as_dict() == {
        "req": "may",
        "levels": [1, 2],
        "scope": "global",
    }


def test_unit_extent_is_fine(ck, wl):
    func = wl.matmul(1, 8, 8)
    spaces = ck.spaces(func, [llvm_mlt()])
    assert all(isinstance(lp.extent, IntImm) for s in spaces for lp in loops_of(s, "T_matmul_NN"))
    ck.assert_space_correct(func, spaces, replays=1)
