"""Memory planning: intermediate values share storage once their readers are done.

Each step's output takes the smallest free block that holds it (or a new one); a
block is freed after the last step that reads any value living in it. A zero-copy
reshape's output lives in its input's block. Model outputs keep their blocks.
Inputs and constants are not planned (they live outside the pool).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import TensorType
from .lower import Step


@dataclass(frozen=True)
class MemoryPlan:
    """``storage[value]`` is the block index of each planned value; ``sizes`` in bytes."""

    storage: dict[str, int]
    sizes: list[int]

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes)


def plan_memory(steps: list[Step], types: dict[str, TensorType], outputs: list[str]) -> MemoryPlan:
    """Assign every step output a storage block (see the module docstring)."""
    last_use: dict[str, int] = {}
    for i, s in enumerate(steps):
        for a in s.args:
            last_use[a] = i
    storage: dict[str, int] = {}
    sizes: list[int] = []
    free: list[int] = []
    block_last: dict[int, int] = {}  # block -> last step reading any value in it
    pinned: set[int] = set()
    for i, s in enumerate(steps):
        t = types[s.out]
        nbytes = max(1, int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize)
        if s.func is None and s.args[0] in storage:  # a view of its input's block
            blk = storage[s.args[0]]
        elif s.func is None:  # a view of an input or a constant: nothing to plan
            continue
        else:
            fits = [b for b in free if sizes[b] >= nbytes]
            if fits:
                blk = min(fits, key=lambda b: sizes[b])
                free.remove(blk)
            else:
                blk = len(sizes)
                sizes.append(nbytes)
        storage[s.out] = blk
        block_last[blk] = max(block_last.get(blk, i), last_use.get(s.out, i))
        if s.out in outputs:
            pinned.add(blk)
        # free the blocks whose last reader is this step (after the output took its block)
        for b, last in list(block_last.items()):
            if last <= i and b not in pinned and b not in free and b != blk:
                free.append(b)
                del block_last[b]
    return MemoryPlan(storage, sizes)
