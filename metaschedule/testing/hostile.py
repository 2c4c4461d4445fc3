"""Hostile inputs (issue 33): the probes of ``benchmarks/hostile_inputs.py`` and the
helpers the trust-boundary tests share.

Each probe plays one attacker move against the package (a database that carries code,
a module planted in the current folder, a library planted in the kernel cache, a lock
held by another process, ...) and returns one line saying how it ended, or raises
:class:`ProbeFailed`. A probe may create ``marker`` only by being exploited: the caller
checks that file, and that no process the probe started outlives it. Probes change the
process they run in (environment, limits, current folder): run each in a child process of
its own (``python -P -m metaschedule.testing.hostile NAME FOLDER MARKER DEADLINE``), as the
campaign does. Each probe imports the package's modules it needs itself ("per probe"), after
changing its process: what it probes is loaded under the conditions it sets up.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import signal
import subprocess
import sys
import time
import warnings
import zlib
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

__all__ = [
    "PROBES",
    "SLOW_PROBES",
    "ProbeFailed",
    "carried_bomb_line",
    "fill_json_database",
    "hanging_cc",
    "nesting_bomb",
    "plant_name",
    "rename_buffer",
    "run_probe",
]

WL = "database_workload.json"
REC = "database_tuning_record.json"


class ProbeFailed(AssertionError):
    """The package did not stop the probe the way it should have."""


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise ProbeFailed(what)


# ----------------------------------------------------------------------------- helpers
def fill_json_database(work_dir: str, n: int = 8, records: int = 2) -> None:
    """A JSON database of ``matmul(n)`` with ``records`` records (run times 0.1, 0.2, ...)."""
    from ..database import JSONDatabase  # local: per probe
    from .tuning_records import make_record, matmul  # local: per probe

    db = JSONDatabase(work_dir=str(work_dir))
    w = db.commit_workload(matmul(n))
    for i in range(records):
        db.commit_tuning_record(make_record(w, [0.1 * (i + 1)], seed=i))
    db.close()


def rename_buffer(mod_json: dict, old: str, new: str) -> None:
    """Rename buffer ``old`` to ``new`` in a module's JSON object (``ms.tir.save_json``)."""
    for node in mod_json["nodes"]:
        if node["type"] == "Buffer" and node["fields"]["name"] == old:
            node["fields"]["name"] = new


def plant_name(work_dir: str, new: str, old: str = "C") -> None:
    """Rename buffer ``old`` in every stored copy of a JSON database's workload: its line
    and the copy each record carries (the shash stays: names are not part of it)."""
    wl, rec = os.path.join(work_dir, WL), os.path.join(work_dir, REC)
    lines = []
    with open(wl) as f:
        for line in f.read().splitlines():
            shash, mod = json.loads(line)
            rename_buffer(mod, old, new)
            lines.append(json.dumps([shash, mod]))
    with open(wl, "w") as f:
        f.write("\n".join(lines) + "\n")
    lines = []
    with open(rec) as f:
        for line in f.read().splitlines():
            workload_line, record, (shash, blob) = json.loads(line)
            mod = json.loads(zlib.decompress(base64.b64decode(blob)))
            rename_buffer(mod, old, new)
            blob = base64.b64encode(zlib.compress(json.dumps(mod).encode())).decode()
            lines.append(json.dumps([workload_line, record, [shash, blob]]))
    with open(rec, "w") as f:
        f.write("\n".join(lines) + "\n")


def carried_bomb_line(inflated: int) -> str:
    """A JSON database record line whose carried workload inflates to ``inflated`` bytes
    of spaces, and whose workload line does not exist (so the carried copy is the one a
    reader uses)."""
    from ..database import MemoryDatabase  # local: per probe
    from .tuning_records import make_record, matmul  # local: per probe

    packer = zlib.compressobj(9)
    chunk = b" " * (1 << 20)
    blob = b"".join(packer.compress(chunk) for _ in range(inflated >> 20)) + packer.flush()
    carried = ["1", base64.b64encode(blob).decode()]
    rec = make_record(MemoryDatabase().commit_workload(matmul(8)), [0.05], seed=7)
    return json.dumps([99, rec.as_json(), carried])


def nesting_bomb(depth: int = 100_000) -> str:
    """A JSON document nested ``depth`` lists deep (a parser that recurses dies on it)."""
    return "[" * depth + "]" * depth


def hanging_cc(folder: str) -> tuple[str, str]:
    """A ``$CC`` that answers the flag probes at once and hangs on a real compile in a
    child process (as a driver waits for ``cc1``); returns (command, file of that child's
    pid)."""
    pid_file = os.path.join(folder, "hanging-cc.pid")
    script = os.path.join(folder, "hanging-cc")
    with open(script, "w") as f:
        f.write(
            '#!/bin/sh\ncase "$*" in *--version*|*" -E "*) exit 0;; esac\n'
            f"sleep 600 &\necho $! > {pid_file}\nwait\n"
        )
    os.chmod(script, 0o755)
    return script, pid_file


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@contextmanager
def _logged(name: str):
    """The messages logged to logger ``name`` (WARNING and above) in the block."""
    messages: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    logger, handler = logging.getLogger(name), _Keep(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


def _warnings(fn: Callable[[], Any]) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn()
    return value, [str(w.message) for w in caught]


def _first(text: str, width: int = 90) -> str:
    line = (str(text).strip().splitlines() or [""])[0]
    return line if len(line) <= width else line[: width - 3] + "..."


def _run_matmul(lib: Any, n: int = 8) -> None:
    import numpy as np

    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    c = np.zeros((n, n), "float32")
    lib(a, b, c)
    _check(np.allclose(c, a @ b, rtol=1e-5, atol=1e-5), "the kernel computed a wrong result")


# ----------------------------------------------------------------------------- probes
def probe_database_name_injection(folder: str, marker: str, deadline: float) -> str:
    """A downloaded database whose workload's buffer name carries C code."""
    from .. import build  # local: per probe
    from ..database import JSONDatabase  # local: per probe
    from ..tir_integration import compile_tir  # local: per probe
    from .tuning_records import matmul  # local: per probe

    work = os.path.join(folder, "db")
    fill_json_database(work)
    plant_name(work, f'C\nint ms_evil = system("touch {marker}");\n//')
    db, messages = _warnings(lambda: JSONDatabase(work_dir=work))
    _check(any("control character" in m for m in messages), f"no warning: {messages}")
    try:
        sch = compile_tir(db, matmul(8), "llvm")
    except ValueError as err:
        _check("no valid tuning record" in str(err), f"compile_tir: {_first(err)}")
        return "records refused with a warning; compile_tir: no valid record (ValueError)"
    _run_matmul(build(sch.mod, "llvm", timeout_sec=deadline))  # the marker decides
    return "a record was used, replayed on the caller's module"


def probe_replay_on_callers_module(folder: str, marker: str, deadline: float) -> str:
    """A database whose stored workload has other (harmless) names: what is built must be
    the caller's module, by query and by ``as_measure_candidate``."""
    from .. import build  # local: per probe
    from ..database import JSONDatabase  # local: per probe
    from ..tir.function import IRModule  # local: per probe
    from .tuning_records import matmul  # local: per probe

    work = os.path.join(folder, "db")
    fill_json_database(work)
    plant_name(work, "STORED_NAME")
    db = JSONDatabase(work_dir=work)
    ours = IRModule({"main": matmul(8)})
    sch = db.query_schedule(ours)
    _check(sch is not None, "the record was not found")
    record = db.query_tuning_record(ours)
    candidate = record.as_measure_candidate(ours)
    for mod in (sch.mod, candidate.sch.mod):
        names = [b.name for b in mod["main"].params]
        _check(names == ["A", "B", "C"], f"replayed on the stored module: {names}")
    lib = build(sch.mod, "llvm", timeout_sec=deadline)
    _check("STORED_NAME" not in lib.get_source(), "a stored name reached the source")
    _run_matmul(lib)
    return "query_schedule and as_measure_candidate(mod) replay on the caller's module"


def _build_and_measure_matmul(deadline: float, **runner_options: Any) -> Any:
    """An 8x8 matmul built by a ``LocalBuilder`` (which must succeed) and measured once by a
    ``LocalRunner`` made with ``runner_options``: the runner's result."""
    from ..arg_info import ArgInfo  # local: per probe
    from ..builder import BuilderInput, LocalBuilder  # local: per probe
    from ..runner import EvaluatorConfig, LocalRunner, RunnerInput  # local: per probe
    from ..target import Target  # local: per probe
    from .tuning_records import matmul  # local: per probe

    func = matmul(8)
    with LocalBuilder(max_workers=1, timeout_sec=deadline) as builder:
        (built,) = builder.build([BuilderInput(func, Target("cpu"))])
    _check(built.error_msg is None, f"build failed: {built.error_msg}")
    fast = EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)
    with LocalRunner(evaluator_config=fast, **runner_options) as runner:
        (future,) = runner.run(
            [RunnerInput(built.artifact_path, "cpu", ArgInfo.from_prim_func(func))]
        )
        return future.result()


def probe_planted_worker_module(folder: str, marker: str, deadline: float) -> str:
    """``cloudpickle.py`` and ``numpy/`` planted in the current folder of a tuner."""
    planted = os.path.join(folder, "untrusted")
    os.makedirs(os.path.join(planted, "numpy"))
    payload = f"open({marker!r}, 'a').write(__name__ + '\\n')\n"
    for path in ("cloudpickle.py", "numpy/__init__.py", "metaschedule.py"):
        with open(os.path.join(planted, path), "w") as f:
            f.write(payload)
    os.chdir(planted)  # the workers start here
    result = _build_and_measure_matmul(deadline, timeout_sec=deadline)
    _check(result.error_msg is None, f"run failed: {result.error_msg}")
    return "built and measured in the planted folder; nothing imported from it"


_ANSWER = "int ms_answer(void) { return 42; }\n"


def probe_planted_cache_file(folder: str, marker: str, deadline: float) -> str:
    """A library planted in the kernel cache under the name the next build computes."""
    import ctypes
    import shutil

    from ..codegen.compiler import compile_shared  # local: per probe

    os.environ["XDG_CACHE_HOME"] = os.path.join(folder, "cache")
    flags = ["-shared", "-fPIC"]
    evil = _ANSWER + (
        "#include <stdlib.h>\n__attribute__((constructor)) static void ms_evil(void) "
        f'{{ system("touch {marker}"); }}\n'
    )
    theirs = compile_shared(evil, flags, os.path.join(folder, "attacker"), timeout_sec=deadline)
    outcomes = []
    for case in ("tampered", "no hash"):
        source = f"// {case}\n{_ANSWER}"  # a library of its own: loaded libraries stay mapped
        path = compile_shared(source, flags, timeout_sec=deadline)
        shutil.copyfile(theirs, path)
        if case == "no hash":
            os.unlink(path + ".sha256")
        with _logged("metaschedule.codegen.compiler") as messages:
            again = compile_shared(source, flags, timeout_sec=deadline)
        _check(again == path, f"built elsewhere: {again}")
        if case == "tampered":
            _check(any("sha256" in m for m in messages), f"no warning: {messages}")
        outcomes.append(case)
        _check(ctypes.CDLL(again).ms_answer() == 42, "the planted library was loaded")
    return "planted library (" + ", ".join(outcomes) + ") rebuilt before loading, with a warning"


_HOLDER = """
import fcntl, sys
from metaschedule.runner.local_runner import host_measurement_lock
with host_measurement_lock(), open(sys.argv[1], "rb") as database:
    fcntl.flock(database, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()
"""


def probe_lock_held(folder: str, marker: str, deadline: float) -> str:
    """Another local process holds the measurement lock and a JSON database's lock, and
    never lets them go."""
    from ..database import JSONDatabase, json_database  # local: per probe
    from ..worker import isolated_python  # local: per probe
    from .tuning_records import make_record, matmul  # local: per probe

    runtime = os.path.join(folder, "run")
    os.makedirs(runtime, mode=0o700)
    os.environ["XDG_RUNTIME_DIR"] = runtime
    work = os.path.join(folder, "db")
    fill_json_database(work)
    holder = subprocess.Popen(
        [*isolated_python(code=_HOLDER), os.path.join(work, WL)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    wait = max(1.0, deadline / 4)
    try:
        _check(holder.stdout.readline().strip() == "held", "the holder did not take the lock")
        json_database.LOCK_TIMEOUT_SEC = wait
        try:
            db = JSONDatabase(work_dir=work)
            db.commit_tuning_record(make_record(db.commit_workload(matmul(8)), [0.01], seed=5))
            raise ProbeFailed("a commit went through a held database lock")
        except TimeoutError as err:
            _check(WL in str(err), f"database lock: {_first(err)}")
        result = _build_and_measure_matmul(deadline, lock_timeout_sec=wait)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    msg = result.error_msg or ""
    _check(result.run_secs is None and f"process {holder.pid}" in msg, f"result: {msg!r}")
    return f"database: TimeoutError, measurement: error result naming pid {holder.pid} ({wait:g} s)"


def probe_prune_under_live_tuner(folder: str, marker: str, deadline: float) -> str:
    """``metaschedule db prune`` in place while a tuner keeps committing (JSON, SQLite)."""
    from ..cli import main  # local: per probe
    from ..database import JSONDatabase, SQLiteDatabase  # local: per probe
    from .tuning_records import make_record, matmul  # local: per probe

    outcomes = []
    for kind in ("json", "sqlite"):
        where = os.path.join(folder, "db" if kind == "json" else "t.sqlite")
        opened = JSONDatabase(work_dir=where) if kind == "json" else SQLiteDatabase(where)
        tuner = opened
        w = tuner.commit_workload(matmul(8))
        for seed, secs in [(0, 0.3), (1, 0.2), (2, 0.1)]:
            tuner.commit_tuning_record(make_record(w, [secs], seed=seed))
        with open(os.devnull, "w") as quiet, _stdout(quiet):
            code = main(["db", "prune", where, "--top-k", "1"])
        _check(code == 0, f"{kind}: prune exited {code}")
        tuner.commit_tuning_record(make_record(w, [0.01], seed=9))  # after the prune
        fresh = JSONDatabase(work_dir=where) if kind == "json" else SQLiteDatabase(where)
        secs = sorted(r.run_secs[0] for r in fresh.get_all_tuning_records())
        _check(secs == [0.01, 0.1], f"{kind}: records after the prune: {secs}")
        outcomes.append(kind)
    return "pruned to the best; the live tuner's later record kept (" + ", ".join(outcomes) + ")"


@contextmanager
def _stdout(stream):
    saved, sys.stdout = sys.stdout, stream
    try:
        yield
    finally:
        sys.stdout = saved


def probe_compression_bomb(folder: str, marker: str, deadline: float) -> str:
    """A 256 MiB carried workload compressed into one short record line."""
    import tracemalloc

    from ..database import JSONDatabase, json_database  # local: per probe

    work = os.path.join(folder, "db")
    fill_json_database(work)
    with open(os.path.join(work, REC), "a") as f:
        f.write(carried_bomb_line(256 << 20) + "\n")
    size = os.path.getsize(os.path.join(work, REC))
    tracemalloc.start()
    try:
        db, messages = _warnings(lambda: JSONDatabase(work_dir=work))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _check(peak < 2 * json_database.MAX_CARRIED_BYTES + (8 << 20), f"peak {peak >> 20} MiB")
    _check(any("MAX_CARRIED_BYTES" in m for m in messages), f"no warning: {messages}")
    _check(len(db) == 2, f"{len(db)} records kept of 2")
    return f"{size >> 10} KiB line skipped with a warning, peak {peak >> 20} MiB"


def probe_nesting_bomb(folder: str, marker: str, deadline: float) -> str:
    """100 000 nested lists in every JSON file the package reads."""
    from ..database import JSONDatabase  # local: per probe
    from ..graph import load_json as load_graph  # local: per probe
    from ..graph.default_times import load_default_times  # local: per probe
    from ..tir import load_json as load_tir  # local: per probe

    bomb = nesting_bomb()
    work = os.path.join(folder, "db")
    fill_json_database(work)
    for name in (WL, REC):
        with open(os.path.join(work, name), "a") as f:
            f.write(bomb + "\n")
    db, messages = _warnings(lambda: JSONDatabase(work_dir=work))
    _check(sum("nested too deeply" in m for m in messages) == 2, f"warnings: {messages}")
    _check(len(db) == 2, f"{len(db)} records kept of 2")
    path = os.path.join(folder, "default_schedules.json")
    with open(path, "w") as f:
        f.write(bomb)
    times, messages = _warnings(lambda: load_default_times(path))
    _check(times == {} and any("nested too deeply" in m for m in messages), f"{messages}")
    refused = []
    for what, load in (("tir", load_tir), ("graph", load_graph)):
        try:
            load(bomb) if what == "tir" else load(path)
        except ValueError:
            refused.append(what)
    _check(refused == ["tir", "graph"], f"refused only {refused}")
    return "database and default times: warning; tir/graph load_json: ValueError"


_FULL_DISK_RECORDS = 3


def _open_database(kind: str, where: str) -> Any:
    from ..database import JSONDatabase, SQLiteDatabase  # local: per probe

    return JSONDatabase(work_dir=where) if kind == "json" else SQLiteDatabase(where)


def probe_full_disk(folder: str, marker: str, deadline: float) -> str:
    """A commit that meets a full disk (``RLIMIT_FSIZE``), then a disk with space again."""
    import resource

    from .tuning_records import make_record, matmul  # local: per probe

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    outcomes = []
    for kind in ("json", "sqlite"):
        where = os.path.join(folder, "db" if kind == "json" else "t.sqlite")
        db = _open_database(kind, where)
        grows = os.path.join(where, REC) if kind == "json" else where + "-wal"
        w = db.commit_workload(matmul(8))
        for i in range(_FULL_DISK_RECORDS):
            db.commit_tuning_record(make_record(w, [0.1 * (i + 1)], seed=i))
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(grows) + 10, hard))
        try:
            db.commit_tuning_record(make_record(w, [0.05], seed=3))
            error = None
        except Exception as err:  # noqa: BLE001 - any clear error is the expected outcome
            error = f"{type(err).__name__}"
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        _check(error is not None, f"{kind}: the commit on a full disk did not raise")
        db.commit_tuning_record(make_record(w, [0.04], seed=4))
        fresh, messages = _warnings(functools.partial(_open_database, kind, where))
        secs = sorted(r.run_secs[0] for r in fresh.get_all_tuning_records())
        _check([round(s, 9) for s in secs] == [0.04, 0.1, 0.2, 0.3], f"{kind}: {secs}")
        _check(not messages, f"{kind}: torn lines reported: {messages}")
        outcomes.append(f"{kind} {error}")
    return "commit raised (" + ", ".join(outcomes) + "); earlier records kept, next commit ok"


def probe_hung_compiler(folder: str, marker: str, deadline: float) -> str:
    """A C compiler that never returns (``$CC``)."""
    from .. import te  # local: per probe
    from ..codegen import BuildError, build  # local: per probe

    cc, pid_file = hanging_cc(folder)
    os.environ["CC"] = cc
    os.environ["XDG_CACHE_HOME"] = os.path.join(folder, "cache")
    a = te.placeholder((8,), "float32", "A")
    func = te.create_prim_func([a, te.compute((8,), lambda i: a[i] + 1.0, name="B")])
    limit = max(1.0, deadline / 4)
    try:
        build(func, "llvm", timeout_sec=limit)
    except BuildError as err:
        _check("timed out" in str(err), f"BuildError without the deadline: {_first(err)}")
    else:
        raise ProbeFailed("the build of a hung compiler returned")
    with open(pid_file) as f:
        child = int(f.read())
    for _ in range(100):
        if not _alive(child):
            return f"BuildError after {limit:g} s; the compiler's child killed"
        time.sleep(0.05)
    raise ProbeFailed(f"the compiler's child {child} outlived the deadline")


def probe_frozen_fleet_worker(folder: str, marker: str, deadline: float) -> str:
    """A Dask fleet worker that takes a build and never answers."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return "skipped: distributed is not installed"
    from ..builder import BuilderInput, DaskBuilder, dask_builder  # local: per probe
    from ..target import Target  # local: per probe
    from . import dask_cluster  # local: per probe
    from .dummy_object import with_fault  # local: per probe
    from .tuning_records import matmul  # local: per probe

    dask_cluster.local_fleet()
    dask_builder._TRANSPORT_SLACK_SEC = -29.0  # the bound is 30 s + this: 1 s past the build's
    fault = "metaschedule.testing.dummy_object.fault_injecting_build"
    limit = max(2, int(deadline / 4))
    with DaskBuilder(dask_cluster.rpc_config(), timeout_sec=limit, f_build=fault) as builder:
        (hung,) = builder.build([BuilderInput(with_fault(matmul(8), "hang"), Target("cpu"))])
    _check(hung.artifact_path is None and "no result within" in (hung.error_msg or ""), f"{hung}")
    dask_cluster.local_fleet().close()
    return f"error result: {_first(hung.error_msg, 60)}"


def probe_plain_tcp_warning(folder: str, marker: str, deadline: float) -> str:
    """A fleet address off this machine in plain TCP (anyone on the path runs code)."""
    from ..runner.rpc_config import RPCConfig  # local: per probe

    for name in list(os.environ):
        if name.startswith("MS_RPC_TLS_"):
            del os.environ[name]
    config = RPCConfig("192.0.2.1", 9, "k", session_timeout_sec=1)  # TEST-NET-1: no answer
    with _logged("metaschedule") as messages:
        try:
            config.connect_tracker()
        except (ConnectionError, OSError, TimeoutError):
            pass
        except ImportError:
            return "skipped: distributed is not installed"
    warned = [m for m in messages if "192.0.2.1" in m and "without TLS" in m]
    _check(bool(warned), f"no warning: {messages}")
    return "warning: " + _first(warned[0], 70)


def probe_malformed_onnx(folder: str, marker: str, deadline: float) -> str:
    """A truncated and a garbage ``.onnx`` file."""
    try:
        import onnx
        from onnx import TensorProto, helper
    except ImportError:
        return "skipped: onnx is not installed"
    from ..graph import ModelFileError, from_onnx  # local: per probe

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    data = helper.make_model(graph).SerializeToString()
    errors = []
    for name, content in (("truncated", data[: len(data) // 2]), ("garbage", os.urandom(64))):
        path = os.path.join(folder, f"{name}.onnx")
        with open(path, "wb") as f:
            f.write(content)
        try:
            from_onnx(path)
        except ModelFileError as err:
            _check(path in str(err) and "\n" not in str(err), f"message: {err}")
            errors.append(name)
    del onnx
    _check(errors == ["truncated", "garbage"], f"refused only {errors}")
    return "ModelFileError naming the file (truncated, garbage)"


def onnx_chain(length: int) -> Any:
    """An ONNX model of ``length`` Relu/Add nodes in a chain over a float32[4]."""
    from onnx import TensorProto, helper

    nodes, prev = [], "x"
    for i in range(length):
        args = [prev] if i % 2 == 0 else [prev, "one"]
        nodes.append(helper.make_node("Relu" if i % 2 == 0 else "Add", args, [f"v{i}"]))
        prev = f"v{i}"
    one = helper.make_tensor("one", TensorProto.FLOAT, [4], [1.0] * 4)
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [4])],
        [one],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def probe_deep_onnx_chain(folder: str, marker: str, deadline: float) -> str:
    """A 3000-node ONNX chain: imported, fused in bounded groups, compiled and run."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        return "skipped: onnx is not installed"
    import numpy as np

    from ..graph import from_onnx, fuse, lower_model  # local: per probe
    from ..graph.fuse import MAX_FUSED_CALLS  # local: per probe
    from ..relax_integration import compile_relax  # local: per probe

    func = from_onnx(onnx_chain(3000))
    model = lower_model(func)
    groups = fuse(model.graph)
    _check(max(len(g.calls) for g in groups) <= MAX_FUSED_CALLS, "a group over the cap")
    out = compile_relax(None, func, "llvm", None)(np.zeros(4, "float32"))
    _check(np.allclose(out, 1500.0), f"wrong result {out}")
    return f"{len(groups)} groups of <= {MAX_FUSED_CALLS} calls; compiled and correct"


PROBES: dict[str, Callable[[str, str, float], str]] = {
    "database name injection": probe_database_name_injection,
    "replay on caller's module": probe_replay_on_callers_module,
    "planted worker module": probe_planted_worker_module,
    "planted kernel cache file": probe_planted_cache_file,
    "lock held by another process": probe_lock_held,
    "prune under a live tuner": probe_prune_under_live_tuner,
    "compression bomb": probe_compression_bomb,
    "nesting bomb": probe_nesting_bomb,
    "full disk": probe_full_disk,
    "hung compiler": probe_hung_compiler,
    "frozen fleet worker": probe_frozen_fleet_worker,
    "plain-TCP warning": probe_plain_tcp_warning,
    "malformed onnx": probe_malformed_onnx,
    "3000-node onnx chain": probe_deep_onnx_chain,
}
#: the probes ``--short`` leaves out (a Dask cluster to start, a whole model to compile)
SLOW_PROBES = ("frozen fleet worker", "3000-node onnx chain")


def run_probe(name: str, folder: str, marker: str, deadline: float) -> dict[str, Any]:
    """Run probe ``name``: ``{"outcome": one line, "passed": bool}`` (never raises)."""
    try:
        outcome = PROBES[name](folder, marker, deadline)
        return {"outcome": outcome, "passed": True}
    except ProbeFailed as err:
        return {"outcome": f"FAILED: {_first(err, 120)}", "passed": False}
    except Exception as err:  # noqa: BLE001 - an unexpected error is a failed probe too
        return {"outcome": f"{type(err).__name__}: {_first(err, 100)}", "passed": False}


if __name__ == "__main__":
    name, folder, marker, deadline = sys.argv[1:5]
    result = run_probe(name, folder, marker, float(deadline))
    sys.stdout.flush()
    print("PROBE-RESULT " + json.dumps(result), flush=True)
