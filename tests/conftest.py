"""Test-wide settings: hypothesis draws the same examples on every run, so CI is repeatable.

Explore more freely by hand with ``--hypothesis-seed=random`` or a larger
``--hypothesis-profile``.
"""

from hypothesis import settings

settings.register_profile("default", derandomize=True, deadline=None)
settings.load_profile("default")


def pytest_addoption(parser):
    parser.addoption(
        "--fuzz-long",
        action="store_true",
        default=False,
        help="run the fuzzer (tests/fuzz) on many more programs (minutes, not seconds)",
    )
