"""Test doubles and workloads shared by the tests (importable by worker processes)."""
