"""cache_read / cache_write: structure, numbers, trace round trip, errors; the CPU matmul recipe."""

import numpy as np
import pytest

from metaschedule import te, tir
from metaschedule.testing import assert_unchanged, matmul, matmul_relu
from metaschedule.testing.primitive_check import check_primitives as check

# ----------------------------------------------------------------------------- helpers


def root_children(sch):
    return [
        r.block.name_hint
        for r in sch.state.child_block_realizes(sch.state.block_realize("main", "root"))
    ]


def block(sch, name):
    return sch.state.block_realize("main", name).block


def read_names(sch, name):
    return [r.buffer.name for r in block(sch, name).reads]


def two_readers():
    A = te.placeholder((6, 4), "float32", "A")
    B = te.compute((6, 4), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((6, 4), lambda i, j: A[i, j] + B[i, j], name="C")
    return te.create_prim_func([A, C])


def elementwise_chain():
    A = te.placeholder((8, 6), "float32", "A")
    B = te.compute((8, 6), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((8, 6), lambda i, j: B[i, j] + 1.0, name="C")
    return te.create_prim_func([A, C])


# ----------------------------------------------------------------------------- cache_read


def test_cache_read_of_a_parameter_goes_first():
    func = matmul(16, 12, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    a = sch.cache_read(c, 0, "local")
    assert sch.get(a).name_hint == "A_local"
    assert root_children(sch) == ["A_local", "C"]
    assert read_names(sch, "C") == ["A_local", "B"]
    alloc = block(sch, "root").alloc_buffers
    assert [(b.name, b.scope) for b in alloc] == [("A_local", "local")]
    copy = sch.state.block_realize("main", "A_local")
    assert [r.buffer.name for r in copy.block.reads] == ["A"]
    assert [sch.get(lp).extent.value for lp in sch.get_loops(a)] == [16, 8]
    check(sch, func)


def test_cache_read_of_an_intermediate_follows_its_producer():
    func = matmul_relu(16, 12, 8, select=True)
    sch = tir.Schedule(func)
    sch.cache_read(sch.get_block("D"), 0, "shared")
    assert root_children(sch) == ["C", "C_shared", "D"]
    assert read_names(sch, "D") == ["C_shared"]
    check(sch, func)


def test_cache_read_consumer_blocks_limit_the_redirection():
    func = two_readers()
    sch = tir.Schedule(func)
    b = sch.get_block("B")
    sch.cache_read(b, 0, "local", consumer_blocks=[b])
    assert read_names(sch, "B") == ["A_local"]
    assert "A" in read_names(sch, "C")
    check(sch, func)
    sch = tir.Schedule(func)
    sch.cache_read(sch.get_block("B"), 0, "local")  # default: every reader
    assert read_names(sch, "B") == ["A_local"] and "A_local" in read_names(sch, "C")
    check(sch, func)


def test_cache_read_names_are_unique():
    func = two_readers()
    sch = tir.Schedule(func)
    b, c = sch.get_block("B"), sch.get_block("C")
    x = sch.cache_read(b, 0, "local", consumer_blocks=[b])
    y = sch.cache_read(c, 0, "local", consumer_blocks=[c])
    assert (sch.get(x).name_hint, sch.get(y).name_hint) == ("A_local", "A_local_1")
    check(sch, func)


def test_cache_read_inside_a_shared_loop():
    func = elementwise_chain()
    sch = tir.Schedule(func)
    b, c = sch.get_block("B"), sch.get_block("C")
    sch.compute_at(b, sch.get_loops(c)[0])
    cache = sch.cache_read(c, 0, "local")
    i = sch.get_loops(c)[0]
    assert [sch.get(x).name_hint for x in sch.get_child_blocks(i)] == ["B", "B_local", "C"]
    # the copy covers the row B just produced, not the whole buffer
    assert [sch.get(lp).extent.value for lp in sch.get_loops(cache)[1:]] == [1, 6]
    check(sch, func)


def test_cache_read_in_a_nested_scope_copies_what_the_scope_reads():
    func = matmul(16, 12, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])
    sch.reorder(i0, j, i1, k)
    outer = sch.blockize(i1)  # C_o reads A[v_i_o * 4 : v_i_o * 4 + 4, 0:8]
    cache = sch.cache_read(c, 0, "local")
    assert [sch.get(x).name_hint for x in sch.get_child_blocks(outer)] == ["A_local", "C"]
    assert [b.name for b in sch.get(outer).alloc_buffers] == ["A_local"]
    assert [sch.get(lp).extent.value for lp in sch.get_loops(cache)] == [4, 8]
    binding = sch.state.block_realize("main", "A_local").iter_values[0]
    assert str(binding) == "v_i_o * 4 + ax0"
    check(sch, func)


# ----------------------------------------------------------------------------- cache_write


def test_cache_write_adds_a_write_back_block():
    func = matmul(16, 12, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    w = sch.cache_write(c, 0, "local")
    assert sch.get(w).name_hint == "C_local"
    assert root_children(sch) == ["C", "C_local"]
    assert [r.buffer.name for r in block(sch, "C").writes] == ["C_local"]
    assert [r.buffer.name for r in block(sch, "C_local").writes] == ["C"]
    assert block(sch, "C").init.buffer.name == "C_local"
    assert [sch.get(lp).extent.value for lp in sch.get_loops(c)] == [16, 12, 8]
    assert [sch.get(lp).extent.value for lp in sch.get_loops(w)] == [16, 12]
    check(sch, func)


def test_cache_write_consumer_blocks_read_the_cache():
    func = matmul_relu(16, 12, 8, select=True)
    sch = tir.Schedule(func)
    sch.cache_write(sch.get_block("C"), 0, "shared", consumer_blocks=[sch.get_block("D")])
    assert root_children(sch) == ["C", "C_shared", "D"]
    assert read_names(sch, "D") == ["C_shared"]
    check(sch, func)


def test_cache_read_and_write_on_softmax():
    A = te.placeholder((4, 6), "float32", "A")
    func = te.create_prim_func([A, te.ops.softmax(A)])
    sch = tir.Schedule(func)
    norm = sch.get_block("T_softmax_norm")
    sch.cache_read(norm, 0, "local")
    sch.cache_write(sch.get_block("T_softmax_exp"), 0, "local")
    sch.cache_write(norm, 0, "local")
    sch.cache_read(sch.get_block("T_softmax_maxelem"), 0, "shared")
    check(sch, func)


def test_cache_stages_on_conv():
    data = te.placeholder((1, 6, 6, 4), "float32", "data")
    kernel = te.placeholder((3, 3, 4, 8), "float32", "kernel")
    func = te.create_prim_func([data, kernel, te.ops.conv2d_nhwc(data, kernel, padding=1)])
    sch = tir.Schedule(func)
    conv = sch.get_block("conv2d_nhwc")
    pad = sch.cache_read(conv, 0, "shared")
    sch.cache_read(conv, 1, "local")
    w = sch.cache_write(conv, 0, "local")
    assert root_children(sch) == [
        "kernel_local",
        "PaddedInput",
        "PaddedInput_shared",
        "conv2d_nhwc",
        "conv2d_nhwc_local",
    ]
    assert [sch.get(lp).extent.value for lp in sch.get_loops(pad)] == [1, 8, 8, 4]
    assert sch.get(w).name_hint == "conv2d_nhwc_local"
    check(sch, func)


@pytest.mark.parametrize("prim", ["cache_read", "cache_write"])
def test_buffer_index_and_scope_errors(prim):
    sch = tir.Schedule(matmul(16, 12, 8))
    c = sch.get_block("C")
    kind = "read" if prim == "cache_read" else "write"
    assert_unchanged(
        sch,
        lambda: getattr(sch, prim)(c, 5, "local"),
        f"{kind} buffer index 5 is out of range for block 'C'",
    )
    assert_unchanged(
        sch,
        lambda: getattr(sch, prim)(c, 0, "foo"),
        "storage scope 'foo' is not one of global, local, shared",
    )
    root = sch.get_block("root")
    assert_unchanged(sch, lambda: getattr(sch, prim)(root, 0, "local"), "out of range")


def test_cache_errors_on_the_dataflow():
    sch = tir.Schedule(matmul_relu(16, 12, 8, select=True))
    c, d = sch.get_block("C"), sch.get_block("D")
    sch.decompose_reduction(c, sch.get_loops(c)[0])  # C_init and C both write C now
    assert_unchanged(
        sch,
        lambda: sch.cache_write(c, 0, "local"),
        "block 'C' is not the only writer of buffer 'C'",
    )
    assert_unchanged(
        sch, lambda: sch.cache_read(d, 0, "local"), "buffer 'C' is written by several blocks"
    )
    sch = tir.Schedule(two_readers())
    b, c = sch.get_block("B"), sch.get_block("C")
    assert_unchanged(
        sch,
        lambda: sch.cache_write(b, 0, "local", consumer_blocks=[b]),
        "consumer block 'B' does not read buffer 'B'",
    )
    other = tir.Schedule(matmul(16, 12, 8)).get_block("C")
    assert_unchanged(
        sch,
        lambda: sch.cache_read(b, 0, "local", consumer_blocks=[other]),
        "not a random variable of this schedule",
    )
    sch = tir.Schedule(matmul_relu(16, 12, 8, select=True))
    c, d = sch.get_block("C"), sch.get_block("D")
    assert_unchanged(
        sch,
        lambda: sch.cache_read(c, 0, "local", consumer_blocks=[d]),
        "consumer block 'D' does not read buffer 'A'",
    )


# ----------------------------------------------------------------------------- the CPU recipe


@pytest.mark.compiler
def test_cpu_matmul_recipe():
    func = matmul(16, 16, 8)
    sch = tir.Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    w = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(w, j0)
    init = sch.decompose_reduction(c, k0)
    sch.vectorize(j1)
    assert sch.get(init).name_hint == "C_init"
    assert [sch.get(x).name_hint for x in sch.get_child_blocks(j0)] == ["C_init", "C", "C_local"]
    assert [sch.get(lp).extent.value for lp in sch.get_loops(w)] == [4, 2, 4, 8]
    check(sch, func)
    from metaschedule.codegen.build import build

    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 8)).astype("float32")
    b = rng.standard_normal((8, 16)).astype("float32")
    out = np.zeros((16, 16), "float32")
    build(sch.mod)(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
