"""How well the cost models rank schedules they have not seen.

Samples N distinct random schedules of a workload from the default design space
(``PostOrderApply`` with the llvm rules, each design-space trace replayed with fresh
decisions and post-processed, as ``ReplayTrace`` does), builds them with ``LocalBuilder``
and measures them with ``LocalRunner``. Then, over several random 80/20 splits, trains
``XGBModel``, ``MLPModel`` and ``RandomModel`` (the baseline) on the 80% and scores the
held-out 20%:

* Spearman's rank correlation between the prediction and the measured throughput
  (``1 / seconds``) of the held-out candidates that ran;
* top-k recall: how many of the k truly fastest held-out candidates are among the k the
  model ranks highest (k = 10% of the held-out set, at least 1);
* best-of-top-k: the speed of the fastest of the model's top k, relative to the fastest
  held-out candidate (1.0: the model's top k contains the best one).

Prints a table and writes ``benchmarks/results/cost_model_rank.json``; the measured data
(traces and run times) goes to ``benchmarks/results/cost_model_rank_data.json``, which
``--load-data`` reads back to rerun the model comparison without measuring again::

    python benchmarks/cost_model_rank.py --workload matmul-256 --n 200 --remeasure
    python benchmarks/cost_model_rank.py --load-data benchmarks/results/cost_model_rank_data.json

With ``--remeasure`` every schedule is measured twice and the second measurement is
scored as if it were a model ("re-measured"): the ceiling that measurement noise puts
on any model's ranking.

A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file
from tune_ops import parse_workload  # the workload names of tune_ops

DATA_DEFAULT = os.path.join(common.RESULTS_DIR, "cost_model_rank_data.json")
#: the pseudo-model scoring a second measurement of the same schedules (--remeasure)
REMEASURED = "re-measured"


# ----------------------------------------------------------------------------- sampling
def sample_schedules(func, target, n: int, seed: int) -> tuple[list[Any], dict[str, Any]]:
    """``n`` structurally distinct random schedules from the default design space, and
    how many spaces, draws and distinct schedules it took."""
    from metaschedule.testing.corpus import sample_schedules as sample

    stats: dict[str, Any] = {}
    return sample(func, target, n, seed, stats), stats


def measure(
    candidates: list[Any], target, repeat: int, batch: int = 32, config: Any = None
) -> list[Any]:
    """One RunnerResult per candidate (build failures become error results); ``config``
    (an ``EvaluatorConfig``) replaces the protocol below, ``repeat`` then unused."""
    from metaschedule.builder import BuilderInput, LocalBuilder
    from metaschedule.runner import EvaluatorConfig, LocalRunner, RunnerInput, RunnerResult

    config = config or EvaluatorConfig(number=3, repeat=repeat, min_repeat_ms=50)
    results: list[Any] = []
    with LocalBuilder() as builder, LocalRunner(evaluator_config=config) as runner:
        for start in range(0, len(candidates), batch):
            chunk = candidates[start : start + batch]
            built = builder.build([BuilderInput(c.sch.mod, target) for c in chunk])
            ok = [i for i, b in enumerate(built) if b.error_msg is None]
            futures = runner.run(
                [
                    RunnerInput(built[i].artifact_path, target.kind, list(chunk[i].args_info))
                    for i in ok
                ]
            )
            by_index = dict(zip(ok, futures))
            for i, b in enumerate(built):
                results.append(
                    by_index[i].result()
                    if i in by_index
                    else RunnerResult(None, f"build: {b.error_msg}")
                )
            for b in built:  # the artifacts are not needed once measured
                if b.artifact_path and os.path.exists(b.artifact_path):
                    os.unlink(b.artifact_path)
            print(f"  measured {len(results)}/{len(candidates)}", flush=True)
    return results


def save_data(path: str, workload: str, target, candidates, results, meta, again=None) -> None:
    rows = [
        {"trace": c.sch.trace.as_json(), "run_secs": r.run_secs, "error": r.error_msg}
        for c, r in zip(candidates, results)
    ]
    for row, r in zip(rows, again or []):
        row["run_secs_again"], row["error_again"] = r.run_secs, r.error_msg
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(
            {"workload": workload, "target": str(target), "meta": meta, "candidates": rows}, f
        )


def load_data(path: str):
    """Workload name, target string, candidates (traces replayed), results, meta, and
    the second measurements (None unless the data was measured with ``--remeasure``)."""
    from metaschedule.arg_info import ArgInfo
    from metaschedule.runner import RunnerResult
    from metaschedule.schedule import Schedule, Trace
    from metaschedule.search_strategy import MeasureCandidate
    from metaschedule.tir.function import IRModule

    with open(path) as f:
        data = json.load(f)
    func = parse_workload(data["workload"]).ms_func()
    mod = IRModule({"main": func})
    candidates, results, again = [], [], []
    for row in data["candidates"]:
        sch = Schedule(mod)
        Trace.from_json(row["trace"]).apply_to_schedule(sch, remove_postproc=False)
        candidates.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod)))
        results.append(RunnerResult(row["run_secs"], row["error"]))
        if "run_secs_again" in row:
            again.append(RunnerResult(row["run_secs_again"], row["error_again"]))
    return (
        data["workload"],
        data["target"],
        candidates,
        results,
        data.get("meta", {}),
        again if len(again) == len(results) else None,
    )


# ----------------------------------------------------------------------------- models
def cached_extractor():
    """Per-store features, computed once per candidate and shared by every model and
    split (the features do not depend on the model); counts the time spent."""
    from metaschedule.feature_extractor import PerStoreFeature, PyFeatureExtractor
    from metaschedule.utils import derived_object

    @derived_object
    class CachedFeatures(PyFeatureExtractor):
        def __init__(self):
            self.inner = PerStoreFeature()
            self.cache: dict[int, Any] = {}
            self.secs = 0.0
            self.extracted = 0

        def extract_from(self, context, candidates):
            todo = [c for c in candidates if id(c) not in self.cache]
            if todo:
                start = time.perf_counter()
                for c, feats in zip(todo, self.inner.extract_from(context, todo)):
                    self.cache[id(c)] = feats
                self.secs += time.perf_counter() - start
                self.extracted += len(todo)
            return [self.cache[id(c)] for c in candidates]

    return CachedFeatures()


def make_model(kind: str, extractor, seed: int):
    from metaschedule.cost_model import MLPModel, RandomModel, XGBModel

    if kind == "xgb":
        return XGBModel(extractor=extractor, num_warmup_samples=1, adaptive_training=False)
    if kind == "mlp":
        return MLPModel(
            extractor=extractor, num_warmup_samples=1, adaptive_training=False, seed=seed
        )
    if kind == "random":
        return RandomModel(seed=seed)
    raise ValueError(f"unknown model {kind!r}; expected xgb, mlp or random")


def score(pred, throughput, k: int) -> dict[str, float]:
    """Rank metrics of predictions against true throughputs (higher is better for both)."""
    import numpy as np

    from metaschedule.cost_model.metric import rank_correlation

    order_pred = np.argsort(-pred, kind="stable")[:k]
    order_true = np.argsort(-throughput, kind="stable")[:k]
    return {
        "spearman": rank_correlation(pred, throughput),
        "topk_recall": len(set(order_pred.tolist()) & set(order_true.tolist())) / k,
        "best_of_topk": float(throughput[order_pred].max() / throughput.max()),
    }


def evaluate(
    ctx,
    candidates,
    results,
    kinds,
    splits: int,
    train_frac: float,
    seed: int,
    extractor,
    again=None,
) -> dict[str, Any]:
    """Per model, the metrics of each split and their mean/std/min/max. With ``again``
    (a second measurement of every candidate), the row "re-measured" scores the second
    measurement as if it were a model's prediction: the ceiling that measurement noise
    puts on any model."""
    import numpy as np

    from metaschedule.cost_model.metric import costs_of

    costs = costs_of(results)
    if again is not None:
        costs_again = costs_of(again)
        kinds = [*kinds, REMEASURED]
    n = len(candidates)
    n_train = round(train_frac * n)
    per_model: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    for kind in kinds:  # untimed warm-up: library start-up is not the model's cost
        if kind != REMEASURED:
            make_model(kind, extractor, seed).update(ctx, candidates[:8], results[:8])
    for split in range(splits):
        perm = np.random.default_rng(seed + split).permutation(n)
        train, test = perm[:n_train], perm[n_train:]
        test = test[np.isfinite(costs[test])]  # rank among the held-out ones that ran
        if len(test) < 2:
            raise ValueError(f"split {split}: fewer than 2 held-out candidates ran")
        k = max(1, round(0.1 * len(test)))
        throughput = 1.0 / costs[test]
        for kind in kinds:
            if kind == REMEASURED:
                pred = np.where(np.isfinite(costs_again[test]), 1.0 / costs_again[test], 0.0)
                per_model[kind].append(
                    {
                        **score(pred, throughput, k),
                        "k": k,
                        "n_test": len(test),
                        "train_secs": 0.0,
                        "predict_secs": 0.0,
                    }
                )
                continue
            model = make_model(kind, extractor, seed + split)
            start = time.perf_counter()
            model.update(ctx, [candidates[i] for i in train], [results[i] for i in train])
            trained = time.perf_counter() - start
            start = time.perf_counter()
            pred = np.asarray(model.predict(ctx, [candidates[i] for i in test]), float)
            predicted = time.perf_counter() - start
            per_model[kind].append(
                {
                    **score(pred, throughput, k),
                    "k": k,
                    "n_test": len(test),
                    "train_secs": trained,
                    "predict_secs": predicted,
                }
            )
    summary = {}
    for kind, rows in per_model.items():
        summary[kind] = {"splits": rows}
        for metric in ("spearman", "topk_recall", "best_of_topk", "train_secs", "predict_secs"):
            values = np.array([r[metric] for r in rows])
            summary[kind][metric] = {
                "mean": float(values.mean()),
                "std": float(values.std()),
                "min": float(values.min()),
                "max": float(values.max()),
            }
    return summary


# ----------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="matmul-256", help="a workload name of tune_ops.py")
    p.add_argument("--n", type=int, default=200, help="distinct schedules to measure")
    p.add_argument("--splits", type=int, default=5, help="random train/test splits")
    p.add_argument("--train-frac", type=float, default=0.8)
    p.add_argument("--models", default="xgb,mlp,random")
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="measurements per candidate (each >= 50 ms; the mean is the cost)",
    )
    p.add_argument(
        "--remeasure",
        action="store_true",
        help="measure every schedule a second time and score that as a "
        "'model': the ceiling measurement noise puts on any model",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--num-cores",
        type=int,
        default=None,
        help="threads of the measured code (default: physical cores)",
    )
    p.add_argument("--save-data", default=DATA_DEFAULT, help="where the measured data goes")
    p.add_argument(
        "--load-data", default=None, help="reuse measured data (skips sampling and measuring)"
    )
    p.add_argument("--plain", action="store_true", help="plain-text tables (no rich)")
    p.add_argument(
        "--json", default=None, help="output path (default benchmarks/results/cost_model_rank.json)"
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from metaschedule.target import Target
    from metaschedule.tune_context import TuneContext

    args = parse_args(argv)
    kinds = [k.strip() for k in args.models.split(",") if k.strip()]
    info = common.machine_info()
    timings: dict[str, float] = {}
    if args.load_data:
        workload, target_str, candidates, results, meta, again = load_data(args.load_data)
        target = Target(target_str)
        print(f"loaded {len(candidates)} measured schedules of {workload} from {args.load_data}")
    else:
        workload = args.workload
        cores = args.num_cores or info["physical_cores"]
        target = Target(f"llvm -num-cores {cores}")
        func = parse_workload(workload).ms_func()
        print(f"sampling {args.n} schedules of {workload}", flush=True)
        start = time.perf_counter()
        candidates, meta = sample_schedules(func, target, args.n, args.seed)
        timings["sample_secs"] = time.perf_counter() - start
        print(
            f"  {meta['distinct']} distinct of {meta['drawn']} drawn in "
            f"{timings['sample_secs']:.1f} s; building and measuring",
            flush=True,
        )
        start = time.perf_counter()
        results = measure(candidates, target, args.repeat)
        timings["measure_secs"] = time.perf_counter() - start
        again = None
        if args.remeasure:
            print("  measuring again (--remeasure)", flush=True)
            start = time.perf_counter()
            again = measure(candidates, target, args.repeat)
            timings["remeasure_secs"] = time.perf_counter() - start
        save_data(args.save_data, workload, target, candidates, results, meta, again)
        print(f"  measured in {timings['measure_secs']:.1f} s; data: {args.save_data}")
    from metaschedule.cost_model.metric import costs_of
    from metaschedule.flop_count import estimate_flops

    wl = parse_workload(workload)
    flops = estimate_flops(wl.ms_func())
    costs = costs_of(results)
    ran = costs[np.isfinite(costs)]
    ctx = TuneContext(wl.ms_func(), target=target, task_name="rank")
    extractor = cached_extractor()
    summary = evaluate(
        ctx, candidates, results, kinds, args.splits, args.train_frac, args.seed, extractor, again
    )
    if again is not None:
        kinds = [*kinds, REMEASURED]
        both = np.isfinite(costs_of(results)) & np.isfinite(costs_of(again))
        from metaschedule.cost_model.metric import rank_correlation

        repeatability = rank_correlation(1.0 / costs_of(results)[both], 1.0 / costs_of(again)[both])
    spread = {"ran": len(ran), "failed": len(costs) - len(ran)}
    if len(ran):
        spread.update(
            {
                f"{q}_gflops": float(flops / np.percentile(ran, p) / 1e9)
                for q, p in (("best", 0), ("median", 50), ("worst", 100))
            }
        )

    for line in common.machine_lines(info):
        print(line)
    rows = []
    for kind in kinds:
        s = summary[kind]
        rows.append(
            [
                kind,
                *(
                    f"{s[m]['mean']:.3f} ± {s[m]['std']:.3f}"
                    for m in ("spearman", "topk_recall", "best_of_topk")
                ),
                f"{s['spearman']['min']:.3f} .. {s['spearman']['max']:.3f}",
                f"{1e3 * s['train_secs']['mean']:.0f}",
                f"{1e3 * s['predict_secs']['mean']:.0f}",
            ]
        )
    first = summary[kinds[0]]["splits"][0]
    notes = [
        (
            f"{len(candidates)} distinct schedules of {workload} ({spread['ran']} ran, "
            f"{spread['failed']} failed to build or run); held-out per split: "
            f"{first['n_test']} that ran, k = {first['k']}; mean ± std over {args.splits} "
            f"random {args.train_frac:.0%}/{1 - args.train_frac:.0%} splits."
        ),
    ]
    if len(ran):
        notes.append(
            f"measured speeds: best {spread['best_gflops']:.1f}, median "
            f"{spread['median_gflops']:.1f}, worst {spread['worst_gflops']:.2f} "
            "GFLOPS"
        )
    notes.append(
        f"feature extraction: {extractor.extracted} candidates in "
        f"{extractor.secs:.1f} s ({1e3 * extractor.secs / max(1, extractor.extracted):.0f}"
        " ms each), once, shared by the models (not in the train/predict times)"
    )
    if timings:
        notes.append(
            f"sampling {timings['sample_secs']:.1f} s, building + measuring "
            f"{timings['measure_secs']:.1f} s"
            + (f", again {timings['remeasure_secs']:.1f} s" if "remeasure_secs" in timings else "")
        )
    if again is not None:
        notes.append(
            f"'{REMEASURED}': the second measurement of the same schedules used as "
            "the prediction (what measurement noise leaves for any model); over all "
            f"{int(both.sum())} schedules that ran twice, Spearman = "
            f"{repeatability:.3f}"
        )
    common.print_table(
        f"Cost-model ranking on held-out schedules of {workload}",
        [
            "model",
            "Spearman",
            "top-k recall",
            "best of top-k",
            "Spearman range",
            "train ms",
            "predict ms",
        ],
        rows,
        notes,
        plain=args.plain,
    )
    path = common.write_json(
        "cost_model_rank",
        {
            "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
            "machine": info,
            "workload": workload,
            "target": str(target),
            "n": len(candidates),
            "splits": args.splits,
            "train_frac": args.train_frac,
            "seed": args.seed,
            "repeat": args.repeat,
            "data": args.load_data or args.save_data,
            "sampling": meta,
            "timings": timings,
            "measured": spread,
            "feature_extraction": {"candidates": extractor.extracted, "secs": extractor.secs},
            "repeatability_spearman": repeatability if again is not None else None,
            "models": summary,
        },
        args.json,
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
