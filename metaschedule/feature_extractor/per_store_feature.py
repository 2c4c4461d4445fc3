"""``PerStoreFeature``: one feature vector per ``BufferStore`` of the lowered program.

In the spirit of Ansor's features (our own formulation). Each candidate's module is
lowered (:func:`metaschedule.tir.transform.lower`: blocks become loops, allocations
are placed and compacted) and walked once. Every ``BufferStore`` gives one row; the
counts are computed symbolically from loop extents and index coefficients, never by
enumerating iterations, so a matmul-sized program takes a few milliseconds.

Slots: declared once in :func:`.features.layout.slot_table` as ``(group, name, width)``;
:func:`feature_names` and the row layout derive from it. Counts are ``log2(1 + x)``;
one-hot slots are 0/1; the arithmetic-intensity curve is a plain ratio. The parts live
in :mod:`.features` (op counting, index linear forms, the loop-nest walk, buffer
statistics, one store's row); this module is the extractor.

Group 1 (57): per-iteration op counts times the trip count of the loops above the
  store: ``float_{mad,addsub,mul,divmod,cmp,math_func,other_func}``, the same seven for
  ``int_``, ``bool_op``, ``select_op`` (a ``x*y + z`` counts one mad; min/max count as
  cmp; index arithmetic counts as int ops). For each of ``vec``/``unroll``/``parallel``
  over the enclosing loops of that kind: ``num`` (how many), ``prod`` (product of
  extents), ``len`` (innermost one's extent) and the position one-hot
  ``pos_{none,inner_spatial,middle_spatial,outer_spatial,inner_reduce,middle_reduce,
  outer_reduce,mixed}`` (spatial: the loop variable indexes the stored element;
  inner/outer: innermost/outermost loop above the store). GPU: ``is_gpu`` and the
  extents bound to ``blockIdx.{x,y,z}``, ``threadIdx.{x,y,z}`` and ``vthread``.
Group 2 (18 per buffer, ``buffers_per_store`` buffers sorted by bytes, zero padded):
  ``acc_type_{read,write,rw}``; ``bytes`` (all accesses over the loop nest),
  ``unique_bytes`` (footprint), ``lines`` (cache-line fetches when consecutive
  iterations of the innermost loop that moves the address share lines),
  ``unique_lines``; ``reuse_type_{loop_multiple_read,serial_multiple_read_write,
  no_reuse}`` (loop reuse: some loop above the store does not move the address, the
  innermost such loop is the reuse loop; serial reuse: the buffer is accessed more than
  once within one iteration of the innermost loop); ``reuse_dis_iter`` (iterations
  between reuses), ``reuse_dis_bytes`` (bytes all buffers of the store touch in
  between), ``reuse_ct``; ``{bytes,unique_bytes,lines,unique_lines}_d_reuse_ct``;
  ``stride`` (elements the flat address moves per iteration of the innermost loop that
  moves it).
Group 3 (``arith_intensity_curve_num_samples``): float ops over bytes touched, sampled
  evenly in ``log2(ops)`` as the loop nest is swept from the innermost loop outwards.
Group 4 (4): if the stored buffer is allocated inside the function: ``alloc_size``
  (bytes), ``alloc_prod`` (size times the trip count outside the allocation),
  ``alloc_outer_prod``, ``alloc_inner_prod`` (trip count inside it).
Group 5 (3): ``outer_prod`` (total trip count), ``num_loops``, ``auto_unroll_max_step``.
Group 6 (18, only with ``extract_workload``): op counts of the unscheduled workload
  (``context.mod``), its number of stores and parameter bytes; the same for every row.
Group 7 (19, only with ``extract_isa``): the CPU measured on (``context.isa``, else the
  record of ``context.target``) and its thread count (:mod:`.features.isa`); the same
  for every row, so one model can learn from and predict for several ISAs.
Group 8 (2, only with ``extract_prior``): the analytic prior's estimate of the candidate
  (:class:`~metaschedule.cost_model.prior.AnalyticPrior` for ``context.target``): log2 of
  its estimated nanoseconds and GFLOPS; the same for every row of a candidate. A learned
  model then corrects the prior rather than starting from nothing.

Footprints are exact for affine indices with constant extents and approximate
otherwise (floordiv scales a coefficient, floormod caps a width; other non-affine
terms count as unit coefficients). A store under ``if v == c`` (the lowered form of a
reduction's init) counts loop ``v`` as one iteration.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from ..flop_count import estimate_flops
from ..registry import register
from ..tir.dtype import nbytes
from ..tir.function import IRModule, PrimFunc
from ..tir.stmt import ForKind
from ..tir.transform import lower
from ..tir.transform.lower import LOWER_PASSES
from ..tir.transform.simplify import simplify_indices
from .base import FeatureExtractor
from .features.buffers import slog
from .features.isa import isa_vector, target_isa
from .features.layout import OP_NAMES, Layout, feature_names, slot_table
from .features.loop_nest import LoopNestWalker, const_int, unroll_of_blocks
from .features.ops import count_store
from .features.store_row import StoreFeatures

if TYPE_CHECKING:
    from ..measure_candidate import MeasureCandidate

__all__ = ["PerStoreFeature", "feature_names"]

#: Lowering for features: index simplification is left out (it is most of the lowering
#: time, and the linear forms of the indices see through unsimplified affine arithmetic:
#: the features came out identical on the schedules we compared).
FEATURE_LOWER_PASSES = tuple(p for p in LOWER_PASSES if p is not simplify_indices)


@register("feature_extractor", "per-store-feature")
class PerStoreFeature(FeatureExtractor):
    """One feature vector per ``BufferStore`` of each lowered candidate (see the module doc).

    Args:
        buffers_per_store: buffers described per store; more are dropped (fewest bytes
            first), fewer are zero padded.
        arith_intensity_curve_num_samples: samples of the arithmetic-intensity curve.
        cache_line_bytes: cache line size used for the line counts.
        extract_workload: append features of the unscheduled workload (``context.mod``).
        extract_isa: append features of the target's CPU (vector width, registers, FMA
            units, caches, extensions, threads).
        extract_prior: append the analytic prior's estimate of the candidate.
    """

    def __init__(
        self,
        buffers_per_store: int = 5,
        arith_intensity_curve_num_samples: int = 10,
        cache_line_bytes: int = 64,
        extract_workload: bool = False,
        extract_isa: bool = False,
        extract_prior: bool = False,
    ) -> None:
        for name, value, low in (
            ("buffers_per_store", buffers_per_store, 0),
            ("arith_intensity_curve_num_samples", arith_intensity_curve_num_samples, 0),
            ("cache_line_bytes", cache_line_bytes, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"PerStoreFeature: {name} must be an int >= {low}, got {value!r}")
        self.buffers_per_store = buffers_per_store
        self.arith_intensity_curve_num_samples = arith_intensity_curve_num_samples
        self.cache_line_bytes = cache_line_bytes
        self.extract_workload = bool(extract_workload)
        self.extract_isa = bool(extract_isa)
        self.extract_prior = bool(extract_prior)
        self.layout = Layout(
            slot_table(
                buffers_per_store,
                arith_intensity_curve_num_samples,
                self.extract_workload,
                self.extract_isa,
                self.extract_prior,
            )
        )
        self._prior: Any = None  # the AnalyticPrior of extract_prior, made on first use
        self.feature_names = self.layout.names
        self._workload_cache: tuple[Any, np.ndarray] | None = None
        self._isa_cache: tuple[Any, np.ndarray] | None = None
        # id(mod) -> (mod, is_gpu, workload, features): modules are immutable, and the
        # search asks for the same schedules again (evolution rounds, then training).
        self._cache: OrderedDict[int, tuple[Any, bool, Any, np.ndarray]] = OrderedDict()

    #: feature arrays remembered, most recently used kept
    cache_size: int = 4096

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        state["_workload_cache"] = None
        state["_isa_cache"] = None
        state["_prior"] = None
        return state

    def settings(self) -> dict[str, Any]:
        """The constructor arguments: ``PerStoreFeature(**settings())`` extracts the
        same features (a pre-trained model records them)."""
        return {
            "buffers_per_store": self.buffers_per_store,
            "arith_intensity_curve_num_samples": self.arith_intensity_curve_num_samples,
            "cache_line_bytes": self.cache_line_bytes,
            "extract_workload": self.extract_workload,
            "extract_isa": self.extract_isa,
            "extract_prior": self.extract_prior,
        }

    @property
    def feature_vector_length(self) -> int:
        """Length of the feature vector."""
        return len(self.feature_names)

    def extract_from(self, context: Any, candidates: list[MeasureCandidate]) -> list[np.ndarray]:
        """One float32 array ``[num_stores, feature_vector_length]`` per candidate."""
        is_gpu = _is_gpu_target(getattr(context, "target", None))
        workload = self._workload_features(context) if self.extract_workload else None
        isa = self._isa_features(context) if self.extract_isa else None
        out = [self._extract_cached(c.sch.mod, is_gpu, workload, isa) for c in candidates]
        if self.extract_prior:
            out = self._with_prior(context, candidates, out)
        return out

    def share_prior(self, prior: Any) -> bool:
        """Fill the prior slots with ``prior``'s estimates from now on, so that a search
        whose warm-up ranks by the same prior estimates each candidate once (the prior
        remembers its estimates). Taken only when it estimates what the extractor's own
        would (a plain ``AnalyticPrior()``): whether it was."""
        from ..cost_model.prior import AnalyticPrior  # local: the prior imports this package

        same = type(prior) is AnalyticPrior and prior.machine is None
        if same and self.extract_prior:
            self._prior = prior
        return same and self.extract_prior

    def _with_prior(self, context: Any, candidates: list[Any], feats: list[np.ndarray]) -> list:
        """``feats`` with the prior's estimate of each candidate in its prior slots."""
        from ..cost_model.prior import AnalyticPrior  # local: the prior imports this package

        if self._prior is None:
            self._prior = AnalyticPrior()
        mod = getattr(context, "mod", None)
        flops = float(estimate_flops(mod)) if mod is not None else 0.0
        scores = self._prior.predict(context, candidates)  # 1 / estimated seconds
        span, out = self.layout.span("prior"), []
        for f, score in zip(feats, scores):
            f = f.copy()
            secs = 1.0 / score if score > 0 else 1.0
            f[:, span] = (np.log2(1 + secs * 1e9), np.log2(1 + flops / secs / 1e9))
            out.append(f)
        return out

    def _extract_cached(
        self, mod: Any, is_gpu: bool, workload: np.ndarray | None, isa: np.ndarray | None
    ) -> np.ndarray:
        hit = self._cache.get(id(mod))
        if (
            hit is not None
            and hit[0] is mod
            and hit[1] == is_gpu
            and hit[2][0] is workload
            and hit[2][1] is isa
        ):
            self._cache.move_to_end(id(mod))
            return hit[3]
        feats = self.extract_mod(mod, is_gpu=is_gpu, workload=workload, isa=isa)
        feats.setflags(write=False)  # shared between callers
        self._cache[id(mod)] = (mod, is_gpu, (workload, isa), feats)
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return feats

    def extract_mod(
        self,
        mod: IRModule | PrimFunc,
        *,
        is_gpu: bool = False,
        workload: np.ndarray | None = None,
        isa: np.ndarray | None = None,
    ) -> np.ndarray:
        """Features of every store of every function of ``mod`` (scheduled, not lowered)."""
        funcs = [mod] if isinstance(mod, PrimFunc) else list(mod.functions.values())
        rows: list[np.ndarray] = []
        for func in funcs:
            lowered = lower(func, FEATURE_LOWER_PASSES)
            walker = LoopNestWalker()
            walker.walk(lowered.body)
            gpu = is_gpu or any(
                lp.kind is ForKind.THREAD_BINDING for st in walker.stores for lp in st.loops
            )
            maker = StoreFeatures(
                self.layout,
                buffers_per_store=self.buffers_per_store,
                curve_samples=self.arith_intensity_curve_num_samples,
                cache_line=self.cache_line_bytes,
                is_gpu=gpu,
                func_unroll=unroll_of_blocks(func.body),
            )
            counted = [count_store(st.store) for st in walker.stores]
            serial: dict[tuple[int, Any], int] = {}
            for st, (_, loads) in zip(walker.stores, counted):
                key = id(st.loops[-1].node) if st.loops else 0
                for b in [st.store.buffer] + [ld.buffer for ld in loads]:
                    serial[(key, b)] = serial.get((key, b), 0) + 1
            rows += [
                maker.row(st, serial, ops, loads)
                for st, (ops, loads) in zip(walker.stores, counted)
            ]
        out = (
            np.stack(rows) if rows else np.zeros((0, self.feature_vector_length), dtype=np.float32)
        )
        if workload is not None and len(out):
            out[:, self.layout.span("workload")] = workload
        if isa is not None and len(out):
            out[:, self.layout.span("isa")] = isa
        return out

    def _isa_features(self, context: Any) -> np.ndarray:
        isa, cores = target_isa(context)
        if self._isa_cache is not None and self._isa_cache[0] == (isa, cores):
            return self._isa_cache[1]
        vec = isa_vector(isa, cores)
        self._isa_cache = ((isa, cores), vec)
        return vec

    def _workload_features(self, context: Any) -> np.ndarray:
        mod = getattr(context, "mod", None)
        if mod is None:
            raise ValueError(
                "PerStoreFeature(extract_workload=True) needs context.mod (the workload); "
                f"got a context without one: {context!r}"
            )
        if self._workload_cache is not None and self._workload_cache[0] is mod:
            return self._workload_cache[1]
        funcs = [mod] if isinstance(mod, PrimFunc) else list(mod.functions.values())
        ops = [0.0] * len(OP_NAMES)
        num_stores = 0
        param_bytes = 0.0
        for func in funcs:
            walker = LoopNestWalker()
            walker.walk(lower(func, FEATURE_LOWER_PASSES).body)
            for st in walker.stores:
                counts, _ = count_store(st.store)
                total = math.prod(st.extents)
                ops = [a + b * total for a, b in zip(ops, counts)]
            num_stores += len(walker.stores)
            for p in func.params:
                shape = [const_int(d, 0) for d in p.shape]
                param_bytes += math.prod(shape) * nbytes(p.dtype)
        vec = np.array(
            [slog(v) for v in ops] + [slog(num_stores), slog(param_bytes)], dtype=np.float32
        )
        self._workload_cache = (mod, vec)
        return vec


def _is_gpu_target(target: Any) -> bool:
    if target is None:
        return False
    kind = getattr(target, "kind", target)
    return isinstance(kind, str) and kind.split()[0] in ("cuda", "nvidia", "gpu")
