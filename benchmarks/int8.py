"""int8 kernels against onnxruntime's and against our own float32 on the same shape.

Workloads: ``dense`` (u8 ``X[1024, 1024]`` x s8 ``W[1024, 1024]`` -> s32, ``X @ W.T``) and
``conv2d`` (u8 1x56x56x64 NHWC, s8 3x3x64x64 HWIO, pad 1 -> s32). For each target of
``--targets`` (``host``: the host's ISA; ``haswell``: ``-mcpu=haswell``, AVX2; any other
``-mcpu`` name): our untuned function (the graph's default schedule: the tensorized dot
product where the target has an exact one), our tuned one (``ms.tune_tir``, ``--trials``)
and our float32 kernel of the same shape, untuned and tuned (for ``dense`` the float32
``X @ W`` with ``W`` as ``[K, N]``, the layout the graph's default schedule packs);
onnxruntime's ``MatMulInteger`` / ``QLinearConv`` (its NCHW int8 kernels; QLinearConv
includes its requantize) once. The untuned kernels are timed in interleaved rounds (best of
``--rounds``), so that their ratios hold on a shared machine; the load average before and
after is recorded. Each result is checked against numpy (integers equal). Prints a table
and writes ``benchmarks/results/int8.json``::

    python benchmarks/int8.py --trials 64
    python benchmarks/int8.py --workloads dense --trials 0     # untuned only
    python benchmarks/int8.py --trials 0 --targets host,haswell

Workload ``resnet18`` is a whole model: a ResNet-18 defined in code
(:func:`metaschedule.testing.models.resnet18`, ``--image`` pixels square), exported by
``torch.onnx.export`` and quantized by onnxruntime's ``quantize_static`` (QDQ, per-channel
s8 weights, u8 activations, random calibration batches). It times our compiled quantized
model (untuned: the graph's default schedules), onnxruntime on the same quantized model,
our compiled float32 model (untuned) and onnxruntime's float32, in interleaved rounds,
and checks our logits against onnxruntime's (within one quantization step)::

    python benchmarks/int8.py --workloads resnet18 --image 224
    python benchmarks/int8.py --workloads resnet18 --tune-model --trials 64 --work-dir WD

``--tune-model`` also tunes the quantized model (``tune_relax``, ``--trials`` per task; a
``--work-dir`` resumes). ``--tvm`` also tunes ``dense`` and ``conv2d`` with TVM
MetaSchedule 0.27, its own auto-tensorization where the target has VNNI or AVX512-BW
(``tvm_int8.py``), timed in interleaved rounds with our tuned kernels and onnxruntime::

    python benchmarks/int8.py --workloads dense,conv2d --trials 64 --targets host --tvm

A benchmark, not a test: no number here is asserted.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # the benchmarks' shared helpers, beside this file  # noqa: E402

RNG = np.random.default_rng(0)


def _workload(name: str, dtype: str):
    """(PrimFunc, inputs, numpy reference, ops) of workload ``name`` in ``dtype``."""
    import metaschedule as ms

    te, ops = ms.te, ms.te.ops
    int8 = dtype == "int8"
    if name == "dense":
        x = te.placeholder((1024, 1024), "uint8" if int8 else "float32", name="X")
        w = te.placeholder((1024, 1024), "int8" if int8 else "float32", name="W")
        # float32: X @ W with W [K, N] (an ONNX MatMul; the form the default schedule packs)
        out = ops.quantized_dense(x, w) if int8 else ops.matmul(x, w)
        xv = RNG.integers(0, 256, x.shape).astype(x.dtype)
        wv = RNG.integers(-128, 128, w.shape).astype(w.dtype)
        big = np.int64 if int8 else np.float64
        ref = xv.astype(big) @ (wv.T if int8 else wv).astype(big)
        flops = 2 * 1024**3
    else:
        x = te.placeholder((1, 56, 56, 64), "uint8" if int8 else "float32", name="X")
        w = te.placeholder((3, 3, 64, 64), "int8" if int8 else "float32", name="W")
        out = (
            ops.quantized_conv2d_nhwc(x, w, padding=1) if int8 else ops.conv2d_nhwc(x, w, padding=1)
        )
        xv = RNG.integers(0, 256, x.shape).astype(x.dtype)
        wv = RNG.integers(-128, 128, w.shape).astype(w.dtype)
        xp = np.pad(xv.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
        ref = sum(
            np.einsum(
                "nhwc,cf->nhwf", xp[:, ky : ky + 56, kx : kx + 56], wv[ky, kx].astype(np.int64)
            )
            for ky in range(3)
            for kx in range(3)
        )
        flops = 2 * 56 * 56 * 64 * 64 * 9
    func = te.create_prim_func([x, w, out])
    return func, [xv, wv], ref, flops, out


def _time_lib(lib, args, out) -> float:
    ev = lib.time_evaluator(lib.entry_name, number=1, repeat=3, min_repeat_ms=100)
    with common.measurement_lock():
        lib(*args, out)
        return min(ev(*args, out).results)


def _built(sch, args, ref, out_t, target: str):
    """(timer, ok) of a schedule: a callable timing one run, and whether it equals numpy."""
    from metaschedule.codegen import build

    lib = build(sch.mod, target)
    out = np.zeros(out_t.shape, out_t.dtype)
    packed = list(lib.pack_weights(*args, out)[:-1])
    lib(*packed, out)
    ok = bool(np.allclose(out, ref, rtol=1e-3, atol=1e-2))
    return (lambda: _time_lib(lib, packed, out)), ok


def _untuned(func, args, ref, out_t, target: str) -> tuple[Any, bool, str]:
    """Our default schedule: (timer, ok, the tensor intrinsic it calls or "")."""
    import metaschedule as ms

    sch = ms.graph.default_schedule(func, target)
    timer, ok = _built(sch, args, ref, out_t, target)
    text = str(sch.mod["main"])
    intrin = next((n for n in ms.tir.TensorIntrin.names() if f"ms_{n}(" in text), "")
    return timer, ok, intrin


def _tuned(func, args, ref, out_t, target: str, trials: int) -> dict[str, Any]:
    import metaschedule as ms

    with tempfile.TemporaryDirectory() as work:
        db = ms.tune_tir(func, target, work, trials, num_trials_per_iter=min(trials, 32))
        sch = ms.tir_integration.compile_tir(db, func, target)
    timer, ok = _built(sch, args, ref, out_t, target)
    return {"tuned_ok": ok}, timer


def _tvm(name, args, ref, target: str, trials: int, cores: int) -> tuple[dict[str, Any], Any]:
    """TVM's tuned int8 kernel (:mod:`tvm_int8`): (what it found, a timer or None)."""
    import tvm_int8  # beside this file

    mcpu = next((w.split("=", 1)[1] for w in target.split() if w.startswith("-mcpu=")), None)
    work = tempfile.mkdtemp(prefix=f"tvm-int8-{name}-")
    found = tvm_int8.tune(name, args, ref, mcpu, trials, cores, work)
    if "library" not in found:
        print(f"TVM {name} {target}: {found.get('error')}", file=sys.stderr)
        return found, None
    if not found.get("ok"):  # AVX512-BW pairs saturate in int16, as TVM documents
        print(f"TVM {name} {target}: not equal to numpy ({found.get('intrin')})", file=sys.stderr)
    return found, tvm_int8.timer(found, work, cores)


def _target(name: str, cores: int) -> str:
    base = f"llvm -num-cores={cores}"
    return base if name == "host" else f"{base} -mcpu={name}"


def _isa(target: str) -> str:
    from metaschedule.codegen import isa_of
    from metaschedule.target import Target

    isa = isa_of(Target(target))
    dots = [x for x in ("avx512vnni", "avxvnni", "avx512bw", "avx2", "dotprod") if isa.has(x)]
    return f"{isa.cpu} ({isa.name}: {'+'.join(dots)})"


def _onnxruntime(name: str, args, threads: int) -> float | None:
    ort, _ = common.optional_import("onnxruntime")
    if ort is None:
        return None
    from onnx import TensorProto, helper, numpy_helper

    xv, wv = args
    if name == "dense":
        inits = [numpy_helper.from_array(np.ascontiguousarray(wv.T), "w")]
        node = helper.make_node("MatMulInteger", ["x", "w"], ["y"])
        feed = {"x": xv}
        shape, y_type = list(xv.shape), TensorProto.INT32
    else:
        xs = np.ascontiguousarray(xv.transpose(0, 3, 1, 2))
        f32 = np.float32
        inits = [
            numpy_helper.from_array(np.ascontiguousarray(wv.transpose(3, 2, 0, 1)), "w"),
            numpy_helper.from_array(f32(0.02), "s"),
            numpy_helper.from_array(np.uint8(0), "zu"),
            numpy_helper.from_array(np.int8(0), "zw"),
        ]
        node = helper.make_node(
            "QLinearConv", ["x", "s", "zu", "w", "s", "zw", "s", "zu"], ["y"], pads=[1, 1, 1, 1]
        )
        feed = {"x": xs}
        shape, y_type = list(xs.shape), TensorProto.UINT8
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, shape)],
        [helper.make_tensor_value_info("y", y_type, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return min(common.time_python(lambda: sess.run(None, feed)))


def _resnet18_models(work: str, image: int) -> tuple[str, str, tuple]:
    """(float32 path, quantized path, input shape) of ResNet-18 at ``image`` pixels."""
    import warnings

    import onnx  # noqa: F401  (torch.onnx.export needs it)
    import torch
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    from metaschedule.testing import models

    module, shape = models.resnet18(torch, image=image)
    fp32, int8 = os.path.join(work, "resnet18.onnx"), os.path.join(work, "resnet18_int8.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module, (torch.zeros(shape),), fp32, opset_version=17, input_names=["x"],
            output_names=["y"], dynamo=False,
        )  # fmt: skip

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter({"x": RNG.standard_normal(shape).astype(np.float32)} for _ in range(4))

        def get_next(self):
            return next(self.it, None)

    quantize_static(
        fp32, int8, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
    )  # fmt: skip
    return fp32, int8, shape


def _tuned_model(mod, target: str, trials: int, work_dir: str | None, entry: dict) -> Any:
    """``mod`` tuned with ``trials`` per task (``tune_relax``), compiled: a runner of it;
    ``entry["ours int8 tuned"]`` gets the tasks, tuning and compile seconds."""
    import time

    import metaschedule as ms

    ri = ms.relax_integration
    work = work_dir or tempfile.mkdtemp(prefix="ms-int8-resnet18-")
    tasks = ri.extract_tasks(mod, target)
    start = time.perf_counter()
    db = ri.tune_relax(
        mod,
        None,
        target,
        work,
        max_trials_global=trials * len(tasks),
        max_trials_per_task=trials,
        num_trials_per_iter=min(trials, 64),
    )
    tuned = time.perf_counter()
    exe = ri.compile_relax(db, mod, target, None)
    entry["ours int8 tuned"] = {
        "tasks": len(tasks),
        "trials_per_task": trials,
        "tune_secs": tuned - start,
        "compile_secs": time.perf_counter() - tuned,
        "work_dir": work,
    }
    return functools.partial(lambda e, x: e(x=x), exe)


def _resnet18(
    image: int, rounds: int, cores: int, trials: int = 0, work_dir: str | None = None
) -> tuple[dict[str, Any], list[list]]:
    """Ours (int8, fp32, untuned; int8 tuned with ``trials`` per task when given, records
    kept in ``work_dir`` to resume) against onnxruntime (int8, fp32) on ResNet-18."""
    import time

    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    import metaschedule as ms

    target = _target("host", cores)
    entry: dict[str, Any] = {"image": image, "target": target, "isa": _isa(target)}
    with tempfile.TemporaryDirectory() as work:
        fp32, int8, shape = _resnet18_models(work, image)
        y_scale = float(
            next(
                numpy_helper.to_array(i)
                for i in onnx.load(int8).graph.initializer
                if i.name.startswith("y_scale")
            )
        )
        runs: dict[str, Any] = {}
        for key, path in (("ours int8", int8), ("ours fp32", fp32)):
            start = time.perf_counter()
            mod = ms.graph.from_onnx(path)
            exe = ms.relax_integration.compile_relax(
                ms.Database.create("memory"), mod, target, None
            )
            entry[key] = {"compile_secs": time.perf_counter() - start}
            runs[key] = functools.partial(lambda e, x: e(x=x), exe)
            if key == "ours int8" and trials:
                runs["ours int8 tuned"] = _tuned_model(mod, target, trials, work_dir, entry)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = cores
        for key, path in (("onnxruntime int8", int8), ("onnxruntime fp32", fp32)):
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            runs[key] = functools.partial(lambda s, x: s.run(None, {"x": x})[0], sess)
            entry[key] = {}
    x = RNG.standard_normal(shape).astype(np.float32)
    outs = {key: np.asarray(run(x)).reshape(-1) for key, run in runs.items()}
    entry["ours int8"]["max_diff_steps"] = float(
        np.abs(outs["ours int8"] - outs["onnxruntime int8"]).max() / y_scale
    )
    if "ours int8 tuned" in outs:
        entry["ours int8 tuned"]["max_diff_steps"] = float(
            np.abs(outs["ours int8 tuned"] - outs["onnxruntime int8"]).max() / y_scale
        )
    entry["ours fp32"]["max_rel_diff"] = float(
        np.abs(outs["ours fp32"] - outs["onnxruntime fp32"]).max()
        / np.abs(outs["onnxruntime fp32"]).max()
    )
    load_before = os.getloadavg()
    best: dict[str, float] = {}
    for _ in range(rounds):  # interleaved: each model once per round
        for key, run in runs.items():
            secs = min(common.time_python(functools.partial(run, x), repeat=3))
            best[key] = min(best.get(key, secs), secs)
    entry["loadavg"] = [list(load_before), list(os.getloadavg())]
    for key, secs in best.items():
        entry[key]["secs"] = secs
    rows = []
    for key in runs:
        secs = best[key]
        rows.append(
            [
                f"resnet18 {image}x{image}",
                key,
                secs * 1e3,
                best["ours fp32"] / secs,
                best["onnxruntime int8"] / secs,
                best["ours int8"] / secs,
            ]
        )
    return entry, rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default="dense,conv2d")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--targets", default="host,haswell", help="host and/or -mcpu names")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    p.add_argument("--cores", type=int, default=None, help="threads (default: all cores)")
    p.add_argument("--json", default=None)
    p.add_argument("--image", type=int, default=224, help="resnet18's input size")
    p.add_argument(
        "--tune-model",
        action="store_true",
        help="resnet18: also tune the quantized model (--trials per task, tune_relax)",
    )
    p.add_argument("--work-dir", default=None, help="resnet18 tuning records (resumable)")
    p.add_argument(
        "--tvm",
        action="store_true",
        help="also tune the int8 kernels with TVM MetaSchedule (apache-tvm), same trials, "
        "its VNNI/AVX512 auto-tensorization where the target has it (tvm_int8.py)",
    )
    a = p.parse_args()
    info = common.machine_info()
    cores = a.cores or int(info.get("physical_cores") or os.cpu_count() or 1)
    targets = [_target(t, cores) for t in a.targets.split(",")]
    payload: dict[str, Any] = {
        "machine": info,
        "targets": {t: _isa(t) for t in targets},
        "cores": cores,
        "trials": a.trials,
        "results": {},
    }
    rows = []
    names = a.workloads.split(",")
    model_rows = []
    if "resnet18" in names:
        names.remove("resnet18")
        payload["results"]["resnet18"], model_rows = _resnet18(
            a.image, a.rounds, cores, a.trials if a.tune_model else 0, a.work_dir
        )
    for name in names:
        timers: dict[str, Any] = {}
        entry: dict[str, Any] = {}
        cases = {dtype: _workload(name, dtype) for dtype in ("int8", "float32")}
        for target in targets:
            for dtype, (func, args, ref, _, out_t) in cases.items():
                timer, ok, intrin = _untuned(func, args, ref, out_t, target)
                key = f"{target} {dtype}"
                timers[key] = timer
                entry[key] = {"untuned_ok": ok, "intrin": intrin, "isa": _isa(target)}
        ort_args = cases["int8"][1]
        timers["onnxruntime"] = functools.partial(_onnxruntime, name, ort_args, cores)
        load_before = os.getloadavg()
        best: dict[str, float] = {}
        for _ in range(a.rounds):  # interleaved: each kernel once per round
            for key, timer in timers.items():
                secs = timer()
                if secs is not None:
                    best[key] = min(best.get(key, secs), secs)
        entry["loadavg"] = [list(load_before), list(os.getloadavg())]
        entry["onnxruntime_secs"] = best.get("onnxruntime")
        for key in timers:
            if key != "onnxruntime":
                entry[key]["untuned_secs"] = best.get(key)
        if a.trials:
            tuned: dict[str, Any] = {"onnxruntime": timers["onnxruntime"]}
            for target in targets:
                for dtype, (func, args, ref, _, out_t) in cases.items():
                    key = f"{target} {dtype}"
                    found, tuned[key] = _tuned(func, args, ref, out_t, target, a.trials)
                    entry[key].update(found)
                if a.tvm:
                    _, args, ref, _, _ = cases["int8"]
                    key = f"{target} int8"
                    found, tvm_timer = _tvm(name, args, ref, target, a.trials, cores)
                    entry[key]["tvm"] = found
                    if tvm_timer is not None:
                        tuned[f"{key} tvm"] = tvm_timer
            best = {}
            for _ in range(a.rounds):  # interleaved again: the tuned kernels
                for key, timer in tuned.items():
                    secs = timer()
                    if secs is not None:
                        best[key] = min(best.get(key, secs), secs)
            entry["onnxruntime_tuned_round_secs"] = best.get("onnxruntime")
            for key in tuned:
                if key in entry:
                    entry[key]["tuned_secs"] = best.get(key)
                    if f"{key} tvm" in best:
                        entry[key]["tvm"]["secs"] = best[f"{key} tvm"]
        flops = cases["int8"][3]
        entry["ops"] = flops
        payload["results"][name] = entry
        ort = entry["onnxruntime_secs"]
        for target in targets:
            i8, f32 = entry[f"{target} int8"], entry[f"{target} float32"]
            for label, secs, extra in (
                ("int8 untuned", i8["untuned_secs"], i8["intrin"] or "vector"),
                ("int8 tuned", i8.get("tuned_secs"), ""),
                (
                    "int8 TVM tuned",
                    i8.get("tvm", {}).get("secs"),
                    i8.get("tvm", {}).get("intrin", "")
                    + ("" if i8.get("tvm", {}).get("ok", True) else " (inexact)"),
                ),
                ("fp32 untuned", f32["untuned_secs"], ""),
                ("fp32 tuned", f32.get("tuned_secs"), ""),
            ):
                # int8 against our fp32 kernel of the same tuning (tuned against tuned)
                fp32 = f32.get("tuned_secs") if "tuned" in label.split()[-1:] else None
                fp32 = fp32 or f32["untuned_secs"]
                ratio = fp32 / secs if secs and "int8" in label else None
                rows.append(_row(name, _isa(target), label, extra, secs, flops, ratio, ort))
        rows.append(_row(name, "onnxruntime (host)", "int8", "", ort, flops, None, ort))
    load = [round(x, 2) for x in os.getloadavg()]
    print(f"{info['cpu_model']}, {cores} threads, load average {load}")
    if rows:
        common.print_table(
            "int8 kernels",
            ["workload", "ISA", "kernel", "how", "ms", "GOPS", "vs fp32", "vs ort"],
            rows,
        )
    if model_rows:
        entry = payload["results"]["resnet18"]
        print(f"{entry['isa']}; ours int8 vs onnxruntime int8: "
              f"{entry['ours int8']['max_diff_steps']:.0f} quantization steps apart")  # fmt: skip
        common.print_table(
            "ResNet-18 (ours untuned): each row's speed-up over the column's runtime",
            ["model", "runtime", "ms", "x ours fp32", "x ort int8", "x ours int8"],
            model_rows,
        )
    print("wrote", common.write_json("int8", payload, a.json))


def _row(name, isa, label, extra, secs, flops, ratio, ort) -> list:
    gops = flops / secs / 1e9 if secs else None
    vs_ort = ort / secs if secs and ort else None
    ms_ = None if secs is None else secs * 1e3
    return [name, isa, label, extra, ms_, gops, ratio, vs_ort]


if __name__ == "__main__":
    main()
