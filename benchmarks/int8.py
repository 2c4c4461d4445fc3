"""int8 kernels against onnxruntime's and against our own float32 on the same shape.

Workloads: ``dense`` (u8 ``X[1024, 1024]`` x s8 ``W[1024, 1024]`` -> s32, ``X @ W.T``) and
``conv2d`` (u8 1x56x56x64 NHWC, s8 3x3x64x64 HWIO, pad 1 -> s32). For each: our untuned
function (the graph's default schedule), our tuned one (``ms.tune_tir``, ``--trials``),
onnxruntime's ``MatMulInteger`` / ``QLinearConv`` (its NCHW int8 kernels; QLinearConv
includes its requantize), and our float32 kernel of the same shape, untuned and tuned.
Each result is checked against numpy (integers equal). Prints a table and writes
``benchmarks/results/int8.json``::

    python benchmarks/int8.py --trials 64
    python benchmarks/int8.py --workloads dense --trials 0     # untuned only

A benchmark, not a test: no number here is asserted.
"""

from __future__ import annotations

import argparse
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
        out = ops.quantized_dense(x, w) if int8 else ops.dense(x, w)
        xv = RNG.integers(0, 256, x.shape).astype(x.dtype)
        wv = RNG.integers(-128, 128, w.shape).astype(w.dtype)
        ref = xv.astype(np.int64 if int8 else np.float64) @ wv.T.astype(
            np.float64 if not int8 else np.int64
        )
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


def _ours(func, args, ref, out_t, target: str, trials: int) -> dict[str, Any]:
    """Untuned (default schedule) and tuned seconds, each checked against numpy."""
    import metaschedule as ms
    from metaschedule.codegen import build

    res: dict[str, Any] = {}
    out = np.zeros(out_t.shape, out_t.dtype)
    sch = ms.graph.default_schedule(func, target)
    lib = build(sch.mod, target)
    packed = list(lib.pack_weights(*args, out)[:-1])
    lib(*packed, out)
    res["untuned_ok"] = bool(np.allclose(out, ref, rtol=1e-3, atol=1e-2))
    res["untuned_secs"] = _time_lib(lib, packed, out)
    if trials:
        with tempfile.TemporaryDirectory() as work:
            db = ms.tune_tir(func, target, work, trials, num_trials_per_iter=min(trials, 32))
            sch = ms.tir_integration.compile_tir(db, func, target)
        lib = build(sch.mod, target)
        out = np.zeros(out_t.shape, out_t.dtype)
        packed = list(lib.pack_weights(*args, out)[:-1])
        lib(*packed, out)
        res["tuned_ok"] = bool(np.allclose(out, ref, rtol=1e-3, atol=1e-2))
        res["tuned_secs"] = _time_lib(lib, packed, out)
    return res


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default="dense,conv2d")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--target", default=None, help="default: llvm with the host's cores")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    info = common.machine_info()
    cores = int(info.get("cores") or os.cpu_count() or 1)
    target = a.target or f"llvm -num-cores={cores}"
    rows, payload = [], {"machine": info, "target": target, "trials": a.trials, "results": {}}
    for name in a.workloads.split(","):
        entry: dict[str, Any] = {}
        for dtype in ("int8", "float32"):
            func, args, ref, flops, out_t = _workload(name, dtype)
            entry[dtype] = _ours(func, args, ref, out_t, target, a.trials)
            if dtype == "int8":
                entry["onnxruntime_secs"] = _onnxruntime(name, args, cores)
        entry["ops"] = flops
        payload["results"][name] = entry
        for label, secs in (
            ("ours int8 untuned", entry["int8"].get("untuned_secs")),
            ("ours int8 tuned", entry["int8"].get("tuned_secs")),
            ("onnxruntime int8", entry.get("onnxruntime_secs")),
            ("ours fp32 untuned", entry["float32"].get("untuned_secs")),
            ("ours fp32 tuned", entry["float32"].get("tuned_secs")),
        ):
            gops = flops / secs / 1e9 if secs else None
            rows.append([name, label, None if secs is None else secs * 1e3, gops])
    common.print_table("int8 kernels", ["workload", "kernel", "ms", "GOPS"], rows)
    print("wrote", common.write_json("int8", payload, a.json))


if __name__ == "__main__":
    main()
