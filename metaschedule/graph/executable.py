"""The executable of a compiled model: kernels in one library, steps, planned memory.

``exe(x=...)`` or ``exe.run(...)`` runs on numpy arrays and returns the output (a tuple
when the model has several); ``exe.profile(...)`` times every step;
``exe.export_library(path)`` writes one file that :func:`load` reads back.

Every kernel call is prepared once, when the executable is made: its ``void*`` argument
array holds the addresses of the planned buffers and the constants (checked then, as a
checked call checks them), and a run only writes the inputs' addresses into their
slots and makes one C call that runs every kernel in order
(:class:`~metaschedule.runtime.steps.StepProgram`; a library exported by a version
without it runs its kernels from a Python loop, about 0.3 us per kernel). An executable
runs one call at a time (its buffers and argument arrays are shared by its runs).
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import json
import os
import tempfile
import time
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime.aligned import aligned_copy, empty, is_aligned
from ..runtime.module import Module, kernel_cache_dir, load_module
from ..runtime.steps import StepProgram
from .interpreter import bind_inputs
from .ir import Function, TensorType, Var
from .lower import Step
from .memory import MemoryPlan, plan_memory

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ProfileRow:
    step: int
    func: str
    ops: tuple[str, ...]
    mean_ms: float
    percent: float


class ProfileReport(list):
    """Rows of per-step times; ``str()`` prints a table, slowest first."""

    def __str__(self) -> str:
        lines = [f"{'#':>4} {'function':<44} {'mean ms':>9} {'%':>6}"]
        for r in sorted(self, key=lambda r: -r.mean_ms):
            lines.append(f"{r.step:>4} {r.func[:44]:<44} {r.mean_ms:>9.3f} {r.percent:>6.1f}")
        lines.append(f"{'':>4} {'total':<44} {sum(r.mean_ms for r in self):>9.3f}")
        return "\n".join(lines)


class Executable:
    """A compiled model (see the module docstring)."""

    def __init__(
        self,
        params: list[Var],
        outputs: list[str],
        steps: list[Step],
        types: dict[str, TensorType],
        constants: dict[str, np.ndarray],
        module: Module,
        sources: dict[str, str] | None = None,
    ) -> None:
        self.params = params
        #: per function, where its schedule came from: "database" or "default"
        self.sources = dict(sources or {})
        self.outputs = outputs
        self.steps = steps
        self.types = types
        # intermediates and constants start on cache lines, as the runner measured them
        self.constants = {k: v if is_aligned(v) else aligned_copy(v) for k, v in constants.items()}
        self.module = module
        self.plan: MemoryPlan = plan_memory(steps, types, outputs)
        self._pool = [empty(n, np.uint8) for n in self.plan.sizes]
        self._kernels = {s.func: module[s.func] for s in steps if s.func is not None}
        self._prepare()

    # ------------------------------------------------------------------ running
    def _view(self, value: str) -> np.ndarray:
        t = self.types[value]
        n = int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize
        return self._pool[self.plan.storage[value]][:n].view(t.dtype).reshape(t.shape)

    def _prepare(self) -> None:
        """Resolve every kernel call once: its ``void*`` argument array, filled with the
        addresses of the planned buffers and constants (fixed for the executable's life),
        and the slots an input's address goes in at each run. The arguments are checked
        here, once, as a checked call checks them (dtype, shape, contiguity, aliasing)."""
        fixed: dict[str, np.ndarray] = dict(self.constants)  # value -> its array
        origin: dict[str, str] = {p.name: p.name for p in self.params}  # value -> input
        self._calls: list[tuple[int, Any, ctypes.Array, tuple[tuple[int, str], ...]]] = []
        for i, s in enumerate(self.steps):
            shape = self.types[s.out].shape
            if s.func is None:  # a zero-copy reshape: the same address
                if s.args[0] in origin:
                    origin[s.out] = origin[s.args[0]]
                else:
                    fixed[s.out] = fixed[s.args[0]].reshape(shape)
                continue
            fixed[s.out] = self._view(s.out)
            probe = []
            for a in s.args:
                if a in fixed:
                    probe.append(fixed[a])
                else:
                    t = self.types[a]
                    probe.append(np.empty(t.shape, t.dtype))
            kernel = self._kernels[s.func]
            ptrs = kernel.pack_args((*probe, fixed[s.out]))
            slots = tuple((j, origin[a]) for j, a in enumerate(s.args) if a not in fixed)
            self._calls.append((i, kernel, ptrs, slots))
        self._fixed = fixed
        self._origin = origin
        #: (argument array, slot, input) of every input address a run writes
        self._slots = [(ptrs, j, name) for _, _, ptrs, slots in self._calls for j, name in slots]
        self._program = StepProgram.of(self.module, [(k, p) for _, k, p, _ in self._calls])

    def _execute(self, inputs: dict[str, np.ndarray], timings: list[float] | None = None) -> None:
        """Run every kernel on the prepared argument arrays: one C call for all of them,
        or with ``timings`` (or an old library) one ``ctypes`` call each, timed."""
        addr = {k: v.ctypes.data for k, v in inputs.items()}
        for ptrs, j, name in self._slots:
            ptrs[j] = addr[name]
        if timings is None and self._program is not None:
            status, failed = self._program.run()
            if status != 0:
                self._failed(failed, status, inputs)
            return
        for n, (i, kernel, ptrs, _) in enumerate(self._calls):
            if timings is None:
                status = kernel._fn(ptrs)
            else:
                t0 = time.perf_counter()
                status = kernel._fn(ptrs)
                timings[i] = time.perf_counter() - t0
            if status != 0:
                self._failed(n, status, inputs)

    def _failed(self, call: int, status: int, inputs: dict[str, np.ndarray]) -> None:
        """Raise for the prepared ``call`` that returned ``status``: the checked call's
        error when it has one (an index out of bounds in a debug build), else a
        RuntimeError naming the step."""
        i, kernel, _, _ = self._calls[call]
        s = self.steps[i]
        env = {**self._fixed, **{v: inputs[o] for v, o in self._origin.items()}}
        kernel(*[env[a] for a in s.args], self._fixed[s.out])
        raise RuntimeError(f"step {i} ({s.func}) failed with status {status}")

    def _inputs(self, args: tuple, kwargs: dict) -> dict[str, np.ndarray]:
        fn = Function(self.params, {}, [], [], name="main")
        return bind_inputs(fn, args, kwargs)

    def _output(self, value: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
        if value in self._fixed:
            return np.array(self._fixed[value], copy=True)
        return np.array(inputs[self._origin[value]].reshape(self.types[value].shape), copy=True)

    def run(self, *args: np.ndarray, **kwargs: np.ndarray) -> Any:
        """Run on numpy inputs (positional in input order, or by name)."""
        inputs = self._inputs(args, kwargs)
        self._execute(inputs)
        outs = tuple(self._output(o, inputs) for o in self.outputs)
        return outs[0] if len(outs) == 1 else outs

    __call__ = run

    def profile(self, *args: np.ndarray, number: int = 10, **kwargs: np.ndarray) -> ProfileReport:
        """Per-step times (mean over ``number`` runs after one warm-up run)."""
        inputs = self._inputs(args, kwargs)
        self._execute(inputs)
        totals = np.zeros(len(self.steps))
        for _ in range(number):
            t = [0.0] * len(self.steps)
            self._execute(inputs, t)
            totals += np.array(t)
        means = totals / number * 1e3
        whole = means.sum() or 1.0
        return ProfileReport(
            ProfileRow(i, s.func or "(reshape view)", s.ops, float(m), float(100 * m / whole))
            for i, (s, m) in enumerate(zip(self.steps, means))
        )

    @property
    def function_names(self) -> list[str]:
        return list(dict.fromkeys(s.func for s in self.steps if s.func))

    def __repr__(self) -> str:
        return (
            f"<graph Executable: {len(self.steps)} steps, {len(self.function_names)} "
            f"kernels, {self.plan.total_bytes / 2**20:.1f} MiB planned>"
        )

    # ------------------------------------------------------------------ files
    def export_library(self, path: str | os.PathLike) -> str:
        """One file (a zip): the kernels' shared library, the steps and the weights."""
        path = os.fspath(path)
        meta = {
            "version": FORMAT_VERSION,
            "params": [
                {"name": p.name, "shape": list(p.type.shape), "dtype": p.type.dtype}
                for p in self.params
            ],
            "outputs": self.outputs,
            "steps": [
                {"func": s.func, "args": list(s.args), "out": s.out, "ops": list(s.ops)}
                for s in self.steps
            ],
            "types": {k: {"shape": list(t.shape), "dtype": t.dtype} for k, t in self.types.items()},
            "sources": self.sources,
        }
        weights = io.BytesIO()
        np.savez(weights, **self.constants)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(self.module.path, "rb") as f:
            so = f.read()
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
        os.close(fd)
        with zipfile.ZipFile(tmp, "w") as z:
            z.writestr("executable.json", json.dumps(meta))
            z.writestr("weights.npz", weights.getvalue())
            z.writestr("kernels.so", so)
        os.replace(tmp, path)
        return path


def load(path: str | os.PathLike) -> Executable:
    """An executable written by :meth:`Executable.export_library`; for trusted files
    only: its shared library runs in this process as soon as it is loaded."""
    path = os.fspath(path)
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read("executable.json"))
        if meta.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"{path}: executable format {meta.get('version')}, expected {FORMAT_VERSION}"
            )
        weights = np.load(io.BytesIO(z.read("weights.npz")))
        constants = {k: weights[k] for k in weights.files}
        so = z.read("kernels.so")
    lib = os.path.join(kernel_cache_dir(), f"graph-{hashlib.sha256(so).hexdigest()[:32]}.so")
    if not os.path.exists(lib):
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(lib), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(so)
        os.chmod(tmp, 0o755)
        os.replace(tmp, lib)
    module = load_module(lib)
    params = [Var(p["name"], TensorType(tuple(p["shape"]), p["dtype"])) for p in meta["params"]]
    steps = [Step(s["func"], tuple(s["args"]), s["out"], tuple(s["ops"])) for s in meta["steps"]]
    types = {k: TensorType(tuple(v["shape"]), v["dtype"]) for k, v in meta["types"].items()}
    return Executable(params, meta["outputs"], steps, types, constants, module, meta.get("sources"))
