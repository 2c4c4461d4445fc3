"""``metaschedule demo``: a hand-scheduled matmul, checked against numpy and timed."""

from __future__ import annotations

import argparse
import tempfile
import time

from .. import te
from ..codegen import build
from ..schedule import Schedule
from ..target import Target
from ..te import ops
from ..testing.schedules import matmul_schedule
from .common import add_subcommand, positive_int

EXAMPLES = """\
  metaschedule demo                      # 1024^3 float32 matmul
  metaschedule demo --size 256 --repeat 3
"""


def register(sub, parents) -> None:
    p = add_subcommand(
        sub,
        "demo",
        help="build, check and time a hand-scheduled matmul",
        description="Build a matmul with a hand-written schedule, check it "
        "against numpy and time it against numpy's BLAS.",
        examples=EXAMPLES,
        parents=parents,
    )
    p.add_argument(
        "--size", type=positive_int, default=1024, help="N of the N x N x N float32 matmul"
    )
    p.add_argument("--number", type=positive_int, default=5, help="calls per timed round")
    p.add_argument(
        "--repeat",
        type=positive_int,
        default=5,
        help="timed rounds, interleaved with numpy; the best round counts",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    n = args.size
    A = te.placeholder((n, n), "float32", "A")
    B = te.placeholder((n, n), "float32", "B")
    func = te.create_prim_func([A, B, ops.matmul(A, B)])
    target = Target("cpu")
    print(f"target: {target}")

    t0 = time.perf_counter()
    sch = Schedule(func)
    matmul_schedule(sch, target)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as cold_cache:  # time a real compile, not a cache hit
        lib = build(sch.mod, target, cache_dir=cold_cache)
    t2 = time.perf_counter()
    print(
        f"schedule {1e3 * (t1 - t0):.1f} ms, build {1e3 * (t2 - t1):.1f} ms "
        f"(lower + C codegen + cc, {n}x{n}x{n} float32 matmul)"
    )

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    lib(a, b, c)
    expected = a @ b
    err = float(np.max(np.abs(c - expected)) / max(1e-30, float(np.max(np.abs(expected)))))
    ok = np.allclose(c, expected, rtol=1e-4, atol=1e-3 * np.sqrt(n))
    print(f"numpy check: {'OK' if ok else 'MISMATCH'} (max relative error {err:.2e})")

    # interleaved rounds, best of each: the machine may be shared with other work
    flops = 2.0 * n**3
    evaluator = lib.time_evaluator("main", number=args.number, repeat=1)
    ours: list[float] = []
    ref: list[float] = []
    for _ in range(args.repeat):
        ours.extend(evaluator(a, b, c).results)
        t = time.perf_counter()
        for _ in range(args.number):
            np.matmul(a, b, out=expected)
        ref.append((time.perf_counter() - t) / args.number)
    ours_gf, ref_gf = flops / min(ours) / 1e9, flops / min(ref) / 1e9
    print(f"metaschedule: {ours_gf:8.1f} GFLOPS")
    print(f"numpy       : {ref_gf:8.1f} GFLOPS  (ratio {ours_gf / ref_gf:.2f})")
    return 0 if ok else 1
