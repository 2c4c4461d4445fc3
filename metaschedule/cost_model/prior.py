"""``AnalyticPrior``: a hand-written CPU cost estimate that ranks schedules with no data.

While a learned cost model is warming up (fewer than ``num_warmup_samples`` measured) its
scores are random, so the first batches of a search would be uniform random samples of
the design space. This prior ranks them instead, from the lowered loop nest of each
candidate (the walk and index forms of :mod:`metaschedule.feature_extractor.features`),
with a few facts about a CPU and our C code generator, and no table per operator:

* **vector work**: the body of a ``vectorized`` loop runs once per chunk of the target's
  native lanes; a unit-stride access is one vector load or store, an invariant one a
  broadcast, any other stride is gathered lane by lane; a scalar innermost loop whose
  accesses are unit-stride gets half the lanes (the C compiler may vectorize it itself).
  Indices are read after simplifying ``//`` and ``%`` over the loops' ranges (a weight
  packed as ``[c // 16, ..., c % 16]`` is contiguous along the channel vector). The
  padding guards of an accumulation cost nothing where the code generator versions them
  (:mod:`~metaschedule.codegen.c_versioning`, run on the lowered nest: an unguarded copy
  for the interior); vectors wider than the core's datapath take several FMA and load
  passes (:attr:`Machine.datapath_bits`);
* **register tiles**: a reduction's output tile stays in registers where the code
  generator keeps it there (:mod:`~metaschedule.codegen.c_accumulate`): from the outermost
  serial reduction loop heading a perfect nest, the loops below it that move the stored
  element (reduction loops among them are hoisted above the tile), when they make at most
  ``Machine.limits.max_accumulators`` vectors. Then the
  accumulator costs nothing per update, operand loads are shared by the tile's points
  (distinct elements per sweep of the tile), and the FMA latency needs enough independent
  accumulators (``fma_latency x fma_ports``), unless an entry into the tile's region is
  short enough (a 3x3 window) for the reorder window to overlap the next ones. The
  reduction's init costs nothing: it is folded into the accumulators. A split tile
  (:data:`~metaschedule.codegen.c_accumulate.SPLIT_LARGE_TILES`) is loaded and stored
  once per iteration of its outer loops. A tile of more vectors than the register
  file (32 on AVX-512) spills: every update reloads and stores its accumulator, several
  times over (:data:`SPILLED_UPDATE_SLOWDOWN`), which ranks such tiles below any that
  fit. Operand lines the tile reaches with a stride of many lines fall into few L1 sets
  (the rows of a 1024-wide float matrix, 4 KiB apart: one set; rows 14 KiB apart: two);
  more of them in a set than it has ways are fetched from L2 on every sweep; so are the
  lines a region reuses (a window's rows with their halo, the rows of the stored tile)
  when they crowd a set beyond its ways. A region the code generator writes out step by
  step (a 3x3 window) loads each distinct operand vector once and keeps it in a register,
  when the registers hold them; a split tile's outer loops run around its region, and
  the caches see the loops in that order. A serial row over a reduction (``for j: for
  k: C[j] += ...``) is vector code, the row innermost
  (:func:`~metaschedule.codegen.c_vector.vectorize_outputs`): the store is estimated with
  its loops in that order, the row a tile of vectors. When a tile's region is written
  out (unrolled explicitly, or step by step), the operand loads that the loop around it
  does not move are made once before that loop, within the registers left
  (:mod:`~metaschedule.codegen.c_invariant`: a matmul row's ``B`` panel, read by every
  row). Without a register tile, a reduction whose innermost loop does not move the stored
  element waits on a memory round trip per update;
* **caches**: for each cache level, the outermost loop whose sweep fits (the footprints
  of all buffers of the store) decides the bytes brought in from the next level, over
  its bandwidth; a buffer that the loop right outside does not move stays cached across
  that loop's iterations (a weight panel reused by every row block), and so does the
  part consecutive iterations share when the next one's new data fits beside it (the
  halo of a convolution window);
* **parallelism**: the extent of the parallel loops above a store against the cores
  (idle cores in the last round count), plus a fork/join cost per parallel region entry.

The estimate of a store is the largest of its compute, L1 access, latency and
cache-traffic times plus a share of the others (:data:`PARTIAL_OVERLAP`: they overlap
only in part), divided by its parallel speed-up; a schedule's estimate is the sum
over its stores; the score is ``1 / estimated seconds`` (higher is better, as every cost
model's). It is a ranking aid, not a simulator: ``benchmarks/prior_rank.py`` measures how
well it ranks real schedules.

The search uses it while the learned model warms up
(:class:`~metaschedule.search_strategy.EvolutionarySearch` ``prior=``): it samples
``oversample`` times the batch of random schedules, refines them for ``refine_rounds``
rounds (mutations of the prior's best, every mutator alike, scored by the prior: the
random samples seldom hold the register tiles or compute locations it rates best), and
measures the ones the prior ranks highest, keeping
a share ``random_share`` of random picks among the random samples.
"""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..codegen import c_codegen
from ..codegen.c_accumulate import (
    HOIST_INNER_REDUCTIONS,
    JAM_SMALL_TILES,
    MERGE_CONTIGUOUS,
    MIN_STRAIGHT_LANES,
    SHARE_BROADCASTS,
    SPLIT_LARGE_TILES,
    STRAIGHT_STATEMENTS,
    STRAIGHT_STEPS,
    TileLimits,
    _chunks,
)
from ..codegen.c_autovector import vectorize_scalar_nests, widen_vector_loops
from ..codegen.c_codegen import AUTO_UNROLL_STEPS, EXPLICIT_TILE_STEPS, EXPLICIT_UNROLL_STEPS
from ..codegen.c_invariant import HOIST_INVARIANT_LOADS, MAX_INVARIANT_SHARE, InvariantScope
from ..codegen.c_vector import MIN_OUTPUT_LANES, VECTORIZE_OUTPUTS
from ..codegen.c_versioning import adds_tests
from ..codegen.isa import isa_of, named_isa
from ..feature_extractor.features.buffers import BufferStats
from ..feature_extractor.features.linear import LinearForm
from ..feature_extractor.features.loop_nest import LoopNestWalker, Store, const_int
from ..feature_extractor.features.ops import count_store
from ..feature_extractor.per_store_feature import FEATURE_LOWER_PASSES
from ..registry import register
from ..target import HostCpuInfo, host_cpu_info, is_host
from ..tir import expr as E
from ..tir.arith.analyzer import Analyzer
from ..tir.dtype import is_bool, is_float, nbytes
from ..tir.function import IRModule, PrimFunc
from ..tir.functor import Visitor
from ..tir.stmt import ForKind, Range
from ..tir.transform import lower
from .base import CostModel

if TYPE_CHECKING:
    from ..measure_candidate import MeasureCandidate
    from ..runner import RunnerResult

__all__ = ["AnalyticPrior", "Machine", "register_tiles"]

# op kinds of ``count_store`` (layout.OP_NAMES): 7 float, 7 int, bool, select
_F_MAD, _F_ADD, _F_MUL, _F_DIV, _F_CMP, _F_MATH, _F_OTHER = range(7)
_BOOL, _SELECT = 14, 15
#: cycles (per lane-chunk) of one op of each float kind, then bool and select
_OP_CYCLES = {
    _F_MAD: 0.5,
    _F_ADD: 0.5,
    _F_MUL: 0.5,
    _F_DIV: 4.0,
    _F_CMP: 0.5,
    _F_MATH: 12.0,
    _F_OTHER: 2.0,
    _BOOL: 0.5,
    _SELECT: 0.5,
}

#: a register tile of more vectors than the machine has registers: each update of a
#: spilled accumulator costs this many reloads and stores of it (measured on a 1x1
#: convolution with a 49-vector tile of 16 lanes and 32 registers: 9.6x slower than the
#: same schedule with the tile left in memory, 1.20 vs 0.125 ms)
SPILLED_UPDATE_SLOWDOWN = 4.0

#: the times of a store's compute, L1 accesses and cache traffic overlap only in part:
#: the largest counts whole and this share of the others adds to it. With the largest
#: alone, the FMA bound of 16-lane vectors on a 256-bit datapath (one per cycle) hid
#: every memory term of sampled 1024^3 matmul schedules: those that ran 10 to 36 ms were
#: all estimated at that bound (rank correlation 0.27 over 138 measured ones).
PARTIAL_OVERLAP = 0.5


@dataclass(frozen=True)
class Machine:
    """What the prior assumes of one core and the chip (defaults: a recent x86 server).

    ``lanes`` and ``cores`` default to the target's ``vector_width`` and ``num_cores``.
    ``fma_ports`` and ``loads_per_cycle`` count vectors of ``lanes``; :meth:`of_target`
    scales them for vectors wider than ``datapath_bits``.
    """

    # Measured on the project's 2-core EPYC Zen 5 (cpu family 26, 4.2 GHz) with
    # benchmarks/prior_constants.c; "ranks" is benchmarks/prior_rank.py on 64 measured
    # random schedules each of cbr, c2d, tbg, dns and gmm, scored with each value.
    lanes: int = 8
    cores: int = 1
    vector_registers: int = 32
    #: the code generator's register-tile limits (:class:`~metaschedule.codegen.
    #: c_accumulate.TileLimits`) on the target's ISA
    limits: TileLimits = TileLimits.of(named_isa("x86-64-v4"))  # type: ignore[arg-type]
    #: measured 4.0 cycles a 16-lane FMA in one dependent chain
    fma_latency: float = 4.0
    #: measured 1.97 16-lane FMAs a cycle (12 chains); of_target halves it on a 256-bit
    #: datapath
    fma_ports: float = 2.0
    #: measured 1.96-1.99 16-lane loads a cycle from L1 (FMAs with two loaded operands)
    loads_per_cycle: float = 2.0
    #: measured 0.89 16-lane stores a cycle into L1
    stores_per_cycle: float = 1.0
    #: cycles: store-to-load forwarding of an accumulator. Measured: a 16-lane FMA chain
    #: through memory takes 15.1 cycles an FMA (4 of them the FMA); kept: at 11 or 15 the
    #: ranks did not change (their random schedules keep every update in registers)
    memory_round_trip: float = 5.0
    reorder_window: float = 256.0  # instructions in flight (the reorder buffer)
    l1_bytes: int = 32 * 1024
    l1_ways: int = 8
    l2_bytes: int = 1024 * 1024
    l2_ways: int = 16
    #: measured: a 512 KiB buffer read at 61.8 bytes a cycle (61.1 per core with both
    #: reading), an 8 MiB one (L3) at 27.3; kept at 32 and 12, the balance the prior was
    #: tuned to (the L1 set conflicts are priced in it): 61 and 26 moved the rank
    #: correlations by -0.04 to +0.05 (cbr -0.02, c2d 0, tbg -0.04, dns +0.05, gmm -0.01)
    #: and the simulated warm-up batches' best not at all
    l2_bytes_per_cycle: float = 32.0
    l3_bytes_per_cycle: float = 12.0
    #: measured per entry into an `omp parallel for` of 2 iterations on 2 threads, as the
    #: runner times on a quiet machine (GOMP_SPINCOUNT=10000): 1.9k cycles empty, 5.3-6.0k
    #: around 2 x 2-20 us of work; under passive waiting (a busy machine) 33k-184k. The
    #: ranks did not change from 2000 to 180000
    fork_join_cycles: float = 4000.0
    hz: float = 3.0e9
    #: width of the FMA and load units: a wider vector takes several passes (AMD Zen 4
    #: runs a 512-bit FMA or load as two 256-bit halves: measured there, 16-lane FMA
    #: chains peak at one vector per cycle and core). :meth:`of_target` reads it from
    #: the host (:func:`~metaschedule.target.vector_datapath_bits`).
    datapath_bits: int = 256

    @staticmethod
    def of_target(
        target: Any, datapath_bits: int | None = None, host: HostCpuInfo | None = None
    ) -> Machine:
        """The machine ``target`` names: the defaults with its ISA's facts
        (:func:`~metaschedule.codegen.isa.isa_of`: float32 lanes, vector registers, FMA
        pipes, latency and datapath, register-tile limits) and cores and, when it is the
        host (:func:`~metaschedule.target.is_host`: ``-mcpu=native``), the host's datapath
        width, the target's L1 and L2 sizes and the host's ways; the defaults for any fact
        missing and for the caches of other targets. The FMA and load rates are scaled
        for vectors wider than the datapath.

        Args:
            target: a :class:`~metaschedule.target.Target` (anything else: the defaults).
            datapath_bits: the datapath width, over what the host says.
            host: the host's facts (default: :func:`~metaschedule.target.host_cpu_info`).
        """
        base = Machine()
        try:
            isa = isa_of(target, host)
        except (ValueError, TypeError):  # not a Target: what it tells of its lanes
            try:
                lanes, cores = int(target.vector_lanes("float32")), int(target.num_cores)
            except (AttributeError, ValueError, TypeError):
                return base
            passes = max(1.0, lanes * 32 / base.datapath_bits)
            return replace(
                base,
                lanes=max(1, lanes),
                cores=max(1, cores),
                fma_ports=base.fma_ports / passes,
                loads_per_cycle=base.loads_per_cycle / passes,
            )
        facts: dict[str, Any] = {"datapath_bits": isa.datapath_bits}
        if is_host(target, host):  # the caches of the host only (their ways come from it)
            host = host if host is not None else host_cpu_info()
            facts = {
                "datapath_bits": host.datapath_bits or isa.datapath_bits,
                "l1_bytes": isa.l1_bytes,
                "l1_ways": host.l1_cache_ways,
                "l2_bytes": isa.l2_bytes,
                "l2_ways": host.l2_cache_ways,
            }
        if datapath_bits is not None:
            facts["datapath_bits"] = datapath_bits
        facts = {k: int(v) for k, v in facts.items() if v}
        lanes = isa.lanes("float32")
        passes = max(1.0, lanes * 32 / facts.get("datapath_bits", base.datapath_bits))
        # the FMA pipes of the ISA (its datapath wide); the load ports as many
        ports = float(isa.fma_units)
        return replace(
            base,
            lanes=lanes,
            cores=max(1, int(target.num_cores)),
            vector_registers=isa.vector_registers,
            fma_latency=float(isa.fma_latency),
            fma_ports=ports / passes,
            loads_per_cycle=base.loads_per_cycle / passes,
            limits=TileLimits.of(isa),
            **facts,
        )


@register("cost_model", "analytic-prior")
class AnalyticPrior(CostModel):
    """Ranks CPU schedules by an analytic estimate of their run time (module docstring).

    A :class:`CostModel` that learns nothing (``update`` is a no-op): ``predict`` gives
    ``1 / estimated seconds`` per candidate.

    Args:
        oversample: random schedules sampled per schedule to pick, while it guides a
            warming-up search (at least 1; 1 means the prior only reorders).
        random_share: share of a warm-up batch picked at random among the samples, for
            diversity (the rest are the prior's best).
        refine_rounds: rounds of mutating the prior's best samples (half as many
            children as samples per round, scored by the prior) before it picks; 0: it
            picks among the random samples only. Three: the depthwise convolution's fast
            structures (padding inlined, a few pixels' tile over the 3x3 window) take two
            changes from the random samples' best (the padding's location and the
            tile), which two rounds reached for neither of two seeds, three for both.
        machine: the CPU assumed; by default from the tuning context's target.
    """

    def __init__(
        self,
        *,
        oversample: int = 4,
        random_share: float = 0.25,
        refine_rounds: int = 3,
        machine: Machine | None = None,
    ) -> None:
        if not isinstance(oversample, int) or isinstance(oversample, bool) or oversample < 1:
            raise ValueError(f"AnalyticPrior: oversample must be an int >= 1, got {oversample!r}")
        if not 0.0 <= float(random_share) <= 1.0:
            raise ValueError(f"AnalyticPrior: random_share must be in [0, 1], got {random_share!r}")
        if (
            not isinstance(refine_rounds, int)
            or isinstance(refine_rounds, bool)
            or refine_rounds < 0
        ):
            raise ValueError(
                f"AnalyticPrior: refine_rounds must be an int >= 0, got {refine_rounds!r}"
            )
        self.oversample = oversample
        self.random_share = float(random_share)
        self.refine_rounds = refine_rounds
        self.machine = machine
        self._cache: dict[int, tuple[Any, Machine, float]] = {}  # id(mod) -> (mod, m, score)
        self._indices: IndexMemo = {}  # simplified indices of the stores' accesses

    def clone(self) -> AnalyticPrior:
        """A copy with the same settings (of the same class) and empty caches."""
        twin = copy.copy(self)
        twin._cache = {}
        twin._indices = {}
        return twin

    def __str__(self) -> str:
        return (
            f"AnalyticPrior(oversample={self.oversample}, random_share={self.random_share}, "
            f"refine_rounds={self.refine_rounds})"
        )

    # ---------------------------------------------------------------- CostModel interface
    def load(self, path: str) -> None:
        """Nothing to load: the prior has no parameters learned from data."""

    def save(self, path: str) -> None:
        """Nothing to save: the prior has no parameters learned from data."""

    def update(
        self, context: Any, candidates: list[MeasureCandidate], results: list[RunnerResult]
    ) -> None:
        """The prior does not learn."""

    def predict(self, context: Any, candidates: list[MeasureCandidate]) -> np.ndarray:
        """``1 / estimated seconds`` of each candidate (higher is better)."""
        machine = self.machine or Machine.of_target(getattr(context, "target", None))
        return np.array([self.score_mod(c.sch.mod, machine) for c in candidates], dtype=float)

    # ---------------------------------------------------------------- the estimate
    def score_mod(self, mod: IRModule | PrimFunc, machine: Machine | None = None) -> float:
        """``1 / estimated seconds`` of a scheduled (not lowered) module."""
        machine = machine or self.machine or Machine()
        hit = self._cache.get(id(mod))
        if hit is not None and hit[0] is mod and hit[1] == machine:
            return hit[2]
        cycles = self.estimate_cycles(mod, machine)
        score = machine.hz / cycles if cycles > 0 else 0.0
        if len(self._cache) > 8192:
            self._cache.clear()
        self._cache[id(mod)] = (mod, machine, score)
        return score

    def estimate_cycles(self, mod: IRModule | PrimFunc, machine: Machine) -> float:
        """Estimated cycles of one call of ``mod`` (the sum over its stores)."""
        funcs = [mod] if isinstance(mod, PrimFunc) else list(mod.functions.values())
        total = 0.0
        for func in funcs:
            walker = LoopNestWalker()
            body = _as_emitted(lower(func, FEATURE_LOWER_PASSES).body, machine)
            walker.walk(body)
            versioned = adds_tests(body)
            tiled: set[Any] = set()  # buffers an update keeps in a register tile
            cycles: list[float | None] = [None] * len(walker.stores)
            for i, st in enumerate(walker.stores):
                if _is_init(st):
                    continue  # (an init has no register tile) estimated below if it counts
                tiles: list[float] = []
                cycles[i] = _store_cycles(st, machine, tiles, versioned, self._indices)
                if tiles:
                    tiled.add(st.store.buffer)
            # a reduction's init is folded into its register tile (c_accumulate's
            # plan_init_fusion): the tile starts from the value in registers
            for i, st in enumerate(walker.stores):
                if cycles[i] is None and st.store.buffer not in tiled:
                    cycles[i] = _store_cycles(st, machine, None, versioned, self._indices)
            total += sum(c for c in cycles if c is not None)
        return total


def _as_emitted(body: Any, machine: Machine) -> Any:
    """A lowered body with the loops the C code generator gives vector lanes to, or
    widens (:mod:`metaschedule.codegen.c_autovector`), as it emits them."""
    if not c_codegen.AUTO_VECTORIZE:
        return body
    return widen_vector_loops(vectorize_scalar_nests(body), machine.lanes * 4)


def register_tiles(mod: IRModule | PrimFunc, machine: Machine | None = None) -> list[int]:
    """The register tiles the estimate assumes, in vectors (or scalars) of accumulators,
    one per store kept in registers: those the C code generator emits
    (:mod:`metaschedule.codegen.c_accumulate`) for a target of ``machine.lanes``."""
    funcs = [mod] if isinstance(mod, PrimFunc) else list(mod.functions.values())
    tiles: list[float] = []
    for func in funcs:
        walker = LoopNestWalker()
        body = _as_emitted(lower(func, FEATURE_LOWER_PASSES).body, machine or Machine())
        walker.walk(body)
        versioned = adds_tests(body)
        for st in walker.stores:
            _store_cycles(st, machine or Machine(), tiles, versioned)
    return [int(round(t)) for t in tiles]


# ----------------------------------------------------------------------------- one store
def _flat(buf: Any, lin: list[LinearForm], n: int) -> list[float]:
    """Elements the row-major address of an access moves per step of each loop.

    A loop inside ``v % c`` (a fused loop, emitted as a loop over ``v // c`` around a
    vector loop over ``v % c``) moves the address by its coefficient in the modulus
    only: its ``v // c`` part steps once per ``c`` iterations.
    """
    shape = [const_int(s, 0) for s in buf.shape]
    row = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        row[d] = row[d + 1] * max(1, shape[d + 1])
    flat = [0.0] * n
    for d, form in enumerate(lin):
        in_mod = {j for coefs, _ in form.capped for j in coefs}
        for j in form.loops():
            if j in in_mod:
                flat[j] += row[d] * sum(c.get(j, 0.0) for c, _ in form.capped)
            else:
                flat[j] += row[d] * form.coef(j)
    return flat


def _affine_in(lin: list[LinearForm], j: int) -> bool:
    """Whether loop ``j`` enters the indices with integer coefficients only (no ``//``,
    ``%``): what the code generator's register tiles need of the vector loop."""
    for form in lin:
        if any(j in coefs for coefs, _ in form.capped):
            return False
        c = form.plain.get(j, 0.0)
        if c != int(c):
            return False
    return True


def _store_cycles(
    st: Store,
    m: Machine,
    tiles: list[float] | None = None,
    versioned: bool = False,
    simplified: IndexMemo | None = None,
) -> float:
    """Estimated cycles of one store; ``tiles`` (if given) gets the vectors of its
    register tile, when it has one. ``versioned``: the code generator gives the
    function's guarded accumulations an unguarded copy for the interior
    (:mod:`..codegen.c_versioning`), whose padding guards then cost nothing.
    ``simplified``: a memo of simplified indices to use and fill (:class:`_IndexForms`)."""
    ext = st.extents
    n = len(ext)
    total = float(math.prod(ext))
    if total <= 0:
        return 0.0
    pos = {lp.var: j for j, lp in enumerate(st.loops)}
    ops, loads = count_store(st.store)
    form = _IndexForms(st, pos, simplified)
    store_lin = [form(i) for i in st.store.indices]
    accesses = [(ld.buffer, [form(i) for i in ld.indices]) for ld in loads]
    is_update = any(ld.buffer is st.store.buffer for ld in loads)
    perfect = _perfect_from(st)
    row_at = -1  # where the row made vector code was, if any
    if is_update:
        # a serial row over the reduction, made vector code by the code generator
        # (c_vector.vectorize_outputs): estimated in the order it runs, the row innermost
        row = _vectorized_row(st, store_lin, accesses, perfect, m)
        if row is not None:
            st, store_lin, accesses, perfect = row
            ext = st.extents
            row_at = perfect
    store_flat = _flat(st.store.buffer, store_lin, n)
    flats = [_flat(b, lin, n) for b, lin in accesses]
    moving = [j for j in range(n) if ext[j] > 1]
    inner = moving[-1] if moving else -1

    # vector chunks per element of the innermost loop
    vec_loop = inner if inner >= 0 and st.loops[inner].kind is ForKind.VECTORIZED else -1
    strides = [abs(f[inner]) if inner >= 0 else 0.0 for f in flats]
    store_stride = abs(store_flat[inner]) if inner >= 0 else 0.0
    if vec_loop >= 0:
        v = ext[vec_loop]
        # chunks of the native width, then a tail of halving power-of-two widths (28
        # lanes of 16: 16, 8, 4), as the code generator writes them (c_vector)
        per_elem = (v // m.lanes + bin(v % m.lanes).count("1")) / v
        # a gathered operand costs a scalar load per lane; a scattered store: scalar body
        if store_stride not in (0.0, 1.0):
            per_elem = 1.0
    elif inner >= 0 and store_stride == 1.0 and all(s in (0.0, 1.0) for s in strides):
        per_elem = 2.0 / m.lanes  # the compiler's own vectorization, at best half as good
    else:
        per_elem = 1.0
    chunks = total * per_elem  # executions of the (vector) body

    if is_update and versioned:
        bools, selects = _padding_guards(st.store.value)
        ops[_BOOL] -= bools
        ops[_SELECT] -= selects
    op_cycles = sum(_OP_CYCLES.get(k, 0.0) * c for k, c in enumerate(ops) if k < 7 or k >= 14)
    compute = chunks * max(op_cycles, 0.5)

    # the register tile of a reduction, as the code generator plans it (c_accumulate)
    store_loops = {j for j in moving if store_flat[j] != 0}
    plan = None
    if is_update:
        plan = _register_tile(
            st, store_lin, accesses, store_loops, vec_loop, per_elem, m.lanes, m.limits, perfect
        )
    stats = _stats(st, store_lin, accesses, m)
    if plan is not None:
        start, tile, tile_per_elem = plan
        if tile_per_elem != per_elem:
            # tile loops merged into the vector loop (MERGE_CONTIGUOUS): the region runs
            # the merged loop's chunks
            per_elem = tile_per_elem
            compute *= tile_per_elem / (chunks / total)
            chunks = total * per_elem
        tile_points = float(math.prod(ext[j] for j in tile))
        # a tile split to fit (SPLIT_LARGE_TILES): its outer loops run around the region
        split_out = [j for j in range(start, n) if j in store_loops and j not in tile]
        tile_vectors = tile_points * (per_elem if vec_loop in tile else 1.0)
        sweeps = total / tile_points
        if tiles is not None:
            tiles.append(tile_vectors)
        # operand loads per sweep: the distinct elements the tile's loops reach (the
        # updates of one step share them), a vector per lanes when contiguous
        only_tile = tuple(e if j in tile else 1 for j, e in enumerate(ext))
        tile_stats = _stats(st, store_lin, accesses, m, only_tile)
        load_cycles = conflict_cycles = 0.0
        for s, lin in zip(tile_stats, _lins_of(st, store_lin, accesses, tile_stats)):
            if s.buffer is st.store.buffer:
                continue
            contiguous = vec_loop >= 0 and lin is not None and abs(lin[vec_loop]) == 1.0
            distinct = s.footprint[0]
            load_cycles += (distinct * per_elem if contiguous else distinct) / m.loads_per_cycle
            if lin is not None:
                conflict_cycles += _set_conflicts(s, lin, tile, ext, m)
        operand_loads = sweeps * load_cycles
        # one update of every accumulator per sweep, in chains of the sweeps of one entry
        # into the tile's region; the out-of-order window overlaps the chains of the
        # next entries when an entry's work is short (a 3x3 window: 9 sweeps)
        entries = float(math.prod(ext[:start])) * math.prod(ext[j] for j in split_out)
        shared = _shared_loads(st, accesses, m, plan, split_out, vec_loop, tile_vectors)
        straight = (0, 0.0)  # region loops written out step by step, values they keep
        if shared is not None:
            operand_loads = min(operand_loads, shared[0])
            straight = shared[1:]
        if not split_out:  # (a split tile's outer loops are C loops around its region)
            hoisted = _invariant_loads(
                st, store_lin, accesses, m, plan, vec_loop, per_elem, tile_vectors, straight, row_at
            )
            operand_loads = max(0.0, operand_loads - hoisted)
        l1 = operand_loads + sweeps * conflict_cycles
        per_entry = sweeps / max(1.0, entries) * tile_vectors * 2.0  # FMAs and loads
        overlap = min(max(1.0, m.reorder_window / max(per_entry, 1.0)), max(1.0, entries))
        latency = sweeps * m.fma_latency / overlap
        compute = max(compute, latency, sweeps * tile_vectors / m.fma_ports)
        # registers the tile takes: a scalar tile along a contiguous innermost loop is
        # vectorized by the C compiler (per_elem below 1 there too)
        registers = tile_points * per_elem if inner in tile else tile_vectors
        if registers > m.vector_registers:
            # beyond the register file the C compiler spills the whole tile: every
            # update reloads and stores its accumulator (slower than a tile kept in
            # memory, whose stores the compiler can forward)
            l1 += (
                sweeps
                * tile_vectors
                * SPILLED_UPDATE_SLOWDOWN
                * (1.0 / m.loads_per_cycle + 1.0 / m.stores_per_cycle)
            )
        else:  # a few spills where the operands need registers too
            spill = max(0.0, registers - (m.vector_registers - 4))
            l1 += sweeps * spill * 2.0 / m.loads_per_cycle
        # the tile is loaded before and stored after the region, once per entry into it
        l1 += entries * tile_vectors * (1.0 / m.loads_per_cycle + 1.0 / m.stores_per_cycle)
        region = [j for j in range(start, n) if ext[j] > 1 and j not in split_out]
        l1 += entries * _region_set_conflicts(
            [(st.store.buffer, store_lin), *accesses], region, ext, m
        )
    else:
        l1 = 0.0
        for s in strides:
            l1 += chunks / m.loads_per_cycle if s in (0.0, 1.0) else total / m.loads_per_cycle
        l1 += chunks / m.stores_per_cycle
        if is_update and inner >= 0 and inner not in store_loops:
            # the innermost loop updates one element: a memory round trip per update
            compute = max(compute, chunks * m.memory_round_trip)

    resident = (st.store.buffer, plan[0]) if plan is not None else None
    split = [j for j in range(plan[0], n) if j in store_loops and j not in plan[1]] if plan else []
    if split:
        # a split tile's outer loops run around its region (c_accumulate emits them
        # outside the reduction loops): the caches see the loops in that order, and an
        # operand panel the region sweeps is swept again for each of their iterations
        start = plan[0]
        order = [*range(start), *split, *(j for j in range(start, n) if j not in split)]
        new = {j: i for i, j in enumerate(order)}
        store_lin = [_moved(f, new) for f in store_lin]
        accesses = [(b, [_moved(f, new) for f in lin]) for b, lin in accesses]
        ext = tuple(ext[j] for j in order)
        stats = _stats(st, store_lin, accesses, m, ext)
        resident = (st.store.buffer, new[start])
    traffic = _traffic(stats, ext, m, _lins_of(st, store_lin, accesses, stats), resident)
    cycles = max(compute, l1, traffic)
    cycles += PARTIAL_OVERLAP * (compute + l1 + traffic - cycles)

    # parallel speed-up and fork/join cost
    par = [j for j, lp in enumerate(st.loops) if lp.kind is ForKind.PARALLEL]
    if par:
        jobs = float(math.prod(ext[j] for j in par))
        rounds = math.ceil(jobs / m.cores)
        speedup = jobs / rounds if rounds else 1.0
        entries = float(math.prod(ext[: par[0]]))
        return cycles / max(1.0, speedup) + entries * m.fork_join_cycles
    return cycles


def _moved(form: LinearForm, new: dict[int, int]) -> LinearForm:
    """``form`` with its loop positions renumbered by ``new`` (old -> new position)."""
    return LinearForm(
        {new[j]: c for j, c in form.plain.items()},
        [({new[j]: c for j, c in coefs.items()}, cap) for coefs, cap in form.capped],
        form.const,
    )


def _is_init(st: Store) -> bool:
    """Whether the store writes a constant (a reduction's init)."""
    return isinstance(st.store.value, (E.IntImm, E.FloatImm))


class _IndexForms:
    """The :class:`LinearForm` of an index of one store, ``//`` and ``%`` by a constant
    first simplified over the loops' ranges: a channel ``c`` split as ``c_o*16 + c_i``
    and read from a weight packed as ``[c // 16, ..., c % 16]`` (RewriteLayout) steps
    that weight by 1 along ``c_i``, as the code generator emits it, not by
    ``1 + stride/16`` (a gather) as the unsimplified form says."""

    #: most simplified indices a memo holds
    MAX_MEMO = 16384

    def __init__(self, st: Store, pos: dict[E.Var, int], memo: IndexMemo | None = None) -> None:
        self.st, self.pos = st, pos
        self._analyzer: Analyzer | None = None
        self.memo = memo

    def __call__(self, index: E.PrimExpr) -> LinearForm:
        if not _has_divmod(index):
            return LinearForm.of(index, self.pos)
        memo, key = self.memo, None
        if memo is not None:
            key = self._key(index)
            hit = memo.get(key) if key is not None else None
            if hit is not None:  # simplified for another store: its loops' positions
                return LinearForm.of(*hit)
        if self._analyzer is None:
            self._analyzer = Analyzer()
            for lp in self.st.loops:
                self._analyzer.bind(lp.var, Range(0, max(1, lp.extent)), allow_override=True)
        simple = self._analyzer.simplify(index)
        if memo is not None and key is not None:
            if len(memo) >= self.MAX_MEMO:
                memo.clear()
            memo[key] = (simple, self.pos)
        return LinearForm.of(simple, self.pos)

    def _key(self, e: E.PrimExpr) -> tuple | None:
        """``e`` with its loop variables as (position, extent): what the simplified
        index depends on; None for another variable or node."""
        t = type(e)
        if t is E.Var:
            j = self.pos.get(e)
            return None if j is None else (j, self.st.loops[j].extent, e.dtype)
        if t is E.IntImm:
            return (e.dtype, e.value)
        if t in _INDEX_OPS:
            a, b = self._key(e.a), self._key(e.b)
            return None if a is None or b is None else (t, a, b)
        if t is E.Cast:
            a = self._key(e.value)
            return None if a is None else (t, e.dtype, a)
        return None


#: the index arithmetic :meth:`_IndexForms._key` describes
_INDEX_OPS = frozenset((E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max))

#: simplified indices by :meth:`_IndexForms._key` (an index up to the identity of its
#: loops, with their positions and extents): the simplified index and its loops' positions
IndexMemo = dict[tuple, tuple[E.PrimExpr, dict[E.Var, int]]]


def _has_divmod(e: E.PrimExpr) -> bool:
    stack = [e]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is E.FloorDiv or t is E.FloorMod:
            return True
        if isinstance(x, E.BinaryOp):
            stack += [x.a, x.b]
        elif t is E.Cast:
            stack.append(x.value)
    return False


def _padding_guards(e: E.PrimExpr) -> tuple[int, int]:
    """``(and, select)`` op counts of the padding guards in ``e``: selects of a loaded
    value or a constant under a conjunction of integer comparisons (an inlined padding
    block). In an accumulation the code generator tests them once per tile and runs an
    unguarded copy of the tile in the interior (:mod:`..codegen.c_versioning`)."""
    bools = selects = 0
    stack = [e]
    while stack:
        x = stack.pop()
        if type(x) is E.Select:
            ands = _integer_conjunction(x.condition)
            if ands is not None and isinstance(x.false_value, (E.IntImm, E.FloatImm)):
                bools += ands
                selects += 1
            stack += [x.true_value, x.false_value]
        elif isinstance(x, E.BinaryOp):
            stack += [x.a, x.b]
        elif type(x) is E.Cast:
            stack.append(x.value)
    return bools, selects


def _integer_conjunction(c: E.PrimExpr) -> int | None:
    """The number of ``and`` ops of a conjunction of integer comparisons, else None."""
    if type(c) is E.And:
        a, b = _integer_conjunction(c.a), _integer_conjunction(c.b)
        return None if a is None or b is None else a + b + 1
    if isinstance(c, E.CmpOp) and not is_float(c.a.dtype):
        return 0
    return None


def _stats(
    st: Store,
    store_lin: list[LinearForm],
    accesses: list,
    m: Machine,
    extents: tuple[int, ...] | None = None,
) -> list[BufferStats]:
    per: dict[Any, list] = {st.store.buffer: [[store_lin], 0, 1]}
    for buf, lin in accesses:
        entry = per.setdefault(buf, [[], 0, 0])
        entry[0].append(lin)
        entry[1] += 1
    ext = st.extents if extents is None else extents
    return [BufferStats(b, lins, r, w, ext, 64) for b, (lins, r, w) in per.items()]


def _set_conflicts(
    s: BufferStats, flat: list[float], tile: list[int], ext: tuple[int, ...], m: Machine
) -> float:
    """Cycles per sweep of a register tile lost to L1 set conflicts of one operand.

    The tile's loops that step the operand by whole cache lines put the lines they reach
    into the sets ``line % sets``: a step of ``L`` lines visits ``sets / gcd(L, sets)``
    of them (rows 4 KiB apart on a 32 KiB 8-way L1, e.g. a 1024-wide float matrix: one
    set; rows of a 56 x 64 float image, 14 KiB apart: two). With more lines in a set than
    it has ways, they evict each other between sweeps, and every sweep fetches them again
    from L2.
    """
    sets = max(1, m.l1_bytes // (64 * max(1, m.l1_ways)))
    lines, steps = 1, []
    for j in tile:
        step = abs(flat[j]) * s.elem
        if ext[j] > 1 and step >= 64 and step % 64 == 0:
            lines *= ext[j]
            steps.append((int(step // 64) % sets, ext[j]))
    if lines <= m.l1_ways:
        return 0.0
    if lines <= 4096:  # the sets the lines really fall in
        used = {0}
        for step, n in steps:
            used = {(u + k * step) % sets for u in used for k in range(n)}
        crowd = lines / len(used)
    else:
        crowd = lines / min(sets, math.prod(sets // math.gcd(st, sets) for st, _ in steps))
    if crowd <= m.l1_ways:
        return 0.0
    return lines * 64.0 / m.l2_bytes_per_cycle


def _shared_loads(
    st: Store,
    accesses: list,
    m: Machine,
    plan: tuple[int, list[int], float],
    split_out: list[int],
    vec_loop: int,
    accumulators: float,
) -> tuple[float, int, float] | None:
    """Operand load cycles of the whole store when the code generator writes the
    innermost loops of a register tile's region out step by step
    (:func:`~metaschedule.codegen.c_accumulate.straight_line`), with the number of
    region loops written out and the values a written-out block keeps in registers;
    else None: each
    operand vector, and each broadcast input scalar when the accumulators and the
    values held at once fit the registers (or the accumulators are few), is loaded once
    per written-out block and kept in a register (a 3x3 window over 4 pixels loads 6 x 3
    input pixels, not 9 x 4); an input scalar not kept is loaded by each step that
    reads it.

    As the code generator: a tile of at most ``max_straight_accumulators`` vectors of
    at least ``MIN_STRAIGHT_LANES`` lanes; the innermost region loops while they make at
    most ``STRAIGHT_STEPS`` steps and ``STRAIGHT_STATEMENTS`` updates; only when two
    steps read the same value (a sliding window)."""
    start, tile, _ = plan
    ext = st.extents
    if vec_loop < 0 or vec_loop not in tile or ext[vec_loop] < MIN_STRAIGHT_LANES:
        return None
    if accumulators > m.limits.max_straight_accumulators:
        return None
    region = [j for j in range(start, len(ext)) if ext[j] > 1 and j not in tile]
    region = [j for j in region if j not in split_out]
    written: list[int] = []
    steps = 1
    for j in reversed(region):
        if steps * ext[j] > STRAIGHT_STEPS or accumulators * steps * ext[j] > STRAIGHT_STATEMENTS:
            break
        steps *= ext[j]
        written.insert(0, j)
    if not written:
        return None
    lanes = min(m.lanes, 1 << (ext[vec_loop].bit_length() - 1))
    chunks = -(-ext[vec_loop] // lanes)
    points = [j for j in tile if j != vec_loop and ext[j] > 1]
    n = len(ext)
    operands, gathered = [], 0.0
    labels: dict[int, int] = {}  # buffers numbered in order (the cache key stays small)
    for buf, lin in accesses:
        if buf is st.store.buffer:
            continue
        flat = _flat(buf, lin, n)
        if flat[vec_loop] not in (0.0, 1.0):  # a gather: a scalar load per lane and use
            gathered += math.prod(ext[j] for j in written + points) * ext[vec_loop]
            continue
        vector = flat[vec_loop] == 1.0
        step_offsets = _offsets([(flat[j], ext[j]) for j in written])
        point_offsets = _offsets(
            [(flat[j], ext[j]) for j in points]
            + ([(flat[vec_loop] * lanes, chunks)] if vector else [(0.0, chunks)])
        )
        operands.append(
            (labels.setdefault(id(buf), len(labels)), vector, step_offsets, point_offsets)
        )
    if not operands:
        return None
    reused, distinct, per_step, held = _window_sharing(tuple(operands))
    fits = accumulators + held <= m.vector_registers
    fits = fits or accumulators <= m.limits.broadcast_accumulators
    if SHARE_BROADCASTS and reused[1] and fits:
        loads = kept = distinct[0] + distinct[1]  # the broadcasts kept too
    elif reused[0] and accumulators + distinct[0] <= m.vector_registers:
        # the broadcasts of each step, not kept; the vectors counted as kept only when
        # all of them fit beside the tile, as the prior counted them before broadcasts
        # were shared (the code generator shares them regardless; the depthwise
        # schedules of tests/cost_model/test_prior_depthwise.py are ranked so)
        loads, kept = distinct[0] + per_step, distinct[0]
    else:
        return None  # nothing shared (or kept): the loads of each step
    blocks = math.prod(ext) / (steps * math.prod(ext[j] for j in tile))
    return blocks * (loads + gathered) / m.loads_per_cycle, len(written), float(kept)


def _offsets(loops: list[tuple[float, int]]) -> tuple[float, ...]:
    """The offsets ``sum(stride * i)`` of every point of ``loops`` (``(stride, extent)``,
    outermost first), in loop order."""
    out = [0.0]
    for stride, extent in loops:
        out = [o + stride * i for o in out for i in range(extent)]
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _window_sharing(
    operands: tuple[tuple[int, bool, tuple[float, ...], tuple[float, ...]], ...],
) -> tuple[tuple[bool, bool], tuple[int, int], int, int]:
    """Sharing among the written-out updates of a register tile, from each operand's
    ``(buffer number, vector, offsets per step, offsets per update of a step)``:
    ``((vector reused, broadcast reused), (distinct vectors, distinct broadcasts),
    distinct broadcasts of each step summed, most values held at once)``, a value held
    from its first use to its last (as the code generator's ``_shared_values`` counts)."""
    reused = [False, False]
    per_step = 0
    first: dict[tuple, tuple[int, int]] = {}  # value -> (step, update) of its first use
    last: dict[tuple, int] = {}
    n_steps, n_points = len(operands[0][2]), len(operands[0][3])
    for s in range(n_steps):
        seen: set[tuple] = set()
        for p in range(n_points):
            update = s * n_points + p
            for buf, vector, step_offsets, point_offsets in operands:
                key = (buf, vector, step_offsets[s] + point_offsets[p])
                hit = first.get(key)
                if hit is None:
                    first[key] = (s, update)
                elif hit[0] != s:
                    reused[0 if vector else 1] = True
                last[key] = update
                if not vector:
                    seen.add(key)
        per_step += len(seen)
    vectors = sum(1 for key in first if key[1])
    held = [0] * (n_steps * n_points + 1)  # values live at each update
    for key, (_, f) in first.items():
        if last[key] > f:
            held[f] += 1
            held[last[key] + 1] -= 1
    most = live = 0
    for delta in held:
        live += delta
        most = max(most, live)
    return (reused[0], reused[1]), (vectors, len(first) - vectors), per_step, most


def _region_set_conflicts(
    accesses: list, region: list[int], ext: tuple[int, ...], m: Machine
) -> float:
    """Cycles per entry into a register tile's region lost to L1 set conflicts of the
    lines the region reuses: the input rows of a window with their halo and the rows of
    the tile it stores (buffers assumed aligned alike modulo the way size).

    A region whose lines fit the L1 by size can still crowd a few sets: a depthwise tile
    of 8 rows 14 KiB apart (the halo makes 10 input rows, and the 8 output rows fall in
    the same two set groups) puts 9 lines in a set of 8 ways; the lines beyond the ways
    come from L2 again on every entry (measured: 8 rows x 16 channels ran 55 us, 4 rows
    or 8 pixels along the row 44 us; charging every line of a crowded set instead ranked
    the 8-row tile below padding computed per tile, which ran 70-120 us). A region too
    large for the L1 streams its data instead (the cache traffic counts it).
    """
    sets = max(1, m.l1_bytes // (64 * max(1, m.l1_ways)))
    limit = 2 * m.l1_bytes // 64  # more distinct lines: the region streams, no reuse
    lines: set[tuple[int, int]] = set()
    for buf, lin in accesses:
        flat = _flat(buf, lin, len(ext))
        elem = nbytes(buf.dtype)
        per_line = max(1, 64 // elem)
        offsets = {int(_flat_const(buf, lin))}
        for j in region:
            step, count = int(flat[j]), ext[j]
            if step == 0:
                continue
            if abs(step) < per_line:  # steps within a line: one offset per line reached
                count = max(1, math.ceil(count * abs(step) / per_line))
                step = per_line if step > 0 else -per_line
            offsets = {o + k * step for o in offsets for k in range(count)}
            if len(offsets) > limit:
                return 0.0
        lines |= {(id(buf), o // per_line) for o in offsets}
        if len(lines) > limit:
            return 0.0
    per_set: dict[int, int] = {}
    for _, line in lines:
        per_set[line % sets] = per_set.get(line % sets, 0) + 1
    excess = sum(c - m.l1_ways for c in per_set.values() if c > m.l1_ways)
    return excess * 64.0 / m.l2_bytes_per_cycle


def _flat_const(buf: Any, lin: list[LinearForm]) -> float:
    """The row-major element offset of an access with every loop at 0."""
    shape = [const_int(s, 0) for s in buf.shape]
    offset, row = 0.0, 1
    for d in range(len(shape) - 1, -1, -1):
        offset += lin[d].const * row
        row *= max(1, shape[d])
    return offset


def _perfect_from(st: Store) -> int:
    """The outermost loop position from which the store's loops nest perfectly (each
    the whole body of the one above it) down to the innermost."""
    loops = st.loops
    p = len(loops) - 1
    while p > 0 and loops[p - 1].node.body is loops[p].node:
        p -= 1
    return max(p, 0)


def _vectorized_row(
    st: Store, store_lin: list[LinearForm], accesses: list, perfect: int, m: Machine
) -> tuple[Store, list[LinearForm], list, int] | None:
    """The store as the code generator runs it when it makes a serial row over a
    reduction vector code (:func:`~metaschedule.codegen.c_vector.vectorize_outputs`,
    with :data:`~metaschedule.codegen.c_vector.VECTORIZE_OUTPUTS`): ``(store, store
    index forms, accesses, perfect)`` with the row's loop moved innermost and vectorized,
    or None when the code generator leaves the nest as it is.

    As the code generator: the row is the innermost serial loop moving the stored
    element (at least :data:`~metaschedule.codegen.c_vector.MIN_OUTPUT_LANES`
    iterations, one element per step), above a perfect nest of serial or unrolled loops
    of constant extents that holds a reduction and ends in the store; every load moves
    by 0 or 1 element per step of the row, the stored buffer is read at the stored
    element only, and the row fits ``Machine.limits.max_accumulators``
    vectors. The code generator tries a register tile first, from the outermost loop in:
    a tile starting above the row (:func:`_register_tile`) keeps the nest as it is. The
    tile of the new nest is the row's vectors across the loops that were below it."""
    if not VECTORIZE_OUTPUTS:
        return None
    loops, ext = st.loops, st.extents
    n = len(loops)
    buf = st.store.buffer
    store_flat = _flat(buf, store_lin, n)
    r = n - 1
    while r >= 0 and not (ext[r] > 1 and store_flat[r] != 0):
        r -= 1
    if r < perfect or r == n - 1 or loops[r].kind is not ForKind.SERIAL:
        return None
    if ext[r] < MIN_OUTPUT_LANES or is_bool(buf.dtype):
        return None
    lanes = m.lanes * 4 // max(1, nbytes(buf.dtype))  # m.lanes: float32 lanes
    row = ext[r] // lanes + bin(ext[r] % lanes).count("1")
    if lanes < 2 or row > m.limits.max_accumulators:
        return None
    serial = (ForKind.SERIAL, ForKind.UNROLLED)
    for lp in loops[r:]:
        node = lp.node
        if type(node.min) is not E.IntImm or type(node.extent) is not E.IntImm:
            return None
    if any(lp.kind not in serial for lp in loops[r + 1 :]) or all(e == 1 for e in ext[r + 1 :]):
        return None  # not serial, or no reduction below the row
    if loops[-1].node.body is not st.store or store_flat[r] != 1 or not _affine_in(store_lin, r):
        return None
    for b, lin in accesses:
        if b is buf:
            if lin != store_lin:
                return None  # another element of the stored buffer is read
        elif not _affine_in(lin, r) or _flat(b, lin, n)[r] not in (0.0, 1.0):
            return None
    store_loops = {j for j in range(n) if ext[j] > 1 and store_flat[j] != 0}
    outer = _register_tile(
        st, store_lin, accesses, store_loops, -1, 1.0, m.lanes, m.limits, perfect
    )
    if outer is not None and outer[0] < r:
        return None  # a register tile from a loop above the row
    order = [*range(r), *range(r + 1, n), r]
    new = {j: i for i, j in enumerate(order)}
    rows = replace(loops[r], kind=ForKind.VECTORIZED)
    moved = Store(
        st.store,
        tuple(rows if j == r else loops[j] for j in order),
        tuple(ext[j] for j in order),
        st.allocs,
    )
    return (
        moved,
        [_moved(f, new) for f in store_lin],
        [(b, [_moved(f, new) for f in lin]) for b, lin in accesses],
        r,  # the loops below the row nest perfectly, and the row in them
    )


def _register_tile(
    st: Store,
    store_lin: list[LinearForm],
    accesses: list,
    store_loops: set[int],
    vec_loop: int,
    per_elem: float,
    lanes: int,
    limits: TileLimits,
    perfect: int = 0,
) -> tuple[int, list[int], float] | None:
    """Where the code generator keeps the stored tile in accumulators
    (:func:`~metaschedule.codegen.c_accumulate.plan_accumulators`): ``(start, tile,
    per_elem)``, the loop its region starts at, the loops of the tile and the vector
    chunks per element of its vector loop (with the tile loops merged into it), or None.

    As the code generator, from the outermost loop in: a serial reduction loop (it does
    not move the stored element) that heads a perfect nest whose tile (the loops below it
    that move the element, the reduction loops among them hoisted into the region when
    :data:`~metaschedule.codegen.c_accumulate.HOIST_INNER_REDUCTIONS`) holds at most
    ``Machine.limits.max_accumulators`` vectors. A larger tile
    with no fitting one deeper is split
    (:data:`~metaschedule.codegen.c_accumulate.SPLIT_LARGE_TILES`): its outermost scalar
    tile loops leave the tile until it fits, if at least
    ``min_split_accumulators`` vectors stay.
    A tile loop heading such a nest jams the tile loops down to the region into a
    vector tile (:data:`~metaschedule.codegen.c_accumulate.JAM_SMALL_TILES`) when the
    first tile that fits below it has fewer than ``min_split_accumulators`` vectors and
    the jammed one at most ``jam_accumulators``.
    ``perfect``: the outermost loop from which the nest is perfect (:func:`_perfect_from`).
    """
    found = _tile_candidates(
        st, store_lin, accesses, store_loops, vec_loop, per_elem, lanes, perfect
    )
    most, fewest = limits.max_accumulators, limits.min_split_accumulators
    for i, (start, tile, vectors, merged, tile_per_elem, jam) in enumerate(found):
        if not jam and vectors <= most:
            return start, tile, tile_per_elem
        # the first tile below that fits as it is (never a jam)
        deeper = next((c for c in found[i + 1 :] if not c[5] and c[2] <= most), None)
        if jam:
            if vectors <= limits.jam_accumulators and deeper and deeper[2] < fewest:
                return start, tile, tile_per_elem
            continue
        if not SPLIT_LARGE_TILES or deeper is not None:
            continue
        scalar = [j for j in tile if j != vec_loop and j not in merged]
        while scalar and vectors > most:
            vectors /= st.extents[scalar.pop(0)]
        if fewest <= vectors <= most:
            kept = [j for j in tile if j in scalar or j in merged or j == vec_loop]
            return start, kept, tile_per_elem
        return None
    return None


def _tile_candidates(
    st: Store,
    store_lin: list[LinearForm],
    accesses: list,
    store_loops: set[int],
    vec_loop: int,
    per_elem: float,
    lanes: int,
    perfect: int = 0,
) -> list[tuple[int, list[int], float, list[int], float, bool]]:
    """Every loop that could head a register tile, outermost first: ``(start, tile,
    vectors, merged, per_elem, jam)``, with the tile loops merged into the vector loop,
    the vector chunks per element of the merged loop, and whether ``start`` is a tile
    loop jammed into the tile (see :func:`_register_tile`)."""
    ext, loops = st.extents, st.loops
    n = len(ext)
    serial = (ForKind.SERIAL, ForKind.UNROLLED)
    found: list[tuple[int, list[int], float, list[int], float, bool]] = []
    for start in range(perfect, n):  # a perfect nest from start down
        jam = start in store_loops
        if ext[start] == 1 or loops[start].kind not in serial:
            continue
        if jam and not (JAM_SMALL_TILES and HOIST_INNER_REDUCTIONS and vec_loop > start):
            continue
        below = [j for j in range(start, n) if ext[j] > 1]
        if any(
            loops[j].kind not in serial and not (j == vec_loop and j == below[-1]) for j in below
        ):
            continue
        tile = [j for j in below if j in store_loops]
        reductions = [j for j in below if j not in store_loops]
        if jam and not reductions:
            continue
        first_tile = tile[0] if tile else n
        if not HOIST_INNER_REDUCTIONS and any(j > first_tile for j in reductions):
            continue
        if not all(_affine_in(store_lin, j) for j in tile):
            continue
        merged: list[int] = []
        tile_per_elem = per_elem
        if vec_loop in tile and per_elem < 1.0:
            merged = _merged_loops(st, [store_lin, *(lin for _, lin in accesses)], tile, vec_loop)
        if merged:
            extent = ext[vec_loop] * math.prod(ext[j] for j in merged)
            tile_per_elem = (extent // lanes + bin(extent % lanes).count("1")) / extent
        vectors = math.prod(ext[j] for j in tile) * (tile_per_elem if vec_loop in tile else 1.0)
        found.append((start, tile, vectors, merged, tile_per_elem, jam))
    return found


def _merged_loops(st: Store, lins: list[list[LinearForm]], tile: list[int], vec: int) -> list[int]:
    """The tile loops the code generator merges into the vector loop ``vec``
    (:func:`~metaschedule.codegen.c_accumulate.merge_contiguous`, with
    :data:`~metaschedule.codegen.c_accumulate.MERGE_CONTIGUOUS`): outermost first, a loop
    ``L`` whose every index moves by the merged loop's extent times what ``vec`` moves
    it (its points lie side by side along ``vec``), while neither appears outside the
    indices of the store's loads."""
    if not MERGE_CONTIGUOUS or not all(_affine_in(lin, vec) for lin in lins):
        return []
    ext = st.extents
    merged: list[int] = []
    extent = ext[vec]
    loose = _vars_outside_loads(st.store.value)
    if st.loops[vec].var in loose:
        return []
    rest = [j for j in tile if j != vec and ext[j] > 1 and st.loops[j].var not in loose]
    while True:
        for j in rest:
            if all(form.coef(j) == extent * form.coef(vec) for lin in lins for form in lin) and all(
                _affine_in(lin, j) for lin in lins
            ):
                merged.append(j)
                extent *= ext[j]
                rest.remove(j)
                break
        else:
            return merged


def _vars_outside_loads(e: E.PrimExpr) -> set[E.Var]:
    """The variables of ``e`` outside the indices of its buffer loads."""
    found = _LooseVars()
    found.visit(e)
    return found.vars


class _LooseVars(Visitor):
    def __init__(self) -> None:
        self.vars: set[E.Var] = set()

    def visit_Var(self, node: E.Var) -> None:
        self.vars.add(node)

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        pass  # its indices are checked as linear forms


def _lins_of(
    st: Store, store_lin: list[LinearForm], accesses: list, stats: list[BufferStats]
) -> list[list[float] | None]:
    """The flat strides of the first access of each buffer of ``stats``."""
    n = len(st.extents)
    first: dict[Any, list[LinearForm]] = {st.store.buffer: store_lin}
    for buf, lin in accesses:
        first.setdefault(buf, lin)
    return [_flat(s.buffer, first[s.buffer], n) if s.buffer in first else None for s in stats]


def _traffic(
    stats: list[BufferStats],
    ext: tuple[int, ...],
    m: Machine,
    flats: list[list[float] | None],
    resident: tuple[Any, int] | None = None,
) -> float:
    """Cycles to bring the store's data into L1 from L2, and into L2 from beyond.

    Per cache level: the loops from ``k`` in sweep a working set that fits, so each sweep
    brings its data in once; a buffer the loop right outside (``k - 1``) does not move
    reads the same data on each of that loop's iterations, which stays cached (what one
    iteration touches fits), so it is brought in once per sweep of loop ``k - 1``. A
    buffer whose lines a loop steps by a multiple of many sets (the rows of a 1024-wide
    float matrix: 4 KiB apart) uses only some of the sets: its footprint counts that
    many times over (:func:`_aliasing`). ``resident``: a buffer kept in registers by
    the loops from the given one in (a register tile): no cache holds it there.
    """
    n = len(ext)
    out = 0.0
    levels = (
        (m.l1_bytes, 0, m.l2_bytes_per_cycle),  # L1 conflicts: _set_conflicts, per tile
        (m.l2_bytes, m.l2_ways, m.l3_bytes_per_cycle),
    )
    for size, ways, bandwidth in levels:
        sets = size // (64 * ways) if ways else 0

        def held(s: BufferStats, flat: list[float] | None, k: int, sets: int = sets) -> float:
            if resident is not None and s.buffer is resident[0] and k > resident[1]:
                return 0.0
            crowd = _aliasing(flat, ext, k, s.elem, sets) if sets else 1.0
            return s.footprint[k] * s.elem * crowd

        k = n
        while k > 0 and sum(held(s, f, k - 1) for s, f in zip(stats, flats)) <= size:
            k -= 1
        reloads = float(math.prod(ext[:k]))
        # consecutive iterations of loop k - 1 share data (the halo of a window): what
        # the next one adds fits beside what this one holds, so a sweep of the loop brings
        # each distinct byte in once
        slides = (
            k > 0
            and sum(
                held(s, f, k) + s.footprint[k - 1] * s.elem / ext[k - 1]
                for s, f in zip(stats, flats)
            )
            <= size
        )
        nbytes = 0.0
        for s in stats:
            if resident is not None and s.buffer is resident[0] and k > resident[1]:
                continue
            if k > 0 and ((k - 1) not in s.touched or slides):
                whole = min(s.footprint[k - 1], ext[k - 1] * s.footprint[k])
                nbytes += reloads / ext[k - 1] * max(whole * s.elem, 64.0)
            else:
                nbytes += reloads * max(s.footprint[k] * s.elem, 64.0)
        out = max(out, nbytes / bandwidth)
    return out


def _aliasing(
    flat: list[float] | None, ext: tuple[int, ...], k: int, elem: int, sets: int
) -> float:
    """How many times over a buffer's footprint under loops ``k..`` counts in a cache of
    ``sets`` sets of 64-byte lines. A loop stepping ``L`` lines visits only
    ``sets / gcd(L, sets)`` sets; with more iterations than that, its lines crowd them,
    unless the shorter strides of the other loops spread each step over enough lines (a
    whole row of ``A`` read along ``k`` fills every set; 32 columns of ``B`` do not)."""
    if flat is None:
        return 1.0
    worst = 1.0
    for j in range(k, len(ext)):
        step = abs(flat[j]) * elem
        if ext[j] <= 1 or step < 64 or step % 64:
            continue
        g = math.gcd(int(step // 64), sets)
        if ext[j] <= sets // g:
            continue
        span = 1.0 + sum(
            abs(flat[i]) * (ext[i] - 1)
            for i in range(k, len(ext))
            if i != j and 0 < abs(flat[i]) * elem < step
        )
        lines = max(1.0, math.ceil(span * elem / 64))
        worst = max(worst, g / min(float(g), lines))
    return worst


def _invariant_loads(
    st: Store,
    store_lin: list[LinearForm],
    accesses: list,
    m: Machine,
    plan: tuple[int, list[int], float],
    vec_loop: int,
    per_elem: float,
    accumulators: float,
    straight: tuple[int, float],
    row_at: int,
) -> float:
    """Load cycles the code generator saves by making the loads of a register tile that
    do not change across the loop around it once before that loop
    (:mod:`~metaschedule.codegen.c_invariant`): the ``B`` panel of a matmul's row read
    again by every row ``i``, where its loads outnumber the row's own.

    As the code generator: every reduction loop of the tile's region written out (the
    innermost ``straight[0]`` by :func:`~metaschedule.codegen.c_accumulate.straight_line`,
    the others unrolled explicitly, see :func:`_unrolled_explicitly`); the loop ``L``
    around the region (unit loops aside) a serial C loop whose body has no condition;
    the tile's loads that ``L`` does not move (not gathers, not of a buffer ``L``
    writes) made once per entry into ``L``, as many as the registers allow:
    :data:`~metaschedule.codegen.c_invariant.MAX_INVARIANT_SHARE` of them, less the
    accumulators, shared with the values a straight-line block keeps (``straight[1]``),
    which take registers as they come. A vector operand that stays a load is then read
    by each multiply-add that uses it: GCC folds the load into the instruction when the
    other operand is in a register (a matmul's ``B`` vector under 4 hoisted ``A`` rows:
    4 loads a step, not 1), so those extra loads are taken off what hoisting saves;
    a straight-line block keeps its vectors in registers instead. ``row_at``: where the
    loop of a serial row made vector code was (:func:`_vectorized_row`), -1 if none."""
    if not HOIST_INVARIANT_LOADS:
        return 0.0
    start, tile, _ = plan
    ext, loops = st.extents, st.loops
    n = len(ext)
    # L: the innermost loop around the region that stays a C loop (unit loops and loops
    # written out copy by copy are constants in the code inside L)
    around = start - 1
    below = math.prod(ext[start:])  # statements of the nest below (c_codegen.steps)
    if vec_loop >= 0 and row_at < 0:
        below //= ext[vec_loop]  # a vectorized loop counts as one
    while around >= 0:
        below *= ext[around]
        if ext[around] > 1 and not _unrolled_explicitly(
            st, around, below, row_at, EXPLICIT_UNROLL_STEPS
        ):
            break
        around -= 1
    if around < 0 or loops[around].kind not in (ForKind.SERIAL, ForKind.UNROLLED):
        return 0.0
    invariant = {}  # buffer -> whether every access of it is invariant in L
    for buf, lin in accesses:
        if buf is st.store.buffer:
            continue
        ok = not is_bool(buf.dtype) and all(around not in f.loops() for f in lin)
        if ok and vec_loop >= 0:
            ok = _flat(buf, lin, n)[vec_loop] in (0.0, 1.0)  # a gather is not hoisted
        invariant[buf] = invariant.get(buf, True) and ok
    if not any(invariant.values()):
        return 0.0
    # the loops of the region written out, and L a C loop
    region = [j for j in range(start, n) if ext[j] > 1 and j not in tile]
    points = max(1, int(round(accumulators)))
    steps = points
    for k, j in enumerate(reversed(region)):
        steps *= ext[j]
        if k >= straight[0] and not _unrolled_explicitly(st, j, steps, row_at, EXPLICIT_TILE_STEPS):
            return 0.0
    scope = InvariantScope(loops[around].node, frozenset(), [], 0, 0)
    if not scope.safe():
        return 0.0
    # the distinct values the tile code reads per iteration of L, and the registers they
    # take: a broadcast one in each vector width of the tile's chunks (16 and 2 of 51
    # lanes), a scalar use reading a broadcast's first lane
    widths = 1
    if vec_loop >= 0:
        v = ext[vec_loop]
        lanes = m.lanes if v >= m.lanes else 1 << (v.bit_length() - 1)
        widths = max(1, len({w for _, w in _chunks(v, lanes) if w > 1}))
    inside = tuple(e if j > around else 1 for j, e in enumerate(ext))
    values = registers = folded = 0.0
    # multiply-adds per iteration of L, in vectors: every one reads every operand
    uses = points * math.prod(ext[around + 1 :]) / math.prod(ext[j] for j in tile)
    stats = _stats(st, store_lin, accesses, m, inside)
    for stat, flat in zip(stats, _lins_of(st, store_lin, accesses, stats)):
        if stat.buffer is st.store.buffer:
            continue
        vector = vec_loop >= 0 and flat is not None and abs(flat[vec_loop]) == 1.0
        if not invariant.get(stat.buffer) or scope.writes(stat.buffer):
            if vector and not straight[0]:
                folded += max(0.0, uses - stat.footprint[0] * per_elem)
            continue
        if vector:
            values += stat.footprint[0] * per_elem  # vectors
            registers += stat.footprint[0] * per_elem
        else:
            values += stat.footprint[0]
            registers += stat.footprint[0] * widths
    budget = int(m.vector_registers * MAX_INVARIANT_SHARE) - points
    others = max(0.0, straight[1] - values)  # the block's own values, as they come
    if budget <= 0 or registers <= 0:
        return 0.0
    kept = registers if registers + others <= budget else budget * registers / (registers + others)
    entries = math.prod(ext[:around])
    saved = max(0.0, values - folded) * kept / registers
    return entries * (ext[around] - 1) * saved / m.loads_per_cycle


def _unrolled_explicitly(st: Store, j: int, steps: int, row_at: int, limit: int) -> bool:
    """Whether the code generator writes loop ``j`` out copy by copy
    (``c_codegen._unroll_mode``: ``explicit``) when it makes ``steps`` statements: the
    loop unrolled (``pragma_auto_unroll_max_step`` of the innermost loop around it that
    has one, or an unrolled loop) and ``pragma_unroll_explicit`` set, ``steps`` at most
    ``limit``: :data:`~metaschedule.codegen.c_codegen.EXPLICIT_UNROLL_STEPS`, or
    :data:`~metaschedule.codegen.c_codegen.EXPLICIT_TILE_STEPS` in a register tile whose
    written-out steps read invariant loads."""
    loops = st.loops
    ancestors: list[int] = list(range(j + 1))
    if 0 <= row_at <= j:  # the row made vector code ran around the loops below it
        ancestors.insert(row_at, len(loops) - 1)
    auto, explicit = 0, False
    for q in ancestors:
        ann = loops[q].node.annotations
        if "pragma_auto_unroll_max_step" in ann:
            auto = const_int(ann["pragma_auto_unroll_max_step"], 0)
        if "pragma_unroll_explicit" in ann:
            explicit = bool(const_int(ann["pragma_unroll_explicit"], 0))
    kind = loops[j].kind
    wanted = kind is ForKind.UNROLLED or (
        kind is ForKind.SERIAL and auto > 0 and steps <= min(auto, AUTO_UNROLL_STEPS)
    )
    return wanted and explicit and steps <= limit
