"""``MultiLevelTilingWithIntrin``: multi-level tiling around a tensor intrinsic's tile."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..codegen.c_intrin import usable_tensor_intrins
from ..tir.tensor_intrin import TensorIntrin
from .analysis import AUTO_TENSORIZE_KEY
from .multi_level_tiling import MultiLevelTiling, ReuseType, _State
from .tile_with_tensor_intrin import apply_intrin_tiling, find_intrin_tiling, intrin_loops

if TYPE_CHECKING:
    from ..schedule import BlockRV, LoopRV, Schedule

__all__ = ["INT8_DOT_PRODUCTS", "SATURATING_DOT_PRODUCTS", "MultiLevelTilingWithIntrin"]

#: The int8 dot products ``ScheduleRule.create("llvm")`` tries, best first: those exact for
#: every input (AVX512-VNNI, AVX-VNNI, the AVX512-BW and AVX2 sequences that widen to int16
#: first, ARM's sdot/udot). Scheduling never changes results, so TVM's AVX512-BW and AVX2
#: sequences (:data:`SATURATING_DOT_PRODUCTS`) are left out:
#: name one to use it (``MultiLevelTilingWithIntrin("dot_8x4_avx2")``) when activations
#: stay below 128 or weights within [-64, 63] (onnxruntime's ``reduce_range``).
INT8_DOT_PRODUCTS: tuple[str, ...] = (
    "dot_16x4_vnni",
    "dot_8x4_avxvnni",
    "dot_16x4_avx512_exact",
    "dot_8x4_avx2_exact",
    "dot_4x4_i8i8s32_sdot",
    "dot_4x4_u8u8u32_udot",
)
#: ``vpmaddubsw`` sums u8 x s8 products in pairs into int16 with saturation: results
#: differ from numpy's when both products of a pair are large (255 * 127 * 2 > 32767);
#: see :mod:`metaschedule.tir.tensor_intrin.dot_product`.
SATURATING_DOT_PRODUCTS: tuple[str, ...] = ("dot_16x4_avx512", "dot_8x4_avx2")


class MultiLevelTilingWithIntrin(MultiLevelTiling):
    """Tile a block for a tensor intrinsic, then tile the loops around it (TVM's rule).

    For each block MultiLevelTiling would tile and that can compute ``intrin_name``'s
    description in its innermost loops (:func:`.tile_with_tensor_intrin.
    tile_with_tensor_intrin`: the loops that map to the intrinsic's are split by its
    extents and their inner parts moved innermost; an operand read crosswise is first
    copied into a re-indexed buffer), the block is annotated
    ``meta_schedule.auto_tensorize = <intrinsic>`` and the loops above the intrinsic's are
    tiled as :class:`MultiLevelTiling` tiles a block's loops. The postprocessor
    :class:`~metaschedule.postproc.RewriteTensorize` then replaces the inner loops by the
    intrinsic. Other blocks are left as they are (for the rules that follow).

    Args:
        intrin_name: the tensor intrinsic's name; or several, in order of preference: the
            rule then tries, for each block, those the TuneContext's target can run
            (``usable_tensor_intrins``) and uses the first that fits the block; it does
            nothing without a context. ``ScheduleRule.create("llvm")`` passes the int8 dot
            products this way (:data:`INT8_DOT_PRODUCTS`).
        structure, tile_binds, max_innermost_factor, vector_load_lens, reuse_read,
            reuse_write: as :class:`MultiLevelTiling`.

    Where we differ from TVM: the inner loops stay as they are (TVM blockizes them into a
    block the rule annotates; here the tiled block carries the annotation and
    ``RewriteTensorize`` blockizes and tensorizes after the init has been split off), no
    padding of extents the intrinsic does not divide, and the list form of
    ``intrin_name``.
    """

    def __init__(
        self,
        intrin_name: str | Sequence[str],
        structure: str = "SSRSRS",
        tile_binds: list[str] | None = None,
        max_innermost_factor: int | None = 64,
        vector_load_lens: list[int] | None = None,
        reuse_read: ReuseType | dict | None = None,
        reuse_write: ReuseType | dict | None = None,
    ) -> None:
        super().__init__(
            structure=structure,
            tile_binds=tile_binds,
            max_innermost_factor=max_innermost_factor,
            vector_load_lens=vector_load_lens,
            reuse_read=reuse_read,
            reuse_write=reuse_write,
        )
        if isinstance(intrin_name, str):
            names = [intrin_name]
        elif isinstance(intrin_name, Sequence):
            names = list(intrin_name)
        else:
            names = []
        if not names or not all(isinstance(n, str) for n in names):
            raise TypeError(
                f"intrin_name must be a tensor intrinsic's name or a list of names, got "
                f"{intrin_name!r}"
            )
        unknown = [n for n in names if TensorIntrin.get(n, allow_missing=True) is None]
        if unknown:
            raise ValueError(
                f"MultiLevelTilingWithIntrin: no tensor intrinsic named {', '.join(unknown)}; "
                f"registered: {', '.join(TensorIntrin.names())}"
            )
        self.intrin_name: str | list[str] = intrin_name if isinstance(intrin_name, str) else names
        #: the intrinsics tried, in order: the one given, or those of the list the target
        #: can run
        self.candidates: list[str] = [intrin_name] if isinstance(intrin_name, str) else []

    def _initialize_with_tune_context(self, context: Any) -> None:
        super()._initialize_with_tune_context(context)
        if isinstance(self.intrin_name, str):
            return
        target = getattr(context, "target", None)
        self.candidates = []
        if target is None or target.kind not in ("llvm", "cpu"):
            return
        usable = set(usable_tensor_intrins(target))
        self.candidates = [n for n in self.intrin_name if n in usable]

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not self.candidates or not self._wanted(sch, block):
            return [sch]
        for name in self.candidates:  # the first that fits the block (e.g. its dtypes)
            plan = find_intrin_tiling(sch, block, name)
            if plan is not None:
                apply_intrin_tiling(sch, block, plan)
                sch.annotate(block, AUTO_TENSORIZE_KEY, name)
                return self._tile(sch, block)
        return [sch]

    def _loops_to_tile(self, state: _State) -> list[LoopRV]:
        """The loops above the intrinsic's (which the tiling leaves innermost)."""
        loops = state.sch.get_loops(state.block)
        name = state.sch.get(state.block).annotations.get(AUTO_TENSORIZE_KEY)
        intrin = TensorIntrin.get(name, allow_missing=True) if isinstance(name, str) else None
        inner = len(intrin_loops(intrin) or []) if intrin is not None else 0
        return loops[: len(loops) - inner]

    def __repr__(self) -> str:
        return (
            f"MultiLevelTilingWithIntrin(intrin_name={self.intrin_name!r}, "
            + (super().__repr__().split("(", 1)[1])
        )
