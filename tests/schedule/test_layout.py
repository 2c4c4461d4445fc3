"""set_scope, storage_align, transform_layout (and IndexMap): structure, numbers, traces, errors."""

import json

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.schedule.prepacked import prepacked_args
from metaschedule.schedule.primitives.layout import IndexMap
from metaschedule.testing import assert_unchanged
from metaschedule.testing.primitive_check import check_primitives as check
from metaschedule.tir.structural import structural_equal

# ----------------------------------------------------------------------------- helpers


def chain(n=8, m=6):
    """B = A * 2 (intermediate), C = B + 1."""
    A = te.placeholder((n, m), "float32", "A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] + 1.0, name="C")
    return te.create_prim_func([A, C])


def softmax():
    A = te.placeholder((4, 6), "float32", "A")
    return te.create_prim_func([A, te.ops.softmax(A)])


def alloc(sch, name):
    root = sch.state.block_realize("main", "root").block
    return next(b for b in root.alloc_buffers if b.name == name)


def accesses(func, name):
    """Every buffer object named ``name`` that a load, store or region uses."""
    found = set()

    def f(n):
        buf = getattr(n, "buffer", None)
        if buf is not None and buf.name == name:
            found.add(buf)

    tir.post_order_visit(func.body, f)
    return found


# ----------------------------------------------------------------------------- set_scope


def test_set_scope_changes_every_use():
    func = chain()
    sch = tir.Schedule(func)
    sch.set_scope(sch.get_block("B"), 0, "shared")
    new = alloc(sch, "B")
    assert new.scope == "shared"
    assert accesses(sch.mod["main"], "B") == {new}
    check(sch, func)


def test_set_scope_errors():
    sch = tir.Schedule(chain())
    b, c = sch.get_block("B"), sch.get_block("C")
    assert_unchanged(
        sch, lambda: sch.set_scope(c, 0, "local"), "buffer 'C' .* is a parameter of function 'main'"
    )
    assert_unchanged(
        sch,
        lambda: sch.set_scope(b, 0, "texture"),
        "storage scope 'texture' is not one of global, local, shared",
    )
    assert_unchanged(
        sch,
        lambda: sch.set_scope(b, 1, "local"),
        "write buffer index 1 is out of range for block 'B'",
    )


# ----------------------------------------------------------------------------- storage_align


@pytest.mark.compiler
def test_storage_align_records_the_annotation():
    func = softmax()
    sch = tir.Schedule(func)
    e = sch.get_block("T_softmax_exp")
    sch.storage_align(e, 0, 0, 16, 4)
    sch.storage_align(e, 0, -1, 8, 1)
    sch.storage_align(e, 0, 0, 32, 8)  # the same axis again replaces its entry
    ann = sch.get(e).annotations
    assert ann["buffer_dim_align"] == [[[0, 32, 8], [1, 8, 1]]]
    assert ann["tag"] == "softmax_exp"
    check(sch, func)
    from metaschedule.codegen.build import build

    x = np.random.default_rng(0).standard_normal((4, 6)).astype("float32")
    out = np.zeros((4, 6), "float32")
    build(sch.mod)(x, out)
    ref = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, ref / ref.sum(1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 2, 16, 0), "axis 2 is out of range for buffer 'B' of 2 dimensions"),
        ((0, -3, 16, 0), "axis -3 is out of range"),
        ((0, 0, 0, 0), "factor must be >= 1, got 0"),
        ((0, 0, 8, 8), r"offset must be in \[0, 8\), got 8"),
        ((1, 0, 8, 0), "write buffer index 1 is out of range"),
    ],
)
def test_storage_align_errors(args, match):
    sch = tir.Schedule(chain())
    b = sch.get_block("B")
    assert_unchanged(sch, lambda: sch.storage_align(b, *args), match)


def test_storage_align_of_a_parameter_fails():
    sch = tir.Schedule(chain())
    c = sch.get_block("C")
    assert_unchanged(sch, lambda: sch.storage_align(c, 0, 0, 8, 0), "is a parameter")


# ----------------------------------------------------------------------------- transform_layout


def test_transform_layout_transposes_an_intermediate():
    func = chain()
    sch = tir.Schedule(func)
    b = sch.get_block("B")
    sch.transform_layout(b, ("write", 0), lambda i, j: (j, i))
    new = alloc(sch, "B")
    assert [s.value for s in new.shape] == [6, 8]
    assert accesses(sch.mod["main"], "B") == {new}
    store = sch.get(b).body
    assert [str(x) for x in store.indices] == [str(v.var) for v in sch.get(b).iter_vars][::-1]
    check(sch, func)


def test_transform_layout_splits_a_dimension_from_the_consumer_side():
    func = chain()
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    sch.transform_layout(c, ("read", 0), lambda i, j: (j // 2, i, j % 2))
    assert [s.value for s in alloc(sch, "B").shape] == [3, 8, 2]
    check(sch, func)


def test_transform_layout_by_name_and_index_map_on_softmax():
    func = softmax()
    sch = tir.Schedule(func)
    e = sch.get_block("T_softmax_exp")
    sch.transform_layout(e, "T_softmax_exp", IndexMap.from_func(lambda i, j: (i * 6 + j,)))
    assert [s.value for s in alloc(sch, "T_softmax_exp").shape] == [24]
    m = sch.get_block("T_softmax_maxelem")
    sch.transform_layout(m, 0, lambda i: (i // 2, i % 2))
    assert [s.value for s in alloc(sch, "T_softmax_maxelem").shape] == [2, 2]
    check(sch, func)
    assert any("transform_layout" in line for line in sch.trace.as_python())


def test_transform_layout_maps_regions_that_span_several_elements():
    func = chain()
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    sch.blockize(sch.get_loops(c)[1])  # C_o reads the row B[vi, 0:6]
    sch.transform_layout(sch.get_block("B"), 0, lambda i, j: (j, i))
    outer = sch.get(sch.get_block("C_o"))
    (region,) = [r for r in outer.reads if r.buffer.name == "B"]
    assert [(str(r.min), str(r.extent)) for r in region.region] == [
        ("v_j_o * 6", "6"),
        ("v_i_o", "1"),
    ]
    check(sch, func)


def test_transform_layout_of_a_read_only_parameter_prepacks_it():
    func = chain()
    sch = tir.Schedule(func)
    b = sch.get_block("B")
    sch.transform_layout(b, ("read", 0), lambda i, j: (j // 2, i, j % 2))
    out = sch.mod["main"]
    assert [s.value for s in out.params[0].shape] == [3, 8, 2]
    (packed,) = prepacked_args(out).items()
    assert packed[0] == 0 and packed[1].original_shape == (8, 6)
    # a second map composes with the first: the record still maps the original indices
    sch.transform_layout(b, ("read", 0), lambda a, i, c: (i, a, c))
    arg = prepacked_args(sch.mod["main"])[0]
    assert [s.value for s in sch.mod["main"].params[0].shape] == [8, 3, 2]
    x = np.arange(48, dtype="float32").reshape(8, 6)
    np.testing.assert_array_equal(arg.pack(x), x.reshape(8, 3, 2))
    check(sch, func)


def test_transform_layout_of_a_written_parameter_fails():
    sch = tir.Schedule(chain())
    c = sch.get_block("C")
    assert_unchanged(
        sch,
        lambda: sch.transform_layout(c, ("write", 0), lambda i, j: (j, i)),
        "buffer 'C' .* parameter of function 'main' that the function writes",
    )


def test_index_map_basics():
    m = IndexMap.from_func(lambda i, j: (j, i // 4, i % 4))
    assert str(m) == "IndexMap(lambda i, j: (j, i // 4, i % 4))"
    back = IndexMap.from_json(json.loads(json.dumps(m.as_json())))
    assert structural_equal(back, m, map_free_vars=True) and str(back) == str(m)
    out = m.map_indices([tir.const(9), tir.const(2)])
    assert [x.value for x in out] == [2, 2, 1]
    star = IndexMap.from_func(lambda *idx: idx[::-1], ndim=3)
    assert len(star.initial_indices) == 3
    with pytest.raises(ValueError, match="pass ndim"):
        IndexMap.from_func(lambda *idx: idx)


@pytest.mark.parametrize(
    "buffer, index_map, match",
    [
        (("write", 0), lambda i: (i,), "takes 1 indices, but buffer 'B' has 2 dimensions"),
        (("write", 0), lambda i, j: (i,), "not a bijective affine map"),
        (("write", 0), lambda i, j: (i, i, j), "not a bijective affine map"),
        (("write", 0), lambda i, j: (i + 1, j), "must start at 0"),
        (("read", 3), lambda i, j: (j, i), "read buffer index 3 is out of range for block 'B'"),
        ("Z", lambda i, j: (j, i), "accesses no buffer named 'Z'"),
        (("both", 0), lambda i, j: (j, i), "expected \\('read'\\|'write', index\\)"),
        (("write", 0), "not a map", "expected an IndexMap or a function"),
    ],
)
def test_transform_layout_errors(buffer, index_map, match):
    sch = tir.Schedule(chain())
    b = sch.get_block("B")
    assert_unchanged(sch, lambda: sch.transform_layout(b, buffer, index_map), match)
