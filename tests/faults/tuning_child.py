"""A tuner to interrupt: ``python tuning_child.py WORK_DIR TRIALS [N]``.

Tunes an NxN matmul (default 64) with a small evolutionary search and real
builds and measurements. After AddToDatabase commits a record, a spy callback appends
the record's schedule key to ``WORK_DIR/committed.log`` (fsync'ed), so a checker can
tell whether a record the tuner had committed was lost. Used by
``tests/faults/test_interrupt.py`` and ``benchmarks/kill_campaign.py``.
"""

import os
import sys

from metaschedule.measure_callback import AddToDatabase, MeasureCallback, RemoveBuildArtifact
from metaschedule.runner import EvaluatorConfig, LocalRunner
from metaschedule.search_strategy import EvolutionarySearch
from metaschedule.testing.tuning_records import matmul
from metaschedule.tir.structural import structural_hash
from metaschedule.tir_integration import tune_tir

COMMITTED_LOG = "committed.log"


def template(sch):
    """Three sampled tilings: a space of thousands of distinct schedules."""
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1, i2 = sch.split(i, sch.sample_perfect_tile(i, n=3))
    j0, j1, j2 = sch.split(j, sch.sample_perfect_tile(j, n=3, max_innermost_factor=16))
    k0, k1 = sch.split(k, sch.sample_perfect_tile(k, n=2))
    sch.reorder(i0, j0, i1, j1, k0, i2, k1, j2)


def schedule_key(sch) -> str:
    return str(structural_hash(sch.mod))


class CommitSpy(MeasureCallback):
    """Appends the key of each candidate after AddToDatabase committed it."""

    incremental = True

    def __init__(self, path: str):
        self.path = path

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
        with open(self.path, "a") as f:
            f.writelines(schedule_key(cand.sch) + "\n" for cand in measure_candidates)
            f.flush()
            os.fsync(f.fileno())


def main(work_dir: str, trials: int, n: int = 64) -> None:
    print("TUNING-START", flush=True)  # imports done: a signal now reaches tune_tir
    runner = LocalRunner(
        timeout_sec=30, evaluator_config=EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)
    )
    tune_tir(
        matmul(n),
        "cpu",
        work_dir,
        trials,
        num_trials_per_iter=8,
        space=template,
        strategy=EvolutionarySearch(population_size=16, init_min_unmeasured=4, genetic_num_iters=1),
        cost_model="random",
        runner=runner,
        task_scheduler="round-robin",
        measure_callbacks=[
            AddToDatabase(),
            CommitSpy(os.path.join(work_dir, COMMITTED_LOG)),
            RemoveBuildArtifact(),
        ],
    )
    runner.close()
    print("TUNING-DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *(int(a) for a in sys.argv[3:]))
