"""create_prim_func: blocks, loops, iter vars, access regions, root allocations."""

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.te.create_prim_func import access_regions
from metaschedule.testing import matmul_tensors
from metaschedule.tir.interpreter import interpret
from metaschedule.tir.structural import structural_equal, structural_hash
from metaschedule.tir.verify import verify_well_formed


def _blocks(func):
    """(loops, realize) for each block under the root, in order."""
    out = []

    def walk(stmt, loops):
        if isinstance(stmt, tir.SeqStmt):
            for s in stmt.seq:
                walk(s, loops)
        elif isinstance(stmt, tir.For):
            walk(stmt.body, loops + [stmt])
        elif isinstance(stmt, tir.BlockRealize):
            out.append((loops, stmt))
        else:
            raise AssertionError(f"unexpected {type(stmt).__name__}")

    walk(func.root_block.body, [])
    return out


def _point(region):
    assert all(isinstance(r.extent, tir.IntImm) and r.extent.value == 1 for r in region.region)
    return [r.min for r in region.region]


def test_matmul_structure():
    A, B, C = matmul_tensors(4, 3, 5)
    func = te.create_prim_func([A, B, C])
    verify_well_formed(func)
    assert func.params == (A.buffer, B.buffer, C.buffer)
    assert func.attrs == {"global_symbol": "main", "tir.noalias": True}
    root_realize = func.body
    assert isinstance(root_realize, tir.BlockRealize)
    assert isinstance(root_realize.predicate, tir.IntImm) and root_realize.predicate.value == 1
    root = root_realize.block
    assert root.name_hint == "root" and root.iter_vars == () and root.alloc_buffers == ()
    assert root.reads == () and root.writes == ()

    [(loops, realize)] = _blocks(func)
    assert [lp.loop_var.name for lp in loops] == ["i", "j", "k"]
    assert [lp.extent.value for lp in loops] == [4, 3, 5]
    assert all(lp.kind is tir.ForKind.SERIAL and lp.min.value == 0 for lp in loops)
    block = realize.block
    assert block.name_hint == "C"
    assert [iv.var.name for iv in block.iter_vars] == ["v_i", "v_j", "v_k"]
    assert [iv.iter_type for iv in block.iter_vars] == [
        tir.IterType.DATA_PAR,
        tir.IterType.DATA_PAR,
        tir.IterType.COMM_REDUCE,
    ]
    assert [iv.dom.extent.value for iv in block.iter_vars] == [4, 3, 5]
    assert all(b is lp.loop_var for b, lp in zip(realize.iter_values, loops))
    vi, vj, vk = (iv.var for iv in block.iter_vars)

    # reads: A[v_i, v_k], B[v_k, v_j]; the reduction's own output is not listed (as TVM)
    assert [r.buffer for r in block.reads] == [A.buffer, B.buffer]
    assert _point(block.reads[0]) == [vi, vk]
    assert _point(block.reads[1]) == [vk, vj]
    [write] = block.writes
    assert write.buffer is C.buffer and _point(write) == [vi, vj]

    init = block.init
    assert isinstance(init, tir.BufferStore) and init.buffer is C.buffer
    assert isinstance(init.value, tir.FloatImm) and init.value.value == 0.0
    assert list(init.indices) == [vi, vj]
    body = block.body
    assert isinstance(body, tir.BufferStore) and list(body.indices) == [vi, vj]
    assert isinstance(body.value, tir.Add)
    assert isinstance(body.value.a, tir.BufferLoad) and body.value.a.buffer is C.buffer
    assert isinstance(body.value.b, tir.Mul)


def test_matmul_runs_in_the_interpreter():
    A, B, C = matmul_tensors(5, 3, 4)
    func = te.create_prim_func([A, B, C])
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 4)).astype("float32")
    b = rng.standard_normal((4, 3)).astype("float32")
    c = np.zeros((5, 3), "float32")
    interpret(func, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)


def test_same_workload_twice_is_structurally_equal():
    f1 = te.create_prim_func(list(matmul_tensors(4, 3, 5)))
    f2 = te.create_prim_func(list(matmul_tensors(4, 3, 5)))
    assert structural_equal(f1, f2)
    assert structural_hash(f1) == structural_hash(f2)
    f3 = te.create_prim_func(list(matmul_tensors(4, 3, 6)))
    assert not structural_equal(f1, f3)


def test_intermediates_topological_order_and_unique_names():
    A = te.placeholder((6,), name="A")
    B = te.compute((6,), lambda i: A[i] + 1.0, name="T")
    C = te.compute((6,), lambda i: A[i] * 2.0, name="T")
    D = te.compute((6,), lambda i: B[i] + C[i], name="D")
    E = te.compute((6,), lambda i: D[i] - B[i], name="T")
    func = te.create_prim_func([A, E])
    verify_well_formed(func)
    names = [realize.block.name_hint for _, realize in _blocks(func)]
    assert names == ["T", "T_1", "D", "T_2"]
    writes = [realize.block.writes[0].buffer for _, realize in _blocks(func)]
    assert writes == [B.buffer, C.buffer, D.buffer, E.buffer]
    assert func.root_block.alloc_buffers == (B.buffer, C.buffer, D.buffer)
    assert func.params == (A.buffer, E.buffer)
    a = np.arange(6, dtype="float32")
    e = np.zeros(6, "float32")
    interpret(func, a, e)
    np.testing.assert_allclose(e, a * 2.0)


def test_listed_intermediate_becomes_a_param():
    A = te.placeholder((3,), name="A")
    B = te.compute((3,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((3,), lambda i: B[i] * 3.0, name="C")
    func = te.create_prim_func([A, B, C])
    assert func.params == (A.buffer, B.buffer, C.buffer)
    assert func.root_block.alloc_buffers == ()


def test_shifted_and_merged_regions():
    A = te.placeholder((10,), name="A")
    B = te.compute((8,), lambda i: A[i + 2] + A[i] + A[i + 1], name="B")
    func = te.create_prim_func([A, B])
    [(_, realize)] = _blocks(func)
    [read] = realize.block.reads
    vi = realize.block.iter_vars[0].var
    (rng,) = read.region
    assert rng.min is vi and rng.extent.value == 3  # hull of v_i, v_i + 1, v_i + 2

    C = te.compute((8,), lambda i: A[i - 1 + 1] * 2.0 + A[i], name="C")
    [read] = te.create_prim_func([A, C]).root_block.body.body.block.reads
    assert read.region[0].extent.value == 1  # same point written two ways

    D = te.compute((5,), lambda i: A[i * 2] + A[i], name="D")
    [read] = te.create_prim_func([A, D]).root_block.body.body.block.reads
    assert read.region[0].min.value == 0 and read.region[0].extent.value == 10  # whole dim


def test_data_dependent_index_reads_whole_dimension():
    A = te.placeholder((10,), name="A")
    idx = te.placeholder((4,), "int32", name="idx")
    G = te.compute((4,), lambda i: A[idx[i]], name="G")
    regions = access_regions(G.op.body[0])
    assert [r.buffer for r in regions] == [A.buffer, idx.buffer]
    assert regions[0].region[0].extent.value == 10
    assert regions[1].region[0].extent.value == 1


def test_window_access_in_block_vars():
    A = te.placeholder((10,), name="A")
    r = te.reduce_axis((0, 3), name="r")
    B = te.compute((8,), lambda i: te.sum(A[i + r], axis=r), name="B")
    [(_, realize)] = _blocks(te.create_prim_func([A, B]))
    vi, vr = (iv.var for iv in realize.block.iter_vars)
    [read] = realize.block.reads
    idx = read.region[0].min
    assert isinstance(idx, tir.Add) and idx.a is vi and idx.b is vr
    assert read.region[0].extent.value == 1


def test_reduce_where_and_offset_domain():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((2, 8), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=k < 6), name="B")
    func = te.create_prim_func([A, B])
    verify_well_formed(func)
    [(loops, realize)] = _blocks(func)
    assert loops[1].extent.value == 6 and loops[1].min.value == 0
    vk = realize.block.iter_vars[1]
    assert vk.dom.min.value == 2 and vk.dom.extent.value == 6
    binding = realize.iter_values[1]
    assert isinstance(binding, tir.Add) and binding.a is loops[1].loop_var
    body = realize.block.body  # C = C + Select(cond, A, 0): the pattern rfactor matches
    assert isinstance(body, tir.BufferStore) and isinstance(body.value, tir.Add)
    assert isinstance(body.value.b, tir.Select) and body.value.b.false_value.value == 0.0
    a = np.random.default_rng(1).standard_normal((4, 8)).astype("float32")
    b = np.zeros(4, "float32")
    interpret(func, a, b)
    np.testing.assert_allclose(b, a[:, 2:6].sum(axis=1), rtol=1e-5)


def test_reduce_init_value_with_where():
    A = te.placeholder((3, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    B = te.compute((3,), lambda i: te.sum(A[i, k], axis=k, init=10.0), name="B")
    a = np.ones((3, 4), "float32")
    b = np.zeros(3, "float32")
    interpret(te.create_prim_func([A, B]), a, b)
    np.testing.assert_allclose(b, [14.0, 14.0, 14.0])
    # masked-out elements contribute the neutral element (0), not the init value
    C = te.compute((3,), lambda i: te.sum(A[i, k], axis=k, where=k >= 1, init=10.0), name="C")
    func = te.create_prim_func([A, C])
    assert func.root_block.body.body.body.block.init.value.value == 10.0
    interpret(func, a, b)
    np.testing.assert_allclose(b, [13.0, 13.0, 13.0])
    # and for max, the lowest value
    M = te.compute((3,), lambda i: te.max(A[i, k] * -1.0, axis=k, where=k < 2, init=-5.0))
    interpret(te.create_prim_func([A, M]), a, b)
    np.testing.assert_allclose(b, [-1.0, -1.0, -1.0])


def test_attrs_and_tag_become_annotations():
    A = te.placeholder((3,), name="A")
    B = te.compute((3,), lambda i: A[i], name="B", tag="injective", attrs={"layout": "x"})
    C = te.compute((3,), lambda i: B[i], name="C")
    blocks = [r.block for _, r in _blocks(te.create_prim_func([A, C]))]
    assert blocks[0].annotations == {"layout": "x", "tag": "injective"}
    assert blocks[1].annotations == {}


def test_scalar_output_has_no_spatial_loops():
    A = te.placeholder((5,), name="A")
    k = te.reduce_axis((0, 5), name="k")
    S = te.compute((), lambda: te.sum(A[k], axis=k), name="S")
    func = te.create_prim_func([A, S])
    verify_well_formed(func)
    [(loops, realize)] = _blocks(func)
    assert [lp.loop_var.name for lp in loops] == ["k"]
    assert realize.block.writes[0].region == ()
    s = np.zeros((), "float32")
    interpret(func, np.arange(5, dtype="float32"), s)
    assert float(s) == 10.0


def test_errors():
    A, B, C = matmul_tensors(4, 3, 5)
    with pytest.raises(ValueError, match="placeholder.*B.*not in the argument list"):
        te.create_prim_func([A, C])
    with pytest.raises(ValueError, match="twice"):
        te.create_prim_func([A, B, C, A])
    with pytest.raises(ValueError, match="only placeholders"):
        te.create_prim_func([A, B])
    with pytest.raises(TypeError, match="te tensors"):
        te.create_prim_func([A, B, C.buffer])
