"""Golden C for three canonical kernels, so that code-generation changes show in review.

The kernels are scheduled the way tuning would (parallel, vectorized, unrolled loops) and
generated for a fully specified target, so the text does not depend on this machine.
After an intended change to the C back end, regenerate the files and review the diff:

    python -m pytest tests/codegen/test_golden.py --update-golden
"""

from __future__ import annotations

from pathlib import Path

import pytest

from metaschedule import te, tir
from metaschedule.codegen import codegen_c
from metaschedule.target import Target
from metaschedule.testing import op_matmul
from metaschedule.testing.schedules import matmul_schedule
from metaschedule.tir.transform import lower

GOLDEN = Path(__file__).parent / "golden"
#: every field given: nothing comes from the host
TARGET = Target(
    "llvm -mcpu=skylake -num-cores=4 -vector_width=32 -cache_line_bytes=64 "
    "-l1_cache_bytes=32768 -l2_cache_bytes=1048576 -l3_cache_bytes=33554432"
)


def matmul() -> tir.Schedule:
    sch = tir.Schedule(op_matmul(64, 64, 64))
    return matmul_schedule(sch, TARGET, rows=4, vectors=2, row_block=32, col_block=32)


def reduction() -> tir.Schedule:
    """Row sums: parallel rows, the reduction split and its inner part unrolled."""
    X = te.placeholder((64, 256), "float32", "X")
    k = te.reduce_axis((0, 256), "k")
    S = te.compute((64,), lambda i: te.sum(X[i, k], axis=k), name="S")
    sch = tir.Schedule(te.create_prim_func([X, S]))
    i, kk = sch.get_loops(sch.get_block("S"))
    sch.parallel(i)
    _, k1 = sch.split(kk, [None, 8])
    sch.unroll(k1)
    return sch


def elementwise() -> tir.Schedule:
    """``max(x * 2 + 1, 0)``, parallel outer loop and vectorized inner loop."""
    X = te.placeholder((1024,), "float32", "X")
    Y = te.compute((1024,), lambda i: te.max(X[i] * 2.0 + 1.0, 0.0), name="Y")
    sch = tir.Schedule(te.create_prim_func([X, Y]))
    (i,) = sch.get_loops(sch.get_block("Y"))
    outer, inner = sch.split(i, [None, 64])
    sch.parallel(outer)
    sch.vectorize(inner)
    return sch


KERNELS = {"matmul": matmul, "reduction": reduction, "elementwise": elementwise}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_generated_c_matches_the_golden_file(name, request):
    code = codegen_c(lower(KERNELS[name]().mod["main"]), TARGET).code
    path = GOLDEN / f"{name}.c"
    if request.config.getoption("--update-golden"):
        path.write_text(code)
    assert path.exists(), f"{path} is missing; create it with --update-golden"
    assert code == path.read_text(), (
        f"the C generated for {name} changed; if that is intended, run "
        "`python -m pytest tests/codegen/test_golden.py --update-golden` and review the diff"
    )
