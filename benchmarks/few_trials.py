"""Few-trial tuning on held-out workloads: the latency after 8, 16, 32, 64 trials.

Per workload and seed, ``ms.tune_tir`` runs once per mode, with ``max(--budgets)``
trials: ``empty`` (``XGBModel(pretrained=False)``, the search as it was before the
pre-trained model) and ``pretrained`` (``XGBModel(pretrained=PATH)``). The best latency
after the first N trials is read from the run's JSON database (each schedule's first
record, in commit order; the mean of its ``run_secs``), for each N of ``--budgets``, and
set against a reference: the best of one ``--reference-trials`` run (512; pre-trained
when there is a model), or with ``--reference-trials 0`` the best of all runs. Batches
of ``--num-trials-per-iter`` (default: the gcd of the budgets), so the first N trials are
the batches a run of N trials would measure; the reference run takes 64 a batch, as
``tune_tir`` does by default. No final selection (``final_selection_top_k=0``): the
trials' own measurements are compared.

Before tuning, the pre-trained model's ranking of each workload with no measurement of
it: the Spearman correlation recorded at training (when the workload was held out of the
model's corpus), and measured here over ``--rank-n`` random schedules of the default space
(``cost_model_rank.sample_schedules``), beside the analytic prior's. The split is printed:
each corpus part's training workloads and the held-out list; a requested workload that
the model was trained on gets a loud warning (its figures are not held-out ones). With
``--tvm``, TVM MetaSchedule tunes each workload with ``--tvm-trials`` (64; ``tune_ops``'
child process), its best shown beside ours.

Runs are kept in ``--work-dir`` (default ``benchmarks/results/few_trials``), per workload:
``<mode>-s<seed>``, ``ref<trials>-<mode>``, ``tvm<trials>``, ``rank-n<N>-s<seed>.json``
(the measured random schedules), each tuning run's logs in its ``logs/``. A finished run
(its ``few_trials_run.json``) is reused, an unfinished one resumed by ``tune_tir``: a
killed benchmark, started again with the same options, goes on where it stopped::

    python benchmarks/few_trials.py --workloads c2s2,mmodd,lnorm --pretrained model.tar
    python benchmarks/few_trials.py --workloads c2d --budgets 8,16 --seeds 3 --tvm --plain

Prints a table per workload and the geometric means over workloads, and writes
``benchmarks/results/few_trials.json``. A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file
from cost_model_rank import load_data, measure, sample_schedules, save_data
from tune_ops import (
    WORKLOAD_SETS,
    best_so_far,
    first_measurements,
    parse_workload,
    tune_tvm,
    tvm_available,
)

MARKER = "few_trials_run.json"


# ----------------------------------------------------------------------------- runs
def trial_secs(run_dir: str) -> list[float | None]:
    """Each trial's mean run time in commit order (None: it failed)."""
    from metaschedule.database import JSONDatabase
    from metaschedule.database.base import is_valid_run_secs

    records = first_measurements(JSONDatabase(work_dir=run_dir).get_all_tuning_records())
    return [
        sum(r.run_secs) / len(r.run_secs) if is_valid_run_secs(r.run_secs) else None
        for r in records
    ]


def best_after(secs: list[float | None], n: int) -> float | None:
    valid = [s for s in secs[:n] if s is not None]
    return min(valid) if valid else None


def tune_run(job, run_dir: str, trials: int, per_iter: int, mode: str, seed: int) -> dict:
    """One ``tune_tir`` run in ``run_dir``: a finished one found there is reused (its first
    ``trials`` read), an unfinished or shorter one resumed (``tune_tir`` tunes the rest)."""
    import metaschedule as ms
    from metaschedule.cost_model import XGBModel

    spec = {
        "per_iter": per_iter,
        "mode": mode,
        "seed": seed,
        "pretrained": job.model_path if mode != "empty" else None,
        "model_trained": job.stamp if mode != "empty" else None,
    }
    marker, done = os.path.join(run_dir, MARKER), {"wall_secs": 0.0, "trials": 0}
    if os.path.exists(marker):
        with open(marker) as f:
            done = json.load(f)
        differ = {k: (done.get(k), v) for k, v in spec.items() if done.get(k) != v}
        if differ:
            raise SystemExit(
                f"{run_dir} holds a run made with other options (found, wanted: {differ}); "
                "remove it or pick another --work-dir"
            )
        if done["trials"] >= trials:
            print(f"   {run_dir}: finished run reused", flush=True)
            return {
                **done,
                "reused": True,
                "work_dir": run_dir,
                "secs": trial_secs(run_dir)[:trials],
            }
    resumed = os.path.exists(os.path.join(run_dir, "database_tuning_record.json"))
    print(f"   {run_dir}: {'resuming' if resumed else 'tuning'} {trials} trials", flush=True)
    start = time.perf_counter()
    ms.tune_tir(
        job.func,
        job.target,
        run_dir,
        trials,
        num_trials_per_iter=per_iter,
        cost_model=XGBModel(pretrained=spec["pretrained"] or False),
        seed=seed,
        final_selection_top_k=0,  # the trials are what is read; no re-measurement after
    )
    wall = done["wall_secs"] + time.perf_counter() - start
    resumed = resumed or bool(done.get("resumed"))
    done = {**spec, "trials": trials, "wall_secs": wall, "resumed": resumed}
    with open(marker, "w") as f:
        json.dump(done, f)
    return {**done, "reused": False, "work_dir": run_dir, "secs": trial_secs(run_dir)[:trials]}


# ----------------------------------------------------------------------------- split
def read_split(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """Per corpus part of the model: its workload names (hash -> name) as the part's
    ``workload_names.json`` has them now, and whether that file changed since training."""
    from metaschedule.cost_model.pretrained import NAMES_FILE

    trained = time.mktime(time.strptime(meta["trained"], "%Y-%m-%d %H:%M:%S"))
    out = []
    for part in meta.get("parts", []):
        path = os.path.join(part["path"], NAMES_FILE)
        names = None
        if os.path.exists(path):
            with open(path) as f:
                names = {str(k): str(v) for k, v in json.load(f).items()}
        changed = names is not None and os.path.getmtime(path) > trained + 1
        isa, samples = part["isa"]["name"], part.get("train")
        out.append(
            {
                "path": part["path"],
                "isa": isa,
                "names": names,
                "samples": samples,
                "changed_since_training": changed,
            }
        )
    return out


def held_out_status(name: str, func, split, held: set[str]) -> str:
    """'held out', 'not in the corpus', 'TRAINED ON' (the model saw it) or 'unknown'."""
    from metaschedule.database.base import Workload
    from metaschedule.tir.function import IRModule

    shash = str(Workload(IRModule({"main": func})).shash)
    if name in held:
        return "held out"
    status = "not in the corpus"
    for part in split:
        if part["names"] is None:
            status = "unknown (a part's workload_names.json is missing)"
        elif name in part["names"].values() or shash in part["names"]:
            seen = {part["names"].get(shash, name), name}
            if not seen & held:
                return f"TRAINED ON ({part['path']})"
            return "held out"
    return status


def split_lines(model_path: str, meta, split) -> list[str]:
    held = set(meta.get("held_out", []))
    lines = [
        f"model {model_path}: trained {meta['trained']} on {meta['samples']} samples, "
        f"{meta.get('held_out_samples', 0)} held out"
    ]
    for part in split:
        names = part["names"]
        train = sorted(set(names.values()) - held) if names is not None else ["?"]
        flag = (
            " (workload_names.json changed since training)"
            if part["changed_since_training"]
            else ""
        )
        lines.append(f"  part {part['path']} ({part['isa']}){flag}: trained on {', '.join(train)}")
    lines.append(f"  held out: {', '.join(sorted(held)) or 'none'}")
    return lines


# ----------------------------------------------------------------------------- rank
def rank_check(name: str, func, target, n: int, seed: int, model_path: str, wl_dir: str):
    """Spearman of the pre-trained model and of the analytic prior against measured
    throughput over ``n`` random schedules (measured once; kept in ``wl_dir``)."""
    import numpy as np

    from metaschedule.cost_model import XGBModel
    from metaschedule.cost_model.metric import costs_of
    from metaschedule.cost_model.pretrained import spearman
    from metaschedule.cost_model.prior import AnalyticPrior
    from metaschedule.runner import EvaluatorConfig
    from metaschedule.tir.function import IRModule

    path = os.path.join(wl_dir, f"rank-n{n}-s{seed}.json")
    if os.path.exists(path):
        _, _, candidates, results, _, _ = load_data(path)
        print(f"   rank: {n} measured schedules reused ({path})", flush=True)
    else:
        print(f"   rank: sampling and measuring {n} random schedules", flush=True)
        candidates, meta = sample_schedules(func, target, n, seed)
        config = EvaluatorConfig(number=1, repeat=3, min_repeat_ms=20, max_total_ms=500)
        results = measure(candidates, target, repeat=3, config=config)
        save_data(path, name, target, candidates, results, meta)
    costs = costs_of(results)
    ok = np.isfinite(costs) & (costs < 1e9)
    ctx = SimpleNamespace(mod=IRModule({"main": func}), target=target)
    out: dict[str, Any] = {"n": len(candidates), "ran": int(ok.sum())}
    for key, model in (("pretrained", XGBModel(pretrained=model_path)), ("prior", AnalyticPrior())):
        scores = np.asarray(model.predict(ctx, candidates), float)
        out[key] = spearman(scores[ok], 1.0 / costs[ok])
    return out


# ----------------------------------------------------------------------------- report
def ratio(ref: float | None, secs: float | None) -> float | None:
    return ref / secs if ref and secs else None


def geomean(xs) -> float | None:
    xs = [x for x in xs if x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def x_cell(r: float | None) -> str:
    return "n/a" if r is None else f"{r:.2f}x"


def goal_budget(budgets: list[int]) -> int:
    return 16 if 16 in budgets else budgets[0]


def workload_table(res: dict[str, Any], budgets: list[int], args) -> None:
    top, g = max(budgets), goal_budget(budgets)
    tvm_secs = (res.get("tvm") or {}).get("tuning_best_secs")
    cols = ["run", *(f"@{n}" for n in budgets), f"best us @{top}", "wall s"]
    cols += [f"TVM{args.tvm_trials}/ours@{g}"] if args.tvm else []
    rows = []
    for run in res["runs"]:
        row = [
            f"{run['mode']} s{run['seed']}",
            *(x_cell(run["ratio"][n]) for n in budgets),
            common.fmt(run["best"][top] and run["best"][top] * 1e6, 2),
            f"{run['wall_secs']:.0f}" + ("*" if run.get("resumed") else ""),
        ]
        rows.append(row + ([x_cell(ratio(tvm_secs, run["best"][g]))] if args.tvm else []))
    pad = [""] * (3 if args.tvm else 2)
    if len(args.seed_list) > 1:
        rows += [
            [f"{m} (geomean)", *(x_cell(res["geomean"][m][n]) for n in budgets), *pad]
            for m in args.modes
        ]
    t = res.get("tvm") or {}
    if args.tvm and t.get("curve_best_secs"):
        curve = t["curve_best_secs"]
        rows.append(
            [
                f"TVM {t.get('version')}",
                *(
                    x_cell(ratio(res["reference_secs"], curve[n - 1]) if n <= len(curve) else None)
                    for n in budgets
                ),
                common.fmt(tvm_secs and tvm_secs * 1e6, 2),
                f"{t['wall_secs']:.0f}",
                "",
            ]
        )
    ref = res["reference"]
    notes = [
        f"cells: reference / best after N trials (1.00x: the reference reached); reference "
        f"{common.fmt(res['reference_secs'] and res['reference_secs'] * 1e6, 2)} us: {ref}",
        f"held-out status: {res['status']}",
    ]
    if any(run.get("resumed") for run in res["runs"]):
        notes.append(
            "*: a resumed run (interrupted, or extended to more trials): its search restarted "
            "from the records; after an interruption the wall time counts the last part only"
        )
    rank = res.get("rank") or {}
    if rank:
        notes.append(
            f"rank before measuring: pre-trained Spearman {common.fmt(rank.get('pretrained'), 2)}"
            f", analytic prior {common.fmt(rank.get('prior'), 2)} ({rank.get('ran')}/"
            f"{rank.get('n')} random schedules ran); at training: "
            f"{common.fmt(rank.get('at_training'), 2)}"
        )
    if t.get("error") or args.tvm_skipped:
        notes.append(f"TVM: {t.get('error') or args.tvm_skipped}")
    if "TRAINED ON" in res["status"]:
        notes.append(f"WARNING: the model was trained on {res['workload']}: NOT held out")
    common.print_table(
        f"{res['workload']}: speed after N trials", cols, rows, notes, plain=args.plain
    )


def geomean_table(results, budgets: list[int], args) -> dict[str, dict[int, float | None]]:
    out = {
        m: {n: geomean(r["geomean"][m][n] for r in results) for n in budgets} for m in args.modes
    }
    rows = [[m, *(x_cell(out[m][n]) for n in budgets)] for m in args.modes]
    notes = [f"geometric mean over {len(results)} workload(s) of reference / best after N"]
    if 16 in budgets:
        notes[0] += "; goal (issue 37): pretrained @16 >= 0.95x on held-out workloads"
    spear = [
        f"{r['workload']} {common.fmt(r['rank']['pretrained'], 2)}"
        for r in results
        if r.get("rank")
    ]
    if spear:
        notes.append(f"pre-trained Spearman before measuring: {', '.join(spear)} (goal >= 0.8)")
    trained = [r["workload"] for r in results if "TRAINED ON" in r["status"]]
    if trained:
        notes.append(f"WARNING: not held out (the model was trained on them): {', '.join(trained)}")
    common.print_table(
        "All workloads (geomean)",
        ["mode", *(f"@{n}" for n in budgets)],
        rows,
        notes,
        plain=args.plain,
    )
    return out


# ----------------------------------------------------------------------------- main
def run_workload(name: str, args, target, model_path, meta, split) -> dict[str, Any]:
    func = parse_workload(name).ms_func()
    wl_dir = os.path.join(args.work_dir, name)
    held = set((meta or {}).get("held_out", []))
    status = held_out_status(name, func, split, held) if meta else "no pre-trained model"
    res: dict[str, Any] = {"workload": name, "status": status, "runs": []}
    print(f"== {name}: {status}", flush=True)
    if "TRAINED ON" in status:
        print(f"   WARNING: the model was trained on {name}: its figures are NOT held-out ones")
    if args.rank_n and model_path:
        res["rank"] = rank_check(
            name, func, target, args.rank_n, args.seed_list[0], model_path, wl_dir
        )
        at = [v for k, v in meta.get("held_out_spearman", {}).items() if k.split("@")[0] == name]
        res["rank"]["at_training"] = at[0] if at else None
    job = SimpleNamespace(
        func=func, target=target, model_path=model_path, stamp=(meta or {}).get("trained")
    )
    top = max(args.budget_list)
    for seed in args.seed_list:
        for mode in args.modes:
            run = tune_run(
                job, os.path.join(wl_dir, f"{mode}-s{seed}"), top, args.per_iter, mode, seed
            )
            run["best"] = {n: best_after(run["secs"], n) for n in args.budget_list}
            res["runs"].append(run)
    if args.reference_trials:
        mode = args.modes[-1]
        ref_dir = os.path.join(wl_dir, f"ref{args.reference_trials}-{mode}")
        ref = tune_run(job, ref_dir, args.reference_trials, 64, mode, args.seed_list[0])
        res["reference_secs"] = best_after(ref["secs"], len(ref["secs"]))
        res["reference"] = (
            f"{mode}, {args.reference_trials} trials, 64 a batch "
            f"({len(ref['secs'])} run, {ref['wall_secs']:.0f} s)"
        )
        res["reference_run"] = {k: v for k, v in ref.items() if k != "secs"}
    else:
        bests = [best_after(r["secs"], len(r["secs"])) for r in res["runs"]]
        res["reference_secs"] = min((b for b in bests if b), default=None)
        res["reference"] = "the best of all runs above (--reference-trials 0)"
    for run in res["runs"]:
        run["ratio"] = {n: ratio(res["reference_secs"], run["best"][n]) for n in args.budget_list}
    res["geomean"] = {
        m: {
            n: geomean(r["ratio"][n] for r in res["runs"] if r["mode"] == m)
            for n in args.budget_list
        }
        for m in args.modes
    }
    if args.tvm and not args.tvm_skipped:
        tvm_dir = os.path.join(wl_dir, f"tvm{args.tvm_trials}")
        done = os.path.join(tvm_dir, "tvm_result.json")
        if os.path.exists(done):
            print(f"   {tvm_dir}: finished TVM run reused", flush=True)
            with open(done) as f:
                res["tvm"] = json.load(f)
        else:
            print(f"   {tvm_dir}: TVM, {args.tvm_trials} trials", flush=True)
            mcpu = None if target.mcpu == "native" else str(target.mcpu)
            wl, seed = parse_workload(name), args.seed_list[0]
            res["tvm"] = tune_tvm(
                wl, args.tvm_trials, 64, tvm_dir, args.cores, seed, args.tvm_timeout, mcpu=mcpu
            )
    for run in res["runs"]:  # the best after each trial, for the JSON
        run["curve_best_secs"] = best_so_far(run.pop("secs"))
    return res


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default="c2s2,mmodd,lnorm", help="names as in tune_ops.py")
    p.add_argument("--budgets", default="8,16,32,64", help="trial counts to read the best at")
    p.add_argument("--reference-trials", type=int, default=512, help="0: best of all runs")
    p.add_argument("--pretrained", default=None, help="model file (default: XGBModel's own)")
    p.add_argument("--seeds", type=int, default=1, help="runs per mode (seeds 0..N-1)")
    p.add_argument("--num-trials-per-iter", type=int, default=None, help="default: gcd(budgets)")
    p.add_argument("--rank-n", type=int, default=48, help="random schedules for the rank check")
    p.add_argument("--num-cores", type=int, default=None)
    p.add_argument("--target", default="llvm")
    p.add_argument("--tvm", action="store_true", help="also TVM MetaSchedule (tune_ops' child)")
    p.add_argument("--tvm-trials", type=int, default=64)
    p.add_argument("--tvm-timeout", type=float, default=1800)
    p.add_argument("--work-dir", default=os.path.join(common.RESULTS_DIR, "few_trials"))
    p.add_argument("--plain", action="store_true", help="plain-text tables")
    p.add_argument("--json", default=None, help="default benchmarks/results/few_trials.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from metaschedule.cost_model.pretrained import default_path, load_pretrained
    from metaschedule.target import Target

    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    names = [n for w in names for n in WORKLOAD_SETS.get(w, [w])]
    for n in names:
        parse_workload(n)  # a bad name fails before anything runs
    args.budget_list = sorted({int(b) for b in args.budgets.split(",")})
    args.seed_list = list(range(args.seeds))
    args.per_iter = args.num_trials_per_iter or min(64, math.gcd(*args.budget_list))
    model_path = args.pretrained or default_path()
    meta = load_pretrained(model_path).meta if model_path else None
    args.modes = ["empty", "pretrained"] if model_path else ["empty"]
    split = read_split(meta) if meta else []
    info = common.machine_info()
    args.cores = args.num_cores or info["physical_cores"]
    target = Target(f"{args.target} -num-cores {args.cores}")
    args.tvm_skipped = tvm_available() if args.tvm else None
    head = split_lines(model_path, meta, split) if meta else ["no pre-trained model: empty only"]
    head.append(
        f"budgets {args.budget_list}, {args.per_iter} trials a batch, seeds "
        f"{args.seed_list}, target {target}, work dir {args.work_dir}"
    )
    if any(n % args.per_iter for n in args.budget_list):
        head.append(f"note: a budget not a multiple of {args.per_iter} ends inside a batch")
    print("\n".join(head), flush=True)
    results = []
    payload: dict[str, Any] = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "machine": info,
        "target": str(target),
        "budgets": args.budget_list,
        "per_iter": args.per_iter,
        "reference_trials": args.reference_trials,
        "pretrained": model_path,
        "split": split,
        "tvm_skipped": args.tvm_skipped,
        "model_meta": {k: v for k, v in (meta or {}).items() if k != "extractor"},
    }
    for name in names:
        results.append(run_workload(name, args, target, model_path, meta, split))
        common.write_json(
            "few_trials", {**payload, "complete": False, "results": results}, args.json
        )
    print()
    print("\n".join(head + common.machine_lines(info)))
    for res in results:
        workload_table(res, args.budget_list, args)
    payload["geomean"] = geomean_table(results, args.budget_list, args)
    path = common.write_json(
        "few_trials", {**payload, "complete": True, "results": results}, args.json
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
