"""Tune operators with ``ms.tune_tir`` and compare with numpy, PyTorch, onnxruntime and TVM.

For each workload: the unscheduled function's speed, ``ms.tune_tir`` with the default
space (post-order-apply with the llvm rules), the evolutionary search and the XGBoost
cost model, then the best schedule re-timed and checked against numpy; numpy, PyTorch
(``torch.nn.functional``, CPU) and onnxruntime for the same computation where they are
importable; the share of the machine's FMA peak; the tuning wall time and where it went
(the engine's :class:`ms.Profiler` phases). With ``--tvm``, TVM MetaSchedule tunes the
same workload with the same budget in a child process, for a side-by-side comparison.

Prints two tables and writes ``benchmarks/results/tune_ops.json``::

    python benchmarks/tune_ops.py --workloads matmul-512,conv2d-resnet-3x3 --trials 64
    python benchmarks/tune_ops.py --workloads matmul-256 --trials 32 --tvm

Workloads (float32): ``matmul-N`` / ``matmul-MxNxK`` (``A[M,K] @ B[K,N]``),
``dense-BxIxO`` (``X[B,I] @ W[O,I].T``), ``conv2d-resnet-3x3`` (1x56x56x64 -> 64, 3x3,
pad 1), ``conv2d-resnet-1x1`` (1x56x56x64 -> 256, 1x1), ``conv2d-resnet-stem``
(1x224x224x3 -> 64, 7x7, stride 2, pad 3), ``conv2d-NxHxWxC-fF-kK[-sS][-pP]`` (e.g.
``conv2d-1x14x14x32-f32-k3-p1``); convolutions are NHWC with HWIO kernels.

``--target cuda`` (or ``"cuda -arch=sm_90"``) tunes for a GPU instead (``tune_ops_cuda.py``):
the design space is sampled and built with nvcc, then tuning needs a GPU; without one the
run stops with one line saying so (exit status 2).

A benchmark, not a test: no number here is asserted. The machine may be shared, so
every speed is the best of several repeats; the load average is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file
import extra_ops  # operators beyond the suite, beside this file
import suite  # the operator suite of issue 10, beside this file

#: named sets for ``--workloads``: each expands to its operators
WORKLOAD_SETS = {"suite": list(suite.SUITE), "extra": list(extra_ops.EXTRA)}

# ----------------------------------------------------------------------------- workloads
_CONV_PRESETS = {  # name: (N, H, W, C, F, K, stride, pad)
    "conv2d-resnet-3x3": (1, 56, 56, 64, 64, 3, 1, 1),
    "conv2d-resnet-1x1": (1, 56, 56, 64, 256, 1, 1, 0),
    "conv2d-resnet-stem": (1, 224, 224, 3, 64, 7, 2, 3),
}


@dataclass(frozen=True)
class Workload:
    """One benchmark workload: its kind and sizes; everything else is derived."""

    name: str
    kind: str  # "matmul", "dense", "conv2d", "suite" / "extra" (a key of suite.SUITE / EXTRA)
    dims: tuple[int, ...]

    @property
    def analytic_flops(self) -> float | None:
        if self.kind in ("suite", "extra"):
            return None  # the table uses estimate_flops of the function
        if self.kind == "matmul":
            m, n, k = self.dims
            return 2.0 * m * n * k
        if self.kind == "dense":
            b, i, o = self.dims
            return 2.0 * b * i * o
        n, h, w, c, f, k, s, p = self.dims
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        return 2.0 * n * oh * ow * f * k * k * c

    def input_shapes(self) -> list[tuple[int, ...]]:
        if self.kind == "suite":
            return list(suite.SUITE[self.name].shapes)
        if self.kind == "extra":
            return list(extra_ops.EXTRA[self.name].shapes)
        if self.kind == "matmul":
            m, n, k = self.dims
            return [(m, k), (k, n)]
        if self.kind == "dense":
            b, i, o = self.dims
            return [(b, i), (o, i)]
        n, h, w, c, f, k, _, _ = self.dims
        return [(n, h, w, c), (k, k, c, f)]

    def inputs(self, seed: int = 0) -> list[Any]:
        """Random inputs, 64-byte aligned as TVM's arrays (``ms.runtime.aligned``)."""
        import numpy as np

        from metaschedule.runtime import aligned_copy

        rng = np.random.default_rng(seed)
        return [aligned_copy(rng.standard_normal(s, dtype=np.float32)) for s in self.input_shapes()]

    def reference(self, args: list[Any]) -> Any:
        """The result computed with numpy (BLAS; im2col for convolutions)."""
        import numpy as np

        if self.kind == "suite":
            return suite.reference(self.name, args)
        if self.kind == "extra":
            return extra_ops.EXTRA[self.name].reference(args)
        if self.kind == "matmul":
            return np.matmul(args[0], args[1])
        if self.kind == "dense":
            return np.matmul(args[0], args[1].T)
        return conv2d_nhwc_numpy(args[0], args[1], self.dims[6], self.dims[7])

    def ms_func(self):
        """The workload as a metaschedule PrimFunc (``ms.te.ops``)."""
        from metaschedule import te
        from metaschedule.te import ops

        if self.kind == "suite":
            return te.create_prim_func(suite.ms_tensors(self.name))
        if self.kind == "extra":
            return te.create_prim_func(extra_ops.tensors(self.name, te))
        a, b = (te.placeholder(s, "float32", n) for s, n in zip(self.input_shapes(), "AB"))
        if self.kind == "matmul":
            out = ops.matmul(a, b)
        elif self.kind == "dense":
            out = ops.dense(a, b)
        else:
            out = ops.conv2d_nhwc(a, b, stride=self.dims[6], padding=self.dims[7])
        return te.create_prim_func([a, b, out])


def first_measurements(records: list[Any]) -> list[Any]:
    """Each schedule's first record, in commit order: the trials of a tuning run (later
    records of a schedule are the final selection's re-measurements)."""
    from metaschedule.database.base import measurement_key

    seen: set[tuple[int, str]] = set()
    out = []
    for record in records:
        key = (id(record.workload), measurement_key(record))
        if key not in seen:
            seen.add(key)
            out.append(record)
    return out


def parse_workload(name: str) -> Workload:
    """``matmul-512``, ``matmul-128x256x64``, ``dense-128x768x3072``, a conv preset, or a
    suite operator (``gmm``, ``c2d``, ...; see ``suite.py``)."""
    if name in suite.SUITE:
        return Workload(name, "suite", ())
    if name in extra_ops.EXTRA:
        return Workload(name, "extra", ())
    if name in _CONV_PRESETS:
        return Workload(name, "conv2d", _CONV_PRESETS[name])
    m = re.fullmatch(r"matmul-(\d+)(?:x(\d+)x(\d+))?", name)
    if m:
        dims = (int(m[1]),) * 3 if m[2] is None else (int(m[1]), int(m[2]), int(m[3]))
        return Workload(name, "matmul", dims)
    m = re.fullmatch(r"dense-(\d+)x(\d+)x(\d+)", name)
    if m:
        return Workload(name, "dense", (int(m[1]), int(m[2]), int(m[3])))
    m = re.fullmatch(r"conv2d-(\d+)x(\d+)x(\d+)x(\d+)-f(\d+)-k(\d+)(?:-s(\d+))?(?:-p(\d+))?", name)
    if m:
        n, h, w, c, f, k = (int(x) for x in m.groups()[:6])
        return Workload(name, "conv2d", (n, h, w, c, f, k, int(m[7] or 1), int(m[8] or 0)))
    raise ValueError(
        f"unknown workload {name!r}; expected matmul-N, matmul-MxNxK, "
        f"dense-BxIxO, conv2d-NxHxWxC-fF-kK[-sS][-pP] or one of "
        f"{', '.join(_CONV_PRESETS)}, a suite operator ({', '.join(suite.SUITE)}) or an "
        f"extra one ({', '.join(extra_ops.EXTRA)})"
    )


def conv2d_nhwc_numpy(x, w, stride: int, pad: int):
    """NHWC x HWIO convolution with numpy: a strided window view (im2col) and one GEMM."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    kh, kw = w.shape[:2]
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))) if pad else x
    win = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
    # win: [N, OH, OW, C, KH, KW]; w as [C, KH, KW, F]
    return np.tensordot(win, w.transpose(2, 0, 1, 3), axes=([3, 4, 5], [0, 1, 2]))


def check_close(name: str, got, expected, k: int) -> float:
    """Max abs error; raises if ``got`` is not ``expected`` within float32 accumulation
    error over a reduction of ``k`` terms."""
    import numpy as np

    err = float(np.max(np.abs(got - expected)))
    if not np.allclose(got, expected, rtol=1e-3, atol=1e-4 * np.sqrt(k) * 10):
        raise AssertionError(f"{name}: result differs from numpy (max abs error {err:.3g})")
    return err


def reduction_length(wl: Workload) -> int:
    if wl.kind == "suite":
        return suite.SUITE[wl.name].reduction
    if wl.kind == "extra":
        return extra_ops.EXTRA[wl.name].reduction
    if wl.kind == "matmul":
        return wl.dims[2]
    if wl.kind == "dense":
        return wl.dims[1]
    return wl.dims[3] * wl.dims[5] ** 2


# ----------------------------------------------------------------------------- baselines
# Each baseline checks its result against numpy's and returns ``(info, timer)``: ``timer()``
# gives seconds per call (several repeats), or is None when the baseline is skipped.
Timer = Callable[[], list[float]]


def python_timer(fn: Callable[[], Any]) -> Timer:
    return lambda: common.time_python(fn, repeat=3, min_repeat_ms=100)


def numpy_baseline(wl: Workload, args) -> tuple[dict[str, Any], Timer | None]:
    import numpy as np

    if wl.kind == "suite":
        return {"what": suite.NUMPY_WHAT[wl.name]}, python_timer(lambda: wl.reference(args))
    if wl.kind == "extra":
        return {"what": "numpy reference"}, python_timer(lambda: wl.reference(args))
    if wl.kind == "matmul":
        out = np.empty((wl.dims[0], wl.dims[1]), np.float32)
        fn, what = (lambda: np.matmul(args[0], args[1], out=out)), "np.matmul"
    elif wl.kind == "dense":
        out = np.empty((wl.dims[0], wl.dims[2]), np.float32)
        wt = args[1].T
        fn, what = (lambda: np.matmul(args[0], wt, out=out)), "np.matmul(X, W.T)"
    else:
        fn, what = (lambda: wl.reference(args)), "im2col view + np.tensordot"
    return {"what": what}, python_timer(fn)


def torch_baseline(
    wl: Workload, args, expected, threads: int
) -> tuple[dict[str, Any], Timer | None]:
    if wl.kind == "extra":
        return {"skipped": "no PyTorch baseline for the extra operators"}, None
    torch, why = common.optional_import("torch")
    if torch is None:
        return {"skipped": why}, None
    import numpy as np
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    to_numpy = None
    if wl.kind == "suite":
        fn, what, to_numpy = suite.torch_call(wl.name, args, torch)
    elif wl.kind == "matmul":
        a, b = (torch.from_numpy(x) for x in args)
        fn, what = (lambda: torch.matmul(a, b)), "torch.matmul"
    elif wl.kind == "dense":
        x, w = (torch.from_numpy(v) for v in args)
        fn, what = (lambda: F.linear(x, w)), "F.linear"
    else:
        stride, pad = wl.dims[6], wl.dims[7]
        x = torch.from_numpy(np.ascontiguousarray(args[0].transpose(0, 3, 1, 2)))
        x = x.contiguous(memory_format=torch.channels_last)  # NHWC in memory
        w = torch.from_numpy(np.ascontiguousarray(args[1].transpose(3, 2, 0, 1)))  # OIHW
        fn, what = (lambda: F.conv2d(x, w, stride=stride, padding=pad)), "F.conv2d (channels_last)"
    with torch.no_grad():
        got = to_numpy(fn()) if to_numpy else fn().numpy()
    if wl.kind == "conv2d":
        got = got.transpose(0, 2, 3, 1)
    check_close("torch", got, expected, reduction_length(wl))

    def no_grad_call():
        with torch.no_grad():
            fn()

    return {"what": what, "version": torch.__version__}, python_timer(no_grad_call)


def onnxruntime_baseline(
    wl: Workload, args, expected, threads: int
) -> tuple[dict[str, Any], Timer | None]:
    if wl.kind == "extra":
        return {"skipped": "no onnxruntime baseline for the extra operators"}, None
    ort, why = common.optional_import("onnxruntime")
    if ort is None:
        return {"skipped": why}, None
    onnx, why = common.optional_import("onnx")
    if onnx is None:
        return {"skipped": f"onnxruntime is installed but {why}: it builds the model"}, None
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    if wl.kind == "suite":
        model, feed, what, to_numpy = suite.onnx_model(wl.name, args)
        return _ort_session(ort, wl, model, feed, what, to_numpy, expected, threads)
    a = args[0]
    if wl.kind == "matmul":
        node = helper.make_node("MatMul", ["A", "B"], ["Y"])
        weight, out_shape = args[1], [wl.dims[0], wl.dims[1]]
    elif wl.kind == "dense":
        node = helper.make_node("Gemm", ["A", "B"], ["Y"], transB=1)
        weight, out_shape = args[1], [wl.dims[0], wl.dims[2]]
    else:
        n, h, w_, _, f, k, s, p = wl.dims
        a = np.ascontiguousarray(args[0].transpose(0, 3, 1, 2))  # NCHW, as ONNX wants
        weight = np.ascontiguousarray(args[1].transpose(3, 2, 0, 1))  # OIHW
        node = helper.make_node(
            "Conv", ["A", "B"], ["Y"], kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p]
        )
        out_shape = [n, f, (h + 2 * p - k) // s + 1, (w_ + 2 * p - k) // s + 1]
    graph = helper.make_graph(
        [node],
        wl.name,
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, list(a.shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, out_shape)],
        initializer=[numpy_helper.from_array(weight, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 9)
    what = {"matmul": "MatMul", "dense": "Gemm(transB=1)", "conv2d": "Conv (NCHW)"}[wl.kind]
    to_numpy = (lambda y: y.transpose(0, 2, 3, 1)) if wl.kind == "conv2d" else (lambda y: y)
    return _ort_session(ort, wl, model, {"A": a}, what, to_numpy, expected, threads)


def _ort_session(
    ort, wl: Workload, model, feed, what: str, to_numpy, expected, threads: int
) -> tuple[dict[str, Any], Timer | None]:
    """An onnxruntime session of ``model``, checked against numpy, and its timer."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    # idle pool threads sleep instead of spinning: on a 2-core machine a spinning pool
    # steals a core from whatever is timed next (the other contenders)
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    got = to_numpy(sess.run(None, feed)[0])
    check_close("onnxruntime", got, expected, reduction_length(wl))
    return {"what": what, "version": ort.__version__}, python_timer(lambda: sess.run(None, feed))


# ----------------------------------------------------------------------------- tuning
#: the engine's top-level phases (disjoint in time): what the breakdown adds up
_TOP_LEVEL = (
    "GenerateDesignSpace",
    "SearchStrategy/PreTuning",
    "SearchStrategy/GenerateCandidates",
    "SearchStrategy/NotifyRunnerResults",
    "Builder",
    "Runner",
    "FinalSelection",
)


def breakdown(phases: dict[str, float]) -> dict[str, float]:
    """Group the Profiler's phases into the report's categories (seconds).

    ``search`` is candidate generation (pre-tuning, sampling, evolution, the cost model's
    predictions inside it, notifying results); ``feature_extraction`` is counted within
    ``search`` (predictions) and ``cost_model_update`` (training) as well; ``other`` is
    the wall time outside every top-level phase (scheduler, logging, worker start-up).
    """
    get = phases.get
    callbacks = sum(v for k, v in phases.items() if k.startswith("MeasureCallback/"))
    top = sum(get(k, 0.0) for k in _TOP_LEVEL) + callbacks
    return {
        "space_generation": get("GenerateDesignSpace", 0.0),
        "search": sum(get(k, 0.0) for k in _TOP_LEVEL[1:4]),
        "search_sampling_mutation": get("EvoSearch/SampleInitPopulation", 0.0)
        + get("EvoSearch/Evolve/Mutation", 0.0),
        "search_cost_model_predict": get("EvoSearch/Evolve/PredictNormalizedScore", 0.0),
        "search_trace_replay": get("Search/TraceReplay", 0.0),
        "search_postproc": get("Search/Postproc", 0.0),
        "feature_extraction": get("FeatureExtractor", 0.0),
        "cost_model_update": get("CostModel/Update", 0.0),
        "build": get("Builder", 0.0),
        "run": get("Runner", 0.0),
        "final_selection": get("FinalSelection", 0.0),
        "callbacks_other": callbacks - get("MeasureCallback/UpdateCostModel", 0.0),
        "other": max(0.0, get("Total", 0.0) - top),
    }


def module_timer(lib, args, out) -> Timer:
    """A timer of a built metaschedule module: 3 repeats of >= 100 ms, under the lock."""
    evaluator = lib.time_evaluator(lib.entry_name, number=1, repeat=3, min_repeat_ms=100)

    def timer() -> list[float]:
        with common.measurement_lock():
            lib(*args, out)  # warm-up
            return list(evaluator(*args, out).results)

    return timer


def tune_metaschedule(
    wl: Workload,
    args,
    expected,
    target,
    trials: int,
    per_iter: int,
    work_dir: str,
    seed: int | None,
    cost_model: str,
    prior: bool = True,
) -> tuple[dict[str, Any], Timer | None]:
    """Tune with ``ms.tune_tir``; the result and a timer of the best schedule found.
    ``prior=False``: warm-up batches uniformly random (``EvolutionarySearch(prior=None)``)."""
    import numpy as np

    import metaschedule as ms
    from metaschedule.codegen import build
    from metaschedule.cost_model import MLPModel, RandomModel, XGBModel
    from metaschedule.runtime import aligned_copy, is_aligned
    from metaschedule.tir.function import IRModule

    func = wl.ms_func()
    model = {
        "xgb": lambda: XGBModel(),  # times "FeatureExtractor" itself
        "mlp": lambda: MLPModel(),
        "random": lambda: RandomModel(seed=seed),
    }[cost_model]()
    start = time.perf_counter()
    with ms.Profiler() as profiler:
        db = ms.tune_tir(
            func,
            target,
            work_dir,
            trials,
            num_trials_per_iter=per_iter,
            cost_model=model,
            strategy="evolutionary" if prior else ms.search_strategy.EvolutionarySearch(prior=None),
            seed=seed,
        )
    wall = time.perf_counter() - start
    # the trials: each schedule's first measurement (the final selection re-measures some)
    records = first_measurements(db.get_all_tuning_records())
    valid = [r for r in records if r.is_valid]
    best = db.query_tuning_record(IRModule({"main": func}), target)
    result: dict[str, Any] = {
        "wall_secs": wall,
        "trials": len(records),
        "valid": len(valid),
        "failed": len(records) - len(valid),
        "phases": profiler.get(),
        "breakdown": breakdown(profiler.get()),
        "tuning_best_secs": best.mean_run_sec if best is not None else None,
        "curve_best_secs": best_so_far([r.mean_run_sec if r.is_valid else None for r in records]),
    }
    result["failures"] = failure_messages(os.path.join(work_dir, "logs", "task_0_main.log"))
    if best is None:
        result["error"] = "no valid record"
        return result, None
    sch = ms.tir_integration.compile_tir(db, func, target)
    lib = build(sch.mod, target)
    out = aligned_copy(np.zeros(expected.shape, np.float32))  # aligned as TVM's arrays
    # weights RewriteLayout re-laid out, once (aligned as TVM's)
    packed = [a if is_aligned(a) else aligned_copy(a) for a in lib.pack_weights(*args, out)[:-1]]
    lib(*packed, out)
    result["max_abs_error"] = check_close("metaschedule", out, expected, reduction_length(wl))
    result["trace"] = str(sch.trace)
    result["prepacked_args"] = sorted(lib.get_function(lib.entry_name).prepacked)
    return result, module_timer(lib, packed, out)


def best_so_far(secs: list[float | None]) -> list[float | None]:
    """The tuning curve: after each trial (in measurement order), the best time so far."""
    out: list[float | None] = []
    best = None
    for s in secs:
        if s is not None and (best is None or s < best):
            best = s
        out.append(best)
    return out


def failure_messages(log_path: str) -> dict[str, int]:
    """How often each failure (its first line) appears in a task's log."""
    counts: dict[str, int] = {}
    marker = "A candidate failed: "
    try:
        with open(log_path) as f:
            for line in f:
                if marker in line:
                    msg = line.split(marker, 1)[1].strip()
                    counts[msg] = counts.get(msg, 0) + 1
    except OSError:
        pass
    return counts


def unscheduled(wl: Workload, args, expected, target) -> dict[str, Any]:
    import numpy as np

    from metaschedule.codegen import build

    lib = build(wl.ms_func(), target)
    out = np.zeros(expected.shape, np.float32)
    lib(*args, out)
    err = check_close("unscheduled", out, expected, reduction_length(wl))
    with common.measurement_lock():
        secs = list(lib.time_evaluator(lib.entry_name, number=1, repeat=3)(*args, out).results)
    return {"secs": secs, "max_abs_error": err}


# ----------------------------------------------------------------------------- TVM
def tvm_available() -> str | None:
    """None if TVM MetaSchedule can be imported, else why not."""
    tvm, why = common.optional_import("tvm")
    if tvm is None:
        return why + "; pip install -e '.[bench]' (apache-tvm) to compare with TVM"
    for name in ("tvm.s_tir.meta_schedule", "tvm.meta_schedule"):
        mod, _ = common.optional_import(name)
        if mod is not None and hasattr(mod, "tune_tir"):
            return None
    return f"tvm {getattr(tvm, '__version__', '?')} has no meta_schedule.tune_tir"


def tune_tvm(
    wl: Workload,
    trials: int,
    per_iter: int,
    work_dir: str,
    cores: int,
    seed: int | None,
    timeout: float,
    mcpu: str | None = None,
) -> dict[str, Any]:
    """Run :func:`_tvm_child` in a fresh interpreter (TVM installs its own signal
    handlers and worker pools; keeping it out of this process keeps the two apart)."""
    out_path = os.path.join(work_dir, "tvm_result.json")
    spec = {
        "workload": wl.name,
        "trials": trials,
        "per_iter": per_iter,
        "work_dir": work_dir,
        "cores": cores,
        "mcpu": mcpu,
        "seed": seed,
        "out": out_path,
    }
    argv = [os.path.abspath(__file__), "--tvm-child", json.dumps(spec)]
    return common.run_tvm_child(argv, work_dir, out_path, timeout)


def tvm_timer(
    library: str, args, out_shape: tuple[int, ...], arg_shapes: list[list[int]] | None = None
) -> Timer:
    """A timer of TVM's best schedule, exported by the child (which checked its result
    against numpy) and loaded in this process. A weight TVM's RewriteLayout re-laid out
    (``arg_shapes`` differs) is timed with random data of the rewritten shape."""
    import numpy as np
    import tvm

    mod = tvm.runtime.load_module(library)
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    host = list(args)
    for j, shape in enumerate((arg_shapes or [])[: len(host)]):
        if tuple(shape) != tuple(host[j].shape):
            host[j] = rng.standard_normal(shape).astype(host[j].dtype)
    arrays = [tvm.runtime.tensor(x, dev) for x in (*host, np.zeros(out_shape, np.float32))]
    func = mod["main"]
    evaluator = mod.time_evaluator("main", dev, number=1, repeat=3, min_repeat_ms=100)

    def timer() -> list[float]:
        with common.measurement_lock():
            func(*arrays)  # warm-up
            return [float(x) for x in evaluator(*arrays).results]

    return timer


def _tvm_param_shapes(mod) -> list[list[int]]:
    """The parameter shapes of ``main`` once TVM's layout-rewrite blocks are removed."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    func = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)["main"]
    return [[int(d) for d in info.shape] for info in ArgInfo.from_prim_func(func)]


def _tvm_build(mod, target, _params):
    """TVM's ``default_build`` without its ``import tvm.s_tir.tensor_intrin``: that
    import parses every tensor intrinsic (about 19 s on a loaded 2-core machine), TVM's
    LocalBuilder starts fresh workers for every batch and counts it in the 30 s build
    timeout, so with the stock builder every candidate here timed out. The llvm schedule
    rules do not tensorize, so the intrinsics are not needed."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def _tvm_workload(wl: Workload):
    """The same computation in ``tvm.te`` (NHWC / HWIO, padding as its own block)."""
    import tvm
    from tvm import te

    if wl.kind == "suite":
        return tvm.IRModule({"main": te.create_prim_func(suite.tvm_tensors(wl.name))})
    if wl.kind == "extra":
        return tvm.IRModule({"main": te.create_prim_func(extra_ops.tensors(wl.name, te))})
    a, b = (te.placeholder(s, "float32", name=n) for s, n in zip(wl.input_shapes(), "AB"))
    if wl.kind == "matmul":
        k = te.reduce_axis((0, wl.dims[2]), "k")
        out = te.compute(
            (wl.dims[0], wl.dims[1]), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C"
        )
    elif wl.kind == "dense":
        k = te.reduce_axis((0, wl.dims[1]), "k")
        out = te.compute(
            (wl.dims[0], wl.dims[2]),
            lambda i, j: te.sum(a[i, k] * b[j, k], axis=k),
            name="T_dense",
            attrs={"layout_free_placeholders": [b]},  # a weight, as ours (ms.te.ops.dense)
        )
    else:
        n, h, w, c, f, kk, s, p = wl.dims
        data = a
        if p:
            data = te.compute(
                (n, h + 2 * p, w + 2 * p, c),
                lambda i, y, x, ch: te.if_then_else(
                    te.all(y >= p, y < h + p, x >= p, x < w + p),
                    a[i, y - p, x - p, ch],
                    tvm.tirx.const(0.0, "float32"),
                ),
                name="PaddedInput",
            )
        oh, ow = (h + 2 * p - kk) // s + 1, (w + 2 * p - kk) // s + 1
        ry, rx, rc = (te.reduce_axis((0, e), nm) for e, nm in ((kk, "ry"), (kk, "rx"), (c, "rc")))
        out = te.compute(
            (n, oh, ow, f),
            lambda i, y, x, ff: te.sum(
                data[i, y * s + ry, x * s + rx, rc] * b[ry, rx, rc, ff], axis=[ry, rx, rc]
            ),
            name="conv2d_nhwc",
            attrs={"layout_free_placeholders": [b]},  # a weight, as ours (ms.te.ops.conv2d_nhwc)
        )
    return tvm.IRModule({"main": te.create_prim_func([a, b, out])})


def _tvm_child(spec: dict[str, Any]) -> None:
    """Tune one workload with TVM MetaSchedule and write the result to ``spec["out"]``."""
    import numpy as np
    import tvm

    try:
        import tvm.s_tir.meta_schedule as tms
    except ImportError:
        import tvm.meta_schedule as tms
    from tvm.target import codegen

    wl = parse_workload(spec["workload"])
    mcpu = spec.get("mcpu") or codegen.llvm_get_system_cpu()  # ours: -mcpu, or the host
    # "llvm -num-cores N": TVM 0.27 takes targets as dicts; -mcpu as our "native"
    target = tvm.target.Target({"kind": "llvm", "num-cores": spec["cores"], "mcpu": mcpu})
    mod = _tvm_workload(wl)
    cores = int(spec["cores"])

    def runner_threads() -> None:
        # TVM's runtime defaults to half the hardware threads on x86 (one here); the
        # runner's workers measure with all the cores ours uses. The builder workers
        # inherit TVM_NUM_THREADS=1 from this process (set by tune_tvm).
        import os as _os

        _os.environ["TVM_NUM_THREADS"] = str(cores)

    start = time.perf_counter()
    with tms.Profiler() as profiler:
        db = tms.tune_tir(
            mod,
            target,
            spec["work_dir"],
            spec["trials"],
            num_trials_per_iter=spec["per_iter"],
            seed=spec["seed"],
            builder=tms.builder.LocalBuilder(f_build=_tvm_build),
            runner=tms.runner.LocalRunner(initializer=runner_threads),
        )
    wall = time.perf_counter() - start
    phases = {k: float(v) for k, v in profiler.get().items()}
    records = list(db.get_all_tuning_records())
    run_secs = [[float(s) for s in r.run_secs] for r in records if r.run_secs]
    valid = [float(np.mean(s)) for s in run_secs if s and all(x < 1e9 for x in s)]
    mean_secs = [
        float(np.mean([float(s) for s in r.run_secs]))
        if r.run_secs and all(float(x) < 1e9 for x in r.run_secs)
        else None
        for r in records
    ]
    result: dict[str, Any] = {
        "version": tvm.__version__,
        "target": str(target),
        "wall_secs": wall,
        "trials": len(records),
        "valid": len(valid),
        "failed": len(records) - len(valid),
        "phases": phases,
        "tuning_best_secs": min(valid) if valid else None,
        "build_fn": "default_build without the tensor_intrin import (see _tvm_build)",
        "threads": {"runner": cores, "builder": 1, "final_timing": cores},
        "curve_best_secs": best_so_far(mean_secs),
    }
    sch = tms.tir_integration.compile_tir(db, mod, target)
    if sch is not None:
        lib = tvm.compile(sch.mod, target=target)
        dev = tvm.cpu()
        args = wl.inputs()
        expected = wl.reference(args)
        arrays = [tvm.runtime.tensor(x, dev) for x in (*args, np.zeros(expected.shape, np.float32))]
        lib.mod["main"](*arrays)
        result["max_abs_error"] = check_close(
            "tvm", arrays[-1].numpy(), expected, reduction_length(wl)
        )
        # timed without the weight re-layout (done once ahead of time, as TVM's tuning
        # measured it): the library takes the rewritten weights, of these shapes
        timed = _tvm_build(sch.mod, target, None)
        result["arg_shapes"] = _tvm_param_shapes(sch.mod)
        result["library"] = os.path.join(spec["work_dir"], "tvm_best.so")
        timed.export_library(result["library"])  # the parent times it with the others
    with open(spec["out"], "w") as f:
        json.dump(result, f)


def tvm_breakdown(phases: dict[str, float]) -> dict[str, float | None]:
    """TVM's Profiler phases in the report's categories (see :func:`breakdown`); TVM does
    not time feature extraction apart."""
    get = phases.get
    evo = [k for k in phases if k.startswith("EvoSearch/")]
    search = sum(
        phases[k]
        for k in evo  # nested phases are inside their parent
        if not any(k.startswith(p + "/") for p in evo if p != k)
    )
    top = search + sum(
        get(k, 0.0)
        for k in ("InitializeTask", "SendToBuilder", "SendToRunner", "JoinRunnerFutures")
    )
    top += sum(v for k, v in phases.items() if k.startswith("MeasureCallback/"))
    return {
        "space_generation": get("InitializeTask", 0.0),
        "search": search,
        "search_sampling_mutation": get("EvoSearch/SampleInitPopulation", 0.0)
        + get("EvoSearch/Evolve/Mutation", 0.0),
        "search_cost_model_predict": get("EvoSearch/Evolve/PredictNormalizedScore", 0.0),
        "search_trace_replay": get("Search/TraceReplay", 0.0),
        "search_postproc": get("Search/Postproc", 0.0),
        "feature_extraction": None,
        "cost_model_update": get("MeasureCallback/UpdateCostModel", 0.0),
        "build": get("SendToBuilder", 0.0),
        "run": get("SendToRunner", 0.0) + get("JoinRunnerFutures", 0.0),
        "other": max(0.0, get("Total", 0.0) - top),
    }


# ----------------------------------------------------------------------------- timing
def interleaved(
    timers: dict[str, Timer], rounds: int, pause: float = 0.3
) -> dict[str, dict[str, Any]]:
    """Time every contender once per round, in turn, so that a burst of load on a shared
    machine hits them alike; ``pause`` seconds between contenders let the thread pools of
    the one before (OpenBLAS, onnxruntime, TVM, OpenMP) go idle. ``secs`` holds every
    repeat of every round (the table takes the best), ``round_best`` each round's best,
    ``foreign_load`` the share of the machine other processes used during each round."""
    import numpy as np

    out: dict[str, dict[str, Any]] = {
        n: {"secs": [], "round_best": [], "foreign_load": []} for n in timers
    }
    for _ in range(rounds):
        for name, timer in timers.items():
            time.sleep(pause)
            try:
                with common.ForeignLoad() as load:
                    secs = timer()
            except Exception as err:  # noqa: BLE001 - reported, the others go on
                out[name]["error"] = f"{type(err).__name__}: {err}"
                continue
            out[name]["secs"].extend(secs)
            out[name]["round_best"].append(min(secs))
            out[name]["foreign_load"].append(load.share)
    for entry in out.values():
        if entry["round_best"]:
            entry["median_round_best"] = float(np.median(entry["round_best"]))
    return out


# ----------------------------------------------------------------------------- report
def gflops(flops: float, secs) -> float | None:
    if not secs:
        return None
    best = min(secs) if isinstance(secs, list) else secs
    return flops / best / 1e9 if best and best > 0 else None


def speed_cell(res: dict[str, Any] | None, flops: float) -> str:
    """'best (median)' GFLOPS of an interleaved contender; '-' when skipped."""
    if not res or "skipped" in res:
        return "-"
    if not res.get("secs"):
        return "error" if "error" in res else "n/a"
    best = gflops(flops, res["secs"])
    median = gflops(flops, res.get("median_round_best"))
    return f"{best:.1f} ({median:.1f})" if median else f"{best:.1f}"


def report(
    results: list[dict[str, Any]],
    info: dict[str, Any],
    peak: float | None,
    args: argparse.Namespace,
) -> None:
    for line in common.machine_lines(info):
        print(line)
    perf_cols = [
        "workload",
        "MFLOP",
        "unscheduled",
        "ms tuned",
        "ms (tuning)",
        "numpy",
        "torch",
        "onnxruntime",
    ]
    if args.tvm:
        perf_cols += ["TVM", "TVM (tuning)"]
    perf_cols += ["ms % peak", "ms / numpy", "other load"]
    perf_rows, time_rows = [], []
    for r in results:
        flops = r["flops"]
        ours = r["metaschedule"]
        best = gflops(flops, ours.get("secs"))
        numpy_g = gflops(flops, r["numpy"].get("secs"))
        row = [
            r["workload"],
            f"{flops / 1e6:.4g}",
            common.fmt(gflops(flops, r["unscheduled"]["secs"]), 2),
            speed_cell(ours, flops),
            common.fmt(gflops(flops, ours.get("tuning_best_secs"))),
            speed_cell(r["numpy"], flops),
            speed_cell(r["torch"], flops),
            speed_cell(r["onnxruntime"], flops),
        ]
        if args.tvm:
            t = r.get("tvm", {})
            row += [
                "error" if "error" in t else speed_cell(t, flops),
                common.fmt(gflops(flops, t.get("tuning_best_secs"))),
            ]
        loads = [
            x
            for name in ("metaschedule", "tvm", "numpy", "torch", "onnxruntime")
            for x in (r.get(name) or {}).get("foreign_load", [])
            if x is not None
        ]
        row += [
            f"{100 * best / peak:.1f}%" if best and peak else "n/a",
            f"{best / numpy_g:.2f}x" if best and numpy_g else "n/a",
            f"{100 * sorted(loads)[len(loads) // 2]:.0f}% ({100 * max(loads):.0f}%)"
            if loads
            else "n/a",
        ]
        perf_rows.append(row)
        b = ours["breakdown"]
        wall = ours["wall_secs"]

        def cell(secs, total=wall):
            return "n/a" if secs is None else f"{secs:.1f} ({100 * secs / total:.0f}%)"

        time_rows.append(
            [
                r["workload"],
                f"{ours['valid']}/{ours['trials']}",
                f"{wall:.1f}",
                cell(b["space_generation"]),
                cell(b["search"]),
                cell(b["search_sampling_mutation"]),
                cell(b["search_cost_model_predict"]),
                cell(b["feature_extraction"]),
                cell(b["cost_model_update"]),
                cell(b["build"]),
                cell(b["run"]),
                cell(b["other"]),
            ]
        )
        t = r.get("tvm")
        if t and "wall_secs" in t:
            tb = tvm_breakdown(t["phases"])
            tw = t["wall_secs"]
            time_rows.append(
                [
                    "  TVM",
                    f"{t['valid']}/{t['trials']}",
                    f"{tw:.1f}",
                    *(
                        cell(tb[k], tw)
                        for k in (
                            "space_generation",
                            "search",
                            "search_sampling_mutation",
                            "search_cost_model_predict",
                            "feature_extraction",
                            "cost_model_update",
                            "build",
                            "run",
                            "other",
                        )
                    ),
                ]
            )
    notes = [
        (
            f"GFLOPS = estimate_flops(func) / seconds per call. 'ms tuned' (metaschedule's "
            f"best schedule), TVM's and the baselines: best over {args.rounds} interleaved "
            "rounds of 3 repeats of >= 100 ms, each under the host measurement lock (median of "
            "the rounds' bests in parentheses); '(tuning)': the runner's mean for that schedule "
            "during tuning; 'unscheduled': best of 3 calls. 'other load': the share of the "
            "machine's CPU time other processes used while those were timed, median (max)."
        ),
        "numpy for conv2d: an im2col window view + np.tensordot (one BLAS GEMM).",
        f"OpenMP wait policy of this process (ours, PyTorch): "
        f"{getattr(args, 'omp_wait_policy', None)} ("
        f"{(getattr(args, 'omp_policy_basis', None) or {}).get('decision')}), chosen from "
        "the load as the runner's workers choose theirs (onnxruntime: no spinning)",
    ]
    if peak and getattr(args, "peak_source", "nominal") == "measured":
        notes.append(
            f"peak {peak:.0f} GFLOPS: measured, {args.lanes}-lane FMA chains on every core "
            "(each thread's CPU time: turbo clocks and the FMA units the core really has; "
            "the best of a measurement at the start and one after each workload's timings)"
        )
    elif peak:
        notes.append(
            f"peak {peak:.0f} GFLOPS = {info['physical_cores']} cores x "
            f"{info['ghz']:.2f} GHz ({info['ghz_source']}) x {args.lanes} float32 "
            f"lanes x 2 (FMA) x {common.fma_units(args.lanes)} FMA units/core (assumed; "
            "nominal clock, no turbo or AVX-512 down-clocking)"
        )
    skipped = {r["torch"].get("skipped") for r in results} | {
        r["onnxruntime"].get("skipped") for r in results
    }
    notes += [f"skipped: {s}" for s in sorted(x for x in skipped if x)]
    if args.tvm and not args.tvm_skipped:
        errors = [
            f"TVM on {r['workload']}: {r['tvm']['error']}"
            for r in results
            if "error" in r.get("tvm", {})
        ]
        tvm0 = results[0].get("tvm", {})
        notes += errors or [
            (
                f"TVM {tvm0.get('version')}: {tvm0.get('target')}, same trials and "
                "trials/iter, default space, evolutionary search, xgb; build "
                "function without the tensor_intrin import (see _tvm_build)"
            )
        ]
    if args.tvm_skipped:
        notes.append(f"--tvm skipped: {args.tvm_skipped}")
    for r in results:
        for msg, count in r["metaschedule"].get("failures", {}).items():
            notes.append(f"failed candidates of {r['workload']}: {count} x {msg}")
    common.print_table(
        f"Best GFLOPS (float32, {args.trials} trials)",
        perf_cols,
        perf_rows,
        notes,
        plain=args.plain,
    )
    common.print_table(
        "Tuning wall time, seconds (share of the wall time)",
        [
            "workload",
            "valid/trials",
            "wall s",
            "space gen",
            "search",
            "..sample+mutate",
            "..predict",
            "features",
            "model update",
            "build",
            "run",
            "other",
        ],
        time_rows,
        [
            (
                "search = candidate generation, incl. the cost model's predictions; features are "
                "counted inside predict and model update; run = submitting + waiting for "
                "measurements; other = outside the engine's phases (start-up, scheduler, logs)."
            )
        ],
        plain=args.plain,
    )


# ----------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--workloads",
        default="matmul-512,conv2d-resnet-3x3",
        help="comma-separated workloads (see the module docstring)",
    )
    p.add_argument("--trials", type=int, default=64, help="max_trials_global per workload")
    p.add_argument("--num-trials-per-iter", type=int, default=64)
    p.add_argument(
        "--work-dir",
        default=None,
        help="tuning records and logs go to WORK_DIR/<workload> (kept; tuning "
        "again there resumes); default: a temporary folder, removed",
    )
    p.add_argument("--cost-model", default="xgb", choices=("xgb", "mlp", "random"))
    p.add_argument(
        "--no-prior",
        action="store_true",
        help="warm-up batches uniformly random (EvolutionarySearch(prior=None)), "
        "not picked by the analytic prior",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--num-cores",
        type=int,
        default=None,
        help="threads of tuned code and baselines (default: physical cores)",
    )
    p.add_argument(
        "--tvm",
        action="store_true",
        help="also tune with TVM MetaSchedule (apache-tvm) with the same budget",
    )
    p.add_argument("--tvm-timeout", type=float, default=1800, help="seconds per TVM workload")
    p.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="interleaved timing rounds of the tuned results and baselines",
    )
    p.add_argument("--no-baselines", action="store_true", help="skip numpy/torch/onnxruntime")
    p.add_argument("--plain", action="store_true", help="plain-text tables (no rich)")
    p.add_argument(
        "--json", default=None, help="output path (default benchmarks/results/tune_ops.json)"
    )
    p.add_argument(
        "--target",
        default="llvm",
        help='"llvm" (this CPU, the default), another CPU ("llvm -mcpu=haswell": AVX2 code, '
        "against the AVX2 peak; TVM given the same -mcpu) or a cuda target ('cuda', "
        "'cuda -arch=sm_90'): tune for a GPU (see tune_ops_cuda.py); without one it stops "
        "with one line",
    )
    p.add_argument("--tvm-child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.tvm_child:
        _tvm_child(json.loads(args.tvm_child))
        return 0
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    names = [n for w in names for n in WORKLOAD_SETS.get(w, [w])]
    workloads = [parse_workload(n) for n in names]
    from metaschedule.codegen.isa import isa_of
    from metaschedule.flop_count import estimate_flops
    from metaschedule.target import Target

    if Target(args.target).kind == "cuda":
        from tune_ops_cuda import run_cuda  # beside this file

        cuda = Target(args.target)
        root = args.work_dir or tempfile.mkdtemp(prefix="tune_ops-")
        try:
            return run_cuda(args, workloads, cuda, root)
        finally:
            if args.work_dir is None:
                shutil.rmtree(root, ignore_errors=True)
    from metaschedule.runner.config import use_load_following_openmp

    # the final timing runs our kernels with the OpenMP wait policy the runner measures
    # them with (before libgomp loads): a brief spin on a quiet machine, passive waiting on
    # a busy one (unless the user set one); with libgomp's default spinning, two busy
    # threads on a shared 2-core machine lost 2-7x here
    omp = use_load_following_openmp()
    args.omp_wait_policy = omp["omp_wait_policy"]
    args.omp_policy_basis = omp["omp_policy_basis"]
    info = common.machine_info()
    cores = args.num_cores or info["physical_cores"]
    target = Target(f"{args.target} -num-cores {cores}")
    args.lanes = isa_of(target).lanes("float32")
    args.cpu_target = str(target)
    peak = common.measured_fma_peak(cores, args.lanes, target=target)
    args.peak_source = "measured"
    if peak is None:
        peak, args.peak_source = common.fma_peak_gflops(cores, info["ghz"], args.lanes), "nominal"
    args.tvm_skipped = tvm_available() if args.tvm else None
    root = args.work_dir or tempfile.mkdtemp(prefix="tune_ops-")
    results = []
    try:
        for wl in workloads:
            print(f"== {wl.name}: tuning with metaschedule ({args.trials} trials)", flush=True)
            func = wl.ms_func()
            data = wl.inputs()
            expected = wl.reference(data)
            res: dict[str, Any] = {
                "workload": wl.name,
                "kind": wl.kind,
                "dims": wl.dims,
                "flops": estimate_flops(func),
                "analytic_flops": wl.analytic_flops,
            }
            res["unscheduled"] = unscheduled(wl, data, expected, target)
            timers: dict[str, Timer] = {}
            res["metaschedule"], timer = tune_metaschedule(
                wl,
                data,
                expected,
                target,
                args.trials,
                args.num_trials_per_iter,
                os.path.join(root, wl.name, "metaschedule"),
                args.seed,
                args.cost_model,
                prior=not args.no_prior,
            )
            if timer:
                timers["metaschedule"] = timer
            if args.tvm and not args.tvm_skipped:
                print(f"== {wl.name}: tuning with TVM ({args.trials} trials)", flush=True)
                res["tvm"] = tune_tvm(
                    wl,
                    args.trials,
                    args.num_trials_per_iter,
                    os.path.join(root, wl.name, "tvm"),
                    cores,
                    args.seed,
                    args.tvm_timeout,
                    mcpu=None if target.mcpu == "native" else str(target.mcpu),
                )
                if res["tvm"].get("library"):
                    os.environ["TVM_NUM_THREADS"] = str(cores)  # before TVM's pool starts
                    timers["tvm"] = tvm_timer(
                        res["tvm"]["library"], data, expected.shape, res["tvm"].get("arg_shapes")
                    )
            baselines = (
                ("numpy", partial(numpy_baseline, wl, data)),
                ("torch", partial(torch_baseline, wl, data, expected, cores)),
                ("onnxruntime", partial(onnxruntime_baseline, wl, data, expected, cores)),
            )
            for name, make in baselines:
                if args.no_baselines:
                    res[name] = {"skipped": "--no-baselines"}
                    continue
                try:
                    res[name], timer = make()
                except Exception as err:  # noqa: BLE001 - a failing baseline is reported
                    res[name], timer = {"error": f"{type(err).__name__}: {err}"}, None
                if timer:
                    timers[name] = timer
            print(
                f"== {wl.name}: timing {', '.join(timers)} in {args.rounds} interleaved rounds",
                flush=True,
            )
            for name, secs in interleaved(timers, args.rounds).items():
                res[name].update(secs)
            if args.peak_source == "measured":  # the host's clocks move: keep the best seen
                peak = max(peak, common.measured_fma_peak(cores, args.lanes, target=target) or peak)
            for name in ("metaschedule", "tvm"):
                curve = (res.get(name) or {}).get("curve_best_secs")
                if curve:  # best GFLOPS against trials
                    res[name]["curve_gflops"] = [gflops(res["flops"], s) for s in curve]
            results.append(res)
            _write(results, info, target, peak, args, complete=False)
            report([res], info, peak, args)  # this workload's rows now, all at the end
    finally:
        if args.work_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    print()
    report(results, info, peak, args)
    path = _write(results, info, target, peak, args, complete=True)
    print(f"wrote {path}")
    return 0


def _write(results, info, target, peak, args, complete: bool) -> str:
    """The JSON report; written after every workload too (``complete`` False), so a long
    run on a busy machine leaves its finished workloads behind."""
    return common.write_json(
        "tune_ops",
        {
            "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
            "complete": complete,
            "machine": info,
            "target": str(target),
            "peak_gflops": peak,
            "peak_assumption": "measured FMA chains on every core (thread CPU time)"
            if getattr(args, "peak_source", "nominal") == "measured"
            else f"cores x GHz x {args.lanes} lanes x 2 (FMA) x "
            f"{common.fma_units(args.lanes)} units",
            "trials": args.trials,
            "num_trials_per_iter": args.num_trials_per_iter,
            "cost_model": args.cost_model,
            "prior": not args.no_prior,
            "seed": args.seed,
            "omp_wait_policy": getattr(args, "omp_wait_policy", None),
            "omp_policy_basis": getattr(args, "omp_policy_basis", None),
            "tvm_skipped": args.tvm_skipped,
            "loadavg_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "results": results,
        },
        args.json,
    )


if __name__ == "__main__":
    sys.exit(main())
