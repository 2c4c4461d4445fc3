"""The threads a kernel's parallel region asks for (its ``num_threads`` clause).

All the target's cores, except where the host's OpenMP threads sleep between regions
(``OMP_WAIT_POLICY=passive`` or ``GOMP_SPINCOUNT=0``, read once at the first region) and
the kernel's work is too small to pay for waking them: then the calling thread runs the
region alone. Waking a sleeping thread costs about 30 us on a 2-core KVM guest (Zen 4) and
the woken thread starts late, so two threads beat one only past about 100 us of serial work
(a loop of 148 us: 120 us on two passive threads, 76 us on two spinning ones). A model of
small kernels (MobileNet, EfficientNet: 55-100 per inference) otherwise spends more time
waking threads than computing. Spinning threads (libgomp's default) are woken in about a
microsecond: every region takes all the cores, as before. A single parallel loop is
``schedule(runtime)``: with sleeping threads its iterations are handed out in shrinking
chunks (``guided``: the thread that was awake does the share of the one still waking; a 148
us loop 120 -> 98 us on two passive threads with ``dynamic``, and ``guided`` keeps each
thread's iterations contiguous, which the convolutions preferred), statically otherwise
(as the loops of a shared region always are: their ``nowait`` relies on the same iterations
going to the same threads).

The work is estimated when the kernel is written, from the stores it executes (the
unscheduled loop nest's trip counts, at :data:`STORES_PER_NS`) and the bytes of its
parameters (at :data:`BYTES_PER_NS`): a constant of the kernel.
"""

from __future__ import annotations

from typing import Any

from ..tir.dtype import nbytes
from ..tir.expr import IntImm
from ..tir.functor import Visitor
from ..tir.stmt import BufferStore, For

__all__ = ["PASSIVE_SERIAL_NS", "team", "work_ns"]

#: with passive waiting, a region of less estimated serial work runs on one thread
PASSIVE_SERIAL_NS = 100_000
#: serial rate of a scheduled kernel's scalar stores (a multiply-add each in a matmul or
#: convolution: one core's ~100 GFLOPS)
STORES_PER_NS = 50.0
#: serial rate of reading and writing its parameters (from the caches)
BYTES_PER_NS = 50.0

TEAM_C = f"""#ifdef _OPENMP
#include <omp.h>
#endif
/* the threads of a parallel region of about work_ns ns of serial work
   (metaschedule/codegen/c_team.py): one when OpenMP threads sleep between regions and
   the work is small; past that, a `schedule(runtime)` loop hands out its iterations in
   shrinking chunks (guided: the woken thread starts late), statically otherwise */
static inline int ms_team(int64_t work_ns, int cores) {{
  static int passive = -1;
  if (passive < 0) {{
    const char* policy = getenv("OMP_WAIT_POLICY");
    const char* spin = getenv("GOMP_SPINCOUNT");
    passive = (policy && (policy[0] == 'p' || policy[0] == 'P'))
              || (spin && spin[0] == '0' && spin[1] == 0);
  }}
  int alone = passive && work_ns < {PASSIVE_SERIAL_NS};
#ifdef _OPENMP
  omp_set_schedule(passive && !alone ? omp_sched_guided : omp_sched_static, passive && !alone);
#endif
  return alone ? 1 : cores;
}}
"""


class _Stores(Visitor):
    """The number of stores one call executes (loop trip counts multiplied)."""

    def __init__(self) -> None:
        self.trips, self.count = [1], 0

    def visit_For(self, node: For) -> None:
        extent = node.extent
        self.trips.append(self.trips[-1] * (extent.value if isinstance(extent, IntImm) else 1))
        self.generic_visit(node)
        self.trips.pop()

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.count += self.trips[-1]
        self.generic_visit(node)


def work_ns(func: Any) -> int:
    """Estimated serial nanoseconds of one call of ``func``: its stores (a multiply-add
    each, in a reduction) at :data:`STORES_PER_NS`, its parameters' bytes at
    :data:`BYTES_PER_NS`."""
    stores = _Stores()
    stores.visit(func.body)
    params = sum(buf.numel() * nbytes(buf.dtype) for buf in func.params)
    return int(stores.count / STORES_PER_NS + params / BYTES_PER_NS)


def team(fw: Any) -> str:
    """The ``num_threads`` expression of a parallel region of the function ``fw``
    writes."""
    helper = fw.helpers.need("ms_team", TEAM_C)
    return f"{helper}({work_ns(fw.func)}, {fw.target.num_cores})"
