"""Helpers shared by the benchmark scripts: machine facts, timing, tables and JSON.

* :func:`machine_info`: CPU model, cores, clock, load average, compiler, numpy's BLAS
  (through ``threadpoolctl`` when it is installed).
* :func:`fma_peak_gflops`: the nominal float32 FMA peak, with the assumptions spelled out.
* :func:`time_python`: best-of-repeats timing of a Python callable (numpy, PyTorch,
  onnxruntime baselines), under the host-wide measurement lock the tuner's runner uses,
  so a baseline is never timed while a tuner on this machine measures.
* :class:`ForeignLoad`: the share of the machine other processes used during a block.
* :func:`print_table`: a table with ``rich`` when it is importable, plain text otherwise.
* :func:`write_json`: ``benchmarks/results/<name>.json`` (or a given path).

The benchmarks are measurements, not tests: nothing here asserts a speed.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

#: FMA units per core assumed by :func:`fma_peak_gflops` (server cores with AVX-512 or
#: AVX2 issue two FMAs a cycle; some parts have one 512-bit unit, which halves the peak)
FMA_UNITS = 2


def fma_units(lanes: int) -> int:
    """Vector FMAs per cycle and core at ``lanes`` float32 lanes: :data:`FMA_UNITS`, over
    the passes a vector wider than the host's FMA units takes
    (:func:`metaschedule.target.vector_datapath_bits`: one 16-lane FMA a cycle on AMD Zen
    2-4, which run it on their two 256-bit pipes)."""
    from metaschedule.target import host_cpu_info

    datapath = host_cpu_info().datapath_bits or lanes * 32
    passes = max(1, lanes * 32 // datapath)
    return max(1, FMA_UNITS // passes)


# ----------------------------------------------------------------------------- machine
def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _cpuinfo_field(name: str) -> list[str]:
    text = _read("/proc/cpuinfo") or ""
    return [
        ln.split(":", 1)[1].strip()
        for ln in text.splitlines()
        if ln.split(":", 1)[0].strip() == name and ":" in ln
    ]


def cpu_ghz() -> tuple[float | None, str]:
    """The nominal clock in GHz and where it came from: cpufreq's maximum if the kernel
    exposes it, else the largest ``cpu MHz`` of /proc/cpuinfo, else lscpu's maximum."""
    raw = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if raw and raw.strip().isdigit():
        return int(raw) / 1e6, "cpufreq cpuinfo_max_freq"
    mhz = []
    for value in _cpuinfo_field("cpu MHz"):
        try:
            mhz.append(float(value))
        except ValueError:
            pass
    if mhz:
        return max(mhz) / 1e3, "/proc/cpuinfo 'cpu MHz'"
    lscpu = _lscpu()
    for key in ("CPU max MHz", "CPU MHz"):
        try:
            return float(lscpu[key]) / 1e3, f"lscpu '{key}'"
        except (KeyError, ValueError):
            pass
    return None, "unknown"


def _lscpu() -> dict[str, str]:
    if shutil.which("lscpu") is None:
        return {}
    try:
        out = subprocess.run(
            ["lscpu"], check=False, capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in out.splitlines())}


def blas_info() -> list[dict[str, Any]] | str:
    """numpy's BLAS as ``threadpoolctl`` sees it, or why it could not be asked."""
    try:
        import numpy  # noqa: F401 - load numpy's BLAS before asking which one it is
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed (pip install threadpoolctl)"
    keep = ("user_api", "internal_api", "version", "num_threads", "threading_layer", "architecture")
    return [{k: info.get(k) for k in keep} for info in threadpool_info()]


def compiler_version() -> str | None:
    """The first line of ``$CC --version`` (or ``cc``), the compiler the tuner builds with."""
    cc = os.environ.get("CC", "cc")
    try:
        out = subprocess.run(
            [cc, "--version"], check=False, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.splitlines()[0] if out.stdout else None


def machine_info() -> dict[str, Any]:
    """What the numbers of a benchmark depend on, as a JSON-able dict."""
    import numpy as np

    from metaschedule.target import Target

    host = Target("cpu")
    ghz, ghz_source = cpu_ghz()
    model = (_cpuinfo_field("model name") or [_lscpu().get("Model name")])[0]
    return {
        "cpu_model": model or platform.processor() or platform.machine(),
        "logical_cpus": os.cpu_count(),
        "physical_cores": host.num_cores,
        "vector_width_bytes": host.attrs["vector_width"],
        "ghz": ghz,
        "ghz_source": ghz_source,
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "blas": blas_info(),
        "compiler": compiler_version(),
        "target": str(host),
    }


def fma_peak_gflops(cores: int, ghz: float | None, lanes: int) -> float | None:
    """Nominal float32 peak: ``cores x GHz x lanes x 2 (an FMA is 2 flops) x units``.

    Assumes every core runs at the nominal clock (no turbo, no AVX-512 down-clocking)
    and issues :func:`fma_units` vector FMAs each cycle. None when the clock is unknown.
    """
    if not ghz:
        return None
    return cores * ghz * lanes * 2 * fma_units(lanes)


_FMA_LOOP = r"""
#include <omp.h>
#include <time.h>
typedef float vf __attribute__((vector_size(%(bytes)d)));
volatile float fma_sink;
static double thread_cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
/* the longest CPU time a thread spent: other processes' time slices do not count */
double fma_loop(long iters, int threads) {
  double longest = 0;
  #pragma omp parallel num_threads(threads) reduction(max: longest)
  {
    double t0 = thread_cpu();
    vf a[12], x = {0}, y = {0};
    for (int i = 0; i < 12; ++i) { a[i] = x + (float)i; }
    x += 1.0f; y += 0.999999f;
    for (long n = 0; n < iters; ++n)
      for (int i = 0; i < 12; ++i) a[i] = a[i] * y + x;  /* 12 independent FMA chains */
    vf sum = a[0];
    for (int i = 1; i < 12; ++i) sum += a[i];  /* every lane of every chain is used */
    for (int l = 0; l < %(lanes)d; ++l) fma_sink = sum[l];
    longest = thread_cpu() - t0;
  }
  return longest;
}
"""


def measured_fma_peak(
    cores: int, lanes: int, seconds: float = 0.3, target: Any = "cpu"
) -> float | None:
    """The float32 FMA throughput the cores reach, measured (GFLOPS): ``cores`` threads
    each running 12 independent ``lanes``-wide FMA chains, timed by each thread's CPU
    time (so other processes' time slices do not count), the best of 3 runs. Unlike
    :func:`fma_peak_gflops` it includes turbo clocks and the FMA units the core really
    has. ``target``: the ISA to build the loop for (``"llvm -mcpu=haswell"``: the AVX2
    peak of an AVX-512 host). None if the kernel cannot be built."""
    import ctypes

    from metaschedule.codegen.compiler import compile_shared, compiler_flags
    from metaschedule.target import Target

    try:
        path = compile_shared(
            _FMA_LOOP % {"bytes": 4 * lanes, "lanes": lanes}, compiler_flags(Target(target))
        )
    except Exception:  # noqa: BLE001  (any build failure: no measured peak)
        return None
    fn = ctypes.CDLL(path).fma_loop
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_long, ctypes.c_int]
    iters = 1 << 16
    while (elapsed := fn(iters, cores)) < seconds / 3:
        iters *= 2
    best = min([elapsed] + [fn(iters, cores) for _ in range(2)])
    return cores * iters * 12 * lanes * 2 / best / 1e9


def machine_lines(info: dict[str, Any]) -> list[str]:
    """A few lines describing the machine, for the top of a report."""
    load = info.get("loadavg") or []
    blas = info.get("blas")
    if isinstance(blas, list):
        blas = (
            ", ".join(
                f"{b.get('internal_api')} {b.get('version')} "
                f"({b.get('num_threads')} threads, {b.get('architecture')})"
                for b in blas
            )
            or "none found"
        )
    ghz = f"{info['ghz']:.2f} GHz ({info['ghz_source']})" if info.get("ghz") else "clock unknown"
    return [
        (
            f"CPU: {info['cpu_model']}, {info['physical_cores']} core(s) / "
            f"{info['logical_cpus']} logical, {ghz}, {info['vector_width_bytes']}-byte vectors"
        ),
        "load average: " + " ".join(f"{x:.2f}" for x in load) if load else "load average: n/a",
        f"numpy {info['numpy']}, BLAS: {blas}; compiler: {info.get('compiler')}",
    ]


# ----------------------------------------------------------------------------- timing
@contextmanager
def measurement_lock():
    """The host-wide lock the tuner's LocalRunner holds while it times a candidate."""
    from metaschedule.runner.local_runner import host_measurement_lock

    with host_measurement_lock():
        yield


def _busy_secs() -> float | None:
    """CPU-seconds the whole machine has been busy (all CPUs, from /proc/stat)."""
    text = _read("/proc/stat")
    if not text or not text.startswith("cpu "):
        return None
    fields = [int(x) for x in text.splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class ForeignLoad:
    """How busy other processes kept the machine during a ``with`` block.

    ``share`` is their CPU time over the block's wall time times the CPU count (0: the
    machine was ours; 0.5 on 2 CPUs: another process kept one CPU busy); None where
    /proc/stat is unreadable. The resolution is a clock tick (10 ms), so blocks should
    last a few hundred ms.
    """

    share: float | None = None

    def __enter__(self) -> Self:
        self._t0, self._busy0, self._own0 = time.perf_counter(), _busy_secs(), os.times()
        return self

    def __exit__(self, *exc) -> None:
        elapsed = time.perf_counter() - self._t0
        busy, own = _busy_secs(), os.times()
        if busy is None or self._busy0 is None or elapsed <= 0:
            return
        mine = (own.user - self._own0.user) + (own.system - self._own0.system)
        self.share = max(0.0, busy - self._busy0 - mine) / (elapsed * (os.cpu_count() or 1))


def time_python(
    fn: Callable[[], Any], *, repeat: int = 5, min_repeat_ms: float = 200.0, warmup: int = 1
) -> list[float]:
    """Seconds per call of ``fn``: one number per repeat, each the mean over enough calls
    to last ``min_repeat_ms``. Timed under :func:`measurement_lock`."""
    with measurement_lock():
        for _ in range(warmup):
            fn()
        start = time.perf_counter()
        fn()
        once = max(time.perf_counter() - start, 1e-9)
        number = max(1, math.ceil(min_repeat_ms / 1e3 / once))
        out = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            out.append((time.perf_counter() - start) / number)
    return out


def sampled_schedules(func: Any, seed: int = 0):
    """Random points of the default llvm design space of ``func``, post-processed: an
    endless iterator of schedules (the points a postprocessor rejects are skipped)."""
    import numpy as np

    from metaschedule.schedule import Schedule
    from metaschedule.schedule.trace import Trace
    from metaschedule.space_generator import PostOrderApply
    from metaschedule.tune_context import TuneContext

    ctx = TuneContext(func, target="llvm", space_generator=PostOrderApply(), rand_state=seed)
    spaces, post = ctx.generate_design_space(), ctx.space_generator.postprocs
    rng = np.random.default_rng(seed)
    while True:
        space = spaces[int(rng.integers(len(spaces)))]
        sch = Schedule(ctx.mod, seed=int(rng.integers(2**31)), error_render_level="none")
        Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
        sch.enter_postproc()
        if all(p.apply(sch) for p in post):
            yield sch


def optional_import(name: str) -> tuple[Any | None, str | None]:
    """``(module, None)``, or ``(None, why)`` when ``name`` cannot be imported."""
    try:
        return importlib.import_module(name), None
    except Exception as err:  # noqa: BLE001 - a broken install is a reason to skip too
        return None, f"{name} not importable ({type(err).__name__}: {err})".splitlines()[0]


# ----------------------------------------------------------------------------- output
def fmt(value: Any, digits: int = 1) -> str:
    """A table cell: floats with ``digits`` decimals, None as 'n/a'."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.{digits}f}"
    return str(value)


def print_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    notes: Sequence[str] = (),
    *,
    plain: bool = False,
) -> None:
    """Print a table (cells through :func:`fmt` unless already strings); with ``rich``
    if importable and ``plain`` is False, else as aligned plain text."""
    cells = [[c if isinstance(c, str) else fmt(c) for c in row] for row in rows]
    if not plain:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            plain = True
    if not plain:
        table = Table(title=title, title_justify="left")
        for i, col in enumerate(columns):
            table.add_column(col, justify="left" if i == 0 else "right")
        for row in cells:
            table.add_row(*row)
        widths = [max(len(str(r[c])) for r in [list(columns), *cells]) for c in range(len(columns))]
        need = sum(widths) + 3 * len(widths) + 1  # no cell is cut when the table fits
        console = Console(width=max(need, shutil.get_terminal_size((100, 20)).columns))
        console.print(table)
        for note in notes:
            console.print(note, highlight=False, markup=False)
        return
    print(plain_table(title, columns, cells, notes))


def plain_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str] = ()
) -> str:
    """The plain-text form of :func:`print_table`."""
    widths = [max(len(str(r[c])) for r in [list(columns), *rows]) for c in range(len(columns))]

    def line(row):
        return " | ".join(
            str(v).ljust(w) if i == 0 else str(v).rjust(w)
            for i, (v, w) in enumerate(zip(row, widths))
        )

    out = [title, line(columns), "-+-".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    out += list(notes)
    return "\n".join(out)


def write_json(name: str, payload: dict[str, Any], path: str | None = None) -> str:
    """Write ``payload`` (with a timestamp added) to ``path`` or
    ``benchmarks/results/<name>.json``; returns the path."""
    path = path or os.path.join(RESULTS_DIR, f"{name}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    payload = {"benchmark": name, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"), **payload}
    with open(path, "w") as f:
        json.dump(_finite(payload), f, indent=1, default=_json_default, allow_nan=False)
        f.write("\n")
    return path


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats (a failed run's ``inf``) as strings: strict JSON."""
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()  # a numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
    except ImportError:  # pragma: no cover
        pass
    return str(value)


def run_tvm_child(argv: list[str], work_dir: str, out_path: str, timeout: float) -> dict[str, Any]:
    """Run a benchmark's TVM child (``python argv...``, TVM in its own interpreter: it
    installs its own signal handlers and worker pools), its console in
    ``work_dir/tvm_console.log``: the JSON it wrote to ``out_path``, or ``{"error": ...}``."""
    log_path = os.path.join(work_dir, "tvm_console.log")
    os.makedirs(work_dir, exist_ok=True)
    try:
        with open(log_path, "w") as log:
            proc = subprocess.run(
                [sys.executable, *argv],
                check=False,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                env={**os.environ, "TVM_NUM_THREADS": "1"},
            )
    except subprocess.TimeoutExpired:
        return {"error": f"TVM tuning ran past {timeout:.0f} s (log: {log_path})"}
    if proc.returncode != 0 or not os.path.exists(out_path):
        with open(log_path) as f:
            tail = f.read()[-1500:]
        return {"error": f"TVM child exited with {proc.returncode} (log: {log_path}): {tail}"}
    with open(out_path) as f:
        return json.load(f)
