"""C code generation: loop kinds, vector code, intrinsics; every kernel checked against numpy."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from metaschedule import te
from metaschedule.codegen import CodegenError, build, codegen_c
from metaschedule.codegen.c_helpers import c_literal
from metaschedule.target import Target
from metaschedule.testing import RandomArrays, build_and_run, matmul
from metaschedule.tir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferStore,
    For,
    ForKind,
    Mutator,
    PrimFunc,
    SeqStmt,
    Var,
    Visitor,
    const,
)
from metaschedule.tir.transform import lower

rand = RandomArrays(1)
CPU = Target("llvm -mcpu=x86-64-v4 -num-cores=2")  # AVX-512 (testing.isas)
CPU16 = Target({"kind": "cpu", "num_cores": 2, "vector_width": 16})  # sse/neon-sized


pytestmark = pytest.mark.usefixtures("session_kernel_cache")


# ----------------------------------------------------------------------------- helpers


def schedule_loops(func: PrimFunc, block: str, kinds=(), annotations=()) -> PrimFunc:
    """Set the kinds/annotations of the loops around ``block``, outermost first (None: keep)."""
    stack: list[Var] = []
    found: list[Var] = []

    class _Find(Visitor):
        def visit_For(self, f: For) -> None:
            stack.append(f.loop_var)
            self.visit(f.body)
            stack.pop()

        def visit_BlockRealize(self, r: BlockRealize) -> None:
            if r.block.name_hint == block:
                found.extend(stack)
            self.generic_visit(r)

    _Find().visit(func.body)
    assert found, f"no block {block}"
    kind_of = dict(zip(found, kinds))
    ann_of = dict(zip(found, annotations))

    class _Set(Mutator):
        def visit_For(self, f: For):
            f = self.generic_visit(f)
            changes = {}
            if kind_of.get(f.loop_var) is not None:
                changes["kind"] = kind_of[f.loop_var]
            if ann_of.get(f.loop_var):
                changes["annotations"] = {**f.annotations, **ann_of[f.loop_var]}
            return dataclasses.replace(f, **changes) if changes else f

    return func.with_body(_Set().visit(func.body))


V, P, U = ForKind.VECTORIZED, ForKind.PARALLEL, ForKind.UNROLLED


# ----------------------------------------------------------------------------- no compiler


def test_literals_are_exact_and_typed():
    assert c_literal(0.1, "float32") == "0.10000000149011612f"
    assert c_literal(float("-inf"), "float32") == "(-INFINITY)"
    assert c_literal(float("nan"), "float64") == "((double)NAN)"
    assert c_literal(-(2**31), "int32") == "(-2147483647 - 1)"
    assert c_literal(5, "int64") == "5LL"
    assert c_literal(True, "bool") == "1"
    assert c_literal(1.5, "float16") == "((_Float16)1.5f)"


def test_loop_names_are_unique_and_not_c_keywords():
    A = te.placeholder((4, 4), name="int")
    B = te.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="for")
    C = te.compute((4, 4), lambda i, j: B[i, j] * 2.0, name="C")
    code = codegen_c(lower(te.create_prim_func([A, C])), CPU).code
    assert "float* restrict int_1 = (float*)args[0];" in code
    assert "for (int32_t i = 0;" in code and "for (int32_t i_1 = 0;" in code
    assert "int32_t main_kernel(void** args)" in code


def test_thread_binding_is_rejected_on_cpu():
    A = te.placeholder((32,), name="A")
    B = te.compute((32,), lambda i: A[i] * 2.0, name="B")
    func = te.create_prim_func([A, B])

    class _Bind(Mutator):
        def visit_For(self, f):
            return dataclasses.replace(f, kind=ForKind.THREAD_BINDING, thread_binding="threadIdx.x")

    func = func.with_body(_Bind().visit(func.body))
    with pytest.raises(CodegenError, match="bind is for GPU targets"):
        codegen_c(lower(func), CPU)


def test_codegen_rejects_unlowered_and_non_cpu():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    func = te.create_prim_func([A, B])
    with pytest.raises(CodegenError, match="lower it first"):
        codegen_c(func, CPU)
    with pytest.raises(CodegenError, match="cpu targets"):
        codegen_c(lower(func), "cuda")


# ----------------------------------------------------------------------------- parallel


@pytest.mark.compiler
def test_parallel_outermost_loop_becomes_one_omp_region():
    A = te.placeholder((32, 16), name="A")
    B = te.compute((32, 16), lambda i, j: A[i, j] * 3.0 + 1.0, name="B")
    func = schedule_loops(te.create_prim_func([A, B]), "B", [P, P])
    a = rand(32, 16)
    src, (_, b) = build_and_run(func, a, np.zeros_like(a), target=CPU)
    assert len(re.findall(r"#pragma omp parallel for num_threads\(ms_team\(\d+, 2\)\)", src)) == 1
    assert "nested in a parallel region" in src
    np.testing.assert_allclose(b, a * 3 + 1, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- vectorize


def elementwise(n: int, m: int, dtype: str = "float32"):
    A = te.placeholder((n, m), dtype, name="A")
    B = te.placeholder((m,), dtype, name="B")
    C = te.compute((n, m), lambda i, j: te.max(A[i, j] * B[j] + A[i, 0], B[j]), name="C")
    return te.create_prim_func([A, B, C])


@pytest.mark.compiler
@pytest.mark.parametrize("m", [16, 100, 7])
def test_vectorized_loop_emits_vector_code(m):
    func = schedule_loops(elementwise(5, m), "C", [None, V])
    a, b = rand(5, m), rand(m)
    src, (_, _, c) = build_and_run(func, a, b, np.zeros((5, m), "float32"), target=CPU)
    assert "__attribute__((vector_size(" in src and "not vectorized" not in src
    assert re.search(r"ms_store_f32x\d+\(&C\[", src)
    assert "ms_bcast_f32x" in src  # A[i, 0] is loop-invariant: broadcast
    if m == 100:  # six 16-lane chunks in a loop, then a 4-lane tail
        assert "j += 16" in src and "ms_store_f32x4(" in src
    np.testing.assert_allclose(c, np.maximum(a * b + a[:, :1], b), rtol=1e-5, atol=1e-6)


@pytest.mark.compiler
@pytest.mark.parametrize("dtype", ["float64", "float16", "int32", "int8"])
def test_vectorized_dtypes(dtype):
    func = schedule_loops(elementwise(3, 40, dtype), "C", [None, V])
    if dtype.startswith("int"):
        a = rand.rng.integers(-9, 9, (3, 40)).astype(dtype)
        b = rand.rng.integers(-9, 9, (40,)).astype(dtype)
    else:
        a, b = rand(3, 40, dtype=dtype), rand(40, dtype=dtype)
    src, (_, _, c) = build_and_run(func, a, b, np.zeros((3, 40), dtype), target=CPU)
    assert "vector_size(" in src and "not vectorized" not in src
    ref = np.maximum(a * b + a[:, :1], b)
    np.testing.assert_allclose(
        c.astype("float64"), ref.astype("float64"), rtol=1e-2 if dtype == "float16" else 1e-6
    )


@pytest.mark.compiler
def test_vectorized_math_select_and_casts():
    n = 37
    A = te.placeholder((n,), name="A")
    B = te.compute(
        (n,),
        lambda i: te.if_then_else(
            i < 20,
            te.sigmoid(A[i]) + te.rsqrt(te.fabs(A[i]) + 1.0),
            te.exp(A[i]) * i.astype("float32"),
        ),
        name="B",
    )
    C = te.compute(
        (n,),
        lambda i: (B[i] > 0.5).astype("float32") + B[i].astype("int32").astype("float32"),
        name="C",
    )
    func = schedule_loops(schedule_loops(te.create_prim_func([A, C]), "B", [V]), "C", [V])
    a = rand(n)
    src, (_, c) = build_and_run(func, a, np.zeros(n, "float32"), target=CPU)
    assert "ms_select_f32x16(" in src and "ms_vsigmoid_f32x16(" in src
    assert "__builtin_convertvector(" in src and "not vectorized" not in src
    i = np.arange(n, dtype="float32")
    b = np.where(i < 20, 1 / (1 + np.exp(-a)) + 1 / np.sqrt(np.abs(a) + 1), np.exp(a) * i)
    np.testing.assert_allclose(c, (b > 0.5) + b.astype("int32"), rtol=1e-5, atol=1e-5)


@pytest.mark.compiler
def test_vectorized_masks_bools_and_invariant_selects():
    n = 23
    A = te.placeholder((n,), "float64", name="A")
    X = te.placeholder((n,), "int32", name="X")
    F = te.placeholder((n,), "bool", name="F")
    B = te.compute(
        (n,), lambda i: te.if_then_else(A[0] > 0, A[i], -A[i]) + i.astype("float64") / 2, name="B"
    )
    Q = te.compute((n,), lambda i: te.max(X[i], i // 2) + te.min(X[i], 3) + i % 3, name="Q")
    M = te.compute(
        (n,),
        lambda i: te.if_then_else(te.all(A[i] > 0, X[i] < 2), 1.0, 0.0).astype("float32"),
        name="M",
    )
    G = te.compute((n,), lambda i: te.any(F[i], A[i] > 1.0), name="G")
    func = te.create_prim_func([A, X, F, B, Q, M, G])
    for block in "BQMG":
        func = schedule_loops(func, block, [V])
    a, x = rand(n, dtype="float64"), rand.rng.integers(-5, 5, n).astype("int32")
    f = rand.rng.random(n) > 0.5
    outs = [np.zeros(n), np.zeros(n, "int32"), np.zeros(n, "float32"), np.zeros(n, bool)]
    src, (*_, b, q, m, g) = build_and_run(func, a, x, f, *outs, target=CPU)
    assert "not vectorized" not in src and src.count("__builtin_convertvector(") >= 2
    i = np.arange(n)
    np.testing.assert_allclose(b, np.where(a[0] > 0, a, -a) + i / 2, rtol=1e-12)
    np.testing.assert_array_equal(q, np.maximum(x, i // 2) + np.minimum(x, 3) + i % 3)
    np.testing.assert_array_equal(m, ((a > 0) & (x < 2)).astype("float32"))
    np.testing.assert_array_equal(g, f | (a > 1))


@pytest.mark.compiler
def test_vectorize_gathers_strided_loads_and_falls_back_for_reduction():
    n = 24
    A = te.placeholder((n, 2 * n), name="A")
    G = te.compute((n, n), lambda i, j: A[i, 2 * j] + 1.0, name="G")  # stride 2: gathered
    k = te.reduce_axis((0, n), name="k")
    S = te.compute((n,), lambda i: te.sum(G[i, k], axis=k), name="S")
    func = te.create_prim_func([A, S])
    func = schedule_loops(schedule_loops(func, "G", [None, V]), "S", [None, V])
    a = rand(n, 2 * n)
    src, (_, s) = build_and_run(func, a, np.zeros(n, "float32"), target=CPU)
    assert "j: not vectorized" not in src and "ms_p[2], ms_p[4]" in src
    assert "k: not vectorized (every lane would store the same element of S)" in src
    assert src.count("#pragma GCC ivdep") == 0  # the reduction's iterations depend
    np.testing.assert_allclose(s, (a[:, ::2] + 1).sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.compiler
def test_vectorize_padding_select_stays_in_bounds():
    n = 33
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(i >= 1, A[i - 1], 0.0) + A[i], name="B")
    func = schedule_loops(te.create_prim_func([A, B]), "B", [V])
    a = rand(n)
    src, (_, b) = build_and_run(func, a, np.zeros(n, "float32"), target=CPU)
    assert "not vectorized (a select with a lane-dependent condition guards loads" in src
    np.testing.assert_allclose(b, np.concatenate([[0], a[:-1]]) + a, rtol=1e-5, atol=1e-6)


@pytest.mark.compiler
def test_vector_width_follows_target():
    func = schedule_loops(elementwise(2, 32), "C", [None, V])
    src = codegen_c(lower(func), CPU16).code
    assert "ms_f32x4 __attribute__((vector_size(16)))" in src and "ms_f32x16" not in src
    a, b = rand(2, 32), rand(32)
    _, (_, _, c) = build_and_run(func, a, b, np.zeros((2, 32), "float32"), target=CPU16)
    np.testing.assert_allclose(c, np.maximum(a * b + a[:, :1], b), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- unroll


@pytest.mark.compiler
def test_unrolled_loop_gets_pragma():
    func = schedule_loops(matmul(6, 4, 5), "C", [None, None, U])
    a, b = rand(6, 5), rand(5, 4)
    src, (_, _, c) = build_and_run(func, a, b, np.zeros((6, 4), "float32"), target=CPU)
    assert "#pragma GCC unroll 5\n" in src
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.compiler
def test_auto_unroll_max_step_unrolls_small_inner_nests():
    func = schedule_loops(matmul(6, 4, 5), "C", annotations=[{"pragma_auto_unroll_max_step": 40}])
    a, b = rand(6, 5), rand(5, 4)
    src, (_, _, c) = build_and_run(func, a, b, np.zeros((6, 4), "float32"), target=CPU)
    # a k iteration is 2 steps (guarded init, update): the k loop is 10 steps, the j loop
    # 40: both fit in 40; the i loop (240 steps) does not
    assert "#pragma GCC unroll 4\n" in src and "#pragma GCC unroll 5\n" in src
    assert "#pragma GCC unroll 6" not in src
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.compiler
def test_unroll_explicit_replicates_the_body():
    ann = {"pragma_auto_unroll_max_step": 64, "pragma_unroll_explicit": 1}
    func = schedule_loops(matmul(6, 4, 5), "C", annotations=[ann])
    a, b = rand(6, 5), rand(5, 4)
    src, (_, _, c) = build_and_run(func, a, b, np.zeros((6, 4), "float32"), target=CPU)
    # the k loop (5 steps) is replicated; the j loop around it (20 steps, over
    # EXPLICIT_UNROLL_STEPS) gets a pragma instead of 4 more copies in the source
    assert src.count("{ const int32_t k = ") == 5 and "#pragma GCC unroll 4\n" in src
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- scalars


@pytest.mark.compiler
def test_intrinsics_by_dtype_and_floor_division():
    n = 16
    A = te.placeholder((n,), "float64", name="A")
    X = te.placeholder((n,), "int32", name="X")
    B = te.compute((n,), lambda i: te.exp(A[i]) + te.erf(A[i]) + te.round(A[i] * 4.0), name="B")
    Q = te.compute((n,), lambda i: te.floordiv(X[i], 3) * 100 + te.floormod(X[i], 3), name="Q")
    H = te.compute((n,), lambda i: te.tanh(A[i].astype("float16")), name="H")
    func = te.create_prim_func([A, X, B, Q, H])
    a = rand.rng.standard_normal(n)
    x = np.arange(-8, 8, dtype="int32")
    src, (_, _, b, q, h) = build_and_run(
        func, a, x, np.zeros(n), np.zeros(n, "int32"), np.zeros(n, "float16"), target=CPU
    )
    assert "exp(" in src and "expf(" not in src and "nearbyint(" in src
    assert "ms_floordiv_i32(" in src and "_Float16" in src
    from math import erf

    ref = np.exp(a) + np.array([erf(v) for v in a]) + np.round(a * 4)
    np.testing.assert_allclose(b, ref, rtol=1e-12)
    np.testing.assert_array_equal(q, (x // 3) * 100 + x % 3)
    np.testing.assert_allclose(h, np.tanh(a.astype("float16")), rtol=2e-3, atol=2e-3)


@pytest.mark.compiler
def test_bool_buffers_and_large_heap_allocation():
    n = 128
    A = te.placeholder((n, n), name="A")
    T = te.compute((n, n), lambda i, j: A[i, j] * 2.0, name="T")  # 64 KiB: on the heap
    M = te.compute((n, n), lambda i, j: T[i, j] > 0.0, name="M")
    func = te.create_prim_func([A, M])
    a = rand(n, n)
    src, (_, m) = build_and_run(func, a, np.zeros((n, n), bool), target=CPU)
    assert ", 65536);" in src and "if (!ms_ws_mine) free(T);" in src
    np.testing.assert_array_equal(m, a > 0)


def test_lowered_store_names_match_params():
    A = Buffer("A", (4,))
    i = Var("i")
    func = PrimFunc((A,), For(i, 0, 4, ForKind.SERIAL, BufferStore(A, const(1.0), (i,))))
    csrc = codegen_c(func, CPU)
    (fn,) = csrc.functions
    assert fn.params[0].name == "A" and fn.params[0].written and fn.params[0].shape == (4,)
    assert isinstance(func.body, For) and not isinstance(func.body, Block)


# ----------------------------------------------------------------------------- allocations


def test_broadcast_helper_is_one_initializer():
    """A lane-by-lane loop into a vector variable compiles to one masked insert per lane."""
    src = codegen_c(lower(schedule_loops(elementwise(4, 32), "C", [None, V])), CPU).code
    (helper,) = [ln for ln in src.splitlines() if "ms_bcast_f32x16(float x)" in ln]
    assert "return (ms_f32x16){x, x, x," in helper and "for" not in helper


def test_few_vector_chunks_are_written_out():
    src = codegen_c(lower(schedule_loops(elementwise(4, 32), "C", [None, V])), CPU).code
    assert "{ const int32_t j = 16;" in src and "j += 16" not in src


def _heap_in_loop(kind: ForKind, n: int = 128) -> PrimFunc:
    """for o: T = A * (o + 1) (64 KiB, allocated in the loop body); B[o] = sum(T[0, :])."""
    A, B = Buffer("A", (n, n)), Buffer("B", (4, n))
    T = Buffer("T", (n, n))
    o, i, j = Var("o"), Var("i"), Var("j")
    fill = For(
        i,
        0,
        n,
        ForKind.SERIAL,
        For(j, 0, n, ForKind.SERIAL, BufferStore(T, A[i, j] * (o + 1).astype("float32"), (i, j))),
    )
    use = For(j, 0, n, ForKind.SERIAL, BufferStore(B, T[o, j] + T[n - 1 - o, j], (o, j)))
    return PrimFunc((A, B), For(o, 0, 4, kind, Allocate(T, SeqStmt((fill, use)))))


@pytest.mark.compiler
@pytest.mark.parametrize("kind", [ForKind.SERIAL, P], ids=["serial", "parallel"])
def test_heap_allocations_are_hoisted_out_of_loops(kind):
    a = rand(128, 128)
    src, (_, b) = build_and_run(_heap_in_loop(kind), a, np.zeros((4, 128), "float32"), target=CPU)
    body = src[src.index("(void** args) {") :]
    # from the workspace kept between calls (a fresh allocation if it is in use)
    assert body.count(", 65536);") == 1 and body.count("if (!ms_ws_mine) free(T);") == 1
    alloc_at, loop_at = body.index("ms_ws_get("), body.index("for (int32_t o")
    assert alloc_at < loop_at  # allocated once, not once per iteration
    if kind is P:  # once per thread, in a parallel region around the omp for
        region = re.search(r"#pragma omp parallel num_threads\(ms_team\(\d+, 2\)\)\n", body).start()
        assert region < alloc_at < body.index("#pragma omp for schedule(static)") < loop_at
    expected = np.stack([(a[o] + a[127 - o]) * (o + 1) for o in range(4)])
    np.testing.assert_allclose(b, expected, rtol=1e-5, atol=1e-5)
    lib = build(_heap_in_loop(kind), CPU)
    for _ in range(3):  # later calls reuse the workspace: same numbers
        b2 = np.zeros((4, 128), "float32")
        lib(a, b2)
        np.testing.assert_allclose(b2, expected, rtol=1e-5, atol=1e-5)
    assert "__attribute__((destructor))" in src  # the workspace is freed on unload


# ------------------------------------------------------------------ no cliffs (issue 10/11)


def _tiled_matmul(transpose_b: bool, fused: bool, n: int = 32):
    from metaschedule import tir
    from metaschedule.te import ops

    a = te.placeholder((n, n), "float32", "A")
    b = te.placeholder((n, n), "float32", "B")
    sch = tir.Schedule(te.create_prim_func([a, b, ops.matmul(a, b, transpose_b=transpose_b)]))
    block = sch.get_block("T_matmul_NT" if transpose_b else "T_matmul_NN")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, k, i1, j1)
    if fused:
        sch.vectorize(sch.fuse(i1, j1))
    else:
        sch.vectorize(j1)
    return sch.mod["main"]


@pytest.mark.compiler
@pytest.mark.parametrize("transpose_b", [False, True])
def test_fused_then_vectorized_loop_keeps_vector_code(transpose_b):
    # RewriteParallelVectorizeUnroll fuses the innermost loops and vectorizes the result:
    # the body then indexes with v // 16 and v % 16, which must not fall back to scalars
    func = _tiled_matmul(transpose_b, fused=True)
    a, b = rand(32, 32), rand(32, 32)
    src, (_, _, c) = build_and_run(func, a, b, np.zeros((32, 32), "float32"), target=CPU)
    assert "not vectorized" not in src
    # split back into 16-lane vectors: in a loop, or as register accumulators (the k loop
    # directly around the fused loop keeps the output tile in variables)
    assert (
        "a fused loop, vectorized over its inner 16 iterations" in src
        or "accumulators of 16 lanes" in src
    )
    assert "ms_store_f32x16(" in src
    np.testing.assert_allclose(c, a @ (b.T if transpose_b else b), rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_transposed_operand_is_gathered_into_vectors():
    # B[j, k] vectorized over j has stride 32: gathered lanes, the rest stays vector code
    func = _tiled_matmul(True, fused=False)
    a, b = rand(32, 32), rand(32, 32)
    src, (_, _, c) = build_and_run(func, a, b, np.zeros((32, 32), "float32"), target=CPU)
    assert "not vectorized" not in src
    assert "ms_p[32]" in src and "ms_store_f32x16(" in src
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


@pytest.mark.compiler
def test_unroll_of_512_steps_gives_bounded_source():
    # an 8x8x8 nest under auto-unroll 512 with explicit unrolling: the source holds at
    # most EXPLICIT_UNROLL_STEPS copies of the body, the rest are compiler pragmas
    from metaschedule.codegen.c_codegen import EXPLICIT_UNROLL_STEPS

    a_t = te.placeholder((8, 8), "float32", "A")
    b_t = te.placeholder((8, 8), "float32", "B")
    func = te.create_prim_func([a_t, b_t, te.ops.matmul(a_t, b_t)])
    ann = {"pragma_auto_unroll_max_step": 512, "pragma_unroll_explicit": 1}
    func = schedule_loops(func, "T_matmul_NN", annotations=[ann])
    a, b = rand(8, 8), rand(8, 8)
    src, (_, _, c) = build_and_run(func, a, b, np.zeros((8, 8), "float32"), target=CPU)
    body_copies = src.count("T_matmul_NN[")
    assert body_copies <= 3 * EXPLICIT_UNROLL_STEPS, body_copies
    assert "{ const int32_t k = " in src  # the inner loop is replicated
    assert "for (int32_t i = 0; i < 8; ++i)" in src  # the 512-step nest stays a loop
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
