"""How databases decide that two modules are the same workload.

Three kinds, as in TVM:

- ``"structural"``: structural equality and hash of the whole module.
- ``"ignore-tensor"``: the same, ignoring the raw data of constant tensors. Our IR keeps no
  constant tensor data in modules (parameters are buffers, bound at call time), so this is
  the structural comparison; the name is accepted so that TVM scripts run unchanged.
- ``"anchor-block"``: compare only the *anchor block* of each module (see
  :func:`~metaschedule.tir.analysis.find_anchor_block`, re-exported here), with its free
  buffers matched by position. Two fused operators that share their main computation
  (say, a matmul followed by different element-wise epilogues) are then one workload, so
  a tuned schedule for one serves the other. A module without blocks falls back to the
  structural comparison.

The hash of a kind always agrees with its equality, and is the same in every process.
"""

from __future__ import annotations

from typing import Any, Literal

from ..tir.analysis import block_work, find_anchor_block
from ..tir.function import IRModule, PrimFunc, as_module
from ..tir.structural import structural_equal, structural_hash

__all__ = ["MODULE_EQUALITY_KINDS", "ModuleEquality", "block_work", "find_anchor_block"]

ModuleEqualityKind = Literal["structural", "ignore-tensor", "anchor-block"]
MODULE_EQUALITY_KINDS: tuple[str, ...] = ("structural", "ignore-tensor", "anchor-block")


class ModuleEquality:
    """Equality and hash of modules under one of :data:`MODULE_EQUALITY_KINDS`."""

    def __init__(self, kind: ModuleEqualityKind = "structural"):
        if kind not in MODULE_EQUALITY_KINDS:
            raise ValueError(
                f"unknown module_equality {kind!r}; expected one of: "
                f"{', '.join(MODULE_EQUALITY_KINDS)}"
            )
        self.kind = kind

    def _key(self, mod: Any) -> tuple[Any, bool]:
        """(the node to compare, whether its free variables are matched by position)."""
        mod = as_module(mod)
        if self.kind == "anchor-block":
            anchor = find_anchor_block(mod)
            if anchor is not None:
                return anchor, True
        return mod, False

    def hash(self, mod: IRModule | PrimFunc) -> int:
        """A deterministic 63-bit hash, consistent with :meth:`equal`."""
        return structural_hash(self._key(mod)[0])

    def equal(self, a: IRModule | PrimFunc, b: IRModule | PrimFunc) -> bool:
        (ka, free_a), (kb, free_b) = self._key(a), self._key(b)
        if free_a != free_b:
            return False
        return structural_equal(ka, kb, map_free_vars=free_a)

    def __repr__(self) -> str:
        return f"ModuleEquality({self.kind!r})"
