"""A hand-scheduled float32 matmul against numpy's (OpenBLAS) in the same run.

Builds ``C = A @ B`` with :func:`metaschedule.testing.schedules.matmul_schedule`
(packing, register tile, vectorize, parallel, unroll), checks it against numpy, then
times both in interleaved rounds (the machine may be shared: the minimum over all
rounds is the figure of merit, the median says how noisy it was). Prints a table and
writes JSON (default ``benchmarks/results/matmul_manual.json``)::

    python benchmarks/matmul_manual.py --size 1024 --rounds 8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (the benchmarks folder, not a package)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    p.add_argument("--rounds", type=int, default=8, help="interleaved timing rounds")
    p.add_argument("--repeat", type=int, default=5, help="timed calls per round and side")
    p.add_argument("--threads", type=int, default=None, help="threads (default: all cores)")
    p.add_argument("--rows", type=int, default=None, help="register tile rows")
    p.add_argument("--vectors", type=int, default=None, help="register tile vectors per row")
    p.add_argument("--row-block", type=int, default=512, help="rows per parallel task")
    p.add_argument("--col-block", type=int, default=128, help="columns per parallel task")
    p.add_argument(
        "--json", default=os.path.join(os.path.dirname(__file__), "results", "matmul_manual.json")
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from metaschedule.target import Target

    host = Target("cpu")
    threads = args.threads or host.num_cores
    # numpy's OpenBLAS reads its thread count when it is loaded: set it before the import
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    import numpy as np

    from metaschedule import te
    from metaschedule.codegen import build
    from metaschedule.schedule import Schedule
    from metaschedule.te import ops
    from metaschedule.testing.schedules import matmul_schedule, matmul_tiles

    target = Target({**host.as_json(), "num_cores": threads})
    n = args.size
    A = te.placeholder((n, n), "float32", "A")
    B = te.placeholder((n, n), "float32", "B")
    func = te.create_prim_func([A, B, ops.matmul(A, B)])
    recipe = {
        "rows": args.rows,
        "vectors": args.vectors,
        "row_block": args.row_block,
        "col_block": args.col_block,
    }

    t0 = time.perf_counter()
    sch = Schedule(func)
    matmul_schedule(sch, target, **recipe)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache:  # a cold build: the compile is timed
        lib = build(sch.mod, target, cache_dir=cache)
        t2 = time.perf_counter()

        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        c = np.zeros((n, n), np.float32)
        lib(a, b, c)
        expected = a @ b
        max_err = float(np.max(np.abs(c - expected)))
        ok = bool(np.allclose(c, expected, rtol=1e-4, atol=1e-4 * np.sqrt(n)))

        evaluator = lib.time_evaluator("main", number=1, repeat=args.repeat)
        ours: list[float] = []
        ref: list[float] = []
        for _ in range(args.rounds):
            ours.extend(evaluator(a, b, c).results)
            for _ in range(args.repeat):
                s = time.perf_counter()
                np.matmul(a, b, out=expected)
                ref.append(time.perf_counter() - s)

    flops = 2.0 * n**3
    gf = {
        name: (flops / min(ts) / 1e9, flops / float(np.median(ts)) / 1e9)
        for name, ts in (("metaschedule", ours), ("numpy", ref))
    }
    lanes = target.vector_lanes("float32")
    ghz, ghz_source = common.cpu_ghz()
    peak, ghz_source = common.measured_fma_peak(threads, lanes), "measured"
    if peak is None:
        peak, ghz_source = common.fma_peak_gflops(threads, ghz, lanes), ghz_source
    tiles = matmul_tiles(
        target,
        n,
        n,
        rows=args.rows,
        vectors=args.vectors,
        row_block=args.row_block,
        col_block=args.col_block,
    )
    load = os.getloadavg()

    print(f"{n}x{n}x{n} float32 matmul, {threads} thread(s), target: {target}")
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; "
        f"numbers are the best of {len(ours)} calls (median in parentheses)"
    )
    print(
        f"register tile {tiles.rows}x{tiles.cols} ({tiles.vectors} x {tiles.lanes} lanes), "
        f"block {tiles.row_block}x{tiles.col_block}; schedule {1e3 * (t1 - t0):.0f} ms, "
        f"build {1e3 * (t2 - t1):.0f} ms; correct: {ok} (max abs error {max_err:.1e})"
    )
    head = f"{'':14s}{'GFLOPS':>9s}{'(median)':>11s}{'ms':>9s}{'vs numpy':>10s}"
    if peak:
        head += f"{'% of peak':>11s}"
    print(head)
    for name, ts in (("metaschedule", ours), ("numpy", ref)):
        best, med = gf[name]
        row = (
            f"{name:14s}{best:9.1f}{f'({med:.1f})':>11s}{1e3 * min(ts):9.3f}"
            f"{best / gf['numpy'][0]:10.2f}"
        )
        if peak:
            row += f"{100 * best / peak:10.1f}%"
        print(row)
    if peak and ghz_source == "measured":
        print(f"FMA peak {peak:.0f} GFLOPS, measured ({lanes}-lane FMA chains on {threads} cores)")
    elif peak:
        print(
            f"FMA peak {peak:.0f} GFLOPS = {threads} cores x {ghz:.2f} GHz ({ghz_source}) x "
            f"{lanes} lanes x {common.fma_units(lanes)} FMA units x 2"
        )

    result = {
        "benchmark": "matmul_manual",
        "size": n,
        "dtype": "float32",
        "threads": threads,
        "target": str(target),
        "host": platform.processor() or platform.machine(),
        "loadavg": list(load),
        "recipe": {
            "rows": tiles.rows,
            "vectors": tiles.vectors,
            "lanes": tiles.lanes,
            "row_block": tiles.row_block,
            "col_block": tiles.col_block,
        },
        "correct": ok,
        "max_abs_error": max_err,
        "schedule_ms": 1e3 * (t1 - t0),
        "build_ms": 1e3 * (t2 - t1),
        "metaschedule": {
            "gflops_best": gf["metaschedule"][0],
            "gflops_median": gf["metaschedule"][1],
            "seconds": ours,
        },
        "numpy": {"gflops_best": gf["numpy"][0], "gflops_median": gf["numpy"][1], "seconds": ref},
        "ratio_vs_numpy": gf["metaschedule"][0] / gf["numpy"][0],
        "peak_gflops": peak,
        "peak_ghz_source": ghz_source,
        "percent_of_peak": 100 * gf["metaschedule"][0] / peak if peak else None,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
