"""The auto-unroll budget counts register-sized vector statements, not loop iterations:
GCC's time grows with what it has to unroll, which on a narrower ISA is more statements
for the same loop (issue 32: cold builds under 2 s on AVX2 as on AVX-512)."""

from __future__ import annotations

import pytest

from metaschedule import te
from metaschedule.codegen import codegen_c
from metaschedule.codegen.c_codegen import AUTO_UNROLL_PIECES, AUTO_UNROLL_STEPS
from metaschedule.codegen.c_ir import steps, vector_pieces
from metaschedule.target import Target
from metaschedule.tir import IRModule, Schedule
from metaschedule.tir.stmt import For, ForKind
from metaschedule.tir.transform import lower


def _rows(rows: int, lanes: int, dtype: str = "float32") -> Schedule:
    """``B = A + 1`` over ``rows`` x ``lanes``, the rows under ``pragma_auto_unroll_max_step``
    = 64 and the lanes vectorized."""
    A = te.placeholder((4, rows, lanes), dtype, name="A")
    B = te.compute((4, rows, lanes), lambda o, i, j: A[o, i, j] + A[o, i, j], name="B")
    sch = Schedule(te.create_prim_func([A, B]))
    o, _, j = sch.get_loops(sch.get_block("B"))
    sch.vectorize(j)
    sch.annotate(o, "pragma_auto_unroll_max_step", AUTO_UNROLL_STEPS)
    return sch


def _source(sch: Schedule, target: str) -> str:
    mod = IRModule({name: lower(f) for name, f in sch.mod.items()})
    src = codegen_c(mod, Target(target))
    return src if isinstance(src, str) else src.code


def _row_loop(sch: Schedule) -> For:
    """The lowered loop over the rows."""
    body = lower(sch.mod["main"]).body
    while not (
        isinstance(body, For)
        and body.body is not None
        and isinstance(body.body, For)
        and body.body.kind is ForKind.VECTORIZED
    ):
        body = body.body
    return body


@pytest.mark.parametrize(
    ("lanes", "dtype", "vector_bytes", "pieces"),
    [(64, "float32", 32, 8), (64, "float32", 64, 4), (8, "float32", 64, 1), (24, "float64", 64, 3)],
)
def test_vector_pieces_follow_the_register_width(lanes, dtype, vector_bytes, pieces):
    row = _row_loop(_rows(2, lanes, dtype)).body
    assert vector_pieces(row, vector_bytes) == pieces
    assert vector_pieces(row, None) == 1


def test_steps_count_register_sized_statements():
    loop = _row_loop(_rows(56, 64))
    assert steps(loop) == 56  # one statement per row, as before
    assert steps(loop, 32) == 56 * 8 > AUTO_UNROLL_PIECES  # AVX2: 8 floats a register
    assert steps(loop, 64) == 56 * 4 <= AUTO_UNROLL_PIECES  # AVX-512: 16


def test_wide_rows_are_unrolled_on_avx512_but_not_on_avx2():
    sch = _rows(56, 64)
    assert "#pragma GCC unroll 56" in _source(sch, "llvm -mcpu=x86-64-v4")
    assert "#pragma GCC unroll 56" not in _source(sch, "llvm -mcpu=haswell")
    # a loop within both budgets is unrolled on both
    narrow = _rows(16, 64)
    for target in ("llvm -mcpu=x86-64-v4", "llvm -mcpu=haswell"):
        assert "#pragma GCC unroll 16" in _source(narrow, target)


def test_the_budget_is_a_codegen_option():
    from metaschedule.codegen import CodegenOptions

    sch = _rows(56, 64)
    with CodegenOptions(auto_unroll_pieces=512).applied():
        assert "#pragma GCC unroll 56" in _source(sch, "llvm -mcpu=haswell")
    assert "#pragma GCC unroll 56" not in _source(sch, "llvm -mcpu=haswell")
