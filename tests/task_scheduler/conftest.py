"""Fixtures for the task scheduler tests."""

import pytest


@pytest.fixture
def events():
    return []
