"""Fixtures shared by the code generator's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def session_kernel_cache(tmp_path_factory, monkeypatch):
    """Build kernels into one cache for the test session, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
