import pytest

from metaschedule import testing


@pytest.fixture
def matmul():
    return testing.matmul(16, 12, 8)


@pytest.fixture
def matmul_relu():
    return testing.matmul_relu(16, 12, 8, select=True)
