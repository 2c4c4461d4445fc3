"""Annotations on blocks and loops (hints for code generation and the tuner)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..base import ScheduleBase, atomic
from ..error import ScheduleError
from ..instruction import InstructionKind, register_inst_kind
from ..rv import BlockRV, ExprRV, LoopRV


class AnnotateMixin(ScheduleBase):
    def _node_of(self, rv: BlockRV | LoopRV):
        if isinstance(rv, LoopRV):
            return self._loop(rv)
        fname, realize = self._block(rv)
        return fname, realize.block

    @atomic
    def annotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val: Any) -> None:
        """Attach ``ann_key = ann_val`` to a block or loop (an ExprRV stores its value)."""
        if not isinstance(ann_key, str):
            raise ScheduleError(f"annotation keys are strings, got {ann_key!r}")
        value = self._int(ann_val) if isinstance(ann_val, ExprRV) else ann_val
        if not isinstance(value, (int, float, str, list, tuple, dict, bool)):
            raise ScheduleError(f"annotation value {value!r} is not an int, float, str or list")
        fname, node = self._node_of(block_or_loop)
        new = dataclasses.replace(node, annotations={**node.annotations, ann_key: value})
        self.state.replace(fname, {node: new})
        self._record("Annotate", [block_or_loop, ann_val], [ann_key], [])

    @atomic
    def unannotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:
        """Remove the annotation ``ann_key`` from a block or loop."""
        fname, node = self._node_of(block_or_loop)
        if ann_key not in node.annotations:
            raise ScheduleError(
                f"{type(node).__name__} has no annotation {ann_key!r}; it has "
                f"{sorted(node.annotations)}"
            )
        anns = {k: v for k, v in node.annotations.items() if k != ann_key}
        self.state.replace(fname, {node: dataclasses.replace(node, annotations=anns)})
        self._record("Unannotate", [block_or_loop], [ann_key], [])


register_inst_kind(
    InstructionKind("Annotate", "annotate", inputs=("block_or_loop", "ann_val"), attrs=("ann_key",))
)
register_inst_kind(
    InstructionKind("Unannotate", "unannotate", inputs=("block_or_loop",), attrs=("ann_key",))
)
