"""Unique names: a hint, or the hint with the first free ``_1``, ``_2``, ... suffix.

The one naming rule of the printer, the C code generator, the schedule's new blocks and
the graph builder, so that a name reads the same wherever it is made.
"""

from __future__ import annotations

from collections.abc import Container

__all__ = ["unique_name"]


def unique_name(base: str, taken: Container[str]) -> str:
    """``base`` if it is not in ``taken``, else the first of ``base_1``, ``base_2``, ...
    that is not. The caller records the name as taken."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name
