"""One OpenMP region per kernel against one team per parallel nest, under passive waiting.

Short kernels with several parallel nests (softmax's four stages, a max pool and a
depthwise convolution each with its padding stage kept separate), hand-scheduled the
way tuning schedules them (parallel rows, vectorized channels), built twice: with
``codegen.c_parallel.SHARED_REGIONS`` on (the nests share one ``omp parallel`` region)
and off (``omp parallel for`` per nest, as before). Each variant is timed in fresh
processes under the runner's OpenMP environment (``OMP_WAIT_POLICY=PASSIVE``,
``GOMP_SPINCOUNT=0``; ``--spin N`` for another spin count), the two variants alternating
in short blocks within one process (so that they see the same load), in a few fresh
processes::

    python benchmarks/omp_regions.py --processes 3 --rounds 15

A benchmark, not a test: nothing is asserted; on a shared machine the numbers are noisy
(the table says the load average seen).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

from metaschedule import te
from metaschedule.codegen import build as ms_build
from metaschedule.codegen import c_parallel
from metaschedule.schedule import Schedule
from metaschedule.target import Target
from metaschedule.te import ops

#: kernel name -> (description, input shapes, output shape)
KERNELS = {
    "sfm": ("softmax 128x1024, 4 stages", [(128, 1024)], (128, 1024)),
    "pool": ("max pool 3x3/2 on 1x112x112x64 + pad stage", [(1, 112, 112, 64)], (1, 56, 56, 64)),
    "dep": (
        "depthwise 3x3 1x112x112x32 + pad stage",
        [(1, 112, 112, 32), (3, 3, 32, 1)],
        (1, 112, 112, 32),
    ),
}


def _rows_parallel(sch: Schedule, block, vector: bool = True) -> None:
    """Parallel over the fused leading (batch, row) loops, the innermost loop vectorized."""
    loops = sch.get_loops(block)
    outer = sch.fuse(loops[0], loops[1]) if len(loops) >= 4 else loops[0]
    sch.parallel(outer)
    if vector:
        sch.vectorize(sch.get_loops(block)[-1])


def schedule(name: str) -> Schedule:
    """The hand schedule of kernel ``name`` (every stage its own parallel nest)."""
    if name == "sfm":
        (x,) = [te.placeholder((128, 1024), "float32", "X")]
        sch = Schedule(te.create_prim_func([x, ops.softmax(x, axis=-1)]))
        for block, vec in [
            ("T_softmax_maxelem", False),
            ("T_softmax_exp", True),
            ("T_softmax_expsum", False),
            ("T_softmax_norm", True),
        ]:
            _rows_parallel(sch, sch.get_block(block), vec)
        return sch
    if name == "pool":
        x = te.placeholder((1, 112, 112, 64), "float32", "X")
        sch = Schedule(te.create_prim_func([x, ops.max_pool2d(x, 3, 2, 1)]))
        _rows_parallel(sch, sch.get_block("pad_temp"))
        blk = sch.get_block("pool_max")
        n, h, w, c, rh, rw = sch.get_loops(blk)
        sch.reorder(rh, rw, c)
        sch.parallel(sch.fuse(n, h))
        sch.vectorize(c)
        return sch
    if name == "dep":
        x = te.placeholder((1, 112, 112, 32), "float32", "X")
        k = te.placeholder((3, 3, 32, 1), "float32", "W")
        sch = Schedule(te.create_prim_func([x, k, ops.depthwise_conv2d_nhwc(x, k, 1, 1)]))
        blocks = sch.get_child_blocks(sch.get_block("root"))
        _rows_parallel(sch, blocks[0])
        n, h, w, c, rh, rw = sch.get_loops(blocks[1])[:6]
        sch.reorder(rh, rw, c)
        sch.parallel(sch.fuse(n, h))
        sch.vectorize(c)
        return sch
    raise ValueError(f"unknown kernel {name!r}; known: {', '.join(KERNELS)}")


def build(name: str, shared: bool, cores: int) -> str:
    """Build kernel ``name`` with or without shared regions; the library's path."""
    saved, c_parallel.SHARED_REGIONS = c_parallel.SHARED_REGIONS, shared
    try:
        lib = ms_build(schedule(name).mod, Target(f"llvm -num-cores {cores}"))
    finally:
        c_parallel.SHARED_REGIONS = saved
    regions = lib.get_source().count("#pragma omp parallel")
    os.makedirs(common.RESULTS_DIR, exist_ok=True)
    path = os.path.join(common.RESULTS_DIR, f".omp_{name}_{'one' if shared else 'per'}.so")
    lib.export_library(path)
    return path, regions


_CHILD = """
import json, statistics, sys, numpy as np
from metaschedule.runtime import load_module
paths, shapes, rounds = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
libs = [load_module(p) for p in paths]
rng = np.random.default_rng(0)
args = [rng.standard_normal(s).astype("float32") for s in shapes[:-1]]
args.append(np.zeros(shapes[-1], "float32"))
timers = [lib.time_evaluator(lib.entry_name, number=10, repeat=1, min_repeat_ms=20) for lib in libs]
out = [[] for _ in libs]
for r in range(rounds):  # alternate the variants in short blocks: they see the same load
    order = range(len(libs)) if r % 2 == 0 else reversed(range(len(libs)))
    for i in order:
        out[i].append(timers[i](*args).mean)
print(json.dumps([statistics.median(x) for x in out]))
"""


def time_variants(paths: list[str], shapes: list, env: dict[str, str], rounds: int) -> list[float]:
    """Median seconds per call of each library in ``paths``, timed alternately in one fresh
    process under ``env`` (the OpenMP variables of this process are dropped first)."""
    full = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(paths), json.dumps(shapes), str(rounds)],
        env={**full, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return [float(x) for x in json.loads(out.stdout.strip().splitlines()[-1])]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=3, help="fresh processes per kernel")
    p.add_argument("--rounds", type=int, default=15, help="alternations per process")
    p.add_argument("--kernels", default=",".join(KERNELS))
    p.add_argument("--spin", type=int, default=0, help="GOMP_SPINCOUNT (default 0: passive)")
    args = p.parse_args(argv)
    cores = os.cpu_count() or 1
    env = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": str(args.spin)}
    names = args.kernels.split(",")
    built = {(n, s): build(n, s, cores) for n in names for s in (True, False)}
    times: dict[tuple[str, bool], list[float]] = {}
    load = []
    for r in range(args.processes):
        for n in names:
            shapes = [*KERNELS[n][1], KERNELS[n][2]]
            paths = [built[(n, True)][0], built[(n, False)][0]]
            one, per = time_variants(paths, shapes, env, args.rounds)
            times.setdefault((n, True), []).append(one)
            times.setdefault((n, False), []).append(per)
        load.append(os.getloadavg()[0])
        print(f"  process {r + 1}/{args.processes}, load {load[-1]:.2f}", flush=True)
    rows = []
    for n in names:
        one, per = (statistics.median(times[(n, s)]) * 1e6 for s in (True, False))
        rows.append(
            [
                n,
                KERNELS[n][0],
                f"{built[(n, False)][1]} -> {built[(n, True)][1]}",
                f"{per:.1f}",
                f"{one:.1f}",
                f"{per / one:.2f}x",
            ]
        )
    common.print_table(
        f"us per call, median over {args.processes} processes of the median of "
        f"{args.rounds} alternations, {cores} threads, "
        f"GOMP_SPINCOUNT={args.spin} OMP_WAIT_POLICY=PASSIVE; load avg (1 min) per process: "
        + " ".join(f"{x:.2f}" for x in load),
        ["kernel", "what", "regions", "team per nest", "one region", "speedup"],
        rows,
        plain=True,
    )
    for path, _ in built.values():
        os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
