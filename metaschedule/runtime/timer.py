"""Timing built kernels: the C timing loop compiled into every library, and its results.

The loop (``__ms_time``) runs in C so that a measurement times the kernel, not
Python. Semantics follow TVM's ``time_evaluator``:

* one untimed warm-up call, then ``repeat`` repeats of ``number`` calls each; a
  repeat's result is its mean time per call, in seconds;
* ``min_repeat_ms``: while a repeat lasts less than this, ``number`` grows (to the
  count expected to reach it, and at least by a factor 1.618) and the repeat is run
  again; the grown ``number`` carries over to later repeats;
* cache flush: before *every* timed call, the loop reads and writes one byte per cache
  line of a buffer larger than the last-level cache (1.25x its size, 64 MiB when the
  size is unknown), and only the kernel call is timed. A flush costs far more than
  a small kernel, so use a small ``number`` (1 to 3) with cache flushing.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from ..target import host_cpu_info

#: Fallback flush size when the last-level cache size is unknown.
DEFAULT_FLUSH_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class BenchmarkResult:
    """Seconds per call, one entry per repeat, with summary statistics."""

    results: tuple[float, ...]
    mean: float = field(init=False)
    median: float = field(init=False)
    min: float = field(init=False)
    max: float = field(init=False)
    std: float = field(init=False)

    def __post_init__(self) -> None:
        results = tuple(float(r) for r in self.results)
        if not results:
            raise ValueError("a BenchmarkResult needs at least one result")
        object.__setattr__(self, "results", results)
        object.__setattr__(self, "mean", statistics.fmean(results))
        object.__setattr__(self, "median", statistics.median(results))
        object.__setattr__(self, "min", min(results))
        object.__setattr__(self, "max", max(results))
        object.__setattr__(self, "std", statistics.pstdev(results) if len(results) > 1 else 0.0)

    def __str__(self) -> str:
        ms = [x * 1e3 for x in (self.mean, self.median, self.max, self.min, self.std)]
        return ("BenchmarkResult(mean={:.4f} ms, median={:.4f} ms, max={:.4f} ms, "
                "min={:.4f} ms, std={:.4f} ms)").format(*ms)


def default_flush_bytes() -> int:
    """1.25x the host's last-level cache, rounded up to KiB."""
    info = host_cpu_info()
    llc = info.l3_cache_bytes or info.l2_cache_bytes
    size = int(llc * 1.25) if llc else DEFAULT_FLUSH_BYTES
    return math.ceil(size / 1024) * 1024


def timer_c_source(symbols: list[str]) -> str:
    """C for the function table and ``__ms_time`` over the kernels ``symbols``."""
    table = ", ".join(symbols) if symbols else "0"
    return _TIMER_C.replace("@TABLE@", table).replace("@COUNT@", str(len(symbols)))


_TIMER_C = r"""
// ---- metaschedule runtime: the timing loop (metaschedule/runtime/timer.py) ----
#include <time.h>

typedef int32_t (*ms_kernel_t)(void**);
static ms_kernel_t const ms_kernels[] = {@TABLE@};
const int32_t __ms_num_functions = @COUNT@;

static double ms_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile char* ms_flush_buf = NULL;
static int64_t ms_flush_size = 0;

static int32_t ms_flush_prepare(int64_t bytes) {
  if (ms_flush_size >= bytes) return 0;
  free((void*)ms_flush_buf);
  ms_flush_buf = (volatile char*)calloc((size_t)bytes, 1);
  ms_flush_size = ms_flush_buf ? bytes : 0;
  return ms_flush_buf ? 0 : -3;
}

static void ms_flush_cache(int64_t bytes) {
  for (int64_t i = 0; i < bytes; i += 64) ms_flush_buf[i] += 1;
}

// Times kernel `func_index`; out[r] = mean seconds per call of repeat r.
// `flush` is the cache-flush size in KiB (0: no flush). Returns 0, or a kernel's
// nonzero status, -2 for bad arguments, -3 if the flush buffer cannot be allocated.
int32_t __ms_time(int32_t func_index, void** args, int32_t number, int32_t repeat,
                  int32_t min_repeat_ms, int32_t flush, double* out) {
  if (func_index < 0 || func_index >= __ms_num_functions || number < 1 || repeat < 1)
    return -2;
  ms_kernel_t f = ms_kernels[func_index];
  int64_t flush_bytes = (int64_t)flush * 1024;
  if (flush_bytes > 0 && ms_flush_prepare(flush_bytes) != 0) return -3;
  int32_t status = f(args);  // warm-up, not timed
  if (status != 0) return status;
  for (int32_t r = 0; r < repeat; ++r) {
    double elapsed;
    for (;;) {
      elapsed = 0.0;
      if (flush_bytes > 0) {
        for (int32_t i = 0; i < number; ++i) {
          ms_flush_cache(flush_bytes);
          double t0 = ms_now();
          status |= f(args);
          elapsed += ms_now() - t0;
        }
      } else {
        double t0 = ms_now();
        for (int32_t i = 0; i < number; ++i) status |= f(args);
        elapsed = ms_now() - t0;
      }
      if (status != 0) return status;
      double ms = elapsed * 1e3;
      if (ms >= (double)min_repeat_ms) break;
      double need = ms > 0.0 ? (double)min_repeat_ms / (ms / number) + 1.0 : number * 2.0;
      double grow = number * 1.618;
      double next = need > grow ? need : grow;
      number = next > 1e9 ? 1000000000 : (int32_t)next;
    }
    out[r] = elapsed / number;
  }
  return 0;
}
"""
