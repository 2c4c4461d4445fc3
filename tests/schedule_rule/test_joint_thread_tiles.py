"""Joint sampling of GPU thread tiles: sample_joint_tile, its trace, its mutation, and
the share of cuda matmul samples within the threads-per-block bounds."""

from __future__ import annotations

import json
import math

import pytest

from metaschedule import te, tir
from metaschedule.mutator import MutateTileSize
from metaschedule.postproc.verify_gpu_code import _thread_extents_in_bounds
from metaschedule.schedule.trace import Trace
from metaschedule.te import ops
from metaschedule.tune_context import TuneContext

BOUNDS = [[2, 32, 256], [1, 1, 8]]  # threads in [32, 256], virtual threads at most 8


def _matmul(n=128, k=64):
    a = te.placeholder((n, k), "float32", "A")
    b = te.placeholder((k, n), "float32", "B")
    return te.create_prim_func([a, b, ops.matmul(a, b)])


def _rows(sch, rvs, n=5):
    flat = [sch.get(v) for v in rvs]
    return [flat[i : i + n] for i in range(0, len(flat), n)]


def test_joint_tiles_are_perfect_and_within_bounds():
    for seed in range(20):
        sch = tir.Schedule(_matmul(), seed=seed)
        i, j, _ = sch.get_loops(sch.get_block("T_matmul_NN"))
        rows = _rows(sch, sch.sample_joint_tile([i, j], 5, 64, BOUNDS))
        assert [math.prod(r) for r in rows] == [128, 128]
        assert 32 <= rows[0][2] * rows[1][2] <= 256 and rows[0][1] * rows[1][1] <= 8
        assert all(r[-1] <= 64 for r in rows)


def test_joint_tile_trace_replays_from_json_and_checks_decisions():
    sch = tir.Schedule(_matmul(), seed=3)
    i, j, _ = sch.get_loops(sch.get_block("T_matmul_NN"))
    outs = sch.sample_joint_tile([i, j], 5, 64, BOUNDS)
    sch.split(i, outs[:5])
    text = json.dumps(sch.trace.as_json())
    assert "SampleJointTile" in text
    assert any("sample_joint_tile(loops=[" in line for line in sch.trace.as_python())
    again = tir.Schedule(_matmul(), seed=99)
    Trace.from_json(json.loads(text)).apply_to_schedule(again, remove_postproc=False)
    assert again.mod.script() == sch.mod.script()
    loops = again.get_loops(again.get_block("T_matmul_NN"))
    with pytest.raises(tir.ScheduleError, match="not a perfect tiling"):
        again.sample_joint_tile(loops[-2:], 5, 64, BOUNDS, decision=[1] * 10)


def test_mutation_keeps_products_and_bounds():
    sch = tir.Schedule(_matmul(), seed=5)
    i, j, _ = sch.get_loops(sch.get_block("T_matmul_NN"))
    sch.sample_joint_tile([i, j], 5, 64, BOUNDS)
    (inst,) = [x for x in sch.trace.insts if x.kind.name == "SampleJointTile"]
    before = sch.trace.get_decision(inst)
    changed = 0
    for seed in range(20):
        new = MutateTileSize().apply(sch.trace, seed)
        assert new is not None
        (ninst,) = [x for x in new.insts if x.kind.name == "SampleJointTile"]
        dec = new.get_decision(ninst)
        rows = [dec[:5], dec[5:]]
        assert [math.prod(r) for r in rows] == [128, 128]
        assert 32 <= rows[0][2] * rows[1][2] <= 256 and rows[0][1] * rows[1][1] <= 8
        changed += dec != before
    assert changed == 20


def test_cuda_matmul_samples_respect_the_thread_bounds():
    ctx = TuneContext(
        _matmul(), target="cuda -arch=sm_80", space_generator="post-order-apply", rand_state=0
    )
    (space,) = ctx.generate_design_space()
    assert any(x.kind.name == "SampleJointTile" for x in space.trace.insts)
    inside = 0
    for seed in range(30):
        sch = tir.Schedule(ctx.mod, seed=seed)
        Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
        inside += _thread_extents_in_bounds(sch.mod["main"].body)
    # per-loop sampling (TVM's) lands ~1 in 100 samples there; jointly, all of them
    assert inside == 30, inside
