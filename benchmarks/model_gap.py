"""Per-task gap between our compiled model and onnxruntime, from both profiles.

Ours: :meth:`Executable.profile` (the time of every kernel call). Onnxruntime: its
profiler (``SessionOptions.enable_profiling``), one ``<node>_kernel_time`` event per
node per run, with the input and output shapes. Convolutions are matched by a
layout-free key (input and output element counts, the weight's dimensions sorted, and
whether a residual of the output's size is added in the epilogue), the other work by
kind (max pooling, global pooling, dense, layout changes); each row sums every call of
its key on both sides. Both profiles are taken in alternating runs (``number`` each), per
step/node the fastest run: on a shared machine the minimum is the figure least inflated
by other work (a quiet machine's), the median the typical one under the load.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

_ORT_KIND = {
    "MaxPool": "max pooling",
    "GlobalAveragePool": "global pooling",
    "Gemm": "dense",
    "MatMul": "dense",
    "FusedGemm": "dense",
    "ReorderInput": "layout",
    "ReorderOutput": "layout",
    "Transpose": "layout",
}
_OUR_KIND = {
    "max_pool2d": "max pooling",
    "global_avg_pool2d": "global pooling",
    "matmul": "dense",
    "dense": "dense",
    "transpose": "layout",
}


def _numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def conv_key(x_shape, w_shape, out_shape, extra_shapes) -> tuple:
    """The layout-free key of a convolution (see the module docstring)."""
    out = _numel(out_shape)
    residual = any(_numel(s) == out for s in extra_shapes)
    return ("conv", _numel(x_shape), out, tuple(sorted(int(d) for d in w_shape)), residual)


def conv_label(x_nchw, w_oihw, out_nchw, residual: bool) -> str:
    """``conv 3x3 64->128 /2 28x28 +res`` from NCHW/OIHW shapes."""
    stride = max(1, round(x_nchw[2] / out_nchw[2]))
    return (
        f"conv {w_oihw[2]}x{w_oihw[3]} {x_nchw[1]}->{w_oihw[0]}"
        f"{f' /{stride}' if stride > 1 else ''} {out_nchw[2]}x{out_nchw[3]}"
        f"{' +res' if residual else ''}"
    )


def our_keys(exe) -> list[tuple | None]:
    """Per step of ``exe`` its key (None for zero-copy reshapes)."""
    keys: list[tuple | None] = []
    for s in exe.steps:
        if s.func is None:
            keys.append(None)
            continue
        if s.ops[0] == "conv2d":
            w = s.args[1].split("@")[0]
            w_shape = exe.types[w].shape if w in exe.types else exe.constants[s.args[1]].shape
            out = exe.types[s.out].shape
            extra = [exe.types[a.split("@")[0]].shape for a in s.args[2:]]
            if s.ops.count("add") > sum(_numel(e) != _numel(out) for e in extra):
                extra.append(out)  # a residual that is the convolution's own input
            keys.append(conv_key(exe.types[s.args[0]].shape, w_shape, out, extra))
        else:
            keys.append(("op", _OUR_KIND.get(s.ops[0], f"other: {s.func}")))
    return keys


def _ort_node(event: dict) -> tuple[tuple, str]:
    a = event["args"]
    ins = [next(iter(d.values())) for d in a.get("input_type_shape", [])]
    outs = [next(iter(d.values())) for d in a.get("output_type_shape", [])]
    op = a.get("op_name", "?")
    if op in ("Conv", "FusedConv") and len(ins) >= 2 and outs:
        key = conv_key(ins[0], ins[1], outs[0], ins[2:])
        return key, conv_label(ins[0], ins[1], outs[0], key[-1])
    kind = _ORT_KIND.get(op, f"other: {op}")
    return ("op", kind), kind


def ort_profile(path: str) -> tuple[dict[str, list[float]], dict[str, dict], list[float]]:
    """From an onnxruntime profile: per node its kernel times (ms, in run order), its
    first event, and the whole runs' times (ms)."""
    with open(path) as f:
        events = json.load(f)
    times: dict[str, list[float]] = {}
    first: dict[str, dict] = {}
    runs = []
    for e in events:
        if e.get("cat") == "Session" and e.get("name") == "model_run":
            runs.append(e["dur"] / 1e3)
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        times.setdefault(e["name"], []).append(e["dur"] / 1e3)
        first.setdefault(e["name"], e)
    return times, first, runs


def gap_table(
    exe,
    model_bytes: bytes,
    inputs: dict[str, np.ndarray],
    ort,
    options: Callable[[str], Any],
    *,
    number: int = 20,
) -> dict[str, Any]:
    """Per key our time and onnxruntime's (ms per run), the gap and the ratio.

    ``options(prefix)`` makes the onnxruntime ``SessionOptions`` (profiling on, files
    under ``prefix``). Returns ``{"rows": [...], "ours_total_ms", "ort_total_ms",
    "ort_run_ms"}``, the rows the largest gap first.
    """
    tmp = tempfile.mkdtemp(prefix="ms-gap-")
    sess = ort.InferenceSession(
        model_bytes, options(os.path.join(tmp, "ort")), providers=["CPUExecutionProvider"]
    )
    sess.run(None, inputs)
    ours_runs = []
    for _ in range(number):  # one run each, alternating
        ours_runs.append([r.mean_ms for r in exe.profile(number=1, **inputs)])
        sess.run(None, inputs)
    path = sess.end_profiling()
    node_times, first, runs = ort_profile(path)
    ours = np.min(np.array(ours_runs), axis=0)

    rows: dict[tuple, dict[str, Any]] = {}

    def row(key: tuple, label: str) -> dict[str, Any]:
        return rows.setdefault(
            key,
            {"key": label, "ours_ms": 0.0, "ort_ms": 0.0, "our_funcs": [], "calls": 0, "nodes": 0},
        )

    for key, step, ms in zip(our_keys(exe), exe.steps, ours):
        if key is None:
            continue
        r = row(key, step.func if key[0] == "conv" else key[1])
        r["ours_ms"] += float(ms)
        r["calls"] += 1
        if step.func not in r["our_funcs"]:
            r["our_funcs"].append(step.func)
    for name, ts in node_times.items():
        key, label = _ort_node(first[name])
        r = row(key, label)
        if key[0] == "conv":
            r["key"] = label  # onnxruntime's shapes name the convolution best
        r["ort_ms"] += float(np.min(ts[1:] if len(ts) > 1 else ts))
        r["nodes"] += 1
    out = sorted(rows.values(), key=lambda r: -(r["ours_ms"] - r["ort_ms"]))
    for r in out:
        r["gap_ms"] = r["ours_ms"] - r["ort_ms"]
        r["ratio"] = r["ours_ms"] / r["ort_ms"] if r["ort_ms"] > 0 else None
    return {
        "rows": out,
        "ours_total_ms": float(ours.sum()),
        "ort_total_ms": sum(r["ort_ms"] for r in out),
        "ort_run_ms": float(np.min(runs[1:])) if len(runs) > 1 else None,
    }


def format_gap(gap: dict[str, Any]) -> str:
    """The gap table as text (largest gap first)."""
    lines = [
        f"{'work':<30} {'calls':>5} {'ours ms':>8} {'ORT ms':>8} {'gap ms':>8} {'ratio':>6}  tasks",
    ]
    for r in gap["rows"]:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        lines.append(
            f"{r['key'][:30]:<30} {max(r['calls'], r['nodes']):>5} {r['ours_ms']:>8.3f} "
            f"{r['ort_ms']:>8.3f} {r['gap_ms']:>+8.3f} {ratio:>6}  {', '.join(r['our_funcs'])}"
        )
    run = gap["ort_run_ms"]
    lines.append(
        f"{'total (kernels)':<30} {'':>5} {gap['ours_total_ms']:>8.3f} {gap['ort_total_ms']:>8.3f} "
        f"{gap['ours_total_ms'] - gap['ort_total_ms']:>+8.3f}"
        + (f"   (onnxruntime's whole run: {run:.3f} ms)" if run else "")
    )
    return "\n".join(lines)
