"""Tests of the script printer (metaschedule.tir.printer)."""

from __future__ import annotations

import textwrap

from metaschedule import tir
from metaschedule.tir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    Cast,
    CommReducer,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRModule,
    IterType,
    IterVar,
    PrimFunc,
    Range,
    Reduce,
    Select,
    SeqStmt,
    Var,
    const,
)
from metaschedule.tir.expr import Div, FloatImm, Not, StringImm
from metaschedule.tir.printer import script
from metaschedule.tir.stmt import true


def _loop(var, extent, body, kind=ForKind.SERIAL, **kw):
    return For(var, 0, extent, kind, body, **kw)


def _point(buf, *idx):
    return BufferRegion(buf, tuple(Range(i, 1) for i in idx))


def tiled_matmul() -> PrimFunc:
    A, B, C = (Buffer(n, (128, 128)) for n in "ABC")
    CL = Buffer("C_local", (4, 4), scope="local")
    i0, j0, k, i1, j1 = (Var(n) for n in ("i0", "j0", "k", "i1", "j1"))
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    block = Block(
        (
            IterVar(vi, Range(0, 128)),
            IterVar(vj, Range(0, 128)),
            IterVar(vk, Range(0, 128), IterType.COMM_REDUCE),
        ),
        (_point(A, vi, vk), _point(B, vk, vj)),
        (_point(C, vi, vj),),
        "C",
        BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(C, const(0.0), (vi, vj)),
        annotations={"meta_schedule.tiling_structure": "SSRSRS"},
    )
    realize = BlockRealize((i0 * 4 + i1, j0 * 4 + j1, k), true(), block)
    nest = _loop(i0, 32, _loop(j0, 32, _loop(k, 128, _loop(i1, 4, _loop(j1, 4, realize)))))
    root = Block((), (), (), "root", nest, alloc_buffers=(CL,))
    return PrimFunc((A, B, C), BlockRealize((), true(), root))


MATMUL_SCRIPT = """\
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    # with T.block("root"):
    C_local = T.alloc_buffer((4, 4), "float32", scope="local")
    for i0, j0, k, i1, j1 in T.grid(32, 32, 128, 4, 4):
        with T.block("C"):
            vi = T.axis.spatial(128, i0 * 4 + i1)
            vj = T.axis.spatial(128, j0 * 4 + j1)
            vk = T.axis.reduce(128, k)
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            T.block_attr({"meta_schedule.tiling_structure": "SSRSRS"})
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]"""


def test_matmul_prints_as_script():
    func = tiled_matmul()
    assert script(func) == MATMUL_SCRIPT
    assert str(func) == MATMUL_SCRIPT and repr(func) == MATMUL_SCRIPT


def test_printing_is_deterministic_across_equal_trees():
    assert script(tiled_matmul()) == script(tiled_matmul())
    f = tiled_matmul()
    assert script(f) == script(f)


def test_module_prints_each_function():
    f = tiled_matmul()
    text = script(IRModule({"main": f, "mm2": f}))
    assert text.startswith("# from metaschedule.script import ir as I\n")
    assert "# from metaschedule.script import tir as T" in text
    assert "@I.ir_module\nclass Module:\n    @T.prim_func\n    def main(A: " in text
    assert "\n    def mm2(A: " in text
    assert "\n                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]" in text


def test_duplicate_name_hints_get_suffixes():
    A1, A2 = Buffer("A", (8,)), Buffer("A", (8,))
    i, i_again, x = Var("i"), Var("i"), Var("A")
    inner = _loop(i_again, 8, BufferStore(A2, A1[i] + A1[i_again], (x,)))
    # x is a free Var named like the buffer: one name space covers vars and buffers
    text = script(_loop(i, 8, inner))
    assert text == textwrap.dedent("""\
        for i, i_1 in T.grid(8, 8):
            A[A_1] = A_2[i] + A_2[i_1]""")


def test_odd_name_hints_are_sanitized():
    v, w, u = Var("a.b"), Var(""), Var("lambda")
    assert script(v + w * u) == "a_b + v * lambda_"


def test_remap_when_bindings_are_plain_loops():
    A = Buffer("A", (16, 8))
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    block = Block(
        (IterVar(vi, Range(0, 16)), IterVar(vj, Range(0, 8), IterType.COMM_REDUCE)),
        (),
        (_point(A, vi, vj),),
        "B",
        BufferStore(A, const(1.0), (vi, vj)),
    )
    text = script(_loop(i, 16, _loop(j, 8, BlockRealize((i, j), true(), block))))
    assert 'vi, vj = T.axis.remap("SR", [i, j])' in text
    assert "T.reads()\n" in text


def test_loop_kinds_annotations_and_where():
    A = Buffer("A", (64,))
    i, j, t, u, vi = Var("i"), Var("j"), Var("t"), Var("u"), Var("vi")
    block = Block(
        (IterVar(vi, Range(0, 60)),), (), (_point(A, vi),), "B", BufferStore(A, const(2.0), (vi,))
    )
    realize = BlockRealize((t * 8 + u,), t * 8 + u < 60, block)
    body = For(u, 0, 8, ForKind.UNROLLED, realize)
    body = For(t, 0, 8, ForKind.VECTORIZED, body, annotations={"pragma_x": 1})
    body = For(j, 2, 6, ForKind.THREAD_BINDING, body, thread_binding="threadIdx.x")
    body = For(i, 0, 4, ForKind.PARALLEL, body)
    assert script(body) == textwrap.dedent("""\
        for i in T.parallel(4):
            for j in T.thread_binding(2, 8, thread="threadIdx.x"):
                for t in T.vectorized(8, annotations={"pragma_x": 1}):
                    for u in T.unroll(8):
                        with T.block("B"):
                            vi = T.axis.spatial(60, t * 8 + u)
                            T.where(t * 8 + u < 60)
                            T.reads()
                            T.writes(A[vi])
                            A[vi] = T.float32(2)""")


def test_grid_stops_at_dependent_or_annotated_loops():
    A = Buffer("A", (8, 8))
    i, j, k = Var("i"), Var("j"), Var("k")
    store = BufferStore(A, const(0.0), (i, j))
    dependent = _loop(i, 8, _loop(j, i + 1, store))
    lines = script(dependent).splitlines()
    assert lines[:2] == ["for i in range(8):", "    for j in range(i + 1):"]
    annotated = _loop(i, 8, _loop(j, 8, store, annotations={"a": "b"}))
    assert script(annotated).splitlines()[1] == '    for j in T.serial(8, annotations={"a": "b"}):'
    offset = For(k, 3, 5, ForKind.SERIAL, store)
    assert script(offset).splitlines()[0] == "for k in range(3, 8):"


def test_expression_precedence_and_constants():
    a, b, c = Var("a"), Var("b"), Var("c")
    x, y = Var("x", "float32"), Var("y", "float32")
    cases = {
        (a + b) * c: "(a + b) * c",
        a - (b - c): "a - (b - c)",
        a - b - c: "a - b - c",
        a + (b + c): "a + (b + c)",
        a // b % c: "a // b % c",
        a // (b * c): "a // (b * c)",
        a * -3: "a * -3",
        (a < b) & (b <= c): "a < b and b <= c",
        ((a < b) | (b > c)) & (a == c): "(a < b or b > c) and a == c",
        ~(a != b): "not a != b",
        Div(a, b): "T.Div(a, b)",
        x / (y + 1.0): "x / (y + T.float32(1))",
        Cast("float32", a) * 0.5: 'T.Cast("float32", a) * T.float32(0.5)',
        Select(a > 0, x, y): "T.Select(a > 0, x, y)",
        tir.exp(x) + tir.max(x, y): "T.exp(x) + T.max(x, y)",
        tir.min(a, 3): "T.min(a, 3)",
        tir.pow(x, 2.0): "T.pow(x, T.float32(2))",
        const(3, "int64"): "T.int64(3)",
        const(True): "T.bool(True)",
        const(float("-inf")): 'T.float32("-inf")',
        const(1e-5, "float64"): "T.float64(1e-05)",
        StringImm("hi"): '"hi"',
    }
    for e, text in cases.items():
        assert script(e) == text, (e, text)


def test_long_sums_print_without_deep_recursion():
    v = Var("v")
    e = v
    for _ in range(3000):
        e = e + v
    text = script(e)
    assert text.count("+") == 3000 and "(" not in text


def test_every_node_kind_prints():
    A = Buffer("A", (4, 8), "float16", scope="shared")
    k, lhs, rhs, i = Var("k"), Var("x", "float32"), Var("y", "float32"), Var("i")
    kv = IterVar(k, Range(0, 8), IterType.COMM_REDUCE)
    reducer = CommReducer(lhs, rhs, lhs + rhs, const(0.0))
    src = Buffer("B", (8,))[k]
    store = BufferStore(A, Cast("float16", src), (0, i))
    cases = {
        A: 'A: T.Buffer((4, 8), "float16", scope="shared")',
        Range(1, 4): "T.Range(min=1, extent=4)",
        kv: 'T.iter_var(k, T.Range(min=0, extent=8), "CommReduce")',
        IterVar(
            i, Range(0, 32), IterType.THREAD_INDEX, "threadIdx.x"
        ): 'T.iter_var(i, T.Range(min=0, extent=32), "ThreadIndex", thread="threadIdx.x")',
        BufferRegion(A, (Range(0, 1), Range(2, 4))): "A[0, 2:6]",
        BufferRegion(A, (Range(i, 2), Range(0, 8))): "A[i:i + 2, 0:8]",
        reducer: "T.comm_reducer(lambda x, y: x + y, [T.float32(0)])",
        Reduce(
            reducer, src, (kv,), true()
        ): "T.reduce(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), B[k], "
        'axis=[T.iter_var(k, T.Range(min=0, extent=8), "CommReduce")])',
        store: 'A[0, i] = T.Cast("float16", B[k])',
        Evaluate(const(0)): "T.evaluate(0)",
        SeqStmt((store, Evaluate(i))): 'A[0, i] = T.Cast("float16", B[k])\nT.evaluate(i)',
        IfThenElse(
            i < 2, store, Evaluate(0)
        ): 'if i < 2:\n    A[0, i] = T.Cast("float16", B[k])\nelse:\n    T.evaluate(0)',
        Allocate(
            Buffer("tmp", (16,), scope="local"), Evaluate(1)
        ): 'tmp = T.allocate((16,), "float32", scope="local")\nT.evaluate(1)',
        Block(
            (kv,), (), (), "blk", Evaluate(0)
        ): 'with T.block("blk"):\n    k = T.axis.reduce(8)\n    T.reads()\n    T.writes()\n'
        "    T.evaluate(0)",
        FloatImm("float16", 2.5): "T.float16(2.5)",
        IntImm("uint8", 7): "T.uint8(7)",
        Not(const(False)): "not T.bool(False)",
    }
    for node, text in cases.items():
        assert script(node) == text, type(node).__name__
        assert str(node) == text and repr(node) == text


def test_symbolic_shapes_and_func_attrs():
    n = Var("n")
    A = Buffer("A", (n, 4))
    i = Var("i")
    f = PrimFunc(
        (A,),
        _loop(i, n, BufferStore(A, const(1.0), (i, 0))),
        {"global_symbol": "fill", "tir.noalias": True},
    )
    assert script(f) == textwrap.dedent("""\
        @T.prim_func
        def fill(A: T.Buffer((n, 4), "float32")):
            n = T.int32()
            T.func_attr({"tir.noalias": True})
            for i in range(n):
                A[i, 0] = T.float32(1)""")


def test_non_root_body_and_full_root_block():
    A = Buffer("A", (4,))
    root = Block((), (), (_point(A, 0),), "root", BufferStore(A, const(1.0), (0,)))
    text = script(PrimFunc((A,), BlockRealize((), true(), root)))
    assert 'with T.block("root"):' in text and "# with" not in text
    assert "T.writes(A[0])" in text


def test_never_raises_on_broken_or_foreign_nodes():
    broken = object.__new__(For)  # no fields set
    text = str(broken)
    assert text.startswith("<For") and "unprintable" in text
    assert script([Var("a"), 3, "s"]) == '[a, 3, "s"]'
    assert script(None) == "None"
