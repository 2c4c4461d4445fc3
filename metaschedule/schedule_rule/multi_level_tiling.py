"""``MultiLevelTiling``: Ansor's multi-level tiling ("SSRSRS" on CPU) with cache stages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..schedule.error import ScheduleError
from ..tir import IntImm, IterType
from .analysis import (
    TILING_STRUCTURE_KEY,
    block_consumers,
    fork,
    is_write_cache,
    loop_kinds,
    needs_multi_level_tiling,
    realize_of,
)
from .auto_bind import target_gpu_limits
from .base import ScheduleRule
from .gpu_tiling import annotate_thread_extent_bounds, joint_tile_bounds, thread_extent_bounds

if TYPE_CHECKING:
    from ..schedule import BlockRV, ExprRV, LoopRV, Schedule

__all__ = ["MultiLevelTiling", "ReuseType"]

#: block annotation that forces the write cache and lists its levels (as TVM)
WRITE_CACHE_LEVEL_KEY = "meta_schedule.write_cache_level"
#: annotation of a cache-read stage: the vector length of its cooperative fetch
COOPERATIVE_FETCH_KEY = "meta_schedule.cooperative_fetch"

FilterFn = Callable[["Schedule", "BlockRV"], bool]


@dataclass(frozen=True)
class ReuseType:
    """Whether and where MultiLevelTiling adds a cache stage (TVM's ReuseType).

    Args:
        req: "no" (never), "may" (with and without the stage: more design spaces) or
            "must" (always).
        levels: tile levels (1-based, counting spatial tile groups of the structure) at
            whose innermost loop the stage is computed; one design space per level.
        scope: the storage scope of the cache ("global", "local", "shared").
    """

    req: Literal["no", "may", "must"]
    levels: list[int] = field(default_factory=list)
    scope: str = "global"

    def __post_init__(self) -> None:
        if self.req not in ("no", "may", "must"):
            raise ValueError(f"ReuseType.req must be 'no', 'may' or 'must', got {self.req!r}")
        levels = [int(lv) for lv in self.levels]
        if any(lv < 1 for lv in levels):
            raise ValueError(f"ReuseType.levels are 1-based tile levels, got {self.levels!r}")
        object.__setattr__(self, "levels", levels)

    def as_dict(self) -> dict:
        """TVM's dict form: ``{"req": ..., "levels": [...], "scope": ...}``."""
        return {"req": self.req, "levels": list(self.levels), "scope": self.scope}


def _reuse(value: ReuseType | dict | None, what: str) -> ReuseType:
    if value is None:
        return ReuseType("no", [], "global")
    if isinstance(value, ReuseType):
        return value
    if isinstance(value, dict):
        return ReuseType(**value)
    raise TypeError(f"{what} must be a ReuseType, a dict or None, got {value!r}")


@dataclass
class _State:
    """One partial design space: the schedule, the tiled block and its tile loops."""

    sch: Schedule
    block: BlockRV
    tiles: list[list[LoopRV]] = field(default_factory=list)
    tile_factors: list[list[ExprRV]] = field(default_factory=list)

    def copy(self) -> _State:
        return _State(
            fork(self.sch),
            self.block,
            [list(t) for t in self.tiles],
            [list(f) for f in self.tile_factors],
        )


class MultiLevelTiling(ScheduleRule):
    """Tile a block's loops into the levels of ``structure``, as TVM's MultiLevelTiling.

    For each block that needs it (a reduction with data reuse and trivially bound loops;
    or any block ``filter_fn`` accepts) the rule annotates
    ``meta_schedule.tiling_structure = structure``, splits each spatial loop into as many
    tiles as the structure has ``S`` and each reduction loop into as many as it has ``R``
    (factors from ``sample_perfect_tile``), and reorders the tiles into the structure:
    for "SSRSRS" a matmul ``i, j, k`` becomes ``i0 j0 | i1 j1 | k0 | i2 j2 | k1 | i3 j3``.
    Then, with ``reuse_write``, a write cache (``cache_write``) computed at the innermost
    loop of each listed spatial tile level (``reverse_compute_at``), one design space per
    level (plus one without the cache for "may"; an existing element-wise consumer is
    moved there instead of adding a cache). With ``reuse_read``, each read is cached
    (``cache_read``) at each listed level (``compute_at``) and fused; ``vector_load_lens``
    then samples a cooperative-fetch vector length for it. ``tile_binds`` fuses the
    leading tile groups and binds them to those thread axes (GPU).

    Args:
        structure: the tiling structure, a string of ``S`` and ``R``.
        tile_binds: thread axes for the leading tile groups (GPU), e.g.
            ``["blockIdx.x", "vthread.x", "threadIdx.x"]``.
        max_innermost_factor: the largest innermost tile (None: no limit).
        vector_load_lens: vector lengths sampled for cooperative fetching of read caches.
        reuse_read: read-cache configuration (None: no read cache).
        reuse_write: write-cache configuration (None: no write cache).
        filter_fn: ``f(sch, block) -> bool`` that overrides which blocks are tiled.

    With ``tile_binds`` and a cuda TuneContext target, the block is annotated with the
    threads-per-block bounds that VerifyGPUCode enforces (as TVM: at least a warp when
    the block has more than two warps of outputs, at most ``max_threads_per_block``).

    Differs from TVM: ``structure`` defaults to "SSRSRS".
    """

    def __init__(
        self,
        structure: str = "SSRSRS",
        tile_binds: list[str] | None = None,
        max_innermost_factor: int | None = None,
        vector_load_lens: list[int] | None = None,
        reuse_read: ReuseType | dict | None = None,
        reuse_write: ReuseType | dict | None = None,
        filter_fn: FilterFn | None = None,
    ) -> None:
        if (
            not isinstance(structure, str)
            or set(structure) - {"S", "R"}
            or "S" not in structure
            or "R" not in structure
        ):
            raise ValueError(
                f"structure must be a string of 'S' and 'R' with at least one of each, got "
                f"{structure!r}"
            )
        if max_innermost_factor is not None and int(max_innermost_factor) < 1:
            raise ValueError(
                f"max_innermost_factor must be None or >= 1, got {max_innermost_factor!r}"
            )
        if filter_fn is not None and not callable(filter_fn):
            raise TypeError(f"filter_fn must be a function (sch, block) -> bool, got {filter_fn!r}")
        self.structure = structure
        self.tile_binds = list(tile_binds) if tile_binds else []
        self.max_innermost_factor = (
            None if max_innermost_factor is None else int(max_innermost_factor)
        )
        self.vector_load_lens = [int(x) for x in vector_load_lens] if vector_load_lens else []
        self.reuse_read = _reuse(reuse_read, "reuse_read")
        self.reuse_write = _reuse(reuse_write, "reuse_write")
        if self.reuse_read.req == "may":
            raise ValueError("reuse_read.req 'may' is not supported (as in TVM): use 'must'")
        self.filter_fn = filter_fn
        self._gpu_limits: tuple[int, int] | None = None  # cuda: (max threads, warp size)
        self.s_indices = [i for i, c in enumerate(structure) if c == "S"]
        self.r_indices = [i for i, c in enumerate(structure) if c == "R"]
        n_spatial_levels = len(self.s_indices)
        for what, reuse in (("reuse_read", self.reuse_read), ("reuse_write", self.reuse_write)):
            if reuse.req != "no" and any(lv > n_spatial_levels for lv in reuse.levels):
                raise ValueError(
                    f"{what}.levels {reuse.levels} exceed the {n_spatial_levels} spatial tile "
                    f"levels of structure {structure!r}"
                )

    def _initialize_with_tune_context(self, context: Any) -> None:
        self._gpu_limits = target_gpu_limits(context)

    # ------------------------------------------------------------------------------ apply
    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not self._wanted(sch, block):
            return [sch]
        return self._tile(sch, block)

    def _wanted(self, sch: Schedule, block: BlockRV) -> bool:
        """The block is to be tiled: not the root, and ``filter_fn`` (or TVM's
        NeedsMultiLevelTiling) accepts it."""
        fname, realize = realize_of(sch, block)
        if sch.state.scope_realize(fname, realize) is None:
            return False
        if self.filter_fn is not None:
            return bool(self.filter_fn(sch, block))
        return needs_multi_level_tiling(sch, fname, realize)

    def _tile(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        """Annotate, tile and add the cache stages: the design spaces."""
        sch.annotate(block, TILING_STRUCTURE_KEY, self.structure)
        states = [_State(sch, block)]
        for step in (self._tile_loop_nest, self._add_write_reuse, self._add_read_reuse):
            states = [new for state in states for new in step(state)]
        return [s.sch for s in states]

    # ------------------------------------------------------------------------------ tiling
    def _innermost_limit(self, extent: int) -> int:
        # TVM records -1 for "no limit"; sample_perfect_tile here takes the bound as is
        return self.max_innermost_factor if self.max_innermost_factor is not None else extent

    def _tile_loop_nest(self, state: _State) -> list[_State]:
        sch, block = state.sch, state.block
        loops = self._loops_to_tile(state)
        # with trivial bindings, the kinds of the block's iteration variables (TVM's
        # assumption); the loops' own kinds also serve blocks a filter_fn picked
        fname, _ = realize_of(sch, block)
        iter_types = loop_kinds(sch, fname, [sch.get(lp) for lp in loops])
        tiles: list[list[LoopRV]] = [[] for _ in self.structure]
        factors: list[list[ExprRV]] = [[] for _ in self.structure]
        joint = self._sample_thread_tiles(sch, block, loops, iter_types)
        for loop, kind in zip(loops, iter_types):
            if kind == IterType.DATA_PAR:
                idx = self.s_indices
            elif kind == IterType.COMM_REDUCE:
                idx = self.r_indices
            else:
                continue
            if len(idx) == 1:
                tiles[idx[0]].append(loop)
                continue
            if kind == IterType.DATA_PAR and joint is not None:
                sampled = joint.pop(0)
            else:
                extent = sch.get(loop).extent
                limit = self._innermost_limit(extent.value if isinstance(extent, IntImm) else 1)
                sampled = sch.sample_perfect_tile(loop, n=len(idx), max_innermost_factor=limit)
            splits = sch.split(loop, sampled)
            for pos, part, f in zip(idx, splits, sampled):
                tiles[pos].append(part)
                factors[pos].append(f)
        sch.reorder(*[lp for tile in tiles for lp in tile])
        for i, axis in enumerate(self.tile_binds[: len(tiles)]):
            fused = sch.fuse(*tiles[i])
            sch.bind(fused, axis)
            tiles[i] = [fused]
        if self.tile_binds:
            annotate_thread_extent_bounds(sch, block, self._gpu_limits)
        state.tiles, state.tile_factors = tiles, factors
        return [state]

    def _loops_to_tile(self, state: _State) -> list[LoopRV]:
        """The block's loops this rule tiles: all of them (a subclass may keep some)."""
        return state.sch.get_loops(state.block)

    def _sample_thread_tiles(
        self, sch: Schedule, block: BlockRV, loops: list[LoopRV], iter_types: list
    ) -> list[list[ExprRV]] | None:
        """On a cuda target, the spatial loops' tiles drawn together
        (``sample_joint_tile``) so that the threads per block land within the bounds
        VerifyGPUCode checks and the virtual threads within 8 (TVM samples each loop
        alone, and most of its GPU samples fail that check); None: sample per loop."""
        if not self.tile_binds or self._gpu_limits is None or len(self.s_indices) < 2:
            return None
        spatial = [lp for lp, kind in zip(loops, iter_types) if kind == IterType.DATA_PAR]
        extents = [sch.get(lp).extent for lp in spatial]
        if not spatial or not all(isinstance(e, IntImm) for e in extents):
            return None
        bounds = joint_tile_bounds(
            self.tile_binds, self.s_indices, thread_extent_bounds(sch, block, self._gpu_limits)
        )
        if not bounds:
            return None
        n = len(self.s_indices)
        limit = self._innermost_limit(max(e.value for e in extents if isinstance(e, IntImm)))
        flat = sch.sample_joint_tile(spatial, n, max_innermost_factor=limit, bounds=bounds)
        return [flat[i * n : (i + 1) * n] for i in range(len(spatial))]

    def _level_loop(self, state: _State, level: int) -> LoopRV:
        """The innermost loop of spatial tile level ``level`` (1-based)."""
        return state.tiles[level - 1][-1]

    # ------------------------------------------------------------------------------ caches
    def _add_write_reuse(self, state: _State) -> list[_State]:
        config = self.reuse_write
        req, levels = config.req, list(config.levels)
        forced = state.sch.get(state.block).annotations.get(WRITE_CACHE_LEVEL_KEY)
        if forced is not None:
            req, levels = "must", [int(x) for x in forced]
        if req == "no":
            return [state]
        results: list[_State] = []
        if req == "may":
            sch = state.sch
            fname, realize = realize_of(sch, state.block)
            found = block_consumers(sch, fname, realize)
            if len(found) == 1 and is_write_cache(found[0].block):
                consumer = sch.get_block(found[0].block.name_hint, fname)
                for level in levels:
                    new = state.copy()
                    try:
                        new.sch.reverse_compute_at(consumer, self._level_loop(new, level), True)
                    except ScheduleError:  # e.g. a shifted (padding) consumer: no fusion
                        continue
                    results.append(new)
                results.append(state)
                return results
            results.append(state.copy())
        cache = state.sch.cache_write(state.block, 0, config.scope)
        for level in levels:
            new = state.copy()
            new.sch.reverse_compute_at(cache, self._level_loop(new, level), True)
            results.append(new)
        return results

    def _add_read_reuse(self, state: _State) -> list[_State]:
        config = self.reuse_read
        if config.req == "no":
            return [state]
        results = []
        written = {w.buffer for w in state.sch.get(state.block).writes}
        reads = list(state.sch.get(state.block).reads)
        for level in config.levels:
            new = state.copy()
            sch = new.sch
            loop = self._level_loop(new, level)
            for i, read in enumerate(reads):
                if read.buffer in written:
                    continue
                cache = sch.cache_read(new.block, i, config.scope, [new.block])
                sch.compute_at(cache, loop, True)
                ndim = len(read.buffer.shape)
                loops = sch.get_loops(cache)
                sch.fuse(*loops[len(loops) - ndim :])
                self._annotate_cooperative_fetch(sch, cache)
            results.append(new)
        return results

    def _annotate_cooperative_fetch(self, sch: Schedule, cache: BlockRV) -> None:
        if not self.vector_load_lens:
            return
        n = len(self.vector_load_lens)
        vec = sch.sample_categorical(self.vector_load_lens, [1.0 / n] * n)
        sch.annotate(cache, COOPERATIVE_FETCH_KEY, vec)

    def __repr__(self) -> str:
        return (
            f"MultiLevelTiling(structure={self.structure!r}, tile_binds={self.tile_binds or None}"
            f", max_innermost_factor={self.max_innermost_factor}, "
            f"vector_load_lens={self.vector_load_lens or None}, reuse_read={self.reuse_read}, "
            f"reuse_write={self.reuse_write})"
        )
