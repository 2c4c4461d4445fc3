import pytest

from metaschedule import te


def make_matmul(n=16, m=12, k=8, dtype="float32"):
    A = te.placeholder((n, k), dtype, "A")
    B = te.placeholder((k, m), dtype, "B")
    r = te.reduce_axis((0, k), "k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def make_matmul_relu(n=16, m=12, k=8):
    A = te.placeholder((n, k), "float32", "A")
    B = te.placeholder((k, m), "float32", "B")
    r = te.reduce_axis((0, k), "k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = te.compute(
        (n, m),
        lambda i, j: (
            te.max(C[i, j], 0.0) if False else te.if_then_else(C[i, j] > 0.0, C[i, j], 0.0)
        ),
        name="D",
    )
    return te.create_prim_func([A, B, D])


@pytest.fixture
def matmul():
    return make_matmul()


@pytest.fixture
def matmul_relu():
    return make_matmul_relu()
