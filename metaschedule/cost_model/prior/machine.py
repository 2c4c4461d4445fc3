"""The CPU the analytic prior assumes: :class:`Machine`, the facts of the target's
:class:`~metaschedule.codegen.isa.CpuIsa` (float32 lanes, vector registers, FMA pipes,
latency and datapath, the code generator's register-tile limits), the host's caches when
the target is the host, and defaults measured on a Zen 5 for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ...codegen.c_accumulate import (
    TileLimits,
)
from ...codegen.isa import CpuIsa, isa_of, named_isa
from ...codegen.plan import PlanContext
from ...target import HostCpuInfo, host_cpu_info, is_host

__all__ = ["Machine"]

#: the x86 ISA of a vector of so many float32 lanes (a Machine given lanes, no ISA)
_X86_BY_LANES = {4: "x86-64", 8: "x86-64-v3", 16: "x86-64-v4"}


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
    #: the ISA record the code generator plans for (None: the x86 one of ``lanes``
    #: float32 lanes, see :meth:`plan_context`); machines of the same facts compare
    #: equal whichever CPU's record they came from
    isa: CpuIsa | None = field(default=None, compare=False)

    def plan_context(self) -> PlanContext:
        """What the code generator's plan stage reads (:class:`~metaschedule.codegen.plan.
        PlanContext`): the ISA record, with this machine's register-tile limits."""
        isa = self.isa or named_isa(_X86_BY_LANES.get(self.lanes, "x86-64-v4"))
        assert isa is not None  # a name of the table
        return PlanContext(isa, self.limits)

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
        facts: dict[str, Any] = {}
        if is_host(target, host):  # the caches of the host only (their ways come from it)
            host = host if host is not None else host_cpu_info()
            facts = {
                "datapath_bits": host.datapath_bits,
                "l1_bytes": isa.l1_bytes,
                "l1_ways": host.l1_cache_ways,
                "l2_bytes": isa.l2_bytes,
                "l2_ways": host.l2_cache_ways,
            }
        if datapath_bits is not None:
            facts["datapath_bits"] = datapath_bits
        return Machine.of_isa(isa, int(target.num_cores), **facts)

    @staticmethod
    def of_isa(isa: CpuIsa, cores: int = 1, **facts: int | None) -> Machine:
        """The defaults with the facts of ``isa`` (float32 lanes, vector registers, FMA
        pipes, latency and datapath width, the code generator's register-tile limits),
        ``cores``, and ``facts`` over them (a field of :class:`Machine` each, a host's
        caches for instance; 0 or None: not known). The caches stay the defaults unless
        given: the prior's balance was tuned on them. The FMA and load rates are scaled
        for vectors wider than the datapath.
        """
        base = Machine()
        known = {k: int(v) for k, v in facts.items() if v}
        known = {k: v for k, v in {"datapath_bits": isa.datapath_bits, **known}.items() if v}
        lanes = isa.lanes("float32")
        passes = max(1.0, lanes * 32 / known.get("datapath_bits", base.datapath_bits))
        # the FMA pipes of the ISA (its datapath wide); the load ports as many
        ports = float(isa.fma_units)
        return replace(
            base,
            lanes=lanes,
            cores=max(1, cores),
            vector_registers=isa.vector_registers,
            fma_latency=float(isa.fma_latency),
            fma_ports=ports / passes,
            loads_per_cycle=base.loads_per_cycle / passes,
            limits=TileLimits.of(isa),
            isa=isa,
            **known,
        )
