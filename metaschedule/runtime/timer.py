"""Timing built kernels: the C timing loop compiled into every library, its results, and
the load on the host while it ran.

The loop (``__ms_time``) runs in C so that a measurement times the kernel, not Python.
The protocol (TVM's ``time_evaluator``, made robust for a shared machine):

* warm-up: ``warmup`` untimed calls (default 1);
* sizing: with ``min_repeat_ms > 0``, up to three single-call probes are timed and
  ``number`` is sized from their *median* (one probe that hit a preempted moment, or a
  cold page, does not decide it), capped so that the expected total fits ``max_total_ms``;
* ``repeat`` repeats of ``number`` calls; a repeat's result is its mean seconds per
  call. A repeat shorter than ``min_repeat_ms`` (the kernel sped up after the probes)
  goes on with as many more calls as its rate so far says it needs (the calls already
  timed count: none is timed in vain), and its count of calls carries over as
  ``number``;
* the bound: with ``max_total_ms > 0``, once the timed part has lasted that long the
  current repeat ends after the call in flight (its mean is over the calls made) and no
  more repeats start; at least one call is always timed. A kernel whose speed swings can
  therefore not run past the runner's timeout because of the sizing;
* cache flush: before *every* timed call, the loop reads and writes one byte per cache
  line of a buffer larger than the last-level cache (1.25x its size, 64 MiB when the
  size is unknown), and only the kernel call is timed. A flush costs far more than
  a small kernel, so use a small ``number`` (1 to 3) with cache flushing.

:class:`HostLoad` snapshots the load average and the CPU time of the whole machine, so a
runner can record how busy the host was while a kernel was timed.
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from ..target import host_cpu_info

#: Fallback flush size when the last-level cache size is unknown.
DEFAULT_FLUSH_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class BenchmarkResult:
    """Seconds per call, one entry per repeat, with summary statistics."""

    results: tuple[float, ...]
    #: the calls per repeat the loop settled on (0: not reported)
    number: int = 0
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
        return (
            "BenchmarkResult(mean={:.4f} ms, median={:.4f} ms, max={:.4f} ms, "
            "min={:.4f} ms, std={:.4f} ms)"
        ).format(*ms)


def _busy_cpu_secs() -> float | None:
    """Seconds of CPU the whole machine spent busy since boot (``/proc/stat``), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return None
    ticks = [int(x) for x in fields[:8]]
    busy = sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)  # minus idle, iowait
    return busy / os.sysconf("SC_CLK_TCK")


def _own_cpu_secs() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class HostLoad:
    """A snapshot of how busy the host is; two of them give the load in between.

    ``HostLoad.now()`` before and after a timing, then ``before.until(after)`` is a dict
    with ``loadavg_1m`` (at the end), ``others_cores`` (CPU cores used by *other*
    processes on average over the interval, from ``/proc/stat`` minus this process's own
    CPU time; None where ``/proc/stat`` is missing) and ``wall_secs``.
    """

    wall: float
    busy: float | None
    own: float

    @staticmethod
    def now() -> HostLoad:
        return HostLoad(time.perf_counter(), _busy_cpu_secs(), _own_cpu_secs())

    def until(self, later: HostLoad) -> dict[str, Any]:
        wall = max(later.wall - self.wall, 1e-9)
        others = None
        if self.busy is not None and later.busy is not None:
            used = (later.busy - self.busy) - (later.own - self.own)
            others = round(max(used, 0.0) / wall, 3)
        try:
            loadavg = round(os.getloadavg()[0], 2)
        except OSError:
            loadavg = None
        return {"loadavg_1m": loadavg, "others_cores": others, "wall_secs": round(wall, 4)}


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

// `number` calls of f (fewer when past `deadline` > 0); *calls = how many ran.
// Returns the timed seconds (with flushing: the kernel calls only).
static double ms_batch(ms_kernel_t f, void** args, int32_t number, int64_t flush_bytes,
                       double deadline, int32_t* calls, int32_t* status) {
  double elapsed = 0.0;
  int32_t i = 0;
  if (flush_bytes > 0) {
    for (i = 0; i < number; ++i) {
      ms_flush_cache(flush_bytes);
      double t0 = ms_now();
      *status |= f(args);
      double t1 = ms_now();
      elapsed += t1 - t0;
      if (deadline > 0.0 && t1 > deadline) { ++i; break; }
    }
  } else {
    double t0 = ms_now(), t1 = t0;
    for (i = 0; i < number; ++i) {
      *status |= f(args);
      if (deadline > 0.0 && (i & 7) == 7 && (t1 = ms_now()) > deadline) { ++i; break; }
    }
    if (i == number || t1 == t0) t1 = ms_now();
    elapsed = t1 - t0;
  }
  *calls = i;
  return elapsed;
}

static double ms_median3(double a, double b, double c) {
  if (a > b) { double t = a; a = b; b = t; }
  if (b > c) b = c;
  return a > b ? a : b;
}

// Times kernel `func_index` (the protocol is described in metaschedule/runtime/timer.py);
// out[r] = mean seconds per call of repeat r. `flush` is the cache-flush size in KiB
// (0: no flush); max_total_ms > 0 bounds the timed part. info[0] = the `number` used,
// info[1] = the repeats done. Returns 0, a kernel's nonzero status, -2 for bad
// arguments, -3 if the flush buffer cannot be allocated.
int32_t __ms_time(int32_t func_index, void** args, int32_t number, int32_t repeat,
                  int32_t min_repeat_ms, int32_t flush, double* out, int32_t warmup,
                  int32_t num_probes, int32_t max_total_ms, int32_t* info) {
  if (func_index < 0 || func_index >= __ms_num_functions || number < 1 || repeat < 1
      || warmup < 0 || num_probes < 0 || max_total_ms < 0)
    return -2;
  ms_kernel_t f = ms_kernels[func_index];
  int64_t flush_bytes = (int64_t)flush * 1024;
  if (flush_bytes > 0 && ms_flush_prepare(flush_bytes) != 0) return -3;
  int32_t status = 0, calls = 0;
  for (int32_t i = 0; i < warmup; ++i) status |= f(args);  // not timed
  if (status != 0) return status;
  double start = ms_now();
  double deadline = max_total_ms > 0 ? start + 1e-3 * max_total_ms : 0.0;
  double min_secs = 1e-3 * min_repeat_ms;
  if (min_repeat_ms > 0 && num_probes > 0) {
    // Size `number` from the median of up to three probes, not from one.
    double probe[3] = {0.0, 0.0, 0.0};
    int32_t n = num_probes < 3 ? num_probes : 3;
    for (int32_t p = 0; p < n; ++p) {
      double t = ms_batch(f, args, 1, flush_bytes, 0.0, &calls, &status);
      if (status != 0) return status;
      probe[p] = t;
    }
    if (n == 2) probe[2] = probe[1];
    if (n == 1) probe[1] = probe[2] = probe[0];
    double est = ms_median3(probe[0], probe[1], probe[2]);
    double need = est > 0.0 ? min_secs / est : 1e9;
    if (deadline > 0.0 && est > 0.0) {  // expected total within the budget
      double cap = 1e-3 * max_total_ms / (est * repeat);
      if (need > cap) need = cap;
    }
    if (need > 1e9) need = 1e9;
    if (need > number) number = (int32_t)need + 1;
  }
  int32_t done = 0;
  for (int32_t r = 0; r < repeat; ++r) {
    double elapsed = 0.0;
    int32_t total = 0, batch = number, cut = 0;
    for (;;) {
      elapsed += ms_batch(f, args, batch, flush_bytes, deadline, &calls, &status);
      total += calls;
      if (status != 0) return status;
      if (calls < batch) { cut = 1; break; }  // out of budget: keep what was timed
      if (elapsed >= min_secs) break;
      if (deadline > 0.0 && ms_now() > deadline) { cut = 1; break; }
      // Shorter than min_repeat_ms so far (the kernel sped up since the probes): time
      // more calls into the same repeat, as many as the rate so far says it needs.
      double need = elapsed > 0.0 ? (min_secs - elapsed) / (elapsed / total) + 1.0 : total;
      batch = need > 1e9 ? 1000000000 : (int32_t)need;
    }
    out[r] = elapsed / (total > 0 ? total : 1);
    done = r + 1;
    if (total > number) number = total;  // a repeat that needed more calls: carries over
    if (cut || (deadline > 0.0 && ms_now() > deadline)) break;
  }
  info[0] = number;
  info[1] = done;
  return 0;
}
"""
