"""``metaschedule tune``: tune a suite workload, a PrimFunc from a file, or an ONNX model."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import tempfile

from ..database import JSONDatabase
from ..database.json_database import TUNING_RECORD_FILE
from ..flop_count import estimate_flops
from ..graph import from_onnx
from ..measure_callback import MeasureCallback
from ..profiler import Profiler
from ..relax_integration import tune_relax
from ..report.measure_log import MeasureLog
from ..runner import RPCConfig, RPCRunner
from ..target import Target
from ..tir.function import IRModule
from ..tune import DEFAULT_FINAL_SELECTION_TOP_K, tune_tir
from .common import (
    CLIError,
    add_subcommand,
    is_model_file,
    load_workload,
    non_negative_int,
    positive_int,
)

EXAMPLES = """\
  metaschedule tune gmm --trials 64 --work-dir runs/gmm        # 1024^3 matmul
  metaschedule tune gmm:256 --trials 32 --work-dir runs/gmm256 --seed 0
  metaschedule tune my_ops.py:conv --trials 128 --work-dir runs/conv --cost-model mlp
  metaschedule tune model.onnx --trials 512 --work-dir runs/model
  metaschedule tune c2d --trials 64 --work-dir runs/c2d --runner rpc \\
      --rpc-address 10.0.0.5:8786 --rpc-key device-xeon

WORKLOAD is a suite name (gmm, c2d, dep, cbr, tbg, sfm, dns, pool; gmm:N for an N^3
matmul), FILE.py:NAME (NAME a PrimFunc, te tensors [inputs..., output], or a function
of no arguments returning one), or an .onnx model. Running again with the same
--work-dir resumes: the records there are kept and never measured again.
"""

PROFILE_FILE = "profile.json"


def register(sub, parents) -> None:
    p = add_subcommand(
        sub,
        "tune",
        help="tune a workload or a model",
        description="Tune a workload: search schedules, measure them, and keep "
        "the records in --work-dir.",
        examples=EXAMPLES,
        parents=parents,
    )
    p.add_argument("workload", metavar="WORKLOAD", help="suite name, FILE.py[:NAME] or MODEL.onnx")
    p.add_argument(
        "--work-dir",
        required=True,
        metavar="DIR",
        help="folder of the run: database, logs; an existing one is resumed",
    )
    p.add_argument("--target", default="cpu", help="the target, e.g. 'cpu' or 'llvm -num-cores 4'")
    p.add_argument(
        "--trials",
        type=positive_int,
        default=64,
        metavar="N",
        help="candidates to measure in all (max_trials_global)",
    )
    p.add_argument(
        "--trials-per-task",
        type=positive_int,
        default=None,
        metavar="N",
        help="candidates to measure per task (default: --trials)",
    )
    p.add_argument(
        "--trials-per-iter",
        type=positive_int,
        default=64,
        metavar="N",
        help="candidates per measured batch (num_trials_per_iter)",
    )
    p.add_argument(
        "--strategy",
        default="evolutionary",
        choices=["evolutionary", "replay-trace", "replay-func"],
        help="the search strategy",
    )
    p.add_argument(
        "--cost-model",
        default="xgb",
        choices=["xgb", "mlp", "random"],
        help="the cost model that ranks candidates",
    )
    p.add_argument(
        "--task-scheduler",
        default="gradient",
        choices=["gradient", "round-robin"],
        help="how trials are shared between the tasks of a model",
    )
    p.add_argument(
        "--seed", type=non_negative_int, default=None, help="random seed (default: from the OS)"
    )
    p.add_argument(
        "--num-tuning-cores",
        default="physical",
        metavar="N",
        help="threads of the search: 'physical', 'logical' or a count",
    )
    p.add_argument(
        "--final-selection-top-k",
        type=non_negative_int,
        default=DEFAULT_FINAL_SELECTION_TOP_K,
        metavar="K",
        help="at the end, re-measure each task's best K records interleaved and keep the "
        "fastest (0: off)",
    )
    p.add_argument(
        "--runner",
        default="local",
        choices=["local", "rpc"],
        help="measure here ('local') or on remote workers ('rpc')",
    )
    p.add_argument(
        "--rpc-address",
        metavar="HOST:PORT",
        default=None,
        help="the tracker (Dask scheduler) of --runner rpc",
    )
    p.add_argument(
        "--rpc-key",
        metavar="KEY",
        default=None,
        help="the device key (worker resource) of --runner rpc",
    )
    p.add_argument(
        "--quiet", action="store_true", help="no progress display; only the final summary"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        target = Target(args.target)
    except ValueError as err:
        raise CLIError(f"--target {args.target!r}: {err}", usage=True) from None
    cores = args.num_tuning_cores
    if cores not in ("physical", "logical"):
        try:
            cores = int(cores)
        except ValueError:
            raise CLIError(
                f"--num-tuning-cores {cores!r}: expected 'physical', 'logical' or a count",
                usage=True,
            ) from None
    runner = _runner(args)
    os.makedirs(args.work_dir, exist_ok=True)
    if args.quiet:
        logging.getLogger("metaschedule").addHandler(logging.NullHandler())
    kwargs = {
        "max_trials_per_task": args.trials_per_task,
        "num_trials_per_iter": args.trials_per_iter,
        "runner": runner,
        "cost_model": args.cost_model,
        "task_scheduler": args.task_scheduler,
        "strategy": args.strategy,
        "num_tuning_cores": cores,
        "seed": args.seed,
        "measure_callbacks": _callbacks(args.work_dir),
        "final_selection_top_k": args.final_selection_top_k,
    }
    with Profiler() as profiler:
        try:
            if is_model_file(args.workload):
                _tune_model(args, target, kwargs)
                name, func = os.path.basename(args.workload), None
            else:
                wl = load_workload(args.workload)
                name, func = wl.name, wl.func
                _say_resume(args.work_dir)
                # one function named after the workload: the task and its logs get the name
                tune_tir(IRModule({name: func}), target, args.work_dir, args.trials, **kwargs)
        finally:
            _write_profile(args.work_dir, profiler)
    _summary(args.work_dir, name, func)
    return 0


def _callbacks(work_dir: str):
    return [MeasureLog(work_dir), *MeasureCallback.create("default")]


def _runner(args: argparse.Namespace):
    if args.runner == "local":
        if args.rpc_address or args.rpc_key:
            raise CLIError("--rpc-address and --rpc-key need --runner rpc", usage=True)
        return "local"
    if not args.rpc_address or not args.rpc_key:
        raise CLIError("--runner rpc needs --rpc-address HOST:PORT and --rpc-key KEY", usage=True)
    host, _, port = args.rpc_address.rpartition(":")
    if not host or not port.isdigit():
        raise CLIError(
            f"--rpc-address {args.rpc_address!r}: expected HOST:PORT, e.g. 127.0.0.1:8786",
            usage=True,
        )
    config = RPCConfig(tracker_host=host, tracker_port=int(port), tracker_key=args.rpc_key)
    return RPCRunner(rpc_config=config)


def _tune_model(args: argparse.Namespace, target, kwargs: dict) -> None:
    if not os.path.isfile(args.workload):
        raise CLIError(f"{args.workload}: no such model file")
    _say_resume(args.work_dir)
    kwargs = dict(kwargs)
    kwargs.pop("num_tuning_cores", None)
    tune_relax(from_onnx(args.workload), None, target, args.work_dir, args.trials, **kwargs)


def _say_resume(work_dir: str) -> None:
    path = os.path.join(work_dir, TUNING_RECORD_FILE)
    if os.path.isfile(path) and os.path.getsize(path) > 0:
        with open(path, "rb") as f:
            lines = sum(1 for line in f if line.strip())
        print(
            f"Resuming: {work_dir} holds {lines} record(s); they are kept and not measured again.",
            flush=True,
        )


def _write_profile(work_dir: str, profiler) -> None:
    """Append this run's Profiler split to ``logs/profile.json``, atomically: a new file
    (a fresh name, never one that might be planted) flushed to disk, then moved over."""
    path = os.path.join(work_dir, "logs", PROFILE_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    runs = []
    if os.path.isfile(path):
        try:
            with open(path) as f:
                runs = list(json.load(f).get("runs", []))
        except (OSError, ValueError, AttributeError, TypeError, RecursionError):
            runs = []
    runs.append(profiler.get())
    fd, tmp = tempfile.mkstemp(prefix=".profile-", suffix=".json", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"runs": runs}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _summary(work_dir: str, name: str, func) -> None:
    db = JSONDatabase(work_dir=work_dir)
    try:
        lines = [f"Records: {len(db)} in {work_dir}"]
        if func is not None:
            mod = IRModule({"main": func})
            best = db.query_tuning_record(mod)
            if best is None:
                lines.append(f"{name}: no valid measurement yet")
            else:
                secs = best.mean_run_sec
                gflops = estimate_flops(mod) / secs / 1e9 if secs > 0 else math.inf
                lines.append(
                    f"{name}: best {secs * 1e6:.2f} us ({gflops:.2f} GFLOPS) over all records"
                )
    finally:
        db.close()
    lines.append(
        f"Next: metaschedule show {work_dir}   |   metaschedule report {work_dir} -o "
        f"{os.path.join(work_dir, 'report.html')}"
    )
    print("\n".join(lines), flush=True)
