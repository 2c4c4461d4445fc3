"""Overhead per candidate of measuring through Dask (RPCRunner) against LocalRunner.

Two measurements, each with both runners on the same machine in one run:

* tuning: ``tune_tir`` on the same matmul, space, strategy ("replay-trace"), random cost
  model, seed and trial budget, with the local builder; the profiler's "Runner" seconds
  per trial are what measuring costs the tuner per candidate;
* micro: the same prebuilt candidates sent through each runner, as one batch (wall time
  per candidate) and one at a time (round-trip latency of a single candidate).

The kernel timing itself is kept tiny (``number=1, repeat=1, min_repeat_ms=0``) so the
figures are overhead; with TVM's default ``min_repeat_ms=100`` every candidate costs at
least 0.1 s on either runner. Without ``--scheduler`` an in-process ``LocalCluster`` is
started (one measuring worker, one building worker), so the Dask figures include the
TCP round trips and pickling but no network latency.

    python benchmarks/rpc_overhead.py --trials 32
    python benchmarks/rpc_overhead.py --scheduler tcp://sched:8786 --key device-xeon

Prints a table and writes ``benchmarks/results/rpc_overhead.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common


def template(sch) -> None:
    """Tile i and j by sampled factors, put k between them, vectorize the inner j."""
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, i1, k, j1)
    sch.vectorize(j1)


def make_runners(args, evaluator):
    from metaschedule.runner import LocalRunner, RPCConfig, RPCRunner

    if args.scheduler:
        config = RPCConfig(args.scheduler, None, args.key)
    else:
        from metaschedule.testing import dask_cluster

        dask_cluster.local_fleet()
        config = dask_cluster.rpc_config()
    return {
        "local": lambda: LocalRunner(timeout_sec=30, evaluator_config=evaluator),
        "dask": lambda: RPCRunner(config, evaluator),
    }, config


def tune(kind, runner, args, builder):
    from metaschedule.profiler import Profiler
    from metaschedule.testing.tuning_records import matmul
    from metaschedule.tir_integration import tune_tir

    with tempfile.TemporaryDirectory() as work_dir:
        start = time.perf_counter()
        with Profiler() as profiler:
            db = tune_tir(
                matmul(args.size),
                "cpu",
                work_dir,
                args.trials,
                num_trials_per_iter=args.per_iter,
                space=template,
                strategy="replay-trace",
                cost_model="random",
                builder=builder,
                runner=runner,
                seed=0,
            )
        wall = time.perf_counter() - start
        records = db.get_all_tuning_records()
    valid = sum(r.is_valid for r in records)
    runner_secs = profiler.get().get("Runner", 0.0)
    return {
        "runner": kind,
        "trials": len(records),
        "valid": valid,
        "wall_s": wall,
        "runner_s": runner_secs,
        "runner_ms_per_candidate": 1e3 * runner_secs / len(records),
        "best_us": 1e6 * min(r.mean_run_sec for r in records if r.is_valid),
    }


def micro(kind, runner, inputs, singles):
    start = time.perf_counter()
    results = [f.result() for f in runner.run(inputs)]
    batch = time.perf_counter() - start
    latencies = []
    for inp in inputs[:singles]:
        t = time.perf_counter()
        (f,) = runner.run([inp])
        f.result()
        latencies.append(time.perf_counter() - t)
    kernel = sum(sum(r.run_secs) for r in results if r.run_secs)
    return {
        "runner": kind,
        "candidates": len(inputs),
        "errors": sum(bool(r.error_msg) for r in results),
        "batch_ms_per_candidate": 1e3 * batch / len(inputs),
        "kernel_ms_per_candidate": 1e3 * kernel / len(inputs),
        "single_latency_ms_median": 1e3 * statistics.median(latencies),
    }


def prebuilt_inputs(args, builder):
    from metaschedule.arg_info import ArgInfo
    from metaschedule.builder import BuilderInput
    from metaschedule.runner import RunnerInput
    from metaschedule.schedule import Schedule
    from metaschedule.target import Target
    from metaschedule.testing.tuning_records import matmul

    func = matmul(args.size)
    mods = []
    for seed in range(args.micro):
        sch = Schedule(func, seed=seed)
        template(sch)
        mods.append(sch.mod)
    built = builder.build([BuilderInput(m, Target("cpu")) for m in mods])
    infos = ArgInfo.from_prim_func(func)
    return [RunnerInput(b.artifact_path, "cpu", infos) for b in built if b.error_msg is None]


def _median(rows: list[dict]) -> dict:
    """Per numeric field, the median over rounds (other fields from the first row)."""
    out = dict(rows[0])
    for key, value in rows[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = statistics.median(r[key] for r in rows)
    out["rounds"] = len(rows)
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=64, help="matmul size N (N x N x N)")
    p.add_argument("--trials", type=int, default=32, help="tune_tir trials per runner")
    p.add_argument("--per-iter", type=int, default=8, help="num_trials_per_iter")
    p.add_argument("--micro", type=int, default=32, help="prebuilt candidates for the micro run")
    p.add_argument("--singles", type=int, default=8, help="one-at-a-time round trips timed")
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="interleaved rounds (local, dask, local, ...); medians are reported",
    )
    p.add_argument("--scheduler", default=None, help="a Dask scheduler (default: in-process)")
    p.add_argument("--key", default="device-test", help="the measuring workers' resource")
    p.add_argument("--plain", action="store_true", help="plain-text table")
    p.add_argument("--json", default=None, help="output path")
    return p.parse_args(argv)


def main(argv=None) -> int:
    from metaschedule.builder import LocalBuilder
    from metaschedule.runner import EvaluatorConfig

    args = parse_args(argv)
    info = common.machine_info()
    evaluator = EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)
    makers, config = make_runners(args, evaluator)
    rounds: dict[str, list[tuple[dict, dict]]] = {kind: [] for kind in makers}
    with LocalBuilder(timeout_sec=60) as builder:
        inputs = prebuilt_inputs(args, builder)
        for i in range(args.rounds):
            for kind, make in makers.items():
                with make() as runner:
                    for f in runner.run(inputs[:2]):  # warm up: connect, start processes
                        f.result()
                    m, t = (
                        micro(kind, runner, inputs, args.singles),
                        tune(kind, runner, args, builder),
                    )
                rounds[kind].append((m, t))
                print(
                    f"round {i + 1}/{args.rounds} {kind}: tuning "
                    f"{t['runner_ms_per_candidate']:.1f} ms/candidate, batch "
                    f"{m['batch_ms_per_candidate']:.1f} ms/candidate",
                    flush=True,
                )
    micro_rows = [_median([m for m, _ in rounds[kind]]) for kind in makers]
    tune_rows = [_median([t for _, t in rounds[kind]]) for kind in makers]
    local_t, dask_t = tune_rows
    local_m, dask_m = micro_rows
    extra = {
        "tuning_ms_per_candidate": dask_t["runner_ms_per_candidate"]
        - local_t["runner_ms_per_candidate"],
        "batch_ms_per_candidate": dask_m["batch_ms_per_candidate"]
        - local_m["batch_ms_per_candidate"],
        "single_latency_ms": dask_m["single_latency_ms_median"]
        - local_m["single_latency_ms_median"],
    }
    rows = [
        [
            f"tune_tir {args.trials} trials: Runner ms/candidate",
            local_t["runner_ms_per_candidate"],
            dask_t["runner_ms_per_candidate"],
            extra["tuning_ms_per_candidate"],
        ],
        [
            "tune_tir: wall s",
            local_t["wall_s"],
            dask_t["wall_s"],
            dask_t["wall_s"] - local_t["wall_s"],
        ],
        [
            f"batch of {len(inputs)}: ms/candidate",
            local_m["batch_ms_per_candidate"],
            dask_m["batch_ms_per_candidate"],
            extra["batch_ms_per_candidate"],
        ],
        [
            "one candidate: round trip ms (median)",
            local_m["single_latency_ms_median"],
            dask_m["single_latency_ms_median"],
            extra["single_latency_ms"],
        ],
        [
            "kernel time inside, ms/candidate",
            local_m["kernel_ms_per_candidate"],
            dask_m["kernel_ms_per_candidate"],
            "",
        ],
    ]
    common.print_table(
        f"Measuring overhead: LocalRunner vs RPCRunner on Dask ({config.address}, key "
        f"{config.tracker_key!r}), matmul {args.size}^3",
        ["", "local", "dask", "dask - local"],
        rows,
        notes=[
            *common.machine_lines(info),
            "kernel timing: number=1 repeat=1 min_repeat_ms=0, so these are overheads",
            f"medians of {args.rounds} interleaved rounds; the machine may be shared",
            (
                f"valid records: local {local_t['valid']}/{local_t['trials']}, "
                f"dask {dask_t['valid']}/{dask_t['trials']}"
            ),
        ],
        plain=args.plain,
    )
    path = common.write_json(
        "rpc_overhead",
        {
            "machine": info,
            "scheduler": config.address,
            "key": config.tracker_key,
            "size": args.size,
            "tuning": tune_rows,
            "micro": micro_rows,
            "rounds": {k: [{"micro": m, "tuning": t} for m, t in v] for k, v in rounds.items()},
            "dask_minus_local": extra,
        },
        args.json,
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
