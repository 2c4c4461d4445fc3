"""The analytic prior: a hand-written CPU cost estimate that ranks schedules with no data.

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
* **the code generator's plan**: the estimate walks the loops the C code generator
  writes, as its own passes and plan stage make them (:mod:`metaschedule.codegen.plan`,
  run for the target's ISA: scalar nests given vector loops, fused vector loops split,
  serial rows over a reduction vectorized over their outputs), and takes each
  reduction's register tile from that plan (:mod:`~metaschedule.codegen.c_accumulate`:
  the loop its region starts at, the loops it spans, its accumulators). Nothing of
  those decisions is re-derived here;
* **register tiles**: a reduction's output tile stays in registers where the plan keeps
  it there. Then the
  accumulator costs nothing per update, operand loads are shared by the tile's points
  (distinct elements per sweep of the tile), and the FMA latency needs enough independent
  accumulators (``fma_latency x fma_ports``), unless an entry into the tile's region is
  short enough (a 3x3 window) for the reorder window to overlap the next ones. The
  reduction's init costs nothing: it is folded into the accumulators. A split tile
  (:data:`~metaschedule.codegen.c_accumulate.SPLIT_LARGE_TILES`) is loaded and stored
  once per iteration of its outer loops. The accumulators of a tile beyond the
  registers its operands leave (all but :data:`~.stores.OPERAND_REGISTERS` of the ISA's
  vector registers: 16 on AVX2, 32 on AVX-512) spill: each update of a spilled one
  reloads and stores it. Operand lines the tile reaches with a stride of many lines fall into few
  L1 sets (the rows of a 1024-wide float matrix, 4 KiB apart: one set; rows 14 KiB apart: two);
  more of them in a set than it has ways are fetched from L2 on every sweep; so are the
  lines a region reuses (a window's rows with their halo, the rows of the stored tile)
  when they crowd a set beyond its ways. A region the code generator writes out step by
  step (a 3x3 window) loads each distinct operand vector once and keeps it in a register,
  when the registers hold them; a split tile's outer loops run around its region, and
  the caches see the loops in that order. A serial row over a reduction (``for j: for
  k: C[j] += ...``) made vector code is estimated with its loops in the order the plan
  writes them, the row innermost and a tile of vectors. When a tile's region is written
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
cache-traffic times plus a share of the others (:data:`~.stores.PARTIAL_OVERLAP`: they
overlap only in part), divided by its parallel speed-up; a schedule's estimate is the sum
over its stores; the score is ``1 / estimated seconds`` (higher is better, as every cost
model's). It is a ranking aid, not a simulator: ``benchmarks/prior_rank.py`` measures how
well it ranks real schedules.

It only scores. While the learned model warms up, the search ranks its random samples
with it (:class:`~metaschedule.search_strategy.EvolutionarySearch` ``prior=``), by the
search's policy (:class:`~metaschedule.search_strategy.warm_up.WarmUpPolicy`).

Modules, one concept each: :mod:`.machine` (the CPU, from the target's
:class:`~metaschedule.codegen.isa.CpuIsa`), :mod:`.access` (how a store's accesses move),
:mod:`.tiles` (the register tile and vectorized row of a store, read from the plan),
:mod:`.loads` (operand loads it shares or hoists), :mod:`.cache` (cache traffic and set
conflicts), :mod:`.stores` (the estimate of one store) and :mod:`.model`
(:class:`AnalyticPrior`).
"""

from .machine import Machine
from .model import AnalyticPrior, register_tiles
from .stores import OPERAND_REGISTERS, PARTIAL_OVERLAP

__all__ = [
    "OPERAND_REGISTERS",
    "PARTIAL_OVERLAP",
    "AnalyticPrior",
    "Machine",
    "register_tiles",
]
