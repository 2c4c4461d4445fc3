"""Tests of the well-formedness checker (metaschedule.tir.verify)."""

from __future__ import annotations

import pytest

from metaschedule.tir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IRModule,
    IterType,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
    Var,
    const,
)
from metaschedule.tir.stmt import true
from metaschedule.tir.verify import IRVerifyError, verify, verify_well_formed


def _loop(var, extent, body, kind=ForKind.SERIAL):
    return For(var, 0, extent, kind, body)


def _point(buf, *idx):
    return BufferRegion(buf, tuple(Range(i, 1) for i in idx))


def _root(body, allocs=()):
    return BlockRealize((), true(), Block((), (), (), "root", body, alloc_buffers=allocs))


def _set(node, **fields):
    """Corrupt a frozen node in place (the constructors refuse these trees)."""
    for k, v in fields.items():
        object.__setattr__(node, k, v)
    return node


def matmul_parts(n=8):
    A, B, C = (Buffer(x, (n, n)) for x in "ABC")
    i, j, k = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    iters = (
        IterVar(vi, Range(0, n)),
        IterVar(vj, Range(0, n)),
        IterVar(vk, Range(0, n), IterType.COMM_REDUCE),
    )
    store = BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj))
    init = BufferStore(C, const(0.0), (vi, vj))
    return locals()


def matmul(p=None, n=8, **block_changes) -> PrimFunc:
    p = p or matmul_parts(n)
    fields = {
        "iter_vars": p["iters"],
        "reads": (_point(p["A"], p["vi"], p["vk"]), _point(p["B"], p["vk"], p["vj"])),
        "writes": (_point(p["C"], p["vi"], p["vj"]),),
        "name_hint": "C",
        "body": p["store"],
        "init": p["init"],
    }
    fields.update(block_changes)
    block = Block(**fields)
    realize = BlockRealize((p["i"], p["j"], p["k"]), true(), block)
    nest = _loop(p["i"], n, _loop(p["j"], n, _loop(p["k"], n, realize)))
    return PrimFunc((p["A"], p["B"], p["C"]), _root(nest))


def _fails(func, *needles):
    with pytest.raises(IRVerifyError) as info:
        verify_well_formed(func)
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, f"{needle!r} not in:\n{msg}"
    return msg


def test_valid_block_and_lowered_functions_pass():
    verify_well_formed(matmul())
    verify(IRModule({"main": matmul(), "other": matmul(n=4)}))
    A, T = Buffer("A", (8,)), Buffer("T", (8,), scope="local")
    i = Var("i")
    lowered = Allocate(
        T,
        _loop(
            i,
            8,
            SeqStmt(
                (
                    BufferStore(T, A[i] * 2.0, (i,)),
                    IfThenElse(i < 4, BufferStore(A, T[i], (i,)), Evaluate(0)),
                )
            ),
        ),
    )
    verify_well_formed(PrimFunc((A,), lowered))


def test_error_type_and_argument_check():
    assert issubclass(IRVerifyError, ValueError)
    with pytest.raises(TypeError, match="PrimFunc or an IRModule"):
        verify_well_formed(Var("x"))


def test_undefined_variable_names_var_and_shows_block():
    p = matmul_parts()
    stray = Var("stray")
    body = BufferStore(p["C"], p["C"][p["vi"], stray], (p["vi"], p["vj"]))
    msg = _fails(matmul(p, body=body), "variable stray is used but not defined", 'block "C"')
    assert 'with T.block("C"):' in msg and "stray" in msg.splitlines()[-1]


def test_block_must_not_use_enclosing_loop_vars_directly():
    p = matmul_parts()
    body = BufferStore(p["C"], p["A"][p["i"], p["vk"]], (p["vi"], p["vj"]))
    _fails(matmul(p, body=body), "loop variable i of loop i is used inside block C")


def test_loop_var_redefined_in_nested_loop():
    A, i = Buffer("A", (4,)), Var("i")
    func = PrimFunc((A,), _loop(i, 4, _loop(i, 4, BufferStore(A, const(1.0), (i,)))))
    _fails(func, "loop variable i of loop i is already defined by loop i", "in loop i")


def test_binding_may_use_enclosing_block_iter_vars_but_not_siblings():
    A = Buffer("A", (8,))
    io, ii = Var("io"), Var("ii")
    vo, v = Var("vo"), Var("v")
    inner = Block(
        (IterVar(v, Range(0, 8)),), (), (_point(A, v),), "inner", BufferStore(A, const(1.0), (v,))
    )
    outer = Block(
        (IterVar(vo, Range(0, 2)),),
        (),
        (),
        "outer",
        _loop(ii, 4, BlockRealize((vo * 4 + ii,), true(), inner)),
    )
    good = PrimFunc((A,), _root(_loop(io, 2, BlockRealize((io,), true(), outer))))
    verify_well_formed(good)  # blockize-style nesting is well formed

    first = Block(
        (IterVar(vo, Range(0, 8)),),
        (),
        (_point(A, vo),),
        "first",
        BufferStore(A, const(1.0), (vo,)),
    )
    second = Block(
        (IterVar(v, Range(0, 8)),), (), (_point(A, v),), "second", BufferStore(A, const(2.0), (v,))
    )
    bad = _loop(
        io, 8, SeqStmt((BlockRealize((io,), true(), first), BlockRealize((vo,), true(), second)))
    )
    _fails(PrimFunc((A,), _root(bad)), "variable vo is used but not defined", 'block "second"')


def test_undeclared_buffers_are_named():
    p = matmul_parts()
    ghost = Buffer("ghost", (8, 8))
    load = BufferStore(p["C"], ghost[p["vi"], p["vk"]], (p["vi"], p["vj"]))
    _fails(matmul(p, body=load), "load of buffer ghost, which is neither a parameter")
    store = BufferStore(ghost, p["A"][p["vi"], p["vk"]], (p["vi"], p["vj"]))
    _fails(matmul(p, body=store), "store of buffer ghost")
    reads = (_point(ghost, p["vi"], p["vk"]),)
    _fails(matmul(p, reads=reads), "block C declares a read of buffer ghost")


def test_buffer_allocated_by_enclosing_block_is_visible_and_scoped():
    A, T = Buffer("A", (4,)), Buffer("T", (4,))
    i = Var("i")
    uses_t = _loop(i, 4, BufferStore(A, T[i], (i,)))
    verify_well_formed(PrimFunc((A,), _root(uses_t, allocs=(T,))))
    outside = SeqStmt((Allocate(T, Evaluate(0)), uses_t))
    _fails(PrimFunc((A,), outside), "load of buffer T")
    twice = Allocate(T, Allocate(T, Evaluate(0)))
    _fails(PrimFunc((A,), twice), "buffer T allocated by an Allocate is already declared")


def test_index_count_and_index_dtype():
    p = matmul_parts()
    short = _set(BufferStore(p["C"], const(1.0), (p["vi"], p["vj"])), indices=(p["vi"],))
    _fails(matmul(p, body=short), "store of buffer C with 1 indices; it has 2 dimensions")
    x = Var("x", "float32")
    load = p["A"][p["vi"], p["vk"]]
    _set(load, indices=(p["vi"], x))
    _fails(
        matmul(p, body=BufferStore(p["C"], load, (p["vi"], p["vj"]))),
        "index x of buffer A has non-integer dtype float32",
    )


def test_store_dtype_mismatch():
    p = matmul_parts()
    bad = _set(BufferStore(p["C"], const(1.0), (p["vi"], p["vj"])), value=const(1))
    _fails(matmul(p, body=bad), "store of a int32 value into float32 buffer C")


def test_init_requires_a_reduction_iter_var():
    p = matmul_parts()
    spatial = (
        IterVar(p["vi"], Range(0, 8)),
        IterVar(p["vj"], Range(0, 8)),
        IterVar(p["vk"], Range(0, 8)),
    )
    _fails(matmul(p, iter_vars=spatial), "block C has an init statement but no reduction iter var")


def test_iter_var_domain_must_not_use_loop_vars():
    p = matmul_parts()
    iters = (IterVar(p["vi"], Range(0, p["i"] + 1)),) + p["iters"][1:]
    _fails(matmul(p, iter_vars=iters), "the domain of iter var vi of block C uses variable i")
    empty = (IterVar(p["vi"], Range(0, 0)),) + p["iters"][1:]
    _fails(matmul(p, iter_vars=empty), "iter var vi of block C has empty domain extent 0")


def test_binding_count_and_dtype():
    func = matmul()
    realize = func.body.block.body.body.body.body
    _set(realize, iter_values=realize.iter_values[:2])
    _fails(func, "block C has 3 iter vars but 2 bindings")
    func = matmul()
    realize = func.body.block.body.body.body.body
    _set(realize, iter_values=(const(0, "int64"),) + realize.iter_values[1:])
    _fails(func, "iter var vi of block C has dtype int32 but is bound to T.int64(0)")


def test_predicate_and_condition_must_be_bool():
    A, i = Buffer("A", (4,)), Var("i")
    cond = _set(IfThenElse(i < 2, BufferStore(A, const(1.0), (i,))), condition=i)
    _fails(PrimFunc((A,), _loop(i, 4, cond)), "if condition i has dtype int32, expected bool")


def test_loop_dtype_mismatch_and_unknown_statement():
    A, i = Buffer("A", (4,)), Var("i")
    loop = _set(_loop(i, 4, Evaluate(0)), extent=const(4, "int64"))
    _fails(PrimFunc((A,), loop), "loop i has loop variable dtype int32 but min/extent dtypes")
    _fails(PrimFunc((A,), _loop(i, 4, "oops")), "unexpected str where a statement")


def test_bare_block_with_iter_vars_and_reduce_in_func():
    from metaschedule.tir import CommReducer, Reduce

    A, k = Buffer("A", (4,)), Var("k")
    kv = IterVar(k, Range(0, 4), IterType.COMM_REDUCE)
    bare = Block((kv,), (), (), "lonely", Evaluate(0))
    _fails(PrimFunc((A,), bare), "block lonely has iter vars but no BlockRealize")
    x, y = Var("x", "float32"), Var("y", "float32")
    red = Reduce(CommReducer(x, y, x + y, const(0.0)), A[k], (kv,), true())
    _fails(PrimFunc((A,), BufferStore(A, red, (0,))), "Reduce is only valid in a te.compute")


def test_symbolic_shape_vars_are_defined():
    n, i = Var("n"), Var("i")
    A = Buffer("A", (n,))
    verify_well_formed(PrimFunc((A,), _loop(i, n, BufferStore(A, const(0.0), (i,)))))
    T = Buffer("T", (i,))
    alloc = _loop(i, n, Allocate(T, Evaluate(0)))
    _fails(PrimFunc((A,), alloc), "the shape of buffer T uses variable i")


def test_context_is_truncated_to_a_few_lines():
    A = Buffer("A", (4,))
    i, j = Var("i"), Var("j")
    stores = SeqStmt(
        tuple(BufferStore(A, const(float(t)), (i,)) for t in range(30))
        + (BufferStore(A, const(1.0), (j,)),)
    )
    msg = _fails(PrimFunc((A,), _loop(i, 4, stores)), "variable j is used", "in loop i")
    assert msg.splitlines()[-1].strip() == "..." and len(msg.splitlines()) < 20
