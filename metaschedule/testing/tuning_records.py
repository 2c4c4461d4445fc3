"""Small workloads and tuning records for database and measurement tests."""

from __future__ import annotations

from .. import te
from ..arg_info import ArgInfo
from ..database import TuningRecord, Workload
from ..schedule import Schedule
from ..target import Target
from ..tir.function import PrimFunc

__all__ = [
    "SEED_ANNOTATION",
    "make_record",
    "matmul",
    "matmul_relu",
    "record_schedule",
    "tiled_matmul_schedule",
]

#: the block annotation that makes :func:`make_record`'s schedules differ by seed
SEED_ANNOTATION = "testing.record_seed"


def matmul(
    n: int = 16, m: int | None = None, k: int | None = None, dtype: str = "float32"
) -> PrimFunc:
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` with A of shape (n, k) and B of shape (k, m)."""
    m = n if m is None else m
    k = n if k is None else k
    a = te.placeholder((n, k), dtype, name="A")
    b = te.placeholder((k, m), dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def matmul_relu(n: int = 16) -> PrimFunc:
    """A matmul followed by a ReLU: its anchor block is the matmul."""
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    r = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    d = te.compute((n, n), lambda i, j: te.max(c[i, j], te.const(0.0, "float32")), name="D")
    return te.create_prim_func([a, b, d])


def tiled_matmul_schedule(func: PrimFunc, seed: int = 0) -> Schedule:
    """A schedule of a matmul-like ``func`` that splits the block's first loop by a
    sampled tile size: different seeds give different traces of the same design space."""
    sch = Schedule(func, seed=seed)
    block = sch.get_block("C")
    loop = sch.get_loops(block)[0]
    factors = sch.sample_perfect_tile(loop, n=2)
    sch.split(loop, factors)
    return sch


def record_schedule(func: PrimFunc, seed: int = 0) -> Schedule:
    """The schedule of :func:`make_record`: :func:`tiled_matmul_schedule`, with the seed
    as an annotation of block "C"."""
    sch = tiled_matmul_schedule(func, seed)
    sch.annotate(sch.get_block("C"), SEED_ANNOTATION, seed)
    return sch


def make_record(
    workload: Workload, run_secs: list[float] | None, seed: int = 0, target: str = "cpu"
) -> TuningRecord:
    """A record of ``workload`` (which must have a block "C") with the given run times.

    Its schedule is :func:`tiled_matmul_schedule` with ``seed``, whose block is annotated
    with ``seed`` too (:data:`SEED_ANNOTATION`): records of different seeds are always
    different schedules, which databases rank apart (records of one schedule count once).
    """
    sch = record_schedule(workload.mod["main"], seed)
    return TuningRecord(
        sch.trace, workload, run_secs, Target(target), ArgInfo.from_prim_func(workload.mod["main"])
    )
