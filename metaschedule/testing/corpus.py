"""A synthetic corpus part: random schedules of small workloads with made-up run times.

For testing (and trying out) the pre-trained cost model, its training and the corpus
commands without measuring anything: :func:`synthetic_corpus` samples distinct random
schedules of each workload from the default design space (as ``benchmarks/corpus.py``
does) and gives each a run time that is a deterministic function of the scheduled
program, one the features see: the longer the innermost vectorised loop and the wider
the parallel loop, the faster, with a small jitter drawn from the trace. Nothing is
built or run, so a part of a hundred records takes a second::

    from metaschedule.cost_model.pretrained import train_pretrained
    from metaschedule.testing.corpus import synthetic_corpus

    synthetic_corpus("corpus/synthetic")
    summary = train_pretrained(["corpus/synthetic"], "model.tar", holdout=["matmul-24x24x8"])

The part is written with :func:`~metaschedule.cost_model.corpus.write_machine` (the
target's ISA on this host unless ``isa`` is given) and names its workloads in
``workload_names.json``, so they can be held out by name.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..codegen.isa import CpuIsa
from ..cost_model.corpus import CorpusPart, write_machine
from ..cost_model.pretrained import NAMES_FILE
from ..database import TuningRecord
from ..flop_count import estimate_flops
from ..runner import RunnerResult
from ..search_strategy import ReplayTrace
from ..space_generator import PostOrderApply
from ..target import Target
from ..tir.function import IRModule, PrimFunc
from ..tir.functor import post_order_visit
from ..tir.stmt import For, ForKind
from ..tir.structural import structural_hash
from ..tune_context import TuneContext
from .workloads import matmul

__all__ = [
    "SYNTHETIC_TARGET",
    "SYNTHETIC_WORKLOADS",
    "sample_schedules",
    "synthetic_corpus",
    "synthetic_records",
    "synthetic_run_secs",
]

#: the default workloads of :func:`synthetic_corpus`: small matmuls, by name
SYNTHETIC_WORKLOADS: dict[str, Callable[[], PrimFunc]] = {
    "matmul-16": lambda: matmul(16),
    "matmul-24x24x8": lambda: matmul(24, 24, 8),
    "matmul-32x16x16": lambda: matmul(32, 16, 16),
    "matmul-16x32x8": lambda: matmul(16, 32, 8),
    "matmul-8x24x32": lambda: matmul(8, 24, 32),
    "matmul-48x8x16": lambda: matmul(48, 8, 16),
}
#: the default target of :func:`synthetic_corpus`: a named CPU, so the schedules and
#: the ISA features are the same on every host
SYNTHETIC_TARGET = "llvm -mcpu=haswell -num-cores=4"


def sample_schedules(
    func: PrimFunc, target: Target | str, n: int, seed: int, stats: dict | None = None
) -> list[Any]:
    """Up to ``n`` structurally distinct random schedules (``MeasureCandidate``\\ s) of
    ``func`` from the default design space: each design-space trace replayed with fresh
    decisions and post-processed. ``stats``, when given, receives the number of design
    spaces, of schedules drawn and of distinct ones."""
    ctx = TuneContext(
        func,
        target=Target(target),
        space_generator=PostOrderApply(),
        search_strategy=ReplayTrace(),
        rand_state=seed,
        task_name="synthetic",
    )
    spaces = ctx.generate_design_space()
    ctx.pre_tuning(max_trials=20 * n, num_trials_per_iter=max(16, n // 2), design_spaces=spaces)
    seen: set[int] = set()
    out: list[Any] = []
    drawn = 0
    while len(out) < n:
        cands = ctx.generate_measure_candidates()
        if not cands:  # the budget is spent: fewer distinct schedules exist
            break
        drawn += len(cands)
        for c in cands:
            h = structural_hash(c.sch.mod)
            if h not in seen and len(out) < n:
                seen.add(h)
                out.append(c)
        ctx.notify_runner_results(cands, [RunnerResult(None, "not measured")] * len(cands))
    ctx.post_tuning()
    if stats is not None:
        stats.update(design_spaces=len(spaces), drawn=drawn, distinct=len(out))
    return out


def synthetic_run_secs(sch: Any) -> float:
    """The made-up run time of a schedule: ``flop * 1e-10 / speed * jitter``, where
    ``speed = (1 + lanes) * (1 + log2(threads))`` with ``lanes`` the longest vectorised
    loop (at most 16) and ``threads`` the widest parallel loop (at most 8), and the
    jitter (within 3%) a hash of the trace: deterministic, and visible to the features
    but for the jitter."""
    func = sch.mod[next(iter(sch.mod))]
    widest = {ForKind.VECTORIZED: 1, ForKind.PARALLEL: 1}

    def visit(node: Any) -> None:
        if isinstance(node, For) and node.kind in widest:
            extent = getattr(node.extent, "value", 1)
            widest[node.kind] = max(widest[node.kind], int(extent))

    post_order_visit(func.body, visit)
    lanes = min(widest[ForKind.VECTORIZED], 16)
    threads = min(widest[ForKind.PARALLEL], 8)
    speed = (1 + lanes) * (1 + math.log2(threads))
    text = json.dumps(sch.trace.as_json(), sort_keys=True)
    unit = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    jitter = 1 + 0.03 * (2 * unit - 1)
    flop = max(1.0, float(estimate_flops(sch.mod)))
    return flop * 1e-10 / speed * jitter


def synthetic_records(
    db: Any, func: PrimFunc, target: Target | str, n: int = 24, seed: int = 0, fail_every: int = 0
) -> list[TuningRecord]:
    """Commit ``n`` random schedules of ``func`` to ``db`` with their
    :func:`synthetic_run_secs` (every ``fail_every``-th one as a failure, ``[1e10]``,
    when given); returns the records."""
    target = Target(target)
    workload = db.commit_workload(IRModule({"main": func}))
    records = []
    for i, cand in enumerate(sample_schedules(func, target, n, seed)):
        secs = synthetic_run_secs(cand.sch)
        run_secs = [1e10] if fail_every and i % fail_every == fail_every - 1 else [secs]
        record = TuningRecord(cand.sch.trace, workload, run_secs, target, list(cand.args_info))
        db.commit_tuning_record(record)
        records.append(record)
    return records


def synthetic_corpus(
    path: str,
    workloads: Mapping[str, Callable[[], PrimFunc]] | None = None,
    *,
    n: int = 24,
    target: Target | str = SYNTHETIC_TARGET,
    isa: CpuIsa | None = None,
    seed: int = 0,
) -> CorpusPart:
    """Write a synthetic corpus part to the folder ``path`` (module docstring).

    Args:
        path: the part's folder (created; records already there are kept).
        workloads: name -> a function returning the PrimFunc (default:
            :data:`SYNTHETIC_WORKLOADS`).
        n: schedules per workload (fewer where the design space has fewer).
        target: the target the records name, and whose ISA the part records (default:
            :data:`SYNTHETIC_TARGET`).
        isa: the part's ISA (default: the target's on this host).
        seed: the sampling seed (workload ``i`` samples with ``seed + i``).

    Returns:
        the part.
    """
    workloads = SYNTHETIC_WORKLOADS if workloads is None else workloads
    part = write_machine(path, target, isa, source="metaschedule.testing.corpus")
    db = part.database()
    names_path = os.path.join(path, NAMES_FILE)
    names: dict[str, str] = {}
    if os.path.exists(names_path):
        with open(names_path) as f:
            names = json.load(f)
    try:
        for i, (name, make) in enumerate(workloads.items()):
            records = synthetic_records(db, make(), part.target, n, seed + i)
            if records:
                names[str(records[0].workload.shash)] = name
    finally:
        db.close()
    with open(names_path, "w") as f:
        json.dump(names, f, indent=1)
    return part
